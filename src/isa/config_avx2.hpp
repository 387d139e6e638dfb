// The AVX2 + FMA configuration table: the SGEMM register tile and cache
// blocks, and where the softmax kernels stream their output. The
// measurements behind each choice are in docs/tuning.md.
#pragma once

#include "config_common.hpp"

namespace attnkern::avx2 {
// 6 x 16 tile: 12 of the 16 ymm registers accumulate, 2 hold B, 1 A.
// m <= 16 takes the skinny path (tiles of up to 8 rows); at 24 and 32 rows
// it fell behind this tile.
struct GemmBlocks : GemmBlocksDefaults {
  static constexpr int width = 8, mr = 6, nv = 2;
  static constexpr std::int64_t mc = 144, kc = 256, nc = 4096;
  static constexpr std::int64_t kc_narrow = kc;
  static constexpr std::int64_t skinny_m = 16;
};
static_assert(GemmBlocks::mr == 6 && GemmBlocks::nv * GemmBlocks::width == 16,
              "the comment states the tile shape");

// Short softmax rows 2 at a time (the default).
struct SoftmaxBlocks : SoftmaxBlocksDefaults {};

// No streaming stores: AVX2's softmax is bound by its arithmetic, and
// streaming lost in both the row and the axis softmax.
inline SoftmaxTuning softmax_tuning(const CpuFeatures &) { return softmax_tuning_defaults(); }
} // namespace attnkern::avx2
