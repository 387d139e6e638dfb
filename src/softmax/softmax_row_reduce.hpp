// The reductions of the row softmax, for one instruction set: each row's
// maximum (rows_max) and its sum of exponentials (rows_exp_sum), which also
// writes the exponentials or not, R rows at once.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "../simd.hpp"
#include "../vexp.hpp"
#include "softmax_row_io.hpp"

namespace attnkern {
namespace AK_ISA_NS {

// The row kernels below take R rows at once (pointer arrays of R), each
// with exactly the arithmetic it has alone: R = 1 for long rows, R > 1 for
// short ones, whose passes are chains of a few vectors that end in
// horizontal reductions and a scalar division; interleaving R rows lets
// their latencies overlap.

// Each row's maximum; a NaN entry may be passed over (the exp pass turns it
// into a NaN sum), so only -inf means "no number above -inf".
template <class V, int R> void rows_max(const float *const *rows, std::int64_t n, float *m) {
  using reg = typename V::reg;
  const float *x[R]; // local copies, kept in registers
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) x[r] = rows[r];
  constexpr int W = V::width;
  const float ninf = -std::numeric_limits<float>::infinity();
  reg m0[R], m1[R], m2[R], m3[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) m0[r] = m1[r] = m2[r] = m3[r] = V::set1(ninf);
  std::int64_t j = 0;
  for (; j + 4 * W <= n; j += 4 * W)
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      m0[r] = V::max(m0[r], V::loadu(x[r] + j));
      m1[r] = V::max(m1[r], V::loadu(x[r] + j + W));
      m2[r] = V::max(m2[r], V::loadu(x[r] + j + 2 * W));
      m3[r] = V::max(m3[r], V::loadu(x[r] + j + 3 * W));
    }
  for (; j + W <= n; j += W)
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) m0[r] = V::max(m0[r], V::loadu(x[r] + j));
  if (j < n)
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) m1[r] = V::max(m1[r], RowIo<V>::load_tail(x[r] + j, n - j, ninf));
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
    m[r] = V::reduce_max(V::max(V::max(m0[r], m1[r]), V::max(m2[r], m3[r])));
}

// A running sum of exponentials in double, lane by lane (scalar: one lane;
// SSE2: two doubles per half of the vector), totalled in a fixed order.
template <class V, bool Sse2 = (V::width == 4)> struct DoubleSum {
  double acc = 0.0;
  void add(typename V::reg e) { acc += static_cast<double>(e); }
  double total() const { return acc; }
};
#if defined(AK_ISA_HAS_XSIMD) && defined(__SSE2__)
template <class V> struct DoubleSum<V, true> {
  __m128d lo = _mm_setzero_pd(), hi = _mm_setzero_pd();
  void add(typename V::reg e) {
    const __m128 v = e;
    lo = _mm_add_pd(lo, _mm_cvtps_pd(v));
    hi = _mm_add_pd(hi, _mm_cvtps_pd(_mm_movehl_ps(v, v)));
  }
  double total() const {
    alignas(16) double l[2], h[2];
    _mm_store_pd(l, lo);
    _mm_store_pd(h, hi);
    return (l[0] + l[1]) + (h[0] + h[1]);
  }
};
#endif

