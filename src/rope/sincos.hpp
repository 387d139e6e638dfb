// sin and cos of position * inv_freq[i] for a block of frequencies: the
// angle is formed and reduced in double, and only the reduced angle, within
// pi/4 of zero, goes to float for the polynomials, which run on this
// instruction set's vectors.
//
// Why in double: engines that form the angle in fp32 are off by up to half
// an ulp of the angle, 0.03 rad at position 2^20. Here a position (31 bits)
// times an inv_freq (24 bits) is exact or within 2^-53 relative, and the
// reduction keeps that: the error left is float's rounding of the reduced
// angle and of the polynomials, a few 1e-7.
#pragma once

#include <cmath>
#include <cstdint>

namespace attnkern {
namespace AK_ISA_NS {

// Frequencies per block: a multiple of every vector width, and small enough
// that a block's tables stay in L1 while every head of a token uses them.
constexpr std::int64_t kRopeBlock = 128;

// pi/2 in four parts: the first three have 21 significant bits, so that
// n * part is exact for any quadrant count |n| < 2^32 (Cody-Waite), the last
// the rest (their sum is pi/2 within 1e-36).
constexpr double kHalfPi1 = 0x1.921fbp+0;
constexpr double kHalfPi2 = 0x1.5110bp-22;
constexpr double kHalfPi3 = 0x1.18469p-44;
constexpr double kHalfPi4 = 0x1.13198a2e03707p-65;
constexpr double kTwoOverPi = 0x1.45f306dc9c883p-1;

// One angle as a float within pi/4 of zero, plus its quadrant: whether sin
// and cos trade places (`swap`, 0 or 1) and the sign of each.
struct ReducedAngle {
  float r, swap, sign_sin, sign_cos;
};

inline ReducedAngle reduce_angle(double angle) {
  // Round to nearest with the 1.5 * 2^52 trick (no libm call on any
  // instruction set); past 2^51 the angle is already far outside the range
  // where its value means anything, and nearbyint is only there to keep n
  // an integer.
  const double q = angle * kTwoOverPi;
  const double n = std::fabs(q) < 0x1p51 ? (q + 0x1.8p52) - 0x1.8p52 : std::nearbyint(q);
  double r = angle - n * kHalfPi1;
  r -= n * kHalfPi2;
  r -= n * kHalfPi3;
  r -= n * kHalfPi4;
  // Only for |n| >= 2^32 (angles past 6.7e9) can r leave [-pi/4, pi/4] by
  // more than rounding; there the result is bounded, not accurate. NaN
  // (a NaN or infinite inv_freq) passes through.
  if (r > 1.0) r = 1.0;
  if (r < -1.0) r = -1.0;
  // n mod 4 (two's complement & 3 is the non-negative residue); a NaN n
  // takes quadrant 0.
  const int quadrant =
      std::fabs(n) < 0x1p62 ? static_cast<int>(static_cast<std::int64_t>(n) & 3) : 0;
  // sin(r + k pi/2): k = 0: (sin r, cos r); 1: (cos r, -sin r); 2: (-sin r,
  // -cos r); 3: (-cos r, sin r).
  ReducedAngle out;
  out.r = static_cast<float>(r);
  out.swap = static_cast<float>(quadrant & 1);
  out.sign_sin = quadrant >= 2 ? -1.0f : 1.0f;
  out.sign_cos = quadrant == 1 || quadrant == 2 ? -1.0f : 1.0f;
  return out;
}

// Taylor polynomials: on |r| <= pi/4 the first term left out is below 2e-9,
// far under float's rounding, so the plain coefficients serve. Multiplies
// and adds, never fused: every instruction set gives the same bits.
template <class V> typename V::reg sin_poly(typename V::reg r) {
  const auto r2 = V::mul(r, r);
  auto p = V::set1(1.0f / 362880.0f);
  p = V::add(V::mul(p, r2), V::set1(-1.0f / 5040.0f));
  p = V::add(V::mul(p, r2), V::set1(1.0f / 120.0f));
  p = V::add(V::mul(p, r2), V::set1(-1.0f / 6.0f));
  return V::add(V::mul(V::mul(p, r2), r), r);
}

template <class V> typename V::reg cos_poly(typename V::reg r) {
  const auto r2 = V::mul(r, r);
  auto p = V::set1(-1.0f / 3628800.0f);
  p = V::add(V::mul(p, r2), V::set1(1.0f / 40320.0f));
  p = V::add(V::mul(p, r2), V::set1(-1.0f / 720.0f));
  p = V::add(V::mul(p, r2), V::set1(1.0f / 24.0f));
  p = V::add(V::mul(p, r2), V::set1(-0.5f));
  return V::add(V::mul(p, r2), V::set1(1.0f));
}

// cos_out[i], sin_out[i] of position * inv_freq[i] for i < n <= kRopeBlock.
// The arrays hold kRopeBlock floats; lanes past n are filled but meaningless.
template <class V>
void sincos_block(double position, const float *inv_freq, std::int64_t n, float *cos_out,
                  float *sin_out) {
  alignas(64) float r[kRopeBlock], swap[kRopeBlock], sign_sin[kRopeBlock], sign_cos[kRopeBlock];
  const std::int64_t padded = (n + V::width - 1) / V::width * V::width;
  for (std::int64_t i = 0; i < padded; ++i) {
    const ReducedAngle a = reduce_angle(i < n ? position * static_cast<double>(inv_freq[i]) : 0.0);
    r[i] = a.r;
    swap[i] = a.swap;
    sign_sin[i] = a.sign_sin;
    sign_cos[i] = a.sign_cos;
  }
  const auto half = V::set1(0.5f);
  for (std::int64_t i = 0; i < padded; i += V::width) {
    const auto x = V::loadu(r + i), sw = V::loadu(swap + i);
    const auto s = sin_poly<V>(x), c = cos_poly<V>(x);
    V::storeu(sin_out + i, V::mul(V::lt_select(sw, half, s, c), V::loadu(sign_sin + i)));
    V::storeu(cos_out + i, V::mul(V::lt_select(sw, half, c, s), V::loadu(sign_cos + i)));
  }
}

} // namespace AK_ISA_NS
} // namespace attnkern
