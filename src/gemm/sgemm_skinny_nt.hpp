// Skinny SGEMM with B contiguous along k (op(B) = B^T, B stored n x k, the
// usual weight layout): J columns of C at a time, each a dot product of A's
// rows with one row of B, vectorized along k and reduced at the end of each
// k block (4096 deep or more: skinny_k_block). Attention's Q.K^T reuses
// skinny_k_tile.
#pragma once

#include <cstdint>

#include "sgemm_skinny_common.hpp"

namespace attnkern {
namespace AK_ISA_NS {

// sum[i * lds + j] += dot(A row i, B row j) over k in [p0, p1), for M rows
// of A and J rows of B (rows at a + i * lda and b + j * ldb, contiguous
// along k), vectorized along k and reduced once per block. b_next, when
// given, is prefetched at the same offsets (the rows that come next).
// RowByRow: the J rows one after the other, each in address order, with no
// requests ahead (for short rows that the hardware prefetcher is left to
// stream: a step across the J rows reads J lines a row apart, a pattern it
// does not follow); every sum sees the same terms in the same order.
// AInRegisters: A's vectors loaded once per step into registers that the J
// FMAs share, for callers bound by the arithmetic rather than by B's stream
// (attention's grouped rows, the wide NT tiles: skinny_k_wide); by default
// each FMA loads its own (below).
// TB: B's element type (widen.hpp; attention's half-precision keys).
template <class V, int M, int J, bool RowByRow = false, bool AInRegisters = false, class TB = float>
inline void skinny_k_tile(std::int64_t p0, std::int64_t p1, const float *a, std::int64_t lda,
                          const TB *b, std::int64_t ldb, float *sum, std::int64_t lds,
                          const TB *b_next = nullptr) {
  using reg = typename V::reg;
  constexpr int W = V::width;
  constexpr std::int64_t kAhead = 512;
  constexpr std::int64_t kLine = 64 / sizeof(TB); // elements per cache line
  reg acc[M][J];
#pragma GCC unroll 8
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < J; ++j) acc[i][j] = V::zero();
  const std::int64_t p_vec = p0 + (p1 - p0) / W * W;
  if constexpr (RowByRow) {
#pragma GCC unroll 8
    for (int j = 0; j < J; ++j)
      for (std::int64_t p = p0; p < p_vec; p += W) {
        const reg bv = load_as<V>(b + j * ldb + p);
#pragma GCC unroll 8
        for (int i = 0; i < M; ++i) acc[i][j] = V::fmadd(V::loadu(a + i * lda + p), bv, acc[i][j]);
      }
  } else {
    for (std::int64_t p = p0; p < p_vec; p += W) {
      reg bv[J];
#pragma GCC unroll 8
      for (int j = 0; j < J; ++j) bv[j] = load_as<V>(b + j * ldb + p);
      if (b_next &&
          (p & (kLine - 1)) == 0) // a line of each next row per line consumed (kAheadHint)
#pragma GCC unroll 8
        for (int j = 0; j < J; ++j) __builtin_prefetch(b_next + j * ldb + p, 0, kAheadHint<TB>);
      // m >= 4 also asks for its own rows kAhead floats on: with the
      // arithmetic of four or more A rows per B vector between requests,
      // the next rows' prefetches alone leave the stream short.
      if (M >= 4 && (p & (kLine - 1)) == 0 && p + kAhead < p1) {
#pragma GCC unroll 8
        for (int j = 0; j < J; ++j) __builtin_prefetch(b + j * ldb + p + kAhead, 0, 1);
      }
      // A's vector is loaded by each of its J FMAs (load_per_use) rather
      // than once into a register, though B is what streams from memory:
      // faster up to 4 rows (alike at 8), likely as fewer operations and
      // registers written per B line leave more lines of B in flight.
      if constexpr (AInRegisters) {
#pragma GCC unroll 8
        for (int i = 0; i < M; ++i) {
          const reg av = V::loadu(a + i * lda + p);
#pragma GCC unroll 8
          for (int j = 0; j < J; ++j) acc[i][j] = V::fmadd(av, bv[j], acc[i][j]);
        }
      } else {
#pragma GCC unroll 8
        for (int i = 0; i < M; ++i)
#pragma GCC unroll 8
          for (int j = 0; j < J; ++j)
            acc[i][j] = V::fmadd(load_per_use<V>(a + i * lda + p), bv[j], acc[i][j]);
      }
    }
  }
  if (p_vec < p1) { // the last few terms, zero-padded to one more vector
    alignas(64) float at[M][W] = {}, bt[J][W] = {};
    for (std::int64_t p = p_vec; p < p1; ++p) {
      for (int i = 0; i < M; ++i) at[i][p - p_vec] = a[i * lda + p];
      for (int j = 0; j < J; ++j) bt[j][p - p_vec] = elem_float(b[j * ldb + p]);
    }
    // Every loop over acc is unrolled in full: one that is not makes GCC
    // keep the whole tile on the stack (a load and a store per FMA).
#pragma GCC unroll 16
    for (int i = 0; i < M; ++i)
#pragma GCC unroll 16
      for (int j = 0; j < J; ++j) acc[i][j] = V::fmadd(V::loadu(at[i]), V::loadu(bt[j]), acc[i][j]);
  }
  if constexpr (M * J == W) { // one vector of all the tile's sums
    reg flat[M * J];
#pragma GCC unroll 16
    for (int i = 0; i < M; ++i)
#pragma GCC unroll 16
      for (int j = 0; j < J; ++j) flat[i * J + j] = acc[i][j];
    alignas(64) float t[W];
    V::storeu(t, V::reduce_add_each(flat));
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < J; ++j) sum[i * lds + j] += t[i * J + j];
  } else {
#pragma GCC unroll 16
    for (int i = 0; i < M; ++i)
#pragma GCC unroll 16
      for (int j = 0; j < J; ++j) sum[i * lds + j] += V::reduce_add(acc[i][j]);
  }
}

