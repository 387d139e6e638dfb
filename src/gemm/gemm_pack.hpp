// Packing of op(A) and op(B) into the micro-kernel's sliver layouts, zero-
// padded to whole slivers so that the micro-kernel never sees a ragged edge.
// op(X)(r, c) lives at x[r * rs + c * cs]; a transposed operand just swaps
// its strides, and the loop order follows whichever stride is 1.
#pragma once

#include <cstdint>
#include <cstring>

namespace ak {
namespace AK_ISA_NS {

// Bp[p * NR + j] = op(B)(p, j) for p < kc, j < cols (<= NR); 0 beyond cols.
template <int NR>
inline void pack_b_sliver(std::int64_t kc, int cols, const float *b, std::int64_t rs,
                          std::int64_t cs, float *__restrict bp) {
  if (cs == 1) {
    for (std::int64_t p = 0; p < kc; ++p) {
      const float *src = b + p * rs;
      float *dst = bp + p * NR;
      std::memcpy(dst, src, sizeof(float) * static_cast<std::size_t>(cols));
      for (int j = cols; j < NR; ++j) dst[j] = 0.0f;
    }
  } else {
    for (int j = 0; j < NR; ++j) {
      if (j < cols) {
        const float *src = b + j * cs;
        for (std::int64_t p = 0; p < kc; ++p) bp[p * NR + j] = src[p * rs];
      } else {
        for (std::int64_t p = 0; p < kc; ++p) bp[p * NR + j] = 0.0f;
      }
    }
  }
}

// Ap[p * MR + i] = op(A)(i, p) for i < rows (<= MR), p < kc; 0 beyond rows.
template <int MR>
inline void pack_a_sliver(std::int64_t kc, int rows, const float *a, std::int64_t rs,
                          std::int64_t cs, float *__restrict ap) {
  if (rs == 1) {
    for (std::int64_t p = 0; p < kc; ++p) {
      const float *src = a + p * cs;
      float *dst = ap + p * MR;
      std::memcpy(dst, src, sizeof(float) * static_cast<std::size_t>(rows));
      for (int i = rows; i < MR; ++i) dst[i] = 0.0f;
    }
  } else {
    for (int i = 0; i < MR; ++i) {
      if (i < rows) {
        const float *src = a + i * rs;
        for (std::int64_t p = 0; p < kc; ++p) ap[p * MR + i] = src[p * cs];
      } else {
        for (std::int64_t p = 0; p < kc; ++p) ap[p * MR + i] = 0.0f;
      }
    }
  }
}

} // namespace AK_ISA_NS
} // namespace ak
