// SSE2 kernels: the x86-64 baseline, no extra compiler flags.
#define AK_ISA_NS sse2
#define AK_ISA_HAS_XSIMD 1
#include "../simd.hpp"

namespace ak::sse2 {
using V = XsimdVec<xsimd::sse2>;
// 6 x 8 tile: 12 of the 16 xmm registers accumulate (no FMA: multiply, add).
struct GemmBlocks {
  static constexpr int width = 4, mr = 6, nv = 2;
  static constexpr std::int64_t mc = 120, kc = 256, nc = 4096;
  static constexpr std::int64_t direct_a_max_slivers = 16;
  static constexpr std::int64_t skinny_m = 8;
  static constexpr std::int64_t b_chunk_bytes = 128 * 1024;
  static constexpr std::int64_t kc_narrow = kc, narrow_slivers = 4;
};
} // namespace ak::sse2

#include "isa_table.inc"
