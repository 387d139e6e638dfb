// Softmax and log-softmax over rows, for one instruction set.
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

#include "../kernel_table.hpp"
#include "../scratch.hpp"
#include "../simd.hpp"
#include "../threading.hpp"
#include "../vexp.hpp"

namespace attnkern {
namespace AK_ISA_NS {

template <class V> struct RowIo {
  using reg = typename V::reg;
  static constexpr int W = V::width;
  // Loads x[j..j+W), padding lanes past n with `pad`.
  static reg load_tail(const float *x, std::int64_t n, float pad) {
    alignas(64) float t[W];
    for (int i = 0; i < W; ++i) t[i] = i < n ? x[i] : pad;
    return V::loadu(t);
  }
  static void store_tail(float *y, std::int64_t n, reg v) {
    alignas(64) float t[W];
    V::storeu(t, v);
    for (std::int64_t i = 0; i < n; ++i) y[i] = t[i];
  }
};

// Rows that come from memory stream better when the next row is requested
// while this one is worked on in cache: its lines are prefetched (into L2)
// at the offsets the exp pass and again the last pass reach (one pass of
// requests gave about half the gain; docs/tuning-softmax.md).
inline void prefetch_next_row(const float *next, std::int64_t j) {
  if (next && j % 16 == 0) __builtin_prefetch(next + j, 0, 1);
}

// Log-softmax writes y only in its last pass; the exp pass asks for y's
// lines for writing (into L1) as it goes, so that their fetch overlaps
// arithmetic instead of stalling the store-only last pass (cold rows:
// docs/tuning-softmax.md).
inline void prefetch_for_write(float *y, std::int64_t j) {
  if (y && j % 16 == 0) __builtin_prefetch(y + j, 1, 3);
}

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
    // pair per entry; docs/tuning-softmax.md.)
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
// in [0, 64]; docs/tuning-softmax.md). With 0 <= m <= kUnshiftedExpMax no
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
// are in docs/tuning-softmax.md). Log-softmax's y = x - (shift + log s)
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

// e / (s + s_lo) for a positive s and |s_lo| <= ulp(s), given inv = 1 / s
// rounded. With FMA: the product e * inv corrected by one Newton step on its
// remainder against both parts of the sum (e - q s is exact), which gives
// the correctly rounded quotient of the pair but in rare cases, so that the
// sum's rounding to float adds no error (the vector divider is several
// times slower on current x86 cores). Without FMA: each lane in double.
template <class V>
inline typename V::reg divide_by_sum(typename V::reg e, typename V::reg s, typename V::reg s_lo,
                                     typename V::reg inv) {
  if constexpr (V::has_fma) {
    const typename V::reg q = V::mul(e, inv);
    const typename V::reg neg_s = V::sub(V::zero(), s), neg_lo = V::sub(V::zero(), s_lo);
    return V::fmadd(V::fmadd(q, neg_lo, V::fmadd(q, neg_s, e)), inv, q);
  } else {
    // each lane in double: the float sum's rounding would add half an ulp
    // (softmax_axis on SSE2 broke docs/design.md's 2e-7 bound that way)
    (void)inv;
#if defined(AK_ISA_HAS_XSIMD) && defined(__SSE2__)
    if constexpr (V::width == 4) { // two lanes at a time
      const auto half = [](__m128 e2, __m128 s2, __m128 lo2) {
        const __m128d den = _mm_add_pd(_mm_cvtps_pd(s2), _mm_cvtps_pd(lo2));
        return _mm_cvtpd_ps(_mm_div_pd(_mm_cvtps_pd(e2), den));
      };
      const __m128 ev = e, sv = s, lv = s_lo;
      return typename V::reg(
          _mm_movelh_ps(half(ev, sv, lv),
                        half(_mm_movehl_ps(ev, ev), _mm_movehl_ps(sv, sv), _mm_movehl_ps(lv, lv))));
    }
#endif
    constexpr int W = V::width;
    alignas(64) float te[W], ts[W], tl[W];
    V::storeu(te, e);
    V::storeu(ts, s);
    V::storeu(tl, s_lo);
    for (int i = 0; i < W; ++i)
      te[i] = static_cast<float>(static_cast<double>(te[i]) /
                                 (static_cast<double>(ts[i]) + static_cast<double>(tl[i])));
    return V::loadu(te);
  }
}

// y[r] = y[r] / (s[r] + s_lo[r]) (softmax) in place over n floats.
template <class V, int R>
void rows_divide(float *const *rows, std::int64_t n, const float *s, const float *s_lo,
                 const float *const *read_next) {
  using reg = typename V::reg;
  float *y[R]; // local copies, kept in registers
  const float *next[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    y[r] = rows[r];
    next[r] = read_next[r];
  }
  constexpr int W = V::width;
  reg vs[R], vlo[R], vinv[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    vs[r] = V::set1(s[r]);
    vlo[r] = V::set1(s_lo[r]);
    vinv[r] = V::set1(1.0f / s[r]);
  }
  std::int64_t j = 0;
  for (; j + W <= n; j += W)
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      prefetch_next_row(next[r], j);
      V::storeu(y[r] + j, divide_by_sum<V>(V::loadu(y[r] + j), vs[r], vlo[r], vinv[r]));
    }
  if (j < n)
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
      RowIo<V>::store_tail(
          y[r] + j, n - j,
          divide_by_sum<V>(RowIo<V>::load_tail(y[r] + j, n - j, 0.0f), vs[r], vlo[r], vinv[r]));
}

// y[r] = x[r] - c[r] over n floats (log-softmax's last pass).
template <class V, int R>
void rows_subtract(const float *const *in, float *const *rows, std::int64_t n, const float *c,
                   const float *const *read_next) {
  using reg = typename V::reg;
  const float *x[R], *next[R]; // local copies, kept in registers
  float *y[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    x[r] = in[r];
    y[r] = rows[r];
    next[r] = read_next[r];
  }
  constexpr int W = V::width;
  reg vc[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) vc[r] = V::set1(c[r]);
  std::int64_t j = 0;
  for (; j + W <= n; j += W)
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      prefetch_next_row(next[r], j);
      V::storeu(y[r] + j, V::sub(V::loadu(x[r] + j), vc[r]));
    }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
    for (std::int64_t i = j; i < n; ++i) y[r][i] = x[r][i] - c[r];
}

