// Scalar conversions between fp32 and the 16-bit storage types (f16, IEEE
// binary16; bf16, fp32's upper half), exact to ak_convert's contract: round
// to nearest even, f16 overflow to +-inf, f16 subnormals kept, NaN kept (as a
// quiet NaN with its sign and upper payload bits). The vector kernels
// (convert_kernels.hpp, widen.hpp) give the same bits; these serve the
// scalar instruction set, the vector tails and the ISAs without a
// conversion instruction.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace attnkern {

enum class DType : int { f32 = 0, f16 = 1, bf16 = 2 };

inline int dtype_size(DType t) { return t == DType::f32 ? 4 : 2; }

inline std::uint32_t float_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float bits_float(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline float bf16_to_float(std::uint16_t h) { return bits_float(std::uint32_t{h} << 16); }

inline std::uint16_t float_to_bf16(float f) {
  const std::uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) // NaN: truncate, and set the quiet bit
    return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
  return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

inline float f16_to_float(std::uint16_t h) {
  const std::uint32_t sign = std::uint32_t{h & 0x8000u} << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0) { // zero or subnormal: mant * 2^-24, exact in fp32
    const float mag = static_cast<float>(mant) * 5.9604644775390625e-8f;
    return bits_float(float_bits(mag) | sign);
  }
  if (exp == 31) // inf; NaN quieted, as the conversion instructions do
    return bits_float(sign | 0x7f800000u | (mant << 13) | (mant ? 0x00400000u : 0u));
  return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
}

inline std::uint16_t float_to_f16(float f) {
  const std::uint32_t u = float_bits(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const std::uint32_t x = u & 0x7fffffffu;
  if (x > 0x7f800000u) // NaN: quiet, upper payload bits kept
    return static_cast<std::uint16_t>(sign | 0x7e00u | ((x >> 13) & 0x3ffu));
  if (x >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u); // >= 65520: inf
  if (x < 0x38800000u) { // below 2^-14: a subnormal (or 0), in units of 2^-24
    const float units = bits_float(x) * 16777216.0f; // exact: scaling by 2^24
    return static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(std::nearbyint(units)));
  }
  // Normal: round the mantissa to 10 bits (a carry moves into the exponent)
  // and rebias the exponent from 127 to 15.
  const std::uint32_t r = (x + 0xfffu + ((x >> 13) & 1u)) >> 13;
  return static_cast<std::uint16_t>(sign | (r - (112u << 10)));
}

inline float half_to_float(DType t, std::uint16_t h) {
  return t == DType::bf16 ? bf16_to_float(h) : f16_to_float(h);
}
inline std::uint16_t float_to_half(DType t, float f) {
  return t == DType::bf16 ? float_to_bf16(f) : float_to_f16(f);
}

} // namespace attnkern
