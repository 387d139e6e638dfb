// The AVX2 + FMA SGEMM micro-kernel, a 6 x 16 register tile, and the cache
// blocking that feeds it. The kernel body is the shared template of
// ../sgemm_ukernel.hpp instantiated at this shape (GemmBlocks::mr rows,
// GemmBlocks::nv vectors); this file is where the shape and the block sizes
// for this instruction set are chosen, and why.
#pragma once

#include "../sgemm_ukernel.hpp"

namespace attnkern::avx2 {
// 6 x 16 tile: 12 of the 16 ymm registers accumulate, 2 hold B, 1 A.
// m <= 16 takes the skinny path (sgemm_skinny.hpp, tiles of up to 8 rows):
// 9-16 x 4096 x 4096, A/B as in the AVX-512 table, 1 thread NN / NT: m = 9
// 2.29 / 1.34x, 16 1.48 / 1.21x; at 24 and 32 it fell behind this tile
// (0.89-0.98x).
struct GemmBlocks : GemmBlocksDefaults {
  static constexpr int width = 8, mr = 6, nv = 2;
  static constexpr std::int64_t mc = 144, kc = 256, nc = 4096;
  static constexpr std::int64_t kc_narrow = kc;
  static constexpr std::int64_t skinny_m = 16;
};
static_assert(GemmBlocks::mr == 6 && GemmBlocks::nv * GemmBlocks::width == 16,
              "the file name states the tile shape");
} // namespace attnkern::avx2