// R rows; next[r]: the row to prefetch for row r, or null. With `guess`
// (softmax out of place on FMA instruction sets; log-softmax), the exp pass
// first takes exp(x) itself as if every row's maximum were in [0, 64]
// (log-softmax: [1, 64]; unshifted_row) and finds the maxima on the way:
// where they bear it out, that was the row's whole exp pass, with no
// maximum pass before it; else the rows go the usual way (y is rewritten,
// x is intact; log-softmax writes y only at the end). Returns whether the
// guess held; the bits are the same either way. Rows whose maxima bear it
// out (unit-normal rows) save a pass over x; docs/tuning-softmax.md.
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

// One thread's choice, item after item, of whether to guess that a
// maximum is in the unshifted range (softmax_rows_at, softmax_axis_block):
// after a refuted guess, none for the next 16 items, so that data whose
// maxima lie elsewhere wastes at most one exp pass in 17 items. Speed only:
// a guess never changes a result.
class GuessGate {
public:
  explicit GuessGate(bool allowed) : left_(allowed ? 0 : -1) {}
  bool open() const { return left_ == 0; }
  // After an item: `held`, whether its guess (if it made one) held.
  void after(bool held) {
    if (left_ > 0)
      --left_;
    else if (left_ == 0 && !held)
      left_ = kSkip;
  }

private:
  static constexpr int kSkip = 16;
  int left_; // items left without a guess; -1: never
};

