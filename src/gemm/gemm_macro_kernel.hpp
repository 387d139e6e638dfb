// The macro-kernel of the packed SGEMM path: the Goto/BLIS loop nest around
// the micro-kernel, for one instruction set and one tile (Cfg):
//
//   for jc in n step NC           (B panel: KC x NC, packed once, shared)
//     for pc in k step KC         (the only loop that accumulates into C)
//       pack B[pc:pc+KC, jc:jc+NC] into NR-wide slivers   (threads split slivers)
//       for each (ic, n-part) work item                   (threads take items)
//         pack A[ic:ic+MC, pc:pc+KC] into MR-tall slivers (per thread; or
//                                                          read A in place)
//         for each chunk of B slivers (sized to stay in L2)
//           for ir in MC step MR: for jr in the chunk: micro-kernel
//
// The panel and k-block loops and the work items are the thread schedules'
// (gemm_schedules.hpp); here are one B sliver's packing (pack_b) and one
// work item (block): its A packing and the chunk, ir and jr loops.
//
// The innermost order keeps one A sliver in L1 while the B slivers of the
// chunk stream past it from L2: the A sliver (MR x KC) is the smaller of
// the two, as NR >= MR in every tile here.
#pragma once

#include <cstdint>

#include "../kernel_table.hpp"
#include "gemm_common.hpp"
#include "gemm_pack.hpp"
#include "gemm_plan.hpp"
#include "sgemm_ukernel.hpp"

namespace attnkern {
namespace AK_ISA_NS {

template <class V, class Cfg> struct GemmMacroKernel {
  static constexpr int MR = Cfg::mr, NV = Cfg::nv, NR = NV * V::width;
  static_assert(Cfg::width == V::width, "block table and vector width disagree");

  const GemmArgs &g;
  const GemmPlan &plan;
  const GemmStrides st;

  // Sliver s of the panel at jc (nc wide) for the k block at pc (kc deep).
  void pack_b(float *bpack, std::int64_t jc, std::int64_t nc, std::int64_t pc, std::int64_t kc,
              std::int64_t s) const {
    const std::int64_t rs_b = st.rs_b, cs_b = st.cs_b;
    const std::int64_t j0 = s * NR;
    pack_b_sliver<NR>(kc, static_cast<int>(min64(NR, nc - j0)), g.b + pc * rs_b + (jc + j0) * cs_b,
                      rs_b, cs_b, bpack + j0 * kc);
  }

  // Rows [ic, ic + mc) x B slivers [s_begin, s_end) of the panel at jc, for
  // the k block at pc: one work item.
  void block(float *apack, const float *bpack, std::int64_t jc, std::int64_t nc, std::int64_t pc,
             std::int64_t kc, std::int64_t ic, std::int64_t mc, std::int64_t s_begin,
             std::int64_t s_end) const {
    const std::int64_t rs_a = st.rs_a, cs_a = st.cs_a, rs_b = st.rs_b;
    const bool direct_a = plan.direct_a, direct_b = plan.direct_b;
    const bool pack_on_use = plan.pack_on_use;
    const std::int64_t chunk = plan.b_chunk;
    const float beta = pc == 0 ? g.beta : 1.0f;
    if (!direct_a)
      for (std::int64_t i0 = 0; i0 < mc; i0 += MR)
        pack_a_sliver<MR>(kc, static_cast<int>(min64(MR, mc - i0)),
                          g.a + (ic + i0) * rs_a + pc * cs_a, rs_a, cs_a, apack + i0 * kc);
    // B in chunks that stay in L2 while every A sliver of the block passes
    // over them; each A sliver stays in L1 while a chunk's slivers stream
    // past it.
    for (std::int64_t sc = s_begin; sc < s_end; sc += chunk) {
      const std::int64_t sc_end = min64(s_end, sc + chunk);
      for (std::int64_t i0 = 0; i0 < mc; i0 += MR) {
        const int rows = static_cast<int>(min64(MR, mc - i0));
        const float *a_src = g.a + (ic + i0) * rs_a + pc * cs_a;
        float *const c_row = g.c + (ic + i0) * g.ldc + jc;
        for (std::int64_t s = sc; s < sc_end; ++s) {
          const std::int64_t j0 = s * NR;
          const int cols = static_cast<int>(min64(NR, nc - j0));
          const float *bp = bpack + j0 * kc;
          if (pack_on_use && cols == NR && ic == 0 && i0 == 0) {
            float *const bw = const_cast<float *>(bp);
            const float *bd = g.b + pc * rs_b + (jc + j0);
            if (direct_a)
              TileKernel<V, MR, NV, false>::run_packing_b(kc, a_src, bd, g.alpha, beta, c_row + j0,
                                                          g.ldc, rs_a, rs_b, bw);
            else
              TileKernel<V, MR, NV, true>::run_packing_b(kc, apack + i0 * kc, bd, g.alpha, beta,
                                                         c_row + j0, g.ldc, 0, rs_b, bw);
          } else if (direct_b && cols == NR) {
            const float *bd = g.b + pc * rs_b + (jc + j0);
            if (direct_a)
              TileKernel<V, MR, NV, false, true>::run(rows, kc, a_src, bd, g.alpha, beta,
                                                      c_row + j0, g.ldc, cols, rs_a, rs_b);
            else
              TileKernel<V, MR, NV, true, true>::run(rows, kc, apack + i0 * kc, bd, g.alpha, beta,
                                                     c_row + j0, g.ldc, cols, 0, rs_b);
          } else if (direct_a)
            TileKernel<V, MR, NV, false>::run(rows, kc, a_src, bp, g.alpha, beta, c_row + j0, g.ldc,
                                              cols, rs_a);
          else
            TileKernel<V, MR, NV, true>::run(rows, kc, apack + i0 * kc, bp, g.alpha, beta,
                                             c_row + j0, g.ldc, cols, 0);
        }
      }
    }
  }
};

} // namespace AK_ISA_NS
} // namespace attnkern
