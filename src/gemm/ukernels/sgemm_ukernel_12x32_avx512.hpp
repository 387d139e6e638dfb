// The AVX-512 SGEMM micro-kernel, a 12 x 32 register tile, and the cache
// blocking that feeds it. The kernel body is the shared template of
// ../sgemm_ukernel.hpp instantiated at this shape (GemmBlocks::mr rows,
// GemmBlocks::nv vectors); this file is where the shape and the block sizes
// for this instruction set are chosen, and why.
#pragma once

#include "../sgemm_ukernel.hpp"

namespace attnkern::avx512 {
struct GemmBlocksWide;

// 12 x 32 tile: 24 of the 32 zmm registers accumulate, 2 hold B, 1 A.
// KC 256: a 12 x 256 A sliver (12 KiB) stays in L1 while B slivers stream
// past; B chunks of 128 KiB (4 slivers) and the MC 192 x 256 A block
// (192 KiB) share L2; NC: a 256 x 4096 B panel (4 MiB) in L3. A is read in
// place when n <= 16 slivers (512). Products whose width the 6 x 64 tile
// below pads no more take that tile instead.
//
// m <= 48 (B stored n x k: 32, kSkinnyMaxRowsBAlongK) takes the skinny path
// (sgemm_skinny.hpp: B read in place, once, by tiles of up to 8 rows, the
// later row groups from L1/L2; past 8 rows only for a B of 8 MiB and more,
// sgemm_one) rather than packing B for a 12-row tile that m pads or leaves
// mostly idle. 9-32 x 4096 x 4096, an A/B of two builds in one process
// (alternating calls, medians of 9), 1 thread NN / NT: m = 9 2.43 / 2.62x,
// 16 2.14 / 1.89x, 24 1.69 / 1.49x, 32 1.41 / 1.36x (84 / 77 GFLOP/s;
// oneDNN ran at 80 / 51 in another run); 2 threads 1.17-2.31x (NT m = 16
// and 24, erratic packed, 4-5.6x). NN 33-48, the same way: 1 thread
// 1.20-1.61x (n = k = 1449-4096, 4096 x 11008 and 11008 x 4096), 2
// threads 1.13-1.38x; at 56 1.30 / 1.08x and at 64 1.04 / 1.05x, too
// little for more instantiations.
struct GemmBlocks : GemmBlocksDefaults {
  static constexpr int width = 16, mr = 12, nv = 2;
  static constexpr std::int64_t mc = 192, kc = 256, nc = 4096;
  static constexpr std::int64_t kc_narrow = 512;
  static constexpr std::int64_t skinny_m = 48;
  using wide_tile = GemmBlocksWide; // for widths it pads no more (sgemm_one), below
};

// 6 x 64 tile for every product it pads no more than the 12 x 32 tile (n a
// multiple of 64, or 33-63 past one; the rule is in sgemm_one). For P.V
// with d = 64 and 128 (one or two slivers) each element of A is loaded once
// or twice instead of two or four times, and six rows of A read in place (a
// row stride of 4 KiB puts them in one L1 set) stay within its ways; on
// wider products it needs 10 loads per 24 FMAs instead of 14 and passes
// over C half as often. 24 zmm registers accumulate, 4 hold B, 1 A. KC 512:
// the 6 x 512 A rows (12 KiB) in L1, a 512 x 64 B sliver (128 KiB) in L2.
// Measured against the 12 x 32 tile (1 thread, GFLOP/s): 1024x64x1024
// 75-81 -> 102-107, 4096x64x4096 72-77 -> 88, 1024x128x1024 94 -> 106,
// 4096x128x4096 83 -> 91, squares and Q.K^T shapes +2-14 % (sgemm_one); 96
// wide lost (95 -> 80), hence the padding rule.
struct GemmBlocksWide : GemmBlocksDefaults {
  static constexpr int width = 16, mr = 6, nv = 4;
  static constexpr std::int64_t mc = 192, kc = 512, nc = 4096;
  static constexpr std::int64_t kc_narrow = 512, narrow_slivers = 2;
  static constexpr std::int64_t skinny_m = GemmBlocks::skinny_m; // sgemm_one checks it again
};
static_assert(GemmBlocks::mr == 12 && GemmBlocks::nv * GemmBlocks::width == 32,
              "the file name states the tile shape");
static_assert(GemmBlocksWide::mr == 6 && GemmBlocksWide::nv * GemmBlocksWide::width == 64,
              "the comment states the second tile's shape");
} // namespace attnkern::avx512
