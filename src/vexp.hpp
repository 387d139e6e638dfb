// Vectorized expf over the *Vec vocabulary of simd.hpp (one copy per ISA).
//
// Method: n = round(x / ln 2), r = x - n ln 2 (Cody-Waite two-constant split,
// exact for |n| < 2^15), exp(r) by a degree-7 polynomial on |r| <= ln2 / 2
// (Cephes expf coefficients), times 2^n: by vscalefps on AVX-512, elsewhere as
// two factors 2^n1 * 2^n2, so that n in [-152, 128] needs no special case:
// results near FLT_MAX and in the denormal range are correctly scaled, and the
// product overflows to +inf on its own past ln(FLT_MAX).
//
// Range and error: at most 1.01 ulp from double exp over [-87.3, 88.7], on
// every float of that range and every x86 instruction set (tests/test_exp.cpp
// with AK_EXP_EXHAUSTIVE=1; CI checks every 128th float against 2 ulp); 0
// for x < -104 and for -inf; +inf for x > 88.73 and +inf; NaN for NaN.
#pragma once

#include "simd.hpp"

namespace ak {
namespace AK_ISA_NS {

// exp(r) for |r| <= ln2 / 2 (plus a correction): 1 + (r + r^2 P(r)), the
// small part formed first so that the result is rounded once at the end.
template <class V> inline typename V::reg vexp_poly(typename V::reg r) {
  using reg = typename V::reg;
  reg p = V::set1(1.9875691500e-4f);
  p = V::fmadd(p, r, V::set1(1.3981999507e-3f));
  p = V::fmadd(p, r, V::set1(8.3334519073e-3f));
  p = V::fmadd(p, r, V::set1(4.1665795894e-2f));
  p = V::fmadd(p, r, V::set1(1.6666665459e-1f));
  p = V::fmadd(p, r, V::set1(5.0000001201e-1f));
  return V::add(V::set1(1.0f), V::fmadd(p, V::mul(r, r), r));
}

// p * 2^n for an integral n in [-152, 128], rounded once: results in the
// subnormal range are correctly rounded and past FLT_MAX become +inf.
template <class V> inline typename V::reg vexp_scale(typename V::reg p, typename V::reg n) {
  using reg = typename V::reg;
#if defined(__AVX512F__)
  // vscalefps does exactly this in one instruction.
  if constexpr (V::width == 16) return reg(_mm512_scalef_ps(p, n));
#endif
  // Two factors 2^n1 * 2^n2, each a normal number for n in that range.
  const reg n1 = V::round(V::mul(n, V::set1(0.5f)));
  return V::mul(V::mul(p, V::pow2i(n1)), V::pow2i(V::sub(n, n1)));
}

// x = n ln2 + r with an integral n and |r| <= ln2 / 2 (plus rounding).
template <class V>
inline void vexp_split(typename V::reg x, typename V::reg &n, typename V::reg &r) {
  n = V::round(V::mul(x, V::set1(1.44269504088896341f)));
  r = V::fmadd(n, V::set1(-0.693359375f), x);
  r = V::fmadd(n, V::set1(2.12194440e-4f), r);
}

// exp(x + lo) for x in [-105.5, 88.75] or NaN and a finite |lo| <= ulp(x):
// the reduction and the polynomial, nothing else. A NaN x flows through the
// arithmetic to a NaN result.
template <class V> inline typename V::reg vexp_reduced(typename V::reg x, typename V::reg lo) {
  typename V::reg n, r;
  vexp_split<V>(x, n, r);
  return vexp_scale<V>(vexp_poly<V>(V::add(r, lo)), n);
}

// exp(x + lo), where lo is a tiny correction to x (|lo| <= ulp(x)): lets a
// caller pass the exact rounding error of the subtraction that formed x. Any
// x: the clamp is ordered so that a NaN x passes through it (max and min
// return their second operand when either is NaN, on every instruction set
// here); below -104 the scaled result rounds to 0, above 88.75 to +inf. lo
// is dropped where x is outside the clamp, where it can be as large as half
// an ulp of a huge x (x = -1e20 carries lo up to 2^42, which would wreck the
// reduction: NaN for 1e20-scale softmax inputs before), and where it is NaN
// (an infinite x, see vexp_diff).
template <class V> inline typename V::reg vexp_clamp(typename V::reg x) {
  return V::min(V::set1(88.75f), V::max(V::set1(-104.0f), x));
}

template <class V> inline typename V::reg vexp_corrected(typename V::reg x, typename V::reg lo) {
  lo = V::lt_select(x, V::set1(-104.0f), V::zero(), lo);
  lo = V::lt_select(V::set1(88.75f), x, V::zero(), lo);
  return vexp_reduced<V>(vexp_clamp<V>(x), V::nan_select(lo, V::zero(), lo));
}

template <class V> inline typename V::reg vexp(typename V::reg x) {
  return vexp_reduced<V>(vexp_clamp<V>(x), V::zero());
}

// a - b and its exact rounding error (TwoSum: exact for any two finite floats).
template <class V>
inline void two_diff(typename V::reg a, typename V::reg b, typename V::reg &s,
                     typename V::reg &err) {
  using reg = typename V::reg;
  s = V::sub(a, b);
  const reg a_part = V::add(s, b);
  const reg b_part = V::sub(a_part, s);
  err = V::add(V::sub(a, a_part), V::sub(b_part, b));
}

// exp(a - b) with a - b's rounding error carried into the reduction: exp's
// argument is then a - b to ~2^-48, so the result is good to an ulp even
// where a - b itself is inexact. Any a and b; where a - b is -inf or NaN the
// correction is NaN, and vexp_corrected drops it.
template <class V> inline typename V::reg vexp_diff(typename V::reg a, typename V::reg b) {
  typename V::reg s, err;
  two_diff<V>(a, b, s, err);
  return vexp_corrected<V>(s, err);
}

// Softmax's exp(x - m) for x <= m, in fewer operations than vexp_diff, valid
// for a finite m with |m| <= kShiftedExpMaxShift. floor = m - kShiftedExpFloor,
// computed once per row: raising x to it turns -inf into a finite argument
// (so no clamp or NaN test is needed after it) and changes no result, since
// exp of anything below -105 + ulp(m) rounds to 0 anyway. A NaN x stays NaN.
constexpr float kShiftedExpFloor = 105.0f, kShiftedExpMaxShift = 65536.0f;
template <class V>
inline typename V::reg vexp_shifted(typename V::reg x, typename V::reg m, typename V::reg floor) {
  typename V::reg s, err;
  two_diff<V>(V::max(floor, x), m, s, err);
  return vexp_reduced<V>(s, err);
}

// Softmax's exp(x) for a row whose maximum m is in [0, kUnshiftedExpMax]
// (see unshifted_row in softmax/softmax_kernels.hpp): no shift to subtract,
// so no rounding error to carry. floor = set1(-kShiftedExpFloor): raising x
// to it turns -inf into a finite argument, and exp of anything below -104
// rounds to 0 anyway. A NaN x stays NaN.
constexpr float kUnshiftedExpMax = 64.0f;
template <class V> inline typename V::reg vexp_unshifted(typename V::reg x, typename V::reg floor) {
  typename V::reg n, r;
  vexp_split<V>(V::max(floor, x), n, r);
  return vexp_scale<V>(vexp_poly<V>(r), n);
}

} // namespace AK_ISA_NS
} // namespace ak
