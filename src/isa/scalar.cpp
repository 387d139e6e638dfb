// Portable scalar kernels: every target has them, and ak_set_isa("scalar")
// selects them anywhere (a reference path for tests and odd CPUs).
#define AK_ISA_NS scalar
#include "../simd.hpp"

namespace ak::scalar {
using V = ScalarVec;
struct GemmBlocks {
  static constexpr int width = 1, mr = 4, nv = 4;
  static constexpr std::int64_t mc = 128, kc = 256, nc = 4096;
  static constexpr std::int64_t direct_a_max_slivers = 16;
  static constexpr std::int64_t skinny_m = 8;
  static constexpr std::int64_t b_chunk_bytes = 128 * 1024;
  static constexpr std::int64_t kc_narrow = kc, narrow_slivers = 4;
};
} // namespace ak::scalar

#include "isa_table.inc"
