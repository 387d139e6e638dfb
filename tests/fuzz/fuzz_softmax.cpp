// Coverage-guided differential fuzzing of ak_softmax, ak_log_softmax and
// ak_softmax_axis (libFuzzer).
//
// Each input picks the function, the shape (short and long rows, short and
// long axes), the leading dimensions, in place or not, the scale of the
// normal data (unit scale, where docs/design.md's 2e-7 applies, or wide), -inf
// entries (masking), a few special values (NaN, +inf, -inf, +-3e38, a
// subnormal), the instruction set and the thread count. The call must then:
// - for a shape the generator made invalid on purpose (a negative size, a
//   leading dimension below the row): return an error with a message, and
//   write nothing;
// - otherwise: return AK_OK, agree with the float64 reference
//   (tests/reference.cpp) within tests/test_softmax.cpp's bounds, leave
//   the padding and (out of place) the input untouched, and give the same
//   bits on the other thread count.
// A disagreement aborts, so that libFuzzer keeps the input.
// (The library runs small problems on one thread whatever the setting, so
// the thread-count comparison bites only on the larger inputs: about one
// in ten of the committed attention inputs, one in three of the softmax
// and sgemm ones.)
// Build and run: scripts/fuzz.sh; replayed by ctest from
// tests/fuzz/corpus/softmax.txt.
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "attnkern.h"
#include "fuzz/fuzz_support.hpp"
#include "reference.hpp"

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr double kEps = std::numeric_limits<float>::epsilon();
constexpr double kDenormMin = std::numeric_limits<float>::denorm_min();
using ak_fuzz::kCanary;

[[noreturn]] void fail(const char *what, long long a = 0, long long b = 0, double got = 0,
                       double want = 0) {
  ak_fuzz::fail("fuzz_softmax", what, a, b, got, want);
}

// One result against its reference value, with tests/test_softmax.cpp's
// bounds: a weight within rel of it (2e-7 on unit-scale inputs, else 3
// ulp), plus two of the smallest subnormal where the weight is below the
// normal range, and exactly 0 where it is 0; a log-softmax entry within 2
// ulp of |x| + |m| + log s.
bool close(double got, double want, bool log, double rel, double log_scale) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  if (log) {
    // Past FLT_MAX (x = -3e38 in a row whose maximum is 3e38) the float
    // result is -inf.
    if (std::fabs(want) > std::numeric_limits<float>::max() && std::isinf(got) &&
        (got < 0) == (want < 0))
      return true;
    return std::fabs(got - want) <= 2 * kEps * log_scale;
  }
  if (want == 0) return got == 0; // a -inf entry, or one 1e-308 below the others
  const double slack = want < std::numeric_limits<float>::min() ? 2 * kDenormMin : 0.0;
  return std::fabs(got - want) <= rel * want + slack;
}