// Rows [R0, M) after the first group (skinny_k_range), in groups of up to
// kSkinnyTileRows, each reading the same J rows of B again.
template <class V, int M, int J, int R0>
inline void skinny_k_more_rows(std::int64_t p0, std::int64_t p1, const float *a, std::int64_t lda,
                               const float *b, std::int64_t ldb, float *sum, std::int64_t lds) {
  if constexpr (R0 < M) {
    constexpr int G = M - R0 < kSkinnyTileRows ? M - R0 : kSkinnyTileRows;
    skinny_k_tile<V, G, J>(p0, p1, a + R0 * lda, lda, b, ldb, sum + R0 * lds, lds);
    skinny_k_more_rows<V, M, J, R0 + G>(p0, p1, a, lda, b, ldb, sum, lds);
  }
}

// The NT range's tile (skinny_k_range). From skinny_nt_wide_min_rows (6)
// rows on, on 32-register sets, the tile takes up to 24 accumulators (8 x 3
// columns, 7 x 3, 6 x 4) and skinny_k_tile's AInRegisters form, which
// leaves the loads of A to the compiler: GCC 12 makes A's vector the memory
// operand of each FMA (8 x 3: 3 loads of B and 24 FMAs that read A, per
// step) without load_per_use's empty asm per use; faster than both
// load_per_use and A forced into a register. At 8 rows a column's 16 lanes
// are reduced alone (not all 16 sums of an 8 x 2 tile at once).
template <class V, class Cfg, int M> constexpr bool skinny_k_wide() {
  return M >= Cfg::skinny_nt_wide_min_rows && V::width >= 16;
}

// Whether every J-column tile of a row group (1 to kSkinnyTileRows rows)
// reduces its sums as the same group's one-column tail does: skinny_k_tile
// reduces all of them at once where they fill one vector, and each alone
// otherwise, which pairs the lanes differently.
template <class V, int J> constexpr bool skinny_k_tiles_reduce_alike() {
  for (int g = 1; g <= kSkinnyTileRows; ++g)
    if ((g * J == V::width) != (g == V::width)) return false;
  return true;
}

