// What both schemes of softmax_axis share, for one instruction set: the
// axis length that divides them, a row's vector of columns (whole or
// partial) and the one NaN of a column whose denominator is NaN.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "../simd.hpp"
#include "softmax_row_io.hpp"

namespace attnkern {
namespace AK_ISA_NS {

// Axes up to this long take the blocks (softmax_axis_short.hpp); longer
// ones, the pieces (softmax_axis_long.hpp), whose two passes win from about
// there on (docs/tuning.md). It also sizes the blocks' buffer.
constexpr std::int64_t kShortAxisMax = 32;

// A vector of columns of one row at p: whole (Tail false), or the first
// n < W columns, padded with -inf on loads (both schemes).
template <class V, bool Tail>
AK_ALWAYS_INLINE typename V::reg axis_load(const float *p, std::int64_t n) {
  if constexpr (Tail)
    return RowIo<V>::load_tail(p, n, -std::numeric_limits<float>::infinity());
  else
    return V::loadu(p);
}
template <class V, bool Tail>
AK_ALWAYS_INLINE void axis_store(float *p, std::int64_t n, typename V::reg v) {
  if constexpr (Tail)
    RowIo<V>::store_tail(p, n, v);
  else
    V::storeu(p, v);
}

// Columns whose denominator is NaN (a NaN or +inf among their elements) are
// NaN throughout, and get one NaN, the same bits on any thread count: which
// NaN a division leaves (its sign, its payload) follows its operands, and
// so the path the column's exponentials took, which differs with the
// thread count (the short axes' guess gate follows what the thread did
// before; a NaN and a +inf in one column met in different orders). Rows
// [r0, r1) of columns [0, width) at row stride `inner`; den holds `width`
// floats, padded to whole vectors. A vector test first: no such column is
// the common case.
template <class V>
void axis_uniform_nan(const float *den, std::int64_t width, float *y, std::int64_t inner,
                      std::int64_t r0, std::int64_t r1) {
  using reg = typename V::reg;
  reg found = V::zero();
  for (std::int64_t j = 0; j < width; j += V::width)
    found = V::add(found, V::nan_select(V::loadu(den + j), V::set1(1.0f), V::zero()));
  if (V::reduce_add(found) == 0.0f) return;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (std::int64_t j = 0; j < width; ++j)
    if (std::isnan(den[j]))
      for (std::int64_t a = r0; a < r1; ++a) y[a * inner + j] = nan;
}

} // namespace AK_ISA_NS
} // namespace attnkern
