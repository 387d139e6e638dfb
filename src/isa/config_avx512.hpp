// The AVX-512 configuration table: the SGEMM register tiles and cache
// blocks, and where the softmax kernels stream their output. The kernels
// are the shared templates (src/gemm, src/softmax, src/attention)
// instantiated with these values. The measurements behind each choice are
// in docs/tuning.md.
#pragma once

#include "config_common.hpp"

namespace attnkern::avx512 {
struct GemmBlocksWide;

// 12 x 32 tile: 24 of the 32 zmm registers accumulate, 2 hold B, 1 A.
// KC 256: a 12 x 256 A sliver (12 KiB) stays in L1 while B slivers stream
// past; B chunks of 128 KiB (4 slivers) and the MC 192 x 256 A block
// (192 KiB) share L2; NC: a 256 x 4096 B panel (4 MiB) in L3. A is read in
// place when n <= 16 slivers (512). Products whose width the 6 x 64 tile
// pads no more take that tile instead.
//
// skinny_m 48: up to 48 rows (32 with B stored n x k: skinny_m_b_along_k;
// past 8 rows only for a B of 8 MiB or more) take the skinny path, B read in place once by tiles of up to 8 rows,
// rather than packing B for a 12-row tile that m pads or leaves mostly
// idle; from 56 rows on the packed path is as fast. The NT skinny kernel's
// k blocks hold up to 384 KiB of A rows (skinny_a_slice_bytes; 128 KiB
// elsewhere): deeper blocks keep B one linear stream, and a 448 KiB slice
// ran slower.
struct GemmBlocks : GemmBlocksDefaults {
  static constexpr int width = 16, mr = 12, nv = 2;
  static constexpr std::int64_t mc = 192, kc = 256, nc = 4096;
  static constexpr std::int64_t kc_narrow = 512;
  static constexpr std::int64_t skinny_m = 48;
  static constexpr std::int64_t skinny_a_slice_bytes = 384 * 1024;
  using wide_tile = GemmBlocksWide; // for widths it pads no more (plan_sgemm)
};

// 6 x 64 tile for every product it pads no more than the 12 x 32 tile (n a
// multiple of 64, or 33-63 past one). For P.V with d = 64 and 128 (one or
// two slivers) each element of A is loaded once or twice instead of two or
// four times, and six rows of A read in place stay within L1's ways; on
// wider products it needs 10 loads per 24 FMAs instead of 14 and passes
// over C half as often. 24 zmm registers accumulate, 4 hold B, 1 A. KC 512:
// the 6 x 512 A rows (12 KiB) in L1, a 512 x 64 B sliver (128 KiB) in L2.
struct GemmBlocksWide : GemmBlocksDefaults {
  static constexpr int width = 16, mr = 6, nv = 4;
  static constexpr std::int64_t mc = 192, kc = 512, nc = 4096;
  static constexpr std::int64_t kc_narrow = 512, narrow_slivers = 2;
};
static_assert(GemmBlocks::mr == 12 && GemmBlocks::nv * GemmBlocks::width == 32,
              "the comment states the tile shape");
static_assert(GemmBlocksWide::mr == 6 && GemmBlocksWide::nv * GemmBlocksWide::width == 64,
              "the comment states the second tile's shape");

// Short softmax rows 4 at a time (the default is 2): with 32 registers,
// four rows' passes overlap their latencies (docs/tuning.md).
struct SoftmaxBlocks : SoftmaxBlocksDefaults {
  static constexpr int rows_at_once = 4;
};

// Streaming stores where the output would leave the cache anyway: an
// ordinary store's miss first reads y's line, a third transfer besides x's
// read and y's write.
// - Row softmax, outputs of 32 MiB and more, on Intel cores only: one Intel
//   core's bandwidth is bound by its misses in flight and gains; AMD's Zen 4
//   lost. Smaller outputs keep plain stores, as the caller likely reads
//   them next from cache.
// - softmax_axis, pieces whose exponentials reach 16 MiB (they would be
//   evicted before the second pass reads them); smaller ones that stay in
//   L3 lose.
// (The measurements: docs/tuning.md.)
inline SoftmaxTuning softmax_tuning(const CpuFeatures &cpu) {
  SoftmaxTuning t = softmax_tuning_defaults();
  t.stream_rows_min_bytes = cpu.intel ? std::int64_t{32} << 20 : 0;
  t.stream_axis_min_bytes = std::int64_t{16} << 20;
  return t;
}
} // namespace attnkern::avx512
