// The SSE2 configuration table: the SGEMM register tile and cache blocks,
// and where the softmax kernels stream their output.
#pragma once

#include "config_common.hpp"

namespace attnkern::sse2 {
// 6 x 8 tile: 12 of the 16 xmm registers accumulate (no FMA: multiply, add).
struct GemmBlocks : GemmBlocksDefaults {
  static constexpr int width = 4, mr = 6, nv = 2;
  static constexpr std::int64_t mc = 120, kc = 256, nc = 4096;
  static constexpr std::int64_t kc_narrow = kc;
};
static_assert(GemmBlocks::mr == 6 && GemmBlocks::nv * GemmBlocks::width == 8,
              "the comment states the tile shape");

// Short softmax rows 2 at a time (the default).
struct SoftmaxBlocks : SoftmaxBlocksDefaults {};

// No streaming stores: bound by the arithmetic.
inline SoftmaxTuning softmax_tuning(const CpuFeatures &) { return softmax_tuning_defaults(); }
} // namespace attnkern::sse2
