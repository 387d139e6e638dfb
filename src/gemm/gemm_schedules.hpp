// The packed SGEMM path's thread schedules (GemmPlan::schedule): which
// thread packs which slivers of B and computes which work items of the
// macro-kernel (gemm_macro_kernel.hpp), and where the team waits; and
// sgemm_packed, which lays out the scratch and runs the team.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>

#include "../kernel_table.hpp"
#include "gemm_common.hpp"
#include "gemm_macro_kernel.hpp"
#include "gemm_plan.hpp"

namespace attnkern {
namespace AK_ISA_NS {

// The next row block of each column group (grouped_panels), a cache line
// each, since every thread of a group takes its blocks from it. Made only
// where the grouped loop runs: zeroing the 4 KiB on every call showed in a
// 16^3 product's time.
struct alignas(64) NextRowBlock {
  std::atomic<std::int64_t> v{0};
};
struct RowBlockCounters {
  NextRowBlock next[kMaxColumnGroups];
};

// own_rows: this thread's rows of C, from its own copy of the whole panel
// (bown).
template <class MK> void schedule_own_rows(const MK &mk, float *apack, float *bown) {
  constexpr int NR = MK::NR;
  const GemmArgs &g = mk.g;
  const GemmPlan &plan = mk.plan;
  const std::int64_t slivers_total = ceil_div(g.n, NR);
  const std::int64_t t = omp_thread_id(), nt = omp_team_size();
  for (std::int64_t s = 0; s < slivers_total; ++s)
    if (!plan.direct_b || (s + 1) * NR > g.n) mk.pack_b(bown, 0, g.n, 0, g.k, s);
  // Rows split evenly, not by whole slivers (128 rows of 12-row slivers:
  // 64 / 64, not 60 / 68), which ran faster; the sums are the same either
  // way, as a tile's rows do not change an element's arithmetic.
  const std::int64_t i0 = g.m * t / nt, i1 = g.m * (t + 1) / nt;
  for (std::int64_t ic = i0; ic < i1; ic += plan.mc)
    mk.block(apack, bown, 0, g.n, 0, g.k, ic, min64(plan.mc, i1 - ic), 0, slivers_total);
}

// own_columns: this thread's slivers of the panel, packed by itself, for
// every row.
template <class MK> void schedule_own_columns(const MK &mk, float *apack, float *bshared) {
  constexpr int NR = MK::NR;
  const GemmArgs &g = mk.g;
  const GemmPlan &plan = mk.plan;
  const std::int64_t slivers_total = ceil_div(g.n, NR);
  const std::int64_t t = omp_thread_id(), nt = omp_team_size();
  const std::int64_t s0 = slivers_total * t / nt, s1 = slivers_total * (t + 1) / nt;
  for (std::int64_t s = s0; s < s1; ++s)
    if (!plan.direct_b || (s + 1) * NR > g.n) mk.pack_b(bshared, 0, g.n, 0, g.k, s);
  for (std::int64_t ic = 0; ic < g.m; ic += plan.mc)
    mk.block(apack, bshared, 0, g.n, 0, g.k, ic, min64(plan.mc, g.m - ic), s0, s1);
}

// shared_panels and grouped_panels: per panel and k block, the team packs
// the shared panel, then takes its work items; counters only for
// grouped_panels.
template <class MK>
void schedule_panels(const MK &mk, bool team, float *apack, float *bshared,
                     RowBlockCounters *counters) {
  constexpr int NR = MK::NR;
  const GemmArgs &g = mk.g;
  const GemmPlan &plan = mk.plan;
  const bool grouped = plan.schedule == GemmSchedule::grouped_panels;
  for (std::int64_t jc = 0; jc < g.n; jc += plan.nc) {
    const std::int64_t nc = min64(plan.nc, g.n - jc);
    const std::int64_t slivers = ceil_div(nc, NR);
    for (std::int64_t pc = 0; pc < g.k; pc += plan.kc) {
      const std::int64_t kc = min64(plan.kc, g.k - pc);
      if (grouped && omp_thread_id() == 0)
        for (std::int64_t q = 0; q < plan.n_parts; ++q)
          counters->next[q].v.store(0, std::memory_order_relaxed);
      team_for_static(team, slivers, [&](std::int64_t s) {
        if (!plan.pack_on_use || (s + 1) * NR > nc) mk.pack_b(bshared, jc, nc, pc, kc, s);
      });
      // implicit barrier (team): B panel complete (and the counters reset)
      const std::int64_t per_part = ceil_div(slivers, plan.n_parts);
      if (grouped) {
        // Row blocks of this thread's own group first, then of the others
        // (each taken once, whichever thread gets there first).
        const std::int64_t own = omp_thread_id() % plan.n_parts;
        for (std::int64_t q = 0; q < plan.n_parts; ++q) {
          const std::int64_t part = (own + q) % plan.n_parts;
          const std::int64_t s_begin = part * per_part;
          const std::int64_t s_end = min64(slivers, s_begin + per_part);
          if (s_begin >= s_end) continue;
          for (;;) {
            const std::int64_t item =
                counters->next[part].v.fetch_add(1, std::memory_order_relaxed);
            if (item >= plan.n_ic) break;
            const std::int64_t ic = item * plan.mc;
            mk.block(apack, bshared, jc, nc, pc, kc, ic, min64(plan.mc, g.m - ic), s_begin, s_end);
          }
        }
#pragma omp barrier
        continue; // B panel free for the next pc
      }
      team_for_dynamic(team, plan.n_ic * plan.n_parts, [&](std::int64_t item) {
        const std::int64_t ic = (item / plan.n_parts) * plan.mc;
        const std::int64_t part = item % plan.n_parts;
        const std::int64_t s_begin = part * per_part;
        const std::int64_t s_end = min64(slivers, s_begin + per_part);
        if (s_begin < s_end)
          mk.block(apack, bshared, jc, nc, pc, kc, ic, min64(plan.mc, g.m - ic), s_begin, s_end);
      }); // implicit barrier (team): B panel free for the next pc
    }
  }
}

// The packed path's scratch: the shared panel of B, then per thread its A
// block (and with own_rows its panel), each thread's on pages of its own.
struct PackedScratch {
  std::int64_t shared_floats, thread_floats, a_floats;
  std::int64_t total(int threads) const { return shared_floats + thread_floats * threads; }
};
inline PackedScratch packed_scratch(const GemmPlan &plan) {
  const bool own_rows = plan.schedule == GemmSchedule::own_rows;
  const std::int64_t b_floats = plan.kc * plan.nc;
  const std::int64_t a_floats = plan.direct_a ? 0 : plan.kc * plan.mc; // one A block per thread
  return {own_rows ? 0 : round_up(b_floats, 1024),
          round_up(a_floats + (own_rows ? b_floats : 0), 1024) + 1024, a_floats};
}

// The packed path on tile Cfg, as planned (plan_packed), in `scratch` of
// packed_scratch(plan).total(plan.threads) floats.
template <class V, class Cfg>
void sgemm_packed(const GemmArgs &g, const GemmPlan &plan, float *scratch) {
  const PackedScratch lay = packed_scratch(plan);
  const std::int64_t shared_floats = lay.shared_floats, thread_floats = lay.thread_floats,
                     a_floats = lay.a_floats;
  float *const bshared = scratch;
  const GemmMacroKernel<V, Cfg> mk{g, plan, gemm_strides(g)};

  std::optional<RowBlockCounters> counters;
  if (plan.schedule == GemmSchedule::grouped_panels) counters.emplace();

  const auto run = [&](bool team) {
    float *const apack = scratch + shared_floats + thread_floats * (team ? omp_thread_id() : 0);
    switch (plan.schedule) {
    case GemmSchedule::own_rows:
      return schedule_own_rows(mk, apack, apack + a_floats);
    case GemmSchedule::own_columns:
      return schedule_own_columns(mk, apack, bshared);
    case GemmSchedule::shared_panels:
    case GemmSchedule::grouped_panels:
      break;
    }
    schedule_panels(mk, team, apack, bshared, counters ? &*counters : nullptr);
  };
  if (plan.threads > 1) {
#pragma omp parallel num_threads(plan.threads)
    run(true);
  } else {
    run(false);
  }
}

} // namespace AK_ISA_NS
} // namespace attnkern
