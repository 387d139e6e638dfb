#include "reference_attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ak_test {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

Strides3 resolve(const std::int64_t s[3], std::int64_t heads, std::int64_t len, std::int64_t dim) {
  if (s[0] == 0 && s[1] == 0 && s[2] == 0) return {heads * len * dim, len * dim, dim};
  return {s[0], s[1], s[2]};
}

std::size_t idx(std::int64_t i) { return static_cast<std::size_t>(i); }

// Entry b's queries, and the row of q/out where they start.
std::int64_t entry_queries(const ak_attention_desc &d, std::int64_t b) {
  return d.cu_seqlens_q ? d.cu_seqlens_q[b + 1] - d.cu_seqlens_q[b] : d.q_len;
}
std::int64_t first_query_row(const ak_attention_desc &d, std::int64_t b) {
  return d.cu_seqlens_q ? d.cu_seqlens_q[b] : 0;
}
std::int64_t first_key_row(const ak_attention_desc &d, std::int64_t b) {
  return d.cu_seqlens_k ? d.cu_seqlens_k[b] : 0;
}

// The logit of a visible key from its scaled dot product: softcap, then
// + bias + ALiBi (attnkern.h's order).
double modified_score(const ak_attention_desc &d, double s, const float *bias, std::int64_t h,
                      std::int64_t j, std::int64_t diag) {
  if (d.softcap > 0.0f) s = d.softcap * std::tanh(s / d.softcap);
  if (bias) s += static_cast<double>(bias[j]);
  if (d.alibi_slopes) s += static_cast<double>(d.alibi_slopes[h]) * static_cast<double>(j - diag);
  return s;
}

template <class T>
AttentionResult attention_impl(const ak_attention_desc &d, const T *q, const T *k, const T *v) {
  const AttentionGeometry g = attention_geometry(d);
  const std::int64_t heads = d.num_heads, q_len = d.q_len, kv_len = d.kv_len;
  const std::int64_t dk = d.head_dim, dv = g.head_dim_v;
  const std::int64_t rows = d.batch * heads * q_len;
  AttentionResult r;
  r.out.assign(idx(rows * dv), 0.0);
  r.lse.assign(idx(rows), -kInf);
  r.probs.assign(idx(rows * kv_len), 0.0);
  std::vector<double> logit(idx(kv_len));
  std::vector<char> visible(idx(kv_len));

  for (std::int64_t b = 0; b < d.batch; ++b)
    for (std::int64_t h = 0; h < heads; ++h) {
      const std::int64_t hk = h / g.group;
      for (std::int64_t i = 0; i < entry_queries(d, b); ++i) {
        const std::int64_t row = (b * heads + h) * q_len + i;
        const KeyRange keys = visible_key_range(d, b, i);
        const std::int64_t diag = aligned_diagonal(d, b, i);
        const float *bias = bias_row(d, b, h, i);
        const T *qi = q + b * g.q.b + h * g.q.h + (first_query_row(d, b) + i) * g.q.s;
        const double sink = d.sinks ? static_cast<double>(d.sinks[h]) : -kInf;
        bool any = false, nan = false;
        double m = -kInf;
        for (std::int64_t j = keys.begin; j < keys.end; ++j) {
          visible[idx(j)] = !(bias && bias[j] == -std::numeric_limits<float>::infinity());
          if (!visible[idx(j)]) continue;
          any = true;
          const T *kj = k + b * g.k.b + hk * g.k.h + (first_key_row(d, b) + j) * g.k.s;
          double dot = 0.0;
          for (std::int64_t c = 0; c < dk; ++c)
            dot += static_cast<double>(qi[c]) * static_cast<double>(kj[c]);
          const double s = modified_score(d, g.scale * dot, bias, h, j, diag);
          logit[idx(j)] = s;
          if (std::isnan(s))
            nan = true;
          else
            m = std::max(m, s);
        }
        // (data() + offset: either array is empty where dv or kv_len is 0.)
        double *out = r.out.data() + idx(row * dv);
        double *probs = r.probs.data() + idx(row * kv_len);
        if (std::isnan(sink)) { // the head's rows are not numbers
          r.lse[idx(row)] = kNaN;
          for (std::int64_t j = 0; j < kv_len; ++j) probs[j] = kNaN;
          for (std::int64_t c = 0; c < dv; ++c) out[c] = kNaN;
          continue;
        }
        if (!any) { // out 0, probs 0, lse the sink's (-inf without)
          r.lse[idx(row)] = sink;
          continue;
        }
        if (nan || m == kInf) { // as ak_softmax: the row, lse included, is not a number
          r.lse[idx(row)] = kNaN;
          for (std::int64_t j = keys.begin; j < keys.end; ++j)
            if (visible[idx(j)]) probs[j] = kNaN;
          for (std::int64_t c = 0; c < dv; ++c) out[c] = kNaN;
          continue;
        }
        if (sink == kInf) { // every key weighs exp(s - inf) = 0
          r.lse[idx(row)] = kInf;
          continue;
        }
        if (m == -kInf && sink == -kInf) continue; // every logit -inf: weights 0 (ak_softmax)
        m = std::max(m, sink);
        double z = sink > -kInf ? std::exp(sink - m) : 0.0;
        for (std::int64_t j = keys.begin; j < keys.end; ++j)
          if (visible[idx(j)]) z += std::exp(logit[idx(j)] - m);
        r.lse[idx(row)] = m + std::log(z);
        for (std::int64_t j = keys.begin; j < keys.end; ++j) {
          if (!visible[idx(j)]) continue;
          const double w = std::exp(logit[idx(j)] - m) / z;
          probs[j] = w;
          // A key whose weight underflows to 0 in fp32 feeds nothing, NaN or
          // Inf in its v included (attnkern.h): ALiBi's distant keys.
          if (static_cast<float>(std::exp(logit[idx(j)] - m)) == 0.0f) continue;
          const T *vj = v + b * g.v.b + hk * g.v.h + (first_key_row(d, b) + j) * g.v.s;
          for (std::int64_t c = 0; c < dv; ++c) out[c] += w * static_cast<double>(vj[c]);
        }
      }
    }
  return r;
}

} // namespace

