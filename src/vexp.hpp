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
// The scalar path computes exp in double instead (below): 0.503 ulp.
//
// SSE2 and scalar (no FMA) compute softmax's exps (vexp_shifted,
// vexp_diff, vexp_unshifted) in double instead, rounded once to float:
// within half an ulp and a hair. In float, without FMA, exp(x - m) with the
// subtraction's error carried is off by more than an ulp, and a softmax
// weight adds its own exponential's error to the sum's (of the opposite
// sign) and the division's rounding: SSE2 rows broke docs/design.md's 2e-7
// bound that way (docs/tuning.md). With every exponential within
// ~0.5 ulp, and softmax rows summing them in double there
// (rows_exp_sum_with), a row's weights are within 1.5 ulp (1.8e-7) whatever
// the input (normal weights). (Scalar: also fewer operations than the float
// method's, whose rounding is a library call on baseline x86-64.)
#pragma once

#include <cstdint>
#include <cstring>

#include "simd.hpp"

namespace attnkern {
namespace AK_ISA_NS {

// Whether softmax's exps run in double (SSE2 and scalar: see above).
template <class V> constexpr bool exp_in_double() {
#if defined(AK_ISA_HAS_XSIMD) && defined(__SSE2__)
  if constexpr (V::width == 4 && !V::has_fma) return true;
#endif
  return V::width == 1;
}

// The constants of exp_double and exp_pd_sse2: n = round(d / ln 2) by adding
// and subtracting 1.5 * 2^52, r = d - n ln 2 with ln 2 split so that n * hi
// is exact, exp(r) for |r| <= ln2 / 2 by its Taylor polynomial of degree 8
// (truncation below 2.1e-10 relative, at most 0.0035 ulp of a float, so
// within 0.504 ulp after the one rounding to float; degree 7's 5.6e-9 would
// add 0.05 ulp) by Estrin's scheme (a third of Horner's latency), times 2^n
// built from n's bits (n in [-260, 145], a normal double).
constexpr double kExpShifter = 6755399441055744.0; // 1.5 * 2^52
constexpr double kLog2e = 1.4426950408889634, kLn2Hi = 0.693147180369123816490,
                 kLn2Lo = 1.90821492927058770002e-10;

// exp(d) for a double d in [-180, 100] or NaN (which flows through the
// arithmetic to a NaN result): one lane of exp_pd_sse2.
inline double exp_double(double d) {
  const double t = d * kLog2e + kExpShifter;
  const double n = t - kExpShifter;
  const double r = (d - n * kLn2Hi) - n * kLn2Lo;
  const double r2 = r * r, r4 = r2 * r2, r8 = r4 * r4;
  const double p03 = (1.0 + r) + r2 * (1.0 / 2 + r * (1.0 / 6));
  const double p47 = (1.0 / 24 + r * (1.0 / 120)) + r2 * (1.0 / 720 + r * (1.0 / 5040));
  const double p = (p03 + r4 * p47) + r8 * (1.0 / 40320);
  // t's low bits hold n in two's complement: t - shifter as integers is n
  std::int64_t tb, sb;
  std::memcpy(&tb, &t, sizeof tb);
  std::memcpy(&sb, &kExpShifter, sizeof sb);
  const std::uint64_t bits = static_cast<std::uint64_t>(tb - sb + 1023) << 52;
  double scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

// exp(a - b) for two floats: the difference in double (exact for the
// arguments softmax meets; otherwise off by 2^-53 of it) and rounded to
// float once. Clamp: any a and b, the difference first clamped to where
// the float result is 0 or +inf (a NaN passes both tests); without, a - b
// must lie in [-180, 100] (softmax floors reach -176).
// Below -104 the result is 0: such an argument takes exp(0) and the result
// is replaced after, so that no tiny double is ever rounded to float (its
// conversion underflows: an assist on Intel cores; kExpZeroBelow), however
// the compiler arranges the selects (Clang evaluated both sides of a select
// after the conversion).
template <bool Clamp> inline float exp_diff_double(float a, float b) {
  double d = static_cast<double>(a) - static_cast<double>(b);
  const bool zero = d < -104.0;
  d = zero ? 0.0 : d;
  if (Clamp) d = d > 100.0 ? 100.0 : d;
  const float e = static_cast<float>(exp_double(d));
  return zero ? 0.0f : e;
}

#if defined(AK_ISA_HAS_XSIMD) && defined(__SSE2__)
// exp(d) for two doubles d in [-180, 100] or NaN: exp_double's steps, two
// lanes at a time.
inline __m128d exp_pd_sse2(__m128d d) {
  const __m128d shifter = _mm_set1_pd(kExpShifter);
  const __m128d t = _mm_add_pd(_mm_mul_pd(d, _mm_set1_pd(kLog2e)), shifter);
  const __m128d n = _mm_sub_pd(t, shifter);
  __m128d r = _mm_sub_pd(d, _mm_mul_pd(n, _mm_set1_pd(kLn2Hi)));
  r = _mm_sub_pd(r, _mm_mul_pd(n, _mm_set1_pd(kLn2Lo)));
  const auto c = [](double v) { return _mm_set1_pd(v); };
  const auto pair = [&](double c0, double c1) { return _mm_add_pd(c(c0), _mm_mul_pd(c(c1), r)); };
  const __m128d r2 = _mm_mul_pd(r, r), r4 = _mm_mul_pd(r2, r2), r8 = _mm_mul_pd(r4, r4);
  const __m128d p03 = _mm_add_pd(pair(1.0, 1.0), _mm_mul_pd(r2, pair(1.0 / 2, 1.0 / 6)));
  const __m128d p47 =
      _mm_add_pd(pair(1.0 / 24, 1.0 / 120), _mm_mul_pd(r2, pair(1.0 / 720, 1.0 / 5040)));
  const __m128d p =
      _mm_add_pd(_mm_add_pd(p03, _mm_mul_pd(r4, p47)), _mm_mul_pd(r8, c(1.0 / 40320)));
  // t's low bits hold n in two's complement: t - shifter as integers is n
  const __m128i ni = _mm_sub_epi64(_mm_castpd_si128(t), _mm_castpd_si128(shifter));
  const __m128i bits = _mm_slli_epi64(_mm_add_epi64(ni, _mm_set1_epi64x(1023)), 52);
  return _mm_mul_pd(p, _mm_castsi128_pd(bits));
}

// exp(a - b) for four floats: the difference in double (exact for the
// arguments softmax meets; otherwise off by 2^-53 of it) and rounded to
// float once. Clamp: any a and b, the difference first clamped to where
// the float result is 0 or +inf (maxpd and minpd return their second
// operand, d, when it is NaN); without, a - b must lie in [-180, 100].
// Lanes below -104 are zeroed in double before the rounding to float, whose
// underflow would cost an assist on Intel cores (kExpZeroBelow).
template <bool Clamp> inline __m128 exp_diff_ps_sse2(__m128 a, __m128 b) {
  const auto half = [](__m128 x, __m128 y) {
    __m128d d = _mm_sub_pd(_mm_cvtps_pd(x), _mm_cvtps_pd(y));
    const __m128d keep = _mm_cmpnlt_pd(d, _mm_set1_pd(-104.0)); // (NaN: kept)
    if (Clamp) d = _mm_min_pd(_mm_set1_pd(100.0), _mm_max_pd(_mm_set1_pd(-110.0), d));
    return _mm_cvtpd_ps(_mm_and_pd(keep, exp_pd_sse2(d)));
  };
  return _mm_movelh_ps(half(a, b), half(_mm_movehl_ps(a, a), _mm_movehl_ps(b, b)));
}
#endif

// exp(a - b) in double for the instruction sets of exp_in_double (Clamp as
// exp_diff_double's).
template <class V, bool Clamp>
inline typename V::reg exp_diff_in_double(typename V::reg a, typename V::reg b) {
  if constexpr (V::width == 1) {
    return exp_diff_double<Clamp>(a, b);
  } else {
#if defined(AK_ISA_HAS_XSIMD) && defined(__SSE2__)
    return typename V::reg(exp_diff_ps_sse2<Clamp>(a, b));
#else
    static_assert(V::width == 1, "exp_in_double covers scalar and SSE2 alone");
#endif
  }
}

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

// Where exp rounds to 0 (arguments below -104, and -inf above all: masked
// keys, padding lanes, softmax rows' masked entries), computing it through
// underflows in the scaling, and on Intel cores an underflowing multiply or
// vscalefps takes a slow microcode assist (FTZ is off, as it must be for
// the subnormal results of [-104, -87.3]). So such lanes never underflow
// here:
// - AVX-512: they are left out by a mask (exp_keep) and the scaling's zero
//   mask writes their 0; the compare replaces the clamp's max, so this is
//   free;
// - AVX2 and NEON: the clamp's floor is kExpZeroFloor, where n = -254
//   splits into two factors 2^-127, whose bits are those of +0.0: p * 0 * 0
//   is an exact 0 (the floor only moved: free too);
// - SSE2 and scalar (exps in double): such lanes are zeroed in double before
//   the rounding to float (exp_diff_double, exp_diff_ps_sse2).
// Same bits as before: those lanes were 0 before too. On AVX2 and NEON,
// lanes in (-176, -104) still underflow (finite scores 104 to 176 below the
// row's maximum: rare). Rows with -inf entries gain several times
// (docs/tuning.md).
constexpr float kExpZeroBelow = -104.0f, kExpZeroFloor = -176.0f;

// p * 2^n for an integral n in [-152, 128], rounded once: results in the
// subnormal range are correctly rounded and past FLT_MAX become +inf; and
// for n = -254 (kExpZeroFloor), an exact 0 without an underflow.
template <class V> inline typename V::reg vexp_scale(typename V::reg p, typename V::reg n) {
  using reg = typename V::reg;
#if defined(__AVX512F__)
  // vscalefps does exactly this in one instruction.
  if constexpr (V::width == 16) return reg(_mm512_scalef_ps(p, n));
#endif
  // Two factors 2^n1 * 2^n2, each a normal number for n in [-152, 128]
  // (and the bits of +0.0 for n = -254).
  const reg n1 = V::round(V::mul(n, V::set1(0.5f)));
  return V::mul(V::mul(p, V::pow2i(n1)), V::pow2i(V::sub(n, n1)));
}

#if defined(__AVX512F__)
// Lanes of x not below lim; a NaN lane is kept (and stays NaN).
inline __mmask16 exp_keep(__m512 x, float lim) {
  return _mm512_cmp_ps_mask(x, _mm512_set1_ps(lim), _CMP_NLT_UQ);
}
// p * 2^n in the lanes of keep, 0 in the others.
inline __m512 vexp_scale_keep(__mmask16 keep, __m512 p, __m512 n) {
  return _mm512_maskz_scalef_ps(keep, p, n);
}
#endif

// x = n ln2 + r with an integral n and |r| <= ln2 / 2 (plus rounding).
template <class V>
inline void vexp_split(typename V::reg x, typename V::reg &n, typename V::reg &r) {
  n = V::round(V::mul(x, V::set1(1.44269504088896341f)));
  r = V::fmadd(n, V::set1(-0.693359375f), x);
  r = V::fmadd(n, V::set1(2.12194440e-4f), r);
}

// exp(x + lo) for x in [-176.3, 88.75] or NaN and a finite |lo| <= ulp(x):
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
// here); below -104 the scaled result rounds to 0 (kExpZeroFloor: exactly,
// with no underflow), above 88.75 to +inf. lo is dropped where x is below
// -104 or above 88.75, where it can be as large as half an ulp of a huge x
// (x = -1e20 carries lo up to 2^42, which would wreck the reduction: NaN for
// 1e20-scale softmax inputs before), and where it is NaN (an infinite x, see
// vexp_diff).
template <class V> inline typename V::reg vexp_clamp(typename V::reg x) {
  return V::min(V::set1(88.75f), V::max(V::set1(kExpZeroFloor), x));
}

#if defined(__AVX512F__)
// exp(x + lo) (exp(x) without WithLo) for any x on AVX-512: the clamp at
// 88.75, and the lanes below -104 left out (exp_keep).
template <class V, bool WithLo>
inline typename V::reg vexp_avx512(typename V::reg x, typename V::reg lo) {
  using reg = typename V::reg;
  const __mmask16 keep = exp_keep(x, kExpZeroBelow);
  reg n, r;
  vexp_split<V>(reg(_mm512_maskz_min_ps(keep, _mm512_set1_ps(88.75f), x)), n, r);
  return reg(vexp_scale_keep(keep, vexp_poly<V>(WithLo ? V::add(r, lo) : r), n));
}
#endif

template <class V> inline typename V::reg vexp_corrected(typename V::reg x, typename V::reg lo) {
  lo = V::lt_select(x, V::set1(kExpZeroBelow), V::zero(), lo);
  lo = V::lt_select(V::set1(88.75f), x, V::zero(), lo);
  lo = V::nan_select(lo, V::zero(), lo);
#if defined(__AVX512F__)
  if constexpr (V::width == 16) return vexp_avx512<V, true>(x, lo);
#endif
  return vexp_reduced<V>(vexp_clamp<V>(x), lo);
}

// (Scalar: in double, as softmax's exps there, which is also faster: its
// float method rounds by a library call on baseline x86-64;
// docs/tuning.md.)
template <class V> inline typename V::reg vexp(typename V::reg x) {
  if constexpr (V::width == 1) return exp_diff_in_double<V, true>(x, V::zero());
#if defined(__AVX512F__)
  if constexpr (V::width == 16) return vexp_avx512<V, false>(x, V::zero());
#endif
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
  if constexpr (exp_in_double<V>()) return exp_diff_in_double<V, true>(a, b);
  typename V::reg s, err;
  two_diff<V>(a, b, s, err);
  return vexp_corrected<V>(s, err);
}

// Softmax's exp(x - m) for x <= m, in fewer operations than vexp_diff, valid
// for a finite m with |m| <= kShiftedExpMaxShift. floor = m - kShiftedExpFloor,
// computed once per row: raising x to it turns -inf into a finite argument
// (so no clamp or NaN test is needed after it) and changes no result, since
// exp of anything below -104 rounds to 0 anyway; floor - m is within
// 2^-7 of -176, where the two-factor scaling makes an exact 0 with no
// underflow (kExpZeroFloor). AVX-512 leaves the lanes below -104 out instead
// (exp_keep) and needs no floor. A NaN x stays NaN.
constexpr float kShiftedExpFloor = -kExpZeroFloor, kShiftedExpMaxShift = 65536.0f;
template <class V>
inline typename V::reg vexp_shifted(typename V::reg x, typename V::reg m, typename V::reg floor) {
  if constexpr (exp_in_double<V>()) return exp_diff_in_double<V, false>(V::max(floor, x), m);
  typename V::reg s, err;
#if defined(__AVX512F__)
  if constexpr (V::width == 16) { // lanes below -104 left out (exp_keep)
    two_diff<V>(x, m, s, err);    // (a left-out lane's may be NaN: never scaled)
    const __mmask16 keep = exp_keep(s, kExpZeroBelow);
    typename V::reg n, r;
    vexp_split<V>(s, n, r);
    return typename V::reg(vexp_scale_keep(keep, vexp_poly<V>(V::add(r, err)), n));
  }
#endif
  two_diff<V>(V::max(floor, x), m, s, err);
  return vexp_reduced<V>(s, err);
}

// Softmax's exp(x) for a row whose maximum m is in [0, kUnshiftedExpMax]
// (see unshifted_row in softmax/softmax_row_reduce.hpp): no shift to
// subtract, so no rounding error to carry. floor = set1(-kShiftedExpFloor):
// raising x to it turns -inf into a finite argument, which makes an exact 0
// (see vexp_shifted). AVX-512 leaves the lanes below -104 out instead. A
// NaN x stays NaN.
constexpr float kUnshiftedExpMax = 64.0f;
template <class V> inline typename V::reg vexp_unshifted(typename V::reg x, typename V::reg floor) {
  if constexpr (exp_in_double<V>())
    return exp_diff_in_double<V, false>(V::max(floor, x), V::zero());
  typename V::reg n, r;
#if defined(__AVX512F__)
  if constexpr (V::width == 16) { // lanes below -104 left out (exp_keep)
    const __mmask16 keep = exp_keep(x, kExpZeroBelow);
    vexp_split<V>(x, n, r); // (a left-out lane's may be NaN: never scaled)
    return typename V::reg(vexp_scale_keep(keep, vexp_poly<V>(r), n));
  }
#endif
  vexp_split<V>(V::max(floor, x), n, r);
  return vexp_scale<V>(vexp_poly<V>(r), n);
}

} // namespace AK_ISA_NS
} // namespace attnkern
