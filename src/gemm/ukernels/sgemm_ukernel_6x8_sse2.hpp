// The SSE2 SGEMM micro-kernel, a 6 x 8 register tile, and the cache
// blocking that feeds it. The kernel body is the shared template of
// ../sgemm_ukernel.hpp instantiated at this shape (GemmBlocks::mr rows,
// GemmBlocks::nv vectors); this file is where the shape and the block sizes
// for this instruction set are chosen, and why.
#pragma once

#include "../sgemm_ukernel.hpp"

namespace attnkern::sse2 {
// 6 x 8 tile: 12 of the 16 xmm registers accumulate (no FMA: multiply, add).
struct GemmBlocks : GemmBlocksDefaults {
  static constexpr int width = 4, mr = 6, nv = 2;
  static constexpr std::int64_t mc = 120, kc = 256, nc = 4096;
  static constexpr std::int64_t kc_narrow = kc;
};
static_assert(GemmBlocks::mr == 6 && GemmBlocks::nv * GemmBlocks::width == 8,
              "the file name states the tile shape");
} // namespace attnkern::sse2
