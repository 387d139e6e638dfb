// Softmax along the middle axis of a contiguous [outer, axis, inner] tensor,
// for one instruction set: each (outer, inner) index is a column, one
// softmax over axis_len elements `inner` floats apart, vectorized across
// inner. Two schemes, chosen by the shape alone, with the same arithmetic
// per column (so the same bits from either):
//
// - long axes: the columns are cut into pieces of whole cache lines, at
//   most kPieceMax floats wide. Each piece makes three row-major passes (the
//   maximum, then the exponentials with their sums, then the division), each
//   pass reading row segments of up to 4 KiB, with the columns' maxima and
//   sums in small arrays in L1. Walking the piece down a few columns at a
//   time instead (a block of registers per pass) touches a new page every
//   512 bytes and, for power-of-two inner dimensions, a handful of cache
//   sets at every level: 1024 x 1024 measured 1.5 Gelem/s that way, 1.8
//   this way (1 thread).
// - short axes (softmax_axis_short below): just that walk, a block of 8
//   vectors of columns at a time with its state in registers, since a short
//   block stays in cache between its passes.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "softmax_kernels.hpp"

namespace ak {
namespace AK_ISA_NS {

constexpr std::int64_t kPieceMax = 1024; // floats: 4 KiB row segments, 12 KiB of state
// Rows requested ahead of each pass: the segments of a piece are a page
// apart or more, where the hardware prefetchers stop (2048 x 2048, 1
// thread: 0.9 -> 1.4 Gelem/s).
constexpr std::int64_t kRowsAhead = 8;

// One piece: columns [0, width) of an [axis_len, inner] plane. Every step is
// per lane, bar the choice of exp per vector (below), so a column's result
// depends on its own elements alone, never on the piece it falls in.
template <class V> struct AxisPiece {
  using reg = typename V::reg;
  static constexpr int W = V::width;
  static constexpr int R = 4; // rows per step of the first two passes

  const float *x;
  float *y;
  std::int64_t axis_len, inner, width;
  float *m, *s, *c; // per column: maximum (then shift), sum, compensation
  bool *shifted;    // per vector: every lane's shift suits vexp_shifted

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

  template <int Rows> void max_step(std::int64_t a) const {
    const float *xa = x + a * inner, *next = ahead(x, a, Rows);
    each_vector([&](auto tail, std::int64_t j, std::int64_t n) {
      constexpr bool T = decltype(tail)::value;
      prefetch_rows<0>(next, Rows, j);
      reg mx = V::loadu(m + j);
#pragma GCC unroll 4
      for (int k = 0; k < Rows; ++k) mx = V::max(mx, load<T>(xa + k * inner, j, n));
      V::storeu(m + j, mx);
    });
  }

  // Turns each column's maximum into its shift (0 for an all -inf column,
  // so that exp gives 0 there, not NaN) and picks each vector's exp:
  // vexp_shifted where every lane's shift is a number within its range,
  // else vexp_diff (a NaN or infinite maximum, or beyond +-65536). Both
  // give the same bits on a lane that suits vexp_shifted, so grouping
  // lanes into vectors changes no result.
  void choose_shifts() const {
    const float lowest = std::numeric_limits<float>::lowest();
    for (std::int64_t j = 0, v = 0; j < width; j += W, ++v) {
      bool fits = true;
      for (int i = 0; i < W; ++i) {
        if (m[j + i] < lowest) m[j + i] = 0.0f;
        fits = fits && std::fabs(m[j + i]) <= kShiftedExpMaxShift; // false for NaN
      }
      shifted[v] = fits;
    }
  }

  // Sums: every exponential goes into its column's compensated (Kahan)
  // running sum. Adding a step's R terms in float first measured errors up
  // to 2.2e-7 relative in a result (a 7-element column; DESIGN.md's bound is
  // 2e-7), for about 10 % less time.
  template <int Rows> void exp_step(std::int64_t a) const {
    const float *xa = x + a * inner, *x_next = ahead(x, a, Rows), *y_next = ahead(y, a, Rows);
    float *ya = y + a * inner;
    each_vector([&](auto tail, std::int64_t j, std::int64_t n) {
      constexpr bool T = decltype(tail)::value;
      prefetch_rows<0>(x_next, Rows, j);
      prefetch_rows<1>(y_next, Rows, j);
      // Every load before any store: x and y rows equal modulo 4 KiB (inner
      // a multiple of 1024 floats, two buffers aligned alike) made each
      // load wait on the previous row's store (16 x 4096 and 16 x 32768, 1
      // thread: 1.7-1.8 -> 2.0-2.1 Gelem/s with the loads first).
      reg e[Rows];
#pragma GCC unroll 4
      for (int k = 0; k < Rows; ++k) e[k] = load<T>(xa + k * inner, j, n);
      const reg shift = V::loadu(m + j);
      if (shifted[j / W]) {
        const reg floor = V::sub(shift, V::set1(kShiftedExpFloor));
#pragma GCC unroll 4
        for (int k = 0; k < Rows; ++k) e[k] = vexp_shifted<V>(e[k], shift, floor);
      } else {
#pragma GCC unroll 4
        for (int k = 0; k < Rows; ++k) e[k] = vexp_diff<V>(e[k], shift);
      }
#pragma GCC unroll 4
      for (int k = 0; k < Rows; ++k) store<T>(ya + k * inner, j, n, e[k]);
      reg sum = V::loadu(s + j), comp = V::loadu(c + j);
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

  void divide_row(std::int64_t a) const {
    float *ya = y + a * inner;
    const float *next = ahead(y, a, 1);
    each_vector([&](auto tail, std::int64_t j, std::int64_t n) {
      constexpr bool T = decltype(tail)::value;
      prefetch_rows<1>(next, 1, j);
      store<T>(ya, j, n, divide_by<V>(load<T>(ya, j, n), V::loadu(s + j), V::loadu(c + j)));
    });
  }

  void run() const {
    const std::int64_t padded = (width + W - 1) / W * W;
    for (std::int64_t j = 0; j < padded; ++j) {
      m[j] = -std::numeric_limits<float>::infinity();
      s[j] = 0.0f;
      c[j] = 0.0f;
    }
    // Groups of R rows, then single rows: fixed by axis_len alone.
    const std::int64_t grouped = axis_len / R * R;
    for (std::int64_t a = 0; a < grouped; a += R) max_step<R>(a);
    for (std::int64_t a = grouped; a < axis_len; ++a) max_step<1>(a);
    choose_shifts();
    for (std::int64_t a = 0; a < grouped; a += R) exp_step<R>(a);
    for (std::int64_t a = grouped; a < axis_len; ++a) exp_step<1>(a);
    finish_sums();
    for (std::int64_t a = 0; a < axis_len; ++a) divide_row(a);
  }
};

// Short axes: a block of NB vectors of columns at a time, its columns'
// maxima, sums and compensations in registers, three passes down its rows.
// The block (axis_len rows of NB * W floats, 128 KiB at most) stays in L2
// between the passes and no per-column state goes through memory, which
// the pieces above load and store at every step: 1 thread, Gelem/s, pieces
// -> blocks: 16 x 32768 1.87 -> 2.10, 32 x 16384 1.91 -> 2.12, 128 x 128
// 2.01 -> 2.30, 256 x 256 1.94 -> 2.29. From 512 rows on the pieces win
// (1024 x 1024: 2.02 against 1.75): a block's rows are a page apart or more
// and its passes go down them one 512-byte segment at a time.

// One block: NB vectors of columns from x and y; with Tail, NB = 1 and the
// vector holds only the first n < W columns (loads padded with -inf). The
// arithmetic per column is that of AxisPiece, step for step, so a column
// gets the same bits from either path.
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
#pragma GCC unroll 8
    for (int v = 0; v < NB; ++v) shift[v] = V::max(shift[v], load(x + a * inner + v * W));
  // As choose_shifts: an all -inf column shifts by 0; vexp_shifted only if
  // every lane of the block suits it (it and vexp_diff agree on such lanes).
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
#pragma GCC unroll 8
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
#pragma GCC unroll 8
    for (int v = 0; v < NB; ++v) {
      float *p = y + a * inner + v * W;
      store(p, divide_by<V>(load(p), sum[v], inv[v]));
    }
}

// Axes up to this long take the blocks. AVX2's blocks of 256-byte row
// segments lose to the pieces earlier: 1 thread, Gelem/s, pieces / blocks:
// 16 x 32768 1.17 / 1.24, 64 x 16384 1.18 / 1.12, 256 x 4096 1.25 / 1.09,
// 256 x 256 1.31 / 1.41.
template <class V> constexpr std::int64_t short_axis_max() { return V::width >= 16 ? 256 : 32; }

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
  // A thread per 32768 elements at least: 128 x 128 measured 1.6x slower on
  // two threads than on one (per-thread work of a few microseconds).
  threads = threads_for_work(threads, static_cast<double>(outer) * axis_len * inner, 1 << 15);
  if (axis_len <= short_axis_max<V>()) {
    softmax_axis_short<V>(outer, axis_len, inner, x, y, threads);
    return;
  }
  // Pieces of whole lines (16 floats, a multiple of every vector width, so
  // that no two threads write one line of y), at most kPieceMax wide; on
  // several threads, two per thread where the lines allow (1024 x 1024 on
  // 2 threads: 2.8-3.2 -> 3.2-3.5 Gelem/s against one per thread; each piece's
  // rows then stay in L2).
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
    alignas(64) float state[3][kPieceMax];
    bool shifted[kPieceMax];
    const std::int64_t o = op / pieces, p = op % pieces;
    const std::int64_t off = o * axis_len * inner + p * width;
    const std::int64_t w = p + 1 < pieces ? width : inner - p * width;
    AxisPiece<V>{x + off, y + off, axis_len, inner, w, state[0], state[1], state[2], shifted}.run();
  });
}

} // namespace AK_ISA_NS
} // namespace ak
