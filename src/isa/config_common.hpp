// What every instruction set's configuration table (src/isa/config_<isa>.hpp)
// starts from. A table states the SGEMM register tile and cache blocks
// (`GemmBlocks`, derived from GemmBlocksDefaults), the softmax kernels'
// compile-time choices (`SoftmaxBlocks`, derived from SoftmaxBlocksDefaults)
// and the softmax streaming-store thresholds (`softmax_tuning`). Kernels
// read these values; they never test the CPU themselves.
//
// Included inside an instruction set's namespace (AK_ISA_NS) after simd.hpp.
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