// sum_j exp(x_j - m) per row; writes the exponentials to out[r] unless out
// is null. Summation: two float partial sums (at most 8 terms per lane
// each), folded per lane into a running total every block by exact
// two-sums (their errors added up apart), whose lanes are added in double
// once at the end. A plain float running sum over 32k terms loses ~1e-5
// relative; this keeps the sum within a few ulp whatever the length, at 14
// vector operations per block, and exact for rows of up to two vectors.
// (Kahan's four operations per fold assume the total outweighs the term: a
// row's maximum coming after its small terms lost up to half an ulp of 1,
// 1e-4 of a log-softmax's log s near 1.)
// The sum comes as sum[r] + sum_lo[r] (the double total's rounding to float
// and its remainder). read_next[r]: a row to prefetch, or null; write_next:
// rows to prefetch for writing (prefetch_for_write), or null. exp_of(r, v):
// row r's exponential.
// With TrackMax, also whether each row's maximum is in [lowest, 64] into
// in_range[r], given `below`, the float just below lowest (a NaN entry may
// be passed over, as in rows_max).
template <class V, int R, bool TrackMax = false, class Exp>
void rows_exp_sum_with(const float *const *rows, std::int64_t n, float *const *out,
                       float *const *write_next, const float *const *read_next, const Exp &exp_of,
                       float *sum, float *sum_lo, bool *in_range = nullptr, float below = 0.0f) {
  using reg = typename V::reg;
  const float *x[R], *next[R]; // local copies, kept in registers
  float *e[R], *w[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    x[r] = rows[r];
    next[r] = read_next[r];
    e[r] = out ? out[r] : nullptr;
    w[r] = write_next ? write_next[r] : nullptr;
  }
  const bool store = out != nullptr;
  constexpr int W = V::width;
  if constexpr (exp_in_double<V>()) {
    // Where the exponentials come from double (scalar, SSE2: vexp.hpp),
    // their sum is kept in double too (two chains a row, added at the end),
    // so that a weight is within three half ulps: its exponential's
    // rounding, the sum's (a mean of the exponentials'), the division's.
    // The float partial sums below add a few ulp on rows that a few large
    // terms dominate, and for scalar a float sum would also round 1 + small,
    // which log-softmax's log s cannot afford for s near 1. Its error,
    // below n 2^-53 of the sum, stays a small fraction of a float ulp up to
    // 2^26 entries a row. (Scalar: faster, too, than a compensated float
    // pair per entry; docs/tuning.md.)
    for (int r = 0; r < R; ++r) {
      DoubleSum<V> even, odd;
      reg top = V::set1(-std::numeric_limits<float>::infinity());
      std::int64_t j = 0;
      const auto step = [&](std::int64_t at, DoubleSum<V> &acc) {
        const reg x0 = V::loadu(x[r] + at);
        if (TrackMax) top = V::max(top, x0);
        const reg e0 = exp_of(r, x0);
        if (store) V::storeu(e[r] + at, e0);
        acc.add(e0);
      };
      for (; j + 2 * W <= n; j += 2 * W) {
        prefetch_next_row(next[r], j);
        prefetch_for_write(w[r], j);
        step(j, even);
        step(j + W, odd);
      }
      if (j + W <= n) {
        step(j, even);
        j += W;
      }
      if (j < n) { // W > 1 only
        const reg x0 =
            RowIo<V>::load_tail(x[r] + j, n - j, -std::numeric_limits<float>::infinity());
        if (TrackMax) top = V::max(top, x0);
        const reg e0 = exp_of(r, x0);
        if (store) RowIo<V>::store_tail(e[r] + j, n - j, e0);
        odd.add(e0);
      }
      const double total = even.total() + odd.total();
      sum[r] = static_cast<float>(total);
      sum_lo[r] = static_cast<float>(total - static_cast<double>(sum[r]));
      if (TrackMax)
        in_range[r] = V::any_lt(V::set1(below), top) && !V::any_lt(V::set1(kUnshiftedExpMax), top);
    }
    return;
  }
  constexpr std::int64_t kBlock = 16 * W;
  reg total[R], comp[R], top0[R], top1[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    total[r] = comp[r] = V::zero();
    if (TrackMax) top0[r] = top1[r] = V::set1(-std::numeric_limits<float>::infinity());
  }
  std::int64_t j = 0;
  bool first = true;
  while (j < n) {
    const std::int64_t end = n - j > kBlock ? j + kBlock : n;
    reg s0[R], s1[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) s0[r] = s1[r] = V::zero();
    for (; j + 2 * W <= end; j += 2 * W)
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        prefetch_next_row(next[r], j);
        prefetch_next_row(next[r], j + W);
        prefetch_for_write(w[r], j);
        prefetch_for_write(w[r], j + W);
        const reg x0 = V::loadu(x[r] + j), x1 = V::loadu(x[r] + j + W);
        if (TrackMax) {
          top0[r] = V::max(top0[r], x0);
          top1[r] = V::max(top1[r], x1);
        }
        const reg e0 = exp_of(r, x0);
        const reg e1 = exp_of(r, x1);
        if (store) {
          V::storeu(e[r] + j, e0);
          V::storeu(e[r] + j + W, e1);
        }
        s0[r] = V::add(s0[r], e0);
        s1[r] = V::add(s1[r], e1);
      }
    for (; j + W <= end; j += W)
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const reg x0 = V::loadu(x[r] + j);
        if (TrackMax) top0[r] = V::max(top0[r], x0);
        const reg e0 = exp_of(r, x0);
        if (store) V::storeu(e[r] + j, e0);
        s0[r] = V::add(s0[r], e0);
      }
    if (j < end) {
      const float ninf = -std::numeric_limits<float>::infinity();
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const reg x0 = RowIo<V>::load_tail(x[r] + j, end - j, ninf);
        if (TrackMax) top1[r] = V::max(top1[r], x0);
        const reg e0 = exp_of(r, x0);
        if (store) RowIo<V>::store_tail(e[r] + j, end - j, e0);
        s1[r] = V::add(s1[r], e0);
      }
      j = end;
    }
    // The first block's two partials make the total and its compensation
    // (folding them into a zero total gave the same bits in 6 operations
    // more, which slowed short rows); both go to double together at the end.
    if (first) {
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        reg t, err;
        two_diff<V>(s0[r], V::sub(V::zero(), s1[r]), t, err);
        total[r] = t;
        comp[r] = err;
      }
      first = false;
    } else {
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const reg parts[2] = {s0[r], s1[r]};
        for (const reg part : parts) {
          reg t, err;
          two_diff<V>(total[r], V::sub(V::zero(), part), t, err);
          total[r] = t;
          comp[r] = V::add(comp[r], err);
        }
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const double s = V::reduce_add_double_pair(total[r], comp[r]);
    sum[r] = static_cast<float>(s);
    sum_lo[r] = static_cast<float>(s - static_cast<double>(sum[r]));
    // Two lane tests instead of the maximum itself (a horizontal tree):
    // some lane above `below`, none above 64.
    if (TrackMax) {
      const reg top = V::max(top0[r], top1[r]);
      in_range[r] = V::any_lt(V::set1(below), top) && !V::any_lt(V::set1(kUnshiftedExpMax), top);
    }
  }
}

