// Skinny SGEMM: m <= GemmBlocks::skinny_m rows of C (the projections of a
// decode step, x * W). Each element of B is used m times, so the product is
// bound by streaming B from memory; packing B (or a tiny A) would only add
// a second pass over it. Two GEMV-like kernels read B where it lies:
//
//   B rows contiguous along n (op(B) = B, row-major k x n): a register tile
//     of m rows x NV vectors of C; each k step loads NV vectors of one B row
//     and broadcasts A(i, p). k runs in blocks of 8 rows (32 for m >= 6 on
//     AVX-512) and, within a block, strip after strip: B is read as 8 (32)
//     linear row streams, with the tile's sums parked in a scratch row
//     block (L1/L2) between blocks.
//   B rows contiguous along k (op(B) = B^T, the usual weight layout): J
//     columns of C at a time, each a dot product of A's rows with one row of
//     B, vectorized along k and reduced at the end of each k block (4096
//     deep or more: skinny_k_block).
//
// More rows than one register tile holds (up to an instruction set's
// skinny_m, at most kSkinnyMaxRows, and kSkinnyMaxRowsBAlongK for B stored
// along k) go to the same tiles in groups of up to
// kSkinnyTileRows: the first group streams B from memory, and each later
// group reads the lines it just brought in again from L1/L2.
//
// Threads split the columns of C; every element's sum runs in the same order
// whatever the thread count. A is copied to a contiguous m x k block first
// (at most skinny_m * k floats) when its rows are not contiguous or when
// their stride would put them all in one L1 set.
#pragma once

#include <cstdint>
#include <cstring>

#include "../kernel_table.hpp"
#include "../scratch.hpp"
#include "../threading.hpp"
#include "gemm_common.hpp"

