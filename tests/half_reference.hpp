// References for the 16-bit storage types, written from the formats'
// definitions and sharing no code with the library (src/convert/half.hpp):
// a value is decoded from its sign, exponent and mantissa in double, and an
// fp32 value is rounded by finding its two neighbours on the grid of the
// type's values and taking the nearer, the one with the even encoding on a
// tie. Header-only, so that the unit tests and the fuzz replays share it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "attnkern.h"

namespace ak_test {

// The value of the 16-bit encoding h of type t (AK_F16: 1 sign, 5 exponent,
// 10 mantissa bits, bias 15; AK_BF16: 1, 8, 7, bias 127). NaN for the NaNs.
inline double ref_widen(ak_dtype t, std::uint16_t h) {
  const int mant_bits = t == AK_F16 ? 10 : 7;
  const int exp_max = t == AK_F16 ? 31 : 255, bias = t == AK_F16 ? 15 : 127;
  const int mant = h & ((1 << mant_bits) - 1), exp = (h & 0x7fff) >> mant_bits;
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (exp == exp_max) return mant ? std::nan("") : sign * INFINITY;
  if (exp == 0) return sign * std::ldexp(mant, 1 - bias - mant_bits);
  return sign * std::ldexp(mant + (1 << mant_bits), exp - bias - mant_bits);
}

// The non-negative values of type t, increasing, indexed by their encoding:
// every finite one, then the value one step past the largest (2^16 for f16,
// 2^128 for bf16), which is where inf sits in the rounding.
inline std::vector<double> make_grid(ak_dtype t) {
  const std::uint16_t inf = t == AK_F16 ? 0x7c00 : 0x7f80;
  std::vector<double> g;
  for (std::uint16_t h = 0; h < inf; ++h) g.push_back(ref_widen(t, h));
  g.push_back(t == AK_F16 ? 65536.0 : std::ldexp(1.0, 128));
  return g;
}
inline const std::vector<double> &f16_grid() {
  static const std::vector<double> g = make_grid(AK_F16);
  return g;
}
inline const std::vector<double> &bf16_grid() {
  static const std::vector<double> g = make_grid(AK_BF16);
  return g;
}

// x rounded to type t, to nearest with ties to even; past the grid's last
// step (and inf itself) +-inf. A NaN stays a quiet NaN with its sign and the
// upper bits of its payload (those that fit), as IEEE 754's conversions and
// the hardware's keep them.
inline std::uint16_t ref_narrow(ak_dtype t, float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  const std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  if (std::isnan(x)) {
    if (t == AK_F16) return static_cast<std::uint16_t>(sign | 0x7e00u | ((u >> 13) & 0x3ffu));
    return static_cast<std::uint16_t>(sign | 0x7fc0u | ((u >> 16) & 0x7fu));
  }
  const std::vector<double> &g = t == AK_F16 ? f16_grid() : bf16_grid();
  const double a = std::fabs(static_cast<double>(x));
  const auto it = std::lower_bound(g.begin(), g.end(), a);
  std::size_t k;
  if (it == g.end()) {
    k = g.size() - 1; // inf
  } else if (*it == a || it == g.begin()) {
    k = static_cast<std::size_t>(it - g.begin());
  } else {
    const std::size_t hi = static_cast<std::size_t>(it - g.begin()), lo = hi - 1;
    const double mid = (g[lo] + g[hi]) / 2; // exact: neighbours on a binary grid
    k = a < mid ? lo : a > mid ? hi : (lo % 2 == 0 ? lo : hi);
  }
  return static_cast<std::uint16_t>(sign | k);
}

} // namespace ak_test
