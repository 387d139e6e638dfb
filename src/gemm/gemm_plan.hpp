// How sgemm_one computes one product, chosen once before any work from the
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
  // one panel; measured with own_columns); below that, two measured slower
  // than one.
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
  // a group's threads. Before, every thread took row blocks of the whole
  // panel and so read all of it (1-2 MiB at 512^3-1024^3) from other cores'
  // caches and, past its L2, from L3 again for every row block. 16 threads
  // of a 16-core Xeon, attnkern / oneDNN in the same process, two runs
  // before, three after (bench/README.md): 512^3 0.63-0.67 -> 0.81-0.91,
  // 1024^3 0.57-0.72 -> 0.95-0.99, 2048^3 0.91-0.98 -> 1.03-1.39, 1024^3 NT
  // 0.82-0.88 -> 1.07-1.25. Two threads keep the plan they were tuned with
  // here.
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
  // else on its core): with 4 per thread, 2-thread 512^3-2048^3 measured
  // 3-8% slower.
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
  // and the in-place reads conflict (P.V, 4096 x 128 x 4096: 80 -> 87
  // GFLOP/s packed; with 2 slivers, 4096 x 64, packing loses 83 -> 72).
  const std::int64_t slivers_total = ceil_div(g.n, NR);
  const bool aliasing_rows =
      st.rs_a % 1024 == 0 && slivers_total > Cfg::direct_a_aliased_max_slivers;
  p.direct_a = st.cs_a == 1 && slivers_total <= Cfg::direct_a_max_slivers && !aliasing_rows;

  // Small products (one k block, one panel) need no barrier: each thread
  // packs what it needs and computes its own part of C. Where there are
  // rows enough, its own rows, from its own copy of the packed panel, so
  // that no two threads write into the same rows of C. Split by columns,
  // two threads wrote C rows' halves, a few hundred bytes apart in the same
  // pages, which on this 2-core VM now and then ran at a fraction of the
  // speed (2 threads, 6 alternating runs each, GFLOP/s: 128^3 83-151 ->
  // 104-177, 256 x 128 x 256 112-186 -> 158-194, 256 x 64 x 256 113-176 ->
  // 119-190). Fewer rows (4 slivers per thread at least: at 64^3 packing B
  // twice cost more than it saved): each thread packs and computes its own
  // columns. (Rows shared out over one packed panel would need the panel
  // complete first: a barrier that costs as much as a 64^3 product.)
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
  // sliver is still packed (zero-padded). A/B, NN, 2 threads, alternating
  // in one process, medians of 41 (with the even row split of
  // schedule_own_rows): 64^3 128 -> 150 GFLOP/s, 128^3 193 -> 212, 256 x
  // 64 x 256 208 -> 221, 256 x 128 x 256 204 -> 217 (256^3, span 256 KiB:
  // 0.99x). One thread packs B once for all its rows, and there the packed
  // sliver (in L1) ran faster: 0.95-0.98x.
  p.direct_b =
      (own_rows || own_columns) && st.cs_b == 1 && g.k * g.ldb <= Cfg::direct_b_max_span_bytes / 4;

  // One thread, op(B)'s rows contiguous (NN, TN): the first row tile of
  // each full sliver (rows 0 to MR - 1, in the first row block of each k
  // block and panel, which one thread takes before any other) reads B in
  // place and writes the packed sliver as it goes, for the tiles after it,
  // instead of a packing pass before them: the same loads in the same order
  // (the same bits), one pass over B fewer. AVX-512, A/B in one process
  // (ad-hoc harness, alternating calls, medians of 41, two rounds), NN,
  // GFLOP/s: 96^3 +2-3 %, 128^3 +1-2 %, 192^3 +2 %, 256^3 +1-2 %, 512^3
  // +1 %, 256 x 64 x 256 +1-3 %, 1024 x 128 x 1024 +0-1 %.
  // (With m >= MR that tile is whole: p.mc is a multiple of MR.)
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
  // Past one tile's rows (m > 8), the skinny way only when B is large
  // enough to come from memory (8 MiB and more); in cache, packing pays for
  // itself. A/B against the packed path, 1 thread, m = 12-32: NT, n = k =
  // 128-1024, 0.58-0.95x (the skinny NT kernel reduces once per row and
  // column per k block); 2048 1.20-1.69x, 4096 1.33-2.62x. NN in cache
  // 0.85-1.27x (n = 1000: 8 columns then left to a scalar tail), 2048 1.27-2.0x.
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
  // passes over C (AVX-512, 1 thread, 4 alternating runs, medians of
  // process CPU time, GFLOP/s: 1024^3 NN 97.7 -> 102.2, NT 91.2 -> 104.0,
  // 2048^3 NN 92.5 -> 102.4, 512^3 NT 99.3 -> 106.0, Q.K^T 4096 x 4096 x
  // 128 94.2 -> 98.9; +2-14 % over 14 squares and Q.K^T shapes). Up to two
  // slivers, not for small products on a team: those share C out without a
  // barrier (own_rows, own_columns in plan_packed), by 32-wide slivers where
  // rows are few, which one 64-wide sliver cannot (2 threads, 64^3, split by
  // columns at the time: 135 -> 100 GFLOP/s); there both
  // tiles use the same KC (kc_narrow), so they give the same sum order per
  // element and the thread count never changes results. Wider products take
  // it on any team, as its KC differs from the main tile's there.
  if constexpr (!std::is_void_v<typename Cfg::wide_tile>) {
    using Wide = typename Cfg::wide_tile;
    constexpr int NR = Cfg::nv * Cfg::width;
    constexpr std::int64_t WR = Wide::nv * Wide::width;
    if (g.n > NR && round_up(g.n, WR) == round_up(g.n, NR) &&
        (g.n > 2 * WR || threads <= 1 || 2.0 * g.m * g.n * g.k >= Cfg::own_split_max_flops))
      return plan_packed<Wide>(g, threads, GemmPath::packed_wide);
  }
  return plan_packed<Cfg>(g, threads, GemmPath::packed);
}

} // namespace AK_ISA_NS
} // namespace attnkern