// |x| + |m| + log s of an entry of a row or column (the log bound's scale).
struct LogScale {
  double m = -INFINITY, s = 0;
  template <class Get> LogScale(std::int64_t n, Get x) {
    for (std::int64_t j = 0; j < n; ++j) m = std::fmax(m, x(j));
    for (std::int64_t j = 0; j < n; ++j) s += std::isfinite(m) ? std::exp(x(j) - m) : 0.0;
  }
  double of(double x) const { return std::fabs(x) + std::fabs(m) + std::log(s); }
};

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *bytes, std::size_t size) {
  ak_fuzz::Choices in(bytes, size);
  const char *isa = in.isa();
  const int threads = in.threads();
  const int fn = in.in<int>(0, 2); // softmax, log-softmax, softmax_axis
  const bool log = fn == 1;

  // Rows x cols with leading dimensions (rows), or [outer, axis, inner].
  bool invalid = false;
  std::int64_t rows = 0, cols = 0, ldx = 0, ldy = 0, outer = 0, axis = 0, inner = 0;
  const int size_class = in.in<int>(0, 3);
  if (fn < 2) {
    rows = size_class == 3 ? in.in(1, 3) : in.in(0, 40);
    cols = size_class == 3 ? in.in(1000, 5000) : in.in(0, size_class == 0 ? 40 : 300);
    const std::int64_t min_ld = cols > 1 ? cols : 1; // (as the API requires)
    ldx = min_ld + in.in(0, 20);
    ldy = min_ld + in.in(0, 20);
    if (in.in<int>(0, 31) == 0) ldx = min_ld - 1, invalid = true;
    if (in.in<int>(0, 63) == 0) rows = -1 - in.in(0, 3), invalid = true;
  } else {
    outer = in.in(0, 3);
    axis = size_class == 3 ? in.in(1000, 3000) : in.in(0, size_class == 0 ? 40 : 300);
    inner = size_class == 3 ? in.in(1, 20) : in.in(0, 70);
    if (in.in<int>(0, 63) == 0) inner = -1 - in.in(0, 3), invalid = true;
  }
  const bool in_place = in.flag();
  if (in_place) ldy = ldx;
  // The buffers: a row stride's padding and a tail past the end hold canaries.
  const std::int64_t kTail = 4;
  const std::int64_t n_x = invalid  ? 64
                           : fn < 2 ? rows * ldx + kTail
                                    : outer * axis * inner + kTail;
  const std::int64_t n_y = invalid ? 64 : fn < 2 ? rows * ldy + kTail : n_x;
  auto is_entry = [&](std::int64_t e, std::int64_t ld) {
    if (fn == 2) return e < outer * axis * inner;
    return e < rows * ld && e % ld < cols;
  };

  const float scale = std::vector<float>{1.0f, 4.0f, 30.0f}[in.in<int>(0, 2)];
  const bool unit_scale = scale == 1.0f;
  std::mt19937 rng(in.u32());
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> x(static_cast<std::size_t>(n_x), kCanary);
  const bool masked = in.flag();
  for (std::int64_t e = 0; e < n_x; ++e)
    if (!invalid && is_entry(e, ldx)) x[e] = masked && (rng() & 7) == 0 ? -kInf : normal(rng);
  const int n_special = in.in<int>(0, 3);
  bool special = false;
  for (int s = 0; s < n_special && n_x > kTail; ++s) {
    static const float kValues[] = {
        std::numeric_limits<float>::quiet_NaN(), kInf, -kInf, 3e38f, -3e38f, 1e-40f};
    const float value = kValues[in.in<int>(0, 5)];
    const std::int64_t e =
        static_cast<std::int64_t>(in.u32() % static_cast<std::uint32_t>(n_x - kTail));
    if (is_entry(e, ldx)) x[e] = value, special = true;
  }
  // 3e38 among moderate values leaves the others' weights at 0 and its own
  // at 1, which the 3-ulp bound covers; unit scale is docs/design.md's case only
  // without such values.
  const double rel = unit_scale && !special ? 2e-7 : 3 * kEps;

  const std::vector<float> x0 = x;
  std::vector<float> y_buf(static_cast<std::size_t>(n_y), kCanary);
  float *y = in_place ? x.data() : y_buf.data();

  if (ak_set_isa(isa) != AK_OK) fail("ak_set_isa");
  auto call = [&](float *out) {
    if (fn == 0) return ak_softmax(rows, cols, x.data(), ldx, out, ldy);
    if (fn == 1) return ak_log_softmax(rows, cols, x.data(), ldx, out, ldy);
    return ak_softmax_axis(outer, axis, inner, x.data(), out);
  };
  ak_set_num_threads(threads);
  const ak_status st = call(y);
  if (invalid) {
    if (st == AK_OK) fail("an invalid shape was accepted", fn);
    if (std::string(ak_last_error()).empty()) fail("an error without a message");
    for (std::int64_t e = 0; e < n_y; ++e)
      if (!ak_fuzz::same_bits(y[e], in_place ? x0[e] : kCanary)) fail("written on error", e);
    return 0;
  }
  if (st != AK_OK) {
    std::fprintf(stderr, "%s\n", ak_last_error());
    fail("a valid shape was refused", fn, st);
  }

  if (fn < 2) {
    for (std::int64_t r = 0; r < rows; ++r) {
      const float *xr = x0.data() + r * ldx;
      const std::vector<double> ref = ak_test::ref_softmax_row(xr, cols, log);
      const LogScale ls(cols, [&](std::int64_t j) { return static_cast<double>(xr[j]); });
      for (std::int64_t j = 0; j < cols; ++j)
        if (!close(y[r * ldy + j], ref[j], log, rel, ls.of(xr[j])))
          fail(log ? "log_softmax" : "softmax", r, j, y[r * ldy + j], ref[j]);
    }
  } else {
    const std::vector<double> ref = ak_test::ref_softmax_axis(outer, axis, inner, x0.data());
    for (std::int64_t e = 0; e < outer * axis * inner; ++e)
      if (!close(y[e], ref[e], false, rel, 0)) fail("softmax_axis", e, 0, y[e], ref[e]);
  }
  for (std::int64_t e = 0; e < n_y; ++e)
    if (!is_entry(e, ldy) && !ak_fuzz::same_bits(y[e], in_place ? x0[e] : kCanary))
      fail("padding or tail written", e);
  if (!in_place)
    for (std::int64_t e = 0; e < n_x; ++e)
      if (!ak_fuzz::same_bits(x[e], x0[e])) fail("the input changed", e);

  // The same bits on the other thread count.
  const std::vector<float> first(y, y + n_y);
  if (in_place) x = x0;
  std::fill(y_buf.begin(), y_buf.end(), kCanary);
  ak_set_num_threads(3 - threads);
  if (call(y) != AK_OK) fail("the second call was refused");
  for (std::int64_t e = 0; e < n_y; ++e)
    if (!ak_fuzz::same_bits(first[e], y[e]))
      fail("differs across thread counts", e, 0, y[e], first[e]);
  return 0;
}
