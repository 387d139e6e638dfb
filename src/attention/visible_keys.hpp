// Which keys each query of an attention call sees: the causal masks, the
// sliding window and the per-entry key counts (kv_lens, cu_seqlens) as one
// range.
#pragma once

#include <cstdint>

#include "../gemm/gemm_common.hpp"
#include "../kernel_table.hpp"

namespace attnkern {
namespace AK_ISA_NS {

// Which keys of a batch entry query i sees: [lo, hi) (see attnkern.h).
struct KeyRange {
  std::int64_t lo, hi;
};

// n: the entry's key count (AttentionArgs::keys_of).
inline KeyRange visible_keys(const AttentionArgs &a, std::int64_t b, std::int64_t n,
                             std::int64_t i) {
  const std::int64_t d = a.diagonal(b, n, i);
  std::int64_t hi = n;
  if (a.mask != 0) hi = min64(hi, d + 1);
  if (a.window_right >= 0) hi = min64(hi, d + a.window_right + 1);
  std::int64_t lo = a.window_left >= 0 ? d - a.window_left : 0;
  lo = min64(max64(lo, 0), n);
  return {lo, min64(max64(hi, lo), n)};
}

} // namespace AK_ISA_NS
} // namespace attnkern
