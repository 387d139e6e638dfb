// The modifiers of a score row (attnkern.h, "order inside a score"): the
// softcap, cap * tanh(s / cap), then the bias and ALiBi's
// slope * (j - diagonal). Vectorized, lane by lane: a score's value does not
// depend on where a vector starts, so the blocks and their tails give the
// same bits whatever the thread count.
#pragma once

#include <cfloat>
#include <cstdint>
#include <limits>

#include "../simd.hpp"
#include "../vexp.hpp"

namespace attnkern {
namespace AK_ISA_NS {

// tanh(x), within about 2.2 ulp of float64 (tests/test_exp.cpp checks the
// softcap built on it, per instruction set, within 3.5 ulp). Two formulas,
// chosen per lane:
//   |x| < 0.5:  x + x^3 p(x^2), the Taylor series to x^17 (the first term
//               left out is below 1e-9 of x there): no cancellation near 0;
//   |x| >= 0.5: (1 - e) / (1 + e) with e = exp(-2|x|): 1 - e >= 0.63, so
//               exp's error is not magnified; +-inf give +-1, NaN stays NaN.
// Most scores of a softcapped model lie well inside the cap (|x| < 0.5), so
// a vector whose lanes all do skips the exponential and the division.
template <class V> inline typename V::reg vtanh(typename V::reg x) {
  using reg = typename V::reg;
  const reg ax = V::max(x, V::sub(V::zero(), x));
  const reg half = V::set1(0.5f);
  const reg x2 = V::mul(x, x);
  // Taylor coefficients of tanh(x)/x in x^2, from x^16 down to x^2.
  reg p = V::set1(6404582.0f / 10854718875.0f);
  p = V::fmadd(p, x2, V::set1(-929569.0f / 638512875.0f));
  p = V::fmadd(p, x2, V::set1(21844.0f / 6081075.0f));
  p = V::fmadd(p, x2, V::set1(-1382.0f / 155925.0f));
  p = V::fmadd(p, x2, V::set1(62.0f / 2835.0f));
  p = V::fmadd(p, x2, V::set1(-17.0f / 315.0f));
  p = V::fmadd(p, x2, V::set1(2.0f / 15.0f));
  p = V::fmadd(p, x2, V::set1(-1.0f / 3.0f));
  const reg small = V::fmadd(V::mul(p, x2), x, x);
  // Lanes that are not below 0.5 (NaN included: it fails the comparison,
  // takes the second formula and stays NaN) are 1 here.
  const reg one = V::set1(1.0f);
  if (!V::any_lt(V::zero(), V::lt_select(ax, half, V::zero(), one))) return small;
  const reg e = vexp<V>(V::mul(V::set1(-2.0f), ax));
  const reg big = V::div(V::sub(one, e), V::add(one, e));
  const reg signed_big = V::lt_select(x, V::zero(), V::sub(V::zero(), big), big);
  return V::lt_select(ax, half, small, signed_big);
}

// s[0, n) = cap * tanh(s / cap). The quotient is a product with 1 / cap,
// except for a subnormal cap, whose reciprocal is infinite (0 * inf would
// turn a zero score into NaN): a choice of the cap's alone.
template <class V> inline void softcap_scores(float *s, std::int64_t n, float cap) {
  using reg = typename V::reg;
  constexpr int W = V::width;
  const float inv = 1.0f / cap;
  const bool by_product = inv < std::numeric_limits<float>::infinity();
  const reg vcap = V::set1(cap), vinv = V::set1(inv);
  const auto one = [&](reg x) {
    return V::mul(vcap, vtanh<V>(by_product ? V::mul(x, vinv) : V::div(x, vcap)));
  };
  std::int64_t j = 0;
  for (; j + W <= n; j += W) V::storeu(s + j, one(V::loadu(s + j)));
  if (j < n) { // the tail, through a vector of its own
    float t[W] = {};
    for (std::int64_t x = j; x < n; ++x) t[x - j] = s[x];
    V::storeu(t, one(V::loadu(t)));
    for (std::int64_t x = j; x < n; ++x) s[x] = t[x - j];
  }
}

// s[j] = (s[j] + bias[j]) + slope * (pos0 + j) for j < n; bias or ALiBi may
// be absent (null bias, alibi false). A -inf bias masks its key whatever the
// score (also NaN: a poisoned K row the caller masked) and the slope.
template <class V>
inline void add_bias_alibi(float *s, std::int64_t n, const float *bias, bool alibi, float slope,
                           std::int64_t pos0) {
  using reg = typename V::reg;
  constexpr int W = V::width;
  alignas(64) static constexpr float kIota[16] = {0, 1, 2,  3,  4,  5,  6,  7,
                                                  8, 9, 10, 11, 12, 13, 14, 15};
  static_assert(W <= 16, "kIota holds a vector's lane offsets");
  const float ninf = -std::numeric_limits<float>::infinity();
  const reg vslope = V::set1(slope), iota = V::loadu(kIota), lowest = V::set1(-FLT_MAX);
  const reg vninf = V::set1(ninf);
  std::int64_t j = 0;
  for (; j + W <= n; j += W) {
    reg x = V::loadu(s + j);
    reg b = V::zero();
    if (bias) b = V::loadu(bias + j), x = V::add(x, b);
    if (alibi) {
      // Key distances as floats: exact below 2^24 keys, as in float64 (past
      // it the lanes and the tail may round apart by an ulp).
      const reg pos = V::add(V::set1(static_cast<float>(pos0 + j)), iota);
      x = V::add(x, V::mul(vslope, pos));
    }
    if (bias) x = V::lt_select(b, lowest, vninf, x);
    V::storeu(s + j, x);
  }
  for (; j < n; ++j) {
    float x = s[j];
    if (bias) x += bias[j];
    if (alibi) x += slope * static_cast<float>(pos0 + j);
    if (bias && bias[j] == ninf) x = ninf;
    s[j] = x;
  }
}

} // namespace AK_ISA_NS
} // namespace attnkern
