// What the fuzz targets in tests/fuzz share: reading the fuzzer's bytes as
// choices, the canary value, and the replay driver.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "attnkern.h"

namespace ak_fuzz {

// A value no kernel output can take: fills what a call must not write.
constexpr float kCanary = -7.25e33f;

inline bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

[[noreturn]] inline void fail(const char *target, const char *what, long long a = 0,
                              long long b = 0, double got = 0, double want = 0) {
  std::fprintf(stderr, "%s: %s (%lld, %lld): got %.9g, expected %.9g\n", target, what, a, b, got,
               want);
  std::abort();
}

// Reads the fuzzer's bytes as choices, front to back; once they run out,
// every choice is its lowest value. (libFuzzer's FuzzedDataProvider does
// the same, but lives in Clang's headers, and the replay builds with GCC.)
class Choices {
public:
  Choices(const std::uint8_t *p, std::size_t n) : p_(p), n_(n) {}
  std::uint32_t u32() {
    std::uint32_t x = 0;
    for (int i = 0; i < 4 && n_ > 0; ++i, ++p_, --n_) x = x << 8 | *p_;
    return x;
  }
  // An integer in [lo, hi], from as few bytes as the range needs.
  template <class T = std::int64_t> T in(std::int64_t lo, std::int64_t hi) {
    const std::uint64_t span = static_cast<std::uint64_t>(hi - lo);
    std::uint64_t x = 0;
    for (std::uint64_t s = span; s > 0 && n_ > 0; s >>= 8, ++p_, --n_) x = x << 8 | *p_;
    return static_cast<T>(lo + static_cast<std::int64_t>(span == 0 ? 0 : x % (span + 1)));
  }
  bool flag() { return in(0, 1) == 1; }
  float real(float lo, float hi) {
    return lo + (hi - lo) * static_cast<float>(in(0, 65535)) / 65535.0f;
  }

  // The instruction set (one the CPU lacks runs as scalar), then 1 or 2
  // threads: every target's first choices.
  const char *isa() {
    static const char *const kIsas[] = {"avx512", "avx2", "sse2", "neon", "scalar"};
    const char *name = kIsas[in<int>(0, 4)];
    return ak_isa_supported(name) ? name : "scalar";
  }
  int threads() { return in<int>(1, 2); }

private:
  const std::uint8_t *p_;
  std::size_t n_;
};

} // namespace ak_fuzz

#ifdef AK_FUZZ_STANDALONE
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *bytes, std::size_t size);
// Replays corpus files: one input per line, in hex ('#' starts a comment
// line). Each input runs as under libFuzzer; a failing one aborts.
int main(int argc, char **argv) {
  int inputs = 0;
  for (int a = 1; a < argc; ++a) {
    std::FILE *f = std::fopen(argv[a], "r");
    if (!f) {
      std::fprintf(stderr, "cannot open %s\n", argv[a]);
      return 2;
    }
    std::vector<std::uint8_t> bytes;
    int hi = -1;
    bool comment = false, at_line_start = true;
    for (int c; (c = std::fgetc(f)) != EOF;) {
      if (c == '\n') {
        if (!comment) LLVMFuzzerTestOneInput(bytes.data(), bytes.size()), ++inputs;
        bytes.clear(), hi = -1, comment = false, at_line_start = true;
        continue;
      }
      if (at_line_start && c == '#') comment = true;
      at_line_start = false;
      if (comment) continue;
      const int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
      if (v < 0) {
        std::fprintf(stderr, "%s: not a hex digit: '%c'\n", argv[a], c);
        return 2;
      }
      if (hi < 0)
        hi = v;
      else
        bytes.push_back(static_cast<std::uint8_t>(hi << 4 | v)), hi = -1;
    }
    std::fclose(f);
  }
  std::printf("replayed %d inputs\n", inputs);
  return inputs > 0 ? 0 : 2;
}
#endif
