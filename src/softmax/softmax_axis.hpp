// Softmax along the middle axis of a contiguous [outer, axis, inner] tensor,
// for one instruction set: each (outer, inner) index is a column, one
// softmax over axis_len elements `inner` floats apart, vectorized across
// inner. Two schemes, chosen by the shape alone:
//
// - long axes (AxisPiece): the columns are cut into pieces of whole cache
//   lines, at most kPieceMax floats wide, and each piece makes two
//   row-major passes, reading row segments of up to 4 KiB with the columns'
//   state in small arrays in L1 (walking a piece down a few columns at a
//   time instead touches a new page every 512 bytes and, for power-of-two
//   inner dimensions, a handful of cache sets). The first pass sums the
//   exponentials against a running shift that only moves when a value
//   exceeds it by more than kGap, so it needs no maximum pass before it
//   (in place, a pass of loads and compares finds the final shifts first),
//   and keeps them in y; the second divides. Three passes (maximum, exponentials, division)
//   measured 1 thread, Gelem/s: 1024 x 1024 1.62 -> 1.83, 2048 x 2048
//   1.51 -> 1.96, 4096 x 4096 0.97 -> 1.16, 2048 x 256 1.68 -> 2.17.
// - short axes (softmax_axis_short below): a block of 8 vectors of columns
//   at a time with its state in registers, walked down the axis for each of
//   three passes (maximum, exponentials, division), since a short block
//   stays in cache between them.
//
// Each scheme's result for a column depends on that column's elements alone
// (never on its neighbours, the piece it falls in or the thread count); the
// two schemes shift by different amounts, so their bits differ.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "softmax_kernels.hpp"

