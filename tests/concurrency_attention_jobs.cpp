// The ak_attention jobs of the concurrency stress test: prefill with probs,
// the score modifiers, f16/bf16 K/V, paged pools through a block table,
// split-KV decode (contiguous and paged) and a packed variable-length batch.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <numeric>
#include <random>
#include <utility>

#include "concurrency_jobs.hpp"

namespace ak_stress {
namespace {

struct Shape {
  std::int64_t batch, heads, kv_heads, q_len, kv_len, dim;
};

// One call's inputs; the descriptor points into the vectors, which never
// change once the job is made.
struct Attn {
  ak_attention_desc d;
  std::vector<float> q, k32, v32, bias, slopes, sinks;
  std::vector<std::uint16_t> k16, v16;
  std::vector<std::int32_t> kv_lens, block_table, cu_q, cu_k;
  std::int64_t q_rows = 0;  // rows of q and out per head (all batches when packed)
  std::int64_t kv_rows = 0; // rows of K and V per head, or slots of the pool
  bool lse = false, probs = false;

  explicit Attn(const Shape &s) {
    ak_attention_desc_init(&d);
    d.batch = s.batch, d.num_heads = s.heads, d.num_kv_heads = s.kv_heads;
    d.q_len = s.q_len, d.kv_len = s.kv_len, d.head_dim = s.dim;
    q_rows = s.batch * s.q_len;
    kv_rows = s.batch * s.kv_len;
  }
  std::int64_t out_floats() const { return d.num_heads * q_rows * d.head_dim; }
  std::int64_t lse_floats() const { return lse ? d.num_heads * q_rows : 0; }
  std::int64_t probs_floats() const {
    return probs ? d.batch * d.num_heads * d.q_len * d.kv_len : 0;
  }
};

// K and V of `rows` rows per kv head, stored as k_type / v_type.
void fill_kv(Attn &a, ak_dtype k_type, ak_dtype v_type, std::uint32_t seed) {
  const std::int64_t n = a.d.num_kv_heads * a.kv_rows * a.d.head_dim;
  a.d.k_type = k_type, a.d.v_type = v_type;
  auto k = random_floats(n, seed), v = random_floats(n, seed + 1);
  if (k_type == AK_F32)
    a.k32 = std::move(k);
  else
    a.k16 = narrowed(k_type, k);
  if (v_type == AK_F32)
    a.v32 = std::move(v);
  else
    a.v16 = narrowed(v_type, v);
}

// A pool of `extra` more pages than the batch needs, page ids shuffled, and
// -1 for the pages past each entry's kv_lens (never read).
void page(Attn &a, std::int64_t page_size, std::int64_t extra, std::uint32_t seed) {
  const std::int64_t per_seq = (a.d.kv_len + page_size - 1) / page_size;
  const std::int64_t pages = a.d.batch * per_seq + extra;
  std::vector<std::int32_t> ids(static_cast<std::size_t>(pages));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(seed));
  a.block_table.resize(static_cast<std::size_t>(a.d.batch * per_seq));
  for (std::int64_t b = 0; b < a.d.batch; ++b)
    for (std::int64_t col = 0; col < per_seq; ++col) {
      const auto i = static_cast<std::size_t>(b * per_seq + col);
      a.block_table[i] = col * page_size < a.kv_lens[static_cast<std::size_t>(b)] ? ids[i] : -1;
    }
  a.d.block_table_stride = per_seq, a.d.page_size = page_size, a.d.num_pages = pages;
  a.kv_rows = pages * page_size;
}

void add(std::vector<Job> &jobs, const std::string &name, const std::shared_ptr<Attn> &a) {
  a->q = random_floats(a->d.num_heads * a->q_rows * a->d.head_dim,
                       static_cast<std::uint32_t>(200 + jobs.size()));
  ak_attention_desc &d = a->d;
  auto ptr = [](const auto &v) { return v.empty() ? nullptr : v.data(); };
  d.bias = ptr(a->bias), d.alibi_slopes = ptr(a->slopes), d.sinks = ptr(a->sinks);
  d.kv_lens = ptr(a->kv_lens), d.block_table = ptr(a->block_table);
  d.cu_seqlens_q = ptr(a->cu_q), d.cu_seqlens_k = ptr(a->cu_k);
  const void *k = d.k_type == AK_F32 ? static_cast<const void *>(a->k32.data()) : a->k16.data();
  const void *v = d.v_type == AK_F32 ? static_cast<const void *>(a->v32.data()) : a->v16.data();
  std::shared_ptr<const Attn> in = a;
  const auto floats =
      static_cast<std::size_t>(a->out_floats() + a->lse_floats() + a->probs_floats());
  jobs.push_back({name, floats, [in, k, v](float *out) {
                    ak_attention_desc desc = in->d;
                    if (in->lse) desc.lse = out + in->out_floats();
                    if (in->probs) desc.probs = out + in->out_floats() + in->lse_floats();
                    return ak_attention(&desc, in->q.data(), static_cast<const float *>(k),
                                        static_cast<const float *>(v), out);
                  }});
}

} // namespace

