// The last pass of the row softmax, for one instruction set: softmax
// divides each kept exponential by its row's sum (divide_by_sum, also used
// by softmax_axis), log-softmax subtracts its row's offset from x, R rows at
// once.
#pragma once

#include <cstdint>

#include "../simd.hpp"
#include "softmax_row_io.hpp"

namespace attnkern {
namespace AK_ISA_NS {

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

} // namespace AK_ISA_NS
} // namespace attnkern