namespace ak {
namespace AK_ISA_NS {

constexpr std::int64_t kPieceMax = 1024; // floats: 4 KiB row segments, 20 KiB of state
// Rows requested ahead of each pass: the segments of a piece are a page
// apart or more, where the hardware prefetchers stop (2048 x 2048, 1
// thread: 0.9 -> 1.4 Gelem/s).
constexpr std::int64_t kRowsAhead = 8;

// One piece: columns [0, width) of an [axis_len, inner] plane. Every step is
// per lane, bar the choice of exp per vector (see refresh_shifted), so a
// column's result depends on its own elements alone, never on the piece it
// falls in.
//
// Column j's result is y = exp(x - m[j]) / s[j], with m[j] its final shift
// and s[j] the compensated sum of the exponentials against the shift of
// their time. The first pass keeps the exponentials in y and the second
// divides them. Out of place, the second recomputes from x the rows that a
// later move of the shift made stale (redo); in place, x is gone by then,
// so a pass of loads and compares finds the final shifts first and the
// first pass stores those rows against them. Either way the same bits.
// (In place, recomputing every exponential in the second pass instead ran
// 1024 x 1024 at 1.3-1.6 Gelem/s against 1.8-2.0 this way, 1 thread.)
template <class V> struct AxisPiece {
  using reg = typename V::reg;
  static constexpr int W = V::width;
  static constexpr int R = 4; // rows per step

  const float *x;
  float *y;
  std::int64_t axis_len, inner, width;
  float *m, *s, *c;   // per column: shift, sum of exp(x - shift), its compensation
  float *limit;       // per column: a value above this moves the shift (-inf: none yet)
  bool *shifted;      // per vector: every lane's shift suits vexp_shifted
  std::int64_t *redo; // per vector: the exponentials kept in rows below this are stale
  // In place only: the final shifts and their exp choice, found by a first
  // pass, and per vector the step of its last move.
  float *fm;
  bool *fshifted;
  std::int64_t *last;

  // Vector j of a row: whole (Tail false), or the piece's last, n < W lanes
  // wide, padded with -inf on loads.
  template <bool Tail> static reg load(const float *p, std::int64_t j, std::int64_t n) {
    if constexpr (Tail)
      return RowIo<V>::load_tail(p + j, n, -std::numeric_limits<float>::infinity());
    else
      return V::loadu(p + j);
  }
  template <bool Tail> static void store(float *p, std::int64_t j, std::int64_t n, reg v) {
    if constexpr (Tail)
      RowIo<V>::store_tail(p + j, n, v);
    else
      V::storeu(p + j, v);
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
  // Row a + kRowsAhead of p, or null near the end.
  const float *ahead(const float *p, std::int64_t a, int rows) const {
    return a + kRowsAhead + rows <= axis_len ? p + (a + kRowsAhead) * inner : nullptr;
  }

  // A column's shift moves only to a value more than kGap above it, so
  // every exponential stays below e^32 (e^64 for shifts of 2^29 and more,
  // where shift + 32 may round up to shift + 64; a sum of any length stays
  // finite either way) and a column whose values lie within 32 of each
  // other sets its shift once, at its first step. A later move multiplies
  // the sum so far by exp(old - new): one more rounding, on a part of the
  // sum made of terms at most 1, beside the new largest term, exactly 1.
  static constexpr float kGap = 32.0f;

  // shifted[v] from the shifts of vector v: every lane within vexp_shifted's
  // range (else vexp_diff; both give the same bits where both apply).
  void refresh_shifted(std::int64_t j) const {
    bool fits = true;
    for (int i = 0; i < W; ++i) fits = fits && std::fabs(m[j + i]) <= kShiftedExpMaxShift;
    shifted[j / W] = fits;
  }

  // s -> the denominator (1 where s is 0: an all -inf column, whose weights
  // stay 0; NaN stays NaN), c -> its reciprocal.
  void finish_sums() const {
    const reg one = V::set1(1.0f), tiny = V::set1(std::numeric_limits<float>::min());
    for (std::int64_t j = 0; j < width; j += W) {
      const reg sum = V::loadu(s + j);
      const reg d = V::lt_select(sum, tiny, one, sum);
      V::storeu(s + j, d);
      V::storeu(c + j, V::div(one, d));
    }
  }

  // Exponentials of Rows row vectors against a shift, with the vector's exp.
  template <int Rows> void exps(reg (&e)[Rows], reg shift, bool use_shifted) const {
    if (use_shifted) {
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
    const reg lim = V::loadu(limit + j);
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
    V::storeu(m + j, shift);
    V::storeu(limit + j, V::lt_select(lim, top, V::add(raised, V::set1(kGap)), lim));
    refresh_shifted(j);
    redo[j / W] = a;
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

  // In place only, rows [a, a + Rows): the shift moves alone, no sums, so
  // that the first pass knows each column's final shift before it
  // overwrites x.
  template <int Rows> void shift_step(std::int64_t a) const {
    const float *xa = x + a * inner, *next = ahead(x, a, Rows);
    each_vector([&](auto tail, std::int64_t j, std::int64_t n) {
      prefetch_rows<0>(next, Rows, j);
      reg e[Rows];
      const reg top = load_rows<Rows, decltype(tail)::value>(e, xa, j, n);
      reg shift = V::loadu(m + j), sum = V::zero(), comp = V::zero();
      move_shifts(j, a, top, shift, sum, comp);
    });
  }

  // First pass, rows [a, a + Rows): move the shifts these rows need, then
  // add their exponentials to each column's compensated (Kahan) sum, every
  // term on its own (float partials of 4 measured 2.2e-7 relative errors;
  // DESIGN.md's bound is 2e-7), and keep them in y. In place (Final), rows
  // before a vector's last move store the exponentials against the final
  // shifts (fm, fshifted, last) instead, since x will not be there to
  // recompute them.
  template <int Rows, bool Final> void stats_step(std::int64_t a) const {
    const float *xa = x + a * inner, *next = ahead(x, a, Rows);
    const float *y_next = Final ? nullptr : ahead(y, a, Rows);
    float *ya = y + a * inner;
    each_vector([&](auto tail, std::int64_t j, std::int64_t n) {
      constexpr bool T = decltype(tail)::value;
      prefetch_rows<0>(next, Rows, j);
      prefetch_rows<1>(y_next, Rows, j);
      reg e[Rows];
      const reg top = load_rows<Rows, T>(e, xa, j, n);
      reg shift = V::loadu(m + j), sum = V::loadu(s + j), comp = V::loadu(c + j);
      move_shifts(j, a, top, shift, sum, comp);
      if (Final && a < last[j / W]) {
        reg f[Rows];
#pragma GCC unroll 4
        for (int k = 0; k < Rows; ++k) f[k] = e[k];
        exps<Rows>(f, V::loadu(fm + j), fshifted[j / W]);
#pragma GCC unroll 4
        for (int k = 0; k < Rows; ++k) store<T>(ya + k * inner, j, n, f[k]);
        exps<Rows>(e, shift, shifted[j / W]);
      } else {
        exps<Rows>(e, shift, shifted[j / W]);
#pragma GCC unroll 4
        for (int k = 0; k < Rows; ++k) store<T>(ya + k * inner, j, n, e[k]);
      }
#pragma GCC unroll 4
      for (int k = 0; k < Rows; ++k) {
        const reg term = V::sub(e[k], comp), t = V::add(sum, term);
        comp = V::sub(V::sub(t, sum), term);
        sum = t;
      }
      V::storeu(s + j, sum);
      V::storeu(c + j, comp);
    });
  }

  // Second pass, rows [a, a + Rows): y = exp(x - shift) / sum, the
  // exponential kept in y unless a later move made it stale.
  template <int Rows> void output_step(std::int64_t a) const {
    const float *xa = x + a * inner;
    float *ya = y + a * inner;
    const float *next = ahead(y, a, Rows);
    each_vector([&](auto tail, std::int64_t j, std::int64_t n) {
      constexpr bool T = decltype(tail)::value;
      prefetch_rows<1>(next, Rows, j);
      reg e[Rows];
      if (a >= redo[j / W]) {
#pragma GCC unroll 4
        for (int k = 0; k < Rows; ++k) e[k] = load<T>(ya + k * inner, j, n);
      } else {
        load_rows<Rows, T>(e, xa, j, n);
        exps<Rows>(e, V::loadu(m + j), shifted[j / W]);
      }
      const reg d = V::loadu(s + j), inv = V::loadu(c + j);
#pragma GCC unroll 4
      for (int k = 0; k < Rows; ++k) store<T>(ya + k * inner, j, n, divide_by<V>(e[k], d, inv));
    });
  }

  void reset() const {
    const std::int64_t padded = (width + W - 1) / W * W;
    for (std::int64_t j = 0; j < padded; ++j) {
      m[j] = 0.0f;
      limit[j] = -std::numeric_limits<float>::infinity();
      s[j] = 0.0f;
      c[j] = 0.0f;
    }
    for (std::int64_t v = 0; v < padded / W; ++v) {
      shifted[v] = true;
      redo[v] = 0;
    }
  }

  // Steps of R rows, then single rows: fixed by axis_len alone, the same in
  // every pass.
  template <class Step> void each_step(const Step &step) const {
    const std::int64_t grouped = axis_len / R * R;
    for (std::int64_t a = 0; a < grouped; a += R) step(std::integral_constant<int, R>{}, a);
    for (std::int64_t a = grouped; a < axis_len; ++a) step(std::integral_constant<int, 1>{}, a);
  }

  void run() const {
    const bool in_place = x == y;
    if (in_place) { // the final shifts first (a pass of loads and compares)
      reset();
      each_step([&](auto rows, std::int64_t a) { shift_step<decltype(rows)::value>(a); });
      const std::int64_t padded = (width + W - 1) / W * W;
      for (std::int64_t j = 0; j < padded; ++j) fm[j] = m[j];
      for (std::int64_t v = 0; v < padded / W; ++v) {
        fshifted[v] = shifted[v];
        last[v] = redo[v];
      }
    }
    reset();
    if (in_place)
      each_step([&](auto rows, std::int64_t a) { stats_step<decltype(rows)::value, true>(a); });
    else
      each_step([&](auto rows, std::int64_t a) { stats_step<decltype(rows)::value, false>(a); });
    finish_sums();
    if (in_place) // every kept exponential is against the final shift
      for (std::int64_t v = 0; v < (width + W - 1) / W; ++v) redo[v] = 0;
    each_step([&](auto rows, std::int64_t a) { output_step<decltype(rows)::value>(a); });
  }
};

// Short axes: a block of NB vectors of columns at a time, its columns'
// maxima, sums and compensations in registers, three passes down its rows.
// The block (axis_len rows of NB * W floats, 16 KiB at most) stays in L1
// between the passes and no per-column state goes through memory, which
// the pieces above load and store at every step (see kShortAxisMax).

// One block: NB vectors of columns from x and y; with Tail, NB = 1 and the
// vector holds only the first n < W columns (loads padded with -inf). A
// column is shifted by its maximum, per lane, so its bits are its own.
template <class V, int NB, bool Tail>
void softmax_axis_block(const float *x, float *y, std::int64_t axis_len, std::int64_t inner,
                        std::int64_t n) {
  static_assert(!Tail || NB == 1, "a tail is a single vector");
  using reg = typename V::reg;
  constexpr int W = V::width;
  const float ninf = -std::numeric_limits<float>::infinity();
  const auto load = [&](const float *p) {
    if constexpr (Tail)
      return RowIo<V>::load_tail(p, n, ninf);
    else
      return V::loadu(p);
  };
  const auto store = [&](float *p, reg v) {
    if constexpr (Tail)
      RowIo<V>::store_tail(p, n, v);
    else
      V::storeu(p, v);
  };

  reg shift[NB], sum[NB], comp[NB];
  for (int v = 0; v < NB; ++v) shift[v] = V::set1(ninf);
  for (std::int64_t a = 0; a < axis_len; ++a)
#pragma GCC unroll 4
    for (int v = 0; v < NB; ++v) shift[v] = V::max(shift[v], load(x + a * inner + v * W));
  // An all -inf column shifts by 0 (exp then gives 0, not NaN); vexp_shifted
  // only if every lane of the block suits it (it and vexp_diff agree on
  // such lanes).
  const reg zero = V::zero(), one = V::set1(1.0f);
  const reg lowest = V::set1(std::numeric_limits<float>::lowest());
  const reg limit = V::set1(kShiftedExpMaxShift);
  reg misfits = zero; // lanes with |shift| > limit (inf too) or NaN
  for (int v = 0; v < NB; ++v) {
    shift[v] = V::lt_select(shift[v], lowest, zero, shift[v]);
    const reg abs_shift = V::max(shift[v], V::sub(zero, shift[v]));
    misfits = V::add(misfits, V::lt_select(limit, abs_shift, one, zero));
    misfits = V::add(misfits, V::nan_select(shift[v], one, zero));
    sum[v] = zero;
    comp[v] = zero;
  }
  const auto exp_pass = [&](const auto &exp_of) {
    for (std::int64_t a = 0; a < axis_len; ++a)
#pragma GCC unroll 4
      for (int v = 0; v < NB; ++v) {
        const reg e = exp_of(v, load(x + a * inner + v * W));
        store(y + a * inner + v * W, e);
        const reg term = V::sub(e, comp[v]), t = V::add(sum[v], term);
        comp[v] = V::sub(V::sub(t, sum[v]), term);
        sum[v] = t;
      }
  };
  if (V::reduce_add(misfits) == 0.0f) {
    const reg floor_offset = V::set1(kShiftedExpFloor);
    exp_pass([&](int v, reg xv) {
      return vexp_shifted<V>(xv, shift[v], V::sub(shift[v], floor_offset));
    });
  } else {
    exp_pass([&](int v, reg xv) { return vexp_diff<V>(xv, shift[v]); });
  }
  // As finish_sums: 1 for an all -inf column's 0 (its weights stay 0).
  reg inv[NB];
  for (int v = 0; v < NB; ++v) {
    sum[v] = V::lt_select(sum[v], V::set1(std::numeric_limits<float>::min()), one, sum[v]);
    inv[v] = V::div(one, sum[v]);
  }
  for (std::int64_t a = 0; a < axis_len; ++a)
#pragma GCC unroll 4
    for (int v = 0; v < NB; ++v) {
      float *p = y + a * inner + v * W;
      store(p, divide_by<V>(load(p), sum[v], inv[v]));
    }
}

// Axes up to this long take the blocks; longer ones, the pieces, whose two
// passes win from about there on. 1 thread, Gelem/s, blocks / pieces:
// - AVX-512: 8 x 32768 1.64 / 1.51, 16 x 32768 1.67 / 1.64, 32 x 8192
//   1.77 / 1.77, 64 x 16384 1.53 / 1.68, 128 x 128 1.73 / 1.81, 256 x 256
//   1.81 / 1.93, 256 x 4096 1.74 / 1.96;
// - AVX2: 4 x 8192 0.88 / 0.63, 32 x 8192 0.95 / 0.89, 128 x 128
//   1.03 / 0.98, 256 x 256 0.97 / 1.07.
constexpr std::int64_t kShortAxisMax = 32;

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
  parallel_for_static(threads, outer * blocks, [&](std::int64_t ob) {
    const std::int64_t o = ob / blocks, b = ob % blocks;
    const std::int64_t plane = o * axis_len * inner;
    if (b < wide) {
      const std::int64_t off = plane + b * NB * W;
      softmax_axis_block<V, NB, false>(x + off, y + off, axis_len, inner, W);
    } else if (b < wide + singles) {
      const std::int64_t off = plane + wide * NB * W + (b - wide) * W;
      softmax_axis_block<V, 1, false>(x + off, y + off, axis_len, inner, W);
    } else {
      softmax_axis_block<V, 1, true>(x + plane + whole, y + plane + whole, axis_len, inner,
                                     inner - whole);
    }
  });
}

template <class V>
void softmax_axis(std::int64_t outer, std::int64_t axis_len, std::int64_t inner, const float *x,
                  float *y, int threads) {
  if (inner == 1) { // rows of a matrix
    softmax_rows<V>(outer, axis_len, x, axis_len, y, axis_len, false, threads);
    return;
  }
  // A thread per 32768 elements at least (per-thread work of a few
  // microseconds below that). With the blocks, 128 x 128 ran 1.6x slower on
  // two threads than on one; with the pieces it takes now, a threshold of
  // 8192 made it bimodal on two (1.5-2.8 Gelem/s against 1.9 on one) and
  // 64 x 512 slower (2.0 -> 0.7-1.5).
  threads = threads_for_work(threads, static_cast<double>(outer) * axis_len * inner, 1 << 15);
  if (axis_len <= kShortAxisMax) {
    softmax_axis_short<V>(outer, axis_len, inner, x, y, threads);
    return;
  }
  // Pieces of whole lines (16 floats, a multiple of every vector width, so
  // that no two threads write one line of y), at most kPieceMax wide; on
  // several threads, two per thread where the lines allow (1024 x 1024 on
  // 2 threads, measured with the three-pass pieces before aa81bbe: 2.8-3.2
  // -> 3.2-3.5 Gelem/s against one per thread; each piece's rows then stay
  // in L2).
  const std::int64_t lines = (inner + 15) / 16;
  std::int64_t pieces = (inner + kPieceMax - 1) / kPieceMax;
  if (threads > 1) {
    const std::int64_t want = (2 * threads + outer - 1) / outer;
    if (want > pieces) pieces = want < lines ? want : lines;
  }
  const std::int64_t piece_lines = (lines + pieces - 1) / pieces;
  const std::int64_t width = piece_lines * 16;
  pieces = (lines + piece_lines - 1) / piece_lines;
  parallel_for_static(threads, outer * pieces, [&](std::int64_t op) {
    alignas(64) float state[5][kPieceMax];
    constexpr std::int64_t vectors = kPieceMax / V::width;
    bool shifted[2][vectors];
    std::int64_t steps[2][vectors];
    const std::int64_t o = op / pieces, p = op % pieces;
    const std::int64_t off = o * axis_len * inner + p * width;
    const std::int64_t w = p + 1 < pieces ? width : inner - p * width;
    AxisPiece<V>{x + off,  y + off,  axis_len,   inner,    w,        state[0],   state[1],
                 state[2], state[3], shifted[0], steps[0], state[4], shifted[1], steps[1]}
        .run();
  });
}

} // namespace AK_ISA_NS
} // namespace ak
