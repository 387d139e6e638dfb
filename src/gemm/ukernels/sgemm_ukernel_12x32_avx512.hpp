// The AVX-512 SGEMM micro-kernel, a 12 x 32 register tile, and the cache
// blocking that feeds it. The kernel body is the shared template of
// ../sgemm_ukernel.hpp instantiated at this shape (GemmBlocks::mr rows,
// GemmBlocks::nv vectors); this file is where the shape and the block sizes
// for this instruction set are chosen, and why.
#pragma once

#include "../sgemm_ukernel.hpp"

namespace ak::avx512 {
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
static_assert(GemmBlocks::mr == 12 && GemmBlocks::nv * GemmBlocks::width == 32,
              "the file name states the tile shape");
} // namespace ak::avx512