namespace attnkern {
namespace AK_ISA_NS {

// Vector registers the accumulators of a skinny tile may take.
template <class V> constexpr int skinny_acc_budget() { return V::width >= 16 ? 16 : 8; }

// The most rows the skinny kernels are instantiated for (B contiguous along
// n; along k), and the most one register tile takes: products of more rows
// than kSkinnyTileRows run the same tiles over groups of rows, the first
// group streaming B and each later one reading the same B lines again from
// L1/L2. B along k stops at 32 rows: each group of its rows re-reads its
// slice of A (rows x 4096 floats, from L2) per few B rows, and at 36-48
// rows it ran at 0.73-1.3x the packed path depending on the strides
// (AVX-512, 1 thread, n = k = 1500-4096), where along n it ran at
// 1.15-1.6x (sgemm_one).
constexpr int kSkinnyMaxRows = 48;
constexpr int kSkinnyMaxRowsBAlongK = 32;
// The most rows sgemm_skinny<V, max_rows> takes, B stored either way.
constexpr std::int64_t skinny_rows_limit(std::int64_t max_rows, bool b_along_k) {
  return b_along_k && max_rows > kSkinnyMaxRowsBAlongK ? kSkinnyMaxRowsBAlongK : max_rows;
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

// The NN range's tile and k block (skinny_n_range). From 6 rows on, on
// 32-register sets, the tile takes up to 24 accumulators (8 x 3 vectors, 6 x
// 4) and k runs in blocks of 32 rows, so that the tile's sums make one round
// trip through memory per 32 k steps rather than per 8: there the FMAs, not
// B's stream, are the limit. m = 8, 1 thread: in cache (B in L2) ~55 -> ~87
// GFLOP/s; 8 x 4096 x 4096, A/B in one process (ad-hoc harness, alternating
// calls, medians of 31), 1 thread +16-25 %, 2 threads +18-42 %; 7 rows
// +20-30 %, 6 rows +0-16 %, 5 rows 0.90-1.04 (left as it was). Fewer rows
// keep blocks of 8, which stream faster for them (m = 4 with blocks of 32:
// -15-25 %).
template <class V, int M> constexpr bool skinny_n_wide() { return M >= 6 && V::width >= 16; }
template <class V, int M> constexpr int skinny_n_strip_vectors() {
  return skinny_n_wide<V, M>() ? 24 / M : skinny_strip_vectors<V, M>();
}
template <class V, int M> constexpr std::int64_t skinny_n_block() {
  return skinny_n_wide<V, M>() ? 32 : 8;
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
// (NT 8 x 4096 x 4096: ~29 GFLOP/s aliased, ~45 copied). Rows that span less
// than a page cannot.
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

// ---------------------------------------------------- B contiguous along n

// Accumulates C_acc[0:M, 0 : NV*W] += A[0:M, p0:p1] * B[p0:p1, strip] for
// M rows; A row i at a + i * lda (contiguous), acc row i at acc + i * ldacc.
// The accumulators round-trip through memory between k blocks, which is
// exact, so the sum per element is one unbroken chain of fused multiply-adds.
// pf, when given, is rows wanted later (stride ldpf): each k step requests
// the lines of row p - p0 that span the strip's NV * W floats (prefetcht2),
// among its FMAs.
template <class V, int M, int NV>
inline void skinny_n_tile(std::int64_t p0, std::int64_t p1, const float *a, std::int64_t lda,
                          const float *b, std::int64_t ldb, float *acc_mem, std::int64_t ldacc,
                          const float *pf = nullptr, std::int64_t ldpf = 0) {
  using reg = typename V::reg;
  constexpr int W = V::width;
  reg acc[M][NV];
#pragma GCC unroll 8
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[i][v] = V::loadu(acc_mem + i * ldacc + v * W);
  for (std::int64_t p = p0; p < p1; ++p) {
    const float *bp = b + p * ldb;
    if (pf)
#pragma GCC unroll 8
      for (int x = 0; x < NV * W; x += 16) __builtin_prefetch(pf + (p - p0) * ldpf + x, 0, 1);
    reg bv[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) bv[v] = V::loadu(bp + v * W);
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
template <class V, int M>
void skinny_n_range(std::int64_t j0, std::int64_t j1, std::int64_t k, const float *a,
                    std::int64_t lda, const float *b, std::int64_t ldb, float alpha, float beta,
                    float *c, std::int64_t ldc, float *acc) {
  constexpr int W = V::width;
  // Rows [0, G1) stream B; rows [G1, M), if any, take each strip again.
  constexpr int G1 = skinny_first_group<M>();
  constexpr int NV = skinny_n_strip_vectors<V, G1>();
  constexpr std::int64_t strip = NV * W, kBlock = skinny_n_block<V, M>();
  const std::int64_t width = j1 - j0;
  const std::int64_t strips_end = width / strip * strip, vec_end = width / W * W;
  // The sums' rows hold whole vectors (the last columns' tile stores one)
  // and are a line longer where they would alias (the slice of sums has
  // room for both: skinny_sums_floats).
  const std::int64_t padded = (width + W - 1) / W * W;
  const std::int64_t lds = padded + (skinny_rows_alias(padded, M) ? 16 : 0);
  // The sums start 32 L1 sets (half of them) away from B's first line. B's
  // rows of a block are often a multiple of 4 KiB apart (a 4096-wide
  // weight), so a strip's lines of all of them, and those of the next block that
  // are requested meanwhile, crowd the same sets; sums that land on them
  // too (by the scratch's alignment) exceed the 8 ways. 1 thread, 4096 x
  // 4096, huge pages, medians of 3-4 alternating runs, GB/s over a
  // streaming read in the same process: m = 2 0.84 -> 0.89, m = 4 0.71 ->
  // 0.83, m = 1 0.97 -> 0.99, m = 8 0.57 -> 0.56. The slice has room for
  // the shift (skinny_sums_floats).
  acc += (l1_set_of(b + j0) + 32 - l1_set_of(acc) + 64) % 64 * 16;
  for (std::int64_t x = 0; x < M * lds; ++x) acc[x] = 0.0f;
  for (std::int64_t p0 = 0; p0 < k; p0 += kBlock) {
    const std::int64_t p1 = p0 + kBlock < k ? p0 + kBlock : k;
    // The next block's rows of this strip, a line at a time (prefetcht2):
    // each block starts on kBlock new row streams, which the hardware prefetcher
    // would have to find again (m = 1: 20 -> 23.5 GB/s, m = 2: 16 -> 20,
    // m = 4: 13.6 -> 15.4, m = 8 with A and the sums unaliased: +5 %;
    // prefetcht0 was slower everywhere).
    const std::int64_t q1 = p1 + kBlock < k ? p1 + kBlock : k;
    // Each k step of a strip asks for the same strip of one next row, among
    // its FMAs, rather than the tile asking for all of them at its start: a burst
    // of requests holds the core's miss buffers while the FMAs wait. 1
    // thread, 3 alternating rounds, skinny over adjacent read, medians: m = 1
    // 0.85 -> 0.86, m = 2 0.79 -> 0.86, m = 4 0.68 -> 0.83, m = 8 0.54 ->
    // 0.63 (AVX2 m = 4 0.64-0.84 -> 0.91-0.95). A shorter last block takes
    // the burst.
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
      // lanes land in the sums' padding and are never read. (Each lane of
      // one scalar chain per row and column instead: n = 1500, m = 8, 1
      // thread ~45 GFLOP/s against ~75 at 1504.)
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

// ---------------------------------------------------- B contiguous along k

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
template <class V, int M, int J, bool RowByRow = false, bool AInRegisters = false>
inline void skinny_k_tile(std::int64_t p0, std::int64_t p1, const float *a, std::int64_t lda,
                          const float *b, std::int64_t ldb, float *sum, std::int64_t lds,
                          const float *b_next = nullptr) {
  using reg = typename V::reg;
  constexpr int W = V::width;
  constexpr std::int64_t kAhead = 512;
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
        const reg bv = V::loadu(b + j * ldb + p);
#pragma GCC unroll 8
        for (int i = 0; i < M; ++i) acc[i][j] = V::fmadd(V::loadu(a + i * lda + p), bv, acc[i][j]);
      }
  } else {
    for (std::int64_t p = p0; p < p_vec; p += W) {
      reg bv[J];
#pragma GCC unroll 8
      for (int j = 0; j < J; ++j) bv[j] = V::loadu(b + j * ldb + p);
      if (b_next && (p & 15) == 0) // a line of each next row per line consumed (prefetcht2)
#pragma GCC unroll 8
        for (int j = 0; j < J; ++j) __builtin_prefetch(b_next + j * ldb + p, 0, 1);
      // m >= 4 also asks for its own rows kAhead floats on: with the
      // arithmetic of four or more A rows per B vector between requests,
      // the next rows' prefetches alone leave the stream short
      // (NT 4 x 4096 x 4096: 15 -> 20 GB/s, 8 x 4096 x 4096: 8.5 -> 14).
      if (M >= 4 && (p & 15) == 0 && p + kAhead < p1) {
#pragma GCC unroll 8
        for (int j = 0; j < J; ++j) __builtin_prefetch(b + j * ldb + p + kAhead, 0, 1);
      }
      // A's vector is loaded by each of its J FMAs (load_per_use) rather
      // than once into a register, though B is what streams from memory:
      // NT 4 x 4096 x 4096, 1 thread, skinny over read GB/s, 3 alternating
      // runs: 0.72-0.79 -> 0.99-1.11 (2 rows 0.87-0.95 -> 0.91-1.03, 1 row
      // 0.92-0.98 -> 0.98-1.02, 8 rows 0.63-0.71 either way). The likely
      // cause: with fewer operations and registers written per B line, more
      // lines of B are in flight while the FMAs wait for them.
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
      for (int j = 0; j < J; ++j) bt[j][p - p_vec] = b[j * ldb + p];
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

// The NT range's tile (skinny_k_range). From 6 rows on, on 32-register
// sets, the tile takes up to 24 accumulators (8 x 3 columns, 7 x 3, 6 x 4)
// and skinny_k_tile's AInRegisters form, which leaves the loads of A to the
// compiler: GCC 12 makes A's vector the memory operand of each FMA (8 x 3:
// 3 loads of B and 24 FMAs that read A, per step) without load_per_use's
// empty asm per use. Each product and each lane's sum is the same as
// before, but at 8 rows a column's 16 lanes are now reduced alone (8 x 2
// reduced all 16 sums at once), which pairs them differently: m = 8 to 32
// may differ from before in the last bits. A/B in one process (ad-hoc, 3
// alternating rounds, medians of 5 / 3), AVX-512, n = k = 4096, GFLOP/s,
// 1 thread: m = 8 73.0-74.8 -> 76.6-77.0, m = 16 77.8-79.5 -> 80.2-82.3,
// m = 32 77.5-80.6 -> 82.5-84.2; 2 threads, within this VM's noise: m = 8
// 136-145 -> 140-150, m = 16 146-153 -> 151-161, m = 32 146-154 -> 151-166.
// Not kept: 24 accumulators with load_per_use (m = 8 +0-4 %), and A forced
// into a register per row (an empty asm on it), 8-13 % slower than this.
template <class V, int M> constexpr bool skinny_k_wide() { return M >= 6 && V::width >= 16; }

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
// the slice while B streams past once), never shallower than 4096 (shorter
// blocks measured slower, as each B row segment then starts a new prefetch
// stream), and cut into equal blocks of whole vectors where those stay that
// deep (AVX2, m = 8, k = 11008: 3 x 3680 ran 4 % slower than 4096, 4096,
// 2816). A function of the shape alone. Where the whole of k fits, B is one
// linear stream: AVX-512, n = 4096, A/B in one process against blocks of
// 4096, k = 11008: 1 thread m = 1, 2, 4, 8 +4-13 %, 2 threads +5-11 %;
// k = 8192 m = 4, 8 +3-8 %; k = 14336, m = 8 (two blocks of 7168) +3-5 %,
// where one block of 14336 (a 448 KiB slice) ran 4-6 % slower.
template <class V> constexpr std::int64_t skinny_a_slice_bytes() {
  return V::width >= 16 ? 384 * 1024 : 128 * 1024;
}
template <class V, int M> std::int64_t skinny_k_block(std::int64_t k) {
  constexpr std::int64_t fit = skinny_a_slice_bytes<V>() / (4 * M) / 16 * 16;
  constexpr std::int64_t most = fit > 4096 ? fit : 4096;
  const std::int64_t even = round_up(ceil_div(k, ceil_div(k, most)), 16);
  return even > 4096 ? even : 4096;
}

// Columns [j0, j1) of C, k in blocks of skinny_k_block; the blocks' partial
// dot products add up in order.
template <class V, int M>
void skinny_k_range(std::int64_t j0, std::int64_t j1, std::int64_t k, const float *a,
                    std::int64_t lda, const float *b, std::int64_t ldb, float alpha, float beta,
                    float *c, std::int64_t ldc, float *sum) {
  // Rows [0, G1) stream B; rows [G1, M), if any, take each group of B rows
  // again.
  constexpr int G1 = skinny_first_group<M>();
  constexpr bool wide = skinny_k_wide<V, G1>();
  constexpr int J0 = (wide ? 24 : skinny_acc_budget<V>()) / G1;
  // At most 4 rows of B at once: more concurrent streams measured slower.
  constexpr int J = J0 < 1 ? 1 : J0 > 4 ? 4 : J0;
  // Threads split the columns at multiples of kSkinnyGrain. A J that does
  // not divide it moves a column between a tile and the one-column tail
  // with the thread count, so their reductions must then pair the lanes
  // alike (skinny_k_tile: all of a tile's sums at once where they fill one
  // vector, else each alone).
  static_assert(kSkinnyGrain % J == 0 || skinny_k_tiles_reduce_alike<V, J>(),
                "a column's bits would follow the thread count");
  const std::int64_t kBlock = skinny_k_block<V, M>(k);
  // The next group's rows are prefetched as this group streams, so each
  // group starts warm instead of training a new hardware stream (m = 1
  // 17 -> 19 GB/s, m = 2 16 -> 20, m = 4 and 8 see skinny_k_tile).
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

// Floats of running sums for m rows, n columns and `threads` threads: each
// thread's slice, padded by two lines per row (skinny_n_range rounds a row
// up to whole vectors, then may add a line) and by kSumsShiftMax floats for
// skinny_n_range's placement of the sums.
constexpr std::int64_t kSumsShiftMax = 63 * 16;
constexpr std::int64_t kSumsRowPad = 2 * kSkinnyGrain;
inline std::int64_t skinny_sums_floats(std::int64_t m, std::int64_t n, int threads) {
  return m * (n + kSumsRowPad * threads) + kSumsShiftMax * threads;
}

// Each thread's running sums live in its own slice of `sums`.
template <class V, int M, bool BAlongK>
void skinny_columns(std::int64_t n, std::int64_t k, const float *a, std::int64_t lda,
                    const float *b, std::int64_t ldb, float alpha, float beta, float *c,
                    std::int64_t ldc, int threads, float *sums) {
  const std::int64_t chunks = (n + kSkinnyGrain - 1) / kSkinnyGrain;
  const auto columns_of = [&](int t, int nt) {
    const std::int64_t c0 = chunks * t / nt, c1 = chunks * (t + 1) / nt;
    const std::int64_t j0 = c0 * kSkinnyGrain, j1 = c1 * kSkinnyGrain < n ? c1 * kSkinnyGrain : n;
    float *const part = sums + M * (j0 + kSumsRowPad * t) + kSumsShiftMax * t;
    if (j0 < j1) {
      if (BAlongK)
        skinny_k_range<V, M>(j0, j1, k, a, lda, b, ldb, alpha, beta, c, ldc, part);
      else
        skinny_n_range<V, M>(j0, j1, k, a, lda, b, ldb, alpha, beta, c, ldc, part);
    }
  };
  if (threads <= 1) return columns_of(0, 1); // no OpenMP team of one
#pragma omp parallel num_threads(threads)
  columns_of(omp_thread_id(), omp_team_size());
}

// ------------------------------------------------------------------ driver

// Instantiated for 1 to skinny_rows_limit(MaxRows, b_along_k) rows only.
template <class V, int MaxRows, int M = 1>
void skinny_dispatch(int m, bool b_along_k, std::int64_t n, std::int64_t k, const float *a,
                     std::int64_t lda, const float *b, std::int64_t ldb, float alpha, float beta,
                     float *c, std::int64_t ldc, int threads, float *sums) {
  if constexpr (M <= MaxRows) {
    if (m != M)
      return skinny_dispatch<V, MaxRows, M + 1>(m, b_along_k, n, k, a, lda, b, ldb, alpha, beta, c,
                                                ldc, threads, sums);
    if (!b_along_k)
      return skinny_columns<V, M, false>(n, k, a, lda, b, ldb, alpha, beta, c, ldc, threads, sums);
    if constexpr (M <= skinny_rows_limit(MaxRows, true))
      skinny_columns<V, M, true>(n, k, a, lda, b, ldb, alpha, beta, c, ldc, threads, sums);
  }
}

// Requires 1 <= g.m <= skinny_rows_limit(MaxRows, g.trans_b), g.k >= 1 and
// alpha != 0 (sgemm_one checks, and handles the rest). MaxRows is the
// instruction set's skinny_m: only that many rows are instantiated.
template <class V, int MaxRows> KernelStatus sgemm_skinny(const GemmArgs &g, int threads) {
  static_assert(MaxRows >= 1 && MaxRows <= kSkinnyMaxRows, "the skinny kernels' rows");
  threads = threads_for_work(threads, 2.0 * g.m * g.n * g.k, 1.0e6);
  // A is copied to rows of a contiguous block when it is stored transposed
  // or its rows alias in L1; the copy's stride is padded by a cache line
  // where the plain one would alias.
  const bool copy_a = g.trans_a || (g.m > 1 && skinny_rows_alias(g.lda, g.m));
  std::int64_t lda_copy = (g.k + 15) / 16 * 16;
  if (skinny_rows_alias(lda_copy, g.m)) lda_copy += 16;
  // One buffer (the thread's cached scratch): the running sums, then A's copy
  // (with room to place it, below).
  const std::int64_t sums_floats = skinny_sums_floats(g.m, g.n, threads);
  Scratch scratch(
      static_cast<std::size_t>(sums_floats + (copy_a ? g.m * lda_copy + kSumsShiftMax : 0)));
  if (!scratch.data()) return KernelStatus::out_of_memory;
  const float *a = g.a;
  std::int64_t lda = g.lda;
  if (copy_a) {
    // The copy starts about half the L1 sets away from B's first line, as
    // the NN kernel's sums do (skinny_n_range): NT, m = 4, 1 thread, GB/s
    // over a streaming read, three sets of 3-5 alternating runs: 0.69 /
    // 0.745 / 0.74 -> 0.76 / 0.765 / 0.78 (NN unchanged).
    float *ac = scratch.data() + sums_floats;
    ac += (l1_set_of(g.b) + 32 - g.m / 2 - l1_set_of(ac) + 128) % 64 * 16;
    if (g.trans_a) { // A is stored k x m: gather its m rows
      for (std::int64_t p = 0; p < g.k; ++p)
        for (std::int64_t i = 0; i < g.m; ++i) ac[i * lda_copy + p] = g.a[p * g.lda + i];
    } else {
      for (std::int64_t i = 0; i < g.m; ++i)
        std::memcpy(ac + i * lda_copy, g.a + i * g.lda, static_cast<std::size_t>(g.k) * 4);
    }
    a = ac;
    lda = lda_copy;
  }
  skinny_dispatch<V, MaxRows>(static_cast<int>(g.m), g.trans_b, g.n, g.k, a, lda, g.b, g.ldb,
                              g.alpha, g.beta, g.c, g.ldc, threads, scratch.data());
  return KernelStatus::ok;
}

} // namespace AK_ISA_NS
} // namespace attnkern
