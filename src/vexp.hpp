// Vectorized expf over the *Vec vocabulary of simd.hpp (one copy per ISA).
//
// Method: n = round(x / ln 2), r = x - n ln 2 (Cody-Waite two-constant split,
// exact for |n| < 2^15), exp(r) by a degree-7 polynomial on |r| <= ln2 / 2
// (Cephes expf coefficients), times 2^n. The scale is applied as two factors
// 2^n1 * 2^n2 so that n in [-150, 128] needs no special case: results near
// FLT_MAX and in the denormal range are correctly scaled, and the product
// overflows to +inf on its own past ln(FLT_MAX).
//
// Range and error: about 1 ulp over [-87.3, 88.7] (checked in
// tests/test_exp.cpp against double exp); 0 for x < -104 and for -inf; +inf
// for x > 88.73 and +inf; NaN for NaN.
#pragma once

namespace ak {
namespace AK_ISA_NS {

template <class V> inline typename V::reg vexp(typename V::reg x) {
  using reg = typename V::reg;
  const reg lo = V::set1(-104.0f), hi = V::set1(88.75f);
  reg xc = V::min(V::max(x, lo), hi);
  const reg n = V::round(V::mul(xc, V::set1(1.44269504088896341f)));
  reg r = V::fmadd(n, V::set1(-0.693359375f), xc);
  r = V::fmadd(n, V::set1(2.12194440e-4f), r);
  reg p = V::set1(1.9875691500e-4f);
  p = V::fmadd(p, r, V::set1(1.3981999507e-3f));
  p = V::fmadd(p, r, V::set1(8.3334519073e-3f));
  p = V::fmadd(p, r, V::set1(4.1665795894e-2f));
  p = V::fmadd(p, r, V::set1(1.6666665459e-1f));
  p = V::fmadd(p, r, V::set1(5.0000001201e-1f));
  p = V::fmadd(p, V::mul(r, r), V::add(r, V::set1(1.0f)));
  const reg n1 = V::round(V::mul(n, V::set1(0.5f)));
  const reg n2 = V::sub(n, n1);
  reg y = V::mul(V::mul(p, V::pow2i(n1)), V::pow2i(n2));
  y = V::lt_select(x, lo, V::zero(), y);
  return V::nan_select(x, x, y);
}

} // namespace AK_ISA_NS
} // namespace ak
