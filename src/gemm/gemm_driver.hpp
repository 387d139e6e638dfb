// The SGEMM driver for one instruction set: sgemm_batched plans a batch of
// products once (gemm_plan.hpp), takes their scratch, and runs each on the
// path the plan names: C = beta * C, the skinny kernels (sgemm_skinny.hpp)
// or the packed loop nest (gemm_schedules.hpp over gemm_macro_kernel.hpp)
// on the main or the wide tile. A single product is a batch of one.
#pragma once

#include <cstdint>
#include <type_traits>

#include "../kernel_table.hpp"
#include "../scratch.hpp"
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

// Scratch floats the product `g` takes when run as `plan` says.
inline std::int64_t scratch_floats(const GemmArgs &g, const GemmPlan &plan) {
  switch (plan.path) {
  case GemmPath::none:
  case GemmPath::scale_c:
    return 0;
  case GemmPath::skinny:
    return skinny_scratch_floats(g, plan.threads);
  case GemmPath::packed_wide:
  case GemmPath::packed:
    break;
  }
  return packed_scratch(plan).total(plan.threads);
}

// Runs the product as planned, in `scratch` of scratch_floats(g, plan)
// floats: nothing here allocates, so a caller that holds the memory for
// every product before the first store never fails halfway.
template <class V, class Cfg>
void sgemm_planned(const GemmArgs &g, const GemmPlan &plan, float *scratch) {
  switch (plan.path) {
  case GemmPath::none:
    return;
  case GemmPath::scale_c:
    return scale_c(g, plan.threads);
  case GemmPath::skinny:
    return sgemm_skinny<V, Cfg>(g, plan.threads, scratch);
  case GemmPath::packed_wide:
    if constexpr (!std::is_void_v<typename Cfg::wide_tile>)
      return sgemm_packed<V, typename Cfg::wide_tile>(g, plan, scratch);
    break;
  case GemmPath::packed:
    break;
  }
  sgemm_packed<V, Cfg>(g, plan, scratch);
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
// that of the same plan, so results do not depend on the choice. The plan
// depends on the shapes alone, not on where the matrices are, so one plan
// serves every product, and all the scratch is taken before the first
// store: out of memory leaves C as it was.
template <class V, class Cfg>
KernelStatus sgemm_batched(const GemmArgs &g, const GemmBatch &batch, int threads) {
  if (batch.count <= 0) return KernelStatus::ok;
  const double flops = 2.0 * g.m * g.n * g.k;
  const bool per_thread =
      threads > 1 && batch.count >= threads && flops < Cfg::batch_per_thread_max_flops;
  const GemmPlan plan = plan_sgemm<Cfg>(g, per_thread ? 1 : threads);
  const std::int64_t floats = scratch_floats(g, plan);
  if (!per_thread) {
    Scratch scratch(static_cast<std::size_t>(floats));
    if (floats > 0 && !scratch.data()) return KernelStatus::out_of_memory;
    for (std::int64_t i = 0; i < batch.count; ++i)
      sgemm_planned<V, Cfg>(product(g, batch, i), plan, scratch.data());
    return KernelStatus::ok;
  }
  // One slice per team member, on pages of its own.
  const std::int64_t slice = round_up(floats, 1024);
  Scratch scratch(static_cast<std::size_t>(slice * threads));
  if (slice > 0 && !scratch.data()) return KernelStatus::out_of_memory;
#pragma omp parallel for schedule(static) num_threads(threads)
  for (std::int64_t i = 0; i < batch.count; ++i)
    sgemm_planned<V, Cfg>(product(g, batch, i), plan, scratch.data() + slice * omp_thread_id());
  return KernelStatus::ok;
}

} // namespace AK_ISA_NS
} // namespace attnkern
