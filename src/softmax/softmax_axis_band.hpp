// The long axes of softmax_axis (softmax_axis_long.hpp): one band of rows
// of a piece of columns, through its passes (AxisBand), for one
// instruction set.
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>

#include "../gemm/gemm_common.hpp"
#include "../simd.hpp"
#include "../vexp.hpp"
#include "softmax_axis_band_state.hpp"
#include "softmax_axis_common.hpp"
#include "softmax_row_normalize.hpp"

namespace attnkern {
namespace AK_ISA_NS {

// Rows requested ahead of each pass: the segments of a piece are a page
// apart or more, where the hardware prefetchers stop.
constexpr std::int64_t kRowsAhead = 8;

// One band: rows [r0, r1) of columns [0, width) of an [axis_len, inner]
// plane. Every step is per lane, bar the choice of exp per vector (see
// exp_for), so a column's result depends on its own elements alone,
// never on the piece it falls in.
//
// Column j's result is y = exp(x - M[j]) / S[j]. Each band sums the
// exponentials of its rows (compensated) against a running shift of its
// own, keeps them in y, and the piece's merge (merge_axis_bands) takes the
// largest band shift as M and adds the bands' sums, each scaled to M. Every
// band starts from the shift that the axis's first rows set, so the bands
// of a column agree unless a value passes it by more than kGap. The second
// pass divides; out of place, it recomputes from x the rows that a later
// move made stale (redo: before a band's last move, or all of a band whose
// shift is not M); in place, x is gone by then, so a pass of loads and
// compares finds the shifts first and the first pass stores those rows
// against M. Either way the same bits. (In place, recomputing every
// exponential in the second pass instead was slower;
// docs/tuning.md.)
template <class V> struct AxisBand {
  using reg = typename V::reg;
  static constexpr int W = V::width;
  static constexpr int R = kAxisStepRows;

  const float *x;
  float *y;
  std::int64_t axis_len, inner, width, r0, r1;
  AxisBandState st;
  AxisMerged mg;
  // Out of place only: the first pass's exponentials go to y in streaming
  // (non-temporal) stores, whole vectors aligned to their size (see
  // SoftmaxTuning::stream_axis_min_bytes).
  bool stream;

  // Vector j of a row: whole (Tail false), or the piece's last, n < W lanes
  // wide.
  template <bool Tail> static reg load(const float *p, std::int64_t j, std::int64_t n) {
    return axis_load<V, Tail>(p + j, n);
  }
  template <bool Tail> static void store(float *p, std::int64_t j, std::int64_t n, reg v) {
    axis_store<V, Tail>(p + j, n, v);
  }
  // body(tail, j, n) over the piece's whole vectors, then its tail.
  template <class Body> void each_vector(const Body &body) const {
    std::int64_t j = 0;
    for (; j + W <= width; j += W) body(std::false_type{}, j, W);
    if (j < width) body(std::true_type{}, j, width - j);
  }
  // Rows p, p + inner, ... (`rows` of them) at column j, once per line;
  // p null: nothing.
  template <int Rw> void prefetch_rows(const float *p, int rows, std::int64_t j) const {
    if (p && j % 16 == 0)
      for (int k = 0; k < rows; ++k) __builtin_prefetch(p + k * inner + j, Rw, 1);
  }
  // Row a + kRowsAhead of p (the next band's rows too), or null near the end.
  const float *ahead(const float *p, std::int64_t a, int rows) const {
    return a + kRowsAhead + rows <= axis_len ? p + (a + kRowsAhead) * inner : nullptr;
  }

  // A column's shift moves only to a value more than kGap above it, so
  // every exponential stays below e^32 (e^64 for shifts of 2^29 and more,
  // where shift + 32 may round up to shift + 64; a sum of any length stays
  // finite either way) and a column whose values lie within 32 of each
  // other sets its shift once, from the first rows. A later move multiplies
  // the sum so far by exp(old - new): one more rounding, on a part of the
  // sum made of terms at most 1, beside the new largest term, exactly 1.
  static constexpr float kGap = 32.0f;

  // The exp that vector j of these shifts allows.
  static AxisExp exp_for(const float *shift, std::int64_t j) {
    const reg m = V::loadu(shift + j); // never NaN
    const reg magnitude = V::max(m, V::sub(V::zero(), m));
    if (!V::any_lt(V::zero(), magnitude)) return AxisExp::unshifted;
    return V::any_lt(V::set1(kShiftedExpMaxShift), magnitude) ? AxisExp::diff : AxisExp::shifted;
  }

  // Exponentials of Rows row vectors against a shift, with the vector's exp.
  template <int Rows> static void exps(reg (&e)[Rows], reg shift, AxisExp kind) {
    if (kind == AxisExp::unshifted) {
      const reg floor = V::set1(-kShiftedExpFloor);
#pragma GCC unroll 4
      for (int k = 0; k < Rows; ++k) e[k] = vexp_unshifted<V>(e[k], floor);
    } else if (kind == AxisExp::shifted) {
      const reg floor = V::sub(shift, V::set1(kShiftedExpFloor));
#pragma GCC unroll 4
      for (int k = 0; k < Rows; ++k) e[k] = vexp_shifted<V>(e[k], shift, floor);
    } else {
#pragma GCC unroll 4
      for (int k = 0; k < Rows; ++k) e[k] = vexp_diff<V>(e[k], shift);
    }
  }

  // Moves the shifts of vector j's lanes that `top` (the largest of rows
  // [a, a + Rows)) passes by more than kGap, scaling their sums to match;
  // redo[j / W] = a when any lane moves.
  void move_shifts(std::int64_t j, std::int64_t a, reg top, reg &shift, reg &sum, reg &comp) const {
    const reg lim = V::loadu(st.limit + j);
    if (!V::any_lt(lim, top)) return;
    const reg raised = V::lt_select(lim, top, top, shift);
    // a column's first shift (limit -inf) scales its empty sum by 0, not by
    // exp(0 - raised), which may be +inf
    const reg first = V::lt_select(lim, V::set1(std::numeric_limits<float>::lowest()), V::zero(),
                                   vexp_diff<V>(shift, raised));
    const reg factor = V::lt_select(lim, top, first, V::set1(1.0f));
    sum = V::mul(sum, factor);
    comp = V::mul(comp, factor);
    shift = raised;
    V::storeu(st.m + j, shift);
    V::storeu(st.limit + j, V::lt_select(lim, top, V::add(raised, V::set1(kGap)), lim));
    st.exp[j / W] = exp_for(st.m, j);
    st.redo[j / W] = a;
  }

  template <int Rows, bool Tail>
  reg load_rows(reg (&e)[Rows], const float *xa, std::int64_t j, std::int64_t n) const {
#pragma GCC unroll 4
    for (int k = 0; k < Rows; ++k) e[k] = load<Tail>(xa + k * inner, j, n);
    reg top = e[0];
#pragma GCC unroll 4
    for (int k = 1; k < Rows; ++k) top = V::max(top, e[k]);
    return top;
  }

  // Vector v of the shifts that the axis's first kSeedRows rows set (their
  // largest; 0 where that is in [0, kGap], as the softmax rows do for
  // maxima in [0, 64] (unshifted_row): the shift stays below the column's
  // maximum, so every weight is still at most its exponential; and 0 with
  // no limit where those rows are all -inf), which every band starts from.
  // Found once per piece before any band writes: in place, the first rows
  // are overwritten. 16 rows rather than one step's 4, so that a vector's
  // 16 unit-normal columns all start from 0 (and take vexp_unshifted) but
  // about once in 4000 pieces, not about 2 times in 3
  // (docs/tuning.md).
  static constexpr int kSeedRows = 16;
  static_assert(kSeedRows % R == 0 && kSeedRows <= kShortAxisMax, "long axes have them");
  void seed(std::int64_t v) const {
    const std::int64_t j = v * W;
    reg e[R];
    reg top = V::set1(-std::numeric_limits<float>::infinity());
    for (int q = 0; q < kSeedRows / R; ++q) {
      const float *xq = x + q * R * inner;
      top = V::max(top, j + W <= width ? load_rows<R, false>(e, xq, j, W)
                                       : load_rows<R, true>(e, xq, j, width - j));
    }
    const reg lim = V::set1(-std::numeric_limits<float>::infinity()), zero = V::zero();
    const reg away = V::lt_select(top, zero, top, V::lt_select(V::set1(kGap), top, top, zero));
    const reg raised = V::lt_select(lim, top, away, zero);
    V::storeu(mg.seed_m + j, raised);
    V::storeu(mg.seed_limit + j, V::lt_select(lim, top, V::add(raised, V::set1(kGap)), lim));
    mg.seed_exp[v] = exp_for(mg.seed_m, j);
  }

  // A fresh state at the seed shifts, with nothing stale.
  void reset() const {
    const std::int64_t padded = (width + W - 1) / W * W;
    for (std::int64_t j = 0; j < padded; j += W) {
      V::storeu(st.m + j, V::loadu(mg.seed_m + j));
      V::storeu(st.limit + j, V::loadu(mg.seed_limit + j));
      V::storeu(st.s + j, V::zero());
      V::storeu(st.c + j, V::zero());
    }
    for (std::int64_t v = 0; v < padded / W; ++v) {
      st.exp[v] = mg.seed_exp[v];
      st.redo[v] = r0;
    }
  }

  // In place only, rows [a, a + Rows): the shift moves alone, no sums, so
  // that the merge knows each column's final shift before the first pass
  // overwrites x.
  template <int Rows> void shift_step(std::int64_t a) const {
    const float *xa = x + a * inner, *next = ahead(x, a, Rows);
    each_vector([&](auto tail, std::int64_t j, std::int64_t n) {
      prefetch_rows<0>(next, Rows, j);
      reg e[Rows];
      const reg top = load_rows<Rows, decltype(tail)::value>(e, xa, j, n);
      reg shift = V::loadu(st.m + j), sum = V::zero(), comp = V::zero();
      move_shifts(j, a, top, shift, sum, comp);
    });
  }

  // First pass, rows [a, a + Rows): move the shifts these rows need, then
  // add their exponentials to each column's compensated (Kahan) sum, two
  // rows at a time with FMA (one at a time without: there the division
  // rounds the sum, and pairs broke the 2e-7 bound in the tests), and keep
  // them in y. Pairs are faster than every term alone and stay within
  // docs/design.md's 2e-7 bound, partials of 4 do not
  // (docs/tuning.md). In place (Final), rows before a vector's
  // `last` store the exponentials against the merged shifts instead, since
  // x will not be there to recompute them.
  template <int Rows, bool Final> void stats_step(std::int64_t a) const {
    const float *xa = x + a * inner, *next = ahead(x, a, Rows);
    const float *y_next = Final || stream ? nullptr : ahead(y, a, Rows);
    float *ya = y + a * inner;
    each_vector([&](auto tail, std::int64_t j, std::int64_t n) {
      constexpr bool T = decltype(tail)::value;
      prefetch_rows<0>(next, Rows, j);
      prefetch_rows<1>(y_next, Rows, j);
      reg e[Rows];
      const reg top = load_rows<Rows, T>(e, xa, j, n);
      reg shift = V::loadu(st.m + j), sum = V::loadu(st.s + j), comp = V::loadu(st.c + j);
      move_shifts(j, a, top, shift, sum, comp);
      if (Final && a < st.last[j / W]) {
        reg f[Rows];
#pragma GCC unroll 4
        for (int k = 0; k < Rows; ++k) f[k] = e[k];
        exps<Rows>(f, V::loadu(mg.m + j), mg.exp[j / W]);
#pragma GCC unroll 4
        for (int k = 0; k < Rows; ++k) store<T>(ya + k * inner, j, n, f[k]);
        exps<Rows>(e, shift, st.exp[j / W]);
      } else {
        exps<Rows>(e, shift, st.exp[j / W]);
        if (!T && !Final && stream) {
#pragma GCC unroll 4
          for (int k = 0; k < Rows; ++k) V::store_stream(ya + k * inner + j, e[k]);
        } else {
#pragma GCC unroll 4
          for (int k = 0; k < Rows; ++k) store<T>(ya + k * inner, j, n, e[k]);
        }
      }
      // pairs where the division takes the low part (divide_by_sum, FMA)
      constexpr bool kPairs = V::has_fma && Rows % 2 == 0;
      constexpr int kTerms = kPairs ? Rows / 2 : Rows;
      reg term_of[kTerms];
#pragma GCC unroll 4
      for (int k = 0; k < kTerms; ++k) term_of[k] = kPairs ? V::add(e[2 * k], e[2 * k + 1]) : e[k];
#pragma GCC unroll 4
      for (int k = 0; k < kTerms; ++k) {
        const reg term = V::sub(term_of[k], comp), t = V::add(sum, term);
        comp = V::sub(V::sub(t, sum), term);
        sum = t;
      }
      V::storeu(st.s + j, sum);
      V::storeu(st.c + j, comp);
    });
  }

  // Second pass, rows [a, a + Rows): y = exp(x - M) / S, the exponential
  // kept in y unless it is stale.
  template <int Rows> void output_step(std::int64_t a) const {
    const float *xa = x + a * inner;
    float *ya = y + a * inner;
    const float *next = a >= kRowsAhead ? y + (a - kRowsAhead) * inner : nullptr;
    each_vector([&](auto tail, std::int64_t j, std::int64_t n) {
      constexpr bool T = decltype(tail)::value;
      prefetch_rows<1>(next, Rows, j);
      reg e[Rows];
      if (a >= st.redo[j / W]) {
#pragma GCC unroll 4
        for (int k = 0; k < Rows; ++k) e[k] = load<T>(ya + k * inner, j, n);
      } else {
        load_rows<Rows, T>(e, xa, j, n);
        exps<Rows>(e, V::loadu(mg.m + j), mg.exp[j / W]);
      }
      const reg d = V::loadu(mg.den + j), lo = V::loadu(mg.den_lo + j);
      const reg inv = V::loadu(mg.inv + j);
#pragma GCC unroll 4
      for (int k = 0; k < Rows; ++k)
        store<T>(ya + k * inner, j, n, divide_by_sum<V>(e[k], d, lo, inv));
    });
  }

  // Steps of R rows, then single rows past the last whole step of the axis:
  // fixed by axis_len alone (band edges are multiples of R), the same in
  // every pass.
  template <class Step> void each_step(const Step &step) const {
    const std::int64_t grouped = axis_len / R * R;
    std::int64_t a = r0;
    for (; a + R <= r1 && a < grouped; a += R) step(std::integral_constant<int, R>{}, a);
    for (; a < r1; ++a) step(std::integral_constant<int, 1>{}, a);
  }

  void shift_pass() const {
    reset();
    each_step([&](auto rows, std::int64_t a) { shift_step<decltype(rows)::value>(a); });
  }
  template <bool Final> void stats_pass() const {
    reset();
    each_step([&](auto rows, std::int64_t a) { stats_step<decltype(rows)::value, Final>(a); });
    if (stream) V::stream_fence(); // before the merge and the other threads' second pass
  }
  // The second pass runs backwards: single rows past the last whole step,
  // then the steps, each requesting the rows kRowsAhead before it.
  void output_pass() const {
    const std::int64_t grouped = axis_len / R * R;
    std::int64_t a = r1 - 1;
    for (; a >= r0 && a >= grouped; --a) output_step<1>(a);
    for (a = r0 + (min64(a + 1, grouped) - r0) / R * R - R; a >= r0; a -= R) output_step<R>(a);
  }
};

} // namespace AK_ISA_NS
} // namespace attnkern
