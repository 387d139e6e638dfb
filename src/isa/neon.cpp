// NEON (AArch64 Advanced SIMD) kernels.
#define AK_ISA_NS neon
#define AK_ISA_HAS_XSIMD 1
#include "../simd.hpp"

namespace ak::neon {
using V = XsimdVec<xsimd::neon64>;
// 8 x 12 tile: 24 of the 32 q registers accumulate, 3 hold B, 1 A.
struct GemmBlocks {
  static constexpr int width = 4, mr = 8, nv = 3;
  static constexpr std::int64_t mc = 128, kc = 256, nc = 4092;
  static constexpr std::int64_t direct_a_max_slivers = 16;
  static constexpr std::int64_t skinny_m = 8;
  static constexpr std::int64_t b_chunk_bytes = 128 * 1024;
  static constexpr std::int64_t kc_narrow = kc, narrow_slivers = 4;
};
} // namespace ak::neon

#include "isa_table.inc"
