// AVX2 + FMA kernels. Compiled with -mavx2 -mfma; only called when the CPU
// and OS support them.
#define AK_ISA_NS avx2
#define AK_ISA_HAS_XSIMD 1
#include "../simd.hpp"

namespace ak::avx2 {
using V = XsimdVec<xsimd::fma3<xsimd::avx2>>;
// 6 x 16 tile: 12 of the 16 ymm registers accumulate, 2 hold B, 1 A.
struct GemmBlocks {
  static constexpr int width = 8, mr = 6, nv = 2;
  static constexpr std::int64_t mc = 144, kc = 256, nc = 4096;
  static constexpr std::int64_t direct_a_max_slivers = 16;
  static constexpr std::int64_t skinny_m = 8;
  static constexpr std::int64_t b_chunk_bytes = 128 * 1024;
  static constexpr std::int64_t kc_narrow = kc, narrow_slivers = 4;
};
} // namespace ak::avx2

#include "isa_table.inc"
