// The register-tiled SGEMM micro-kernel: C[MR x NR] = alpha * Ap * Bp + beta * C
// with NR = NV vector widths. Ap is an MR-tall packed sliver (kc columns of MR
// contiguous floats), Bp an NR-wide packed sliver (kc rows of NR floats).
// MR * NV accumulators live in registers for the whole kc loop.
//
// Compiled once per instruction set (this header is included inside the
// instruction set's namespace, AK_ISA_NS).
#pragma once

#include <cstdint>

namespace ak {
namespace AK_ISA_NS {

// Full tile: writes rows x cols of C; rows == MR and cols == NR here.
template <class V, int MR, int NV>
inline void sgemm_ukernel(std::int64_t kc, const float *__restrict ap, const float *__restrict bp,
                          float alpha, float beta, float *__restrict c, std::int64_t ldc) {
  using reg = typename V::reg;
  constexpr int W = V::width;
  constexpr int NR = NV * W;
  reg acc[MR][NV];
#pragma GCC unroll 32
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[i][v] = V::zero();

  for (std::int64_t p = 0; p < kc; ++p) {
    reg b[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) b[v] = V::loadu(bp + v * W);
#pragma GCC unroll 32
    for (int i = 0; i < MR; ++i) {
      const reg a = V::set1(ap[i]);
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[i][v] = V::fmadd(a, b[v], acc[i][v]);
    }
    ap += MR;
    bp += NR;
  }

  const reg va = V::set1(alpha);
  const bool unit_alpha = alpha == 1.0f;
  if (beta == 0.0f) { // C is write-only: NaN already there must not leak in
#pragma GCC unroll 32
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v)
        V::storeu(c + i * ldc + v * W, unit_alpha ? acc[i][v] : V::mul(va, acc[i][v]));
  } else {
    const reg vb = V::set1(beta);
#pragma GCC unroll 32
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) {
        float *cp = c + i * ldc + v * W;
        const reg t = unit_alpha ? acc[i][v] : V::mul(va, acc[i][v]);
        V::storeu(cp, V::fmadd(vb, V::loadu(cp), t));
      }
  }
}

// Edge tile (rows < MR or cols < NR): the same kernel on a local MR x NR copy
// of C, so edge elements see exactly the arithmetic of interior ones.
template <class V, int MR, int NV>
inline void sgemm_ukernel_edge(std::int64_t kc, const float *ap, const float *bp, float alpha,
                               float beta, float *c, std::int64_t ldc, int rows, int cols) {
  constexpr int NR = NV * V::width;
  alignas(64) float tile[MR * NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j)
      tile[i * NR + j] = (beta != 0.0f && i < rows && j < cols) ? c[i * ldc + j] : 0.0f;
  sgemm_ukernel<V, MR, NV>(kc, ap, bp, alpha, beta, tile, NR);
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) c[i * ldc + j] = tile[i * NR + j];
}

} // namespace AK_ISA_NS
} // namespace ak
