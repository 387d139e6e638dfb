// Softmax along short axes (up to kShortAxisMax), for one instruction set:
// the blocks scheme of softmax_axis (see softmax_axis.hpp for the layout
// and what both schemes guarantee).
#pragma once

#include <cstdint>
#include <limits>

#include "../simd.hpp"
#include "../threading.hpp"
#include "../vexp.hpp"
#include "softmax_axis_common.hpp"
#include "softmax_guess_gate.hpp"
#include "softmax_row_normalize.hpp"

namespace attnkern {
namespace AK_ISA_NS {

// Short axes: a block of NB vectors of columns at a time, its columns'
// maxima, sums and compensations in registers, three passes down its rows.
// The block (axis_len rows of NB * W floats, 16 KiB at most) stays in L1
// between the passes and no per-column state goes through memory, which
// the pieces of the long axes load and store at every step (see
// kShortAxisMax). The exponentials wait in a contiguous buffer of the
// thread's, and y is written once, by the division: kept in y, a block's
// rows, inner floats apart (128 KiB for 16 x 32768), fell into the same few
// L1 sets, more lines of x and y than the sets have ways, and y was written
// twice (docs/tuning.md).

// A block's exponential pass: exponentials into buf (rows of NB * W
// floats) and their compensated (Kahan) sums, from x and the column's
// index; the maxima come along with FindMax. Its state arrays stay in
// registers only where this is inlined and every loop over them unrolled:
// kept in a lambda and unrolled by 4, they lived on the stack, a load and a
// store each per element (docs/tuning.md).
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
  // saves the pass of loads and compares over x (docs/tuning.md).
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

} // namespace AK_ISA_NS
} // namespace attnkern
