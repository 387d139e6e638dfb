// The merge of a split row (decode: keys cut into fixed chunks, each an item
// of its own): the chunks' partials (m, l, acc) combined by log-sum-exp in
// chunk order, then the row's end as for an unsplit one.
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
  if (nan) m = std::numeric_limits<float>::quiet_NaN();
  const float shift = m == ninf ? 0.0f : m;
  float l = 0.0f;
  for (std::int64_t d = 0; d < a.dv; ++d) acc[d] = 0.0f;
  for (std::int64_t c = 0; c < p.n_chunks; ++c) {
    const float *pc = rowp + c * stride;
    if (pc[1] == 0.0f && pc[0] == ninf) continue; // chunk saw no key
    const float w = std::exp(pc[0] - shift);
    l += pc[1] * w;
    for (std::int64_t d = 0; d < a.dv; ++d) acc[d] += pc[2 + d] * w;
  }
  const std::int64_t heads_q = a.heads * a.q_len;
  const std::int64_t b = row / heads_q, h = (row / a.q_len) % a.heads, i = row % a.q_len;
  float *out = a.out + b * a.o_strides[0] + h * a.o_strides[1] + i * a.o_strides[2];
  bool finite;
  const float lse = finish_row<V>(m, l, acc, a.dv, out, &finite);
  if (std::isfinite(lse) && !finite) recompute_overflowed_entries(a, b, h, i, m, out);
  if (a.lse) a.lse[row] = lse;
  if (a.probs) finish_probs<V>(a.probs + row * a.kv_len, a.kv_len, lse, l);
}

} // namespace AK_ISA_NS
} // namespace attnkern
