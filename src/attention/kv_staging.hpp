// Staged K/V: where keys and values are stored in f16 or bf16, or in pages
// through a block table, each block of rows an item works on is first
// widened (and gathered) into fp32 scratch, and the item's kernels then read
// that block as they read an fp32 tensor in place. Widening is exact, so the
// arithmetic is the fp32 kernel's on the stored values. A block lies in L1
// or L2, so the second read costs little beside the stream from memory,
// which the staging loop keeps requesting ahead.
#pragma once

#include <cstdint>

#include "../convert/half.hpp"
#include "../convert/widen.hpp"
#include "../gemm/gemm_common.hpp"
#include "../kernel_table.hpp"

namespace attnkern {
namespace AK_ISA_NS {

// Rows [j0, j1) of (entry b, kv head h) as dim fp32 values each into dst
// (row stride ld). Rows outside [lo, hi), the keys no row of the item sees,
// are zeros: their pages may not exist. Meanwhile the rows kAhead past
// these are requested (and, for the first run of a pass, these rows too),
// so that a page's first rows do not wait on memory where the hardware
// prefetcher has not yet caught on. A pass staged run by run thus requests
// each row once, kAhead rows before it is widened.
template <class V>
inline void stage_rows(const KvLayout &t, std::int64_t b, std::int64_t h, std::int64_t j0,
                       std::int64_t j1, std::int64_t lo, std::int64_t hi, std::int64_t dim,
                       float *dst, std::int64_t ld, bool first_run) {
  constexpr std::int64_t kAhead = 32;
  const std::int64_t row_bytes = dim * t.elem_bytes();
  const std::int64_t req_hi = min64(j1 + kAhead, hi);
  for (std::int64_t j = max64(first_run ? j0 : j0 + kAhead, lo); j < req_hi; ++j) {
    const unsigned char *p = t.row(b, h, j);
    for (std::int64_t x = 0; x < row_bytes; x += 64) __builtin_prefetch(p + x, 0, 1);
  }
  const DType type = static_cast<DType>(t.type);
  for (std::int64_t j = j0; j < j1; ++j) {
    float *row = dst + (j - j0) * ld;
    if (j < lo || j >= hi) {
      for (std::int64_t d = 0; d < dim; ++d) row[d] = 0.0f;
      continue;
    }
    widen_row<V>(type, t.row(b, h, j), row, dim);
  }
}

// One stored value, widened: for the rare paths that recompute a row.
inline float kv_value(const KvLayout &t, std::int64_t b, std::int64_t h, std::int64_t j,
                      std::int64_t d) {
  const unsigned char *p = t.row(b, h, j) + d * t.elem_bytes();
  if (t.type == 0) {
    float f;
    std::memcpy(&f, p, sizeof f);
    return f;
  }
  std::uint16_t x;
  std::memcpy(&x, p, sizeof x);
  return half_to_float(static_cast<DType>(t.type), x);
}

} // namespace AK_ISA_NS
} // namespace attnkern
