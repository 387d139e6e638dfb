// Skinny SGEMM with B contiguous along n (op(B) = B, row-major k x n): a
// register tile of m rows x NV vectors of C; each k step loads NV vectors of
// one B row and broadcasts A(i, p). k runs in blocks of 8 rows (32 for
// m >= 6 on AVX-512) and, within a block, strip after strip: B is read as 8
// (32) linear row streams, with the tile's sums parked in a scratch row
// block (L1/L2) between blocks. Attention's P.V reuses skinny_n_tile.
#pragma once

#include <cstdint>
#include <cstring>

#include "sgemm_skinny_common.hpp"

namespace attnkern {
namespace AK_ISA_NS {

// The NN range's tile and k block (skinny_n_range). From
// skinny_nn_wide_min_rows (6) rows on, on 32-register sets, the tile takes
// up to 24 accumulators (8 x 3 vectors, 6 x 4) and k runs in blocks of
// skinny_nn_wide_k_block (32) rows, so that the tile's sums make one round
// trip through memory per 32 k steps rather than per 8: there the FMAs, not
// B's stream, are the limit. Fewer rows keep blocks of skinny_nn_k_block
// (8), which stream faster for them.
template <class V, class Cfg, int M> constexpr bool skinny_n_wide() {
  return M >= Cfg::skinny_nn_wide_min_rows && V::width >= 16;
}
template <class V, class Cfg, int M> constexpr int skinny_n_strip_vectors() {
  return skinny_n_wide<V, Cfg, M>() ? 24 / M : skinny_strip_vectors<V, M>();
}
template <class V, class Cfg, int M> constexpr std::int64_t skinny_n_block() {
  return skinny_n_wide<V, Cfg, M>() ? Cfg::skinny_nn_wide_k_block : Cfg::skinny_nn_k_block;
}

// Accumulates C_acc[0:M, 0 : NV*W] += A[0:M, p0:p1] * B[p0:p1, strip] for
// M rows; A row i at a + i * lda (contiguous), acc row i at acc + i * ldacc.
// The accumulators round-trip through memory between k blocks, which is
// exact, so the sum per element is one unbroken chain of fused multiply-adds.
// pf, when given, is rows wanted later (stride ldpf, B's type): each k step
// requests the lines of row p - p0 that span the strip's NV * W elements
// (kAheadHint), among its FMAs.
// TB: B's element type (widen.hpp; attention's half-precision values).
template <class V, int M, int NV, class TB = float>
inline void skinny_n_tile(std::int64_t p0, std::int64_t p1, const float *a, std::int64_t lda,
                          const TB *b, std::int64_t ldb, float *acc_mem, std::int64_t ldacc,
                          const TB *pf = nullptr, std::int64_t ldpf = 0) {
  using reg = typename V::reg;
  constexpr int W = V::width;
  constexpr int kLine = 64 / static_cast<int>(sizeof(TB)); // elements per cache line
  reg acc[M][NV];
#pragma GCC unroll 8
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[i][v] = V::loadu(acc_mem + i * ldacc + v * W);
  for (std::int64_t p = p0; p < p1; ++p) {
    const TB *bp = b + p * ldb;
    if (pf)
#pragma GCC unroll 8
      for (int x = 0; x < NV * W; x += kLine)
        __builtin_prefetch(pf + (p - p0) * ldpf + x, 0, kAheadHint<TB>);
    reg bv[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) bv[v] = load_as<V>(bp + v * W);
#pragma GCC unroll 8
    for (int i = 0; i < M; ++i) {
      const reg av = V::set1(a[i * lda + p]);
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[i][v] = V::fmadd(av, bv[v], acc[i][v]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) V::storeu(acc_mem + i * ldacc + v * W, acc[i][v]);
}

// Rows [R0, M) of a strip's tile after the first group (skinny_n_range), in
// groups of up to kSkinnyTileRows, each reading the strip's B lines again.
template <class V, int M, int NV, int R0>
inline void skinny_n_more_rows(std::int64_t p0, std::int64_t p1, const float *a, std::int64_t lda,
                               const float *b, std::int64_t ldb, float *acc, std::int64_t lds) {
  if constexpr (R0 < M) {
    constexpr int G = M - R0 < kSkinnyTileRows ? M - R0 : kSkinnyTileRows;
    skinny_n_tile<V, G, NV>(p0, p1, a + R0 * lda, lda, b, ldb, acc + R0 * lds, lds);
    skinny_n_more_rows<V, M, NV, R0 + G>(p0, p1, a, lda, b, ldb, acc, lds);
  }
}

// Columns [j0, j1) of C: k is walked in blocks of kBlock rows, and within a
// block every strip of the range in turn, so B is read row segment after row
// segment (a linear stream per block) rather than down one narrow strip of
// the whole matrix (a page per row). acc holds M x (j1 - j0) running sums.
template <class V, class Cfg, int M>
void skinny_n_range(std::int64_t j0, std::int64_t j1, std::int64_t k, const float *a,
                    std::int64_t lda, const float *b, std::int64_t ldb, float alpha, float beta,
                    float *c, std::int64_t ldc, float *acc) {
  constexpr int W = V::width;
  // Rows [0, G1) stream B; rows [G1, M), if any, take each strip again.
  constexpr int G1 = skinny_first_group<M>();
  constexpr int NV = skinny_n_strip_vectors<V, Cfg, G1>();
  constexpr std::int64_t strip = NV * W, kBlock = skinny_n_block<V, Cfg, M>();
  const std::int64_t width = j1 - j0;
  const std::int64_t strips_end = width / strip * strip, vec_end = width / W * W;
  // The sums' rows hold whole vectors (the last columns' tile stores one)
  // and are a line longer where they would alias (the slice of sums has
  // room for both: skinny_sums_floats).
  const std::int64_t padded = (width + W - 1) / W * W;
  const std::int64_t lds = padded + (skinny_rows_alias(padded, M) ? 16 : 0);
  // The sums start 32 L1 sets (half of them) away from B's first line. B's
  // rows of a block are often a multiple of 4 KiB apart (a 4096-wide
  // weight), so a strip's lines of all of them, and those of the next block
  // that are requested meanwhile, crowd the same sets; sums that land on
  // them too (by the scratch's alignment) exceed the 8 ways. The slice has
  // room for the shift (skinny_sums_floats).
  acc += (l1_set_of(b + j0) + 32 - l1_set_of(acc) + 64) % 64 * 16;
  for (std::int64_t x = 0; x < M * lds; ++x) acc[x] = 0.0f;
  for (std::int64_t p0 = 0; p0 < k; p0 += kBlock) {
    const std::int64_t p1 = p0 + kBlock < k ? p0 + kBlock : k;
    // The next block's rows of this strip, a line at a time (prefetcht2):
    // each block starts on kBlock new row streams, which the hardware
    // prefetcher would have to find again (prefetcht0 was slower).
    const std::int64_t q1 = p1 + kBlock < k ? p1 + kBlock : k;
    // Each k step of a strip asks for the same strip of one next row, among
    // its FMAs, rather than the tile asking for all of them at its start: a
    // burst of requests holds the core's miss buffers while the FMAs wait. A
    // shorter last block takes the burst.
    const bool spread = q1 - p1 == p1 - p0;
    for (std::int64_t j = 0; j < strips_end; j += strip) {
      if (!spread)
        for (std::int64_t q = p1; q < q1; ++q)
          for (std::int64_t x = 0; x < strip; x += 16)
            __builtin_prefetch(b + q * ldb + j0 + j + x, 0, 1);
      skinny_n_tile<V, G1, NV>(p0, p1, a, lda, b + j0 + j, ldb, acc + j, lds,
                               spread ? b + p1 * ldb + j0 + j : nullptr, ldb);
      skinny_n_more_rows<V, M, NV, G1>(p0, p1, a, lda, b + j0 + j, ldb, acc + j, lds);
    }
    for (std::int64_t j = strips_end; j < vec_end; j += W) {
      skinny_n_tile<V, G1, 1>(p0, p1, a, lda, b + j0 + j, ldb, acc + j, lds);
      skinny_n_more_rows<V, M, 1, G1>(p0, p1, a, lda, b + j0 + j, ldb, acc + j, lds);
    }
    if (vec_end < width) {
      // The last width - vec_end columns: the block's B rows copied into
      // whole vectors, zero-padded, for the same one-vector tile. Its spare
      // lanes land in the sums' padding and are never read. (One scalar
      // chain per row and column instead ran far slower.)
      alignas(64) float bt[kBlock * W];
      const std::int64_t tail = width - vec_end;
      for (std::int64_t p = p0; p < p1; ++p) {
        float *const row = bt + (p - p0) * W;
        std::memcpy(row, b + p * ldb + j0 + vec_end, static_cast<std::size_t>(tail) * 4);
        for (std::int64_t x = tail; x < W; ++x) row[x] = 0.0f;
      }
      skinny_n_tile<V, G1, 1>(0, p1 - p0, a + p0, lda, bt, W, acc + vec_end, lds);
      skinny_n_more_rows<V, M, 1, G1>(0, p1 - p0, a + p0, lda, bt, W, acc + vec_end, lds);
    }
  }
  for (int i = 0; i < M; ++i)
    for (std::int64_t j = 0; j < width; ++j)
      c[i * ldc + j0 + j] = skinny_finish(acc[i * lds + j], alpha, beta, c + i * ldc + j0 + j);
}

} // namespace AK_ISA_NS
} // namespace attnkern
