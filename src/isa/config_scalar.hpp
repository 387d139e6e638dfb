// The portable scalar configuration table: the SGEMM register tile and cache
// blocks, and where the softmax kernels stream their output.
#pragma once

#include "config_common.hpp"

namespace attnkern::scalar {
// 4 x 4 tile of scalars.
struct GemmBlocks : GemmBlocksDefaults {
  static constexpr int width = 1, mr = 4, nv = 4;
  static constexpr std::int64_t mc = 128, kc = 256, nc = 4096;
  static constexpr std::int64_t kc_narrow = kc;
};
static_assert(GemmBlocks::mr == 4 && GemmBlocks::nv * GemmBlocks::width == 4,
              "the comment states the tile shape");

// Short softmax rows 2 at a time (the default).
struct SoftmaxBlocks : SoftmaxBlocksDefaults {};

// No streaming stores (the scalar path has none).
inline SoftmaxTuning softmax_tuning(const CpuFeatures &) { return softmax_tuning_defaults(); }
} // namespace attnkern::scalar
