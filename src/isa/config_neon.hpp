// The NEON configuration table: the SGEMM register tile and cache blocks,
// and where the softmax kernels stream their output.
#pragma once

#include "config_common.hpp"

namespace attnkern::neon {
// 8 x 12 tile: 24 of the 32 q registers accumulate, 3 hold B, 1 A.
struct GemmBlocks : GemmBlocksDefaults {
  static constexpr int width = 4, mr = 8, nv = 3;
  static constexpr std::int64_t mc = 128, kc = 256, nc = 4092;
  static constexpr std::int64_t kc_narrow = kc;
};
static_assert(GemmBlocks::mr == 8 && GemmBlocks::nv * GemmBlocks::width == 12,
              "the comment states the tile shape");

// Short softmax rows 2 at a time (the default; not measured on NEON).
struct SoftmaxBlocks : SoftmaxBlocksDefaults {};

// No streaming stores (not measured on NEON).
inline SoftmaxTuning softmax_tuning(const CpuFeatures &) { return softmax_tuning_defaults(); }
} // namespace attnkern::neon
