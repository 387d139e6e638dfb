// The repair of output rows whose fp32 accumulator overflowed although
// their log-sum-exp is finite: those entries are recomputed from the inputs
// in double.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "../gemm/gemm_common.hpp"
#include "../kernel_table.hpp"
#include "kv_staging.hpp"
#include "score_modifiers.hpp"
#include "visible_keys.hpp"

namespace attnkern {
namespace AK_ISA_NS {

// Outputs are weighted means of v's rows, so with finite inputs and finite
// scores every one is finite; but the unnormalised fp32 accumulator
// (weights up to 1, summed over the keys) passes FLT_MAX where v holds
// values near it (four equal keys of 1e38 gave +inf). Where a row came out
// with non-finite entries although its log-sum-exp is finite, this
// recomputes those entries from the inputs: scores as the kernel forms
// them (the dot product rounded to fp32, plus the bias in fp32), weights
// exp(s - max) against this function's own largest score (so that one key
// weighs 1 and no sum under- or overflows), summed in double, keys whose
// weight is 0 in fp32 left out. That also mends entries made NaN where an
// Inf in v, weighed in an earlier key block or chunk, met a rescaling
// factor that underflowed to 0 (Inf * 0) because the row's largest score
// came later, far above its key's: a key whose final weight is 0 feeds
// nothing.
//
// An entry whose column holds a non-finite v at a key the row weighs stays
// as the kernel made it: NaN or Inf in v reaches the entries it feeds.
// Whether a key weighs is judged against the kernel's row maximum `m_row`
// (as the kernel judged it), scoring only keys that hold such a value, each
// once per tile of columns: a row that weighs an Inf stops at its first
// such key. (Recomputed scores can differ from the kernel's where q . k
// cancels; the sums then skip the non-finite values judged dead rather
// than weigh them.) A mended row costs up to three passes over its keys'
// scores. Columns go in tiles of kTile: no allocation (it runs on a team).
// Rare by construction, and a function of the inputs alone (the same
// whatever the thread count).
inline void recompute_overflowed_entries(const AttentionArgs &a, std::int64_t b, std::int64_t h,
                                         std::int64_t i, float m_row, float *out) {
  const std::int64_t n = a.keys_of(b);
  const KeyRange keys = visible_keys(a, b, n, i);
  const std::int64_t kvh = h / (a.heads / a.kv_heads);
  const float *q = a.q_row(b, h, i);
  const float slope = a.alibi_slopes ? a.alibi_slopes[h] : 0.0f;
  const std::int64_t diag = a.diagonal(b, n, i);
  const float sink = a.sinks ? a.sinks[h] : -std::numeric_limits<float>::infinity();
  // K and V as stored (in place, half precision or paged), one value at a
  // time: this path is rare.
  const auto kv = [&](const KvLayout &t, std::int64_t j, std::int64_t d) {
    return kv_value(t, b, kvh, j, d);
  };
  const float *bias =
      a.bias ? a.bias + b * a.bias_strides[0] + h * a.bias_strides[1] + i * a.bias_strides[2]
             : nullptr;
  const float ninf = -std::numeric_limits<float>::infinity();
  const auto score = [&](std::int64_t j) {
    if (bias && bias[j] == ninf) return ninf;
    double part[4] = {}; // four chains: this runs up to three times per key
    std::int64_t d = 0;
    for (; d + 4 <= a.dk; d += 4)
      for (int x = 0; x < 4; ++x)
        part[x] += static_cast<double>(q[d + x] * a.scale) * kv(a.k_src, j, d + x);
    for (; d < a.dk; ++d) part[0] += static_cast<double>(q[d] * a.scale) * kv(a.k_src, j, d);
    float sj = static_cast<float>((part[0] + part[1]) + (part[2] + part[3]));
    if (a.softcap > 0.0f) softcap_scores<V>(&sj, 1, a.softcap); // as the kernel caps it
    if (bias) sj += bias[j];
    if (a.alibi_slopes) sj += slope * static_cast<float>(j - diag);
    return sj;
  };
  // The largest recomputed score, found when first needed; false where one
  // is NaN or +inf (the kernel's lse would not be finite then either).
  float m = ninf;
  int m_state = 0; // 0 not looked for yet, 1 found, -1 none to use
  const auto max_found = [&] {
    if (m_state == 0) {
      m_state = 1;
      for (std::int64_t j = keys.lo; j < keys.hi && m_state > 0; ++j) {
        const float sj = score(j);
        if (!(sj < std::numeric_limits<float>::infinity())) m_state = -1;
        m = sj > m ? sj : m;
      }
      if (m_state > 0 && sink > m) m = sink; // (a finite lse: the sink is finite)
      if (m == ninf) m_state = -1;
    }
    return m_state > 0;
  };
  constexpr int kTile = 256;
  for (std::int64_t d0 = 0; d0 < a.dv; d0 += kTile) {
    std::int64_t cols[kTile];
    bool poisoned[kTile] = {};
    int candidates = 0;
    for (std::int64_t d = d0; d < min64(d0 + kTile, a.dv); ++d)
      if (!std::isfinite(out[d])) cols[candidates++] = d;
    if (candidates == 0) continue;
    // Keys holding a non-finite v in a candidate column not yet poisoned:
    // each scored once; one that weighs poisons those columns.
    int clean = candidates;
    for (std::int64_t j = keys.lo; j < keys.hi && clean > 0; ++j) {
      const auto vj = [&](std::int64_t d) { return kv(a.v_src, j, d); };
      int c = 0;
      while (c < candidates && (poisoned[c] || std::isfinite(vj(cols[c])))) ++c;
      if (c == candidates) continue;
      if (static_cast<float>(std::exp(static_cast<double>(score(j) - m_row))) == 0.0f) continue;
      for (; c < candidates; ++c)
        if (!poisoned[c] && !std::isfinite(vj(cols[c]))) poisoned[c] = true, --clean;
    }
    int bad = 0;
    for (int c = 0; c < candidates; ++c)
      if (!poisoned[c]) cols[bad++] = cols[c];
    if (bad == 0) continue;
    if (!max_found()) return;
    double acc[kTile] = {};
    double l = sink > ninf ? std::exp(static_cast<double>(sink - m)) : 0.0;
    for (std::int64_t j = keys.lo; j < keys.hi; ++j) {
      const double w = std::exp(static_cast<double>(score(j) - m));
      if (static_cast<float>(w) == 0.0f) continue;
      l += w;
      for (int c = 0; c < bad; ++c) { // a non-finite value here sits at a key judged dead above
        const float vjc = kv(a.v_src, j, cols[c]);
        if (std::isfinite(vjc)) acc[c] += w * vjc;
      }
    }
    // A weighted mean of finite floats: within +-FLT_MAX but for rounding.
    const double most = std::numeric_limits<float>::max();
    for (int c = 0; c < bad; ++c) {
      const double mean = acc[c] / l;
      out[cols[c]] = static_cast<float>(mean > most ? most : mean < -most ? -most : mean);
    }
  }
}

} // namespace AK_ISA_NS
} // namespace attnkern
