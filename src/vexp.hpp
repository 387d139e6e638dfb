// Vectorized expf over the *Vec vocabulary of simd.hpp (one copy per ISA).
//
// Method: n = round(x / ln 2), r = x - n ln 2 (Cody-Waite two-constant split,
// exact for |n| < 2^15), exp(r) by a degree-7 polynomial on |r| <= ln2 / 2
// (Cephes expf coefficients), times 2^n. The scale is applied as two factors
// 2^n1 * 2^n2 so that n in [-150, 128] needs no special case: results near
// FLT_MAX and in the denormal range are correctly scaled, and the product
// overflows to +inf on its own past ln(FLT_MAX).
//
// Range and error: at most 1.01 ulp from double exp over [-87.3, 88.7], on
// every float of that range and every x86 instruction set (tests/test_exp.cpp
// with AK_EXP_EXHAUSTIVE=1; CI checks every 128th float against 2 ulp); 0 for x < -104 and for
// -inf; +inf for x > 88.73 and +inf; NaN for NaN.
#pragma once

#include "simd.hpp"

namespace ak {
namespace AK_ISA_NS {

// exp(x + lo), where lo is a tiny correction to x (|lo| <= ulp(x)): lets a
// caller pass the exact rounding error of the subtraction that formed x.
#if defined(__AVX512F__)
// The same method on AVX-512 in fewer instructions: vscalefps applies 2^n for
// any n with a single rounding (into the subnormals, and to +inf past
// FLT_MAX), replacing the two-factor scale; the clamp is ordered so that a NaN
// x passes through it (vmaxps/vminps return their second operand when either
// is NaN) and then through the arithmetic, replacing the final selects. An x
// below -104 is clamped there, where the scaled result rounds to 0. The
// correction lo is NaN where x is infinite (see vexp_diff): it is added only
// where it is a number.
inline __m512 vexp_corrected_avx512(__m512 x, __m512 lo) {
  const __m512 xc =
      _mm512_min_ps(_mm512_set1_ps(88.75f), _mm512_max_ps(_mm512_set1_ps(-104.0f), x));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-0.693359375f), xc);
  r = _mm512_fmadd_ps(n, _mm512_set1_ps(2.12194440e-4f), r);
  r = _mm512_mask_add_ps(r, _mm512_cmp_ps_mask(lo, lo, _CMP_ORD_Q), r, lo);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_add_ps(_mm512_set1_ps(1.0f), _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r));
  return _mm512_scalef_ps(p, n);
}
#endif

template <class V> inline typename V::reg vexp_corrected(typename V::reg x, typename V::reg lo) {
  using reg = typename V::reg;
#if defined(__AVX512F__)
  if constexpr (V::width == 16) return reg(vexp_corrected_avx512(x, lo));
#endif
  const reg min_arg = V::set1(-104.0f), max_arg = V::set1(88.75f);
  const reg xc = V::min(V::max(x, min_arg), max_arg);
  const reg n = V::round(V::mul(xc, V::set1(1.44269504088896341f)));
  reg r = V::fmadd(n, V::set1(-0.693359375f), xc);
  r = V::fmadd(n, V::set1(2.12194440e-4f), r);
  r = V::add(r, lo);
  reg p = V::set1(1.9875691500e-4f);
  p = V::fmadd(p, r, V::set1(1.3981999507e-3f));
  p = V::fmadd(p, r, V::set1(8.3334519073e-3f));
  p = V::fmadd(p, r, V::set1(4.1665795894e-2f));
  p = V::fmadd(p, r, V::set1(1.6666665459e-1f));
  p = V::fmadd(p, r, V::set1(5.0000001201e-1f));
  // 1 + (r + r^2 P(r)): the small part is formed first so that the result
  // is rounded once at the end, not twice.
  p = V::add(V::set1(1.0f), V::fmadd(p, V::mul(r, r), r));
  const reg n1 = V::round(V::mul(n, V::set1(0.5f)));
  const reg n2 = V::sub(n, n1);
  reg y = V::mul(V::mul(p, V::pow2i(n1)), V::pow2i(n2));
  y = V::lt_select(x, min_arg, V::zero(), y);
  return V::nan_select(x, x, y);
}

template <class V> inline typename V::reg vexp(typename V::reg x) {
  return vexp_corrected<V>(x, V::zero());
}

// exp(a - b) with a - b's rounding error carried into the reduction (TwoSum,
// exact for any two floats): exp's argument is then a - b to ~2^-48, so the
// result is good to an ulp even where a - b itself is inexact. Where a - b is
// -inf or NaN the correction is NaN, but vexp_corrected decides those lanes
// from s alone.
template <class V> inline typename V::reg vexp_diff(typename V::reg a, typename V::reg b) {
  using reg = typename V::reg;
  const reg s = V::sub(a, b);
  const reg a_part = V::add(s, b);
  const reg b_part = V::sub(a_part, s);
  const reg err = V::add(V::sub(a, a_part), V::sub(b_part, b));
  return vexp_corrected<V>(s, err);
}

} // namespace AK_ISA_NS
} // namespace ak
