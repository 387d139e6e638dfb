// What every instruction set's configuration table (src/isa/config_<isa>.hpp)
// starts from. A table states the SGEMM register tile and cache blocks
// (`GemmBlocks`, derived from GemmBlocksDefaults), the softmax kernels'
// compile-time choices (`SoftmaxBlocks`, derived from SoftmaxBlocksDefaults)
// and the softmax streaming-store thresholds (`softmax_tuning`). Kernels
// read these values; they never test the CPU themselves.
//
// Included by an instruction set's translation unit after it defines
// AK_ISA_NS and V.
#pragma once

#include <cstdint>

#include "../cpu_features.hpp"
#include "../kernel_table.hpp"

namespace attnkern {
namespace AK_ISA_NS {

// The SGEMM block-table entries that most instruction sets share; each
// table derives from this and states width, mr, nv, mc, kc, nc and
// kc_narrow.
struct GemmBlocksDefaults {
  static constexpr std::int64_t direct_a_max_slivers = 16;  // A read in place up to n = 16 NR
  static constexpr std::int64_t skinny_m = 8;               // m <= 8: the streaming path
  static constexpr std::int64_t b_chunk_bytes = 128 * 1024; // B slivers per pass over A (L2)
  static constexpr std::int64_t narrow_slivers = 4;         // n <= 4 NR takes kc_narrow
  static constexpr std::int64_t b_share_bytes = 512 * 1024; // a thread's B slivers (L2), teams > 2
  static constexpr std::int64_t direct_b_max_span_bytes = 128 * 1024; // B in place: k * ldb * 4
  using wide_tile = void;                                             // no second tile

  // The SGEMM driver's and skinny kernels' measured thresholds
  // (src/gemm/gemm_plan.hpp, gemm_driver.hpp, sgemm_skinny*.hpp; the
  // measurements in docs/tuning.md), the same on every instruction set
  // so far except skinny_a_slice_bytes (AVX-512: 384 KiB).
  // Threads: each gets at least this much work.
  static constexpr double scale_min_elements_per_thread = 1 << 16; // C = beta * C
  static constexpr double min_flops_per_thread = 5.0e5;            // the packed path
  static constexpr double min_flops_per_thread_split = 2.5e5;  // ... one k block, panel: no barrier
  static constexpr double skinny_min_flops_per_thread = 1.0e6; // the skinny path
  // The packed path.
  static constexpr std::int64_t row_blocks_per_thread = 16; // MC: about 16 row blocks a thread
  static constexpr std::int64_t direct_a_aliased_max_slivers = 2; // A rows 4 KiB apart: in place
  static constexpr double own_split_max_flops = 6.4e7;    // own_rows / own_columns up to 64 MFLOP
  static constexpr std::int64_t own_rows_min_slivers = 4; // own_rows: 4 row slivers a thread
  static constexpr double batch_per_thread_max_flops = 6.4e7; // batches: a product per thread
  // The skinny path.
  static constexpr double skinny_groups_min_b_floats = 2.0 * 1024 * 1024; // m > 8: B of 8 MiB+
  static constexpr std::int64_t skinny_m_b_along_k = 32;           // B stored n x k: up to 32 rows
  static constexpr int skinny_nn_wide_min_rows = 6;                // 24 accumulators (32 registers)
  static constexpr std::int64_t skinny_nn_k_block = 8;             // k rows per block, narrow tiles
  static constexpr std::int64_t skinny_nn_wide_k_block = 32;       // ... the 24-accumulator tiles
  static constexpr int skinny_nt_wide_min_rows = 6;                // 24 accumulators (32 registers)
  static constexpr int skinny_nt_max_b_rows = 4;                   // B rows (columns of C) per tile
  static constexpr std::int64_t skinny_a_slice_bytes = 128 * 1024; // A's k block slice (L2)
  static constexpr std::int64_t skinny_nt_min_k_block = 4096;      // k block, at least
};

// The softmax kernels' compile-time choices that most instruction sets
// share; each table's SoftmaxBlocks derives from this. softmax_rows reads
// SoftmaxBlocks by name, so a translation unit includes its table before
// the softmax headers.
struct SoftmaxBlocksDefaults {
  // Short rows (up to 16 vectors) that softmax_rows interleaves, R at a
  // time, so that their passes' latencies overlap.
  static constexpr int rows_at_once = 2;
};

// Where the softmax kernels store with streaming stores. The default:
// nowhere (the arithmetic is the limit, and plain stores keep the output in
// cache for the caller).
inline SoftmaxTuning softmax_tuning_defaults() { return SoftmaxTuning{}; }

} // namespace AK_ISA_NS
} // namespace attnkern
