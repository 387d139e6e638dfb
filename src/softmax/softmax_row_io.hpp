// Loads and stores of a row's partial vector, and the prefetches of the
// row softmax's passes, for one instruction set (also used by softmax_axis).
#pragma once

#include <cstdint>

#include "../simd.hpp"

namespace attnkern {
namespace AK_ISA_NS {

template <class V> struct RowIo {
  using reg = typename V::reg;
  static constexpr int W = V::width;
  // Loads x[j..j+W), padding lanes past n with `pad`.
  static reg load_tail(const float *x, std::int64_t n, float pad) {
    alignas(64) float t[W];
    for (int i = 0; i < W; ++i) t[i] = i < n ? x[i] : pad;
    return V::loadu(t);
  }
  static void store_tail(float *y, std::int64_t n, reg v) {
    alignas(64) float t[W];
    V::storeu(t, v);
    for (std::int64_t i = 0; i < n; ++i) y[i] = t[i];
  }
};

// Rows that come from memory stream better when the next row is requested
// while this one is worked on in cache: its lines are prefetched (into L2)
// at the offsets the exp pass and again the last pass reach (one pass of
// requests gave about half the gain; docs/tuning.md).
inline void prefetch_next_row(const float *next, std::int64_t j) {
  if (next && j % 16 == 0) __builtin_prefetch(next + j, 0, 1);
}

// Log-softmax writes y only in its last pass; the exp pass asks for y's
// lines for writing (into L1) as it goes, so that their fetch overlaps
// arithmetic instead of stalling the store-only last pass (cold rows:
// docs/tuning.md).
inline void prefetch_for_write(float *y, std::int64_t j) {
  if (y && j % 16 == 0) __builtin_prefetch(y + j, 1, 3);
}

} // namespace AK_ISA_NS
} // namespace attnkern
