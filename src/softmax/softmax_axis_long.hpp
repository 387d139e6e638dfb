// Softmax along long axes (more than kShortAxisMax), for one instruction
// set: the scheme of pieces and bands of softmax_axis (see
// softmax_axis.hpp for the layout and what both schemes guarantee, and for
// the plan of threads, pieces and bands, which softmax_axis holds itself).
//
// The columns are cut into pieces of whole cache lines, at most kPieceMax
// floats wide, and the rows into bands (both by the shape alone). Each band
// (AxisBand, softmax_axis_band.hpp) makes two row-major passes over its
// rows of a piece, reading row segments of up to 4 KiB with the columns'
// state in small arrays in L1 (walking a piece down a few columns at a
// time instead touches a new page every 512 bytes and, for power-of-two
// inner dimensions, a handful of cache sets). The first pass sums the
// exponentials against a running shift that only moves when a value
// exceeds it by more than kGap, so it needs no maximum pass before it (in
// place, a pass of loads and compares finds the final shifts first), and
// keeps them in y; a merge of the piece's bands gives each column its shift
// and sum; the second pass divides. Two passes rather than three (maximum,
// exponentials, division): faster on every shape measured
// (docs/tuning.md).
#pragma once

#include <cstdint>
#include <limits>

#include "../gemm/gemm_common.hpp"
#include "../simd.hpp"
#include "../vexp.hpp"
#include "softmax_axis_band.hpp"
#include "softmax_axis_band_state.hpp"
#include "softmax_axis_common.hpp"

namespace attnkern {
namespace AK_ISA_NS {

constexpr std::int64_t kPieceMax = 1024; // floats: 4 KiB row segments

// The merge of a piece's band states for vector v: M, the largest shift
// among the bands that set one (0 where none did: an all -inf column); with
// `sums`, also S, the bands' sums scaled by exp(shift - M) and added in band
// order (compensated, each band's own compensation folded in), as the
// denominator (1 where S is 0: an all -inf column, whose weights stay 0; NaN
// stays NaN), the correction as its low part (see divide_by_sum) and its
// reciprocal.
// A band's vectors whose shifts differ from M in any lane are stale in all
// its rows. Out of place, their redo becomes the band's end. In place, the
// merge after the shift pass (no `sums`) sets each band's `last` (its end,
// or its redo: the first pass stores the rows below it against M); the one
// after the first pass marks nothing stale, as every kept exponential is
// then against M.
template <class V>
void merge_axis_bands(const AxisStateLayout &lay, float *set, const AxisBands &bands,
                      std::int64_t v, bool sums, bool in_place) {
  using reg = typename V::reg;
  constexpr int W = V::width;
  const reg zero = V::zero(), one = V::set1(1.0f);
  const reg lowest = V::set1(std::numeric_limits<float>::lowest());
  const AxisMerged mg = lay.merged(set);
  const std::int64_t j = v * W;
  // M: with one band, its shifts (0 where none was set: the reset value)
  reg top = V::loadu(lay.band(set, 0).m + j);
  if (bands.count > 1) {
    reg have = zero;
    top = zero;
    for (std::int64_t b = 0; b < bands.count; ++b) {
      const AxisBandState st = lay.band(set, b);
      const reg lim = V::loadu(st.limit + j), m = V::loadu(st.m + j);
      const reg set_here = V::lt_select(lim, lowest, zero, one);
      const reg cand = V::lt_select(zero, have, V::max(top, m), m);
      top = V::lt_select(zero, set_here, cand, top);
      have = V::max(have, set_here);
    }
  }
  V::storeu(mg.m + j, top);
  mg.exp[v] = AxisBand<V>::exp_for(mg.m, j);
  reg sum = zero, comp = zero;
  for (std::int64_t b = 0; b < bands.count; ++b) {
    const AxisBandState st = lay.band(set, b);
    const std::int64_t r0 = b * bands.rows, end = r0 + bands.rows;
    const reg m = V::loadu(st.m + j);
    const bool differs = V::any_lt(m, top) || V::any_lt(top, m);
    if (!sums) { // in place, after the shift pass
      st.last[v] = differs ? end : st.redo[v];
      continue;
    }
    st.redo[v] = in_place ? r0 : differs ? end : st.redo[v];
    const reg lim = V::loadu(st.limit + j);
    const reg scale = differs ? V::lt_select(m, top, vexp_diff<V>(m, top), one) : one;
    const reg f = V::lt_select(lim, lowest, zero, scale);
    const reg s = V::mul(f, V::loadu(st.s + j)), c = V::mul(f, V::loadu(st.c + j));
    const reg term = V::sub(s, comp), t = V::add(sum, term);
    comp = V::add(V::sub(V::sub(t, sum), term), c);
    sum = t;
  }
  if (!sums) return;
  // the denominator as the pair sum - comp (divide_by_sum)
  const reg d = V::lt_select(sum, V::set1(std::numeric_limits<float>::min()), one, sum);
  V::storeu(mg.den + j, d);
  V::storeu(mg.den_lo + j, V::sub(zero, comp));
  V::storeu(mg.inv + j, V::div(one, d));
}

// One piece (columns [0, width) of a plane at x, y) through every band and
// merge. `team`: called by every thread of a team, which share out the
// bands and the merge (each thread then writes rows of its own); else one
// thread does it all.
template <class V>
void softmax_axis_piece(const float *x, float *y, std::int64_t axis_len, std::int64_t inner,
                        std::int64_t width, const AxisStateLayout &lay, float *set,
                        const AxisBands &bands, bool team, bool stream) {
  const bool in_place = x == y;
  const auto band = [&](std::int64_t b) {
    const std::int64_t r0 = b * bands.rows;
    const std::int64_t r1 = r0 + bands.rows < axis_len ? r0 + bands.rows : axis_len;
    return AxisBand<V>{x,  y,  axis_len,         inner,           width,
                       r0, r1, lay.band(set, b), lay.merged(set), stream && !in_place};
  };
  const std::int64_t vectors = (width + V::width - 1) / V::width;
  team_for_static(team, vectors, [&](std::int64_t v) { band(0).seed(v); });
  if (in_place) { // the shifts first, so that the first pass can store against M
    team_for_static(team, bands.count, [&](std::int64_t b) { band(b).shift_pass(); });
    team_for_static(team, vectors,
                    [&](std::int64_t v) { merge_axis_bands<V>(lay, set, bands, v, false, true); });
    team_for_static(team, bands.count,
                    [&](std::int64_t b) { band(b).template stats_pass<true>(); });
  } else {
    team_for_static(team, bands.count,
                    [&](std::int64_t b) { band(b).template stats_pass<false>(); });
  }
  team_for_static(team, vectors,
                  [&](std::int64_t v) { merge_axis_bands<V>(lay, set, bands, v, true, in_place); });
  // The second pass takes a thread's bands, and each band its rows, from
  // the last to the first: the rows of y the first pass wrote last are the
  // likeliest to be still in L3 (pieces of 512 floats, whose y would fit in
  // L3 whole, ran slower; docs/tuning.md).
  const std::int64_t t = team ? omp_thread_id() : 0, nt = team ? omp_team_size() : 1;
  for (std::int64_t b = bands.count * (t + 1) / nt - 1; b >= bands.count * t / nt; --b) {
    const AxisBand<V> bd = band(b);
    bd.output_pass();
    axis_uniform_nan<V>(bd.mg.den, width, y, inner, bd.r0, bd.r1);
  }
  if (team) {
#pragma omp barrier
  }
}

} // namespace AK_ISA_NS
} // namespace attnkern
