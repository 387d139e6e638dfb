// Packing of op(A) and op(B) into the micro-kernel's sliver layouts, zero-
// padded to whole slivers so that the micro-kernel never sees a ragged edge.
//
// Both operands pack the same way: a sliver is R "lanes" (rows of op(A), or
// columns of op(B)) by kc, stored lane-fastest: dst[p * R + i] = x(i, p) with
// x(i, p) at src[i * lane_stride + p * k_stride]. Which of the two strides is
// 1 depends on the operand's storage order and decides the loop order.
#pragma once

#include <cstdint>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace attnkern {
namespace AK_ISA_NS {

#if defined(__AVX512F__)
// r[j] becomes column j of the 16 x 16 matrix whose rows were r[0..15].
inline void transpose16x16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0x88);
    t[i + 4] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0xdd);
    t[i + 8] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0x88);
    t[i + 12] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0xdd);
  }
  for (int i = 0; i < 8; ++i) {
    r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
    r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
  }
}

// The transposing pack (the first `lanes` of R lanes, each contiguous along
// k; zeros in the others) for k in [0, kc16), a multiple of 16: 16 x 16
// blocks transposed in registers, in place of one scalar load and store per
// element. Groups of up to 16 lanes; a group of fewer than 16 (R = 12) is
// padded with zero rows and stored through a lane mask.
template <int R>
inline void pack_transpose_avx512(std::int64_t kc16, const float *src, std::int64_t lane_stride,
                                  float *dst, int lanes = R) {
  for (int g = 0; g < R; g += 16) {
    const int n = R - g < 16 ? R - g : 16;
    const int loaded = lanes - g < 0 ? 0 : lanes - g < n ? lanes - g : n;
    const __mmask16 mask = static_cast<__mmask16>((1u << n) - 1u);
    for (std::int64_t p = 0; p < kc16; p += 16) {
      __m512 r[16];
      for (int i = 0; i < 16; ++i)
        r[i] = i < loaded ? _mm512_loadu_ps(src + (g + i) * lane_stride + p) : _mm512_setzero_ps();
      transpose16x16(r);
      for (int q = 0; q < 16; ++q) _mm512_mask_storeu_ps(dst + (p + q) * R + g, mask, r[q]);
    }
  }
}
#endif

template <int R>
inline void pack_sliver(std::int64_t kc, int lanes, const float *__restrict src,
                        std::int64_t lane_stride, std::int64_t k_stride, float *__restrict dst) {
  if (lane_stride == 1) {
    // Each k step is one contiguous run of lanes: a straight copy.
    for (std::int64_t p = 0; p < kc; ++p, dst += R) {
      const float *s = src + p * k_stride;
      if (lanes == R) {
#pragma GCC unroll 64
        for (int i = 0; i < R; ++i) dst[i] = s[i];
      } else {
        for (int i = 0; i < R; ++i) dst[i] = i < lanes ? s[i] : 0.0f;
      }
    }
  } else if (k_stride == 1 && lanes == R) {
    // A transpose: every lane is a contiguous run along k. Walking all R
    // runs together (k outer) keeps R memory streams in flight at once; one
    // run after another would wait on each run's cache misses in turn.
    std::int64_t p = 0;
#if defined(__AVX512F__)
    p = kc / 16 * 16;
    pack_transpose_avx512<R>(p, src, lane_stride, dst);
    dst += p * R;
#endif
    for (; p < kc; ++p, dst += R) {
#pragma GCC unroll 64
      for (int i = 0; i < R; ++i) dst[i] = src[i * lane_stride + p];
    }
  } else if (k_stride == 1) {
    // The same with some lanes empty (an edge: the last keys of a block of
    // attention's K, the last rows of A); no lane is read past `lanes`.
    std::int64_t p = 0;
#if defined(__AVX512F__)
    p = kc / 16 * 16;
    pack_transpose_avx512<R>(p, src, lane_stride, dst, lanes);
    dst += p * R;
#endif
    for (; p < kc; ++p, dst += R)
      for (int i = 0; i < R; ++i) dst[i] = i < lanes ? src[i * lane_stride + p] : 0.0f;
  } else {
    for (std::int64_t p = 0; p < kc; ++p, dst += R)
      for (int i = 0; i < R; ++i) dst[i] = i < lanes ? src[i * lane_stride + p * k_stride] : 0.0f;
  }
}

// Ap[p * MR + i] = op(A)(i, p) for i < rows (<= MR), p < kc; 0 beyond rows.
// op(A)(i, p) lives at a[i * rs + p * cs].
template <int MR>
inline void pack_a_sliver(std::int64_t kc, int rows, const float *a, std::int64_t rs,
                          std::int64_t cs, float *ap) {
  pack_sliver<MR>(kc, rows, a, rs, cs, ap);
}

// Bp[p * NR + j] = op(B)(p, j) for p < kc, j < cols (<= NR); 0 beyond cols.
// op(B)(p, j) lives at b[p * rs + j * cs].
template <int NR>
inline void pack_b_sliver(std::int64_t kc, int cols, const float *b, std::int64_t rs,
                          std::int64_t cs, float *bp) {
  pack_sliver<NR>(kc, cols, b, cs, rs, bp);
}

} // namespace AK_ISA_NS
} // namespace attnkern
