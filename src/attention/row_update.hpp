// A work item's per-row steps: the online-softmax update after each block
// of scores (mask, bias, running max and sum, rescaled accumulator), the
// exact P V for blocks with non-finite values in V, and the end of the
// item's rows (out, lse and probs, or the partials of a split chunk).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "../gemm/gemm_common.hpp"
#include "../simd.hpp"
#include "../vexp.hpp"
#include "attention_item.hpp"
#include "overflow_repair.hpp"
#include "row_state.hpp"
#include "score_modifiers.hpp"

namespace attnkern {
namespace AK_ISA_NS {

// Masks row r's scores for keys [j0, j0 + bk), applies the softcap, the bias
// and ALiBi (modify_scores), updates the running max and sum, rescales the
// accumulator, and leaves the weights exp(s - m) in the score row.
template <class V, class Cfg>
inline void AttentionItem<V, Cfg>::softmax_update(std::int64_t r, std::int64_t j0,
                                                  std::int64_t bk) {
  const float ninf = -std::numeric_limits<float>::infinity();
  float *s = scores_ + r * sld_;
  const std::int64_t iq = r % nq_;
  const std::int64_t a = min64(max64(lo_[iq] - j0, 0), bk);
  const std::int64_t e = max64(min64(hi_[iq] - j0, bk), a);
  for (std::int64_t j = 0; j < a; ++j) s[j] = ninf;
  for (std::int64_t j = e; j < bk; ++j) s[j] = ninf;
  if (e > a) modify_scores(r, j0, a, e);
  if (a_.probs) {
    float *pr = probs_row(r) + j0;
    for (std::int64_t j = a; j < e; ++j) pr[j] = s[j];
  }
  // Block max over the visible keys; a NaN anywhere makes the row NaN
  // (flagged per lane, as max alone may drop it).
  float m_blk = ninf;
  bool nan = false;
  {
    reg vmax = V::set1(ninf), probe = V::zero();
    const reg one = V::set1(1.0f);
    std::int64_t j = a;
    for (; j + W <= e; j += W) {
      const reg x = V::loadu(s + j);
      vmax = V::max(vmax, x);
      probe = V::nan_select(x, one, probe);
    }
    for (; j < e; ++j) {
      m_blk = s[j] > m_blk ? s[j] : m_blk;
      nan = nan || s[j] != s[j];
    }
    const float vm = V::reduce_max(vmax);
    m_blk = vm > m_blk ? vm : m_blk;
    nan = nan || vm != vm || V::any_lt(V::zero(), probe); // a lane that saw a NaN
  }
  const float m_old = st_.m[r];
  float m_new = m_blk > m_old ? m_blk : m_old;
  if (nan || m_old != m_old) m_new = std::numeric_limits<float>::quiet_NaN();
  // All masked so far: shift by 0 so that exp(-inf - shift) is 0, not NaN.
  const float shift = m_new == ninf ? 0.0f : m_new;
  const reg vshift = V::set1(shift);
  reg sum = V::zero();
  // Only the vectors that hold visible keys take exp; the others hold
  // -inf alone, whose weight is 0 (a causal diagonal block's rows see
  // half of it on average).
  // A block's last keys short of a vector take it whole: the row has room
  // up to a multiple of the width (sld_), and -inf there weighs 0 (a
  // scalar std::exp per remaining key costs as much as the block's vectors).
  const std::int64_t bk_vec = (bk + W - 1) / W * W;
  for (std::int64_t j = bk; j < bk_vec; ++j) s[j] = ninf;
  const std::int64_t x0 = min64(a / W * W, bk_vec), x1 = min64((e + W - 1) / W * W, bk_vec);
  std::int64_t j = 0;
  for (; j < x0; j += W) V::storeu(s + j, V::zero());
  for (; j < x1; j += W) {
    const reg pj = vexp<V>(V::sub(V::loadu(s + j), vshift));
    V::storeu(s + j, pj);
    sum = V::add(sum, pj);
  }
  for (; j < bk_vec; j += W) V::storeu(s + j, V::zero());
  // A row's first keys (m_old = -inf, so far weight 0 everywhere): corr is
  // exp(-inf) = 0, and l and the accumulator hold zeros (+0: every weight
  // was exactly 0, and a non-finite v never entered, exact_pv), which a
  // factor of 0 leaves as they are. A NaN row still takes exp(NaN).
  const bool first = m_old == ninf && m_new == m_new;
  const float corr = m_old == m_new ? 1.0f : first ? 0.0f : std::exp(m_old - shift);
  st_.l[r] = st_.l[r] * corr + V::reduce_add(sum);
  st_.m[r] = m_new;
  if (corr != 1.0f && !first) {
    float *acc = st_.acc + r * p_.dv_pad;
    const reg vc = V::set1(corr);
    for (std::int64_t d = 0; d < p_.dv_pad; d += W)
      V::storeu(acc + d, V::mul(V::loadu(acc + d), vc));
  }
}

// Row r's visible scores s[a, e) of the block at key j0, in the order of
// attnkern.h: softcap, then + bias + ALiBi.
template <class V, class Cfg>
inline void AttentionItem<V, Cfg>::modify_scores(std::int64_t r, std::int64_t j0, std::int64_t a,
                                                 std::int64_t e) {
  float *s = scores_ + r * sld_;
  if (a_.softcap > 0.0f) softcap_scores<V>(s + a, e - a, a_.softcap);
  if (!a_.bias && !a_.alibi_slopes) return;
  const float *bias = a_.bias
                          ? a_.bias + b_ * a_.bias_strides[0] + head_of(r) * a_.bias_strides[1] +
                                query_of(r) * a_.bias_strides[2] + j0 + a
                          : nullptr;
  const float slope = a_.alibi_slopes ? a_.alibi_slopes[head_of(r)] : 0.0f;
  add_bias_alibi<V>(s + a, e - a, bias, a_.alibi_slopes != nullptr, slope,
                    j0 + a - a_.diagonal(b_, n_, query_of(r)));
}

// Row r's state before its first key with a sink logit: that of a row that
// has weighed one key, of weight exp(sink - sink) = 1 and value 0. A -inf
// sink weighs nothing; a NaN one makes the row NaN (its accumulator too, so
// that out is NaN even where no key is visible).
template <class V, class Cfg>
inline void AttentionItem<V, Cfg>::start_with_sink(std::int64_t r, float sink) {
  if (sink == -std::numeric_limits<float>::infinity()) return;
  st_.m[r] = sink;
  st_.l[r] = 1.0f;
  if (sink != sink) {
    st_.l[r] = sink;
    for (std::int64_t d = 0; d < p_.dv_pad; ++d) st_.acc[r * p_.dv_pad + d] = sink;
  }
}

// acc_r += sum over weighed keys j of w_rj v_j, skipping zero weights.
template <class V, class Cfg> inline void AttentionItem<V, Cfg>::exact_pv(std::int64_t bk) {
  for (std::int64_t r = 0; r < rows_; ++r) {
    if (!direct_ && !tile_active(r / MR)) continue; // scores never formed
    const float *w = sbase_ + r * sld_;
    float *acc = st_.acc + r * p_.dv_pad;
    for (std::int64_t j = 0; j < bk; ++j) {
      if (w[j] == 0.0f) continue;
      const float *vrow = vblk_ + j * vs_; // (located by the caller, from j0)
      const reg vw = V::set1(w[j]);
      std::int64_t d = 0;
      for (; d + W <= a_.dv; d += W)
        V::storeu(acc + d, V::fmadd(vw, V::loadu(vrow + d), V::loadu(acc + d)));
      for (; d < a_.dv; ++d) acc[d] += w[j] * vrow[d];
    }
  }
}

template <class V, class Cfg> inline void AttentionItem<V, Cfg>::finish_rows() {
  for (std::int64_t r = 0; r < rows_; ++r) {
    float *out = a_.out_row(b_, head_of(r), query_of(r));
    bool finite;
    const float lse =
        finish_row<V>(st_.m[r], st_.l[r], st_.acc + r * p_.dv_pad, a_.dv, out, &finite);
    if (std::isfinite(lse) && !finite)
      recompute_overflowed_entries(a_, b_, head_of(r), query_of(r), st_.m[r], out);
    if (a_.lse) a_.lse[a_.lse_index(b_, head_of(r), query_of(r))] = lse;
    if (a_.probs) finish_probs<V>(probs_row(r), a_.kv_len, lse, st_.l[r]);
  }
}

template <class V, class Cfg>
inline void AttentionItem<V, Cfg>::write_partials(float *partial) const {
  const std::int64_t stride = a_.dv + 2;
  for (std::int64_t r = 0; r < rows_; ++r) {
    const std::int64_t row = (b_ * a_.heads + head_of(r)) * a_.q_len + query_of(r);
    float *dst = partial + (row * p_.n_chunks + chunk_) * stride;
    dst[0] = st_.m[r];
    dst[1] = st_.l[r];
    for (std::int64_t d = 0; d < a_.dv; ++d) dst[2 + d] = st_.acc[r * p_.dv_pad + d];
  }
}

} // namespace AK_ISA_NS
} // namespace attnkern