void add_attention_jobs(std::vector<Job> &jobs) {
  { // causal prefill, GQA, with lse and probs
    auto a = std::make_shared<Attn>(Shape{2, 4, 2, 64, 64, 32});
    a->d.mask = AK_MASK_CAUSAL_TOP_LEFT;
    a->lse = a->probs = true;
    fill_kv(*a, AK_F32, AK_F32, 300);
    add(jobs, "attention_causal_gqa_probs", a);
  }
  { // every score modifier, a window, padding (kv_lens) and a full bias
    auto a = std::make_shared<Attn>(Shape{2, 4, 4, 48, 80, 48});
    a->d.mask = AK_MASK_CAUSAL_BOTTOM_RIGHT;
    a->d.window_left = 40;
    a->d.softcap = 30.0f;
    a->kv_lens = {80, 61};
    a->bias = random_floats(2 * 4 * 48 * 80, 310);
    a->d.bias_strides[0] = 4 * 48 * 80, a->d.bias_strides[1] = 48 * 80, a->d.bias_strides[2] = 80;
    for (int h = 0; h < 4; ++h) a->slopes.push_back(std::exp2(-2.0f * static_cast<float>(h + 1)));
    a->sinks = random_floats(4, 311);
    a->lse = true;
    fill_kv(*a, AK_F32, AK_F32, 312);
    add(jobs, "attention_modifiers", a);
  }
  { // half-precision K and V, each its own type
    auto a = std::make_shared<Attn>(Shape{1, 4, 4, 32, 96, 64});
    a->lse = true;
    fill_kv(*a, AK_F16, AK_BF16, 320);
    add(jobs, "attention_f16k_bf16v", a);
  }
  { // paged f16/bf16 pools, a short prefill at the end of each sequence
    auto a = std::make_shared<Attn>(Shape{2, 4, 2, 8, 200, 64});
    a->d.mask = AK_MASK_CAUSAL_BOTTOM_RIGHT;
    a->kv_lens = {200, 150};
    a->lse = a->probs = true;
    page(*a, 16, 3, 330);
    fill_kv(*a, AK_F16, AK_BF16, 331);
    add(jobs, "attention_paged_f16_bf16", a);
  }
  { // decode over keys split into fixed chunks (3 here)
    auto a = std::make_shared<Attn>(Shape{1, 8, 2, 1, 2200, 64});
    a->lse = true;
    fill_kv(*a, AK_F32, AK_F32, 340);
    add(jobs, "decode_split", a);
  }
  { // the same from a paged bf16 pool, one kv head (MQA)
    auto a = std::make_shared<Attn>(Shape{2, 4, 1, 1, 1300, 64});
    a->d.mask = AK_MASK_CAUSAL_BOTTOM_RIGHT;
    a->kv_lens = {1300, 1030};
    a->lse = true;
    page(*a, 32, 2, 350);
    fill_kv(*a, AK_BF16, AK_BF16, 351);
    add(jobs, "decode_split_paged_bf16", a);
  }
  { // packed sequences of 20, 1 and 39 queries over 40, 50 and 40 keys,
    // token-major [total, heads, dim] as engines store them
    auto a = std::make_shared<Attn>(Shape{3, 4, 2, 39, 50, 64});
    a->d.mask = AK_MASK_CAUSAL_BOTTOM_RIGHT;
    a->cu_q = {0, 20, 21, 60};
    a->cu_k = {0, 40, 90, 130};
    a->q_rows = 60, a->kv_rows = 130;
    const std::int64_t q_strides[3] = {0, 64, 4 * 64}, k_strides[3] = {0, 64, 2 * 64};
    std::copy(q_strides, q_strides + 3, a->d.q_strides);
    std::copy(q_strides, q_strides + 3, a->d.o_strides);
    std::copy(k_strides, k_strides + 3, a->d.k_strides);
    std::copy(k_strides, k_strides + 3, a->d.v_strides);
    a->lse = true;
    fill_kv(*a, AK_F32, AK_F32, 360);
    add(jobs, "attention_varlen", a);
  }
}

} // namespace ak_stress
