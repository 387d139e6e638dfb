// The SGEMM driver for one instruction set: sgemm_batched plans a batch of
// products once (gemm_plan.hpp), takes their scratch, and runs each on the
// path the plan names: C = beta * C, the skinny kernels (sgemm_skinny.hpp)
// or the packed loop nest (gemm_schedules.hpp over gemm_macro_kernel.hpp)
// on the main or the wide tile. A single product is a batch of one.
#pragma once

#include <cstdint>
#include <optional>
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

// Product i of a batch, with only the matrices its plan reads offset: an
// empty operand's stride was never bounded (the call reads nothing of it),
// and no offset may be applied to a null pointer either.
inline GemmArgs product(const GemmArgs &g, const GemmBatch &batch, std::int64_t i,
                        const GemmPlan &plan) {
  GemmArgs one = g;
  if (plan.path != GemmPath::scale_c) {
    one.a += i * batch.stride_a;
    one.b += i * batch.stride_b;
  }
  one.c += i * batch.stride_c;
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
  const double flops = 2.0 * g.m * g.n * g.k;
  const bool per_thread =
      threads > 1 && batch.count >= threads && flops < Cfg::batch_per_thread_max_flops;
  const GemmPlan plan = plan_sgemm<Cfg>(g, per_thread ? 1 : threads);
  if (batch.count <= 0 || plan.path == GemmPath::none) return KernelStatus::ok;
  const std::int64_t floats = scratch_floats(g, plan);
  if (!per_thread) {
    std::optional<Scratch> scratch;
    if (floats > 0) {
      scratch.emplace(static_cast<std::size_t>(floats));
      if (!scratch->data()) return KernelStatus::out_of_memory;
    }
    for (std::int64_t i = 0; i < batch.count; ++i)
      sgemm_planned<V, Cfg>(product(g, batch, i, plan), plan, scratch ? scratch->data() : nullptr);
    return KernelStatus::ok;
  }
  // Each team member takes its own buffer (kept for its next call, first
  // touched where it runs), and no product starts until every member has
  // one.
  bool out_of_memory = false;
#pragma omp parallel num_threads(threads)
  {
    std::optional<Scratch> mine;
    if (floats > 0) {
      mine.emplace(static_cast<std::size_t>(floats));
      if (!mine->data()) {
#pragma omp atomic write
        out_of_memory = true;
      }
    }
#pragma omp barrier
    bool failed;
#pragma omp atomic read
    failed = out_of_memory;
    if (!failed) {
#pragma omp for schedule(static)
      for (std::int64_t i = 0; i < batch.count; ++i)
        sgemm_planned<V, Cfg>(product(g, batch, i, plan), plan, mine ? mine->data() : nullptr);
    }
  }
  return out_of_memory ? KernelStatus::out_of_memory : KernelStatus::ok;
}

} // namespace AK_ISA_NS
} // namespace attnkern
