// Skinny SGEMM: m <= GemmBlocks::skinny_m rows of C (the projections of a
// decode step, x * W). Each element of B is used m times, so the product is
// bound by streaming B from memory; packing B (or a tiny A) would only add
// a second pass over it. Two GEMV-like kernels read B where it lies:
// sgemm_skinny_nn.hpp for B rows contiguous along n (op(B) = B), and
// sgemm_skinny_nt.hpp for B rows contiguous along k (op(B) = B^T, the usual
// weight layout); their shared helpers are in sgemm_skinny_common.hpp.
//
// More rows than one register tile holds (up to an instruction set's
// skinny_m, at most kSkinnyMaxRows, and skinny_m_b_along_k for B stored
// along k) go to the same tiles in groups of up to
// kSkinnyTileRows: the first group streams B from memory, and each later
// group reads the lines it just brought in again from L1/L2.
//
// Threads split the columns of C; every element's sum runs in the same order
// whatever the thread count. A is copied to a contiguous m x k block first
// (at most skinny_m * k floats) when its rows are not contiguous or when
// their stride would put them all in one L1 set.
//
// This file: the column split across threads, the dispatch on m and the
// entry point (A's copy, the scratch).
#pragma once

#include <cstdint>
#include <cstring>

#include "../kernel_table.hpp"
#include "gemm_common.hpp"
#include "sgemm_skinny_common.hpp"
#include "sgemm_skinny_nn.hpp"
#include "sgemm_skinny_nt.hpp"

namespace attnkern {
namespace AK_ISA_NS {

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
template <class V, class Cfg, int M, bool BAlongK>
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
        skinny_k_range<V, Cfg, M>(j0, j1, k, a, lda, b, ldb, alpha, beta, c, ldc, part);
      else
        skinny_n_range<V, Cfg, M>(j0, j1, k, a, lda, b, ldb, alpha, beta, c, ldc, part);
    }
  };
  if (threads <= 1) return columns_of(0, 1); // no OpenMP team of one
#pragma omp parallel num_threads(threads)
  columns_of(omp_thread_id(), omp_team_size());
}

// ------------------------------------------------------------------ driver

// Instantiated for 1 to skinny_rows_limit<Cfg>(b_along_k) rows only.
template <class V, class Cfg, int M = 1>
void skinny_dispatch(int m, bool b_along_k, std::int64_t n, std::int64_t k, const float *a,
                     std::int64_t lda, const float *b, std::int64_t ldb, float alpha, float beta,
                     float *c, std::int64_t ldc, int threads, float *sums) {
  if constexpr (M <= Cfg::skinny_m) {
    if (m != M)
      return skinny_dispatch<V, Cfg, M + 1>(m, b_along_k, n, k, a, lda, b, ldb, alpha, beta, c, ldc,
                                            threads, sums);
    if (!b_along_k)
      return skinny_columns<V, Cfg, M, false>(n, k, a, lda, b, ldb, alpha, beta, c, ldc, threads,
                                              sums);
    if constexpr (M <= skinny_rows_limit<Cfg>(true))
      skinny_columns<V, Cfg, M, true>(n, k, a, lda, b, ldb, alpha, beta, c, ldc, threads, sums);
  }
}

// Where A is copied (see sgemm_skinny) and the copy's row stride.
struct SkinnyACopy {
  bool copy;
  std::int64_t lda;
};
inline SkinnyACopy skinny_a_copy(const GemmArgs &g) {
  // A is copied to rows of a contiguous block when it is stored transposed
  // or its rows alias in L1; the copy's stride is padded by a cache line
  // where the plain one would alias.
  std::int64_t lda_copy = (g.k + 15) / 16 * 16;
  if (skinny_rows_alias(lda_copy, g.m)) lda_copy += 16;
  return {g.trans_a || (g.m > 1 && skinny_rows_alias(g.lda, g.m)), lda_copy};
}

// Scratch floats sgemm_skinny takes on `threads` threads: the running sums,
// then A's copy (with room to place it, below).
inline std::int64_t skinny_scratch_floats(const GemmArgs &g, int threads) {
  const SkinnyACopy ac = skinny_a_copy(g);
  return skinny_sums_floats(g.m, g.n, threads) + (ac.copy ? g.m * ac.lda + kSumsShiftMax : 0);
}

// Requires 1 <= g.m <= skinny_rows_limit<Cfg>(g.trans_b), g.k >= 1 and
// alpha != 0 (plan_sgemm checks, and sgemm_planned handles the rest); threads
// is the plan's team, and `scratch` holds skinny_scratch_floats(g, threads).
// Only Cfg::skinny_m rows are instantiated.
template <class V, class Cfg> void sgemm_skinny(const GemmArgs &g, int threads, float *scratch) {
  static_assert(Cfg::skinny_m >= 1 && Cfg::skinny_m <= kSkinnyMaxRows, "the skinny kernels' rows");
  const SkinnyACopy copy = skinny_a_copy(g);
  const std::int64_t sums_floats = skinny_sums_floats(g.m, g.n, threads);
  const float *a = g.a;
  std::int64_t lda = g.lda;
  if (copy.copy) {
    const std::int64_t lda_copy = copy.lda;
    // The copy starts about half the L1 sets away from B's first line, as
    // the NN kernel's sums do (skinny_n_range), so that the two do not crowd
    // the same sets.
    float *ac = scratch + sums_floats;
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
  skinny_dispatch<V, Cfg>(static_cast<int>(g.m), g.trans_b, g.n, g.k, a, lda, g.b, g.ldb, g.alpha,
                          g.beta, g.c, g.ldc, threads, scratch);
}

} // namespace AK_ISA_NS
} // namespace attnkern
