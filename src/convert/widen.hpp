// Widening a row of f16 or bf16 (or fp32) values to fp32, for the kernels
// that read half-precision K/V caches: bf16 by a 16-bit shift, f16 by the
// conversion instruction where the instruction set has one (AVX-512 and
// AVX2 with F16C: vcvtph2ps; NEON: fcvtl), else half.hpp's exact scalar
// conversion. Widening is exact, so every path gives the same bits.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../simd.hpp"
#include "half.hpp"
#include "vector_stores.hpp"

namespace attnkern {
namespace AK_ISA_NS {

// dst[i] = (float)src[i] for i < n, src of type t. Stream: streaming
// stores (vector_stores.hpp; dst 64-byte aligned).
template <class V, bool Stream = false>
inline void widen_row(DType t, const void *src, float *dst, std::int64_t n) {
  if (t == DType::f32) {
    std::memcpy(dst, src, static_cast<std::size_t>(n) * sizeof(float));
    return;
  }
  const auto *s = static_cast<const std::uint16_t *>(src);
  std::int64_t i = 0;
#if defined(AK_ISA_HAS_XSIMD) && defined(__AVX512F__)
  if constexpr (V::width == 16) {
    if (t == DType::bf16) {
      for (; i + 16 <= n; i += 16) {
        const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(s + i));
        store_vector<Stream>(dst + i,
                             _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)));
      }
    } else {
      for (; i + 16 <= n; i += 16)
        store_vector<Stream>(
            dst + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(s + i))));
    }
  }
#endif
#if defined(AK_ISA_HAS_XSIMD) && defined(__AVX2__) && defined(__F16C__)
  if constexpr (V::width >= 8) {
    if (t == DType::bf16) {
      for (; i + 8 <= n; i += 8) {
        const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i *>(s + i));
        store_vector<Stream>(dst + i,
                             _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)));
      }
    } else {
      for (; i + 8 <= n; i += 8)
        store_vector<Stream>(
            dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(s + i))));
    }
  }
#endif
#if defined(AK_ISA_HAS_XSIMD) && defined(__SSE2__)
  if constexpr (V::width == 4) {
    if (t == DType::bf16) {
      const __m128i zero = _mm_setzero_si128();
      for (; i + 8 <= n; i += 8) {
        const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i *>(s + i));
        store_vector<Stream>(dst + i, _mm_unpacklo_epi16(zero, h));
        store_vector<Stream>(dst + i + 4, _mm_unpackhi_epi16(zero, h));
      }
    }
  }
#endif
#if defined(AK_ISA_HAS_XSIMD) && defined(__ARM_NEON)
  if constexpr (V::width == 4) {
    if (t == DType::bf16) {
      for (; i + 4 <= n; i += 4)
        vst1q_u32(reinterpret_cast<std::uint32_t *>(dst + i), vshll_n_u16(vld1_u16(s + i), 16));
    } else {
      for (; i + 4 <= n; i += 4)
        vst1q_f32(dst + i, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(s + i))));
    }
  }
#endif
  for (; i < n; ++i) dst[i] = half_to_float(t, s[i]);
}

// Element types of K/V rows the direct attention kernels read in place:
// float, or a 16-bit storage type, each widened as it is loaded (load_as).
struct Bf16 {
  std::uint16_t bits;
};
struct F16 {
  std::uint16_t bits;
};
inline float elem_float(float x) { return x; }
inline float elem_float(Bf16 x) { return bf16_to_float(x.bits); }
inline float elem_float(F16 x) { return f16_to_float(x.bits); }

// Whether this instruction set widens a vector of 16-bit values in
// registers (load_as below); elsewhere half-precision rows are staged.
template <class V> constexpr bool widens_in_registers() {
#if defined(AK_ISA_HAS_XSIMD) && defined(__AVX2__) && defined(__F16C__)
  return V::width >= 8;
#else
  return false;
#endif
}

// V::width elements at p as fp32 (exactly).
template <class V> AK_ALWAYS_INLINE typename V::reg load_as(const float *p) { return V::loadu(p); }
template <class V, class T> AK_ALWAYS_INLINE typename V::reg load_as(const T *p) {
  static_assert(sizeof(T) == 2, "a 16-bit storage type");
#if defined(AK_ISA_HAS_XSIMD) && defined(__AVX512F__)
  if constexpr (V::width == 16) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p));
    if constexpr (std::is_same_v<T, Bf16>)
      return typename V::reg(_mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)));
    else
      return typename V::reg(_mm512_cvtph_ps(h));
  }
#endif
#if defined(AK_ISA_HAS_XSIMD) && defined(__AVX2__) && defined(__F16C__)
  if constexpr (V::width == 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i *>(p));
    if constexpr (std::is_same_v<T, Bf16>)
      return typename V::reg(_mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)));
    else
      return typename V::reg(_mm256_cvtph_ps(h));
  }
#endif
  alignas(64) float f[V::width];
  for (int i = 0; i < V::width; ++i) f[i] = elem_float(p[i]);
  return V::loadu(f);
}

} // namespace AK_ISA_NS
} // namespace attnkern
