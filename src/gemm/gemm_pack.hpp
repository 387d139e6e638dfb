// Packing of op(A) and op(B) into the micro-kernel's sliver layouts, zero-
// padded to whole slivers so that the micro-kernel never sees a ragged edge.
//
// Both operands pack the same way: a sliver is R "lanes" (rows of op(A), or
// columns of op(B)) by kc, stored lane-fastest: dst[p * R + i] = x(i, p) with
// x(i, p) at src[i * lane_stride + p * k_stride]. Which of the two strides is
// 1 depends on the operand's storage order and decides the loop order.
#pragma once

#include <cstdint>

namespace ak {
namespace AK_ISA_NS {

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
    for (std::int64_t p = 0; p < kc; ++p, dst += R) {
#pragma GCC unroll 64
      for (int i = 0; i < R; ++i) dst[i] = src[i * lane_stride + p];
    }
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
} // namespace ak
