// Softmax along the middle axis of a contiguous [outer, axis, inner] tensor,
// for one instruction set: each (outer, inner) index is a column, one
// softmax over axis_len elements `inner` floats apart, vectorized across
// inner. Two schemes, chosen by the shape alone:
//
// - long axes (AxisBand): the columns are cut into pieces of whole cache
//   lines, at most kPieceMax floats wide, and the rows into bands (both by
//   the shape alone). Each band makes two row-major passes over its rows
//   of a piece, reading row segments of up to 4 KiB with the columns' state
//   in small arrays in L1 (walking a piece down a few columns at a time
//   instead touches a new page every 512 bytes and, for power-of-two inner
//   dimensions, a handful of cache sets). The first pass sums the
//   exponentials against a running shift that only moves when a value
//   exceeds it by more than kGap, so it needs no maximum pass before it
//   (in place, a pass of loads and compares finds the final shifts first),
//   and keeps them in y; a merge of the piece's bands gives each column its
//   shift and sum; the second pass divides. Two passes rather than three
//   (maximum, exponentials, division): faster on every shape measured
//   (docs/tuning-softmax.md).
// - short axes (softmax_axis_short below): a block of 8 vectors of columns
//   at a time with its state in registers, walked down the axis for each of
//   three passes (maximum, exponentials, division), since a short block
//   stays in cache between them (its exponentials in a small contiguous
//   buffer, not in y).
//
// Each scheme's result for a column depends on that column's elements alone
// (never on its neighbours, the piece it falls in or the thread count; the
// bands depend on axis_len alone); the two schemes shift by different
// amounts, so their bits differ.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "../gemm/gemm_common.hpp"
#include "../kernel_table.hpp"
#include "../scratch.hpp"
#include "../vexp.hpp"
#include "softmax_guess_gate.hpp"
#include "softmax_row_io.hpp"
#include "softmax_row_normalize.hpp"
#include "softmax_rows.hpp"

