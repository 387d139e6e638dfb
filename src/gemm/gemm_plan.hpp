// How a product is computed, chosen once before any work from the
// product's shape, the caller's thread count and the instruction set's block
// table (Cfg): the path, the register tile, the block sizes, where the
// micro-kernel reads A and B, and how a team shares the work. plan_sgemm is
// a pure function; the executors (gemm_driver.hpp, gemm_schedules.hpp,
// gemm_macro_kernel.hpp) only follow the plan.
//
// Determinism: the k loop is never split across threads and KC depends only
// on k, so every element of C sees the same sequence of operations for any
// thread count. MC and the n-parts may follow the thread count: they only
// decide which thread computes a tile, not how.
#pragma once

#include <cstdint>
#include <type_traits>

#include "../kernel_table.hpp"
#include "../threading.hpp"
#include "gemm_common.hpp"
#include "sgemm_skinny_common.hpp"

namespace attnkern {
namespace AK_ISA_NS {

enum class GemmPath {
  none,        // m == 0 or n == 0: nothing to do
  scale_c,     // k == 0 or alpha == 0: C = beta * C
  skinny,      // few rows: sgemm_skinny reads B in place
  packed,      // the blocked loop nest on the main tile (Cfg)
  packed_wide, // the same on the second tile (Cfg::wide_tile)
};

// How a team shares the packed path's work (gemm_schedules.hpp).
enum class GemmSchedule {
  own_rows,       // one k block and panel: each thread packs B, computes its own rows
  own_columns,    // one k block and panel: each thread packs and computes its own columns
  shared_panels,  // one packed panel per k block; (row block, part) items taken dynamically
  grouped_panels, // the same for teams of more than two: each thread's column group first
};

struct GemmPlan {
  GemmPath path;
  int threads; // the team (1: no team)
  // The packed paths only, in terms of the tile the path names:
  std::int64_t kc, nc, mc; // block sizes actually used
  bool narrow_kc;          // kc from Cfg::kc_narrow (few B slivers)
  std::int64_t b_chunk;    // B slivers per pass of a block's A slivers (in L2)
  std::int64_t n_ic;       // MC blocks along m
  std::int64_t n_parts;    // pieces each NC panel's slivers are dealt into
  GemmSchedule schedule;
  bool direct_a;    // the micro-kernel reads A's rows in place, unpacked
  bool direct_b;    // ... and full B slivers (own_rows, own_columns)
  bool pack_on_use; // one thread: the first row tile packs B as it reads it
};

// op(A)(i, p) = a[i * rs_a + p * cs_a]; op(B)(p, j) = b[p * rs_b + j * cs_b]
struct GemmStrides {
  std::int64_t rs_a, cs_a, rs_b, cs_b;
};
inline GemmStrides gemm_strides(const GemmArgs &g) {
  return {g.trans_a ? 1 : g.lda, g.trans_a ? g.lda : 1, g.trans_b ? 1 : g.ldb,
          g.trans_b ? g.ldb : 1};
}

// Column groups of a team of more than two: at most this many.
constexpr std::int64_t kMaxColumnGroups = 64;

// The packed path on tile Cfg (the main tile or the wide one).
template <class Cfg> GemmPlan plan_packed(const GemmArgs &g, int threads, GemmPath path) {
  constexpr int MR = Cfg::mr, NR = Cfg::nv * Cfg::width;
  GemmPlan p{};
  p.path = path;
  // KC: the k range split into ceil(k / kc_max) blocks of nearly equal
  // depth (no short last block). A function of the shape alone, for
  // determinism.
  // Narrow products (few B slivers) take deeper k blocks: fewer passes over
  // C and longer runs along A's rows, which they read from memory once.
  p.narrow_kc = ceil_div(g.n, NR) <= Cfg::narrow_slivers;
  const std::int64_t kc_max = p.narrow_kc ? Cfg::kc_narrow : Cfg::kc;
  const std::int64_t k_blocks = ceil_div(g.k, kc_max);
  p.kc = ceil_div(g.k, k_blocks);
  p.nc = min64(round_up(g.n, NR), Cfg::nc);
  // A second thread from 1 MFLOP, or from 0.5 MFLOP where threads can share
  // C out without a barrier (own_rows and own_columns below: one k block,
  // one panel): below that, two ran slower than one.
  const bool column_split = g.k <= kc_max && g.n <= Cfg::nc && ceil_div(g.n, NR) >= 2;
  p.threads =
      threads_for_work(threads, 2.0 * g.m * g.n * g.k,
                       column_split ? Cfg::min_flops_per_thread_split : Cfg::min_flops_per_thread);
  const int t = p.threads;
  const std::int64_t row_slivers = ceil_div(g.m, Cfg::mr);
  const std::int64_t slivers = ceil_div(p.nc, NR);
  // Teams of more than two: the panel's slivers are cut into column groups
  // that divide the team, thread i working in group i % groups (and helping
  // the others once its own is done, schedule_panels), so that each thread
  // reads only its group's slivers of B: few enough to stay in its L2
  // (b_share_bytes) and, with fewer groups, enough row slivers for each of
  // a group's threads, rather than every thread reading the whole panel
  // from other cores' caches and L3 for every row block. Two threads keep
  // the plan they were tuned with.
  std::int64_t row_team = t;
  const bool grouped = t > 2;
  if (grouped) {
    const std::int64_t sliver_bytes = p.kc * NR * 4;
    std::int64_t groups = 0, fallback = 1;
    for (std::int64_t d = 1; d <= min64(t, min64(slivers, kMaxColumnGroups)); ++d) {
      if (t % d != 0) continue;
      fallback = d;
      if (ceil_div(slivers, d) * sliver_bytes <= Cfg::b_share_bytes && row_slivers >= 2 * (t / d)) {
        groups = d;
        break;
      }
    }
    p.n_parts = groups > 0 ? groups : fallback;
    row_team = t / p.n_parts;
  }
  // Row blocks: at most MC rows; with a team, small enough that there are
  // about 16 per thread (of a column group), so that dynamic scheduling
  // evens out the tail of each k block (and a thread slowed by anything
  // else on its core): 4 per thread ran slower.
  std::int64_t group = Cfg::mc / Cfg::mr;
  if (t > 1)
    group = max64(1, min64(group, ceil_div(row_slivers, Cfg::row_blocks_per_thread * row_team)));
  p.mc = group * Cfg::mr;
  p.n_ic = ceil_div(g.m, p.mc);
  // Two threads, too few row blocks for the team: deal each panel's slivers
  // out as well.
  if (!grouped) p.n_parts = p.n_ic >= 2 * t ? 1 : min64(ceil_div(2 * t, p.n_ic), slivers);
  p.b_chunk = max64(1, Cfg::b_chunk_bytes / (p.kc * NR * 4));

  const GemmStrides st = gemm_strides(g);
  // A sliver serves ceil(n / NR) B slivers. When that is few, packing it
  // costs more than it saves: the micro-kernel reads A's rows in place.
  // Except when A's row stride is a multiple of 4 KiB and A is reused by 3
  // or more slivers: then every row of the sliver falls in the same L1 sets
  // and the in-place reads conflict (with 2 slivers packing still loses).
  const std::int64_t slivers_total = ceil_div(g.n, NR);
  const bool aliasing_rows =
      st.rs_a % 1024 == 0 && slivers_total > Cfg::direct_a_aliased_max_slivers;
  p.direct_a = st.cs_a == 1 && slivers_total <= Cfg::direct_a_max_slivers && !aliasing_rows;

  // Small products (one k block, one panel) need no barrier: each thread
  // packs what it needs and computes its own part of C. Where there are
  // rows enough, its own rows, from its own copy of the packed panel, so
  // that no two threads write into the same rows of C. Split by columns,
  // two threads wrote C rows' halves, a few hundred bytes apart in the same
  // pages, which now and then ran at a fraction of the speed. Fewer rows (4
  // slivers per thread at least: at 64^3 packing B twice cost more than it
  // saved): each thread packs and computes its own columns. (Rows shared out
  // over one packed panel would need the panel complete first: a barrier that
  // costs as much as a 64^3 product.)
  const bool small = p.threads > 1 && g.k <= p.kc && g.n <= p.nc &&
                     2.0 * g.m * g.n * g.k <= Cfg::own_split_max_flops;
  const bool own_rows = small && row_slivers >= Cfg::own_rows_min_slivers * p.threads;
  const bool own_columns = small && !own_rows && slivers_total >= p.threads;
  p.schedule = own_rows      ? GemmSchedule::own_rows
               : own_columns ? GemmSchedule::own_columns
               : grouped     ? GemmSchedule::grouped_panels
                             : GemmSchedule::shared_panels;
  // There each thread packs B (all of it with own_rows, its columns with
  // own_columns) for a few row slivers only, so where op(B)'s rows lie
  // contiguous the micro-kernel reads full slivers in place instead (the
  // same loads in the same order: the same bits), while the k rows of B
  // span at most 128 KiB (at a row stride of a multiple of 4 KiB, which
  // puts every row in the same L1 sets, that is 32 rows or fewer); an edge
  // sliver is still packed (zero-padded). One thread packs B once for all
  // its rows, and there the packed sliver (in L1) ran faster.
  p.direct_b =
      (own_rows || own_columns) && st.cs_b == 1 && g.k * g.ldb <= Cfg::direct_b_max_span_bytes / 4;

  // One thread, op(B)'s rows contiguous (NN, TN): the first row tile of
  // each full sliver (rows 0 to MR - 1, in the first row block of each k
  // block and panel, which one thread takes before any other) reads B in
  // place and writes the packed sliver as it goes, for the tiles after it,
  // instead of a packing pass before them: the same loads in the same order
  // (the same bits), one pass over B fewer. (With m >= MR that tile is
  // whole: p.mc is a multiple of MR.)
  p.pack_on_use = p.threads == 1 && st.cs_b == 1 && g.m >= MR;
  return p;
}

// The whole plan of one product.
template <class Cfg> GemmPlan plan_sgemm(const GemmArgs &g, int threads) {
  GemmPlan p{};
  p.threads = 1;
  if (g.m == 0 || g.n == 0) {
    p.path = GemmPath::none;
    return p;
  }
  if (g.k == 0 || g.alpha == 0.0f) {
    p.path = GemmPath::scale_c;
    p.threads = threads_for_work(threads, static_cast<double>(g.m) * g.n,
                                 Cfg::scale_min_elements_per_thread);
    return p;
  }
  static_assert(Cfg::skinny_m <= kSkinnyMaxRows, "the skinny kernels' instantiations");
  // Up to skinny_m rows (skinny_m_b_along_k with B stored n x k) the skinny
  // kernels read B in place. Past one tile's rows (m > 8), only when B is
  // large enough to come from memory (8 MiB and more); in cache, packing
  // pays for itself.
  if (g.m <= skinny_rows_limit<Cfg>(g.trans_b) &&
      (g.m <= kSkinnyTileRows ||
       static_cast<double>(g.n) * g.k >= Cfg::skinny_groups_min_b_floats)) {
    p.path = GemmPath::skinny;
    p.threads = threads_for_work(threads, 2.0 * g.m * g.n * g.k, Cfg::skinny_min_flops_per_thread);
    return p;
  }
  // A second, wider tile where the instruction set has one, for widths it
  // covers with no more padding than the main tile. Up to two of its
  // slivers (P.V with d = 64 or 128) A is loaded once or twice instead of
  // two or four times; wider, it needs fewer loads per FMA and half the
  // passes over C. Up to two slivers, not for small products on a team
  // (own_split_max_flops): those share C out without a barrier (own_rows,
  // own_columns in plan_packed), by 32-wide slivers where rows are few,
  // which one 64-wide sliver cannot; there both tiles use the same KC
  // (kc_narrow), so they give the same sum order per element and the thread
  // count never changes results. Wider products take it on any team, as its
  // KC differs from the main tile's there.
  if constexpr (!std::is_void_v<typename Cfg::wide_tile>) {
    using Wide = typename Cfg::wide_tile;
    constexpr int NR = Cfg::nv * Cfg::width;
    constexpr std::int64_t WR = Wide::nv * Wide::width;
    static_assert(Wide::kc_narrow == Cfg::kc_narrow &&
                      Wide::own_split_max_flops == Cfg::own_split_max_flops,
                  "both tiles must sum alike where the team size picks the tile");
    if (g.n > NR && round_up(g.n, WR) == round_up(g.n, NR) &&
        (g.n > 2 * WR || threads <= 1 || 2.0 * g.m * g.n * g.k >= Cfg::own_split_max_flops))
      return plan_packed<Wide>(g, threads, GemmPath::packed_wide);
  }
  return plan_packed<Cfg>(g, threads, GemmPath::packed);
}

} // namespace AK_ISA_NS
} // namespace attnkern