// The k blocks of skinny_k_range: as deep as M rows of A fit in
// skinny_a_slice_bytes (a share of L2: every group of J columns re-reads
// the slice while B streams past once), so that where the whole of k fits
// B is one linear stream; never shallower than skinny_nt_min_k_block (4096:
// each B row segment starts a new prefetch stream), and cut into equal
// blocks of whole vectors where those stay that deep (shorter equal blocks
// ran slower). A function of the shape alone.
template <class Cfg, int M> std::int64_t skinny_k_block(std::int64_t k) {
  constexpr std::int64_t least = Cfg::skinny_nt_min_k_block;
  constexpr std::int64_t fit = Cfg::skinny_a_slice_bytes / (4 * M) / 16 * 16;
  constexpr std::int64_t most = fit > least ? fit : least;
  const std::int64_t even = round_up(ceil_div(k, ceil_div(k, most)), 16);
  return even > least ? even : least;
}

// Columns [j0, j1) of C, k in blocks of skinny_k_block; the blocks' partial
// dot products add up in order.
template <class V, class Cfg, int M>
void skinny_k_range(std::int64_t j0, std::int64_t j1, std::int64_t k, const float *a,
                    std::int64_t lda, const float *b, std::int64_t ldb, float alpha, float beta,
                    float *c, std::int64_t ldc, float *sum) {
  // Rows [0, G1) stream B; rows [G1, M), if any, take each group of B rows
  // again.
  constexpr int G1 = skinny_first_group<M>();
  constexpr bool wide = skinny_k_wide<V, Cfg, G1>();
  constexpr int J0 = (wide ? 24 : skinny_acc_budget<V>()) / G1;
  // At most skinny_nt_max_b_rows (4) rows of B at once: more concurrent
  // streams ran slower.
  constexpr int J = J0 < 1 ? 1 : J0 > Cfg::skinny_nt_max_b_rows ? Cfg::skinny_nt_max_b_rows : J0;
  // Threads split the columns at multiples of kSkinnyGrain. A J that does
  // not divide it moves a column between a tile and the one-column tail
  // with the thread count, so their reductions must then pair the lanes
  // alike (skinny_k_tile: all of a tile's sums at once where they fill one
  // vector, else each alone).
  static_assert(kSkinnyGrain % J == 0 || skinny_k_tiles_reduce_alike<V, J>(),
                "a column's bits would follow the thread count");
  const std::int64_t kBlock = skinny_k_block<Cfg, M>(k);
  // The next group's rows are prefetched as this group streams, so each
  // group starts warm instead of training a new hardware stream.
  const std::int64_t width = j1 - j0, groups_end = width / J * J;
  for (std::int64_t x = 0; x < M * width; ++x) sum[x] = 0.0f;
  for (std::int64_t p0 = 0; p0 < k; p0 += kBlock) {
    const std::int64_t p1 = p0 + kBlock < k ? p0 + kBlock : k;
    for (std::int64_t j = 0; j < groups_end; j += J) {
      skinny_k_tile<V, G1, J, false, wide>(p0, p1, a, lda, b + (j0 + j) * ldb, ldb, sum + j, width,
                                           j + 2 * J <= groups_end ? b + (j0 + j + J) * ldb
                                           : p1 < k                ? b + j0 * ldb + (p1 - p0)
                                                                   : nullptr);
      skinny_k_more_rows<V, M, J, G1>(p0, p1, a, lda, b + (j0 + j) * ldb, ldb, sum + j, width);
    }
    for (std::int64_t j = groups_end; j < width; ++j) {
      skinny_k_tile<V, G1, 1>(p0, p1, a, lda, b + (j0 + j) * ldb, ldb, sum + j, width);
      skinny_k_more_rows<V, M, 1, G1>(p0, p1, a, lda, b + (j0 + j) * ldb, ldb, sum + j, width);
    }
  }
  for (int i = 0; i < M; ++i)
    for (std::int64_t j = 0; j < width; ++j)
      c[i * ldc + j0 + j] = skinny_finish(sum[i * width + j], alpha, beta, c + i * ldc + j0 + j);
}

} // namespace AK_ISA_NS
} // namespace attnkern
