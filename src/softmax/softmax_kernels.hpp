// Softmax, log-softmax and middle-axis softmax for one instruction set.
//
// Each row: m = max(x); e_j = exp(x_j - m); s = sum(e); y_j = e_j / s (or
// x_j - m - log s). Subtracting the maximum keeps every exp argument <= 0,
// so no finite input overflows. Special rows:
//   all -inf            -> m = -inf; softmax 0, log-softmax -inf (no NaN)
//   a NaN or a +inf     -> s (or m) is NaN, so the whole row is NaN
// The vector tail is computed in a -inf-padded register, so a row's last
// elements follow exactly the same arithmetic as the others.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "../simd.hpp"
#include "../threading.hpp"
#include "../vexp.hpp"

namespace ak {
namespace AK_ISA_NS {

template <class V> struct RowIo {
  using reg = typename V::reg;
  static constexpr int W = V::width;
  // Loads x[j..j+W), padding lanes past n with `pad`.
  static reg load_tail(const float *x, std::int64_t n, float pad) {
    alignas(64) float t[W];
    for (int i = 0; i < W; ++i) t[i] = i < n ? x[i] : pad;
    return V::loadu(t);
  }
  static void store_tail(float *y, std::int64_t n, reg v) {
    alignas(64) float t[W];
    V::storeu(t, v);
    for (std::int64_t i = 0; i < n; ++i) y[i] = t[i];
  }
};

// Rows that come from memory stream better when the next row is requested
// while this one is worked on in cache: its lines are prefetched (into L2)
// at the offsets the exp pass and again the last pass reach (one pass of
// requests measured about half the gain). Cold 4096 x 4096, A/B medians of
// 7: 1 thread 15.1 -> 17.2 GB/s, 2 threads 27.7 -> 29.8; in cache unchanged.
inline void prefetch_next_row(const float *next, std::int64_t j) {
  if (next && j % 16 == 0) __builtin_prefetch(next + j, 0, 1);
}

// Log-softmax writes y only in its last pass; the exp pass asks for y's
// lines for writing (into L1) as it goes, so that their fetch overlaps
// arithmetic instead of stalling the store-only last pass. Cold 4096 x 4096,
// A/B medians of 5: 1 thread 11.3 -> 15.3 GB/s, 2 threads 16.8 -> 20.6.
inline void prefetch_for_write(float *y, std::int64_t j) {
  if (y && j % 16 == 0) __builtin_prefetch(y + j, 1, 3);
}

// The row's maximum; a NaN entry may be passed over (the exp pass turns it
// into a NaN sum), so only -inf means "no number above -inf".
template <class V> float row_max(const float *x, std::int64_t n) {
  using reg = typename V::reg;
  constexpr int W = V::width;
  const float ninf = -std::numeric_limits<float>::infinity();
  reg m0 = V::set1(ninf), m1 = m0, m2 = m0, m3 = m0;
  std::int64_t j = 0;
  for (; j + 4 * W <= n; j += 4 * W) {
    m0 = V::max(m0, V::loadu(x + j));
    m1 = V::max(m1, V::loadu(x + j + W));
    m2 = V::max(m2, V::loadu(x + j + 2 * W));
    m3 = V::max(m3, V::loadu(x + j + 3 * W));
  }
  for (; j + W <= n; j += W) m0 = V::max(m0, V::loadu(x + j));
  if (j < n) m1 = V::max(m1, RowIo<V>::load_tail(x + j, n - j, ninf));
  return V::reduce_max(V::max(V::max(m0, m1), V::max(m2, m3)));
}

// sum_j exp(x_j - m); writes the exponentials to e unless e is null.
// Summation: short float partial sums (at most 8 terms per lane), folded per
// lane into a compensated (Kahan) running total every block, whose lanes are
// added in double once at the end. A plain float running sum over 32k terms
// loses ~1e-5 relative; this keeps the sum within a few ulp whatever the
// length, at four vector operations per block.
// next: the row to prefetch, or null; w: lines to prefetch for writing
// (prefetch_for_write), or null.
template <class V, class Exp>
float row_exp_sum_with(const float *x, std::int64_t n, float *e, float *w, const float *next,
                       const Exp &exp_of) {
  using reg = typename V::reg;
  constexpr int W = V::width;
  constexpr std::int64_t kBlock = 16 * W;
  reg total = V::zero(), comp = V::zero();
  std::int64_t j = 0;
  while (j < n) {
    const std::int64_t end = n - j > kBlock ? j + kBlock : n;
    reg s0 = V::zero(), s1 = s0;
    for (; j + 2 * W <= end; j += 2 * W) {
      prefetch_next_row(next, j);
      prefetch_next_row(next, j + W);
      prefetch_for_write(w, j);
      prefetch_for_write(w, j + W);
      const reg e0 = exp_of(V::loadu(x + j));
      const reg e1 = exp_of(V::loadu(x + j + W));
      if (e) {
        V::storeu(e + j, e0);
        V::storeu(e + j + W, e1);
      }
      s0 = V::add(s0, e0);
      s1 = V::add(s1, e1);
    }
    for (; j + W <= end; j += W) {
      const reg e0 = exp_of(V::loadu(x + j));
      if (e) V::storeu(e + j, e0);
      s0 = V::add(s0, e0);
    }
    if (j < end) {
      const float ninf = -std::numeric_limits<float>::infinity();
      const reg e0 = exp_of(RowIo<V>::load_tail(x + j, end - j, ninf));
      if (e) RowIo<V>::store_tail(e + j, end - j, e0);
      s1 = V::add(s1, e0);
      j = end;
    }
    const reg y = V::sub(V::add(s0, s1), comp);
    const reg t = V::add(total, y);
    comp = V::sub(V::sub(t, total), y);
    total = t;
  }
  return static_cast<float>(V::reduce_add_double(total) - V::reduce_add_double(comp));
}

// m: the row's maximum, finite or +inf/NaN (not -inf).
template <class V>
float row_exp_sum(const float *x, std::int64_t n, float m, float *e, float *w, const float *next) {
  using reg = typename V::reg;
  const reg vm = V::set1(m);
  if (std::fabs(m) <= kShiftedExpMaxShift) {
    const reg floor = V::set1(m - kShiftedExpFloor);
    return row_exp_sum_with<V>(x, n, e, w, next,
                               [&](reg v) { return vexp_shifted<V>(v, vm, floor); });
  }
  return row_exp_sum_with<V>(x, n, e, w, next, [&](reg v) { return vexp_diff<V>(v, vm); });
}

// e / s for a positive s, given inv = 1 / s rounded. With FMA: the product
// e * inv corrected by one Newton step on its exact remainder, which gives
// the correctly rounded quotient but for rare ties (the vector divider is
// several times slower on current x86 cores); without FMA: a division.
template <class V>
inline typename V::reg divide_by(typename V::reg e, typename V::reg s, typename V::reg inv) {
  if constexpr (V::has_fma) {
    const typename V::reg q = V::mul(e, inv);
    return V::fmadd(V::fmadd(q, V::sub(V::zero(), s), e), inv, q);
  } else {
    (void)inv;
    return V::div(e, s);
  }
}

// y = y / s (softmax) in place over n floats.
template <class V> void row_divide(float *y, std::int64_t n, float s, const float *next) {
  using reg = typename V::reg;
  constexpr int W = V::width;
  const reg vs = V::set1(s), vinv = V::set1(1.0f / s);
  std::int64_t j = 0;
  for (; j + W <= n; j += W) {
    prefetch_next_row(next, j);
    V::storeu(y + j, divide_by<V>(V::loadu(y + j), vs, vinv));
  }
  if (j < n)
    RowIo<V>::store_tail(y + j, n - j,
                         divide_by<V>(RowIo<V>::load_tail(y + j, n - j, 0.0f), vs, vinv));
}

// y = x - c over n floats (log-softmax's last pass).
template <class V>
void row_subtract(const float *x, float *y, std::int64_t n, float c, const float *next) {
  using reg = typename V::reg;
  constexpr int W = V::width;
  const reg vc = V::set1(c);
  std::int64_t j = 0;
  for (; j + W <= n; j += W) {
    prefetch_next_row(next, j);
    V::storeu(y + j, V::sub(V::loadu(x + j), vc));
  }
  for (; j < n; ++j) y[j] = x[j] - c;
}

// next: the row the thread takes up after this one (prefetched), or null.
template <class V>
void softmax_row(const float *x, float *y, std::int64_t n, bool log, const float *next) {
  const float ninf = -std::numeric_limits<float>::infinity();
  const float m = row_max<V>(x, n);
  if (m == ninf) { // no finite entry: every entry -inf, or NaN among -inf
    bool nan = false;
    for (std::int64_t j = 0; j < n; ++j) nan = nan || x[j] != x[j];
    // all -inf: weights 0, log-weights -inf; a NaN: all NaN
    const float fill = nan ? std::numeric_limits<float>::quiet_NaN() : log ? ninf : 0.0f;
    for (std::int64_t j = 0; j < n; ++j) y[j] = fill;
    return;
  }
  if (log) {
    const float s = row_exp_sum<V>(x, n, m, nullptr, y, next);
    // m + log(s) computed as one offset: x - (m + log s) rounds once per
    // element; s >= 1 since the maximum contributes exp(0).
    row_subtract<V>(x, y, n, m + std::log(s), next);
  } else {
    const float s = row_exp_sum<V>(x, n, m, y, nullptr, next);
    row_divide<V>(y, n, s, next);
  }
}

template <class V>
void softmax_rows(std::int64_t rows, std::int64_t cols, const float *x, std::int64_t ldx, float *y,
                  std::int64_t ldy, bool log, int threads) {
  // A thread per 4096 elements at least (a few microseconds of work each).
  threads = threads_for_work(threads, static_cast<double>(rows) * cols, 1 << 12);
  parallel_for_static(threads, rows, [&](std::int64_t r) {
    const float *next = r + 1 < rows ? x + (r + 1) * ldx : nullptr;
    softmax_row<V>(x + r * ldx, y + r * ldy, cols, log, next);
  });
}

// Middle-axis softmax: vectorized across `inner`, reducing along the axis
// (stride `inner`). The inner tail runs through the same code one lane wide.
template <class U, int NB>
void softmax_axis_block(const float *x, float *y, std::int64_t axis_len, std::int64_t inner) {
  using reg = typename U::reg;
  constexpr int W = U::width;
  const float ninf = -std::numeric_limits<float>::infinity();
  reg m[NB], shift[NB], s[NB], comp[NB];
  for (int v = 0; v < NB; ++v) m[v] = U::set1(ninf);
  for (std::int64_t a = 0; a < axis_len; ++a)
    for (int v = 0; v < NB; ++v) m[v] = U::max(m[v], U::loadu(x + a * inner + v * W));
  for (int v = 0; v < NB; ++v) {
    // An all -inf column: shift by 0 instead of -inf so that exp gives 0, not NaN.
    shift[v] = U::lt_select(m[v], U::set1(std::numeric_limits<float>::lowest()), U::zero(), m[v]);
    s[v] = U::zero();
    comp[v] = U::zero();
  }
  // vexp_shifted where every lane's maximum suits it (finite, not huge),
  // else vexp_diff with the shift above; decided per block of columns, so by
  // the shape and the data alone.
  reg floor[NB], misfits = U::zero(); // counts lanes with |m| > limit (inf too) or NaN
  const reg one = U::set1(1.0f), limit = U::set1(kShiftedExpMaxShift);
  for (int v = 0; v < NB; ++v) {
    const reg abs_m = U::max(m[v], U::sub(U::zero(), m[v]));
    misfits = U::add(misfits, U::lt_select(limit, abs_m, one, U::zero()));
    misfits = U::add(misfits, U::nan_select(m[v], one, U::zero()));
    floor[v] = U::sub(m[v], U::set1(kShiftedExpFloor));
  }
  const bool fits = U::reduce_add(misfits) == 0.0f;
  // Each lane is one column's sum: every term goes into a compensated
  // (Kahan) running total. Float partial sums of 8 terms first (as in the
  // row kernel, where the lanes' errors average out across a row) reached
  // 3.5e-7 relative error in a result over 10^8 random unit-scale elements,
  // partials of 2 terms 2.4e-7, this 2.1e-7, the row kernel's class (its
  // worst: exp's ulp and the division's rounding); it costs ~15 % here.
  const auto exp_pass = [&](const auto &exp_of) {
    for (std::int64_t a = 0; a < axis_len; ++a)
      for (int v = 0; v < NB; ++v) {
        const reg e = exp_of(v, U::loadu(x + a * inner + v * W));
        U::storeu(y + a * inner + v * W, e);
        const reg term = U::sub(e, comp[v]);
        const reg t = U::add(s[v], term);
        comp[v] = U::sub(U::sub(t, s[v]), term);
        s[v] = t;
      }
  };
  if (fits)
    exp_pass([&](int v, reg xv) { return vexp_shifted<U>(xv, m[v], floor[v]); });
  else
    exp_pass([&](int v, reg xv) { return vexp_diff<U>(xv, shift[v]); });
  // s == 0 only for an all -inf column, whose weights stay 0 (NaN s stays NaN).
  reg denom[NB], inv[NB];
  for (int v = 0; v < NB; ++v) {
    denom[v] = U::lt_select(s[v], U::set1(std::numeric_limits<float>::min()), one, s[v]);
    inv[v] = U::div(one, denom[v]);
  }
  for (std::int64_t a = 0; a < axis_len; ++a)
    for (int v = 0; v < NB; ++v)
      U::storeu(y + a * inner + v * W,
                divide_by<U>(U::loadu(y + a * inner + v * W), denom[v], inv[v]));
}

template <class V, int NB>
void softmax_axis_blocks(std::int64_t outer, std::int64_t axis_len, std::int64_t inner,
                         const float *x, float *y, int threads) {
  constexpr int W = V::width;
  const std::int64_t wide = inner / (NB * W);
  const std::int64_t single = (inner - wide * NB * W) / W;
  const std::int64_t vec_end = (wide * NB + single) * W;
  const std::int64_t blocks = wide + single + (vec_end < inner ? 1 : 0);
  // A thread per 32768 elements at least: 128 x 128 measured 1.6x slower on
  // two threads than on one (per-thread work of a few microseconds).
  threads = threads_for_work(threads, static_cast<double>(outer) * axis_len * inner, 1 << 15);
  parallel_for_static(threads, outer * blocks, [&](std::int64_t ob) {
    const std::int64_t o = ob / blocks, b = ob % blocks;
    const std::int64_t base = o * axis_len * inner;
    if (b < wide) {
      const std::int64_t off = base + b * NB * W;
      softmax_axis_block<V, NB>(x + off, y + off, axis_len, inner);
    } else if (b < wide + single) {
      const std::int64_t off = base + wide * NB * W + (b - wide) * W;
      softmax_axis_block<V, 1>(x + off, y + off, axis_len, inner);
    } else {
      for (std::int64_t i = base + vec_end; i < base + inner; ++i)
        softmax_axis_block<ScalarVec, 1>(x + i, y + i, axis_len, inner);
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
  // Columns in blocks of NB vectors (several cache lines of every row per
  // pass, instead of one), then single vectors, then one lane at a time.
  // Every kind of block does the same per-lane arithmetic; which exp it
  // uses depends on the maxima of the whole block (softmax_axis_block), and
  // NB on the shape alone, so results do not depend on the thread count.
  // 8-vector blocks read 512-byte row segments (1024 x 1024 and 16 x 32768
  // measured 15-25 % faster than with 4); narrow inner dimensions keep 4 so
  // that there are at least two blocks to share out.
  constexpr int W = V::width;
  if (inner >= 2 * 8 * W)
    softmax_axis_blocks<V, 8>(outer, axis_len, inner, x, y, threads);
  else
    softmax_axis_blocks<V, 4>(outer, axis_len, inner, x, y, threads);
}

} // namespace AK_ISA_NS
} // namespace ak
