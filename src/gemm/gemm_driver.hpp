// The SGEMM driver for one instruction set: sgemm_one plans a product
// (gemm_plan.hpp) and runs the path the plan names: C = beta * C, the
// skinny kernels (sgemm_skinny.hpp) or the packed loop nest
// (gemm_schedules.hpp over gemm_macro_kernel.hpp) on the main or the wide
// tile; sgemm_batched runs a strided batch of them.
#pragma once

#include <cstdint>
#include <type_traits>

#include "../kernel_table.hpp"
#include "../threading.hpp"
#include "gemm_common.hpp"
#include "gemm_macro_kernel.hpp"
#include "gemm_pack.hpp"
#include "gemm_plan.hpp"
#include "gemm_schedules.hpp"
#include "sgemm_skinny.hpp"
#include "sgemm_ukernel.hpp"

namespace attnkern {
namespace AK_ISA_NS {

// C = beta * C (beta == 0 writes zeros), for k == 0 or alpha == 0, on
// `threads` threads (the plan's).
inline void scale_c(const GemmArgs &g, int threads) {
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
  for (std::int64_t i = 0; i < g.m; ++i) {
    float *row = g.c + i * g.ldc;
    if (g.beta == 0.0f)
      for (std::int64_t j = 0; j < g.n; ++j) row[j] = 0.0f;
    else
      for (std::int64_t j = 0; j < g.n; ++j) row[j] *= g.beta;
  }
}

template <class V, class Cfg> KernelStatus sgemm_one(const GemmArgs &g, int threads) {
  const GemmPlan plan = plan_sgemm<Cfg>(g, threads);
  switch (plan.path) {
  case GemmPath::none:
    return KernelStatus::ok;
  case GemmPath::scale_c:
    scale_c(g, plan.threads);
    return KernelStatus::ok;
  case GemmPath::skinny:
    return sgemm_skinny<V, Cfg>(g, plan.threads);
  case GemmPath::packed_wide:
    if constexpr (!std::is_void_v<typename Cfg::wide_tile>)
      return sgemm_packed<V, typename Cfg::wide_tile>(g, plan);
    break;
  case GemmPath::packed:
    break;
  }
  return sgemm_packed<V, Cfg>(g, plan);
}

// Product i of a batch. An empty product's matrices may be NULL, and no
// offset may be applied to a null pointer (not even one never read).
inline GemmArgs product(const GemmArgs &g, const GemmBatch &batch, std::int64_t i) {
  GemmArgs one = g;
  if (one.a) one.a += i * batch.stride_a;
  if (one.b) one.b += i * batch.stride_b;
  if (one.c) one.c += i * batch.stride_c;
  return one;
}

// Batched products: many small ones run one per thread; otherwise each
// product gets the whole team in turn. Either way, per-product arithmetic is
// that of sgemm_one, so results do not depend on the choice.
template <class V, class Cfg>
KernelStatus sgemm_batched(const GemmArgs &g, const GemmBatch &batch, int threads) {
  const double flops = 2.0 * g.m * g.n * g.k;
  const bool per_thread =
      threads > 1 && batch.count >= threads && flops < Cfg::batch_per_thread_max_flops;
  if (!per_thread) {
    for (std::int64_t i = 0; i < batch.count; ++i) {
      const GemmArgs one = product(g, batch, i);
      if (sgemm_one<V, Cfg>(one, threads) != KernelStatus::ok) return KernelStatus::out_of_memory;
    }
    return KernelStatus::ok;
  }
  bool oom = false;
#pragma omp parallel for schedule(static) num_threads(threads) reduction(|| : oom)
  for (std::int64_t i = 0; i < batch.count; ++i) {
    const GemmArgs one = product(g, batch, i);
    oom = oom || sgemm_one<V, Cfg>(one, 1) != KernelStatus::ok;
  }
  return oom ? KernelStatus::out_of_memory : KernelStatus::ok;
}

} // namespace AK_ISA_NS
} // namespace attnkern