// Whether a row of n entries with maximum m sums exp(x) itself rather than
// exp(x - m): x needs no subtraction then, and so no carried rounding error
// (7 of the 21 vector operations of vexp_shifted), and softmax is the same
// function whatever the shift (faster on unit-normal rows, whose maxima lie
// in [0, 64]; docs/tuning.md). With 0 <= m <= kUnshiftedExpMax no
// exp overflows and the sum (at least exp(m) >= 1, below 2^35 e^64 <
// FLT_MAX) is finite; since the weight exp(x) / sum is then at most exp(x),
// a weight that is a normal float never comes from a subnormal exponential.
// Decided per row from the row alone, so grouping rows never changes a
// result.
inline bool unshifted_row(float m, std::int64_t n, float lowest = 0.0f) {
  return m >= lowest && m <= kUnshiftedExpMax && n < (std::int64_t{1} << 35);
}

// What a row's exponentials are for: softmax's weights, each to an ulp, or
// log-softmax's sum alone. Weights of rows with a maximum in [0, 64] come
// from exp(x) itself where FMA lets the division take the sum's low part
// (without, the shifted exponentials are more accurate; the worst errors
// are in docs/tuning.md). Log-softmax's y = x - (shift + log s)
// takes exp(x) itself only where the maximum is at least 1: log s then
// carries exp's relative error (~1e-7) as an absolute one, within its bound
// of 2 ulp of |x| + |m| + log s only where |m| is not small (a one-entry
// row with the shift gives exactly 0).
enum class RowExp { weights, sum_only };

// m[r]: row r's maximum, finite or +inf/NaN (not -inf); for R > 1 every
// |m[r]| <= kShiftedExpMaxShift (softmax_rows_at sends other rows alone).
// Sets shift[r] to what was subtracted from row r: 0 (unshifted_row) or m[r].
template <class V, int R>
void rows_exp_sum(const float *const *x, std::int64_t n, const float *m, float *const *e,
                  float *const *w, const float *const *next, RowExp use, float *sum, float *sum_lo,
                  float *shift) {
  using reg = typename V::reg;
  const bool may_unshift = V::has_fma || use == RowExp::sum_only;
  const float lowest = use == RowExp::weights ? 0.0f : 1.0f;
  int unshifted = 0;
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) unshifted += may_unshift && unshifted_row(m[r], n, lowest);
  if (R > 1 && unshifted > 0 && unshifted < R) { // mixed: each row alone
    for (int r = 0; r < R; ++r)
      rows_exp_sum<V, 1>(x + r, n, m + r, e ? e + r : nullptr, w ? w + r : nullptr, next + r, use,
                         sum + r, sum_lo + r, shift + r);
    return;
  }
  if (unshifted == R) {
    for (int r = 0; r < R; ++r) shift[r] = 0.0f;
    const reg floor = V::set1(-kShiftedExpFloor);
    return rows_exp_sum_with<V, R>(
        x, n, e, w, next, [&](int, reg v) { return vexp_unshifted<V>(v, floor); }, sum, sum_lo);
  }
  reg vm[R], floor[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    shift[r] = m[r];
    vm[r] = V::set1(m[r]);
    floor[r] = V::set1(m[r] - kShiftedExpFloor);
  }
  if (R > 1 || std::fabs(m[0]) <= kShiftedExpMaxShift)
    return rows_exp_sum_with<V, R>(
        x, n, e, w, next, [&](int r, reg v) { return vexp_shifted<V>(v, vm[r], floor[r]); }, sum,
        sum_lo);
  rows_exp_sum_with<V, R>(
      x, n, e, w, next, [&](int r, reg v) { return vexp_diff<V>(v, vm[r]); }, sum, sum_lo);
}

} // namespace AK_ISA_NS
} // namespace attnkern
