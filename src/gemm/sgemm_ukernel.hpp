// The register-tiled SGEMM micro-kernel: C[R x NR] = alpha * A * Bp + beta * C
// with NR = NV vector widths. Bp is an NR-wide packed sliver (kc rows of NR
// floats) or, with DirectB, B in place (row p at bp + p * ldb, NR floats
// of it); R * NV accumulators live in registers for the whole kc loop.
//
// A comes one of two ways, chosen by the template argument AStep:
//   AStep > 0   a packed sliver: element (i, p) at ap[p * AStep + i], where
//               AStep is the sliver height MR (R may be smaller at an edge);
//   AStep == 0  A in place: row i at ap + i * lda, contiguous along k (used
//               when a packed copy would be reused too little to pay off).
//
// Compiled once per instruction set (this header is included inside the
// instruction set's namespace, AK_ISA_NS).
#pragma once

#include <cstdint>

namespace attnkern {
namespace AK_ISA_NS {

template <class V, int R, int NV, int AStep = R, bool PrefetchC = false, bool DirectB = false,
          bool CopyB = false>
inline void sgemm_ukernel(std::int64_t kc, const float *__restrict ap, const float *__restrict bp,
                          float alpha, float beta, float *__restrict c, std::int64_t ldc,
                          std::int64_t lda = 0, std::int64_t ldb = 0,
                          float *__restrict bcopy = nullptr) {
  static_assert(!CopyB || DirectB, "the packed copy is written from B read in place");
  using reg = typename V::reg;
  constexpr int W = V::width;
  constexpr int NR = NV * W;
  reg acc[R][NV];
  // PrefetchC (the GEMM driver's full tiles): C's tile is asked for (for
  // writing) before the k loop, so that its lines arrive from L2 or L3
  // while the FMAs run instead of after them (C rows 2-8 KiB apart share L1
  // sets and are gone since the last kc block). Not for short loops
  // (kc < 128), where the requests only add work, nor for attention's
  // tiles, whose C is in L1 (slower with it).
  if (PrefetchC && kc >= 128)
#pragma GCC unroll 32
    for (int i = 0; i < R; ++i)
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) __builtin_prefetch(c + i * ldc + v * W, 1, 3);
#pragma GCC unroll 32
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[i][v] = V::zero();

  for (std::int64_t p = 0; p < kc; ++p) {
    reg b[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) b[v] = V::loadu(bp + v * W);
    if constexpr (CopyB) {
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) V::storeu(bcopy + v * W, b[v]);
      bcopy += NR;
    }
#pragma GCC unroll 32
    for (int i = 0; i < R; ++i) {
      const reg a = V::set1(AStep > 0 ? ap[i] : ap[i * lda]);
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[i][v] = V::fmadd(a, b[v], acc[i][v]);
    }
    ap += AStep > 0 ? AStep : 1;
    bp += DirectB ? ldb : NR;
  }

  const reg va = V::set1(alpha);
  const bool unit_alpha = alpha == 1.0f;
  if (beta == 0.0f) { // C is write-only: NaN already there must not leak in
#pragma GCC unroll 32
    for (int i = 0; i < R; ++i)
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v)
        V::storeu(c + i * ldc + v * W, unit_alpha ? acc[i][v] : V::mul(va, acc[i][v]));
  } else {
    const reg vb = V::set1(beta);
#pragma GCC unroll 32
    for (int i = 0; i < R; ++i)
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) {
        float *cp = c + i * ldc + v * W;
        const reg t = unit_alpha ? acc[i][v] : V::mul(va, acc[i][v]);
        V::storeu(cp, V::fmadd(vb, V::loadu(cp), t));
      }
  }
}

// Any tile of `rows` <= MR rows and `cols` <= NR columns. Rows: a kernel
// instance with exactly that many rows, so a short edge costs only its own
// rows. Columns: a short edge runs on a local rows x NR copy of C, so edge
// elements see exactly the arithmetic of interior ones. DirectB (B read in
// place, row stride ldb) takes full slivers only: cols == NR.
template <class V, int MR, int NV, bool PackedA, bool DirectB = false> struct TileKernel {
  static constexpr int NR = NV * V::width;

  template <int R>
  static void rows_exact(std::int64_t kc, const float *ap, const float *bp, float alpha, float beta,
                         float *c, std::int64_t ldc, int cols, std::int64_t lda, std::int64_t ldb) {
    constexpr int AStep = PackedA ? MR : 0;
    if (DirectB || cols == NR) {
      sgemm_ukernel<V, R, NV, AStep, true, DirectB>(kc, ap, bp, alpha, beta, c, ldc, lda, ldb);
      return;
    }
    alignas(64) float tile[R * NR];
    for (int i = 0; i < R; ++i)
      for (int j = 0; j < NR; ++j)
        tile[i * NR + j] = (beta != 0.0f && j < cols) ? c[i * ldc + j] : 0.0f;
    sgemm_ukernel<V, R, NV, AStep>(kc, ap, bp, alpha, beta, tile, NR, lda);
    for (int i = 0; i < R; ++i)
      for (int j = 0; j < cols; ++j) c[i * ldc + j] = tile[i * NR + j];
  }

  // A full tile (MR rows, NR columns) that reads B in place and also
  // writes the sliver's packed copy, for the tiles after it.
  static void run_packing_b(std::int64_t kc, const float *ap, const float *bp, float alpha,
                            float beta, float *c, std::int64_t ldc, std::int64_t lda,
                            std::int64_t ldb, float *bpack) {
    sgemm_ukernel<V, MR, NV, PackedA ? MR : 0, true, true, true>(kc, ap, bp, alpha, beta, c, ldc,
                                                                 lda, ldb, bpack);
  }

  template <int R = MR>
  static void run(int rows, std::int64_t kc, const float *ap, const float *bp, float alpha,
                  float beta, float *c, std::int64_t ldc, int cols, std::int64_t lda,
                  std::int64_t ldb = 0) {
    if constexpr (R > 0) {
      if (rows == R) return rows_exact<R>(kc, ap, bp, alpha, beta, c, ldc, cols, lda, ldb);
      run<R - 1>(rows, kc, ap, bp, alpha, beta, c, ldc, cols, lda, ldb);
    }
  }
};

} // namespace AK_ISA_NS
} // namespace attnkern
