// The portable scalar SGEMM micro-kernel, a 4 x 4 register tile, and the cache
// blocking that feeds it. The kernel body is the shared template of
// ../sgemm_ukernel.hpp instantiated at this shape (GemmBlocks::mr rows,
// GemmBlocks::nv vectors); this file is where the shape and the block sizes
// for this instruction set are chosen, and why.
#pragma once

#include "../sgemm_ukernel.hpp"

namespace attnkern::scalar {
struct GemmBlocks : GemmBlocksDefaults {
  static constexpr int width = 1, mr = 4, nv = 4;
  static constexpr std::int64_t mc = 128, kc = 256, nc = 4096;
  static constexpr std::int64_t kc_narrow = kc;
};
static_assert(GemmBlocks::mr == 4 && GemmBlocks::nv * GemmBlocks::width == 4,
              "the file name states the tile shape");
} // namespace attnkern::scalar
