// The NEON SGEMM micro-kernel, a 8 x 12 register tile, and the cache
// blocking that feeds it. The kernel body is the shared template of
// ../sgemm_ukernel.hpp instantiated at this shape (GemmBlocks::mr rows,
// GemmBlocks::nv vectors); this file is where the shape and the block sizes
// for this instruction set are chosen, and why.
#pragma once

#include "../sgemm_ukernel.hpp"

namespace attnkern::neon {
// 8 x 12 tile: 24 of the 32 q registers accumulate, 3 hold B, 1 A.
struct GemmBlocks : GemmBlocksDefaults {
  static constexpr int width = 4, mr = 8, nv = 3;
  static constexpr std::int64_t mc = 128, kc = 256, nc = 4092;
  static constexpr std::int64_t kc_narrow = kc;
};
static_assert(GemmBlocks::mr == 8 && GemmBlocks::nv * GemmBlocks::width == 12,
              "the file name states the tile shape");
} // namespace attnkern::neon