// Rows longer than this many floats never stream: their row buffer would
// not fit in L2.
constexpr std::int64_t kStreamRowMax = 65536;

// dst[0:n) = src[0:n): whole vectors at vector-aligned addresses of dst in
// streaming stores, the few floats before and after them in plain ones.
template <class V> void store_row_streaming(const float *src, float *dst, std::int64_t n) {
  constexpr int W = V::width;
  std::int64_t j = 0;
  for (; j < n && reinterpret_cast<std::uintptr_t>(dst + j) % (W * 4) != 0; ++j) dst[j] = src[j];
  for (; j + W <= n; j += W) V::store_stream(dst + j, V::loadu(src + j));
  for (; j < n; ++j) dst[j] = src[j];
}

template <class V>
void softmax_rows(std::int64_t rows, std::int64_t cols, const float *x, std::int64_t ldx, float *y,
                  std::int64_t ldy, bool log, int threads, const SoftmaxTuning &tuning) {
  // Rows of up to 16 vectors go R at a time, so that their short passes'
  // latencies overlap, the rest one at a time; either way each row gets the
  // same arithmetic, so the grouping never changes a result.
  constexpr int R = V::width >= 16 ? 4 : 2;
  const std::int64_t per_item = cols <= 16 * V::width ? R : 1;
  const std::int64_t groups = rows / per_item, items = groups + rows % per_item;
  // A thread per 4096 elements at least (a few microseconds of work each).
  threads = threads_for_work(threads, static_cast<double>(rows) * cols, 1 << 12);
  if (threads > items) threads = static_cast<int>(items);
  // Large outputs through a row buffer to streaming stores, where the
  // configuration table asks for it (SoftmaxTuning); the same arithmetic
  // either way.
  const bool stream = tuning.stream_rows_min_bytes > 0 && x != y && per_item == 1 &&
                      cols <= kStreamRowMax &&
                      static_cast<double>(rows) * static_cast<double>(cols) * 4 >=
                          static_cast<double>(tuning.stream_rows_min_bytes);
  // staged: the row buffer, or nullptr (rows written straight into y)
  const auto thread_rows = [&](std::int64_t t, float *staged) {
    // log-softmax, and softmax out of place with FMA, guess
    GuessGate gate(log || (V::has_fma && x != y));
    for (std::int64_t it = items * t / threads; it < items * (t + 1) / threads; ++it) {
      const std::int64_t r0 = it < groups ? it * per_item : groups * per_item + (it - groups);
      const auto row_at = [&](std::int64_t r) { return r < rows ? x + r * ldx : nullptr; };
      bool held;
      if (it < groups && per_item == R) {
        const float *xs[R], *next[R];
        float *ys[R];
        for (int q = 0; q < R; ++q) {
          xs[q] = x + (r0 + q) * ldx;
          ys[q] = y + (r0 + q) * ldy;
          next[q] = row_at(r0 + q + R);
        }
        held = softmax_rows_at<V, R>(xs, ys, cols, log, next, gate.open());
      } else {
        const float *xs[1] = {x + r0 * ldx}, *next[1] = {row_at(r0 + 1)};
        float *ys[1] = {staged ? staged : y + r0 * ldy};
        held = softmax_rows_at<V, 1>(xs, ys, cols, log, next, gate.open());
        if (staged) store_row_streaming<V>(staged, y + r0 * ldy, cols);
      }
      gate.after(held);
    }
    if (staged) V::stream_fence(); // y complete before the caller reads it
  };
  parallel_for_static(threads, threads, [&](std::int64_t t) {
    if (!stream) return thread_rows(t, nullptr);
    Scratch stage(static_cast<std::size_t>(cols));
    thread_rows(t, stage.data()); // without memory for it, ordinary stores
  });
}

} // namespace AK_ISA_NS
} // namespace attnkern
