// What the fuzz targets in tests/fuzz share: reading the fuzzer's bytes as
// choices, the canary value, and the replay driver.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
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
// Replays corpus files: one input per line, in lowercase hex; blank lines
// and lines starting with '#' are skipped (as scripts/fuzz.sh does when it
// seeds libFuzzer). Each input runs as under libFuzzer, its file and line
// named first, so that a failing one, which aborts, is found. A malformed
// line, a missing file or a file without inputs returns 2.
int main(int argc, char **argv) {
  for (int a = 1; a < argc; ++a) {
    std::FILE *f = std::fopen(argv[a], "r");
    if (!f) {
      std::fprintf(stderr, "cannot open %s\n", argv[a]);
      return 2;
    }
    int inputs = 0, line_no = 0;
    std::string line;
    for (int c = 0; c != EOF;) {
      line.clear();
      while ((c = std::fgetc(f)) != EOF && c != '\n') line.push_back(static_cast<char>(c));
      if (c == EOF && line.empty()) break;
      ++line_no;
      if (line.empty() || line[0] == '#') continue;
      std::vector<std::uint8_t> bytes;
      bool ok = line.size() % 2 == 0;
      for (std::size_t i = 0; ok && i < line.size(); i += 2) {
        const auto digit = [](char d) {
          return d >= '0' && d <= '9' ? d - '0' : d >= 'a' && d <= 'f' ? d - 'a' + 10 : -1;
        };
        const int hi = digit(line[i]), lo = digit(line[i + 1]);
        ok = hi >= 0 && lo >= 0;
        bytes.push_back(static_cast<std::uint8_t>(hi << 4 | lo));
      }
      if (!ok) {
        std::fprintf(stderr, "%s:%d: not an even number of lowercase hex digits\n", argv[a],
                     line_no);
        std::fclose(f);
        return 2;
      }
      std::fprintf(stderr, "%s:%d\r", argv[a], line_no); // overwritten by the next one
      LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
      ++inputs;
    }
    std::fclose(f);
    std::fprintf(stderr, "\n");
    std::printf("%s: replayed %d inputs\n", argv[a], inputs);
    if (inputs == 0) return 2;
  }
  return argc > 1 ? 0 : 2;
}
#endif
