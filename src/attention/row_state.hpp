// The online-softmax state of a work item's rows (running max m, running
// sum l, unnormalised output accumulator), the probes for non-finite
// values, and the end of a row: out = acc / l, lse = m + log l, and the
// weights a caller asked for (probs).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "../simd.hpp"
#include "../vexp.hpp"

namespace attnkern {
namespace AK_ISA_NS {

// Per-row state of a work item, held in the thread's scratch.
struct RowState {
  float *m, *l, *acc;
};

// probe + sum of (x - x) over x[0, n) for n a multiple of the width: x - x
// is NaN exactly for inf and NaN, so the probe turns NaN once any is seen.
template <class V>
inline typename V::reg add_non_finite_probe(typename V::reg probe, const float *x, std::int64_t n) {
  for (std::int64_t j = 0; j < n; j += V::width) {
    const typename V::reg v = V::loadu(x + j);
    probe = V::add(probe, V::sub(v, v));
  }
  return probe;
}

template <class V> inline bool has_non_finite(const float *x, std::int64_t n) {
  const std::int64_t j = n / V::width * V::width;
  const typename V::reg probe = add_non_finite_probe<V>(V::zero(), x, j);
  float tail = 0.0f;
  for (std::int64_t i = j; i < n; ++i) tail += x[i] - x[i];
  const float s = V::reduce_add(probe) + tail;
  return s != s;
}

// out = acc / l; returns lse = m + log l (-inf and zeros when l == 0).
// A +inf or NaN score makes l (and so out) NaN, and lse NaN with it: one
// result for both, because a q.k whose products overflow often sums to
// +inf with FMA and to NaN (+inf + -inf) without, which differs between
// instruction sets. Only a +inf sink (l finite) gives lse = +inf.
// *finite: whether every entry of out is finite, judged on the quotients
// in registers (q - q is 0 for a finite q, NaN for Inf and NaN) rather than
// by reading out back right after the stores.
template <class V>
inline float finish_row(float m, float l, const float *acc, std::int64_t dv, float *out,
                        bool *finite) {
  using reg = typename V::reg;
  constexpr int W = V::width;
  *finite = true;
  if (l == 0.0f) {
    for (std::int64_t d = 0; d < dv; ++d) out[d] = 0.0f;
    return -std::numeric_limits<float>::infinity();
  }
  const reg vl = V::set1(l);
  reg probe = V::zero();
  std::int64_t d = 0;
  for (; d + W <= dv; d += W) {
    const reg q = V::div(V::loadu(acc + d), vl);
    V::storeu(out + d, q);
    probe = V::add(probe, V::sub(q, q));
  }
  bool tail_finite = true;
  for (; d < dv; ++d) {
    out[d] = acc[d] / l;
    tail_finite = tail_finite && std::isfinite(out[d]);
  }
  *finite = tail_finite && V::reduce_add(probe) == 0.0f;
  if (l != l) return l;
  return m == std::numeric_limits<float>::infinity() ? m : m + std::log(l);
}

// probs hold the masked scores (-inf where not visible): turn them into
// weights exp(s - lse).
template <class V> inline void finish_probs(float *pr, std::int64_t kv_len, float lse, float l) {
  using R = typename V::reg;
  constexpr int W = V::width;
  if (l == 0.0f) {
    for (std::int64_t j = 0; j < kv_len; ++j) pr[j] = 0.0f;
    return;
  }
  // A row with a +inf or NaN score has lse NaN (finish_row), so its weights
  // are NaN. A +inf sink alone (l finite, lse +inf) leaves every key 0.
  if (lse == std::numeric_limits<float>::infinity()) {
    for (std::int64_t j = 0; j < kv_len; ++j) pr[j] = 0.0f;
    return;
  }
  const R vl = V::set1(lse);
  std::int64_t j = 0;
  for (; j + W <= kv_len; j += W) V::storeu(pr + j, vexp<V>(V::sub(V::loadu(pr + j), vl)));
  for (; j < kv_len; ++j) pr[j] = std::exp(pr[j] - lse);
}

} // namespace AK_ISA_NS
} // namespace attnkern
