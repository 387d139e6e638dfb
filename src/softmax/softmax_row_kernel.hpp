// Softmax and log-softmax of R rows at once, for one instruction set: the
// passes of softmax_row_reduce.hpp and softmax_row_normalize.hpp put
// together, with the guess that skips the maximum pass.
//
// Each row: m = max(x); e_j = exp(x_j - m); s = sum(e); y_j = e_j / s (or
// x_j - m - log s). Subtracting the maximum keeps every exp argument <= 0,
// so no finite input overflows; softmax rows whose maximum is in [0, 64]
// need no shift and use exp(x_j) itself (unshifted_row). Special rows:
//   all -inf            -> m = -inf; softmax 0, log-softmax -inf (no NaN)
//   a NaN or a +inf     -> s (or m) is NaN, so the whole row is NaN
// The vector tail is computed in a -inf-padded register, so a row's last
// elements follow exactly the same arithmetic as the others.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "../simd.hpp"
#include "../vexp.hpp"
#include "softmax_row_normalize.hpp"
#include "softmax_row_reduce.hpp"

namespace attnkern {
namespace AK_ISA_NS {

// R rows; next[r]: the row to prefetch for row r, or null. With `guess`
// (softmax out of place on FMA instruction sets; log-softmax), the exp pass
// first takes exp(x) itself as if every row's maximum were in [0, 64]
// (log-softmax: [1, 64]; unshifted_row) and finds the maxima on the way:
// where they bear it out, that was the row's whole exp pass, with no
// maximum pass before it; else the rows go the usual way (y is rewritten,
// x is intact; log-softmax writes y only at the end). Returns whether the
// guess held; the bits are the same either way. Rows whose maxima bear it
// out (unit-normal rows) save a pass over x; docs/tuning.md.
template <class V, int R>
bool softmax_rows_at(const float *const *x, float *const *y, std::int64_t n, bool log,
                     const float *const *next, bool guess = false) {
  const float ninf = -std::numeric_limits<float>::infinity();
  float m[R], s[R], s_lo[R], c[R], shift[R];
  // (FMA or not, log-softmax takes exp(x) for maxima in [1, 64]; softmax's
  // weights only with FMA: see RowExp)
  if (guess && (log || V::has_fma)) {
    const typename V::reg floor = V::set1(-kShiftedExpFloor);
    // the floats just below log-softmax's 1 and softmax's 0 (constants: a
    // call to nextafter per row slowed short rows)
    const float below = log ? 1.0f - 0x1p-24f : -std::numeric_limits<float>::denorm_min();
    bool in_range[R];
    rows_exp_sum_with<V, R, true>(
        x, n, log ? nullptr : y, log ? y : nullptr, next,
        [&](int, typename V::reg v) { return vexp_unshifted<V>(v, floor); }, s, s_lo, in_range,
        below);
    // unshifted_row's test, the maximum's range found by lanes
    bool holds = n < (std::int64_t{1} << 35);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) holds = holds && in_range[r] && s[r] == s[r];
    if (holds) {
      if (log) {
        for (int r = 0; r < R; ++r) // the offset below with shift 0
          c[r] = static_cast<float>(
              std::log(static_cast<double>(s[r]) + static_cast<double>(s_lo[r])));
        rows_subtract<V, R>(x, y, n, c, next);
      } else {
        rows_divide<V, R>(y, n, s, s_lo, next);
      }
      return true;
    }
  }
  rows_max<V, R>(x, n, m);
  if constexpr (R > 1) {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
      if (!(std::fabs(m[r]) <= kShiftedExpMaxShift)) { // -inf, +inf, NaN or huge: alone
        for (int q = 0; q < R; ++q) softmax_rows_at<V, 1>(x + q, y + q, n, log, next + q);
        return false;
      }
  } else if (m[0] == ninf) { // no finite entry: every entry -inf, or NaN among -inf
    bool nan = false;
    for (std::int64_t j = 0; j < n; ++j) nan = nan || x[0][j] != x[0][j];
    // all -inf: weights 0, log-weights -inf; a NaN: all NaN
    const float fill = nan ? std::numeric_limits<float>::quiet_NaN() : log ? ninf : 0.0f;
    for (std::int64_t j = 0; j < n; ++j) y[0][j] = fill;
    return false;
  }
  if (log) {
    rows_exp_sum<V, R>(x, n, m, nullptr, y, next, RowExp::sum_only, s, s_lo, shift);
    // shift + log(s) computed as one offset, in double from the sum's pair
    // (s near 1 rounded to float alone moved log s by up to 6e-8, 7 times
    // the bound of a 2-entry row of small values): x - (shift + log s) then
    // rounds twice per element. s >= 1 since the maximum contributes
    // exp(m - shift) >= 1.
    for (int r = 0; r < R; ++r)
      c[r] = static_cast<float>(static_cast<double>(shift[r]) +
                                std::log(static_cast<double>(s[r]) + static_cast<double>(s_lo[r])));
    rows_subtract<V, R>(x, y, n, c, next);
  } else {
    rows_exp_sum<V, R>(x, n, m, y, nullptr, next, RowExp::weights, s, s_lo, shift);
    rows_divide<V, R>(y, n, s, s_lo, next);
  }
  return false;
}

} // namespace AK_ISA_NS
} // namespace attnkern
