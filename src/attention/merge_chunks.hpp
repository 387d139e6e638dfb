// The merge of a split row (decode: keys cut into fixed chunks, each an item
// of its own): the chunks' partials (m, l, acc) combined by log-sum-exp in
// chunk order, then the sink (once, as a chunk of weight 1 and value 0),
// then the row's end as for an unsplit one.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "../kernel_table.hpp"
#include "attention_plan.hpp"
#include "overflow_repair.hpp"
#include "row_state.hpp"

namespace attnkern {
namespace AK_ISA_NS {

// Merges the key chunks of every row in chunk order (log-sum-exp).
template <class V, class Cfg>
void merge_chunks(const AttentionArgs &a, const AttentionPlan<Cfg> &p, const float *partial,
                  float *acc, std::int64_t row) {
  const std::int64_t heads_q = a.heads * a.q_len;
  const std::int64_t b = row / heads_q, h = (row / a.q_len) % a.heads, i = row % a.q_len;
  if (i >= a.q_len_of(b)) return; // past its entry's packed sequence: no such row
  const std::int64_t stride = a.dv + 2;
  const float *rowp = partial + row * p.n_chunks * stride;
  const float ninf = -std::numeric_limits<float>::infinity();
  float m = ninf;
  bool nan = false;
  for (std::int64_t c = 0; c < p.n_chunks; ++c) {
    const float mc = rowp[c * stride];
    nan = nan || mc != mc;
    m = mc > m ? mc : m;
  }
  const float sink = a.sinks ? a.sinks[h] : ninf;
  nan = nan || sink != sink;
  m = sink > m ? sink : m;
  if (nan) m = std::numeric_limits<float>::quiet_NaN();
  const float shift = m == ninf ? 0.0f : m;
  float l = 0.0f;
  for (std::int64_t d = 0; d < a.dv; ++d) acc[d] = 0.0f;
  for (std::int64_t c = 0; c < p.n_chunks; ++c) {
    const float *pc = rowp + c * stride;
    if (pc[1] == 0.0f && pc[0] == ninf) continue; // chunk saw no key
    const float w = std::exp(pc[0] - shift);
    if (w == 0.0f) continue; // a chunk of weight 0 feeds nothing, Inf in its sums included
    l += pc[1] * w;
    for (std::int64_t d = 0; d < a.dv; ++d) acc[d] += pc[2 + d] * w;
  }
  // (A +inf sink is the maximum: weight 1, not exp(inf - inf).)
  if (sink > ninf) l += sink == m ? 1.0f : std::exp(sink - shift);
  if (m != m) { // a NaN sink: the row is NaN even where no key is visible
    l = m;
    for (std::int64_t d = 0; d < a.dv; ++d) acc[d] = m;
  }
  float *out = a.out_row(b, h, i);
  bool finite;
  const float lse = finish_row<V>(m, l, acc, a.dv, out, &finite);
  if (std::isfinite(lse) && !finite) recompute_overflowed_entries(a, b, h, i, m, out);
  if (a.lse) a.lse[a.lse_index(b, h, i)] = lse;
  if (a.probs) finish_probs<V>(a.probs + row * a.kv_len, a.kv_len, lse, l);
}

} // namespace AK_ISA_NS
} // namespace attnkern
