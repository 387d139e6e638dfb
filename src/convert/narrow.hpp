// Narrowing a row of fp32 values to f16 or bf16, bit for bit as half.hpp's
// float_to_f16 / float_to_bf16 round them (ak_convert's contract), on every
// instruction set:
// - f16: the conversion instruction where there is one (AVX-512 and AVX2
//   with F16C: vcvtps2ph with the rounding mode in the immediate, so MXCSR
//   cannot change it; NEON: fcvtn), else half.hpp's scalar conversion. The
//   instructions quiet a NaN and keep its sign and upper payload, as
//   float_to_f16 does.
// - bf16: integer arithmetic, the same rounding as float_to_bf16: add
//   0x7fff plus the kept part's lowest bit, keep the upper half; a NaN takes
//   its upper half with the quiet bit set instead, so that no payload can
//   round it into inf. (AVX512_BF16's vcvtneps2bf16 is not used: it flushes
//   subnormals to zero, and the avx512 translation unit is built without it.)
// Tails shorter than a vector go through half.hpp.
#pragma once

#include <cstdint>
#include <cstring>

#include "../simd.hpp"
#include "half.hpp"
#include "vector_stores.hpp"

namespace attnkern {
namespace AK_ISA_NS {

#if defined(AK_ISA_HAS_XSIMD) && defined(__AVX512F__)
// The bf16 bits of 16 floats, in the upper halves of 32-bit lanes.
inline __m512i bf16_round_512(__m512i u) {
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb);
  const __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                                _mm512_set1_epi32(0x7f800000));
  return _mm512_mask_or_epi32(rounded, nan, u, _mm512_set1_epi32(0x00400000));
}
#endif

#if defined(AK_ISA_HAS_XSIMD) && defined(__AVX2__)
inline __m256i bf16_round_256(__m256i u) {
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb);
  const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)),
                                         _mm256_set1_epi32(0x7f800000));
  const __m256i quiet = _mm256_or_si256(u, _mm256_set1_epi32(0x00400000));
  return _mm256_blendv_epi8(rounded, quiet, nan);
}
#endif

#if defined(AK_ISA_HAS_XSIMD) && defined(__SSE2__)
inline __m128i bf16_round_128(__m128i u) {
  const __m128i lsb = _mm_and_si128(_mm_srli_epi32(u, 16), _mm_set1_epi32(1));
  const __m128i rounded = _mm_add_epi32(_mm_add_epi32(u, _mm_set1_epi32(0x7fff)), lsb);
  const __m128i nan =
      _mm_cmpgt_epi32(_mm_and_si128(u, _mm_set1_epi32(0x7fffffff)), _mm_set1_epi32(0x7f800000));
  const __m128i quiet = _mm_or_si128(u, _mm_set1_epi32(0x00400000));
  return _mm_or_si128(_mm_and_si128(nan, quiet), _mm_andnot_si128(nan, rounded));
}
// Eight such lanes packed to their upper halves. The arithmetic shift makes
// each lane a valid int16, so the signed saturating pack keeps its bits.
inline __m128i bf16_pack_128(__m128i lo, __m128i hi) {
  return _mm_packs_epi32(_mm_srai_epi32(lo, 16), _mm_srai_epi32(hi, 16));
}
#endif

// dst[i] = src[i] rounded to t (f16 or bf16) for i < n; dst holds n 16-bit
// values. Stream: streaming stores (vector_stores.hpp; dst 64-byte aligned).
template <class V, bool Stream = false>
inline void narrow_row(DType t, const float *src, std::uint16_t *dst, std::int64_t n) {
  std::int64_t i = 0;
#if defined(AK_ISA_HAS_XSIMD) && defined(__AVX512F__)
  if constexpr (V::width == 16) {
    if (t == DType::bf16) {
      for (; i + 16 <= n; i += 16) {
        request_source_ahead<Stream>(src + i);
        const __m512i u = _mm512_castps_si512(_mm512_loadu_ps(src + i));
        const __m512i r = _mm512_srli_epi32(bf16_round_512(u), 16);
        store_vector<Stream>(dst + i, _mm512_cvtepi32_epi16(r));
      }
    } else {
      for (; i + 16 <= n; i += 16) {
        request_source_ahead<Stream>(src + i);
        store_vector<Stream>(dst + i,
                             _mm512_cvtps_ph(_mm512_loadu_ps(src + i),
                                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
      }
    }
  }
#endif
#if defined(AK_ISA_HAS_XSIMD) && defined(__AVX2__) && defined(__F16C__)
  if constexpr (V::width == 8) {
    if (t == DType::bf16) {
      for (; i + 16 <= n; i += 16) {
        request_source_ahead<Stream>(src + i);
        const __m256i lo =
            _mm256_srai_epi32(bf16_round_256(_mm256_castps_si256(_mm256_loadu_ps(src + i))), 16);
        const __m256i hi = _mm256_srai_epi32(
            bf16_round_256(_mm256_castps_si256(_mm256_loadu_ps(src + i + 8))), 16);
        // The pack interleaves the two inputs by 128-bit lane; the permute
        // puts the four 64-bit quarters back in order.
        const __m256i packed = _mm256_permute4x64_epi64(_mm256_packs_epi32(lo, hi), 0xd8);
        store_vector<Stream>(dst + i, packed);
      }
    } else {
      for (; i + 8 <= n; i += 8) {
        if (i % 16 == 0) request_source_ahead<Stream>(src + i);
        store_vector<Stream>(dst + i,
                             _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
      }
    }
  }
#endif
#if defined(AK_ISA_HAS_XSIMD) && defined(__SSE2__)
  if constexpr (V::width == 4) {
    if (t == DType::bf16) {
      for (; i + 8 <= n; i += 8) {
        const __m128i lo = bf16_round_128(_mm_castps_si128(_mm_loadu_ps(src + i)));
        const __m128i hi = bf16_round_128(_mm_castps_si128(_mm_loadu_ps(src + i + 4)));
        store_vector<Stream>(dst + i, bf16_pack_128(lo, hi));
      }
    }
  }
#endif
#if defined(AK_ISA_HAS_XSIMD) && defined(__ARM_NEON)
  if constexpr (V::width == 4) {
    if (t == DType::bf16) {
      const uint32x4_t one = vdupq_n_u32(1), bias = vdupq_n_u32(0x7fff);
      const uint32x4_t abs_mask = vdupq_n_u32(0x7fffffff), inf = vdupq_n_u32(0x7f800000);
      const uint32x4_t quiet_bit = vdupq_n_u32(0x00400000);
      for (; i + 4 <= n; i += 4) {
        const uint32x4_t u = vreinterpretq_u32_f32(vld1q_f32(src + i));
        const uint32x4_t lsb = vandq_u32(vshrq_n_u32(u, 16), one);
        const uint32x4_t rounded = vaddq_u32(vaddq_u32(u, bias), lsb);
        const uint32x4_t nan = vcgtq_u32(vandq_u32(u, abs_mask), inf);
        const uint32x4_t r = vbslq_u32(nan, vorrq_u32(u, quiet_bit), rounded);
        vst1_u16(dst + i, vshrn_n_u32(r, 16));
      }
    } else {
      for (; i + 4 <= n; i += 4)
        vst1_u16(dst + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(src + i))));
    }
  }
#endif
  if (t == DType::bf16) {
    for (; i < n; ++i) dst[i] = float_to_bf16(src[i]);
  } else {
    for (; i < n; ++i) dst[i] = float_to_f16(src[i]);
  }
}

} // namespace AK_ISA_NS
} // namespace attnkern
