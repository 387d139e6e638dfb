// Scalar float64 reference of ak_attention (and of ak_mha_self_attention),
// written straight from the definition in attnkern.h: which keys each query
// sees, the bias, the GQA head mapping, the stride conventions and the
// special cases (no visible key: out 0, lse -inf, probs 0).
#pragma once

#include <cstdint>
#include <vector>

#include "attnkern.h"

namespace ak_test {

// [batch, head, seq] strides of one tensor, in elements.
struct Strides3 {
  std::int64_t b, h, s;
};

// A descriptor's conventions resolved: the defaults of head_dim_v and scale,
// and the all-zero = contiguous [b, h, s, d] strides.
struct AttentionGeometry {
  std::int64_t head_dim_v;
  double scale;
  std::int64_t group; // query heads per kv head: kv head = h / group
  Strides3 q, k, v, o;
};
AttentionGeometry attention_geometry(const ak_attention_desc &d);

// Entry b's key count (cu_seqlens_k, kv_lens or kv_len) and the aligned
// diagonal d(i) of its query i (the masks', the windows' and ALiBi's).
std::int64_t entry_keys(const ak_attention_desc &d, std::int64_t b);
std::int64_t aligned_diagonal(const ak_attention_desc &d, std::int64_t b, std::int64_t i);

// Keys [begin, end) that query i of batch b may see by position: kv_lens,
// the causal masks and the windows; the bias can hide more. Empty when
// begin >= end.
struct KeyRange {
  std::int64_t begin, end;
  bool contains(std::int64_t j) const { return begin <= j && j < end; }
};
KeyRange visible_key_range(const ak_attention_desc &d, std::int64_t b, std::int64_t i);

// The bias row of (b, h, i) (kv contiguous), or nullptr without a bias.
const float *bias_row(const ak_attention_desc &d, std::int64_t b, std::int64_t h, std::int64_t i);

// Whether key j reaches query i of head h in batch b: by position and bias.
bool key_visible(const ak_attention_desc &d, std::int64_t b, std::int64_t h, std::int64_t i,
                 std::int64_t j);

// Dense results: out [b, h, q_len, head_dim_v], lse [b, h, q_len] and
// probs [b, h, q_len, kv_len] (packed sequences too: row i of entry b at
// index i, rows past the entry's length 0).
//
// A key whose weight exp(s - max) underflows to 0 in fp32 feeds nothing
// (attnkern.h), whatever its v holds.
//
// Scores: scale q.k, softcap, + bias + ALiBi; a sink joins the normalizer
// (a row with no visible key: out 0, lse = sink; a NaN sink: the row NaN,
// probs included; a +inf sink: out and probs 0, lse +inf).
//
// A row with no visible key: out 0, lse -inf, probs 0. A NaN among its visible
// logits (from q, k or the bias): out, lse and the visible probs NaN, the
// masked probs 0. A +inf logit: out and the visible probs NaN (as ak_softmax),
// lse +inf. A NaN or Inf in a visible v entry flows into out only.
//
// Reads q only for the rows and k, v only at the positions visible to some
// query (NaN or Inf stored elsewhere never matters), and the bias only for
// keys inside visible_key_range.
struct AttentionResult {
  std::vector<double> out, lse, probs;
};
AttentionResult ref_attention(const ak_attention_desc &d, const float *q, const float *k,
                              const float *v);
// The same from float64 inputs (for projections computed in double).
AttentionResult ref_attention(const ak_attention_desc &d, const double *q, const double *k,
                              const double *v);

// ak_mha_self_attention in double: the projections x w_q, x w_k, x w_v in
// float64, then ref_attention. Returns out [num_heads, n_tokens, d_v].
std::vector<double> ref_mha_self_attention(std::int64_t n_tokens, std::int64_t d_model,
                                           std::int64_t num_heads, std::int64_t d_k,
                                           std::int64_t d_v, const float *x, const float *w_q,
                                           const float *w_k, const float *w_v, ak_mask mask);

} // namespace ak_test
