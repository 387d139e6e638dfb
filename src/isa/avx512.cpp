// AVX-512 (F, BW, DQ, VL) kernels. Compiled with -mavx512f -mavx512bw
// -mavx512dq -mavx512vl -mavx2 -mfma; only called when the CPU and OS
// support them.
#define AK_ISA_NS avx512
#define AK_ISA_HAS_XSIMD 1
#include "../simd.hpp"

namespace ak::avx512 {
using V = XsimdVec<xsimd::avx512f>;
// 12 x 32 tile: 24 of the 32 zmm registers accumulate, 2 hold B, 1 A.
// KC 256: a 12 x 256 A sliver (12 KiB) stays in L1 while B slivers stream
// past; B chunks of 128 KiB (4 slivers) and the MC 192 x 256 A block
// (192 KiB) share L2; NC: a 256 x 4096 B panel (4 MiB) in L3. A is read in
// place when n <= 16 slivers (512); m <= 8 takes the skinny path.
struct GemmBlocks {
  static constexpr int width = 16, mr = 12, nv = 2;
  static constexpr std::int64_t mc = 192, kc = 256, nc = 4096;
  static constexpr std::int64_t direct_a_max_slivers = 16;
  static constexpr std::int64_t skinny_m = 8;
  static constexpr std::int64_t b_chunk_bytes = 128 * 1024;
  static constexpr std::int64_t kc_narrow = 512, narrow_slivers = 4;
};
} // namespace ak::avx512

#include "isa_table.inc"
