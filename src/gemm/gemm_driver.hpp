// The Goto/BLIS loop nest around the micro-kernel, for one instruction set:
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
// The innermost order keeps one A sliver in L1 while the B slivers of the
// chunk stream past it from L2: the A sliver (MR x KC) is the smaller of
// the two, as NR >= MR in every tile here.
//
// Determinism: the k loop is never split across threads and KC depends only
// on k, so every element of C sees the same sequence of operations for any
// thread count. MC and the n-parts may follow the thread count: they only
// decide which thread computes a tile, not how.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <type_traits>

#include "../kernel_table.hpp"
#include "../scratch.hpp"
#include "../threading.hpp"
#include "gemm_common.hpp"
#include "gemm_pack.hpp"
#include "sgemm_skinny.hpp"
#include "sgemm_ukernel.hpp"

namespace attnkern {
namespace AK_ISA_NS {

// C = beta * C (beta == 0 writes zeros), for k == 0 or alpha == 0.
inline void scale_c(const GemmArgs &g, int threads) {
  threads = threads_for_work(threads, static_cast<double>(g.m) * g.n, 1 << 16);
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
  for (std::int64_t i = 0; i < g.m; ++i) {
    float *row = g.c + i * g.ldc;
    if (g.beta == 0.0f)
      for (std::int64_t j = 0; j < g.n; ++j) row[j] = 0.0f;
    else
      for (std::int64_t j = 0; j < g.n; ++j) row[j] *= g.beta;
  }
}

// How one product is cut into blocks and work items.
struct GemmPlan {
  std::int64_t kc, nc, mc; // block sizes actually used
  std::int64_t n_ic;       // MC blocks along m
  std::int64_t n_parts;    // pieces each NC panel's slivers are dealt into
  bool grouped;            // each thread keeps to one piece (column group)
  int threads;
};

// Column groups of a team of more than two: at most this many.
constexpr std::int64_t kMaxColumnGroups = 64;

template <class Cfg> GemmPlan plan_gemm(const GemmArgs &g, int threads) {
  constexpr int NR = Cfg::nv * Cfg::width;
  GemmPlan p{};
  // KC: the k range split into ceil(k / kc_max) blocks of nearly equal
  // depth (no short last block). A function of the shape alone, for
  // determinism.
  // Narrow products (few B slivers) take deeper k blocks: fewer passes over
  // C and longer runs along A's rows, which they read from memory once.
  const std::int64_t kc_max = ceil_div(g.n, NR) <= Cfg::narrow_slivers ? Cfg::kc_narrow : Cfg::kc;
  const std::int64_t k_blocks = ceil_div(g.k, kc_max);
  p.kc = ceil_div(g.k, k_blocks);
  p.nc = min64(round_up(g.n, NR), Cfg::nc);
  // A second thread from 1 MFLOP, or from 0.5 MFLOP where threads can share
  // C out without a barrier (sgemm_one's own_rows and own_columns: one k
  // block, one panel; measured with own_columns); below that, two measured
  // slower than one.
  const bool column_split = g.k <= kc_max && g.n <= Cfg::nc && ceil_div(g.n, NR) >= 2;
  p.threads = threads_for_work(threads, 2.0 * g.m * g.n * g.k, column_split ? 2.5e5 : 5.0e5);
  const int t = p.threads;
  const std::int64_t row_slivers = ceil_div(g.m, Cfg::mr);
  const std::int64_t slivers = ceil_div(p.nc, NR);
  // Teams of more than two: the panel's slivers are cut into column groups
  // that divide the team, thread i working in group i % groups (and helping
  // the others once its own is done, sgemm_one), so that each thread reads
  // only its group's slivers of B: few enough to stay in its L2
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
  p.grouped = t > 2;
  if (p.grouped) {
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
  if (t > 1) group = max64(1, min64(group, ceil_div(row_slivers, 16 * row_team)));
  p.mc = group * Cfg::mr;
  p.n_ic = ceil_div(g.m, p.mc);
  // Two threads, too few row blocks for the team: deal each panel's slivers
  // out as well.
  if (!p.grouped) p.n_parts = p.n_ic >= 2 * t ? 1 : min64(ceil_div(2 * t, p.n_ic), slivers);
  return p;
}

template <class V, class Cfg> KernelStatus sgemm_one(const GemmArgs &g, int threads) {
  constexpr int MR = Cfg::mr, NV = Cfg::nv, NR = NV * V::width;
  static_assert(Cfg::width == V::width, "block table and vector width disagree");
  if (g.m == 0 || g.n == 0) return KernelStatus::ok;
  if (g.k == 0 || g.alpha == 0.0f) {
    scale_c(g, threads);
    return KernelStatus::ok;
  }
  static_assert(Cfg::skinny_m <= kSkinnyMaxRows, "the skinny kernels' instantiations");
  // Past one tile's rows (m > 8), the skinny way only when B is large
  // enough to come from memory (8 MiB and more); in cache, packing pays for
  // itself. A/B against the packed path, 1 thread, m = 12-32: NT, n = k =
  // 128-1024, 0.58-0.95x (the skinny NT kernel reduces once per row and
  // column per k block); 2048 1.20-1.69x, 4096 1.33-2.62x. NN in cache
  // 0.85-1.27x (n = 1000: 8 columns then left to a scalar tail), 2048 1.27-2.0x.
  constexpr double kSkinnyGroupsMinBFloats = 2.0 * 1024 * 1024;
  if (g.m <= skinny_rows_limit(Cfg::skinny_m, g.trans_b) &&
      (g.m <= kSkinnyTileRows || static_cast<double>(g.n) * g.k >= kSkinnyGroupsMinBFloats))
    return sgemm_skinny<V, static_cast<int>(Cfg::skinny_m)>(g, threads);
  // A second, wider tile where the instruction set has one, for widths it
  // covers with no more padding than the main tile. Up to two of its
  // slivers (P.V with d = 64 or 128) A is loaded once or twice instead of
  // two or four times; wider, it needs fewer loads per FMA and half the
  // passes over C (AVX-512, 1 thread, 4 alternating runs, medians of
  // process CPU time, GFLOP/s: 1024^3 NN 97.7 -> 102.2, NT 91.2 -> 104.0,
  // 2048^3 NN 92.5 -> 102.4, 512^3 NT 99.3 -> 106.0, Q.K^T 4096 x 4096 x
  // 128 94.2 -> 98.9; +2-14 % over 14 squares and Q.K^T shapes). Up to two
  // slivers, not for small products on a team: those share C out without a
  // barrier (own_rows, own_columns below), by 32-wide slivers where rows are
  // few, which one 64-wide sliver cannot (2 threads, 64^3, split by
  // columns at the time: 135 -> 100 GFLOP/s); there both
  // tiles use the same KC (kc_narrow), so they give the same sum order per
  // element and the thread count never changes results. Wider products take
  // it on any team, as its KC differs from the main tile's there.
  if constexpr (!std::is_void_v<typename Cfg::wide_tile>) {
    using Wide = typename Cfg::wide_tile;
    constexpr std::int64_t WR = Wide::nv * Wide::width;
    if (g.n > NR && round_up(g.n, WR) == round_up(g.n, NR) &&
        (g.n > 2 * WR || threads <= 1 || 2.0 * g.m * g.n * g.k >= 64.0e6))
      return sgemm_one<V, Wide>(g, threads);
  }
  const GemmPlan plan = plan_gemm<Cfg>(g, threads);
  // op(A)(i, p) = a[i * rs_a + p * cs_a]; op(B)(p, j) = b[p * rs_b + j * cs_b]
  const std::int64_t rs_a = g.trans_a ? 1 : g.lda, cs_a = g.trans_a ? g.lda : 1;
  const std::int64_t rs_b = g.trans_b ? 1 : g.ldb, cs_b = g.trans_b ? g.ldb : 1;
  // A sliver serves ceil(n / NR) B slivers. When that is few, packing it
  // costs more than it saves: the micro-kernel reads A's rows in place.
  // Except when A's row stride is a multiple of 4 KiB and A is reused by 3
  // or more slivers: then every row of the sliver falls in the same L1 sets
  // and the in-place reads conflict (P.V, 4096 x 128 x 4096: 80 -> 87
  // GFLOP/s packed; with 2 slivers, 4096 x 64, packing loses 83 -> 72).
  const std::int64_t slivers_total = ceil_div(g.n, NR);
  const bool aliasing_rows = rs_a % 1024 == 0 && slivers_total > 2;
  const bool direct_a = cs_a == 1 && slivers_total <= Cfg::direct_a_max_slivers && !aliasing_rows;

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
  const std::int64_t row_slivers = ceil_div(g.m, MR);
  const bool small =
      plan.threads > 1 && g.k <= plan.kc && g.n <= plan.nc && 2.0 * g.m * g.n * g.k <= 6.4e7;
  const bool own_rows = small && row_slivers >= 4 * plan.threads;
  const bool own_columns = small && !own_rows && slivers_total >= plan.threads;
  // There each thread packs B (all of it with own_rows, its columns with
  // own_columns) for a few row slivers only, so where op(B)'s rows lie
  // contiguous the micro-kernel reads full slivers in place instead (the
  // same loads in the same order: the same bits), while the k rows of B
  // span at most 128 KiB (at a row stride of a multiple of 4 KiB, which
  // puts every row in the same L1 sets, that is 32 rows or fewer); an edge
  // sliver is still packed (zero-padded). A/B, NN, 2 threads, alternating
  // in one process, medians of 41 (with the even row split below): 64^3
  // 128 -> 150 GFLOP/s, 128^3 193 -> 212, 256 x 64 x 256 208 -> 221,
  // 256 x 128 x 256 204 -> 217 (256^3, span 256 KiB: 0.99x). One thread
  // packs B once for all its rows, and there the packed sliver (in L1) ran
  // faster: 0.95-0.98x.
  const bool direct_b =
      (own_rows || own_columns) && cs_b == 1 && g.k * g.ldb <= Cfg::direct_b_max_span_bytes / 4;

  // One thread, op(B)'s rows contiguous (NN, TN): the first row tile of
  // each full sliver (rows 0 to MR - 1, in the first row block of each k
  // block and panel, which one thread takes before any other) reads B in
  // place and writes the packed sliver as it goes, for the tiles after it,
  // instead of a packing pass before them: the same loads in the same order
  // (the same bits), one pass over B fewer. AVX-512, A/B in one process
  // (ad-hoc harness, alternating calls, medians of 41, two rounds), NN,
  // GFLOP/s: 96^3 +2-3 %, 128^3 +1-2 %, 192^3 +2 %, 256^3 +1-2 %, 512^3
  // +1 %, 256 x 64 x 256 +1-3 %, 1024 x 128 x 1024 +0-1 %.
  // (With m >= MR that tile is whole: plan.mc is a multiple of MR.)
  const bool pack_on_use = plan.threads == 1 && cs_b == 1 && g.m >= MR;

  // The shared panel of B, then per thread its A block (and with own_rows
  // its panel), each thread's on pages of its own.
  const std::int64_t b_floats = plan.kc * plan.nc;
  const std::int64_t a_floats = direct_a ? 0 : plan.kc * plan.mc; // one A block per thread
  const std::int64_t shared_floats = own_rows ? 0 : round_up(b_floats, 1024);
  const std::int64_t thread_floats = round_up(a_floats + (own_rows ? b_floats : 0), 1024) + 1024;
  const std::int64_t chunk = max64(1, Cfg::b_chunk_bytes / (plan.kc * NR * 4));
  Scratch scratch(static_cast<std::size_t>(shared_floats + thread_floats * plan.threads));
  if (!scratch.data()) return KernelStatus::out_of_memory;
  float *const bshared = scratch.data();

  // Rows [ic, ic + mc) x B slivers [s_begin, s_end) of the panel at jc, for
  // the k block at pc: one work item.
  const auto block = [&](float *apack, const float *bpack, std::int64_t jc, std::int64_t nc,
                         std::int64_t pc, std::int64_t kc, std::int64_t ic, std::int64_t mc,
                         std::int64_t s_begin, std::int64_t s_end) {
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
  };
  const auto pack_b = [&](float *bpack, std::int64_t jc, std::int64_t nc, std::int64_t pc,
                          std::int64_t kc, std::int64_t s) {
    const std::int64_t j0 = s * NR;
    pack_b_sliver<NR>(kc, static_cast<int>(min64(NR, nc - j0)), g.b + pc * rs_b + (jc + j0) * cs_b,
                      rs_b, cs_b, bpack + j0 * kc);
  };

  // The next row block of each column group (plan.grouped), a cache line
  // each, since every thread of a group takes its blocks from it. Made only
  // where the grouped loop runs: zeroing the 4 KiB on every call cost a 16^3 product
  // 50-90 ns (340 -> 400-430 ns a call, 1 thread).
  struct alignas(64) NextRowBlock {
    std::atomic<std::int64_t> v{0};
  };
  struct RowBlockCounters {
    NextRowBlock next[kMaxColumnGroups];
  };
  std::optional<RowBlockCounters> counters;
  if (plan.grouped && !own_rows && !own_columns) counters.emplace();

  const auto run = [&](bool team) {
    float *const apack =
        scratch.data() + shared_floats + thread_floats * (team ? omp_thread_id() : 0);
    if (own_rows) {
      const std::int64_t t = omp_thread_id(), nt = omp_team_size();
      float *const bown = apack + a_floats; // this thread's copy of the panel
      for (std::int64_t s = 0; s < slivers_total; ++s)
        if (!direct_b || (s + 1) * NR > g.n) pack_b(bown, 0, g.n, 0, g.k, s);
      // Rows split evenly, not by whole slivers: 128 rows of 12-row
      // slivers went 60 / 68; now 64 / 64, each ending with a 4-row tile
      // (same sums either way: a tile's rows do not change an element's
      // arithmetic). 2 threads, 128^3 +2-3 %, 200 x 128 x 128 +3 %.
      const std::int64_t i0 = g.m * t / nt, i1 = g.m * (t + 1) / nt;
      for (std::int64_t ic = i0; ic < i1; ic += plan.mc)
        block(apack, bown, 0, g.n, 0, g.k, ic, min64(plan.mc, i1 - ic), 0, slivers_total);
      return;
    }
    if (own_columns) {
      const std::int64_t t = omp_thread_id(), nt = omp_team_size();
      const std::int64_t s0 = slivers_total * t / nt, s1 = slivers_total * (t + 1) / nt;
      for (std::int64_t s = s0; s < s1; ++s)
        if (!direct_b || (s + 1) * NR > g.n) pack_b(bshared, 0, g.n, 0, g.k, s);
      for (std::int64_t ic = 0; ic < g.m; ic += plan.mc)
        block(apack, bshared, 0, g.n, 0, g.k, ic, min64(plan.mc, g.m - ic), s0, s1);
      return;
    }
    for (std::int64_t jc = 0; jc < g.n; jc += plan.nc) {
      const std::int64_t nc = min64(plan.nc, g.n - jc);
      const std::int64_t slivers = ceil_div(nc, NR);
      for (std::int64_t pc = 0; pc < g.k; pc += plan.kc) {
        const std::int64_t kc = min64(plan.kc, g.k - pc);
        if (plan.grouped && omp_thread_id() == 0)
          for (std::int64_t q = 0; q < plan.n_parts; ++q)
            counters->next[q].v.store(0, std::memory_order_relaxed);
        team_for_static(team, slivers, [&](std::int64_t s) {
          if (!pack_on_use || (s + 1) * NR > nc) pack_b(bshared, jc, nc, pc, kc, s);
        });
        // implicit barrier (team): B panel complete (and the counters reset)
        const std::int64_t per_part = ceil_div(slivers, plan.n_parts);
        if (plan.grouped) {
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
              block(apack, bshared, jc, nc, pc, kc, ic, min64(plan.mc, g.m - ic), s_begin, s_end);
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
            block(apack, bshared, jc, nc, pc, kc, ic, min64(plan.mc, g.m - ic), s_begin, s_end);
        }); // implicit barrier (team): B panel free for the next pc
      }
    }
  };
  if (plan.threads > 1) {
#pragma omp parallel num_threads(plan.threads)
    run(true);
  } else {
    run(false);
  }
  return KernelStatus::ok;
}

// Batched products: many small ones run one per thread; otherwise each
// product gets the whole team in turn. Either way, per-product arithmetic is
// that of sgemm_one, so results do not depend on the choice.
template <class V, class Cfg>
KernelStatus sgemm_batched(const GemmArgs &g, const GemmBatch &batch, int threads) {
  const double flops = 2.0 * g.m * g.n * g.k;
  const bool per_thread = threads > 1 && batch.count >= threads && flops < 64.0e6;
  if (!per_thread) {
    for (std::int64_t i = 0; i < batch.count; ++i) {
      GemmArgs one = g;
      one.a += i * batch.stride_a;
      one.b += i * batch.stride_b;
      one.c += i * batch.stride_c;
      if (sgemm_one<V, Cfg>(one, threads) != KernelStatus::ok) return KernelStatus::out_of_memory;
    }
    return KernelStatus::ok;
  }
  bool oom = false;
#pragma omp parallel for schedule(static) num_threads(threads) reduction(|| : oom)
  for (std::int64_t i = 0; i < batch.count; ++i) {
    GemmArgs one = g;
    one.a += i * batch.stride_a;
    one.b += i * batch.stride_b;
    one.c += i * batch.stride_c;
    oom = oom || sgemm_one<V, Cfg>(one, 1) != KernelStatus::ok;
  }
  return oom ? KernelStatus::out_of_memory : KernelStatus::ok;
}

} // namespace AK_ISA_NS
} // namespace attnkern
