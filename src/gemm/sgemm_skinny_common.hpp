// What the two skinny SGEMM kernels (sgemm_skinny_nn.hpp, B contiguous along
// n; sgemm_skinny_nt.hpp, B contiguous along k) and attention's GEMV-like
// tiles share: register budgets, the row limits and row groups, the
// finishing of a sum into C, per-use loads and the L1-set arithmetic that
// places A's copy and the running sums.
#pragma once

#include <cstdint>

#include "../convert/widen.hpp"
#include "../simd.hpp"
#include "gemm_common.hpp"

namespace attnkern {
namespace AK_ISA_NS {

// The locality hint of the tiles' requests ahead (the rows a later pass
// reads): half-precision rows, which attention widens with little
// arithmetic per byte, come in to L1 (prefetcht0); its decode ran about 4 %
// faster so than through L2 alone, contiguous and paged alike. fp32 rows
// keep prefetcht2, which ran the same in decode and leaves L1 to the
// skinny GEMMs' own loads.
template <class T> constexpr int kAheadHint = sizeof(T) == 2 ? 3 : 1;

// Vector registers the accumulators of a skinny tile may take.
template <class V> constexpr int skinny_acc_budget() { return V::width >= 16 ? 16 : 8; }

// The most rows the skinny kernels are instantiated for (a table's
// skinny_m), and the most one register tile takes: products of more rows
// than kSkinnyTileRows run the same tiles over groups of rows, the first
// group streaming B and each later one reading the same B lines again from
// L1/L2.
constexpr int kSkinnyMaxRows = 48;
// The most rows sgemm_skinny<V, Cfg> takes, B stored either way: B along k
// stops at skinny_m_b_along_k, as each group of its rows re-reads its slice
// of A from L2 per few B rows.
template <class Cfg> constexpr std::int64_t skinny_rows_limit(bool b_along_k) {
  return b_along_k && Cfg::skinny_m > Cfg::skinny_m_b_along_k ? Cfg::skinny_m_b_along_k
                                                              : Cfg::skinny_m;
}
constexpr int kSkinnyTileRows = 8;
// Columns are dealt out to threads in whole cache lines of C.
constexpr std::int64_t kSkinnyGrain = 16;
template <int M> constexpr int skinny_first_group() {
  return M > kSkinnyTileRows ? kSkinnyTileRows : M;
}

// Vectors of C per row that an M-row tile of skinny_n_tile takes (1 to 8).
template <class V, int M> constexpr int skinny_strip_vectors() {
  constexpr int NV0 = skinny_acc_budget<V>() / M;
  return NV0 < 1 ? 1 : NV0 > 8 ? 8 : NV0;
}

inline float skinny_finish(float sum, float alpha, float beta, const float *c) {
  const float t = alpha == 1.0f ? sum : alpha * sum;
  return beta == 0.0f ? t : t + beta * *c;
}

// A load of p that the compiler makes anew for each use, so that an AVX
// FMA takes it as its memory operand instead of one register shared by
// several FMAs: the empty asm hides that p is the same pointer each time
// (elsewhere, a plain load). One operation less per use, and no register
// written, for the same cache traffic.
template <class V> AK_ALWAYS_INLINE typename V::reg load_per_use(const float *p) {
#if defined(__AVX__) && (defined(__GNUC__) || defined(__clang__))
  asm volatile("" : "+r"(p));
#endif
  return V::loadu(p);
}

// Whether m rows of A at this stride (floats) crowd one L1 set: at strides
// that are multiples of 4 KiB (a 4096-wide weight's input rows), all m rows
// of a column step land in the same 8-way set and, with B's lines, thrash it
// (copying A is faster then). Rows that span less than a page cannot.
inline bool skinny_rows_alias(std::int64_t stride, std::int64_t m) {
  if (stride * 4 * (m - 1) < 4096) return false;
  int rows_in_set[64] = {};
  for (std::int64_t i = 0; i < m; ++i)
    if (++rows_in_set[i * stride * 4 % 4096 / 64] > 2) return true;
  return false;
}

// The L1 set (of 64) that the line at p falls in.
inline std::int64_t l1_set_of(const void *p) {
  return static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(p) / 64 % 64);
}

} // namespace AK_ISA_NS
} // namespace attnkern