namespace attnkern {
namespace AK_ISA_NS {

// Axes up to this long take the blocks; longer ones, the pieces, whose two
// passes win from about there on (docs/tuning-softmax.md). It also sizes
// the blocks' buffer.
constexpr std::int64_t kShortAxisMax = 32;

constexpr std::int64_t kPieceMax = 1024; // floats: 4 KiB row segments

// Rows requested ahead of each pass: the segments of a piece are a page
// apart or more, where the hardware prefetchers stop.
constexpr std::int64_t kRowsAhead = 8;
constexpr int kAxisStepRows = 4; // rows per step of a band's passes

// The axis is cut into bands of rows, a function of its length alone: at
// most kMaxBands, of at least kMinBandRows rows each (a multiple of the
// step, but the last). Threads that share one piece take whole bands, so
// that each writes rows of its own. Split by columns, two threads write
// into the same pages a few hundred bytes apart, which now and then ran at
// a fraction of the speed (lines not shared; the prefetchers are the likely
// cause; docs/tuning-softmax.md).
constexpr std::int64_t kMinBandRows = 64, kMaxBands = 16;

struct AxisBands {
  std::int64_t count, rows; // rows per band; the last may have fewer
};
inline AxisBands axis_bands(std::int64_t axis_len) {
  std::int64_t count = axis_len / kMinBandRows;
  count = count < 1 ? 1 : count > kMaxBands ? kMaxBands : count;
  std::int64_t rows = (axis_len + count - 1) / count;
  rows = (rows + kAxisStepRows - 1) / kAxisStepRows * kAxisStepRows;
  return {(axis_len + rows - 1) / rows, rows};
}

// Which exp a vector of columns takes: vexp_unshifted where every lane's
// shift is 0 (the same bits as vexp_shifted there, in 7 of its 21
// operations), vexp_shifted where every |shift| <= kShiftedExpMaxShift, else
// vexp_diff (all three agree on the lanes that suit more than one).
enum class AxisExp : std::uint8_t { diff, shifted, unshifted };

// A band's state, per column of its piece: shift, sum of exp(x - shift) and
// its compensation, the limit above which a value moves the shift (-inf:
// none yet); per vector: the exp its lanes' shifts allow (AxisExp), the
// row below which the kept exponentials are stale (redo) and, in place, the
// row below which the first pass stores against the merged shift (last).
struct AxisBandState {
  float *m, *s, *c, *limit;
  AxisExp *exp;
  std::int64_t *redo, *last;
};
// A piece's shared state: each column's final shift, its exp choice per
// vector, the denominator and its reciprocal; and the shift and limit every
// band starts from, with its exp choice.
struct AxisMerged {
  float *m, *den, *inv, *seed_m, *seed_limit, *den_lo;
  AxisExp *exp, *seed_exp;
};

// Where the states of one piece's bands and its merged state live in a
// scratch buffer (one such set per piece in flight).
struct AxisStateLayout {
  std::int64_t wpad, vectors, bands;
  std::int64_t band_floats() const { return (4 * wpad + 5 * vectors + 15) / 16 * 16; }
  std::int64_t set_floats() const { return bands * band_floats() + 6 * wpad + 2 * vectors; }
  AxisBandState band(float *set, std::int64_t b) const {
    float *p = set + b * band_floats();
    auto *redo = reinterpret_cast<std::int64_t *>(p + 4 * wpad);
    return {p,
            p + wpad,
            p + 2 * wpad,
            p + 3 * wpad,
            reinterpret_cast<AxisExp *>(redo + 2 * vectors),
            redo,
            redo + vectors};
  }
  AxisMerged merged(float *set) const {
    float *p = set + bands * band_floats();
    auto *flags = reinterpret_cast<AxisExp *>(p + 6 * wpad);
    return {p,     p + wpad,       p + 2 * wpad, p + 3 * wpad, p + 4 * wpad, p + 5 * wpad,
            flags, flags + vectors};
  }
};

// A vector of columns of one row at p: whole (Tail false), or the first
// n < W columns, padded with -inf on loads (both schemes).
template <class V, bool Tail>
AK_ALWAYS_INLINE typename V::reg axis_load(const float *p, std::int64_t n) {
  if constexpr (Tail)
    return RowIo<V>::load_tail(p, n, -std::numeric_limits<float>::infinity());
  else
    return V::loadu(p);
}
template <class V, bool Tail>
AK_ALWAYS_INLINE void axis_store(float *p, std::int64_t n, typename V::reg v) {
  if constexpr (Tail)
    RowIo<V>::store_tail(p, n, v);
  else
    V::storeu(p, v);
}

// Columns whose denominator is NaN (a NaN or +inf among their elements) are
// NaN throughout, and get one NaN, the same bits on any thread count: which
// NaN a division leaves (its sign, its payload) follows its operands, and
// so the path the column's exponentials took, which differs with the
// thread count (the short axes' guess gate follows what the thread did
// before; a NaN and a +inf in one column met in different orders). Rows
// [r0, r1) of columns [0, width) at row stride `inner`; den holds `width`
// floats, padded to whole vectors. A vector test first: no such column is
// the common case.
template <class V>
void axis_uniform_nan(const float *den, std::int64_t width, float *y, std::int64_t inner,
                      std::int64_t r0, std::int64_t r1) {
  using reg = typename V::reg;
  reg found = V::zero();
  for (std::int64_t j = 0; j < width; j += V::width)
    found = V::add(found, V::nan_select(V::loadu(den + j), V::set1(1.0f), V::zero()));
  if (V::reduce_add(found) == 0.0f) return;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (std::int64_t j = 0; j < width; ++j)
    if (std::isnan(den[j]))
      for (std::int64_t a = r0; a < r1; ++a) y[a * inner + j] = nan;
}

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
// docs/tuning-softmax.md.)
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
  // (docs/tuning-softmax.md).
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
  // (docs/tuning-softmax.md). In place (Final), rows before a vector's
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
  // L3 whole, ran slower; docs/tuning-softmax.md).
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

// Short axes: a block of NB vectors of columns at a time, its columns'
// maxima, sums and compensations in registers, three passes down its rows.
// The block (axis_len rows of NB * W floats, 16 KiB at most) stays in L1
// between the passes and no per-column state goes through memory, which
// the pieces above load and store at every step (see kShortAxisMax). The
// exponentials wait in a contiguous buffer of the thread's, and y is
// written once, by the division: kept in y, a block's rows, inner floats
// apart (128 KiB for 16 x 32768), fell into the same few L1 sets, more
// lines of x and y than the sets have ways, and y was written twice
// (docs/tuning-softmax.md).

// A block's exponential pass: exponentials into buf (rows of NB * W
// floats) and their compensated (Kahan) sums, from x and the column's
// index; the maxima come along with FindMax. Its state arrays stay in
// registers only where this is inlined and every loop over them unrolled:
// kept in a lambda and unrolled by 4, they lived on the stack, a load and a
// store each per element (docs/tuning-softmax.md).
template <class V, int NB, bool Tail, bool FindMax, class Exp>
AK_ALWAYS_INLINE void axis_block_exp_pass(const float *x, float *buf, std::int64_t axis_len,
                                          std::int64_t inner, std::int64_t n,
                                          typename V::reg (&shift)[NB], typename V::reg (&sum)[NB],
                                          typename V::reg (&comp)[NB], const Exp &exp_of) {
  using reg = typename V::reg;
  constexpr int W = V::width;
#pragma GCC unroll 16
  for (int v = 0; v < NB; ++v) sum[v] = comp[v] = V::zero();
  for (std::int64_t a = 0; a < axis_len; ++a)
#pragma GCC unroll 16
    for (int v = 0; v < NB; ++v) {
      const reg xv = axis_load<V, Tail>(x + a * inner + v * W, n);
      if constexpr (FindMax) shift[v] = V::max(shift[v], xv);
      const reg e = exp_of(v, xv);
      V::storeu(buf + (a * NB + v) * W, e);
      const reg term = V::sub(e, comp[v]), t = V::add(sum[v], term);
      comp[v] = V::sub(V::sub(t, sum[v]), term);
      sum[v] = t;
    }
}

// One block: NB vectors of columns from x and y, the exponentials in buf
// (axis_len * NB * W floats); with Tail, NB = 1 and the vector holds only
// the first n < W columns. A column is shifted by its maximum, per lane, so
// its bits are its own. `optimistic` guesses that every lane shifts by 0
// (see below); returns whether every lane does.
template <class V, int NB, bool Tail>
bool softmax_axis_block(const float *x, float *y, float *buf, std::int64_t axis_len,
                        std::int64_t inner, std::int64_t n, bool optimistic) {
  static_assert(!Tail || NB == 1, "a tail is a single vector");
  using reg = typename V::reg;
  constexpr int W = V::width;
  const reg zero = V::zero(), one = V::set1(1.0f);
  reg shift[NB], sum[NB], comp[NB];
#pragma GCC unroll 16
  for (int v = 0; v < NB; ++v) {
    shift[v] = V::set1(-std::numeric_limits<float>::infinity());
    sum[v] = comp[v] = zero;
  }
  const reg unshifted_floor = V::set1(-kShiftedExpFloor);
  const auto unshifted = [&](int, reg xv) { return vexp_unshifted<V>(xv, unshifted_floor); };

  // Optimistic: the exponentials as if every column's maximum were in
  // [0, 64] (where they take vexp_unshifted below), which the maxima found
  // on the way then confirm or refute (vexp_unshifted meets any value
  // here, those above its domain too: results that are thrown away); this
  // saves the pass of loads and compares over x (docs/tuning-softmax.md).
  // In place too: the guesses go to buf, and x, needed again where they
  // are refuted, stays until the division.
  if (optimistic)
    axis_block_exp_pass<V, NB, Tail, true>(x, buf, axis_len, inner, n, shift, sum, comp, unshifted);
  else
    for (std::int64_t a = 0; a < axis_len; ++a)
#pragma GCC unroll 16
      for (int v = 0; v < NB; ++v)
        shift[v] = V::max(shift[v], axis_load<V, Tail>(x + a * inner + v * W, n));
  // An all -inf column shifts by 0 (exp then gives 0, not NaN), and so does
  // a column whose maximum is in [0, 64] (unshifted_row's reasons);
  // vexp_unshifted if every lane of the block shifts by 0, vexp_shifted if
  // every lane suits it (the three agree on the lanes that suit more than
  // one).
  const reg lowest = V::set1(std::numeric_limits<float>::lowest());
  const reg limit = V::set1(kShiftedExpMaxShift), unshifted_max = V::set1(kUnshiftedExpMax);
  reg misfits = zero;  // lanes with |shift| > limit (inf too) or NaN
  reg shifting = zero; // lanes with a shift other than 0
#pragma GCC unroll 16
  for (int v = 0; v < NB; ++v) {
    shift[v] = V::lt_select(shift[v], lowest, zero, shift[v]);
    shift[v] = V::lt_select(shift[v], zero, shift[v],
                            V::lt_select(unshifted_max, shift[v], shift[v], zero));
    const reg abs_shift = V::max(shift[v], V::sub(zero, shift[v]));
    misfits = V::add(misfits, V::lt_select(limit, abs_shift, one, zero));
    misfits = V::add(misfits, V::nan_select(shift[v], one, zero));
    shifting = V::add(shifting, V::lt_select(zero, abs_shift, one, zero));
    shifting = V::add(shifting, V::nan_select(shift[v], one, zero));
  }
  const bool confirmed = V::reduce_add(shifting) == 0.0f;
  if (confirmed) {
    if (!optimistic)
      axis_block_exp_pass<V, NB, Tail, false>(x, buf, axis_len, inner, n, shift, sum, comp,
                                              unshifted);
  } else if (V::reduce_add(misfits) == 0.0f) {
    const reg floor_offset = V::set1(kShiftedExpFloor);
    axis_block_exp_pass<V, NB, Tail, false>(
        x, buf, axis_len, inner, n, shift, sum, comp, [&](int v, reg xv) {
          return vexp_shifted<V>(xv, shift[v], V::sub(shift[v], floor_offset));
        });
  } else {
    axis_block_exp_pass<V, NB, Tail, false>(
        x, buf, axis_len, inner, n, shift, sum, comp,
        [&](int v, reg xv) { return vexp_diff<V>(xv, shift[v]); });
  }
  // The sum as the pair sum - comp (divide_by_sum: its rounding adds no
  // error); 1 for an all -inf column's 0 (its weights stay 0).
  reg inv[NB], lo[NB];
#pragma GCC unroll 16
  for (int v = 0; v < NB; ++v) {
    lo[v] = V::sub(zero, comp[v]);
    sum[v] = V::lt_select(sum[v], V::set1(std::numeric_limits<float>::min()), one, sum[v]);
    inv[v] = V::div(one, sum[v]);
  }
  for (std::int64_t a = 0; a < axis_len; ++a)
#pragma GCC unroll 16
    for (int v = 0; v < NB; ++v) {
      const reg e = V::loadu(buf + (a * NB + v) * W);
      axis_store<V, Tail>(y + a * inner + v * W, n, divide_by_sum<V>(e, sum[v], lo[v], inv[v]));
    }
  alignas(64) float den[NB * W];
#pragma GCC unroll 16
  for (int v = 0; v < NB; ++v) V::storeu(den + v * W, sum[v]);
  axis_uniform_nan<V>(den, Tail ? n : NB * W, y, inner, 0, axis_len);
  return confirmed;
}

// Short axes: blocks of 8 vectors, then single vectors, then
// the last partial vector, each (outer, block) one work item.

template <class V>
void softmax_axis_short(std::int64_t outer, std::int64_t axis_len, std::int64_t inner,
                        const float *x, float *y, int threads) {
  constexpr int W = V::width, NB = 8;
  const std::int64_t wide = inner / (NB * W);
  const std::int64_t singles = (inner - wide * NB * W) / W;
  const std::int64_t whole = (wide * NB + singles) * W; // columns in whole vectors
  const std::int64_t blocks = wide + singles + (whole < inner ? 1 : 0);
  const std::int64_t items = outer * blocks;
  if (threads > items) threads = static_cast<int>(items);
  parallel_for_static(threads, threads, [&](std::int64_t t) {
    GuessGate gate(true); // x stays intact until the division, in place too
    alignas(64) float buf[kShortAxisMax * NB * W];
    for (std::int64_t ob = items * t / threads; ob < items * (t + 1) / threads; ++ob) {
      const std::int64_t o = ob / blocks, b = ob % blocks;
      const std::int64_t plane = o * axis_len * inner;
      const bool optimistic = gate.open();
      bool confirmed;
      if (b < wide) {
        const std::int64_t off = plane + b * NB * W;
        confirmed =
            softmax_axis_block<V, NB, false>(x + off, y + off, buf, axis_len, inner, W, optimistic);
      } else if (b < wide + singles) {
        const std::int64_t off = plane + wide * NB * W + (b - wide) * W;
        confirmed =
            softmax_axis_block<V, 1, false>(x + off, y + off, buf, axis_len, inner, W, optimistic);
      } else {
        confirmed = softmax_axis_block<V, 1, true>(x + plane + whole, y + plane + whole, buf,
                                                   axis_len, inner, inner - whole, optimistic);
      }
      gate.after(confirmed);
    }
  });
}

template <class V>
KernelStatus softmax_axis(std::int64_t outer, std::int64_t axis_len, std::int64_t inner,
                          const float *x, float *y, int threads, const SoftmaxTuning &tuning) {
  if (inner == 1) { // rows of a matrix
    softmax_rows<V>(outer, axis_len, x, axis_len, y, axis_len, false, threads, tuning);
    return KernelStatus::ok;
  }
  // A thread per 32768 elements at least (per-thread work of a few
  // microseconds below that; smaller planes ran slower on two threads than
  // on one, split by blocks, bands or columns: docs/tuning-softmax.md).
  const double elements = static_cast<double>(outer) * axis_len * inner;
  if (axis_len <= kShortAxisMax) {
    softmax_axis_short<V>(outer, axis_len, inner, x, y,
                          threads_for_work(threads, elements, 1 << 15));
    return KernelStatus::ok;
  }
  // Whole planes to each thread share no state, no barrier and no page:
  // there a thread pays from 2^13 elements on.
  const int plane_threads = threads_for_work(threads, elements, 1 << 13);
  threads = threads_for_work(threads, elements, 1 << 15);
  if (plane_threads > threads && outer % plane_threads == 0) threads = plane_threads;
  // Bands of rows (a function of the shape) and pieces of whole lines (16
  // floats, a multiple of every vector width, so that no two threads write
  // one line of y), at most kPieceMax wide.
  const AxisBands bands = axis_bands(axis_len);
  const std::int64_t lines = ceil_div(inner, 16);
  std::int64_t pieces = ceil_div(inner, kPieceMax);
  // Threads take whole planes where there are enough to go round evenly.
  // Otherwise, on a plane of 2^15 elements or more, the team goes through
  // its pieces one by one and shares out each one's bands (see
  // kMinBandRows): split by columns, narrow pieces ran slower on two
  // threads than on one (docs/tuning-softmax.md). Planes with fewer bands
  // than threads split columns: two pieces per thread where the lines allow
  // (each piece's rows then stay in L2).
  const bool planes_even = outer >= threads && (outer % threads == 0 || outer >= 4 * threads);
  const std::int64_t piece_width = inner < kPieceMax ? inner : kPieceMax;
  const bool by_band = threads > 1 && !planes_even && axis_len * piece_width >= (1 << 15) &&
                       (bands.count >= threads || bands.count > outer * pieces);
  if (threads > 1 && !by_band && !planes_even) {
    const std::int64_t want = (2 * threads + outer - 1) / outer;
    if (want > pieces) pieces = want < lines ? want : lines;
  }
  const std::int64_t piece_lines = ceil_div(lines, pieces);
  const std::int64_t width = piece_lines * 16;
  pieces = ceil_div(lines, piece_lines);
  const AxisStateLayout lay{width, width / V::width, bands.count};
  // One set of states per thread (or one for the team), each on pages of
  // its own.
  const std::int64_t stride = round_up(lay.set_floats(), 1024);
  const int sets = by_band ? 1 : threads;
  Scratch scratch(static_cast<std::size_t>(stride * sets + 1024));
  if (!scratch.data()) return KernelStatus::out_of_memory;
  // Exponentials that would not outlast the first pass in cache go to y
  // in streaming stores (whole vectors, which y's alignment and a multiple
  // of 16 columns keep aligned), one transfer of y fewer.
  const std::int64_t in_flight = by_band ? 1 : threads < outer * pieces ? threads : outer * pieces;
  // Out of place, pieces whose exponentials (axis_len x width floats, times
  // the pieces in flight) reach the table's threshold would be evicted
  // before the second pass reads them.
  const bool stream = tuning.stream_axis_min_bytes > 0 && x != y && inner % 16 == 0 &&
                      reinterpret_cast<std::uintptr_t>(y) % 64 == 0 &&
                      axis_len * width * 4 * in_flight >= tuning.stream_axis_min_bytes;
  const auto piece = [&](std::int64_t op, float *set, bool team) {
    const std::int64_t o = op / pieces, p = op % pieces;
    const std::int64_t off = o * axis_len * inner + p * width;
    const std::int64_t w = p + 1 < pieces ? width : inner - p * width;
    softmax_axis_piece<V>(x + off, y + off, axis_len, inner, w, lay, set, bands, team, stream);
  };
  if (by_band) {
#pragma omp parallel num_threads(threads)
    for (std::int64_t op = 0; op < outer * pieces; ++op) piece(op, scratch.data(), true);
  } else {
    parallel_for_static(threads, outer * pieces, [&](std::int64_t op) {
      piece(op, scratch.data() + stride * (threads > 1 ? omp_thread_id() : 0), false);
    });
  }
  return KernelStatus::ok;
}

} // namespace AK_ISA_NS
} // namespace attnkern