AttentionGeometry attention_geometry(const ak_attention_desc &d) {
  AttentionGeometry g;
  g.head_dim_v = d.head_dim_v == 0 ? d.head_dim : d.head_dim_v;
  g.scale = d.scale == 0.0f ? 1.0 / std::sqrt(static_cast<double>(d.head_dim))
                            : static_cast<double>(d.scale);
  g.group = d.num_kv_heads > 0 ? d.num_heads / d.num_kv_heads : 1;
  // Packed sequences: one [1, heads, total rows] tensor (batch stride 0).
  const std::int64_t q_rows = d.cu_seqlens_q ? d.cu_seqlens_q[d.batch] : d.q_len;
  const std::int64_t k_rows = d.cu_seqlens_k ? d.cu_seqlens_k[d.batch] : d.kv_len;
  g.q = resolve(d.q_strides, d.num_heads, q_rows, d.head_dim);
  g.k = resolve(d.k_strides, d.num_kv_heads, k_rows, d.head_dim);
  g.v = resolve(d.v_strides, d.num_kv_heads, k_rows, g.head_dim_v);
  g.o = resolve(d.o_strides, d.num_heads, q_rows, g.head_dim_v);
  if (d.cu_seqlens_q) g.q.b = g.o.b = 0;
  if (d.cu_seqlens_k) g.k.b = g.v.b = 0;
  return g;
}

std::int64_t entry_keys(const ak_attention_desc &d, std::int64_t b) {
  return d.cu_seqlens_k ? d.cu_seqlens_k[b + 1] - d.cu_seqlens_k[b]
         : d.kv_lens    ? d.kv_lens[b]
                        : d.kv_len;
}

std::int64_t aligned_diagonal(const ak_attention_desc &d, std::int64_t b, std::int64_t i) {
  return d.mask == AK_MASK_CAUSAL_BOTTOM_RIGHT ? i + (entry_keys(d, b) - entry_queries(d, b)) : i;
}

KeyRange visible_key_range(const ak_attention_desc &d, std::int64_t b, std::int64_t i) {
  const std::int64_t n = entry_keys(d, b);
  const std::int64_t diag = aligned_diagonal(d, b, i);
  std::int64_t end = n; // exclusive
  if (d.mask == AK_MASK_CAUSAL_TOP_LEFT || d.mask == AK_MASK_CAUSAL_BOTTOM_RIGHT)
    end = std::min(end, diag + 1);
  if (d.window_right >= 0) end = std::min(end, diag + d.window_right + 1);
  std::int64_t begin = 0;
  if (d.window_left >= 0) begin = std::max(begin, diag - d.window_left);
  if (begin >= end) return {0, 0};
  return {begin, end};
}

const float *bias_row(const ak_attention_desc &d, std::int64_t b, std::int64_t h, std::int64_t i) {
  if (!d.bias) return nullptr;
  return d.bias + b * d.bias_strides[0] + h * d.bias_strides[1] + i * d.bias_strides[2];
}

bool key_visible(const ak_attention_desc &d, std::int64_t b, std::int64_t h, std::int64_t i,
                 std::int64_t j) {
  if (!visible_key_range(d, b, i).contains(j)) return false;
  const float *bias = bias_row(d, b, h, i);
  return !(bias && bias[j] == -std::numeric_limits<float>::infinity());
}

AttentionResult ref_attention(const ak_attention_desc &d, const float *q, const float *k,
                              const float *v) {
  return attention_impl(d, q, k, v);
}

AttentionResult ref_attention(const ak_attention_desc &d, const double *q, const double *k,
                              const double *v) {
  return attention_impl(d, q, k, v);
}

std::vector<double> ref_mha_self_attention(std::int64_t n_tokens, std::int64_t d_model,
                                           std::int64_t num_heads, std::int64_t d_k,
                                           std::int64_t d_v, const float *x, const float *w_q,
                                           const float *w_k, const float *w_v, ak_mask mask) {
  // [num_heads, n_tokens, dim] = x [n_tokens, d_model] w[h] [d_model, dim]
  auto project = [&](const float *w, std::int64_t dim) {
    std::vector<double> p(idx(num_heads * n_tokens * dim), 0.0);
    for (std::int64_t h = 0; h < num_heads; ++h)
      for (std::int64_t t = 0; t < n_tokens; ++t)
        for (std::int64_t c = 0; c < dim; ++c) {
          double s = 0.0;
          for (std::int64_t m = 0; m < d_model; ++m)
            s += static_cast<double>(x[t * d_model + m]) *
                 static_cast<double>(w[(h * d_model + m) * dim + c]);
          p[idx((h * n_tokens + t) * dim + c)] = s;
        }
    return p;
  };
  const std::vector<double> q = project(w_q, d_k), k = project(w_k, d_k), v = project(w_v, d_v);
  ak_attention_desc d{}; // set up by hand: the reference does not rely on the library
  d.struct_size = sizeof d;
  d.window_left = d.window_right = -1;
  d.batch = 1;
  d.num_heads = d.num_kv_heads = num_heads;
  d.q_len = d.kv_len = n_tokens;
  d.head_dim = d_k;
  d.head_dim_v = d_v;
  d.mask = mask;
  return ref_attention(d, q.data(), k.data(), v.data()).out;
}

} // namespace ak_test
