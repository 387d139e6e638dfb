#include "concurrency_jobs.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <stdexcept>
#include <utility>

namespace ak_stress {
namespace {

using Floats = std::vector<float>;

// Inputs outlive every closure that reads them; nobody writes them.
template <class T> std::shared_ptr<const T> share(T v) {
  return std::make_shared<const T>(std::move(v));
}

std::size_t floats_for_bytes(std::int64_t bytes) {
  return static_cast<std::size_t>((bytes + 3) / 4);
}

void add_sgemm(std::vector<Job> &jobs, const char *name, ak_trans ta, ak_trans tb, std::int64_t m,
               std::int64_t n, std::int64_t k, float beta, std::uint32_t seed) {
  auto a = share(random_floats(m * k, seed));
  auto b = share(random_floats(k * n, seed + 1));
  auto c0 = share(random_floats(m * n, seed + 2));
  const std::int64_t lda = ta == AK_TRANS ? m : k, ldb = tb == AK_TRANS ? k : n;
  jobs.push_back({name, c0->size(), [=](float *c) {
                    std::memcpy(c, c0->data(), c0->size() * sizeof(float));
                    return ak_sgemm(ta, tb, m, n, k, 1.25f, a->data(), lda, b->data(), ldb, beta, c,
                                    n);
                  }});
}

void add_gemm_jobs(std::vector<Job> &jobs) {
  // The packed path shared by rows, a panel shared by columns, and the
  // skinny (GEMV-like) paths with B stored k x n and n x k.
  add_sgemm(jobs, "sgemm_nn", AK_NO_TRANS, AK_NO_TRANS, 100, 96, 128, 0.5f, 10);
  add_sgemm(jobs, "sgemm_tt", AK_TRANS, AK_TRANS, 64, 72, 100, 0.0f, 20);
  add_sgemm(jobs, "sgemm_skinny_nn", AK_NO_TRANS, AK_NO_TRANS, 4, 1024, 256, 1.0f, 30);
  add_sgemm(jobs, "sgemm_skinny_nt", AK_NO_TRANS, AK_TRANS, 2, 512, 1024, 0.0f, 40);

  const std::int64_t m = 32, n = 40, k = 96, batch = 8;
  auto a = share(random_floats(m * k * batch, 50));
  auto b = share(random_floats(k * n, 51)); // one B for every product (stride 0)
  jobs.push_back({"sgemm_strided_batched", static_cast<std::size_t>(m * n * batch), [=](float *c) {
                    return ak_sgemm_strided_batched(AK_NO_TRANS, AK_NO_TRANS, m, n, k, 1.0f,
                                                    a->data(), k, m * k, b->data(), n, 0, 0.0f, c,
                                                    n, m * n, batch);
                  }});
}

void add_softmax_jobs(std::vector<Job> &jobs) {
  const std::int64_t rows = 64, cols = 300;
  auto x = share(random_floats(rows * cols, 60, 4.0f));
  jobs.push_back({"softmax_in_place", x->size(), [=](float *y) {
                    std::memcpy(y, x->data(), x->size() * sizeof(float));
                    return ak_softmax(rows, cols, y, cols, y, cols);
                  }});
  jobs.push_back({"log_softmax", x->size(),
                  [=](float *y) { return ak_log_softmax(rows, cols, x->data(), cols, y, cols); }});
  // One slice whose bands of rows the team shares out; several slices.
  const std::int64_t shapes[][3] = {{1, 256, 300}, {4, 40, 500}};
  for (const auto &s : shapes) {
    const std::int64_t outer = s[0], axis = s[1], inner = s[2];
    auto t = share(random_floats(outer * axis * inner, 61, 4.0f));
    jobs.push_back({"softmax_axis_" + std::to_string(outer), t->size(),
                    [=](float *y) { return ak_softmax_axis(outer, axis, inner, t->data(), y); }});
  }
}

void add_convert_jobs(std::vector<Job> &jobs) {
  const std::int64_t n = 140000; // two threads' worth of elements
  auto x = share(random_floats(n, 70, 100.0f));
  for (ak_dtype t : {AK_F16, AK_BF16}) {
    const std::string tn = t == AK_F16 ? "f16" : "bf16";
    jobs.push_back({"convert_f32_to_" + tn, floats_for_bytes(2 * n),
                    [=](float *out) { return ak_convert(t, out, AK_F32, x->data(), n); }});
    auto h = share(narrowed(t, *x));
    jobs.push_back({"convert_" + tn + "_to_f32", static_cast<std::size_t>(n),
                    [=](float *out) { return ak_convert(AK_F32, out, t, h->data(), n); }});
  }
}

void add_kv_store_jobs(std::vector<Job> &jobs) {
  const std::int64_t tokens = 320, kvh = 4, hd = 128, page = 16, pages = 24;
  // Tokens from a padded [token, head] source into shuffled slots; every
  // ninth token is skipped (-1).
  const std::int64_t src_strides[2] = {kvh * hd + 8, hd};
  auto src = share(random_floats(tokens * src_strides[0], 80));
  std::vector<std::int64_t> slots(static_cast<std::size_t>(pages * page));
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), std::mt19937(81));
  slots.resize(static_cast<std::size_t>(tokens));
  for (std::size_t t = 0; t < slots.size(); t += 9) slots[t] = -1;
  auto sl = share(std::move(slots));
  const std::int64_t elems = pages * kvh * page * hd;
  struct Layout {
    ak_dtype type;
    const char *name;
    std::int64_t strides[3];
  };
  // Contiguous f16 pages, and bf16 pages in vLLM's [page, slot, head] order.
  const Layout layouts[] = {
      {AK_F16, "kv_cache_store_f16", {0, 0, 0}},
      {AK_BF16, "kv_cache_store_bf16_slot_major", {page * kvh * hd, hd, kvh * hd}}};
  for (const Layout &l : layouts) {
    const ak_dtype type = l.type;
    const std::int64_t ps[3] = {l.strides[0], l.strides[1], l.strides[2]};
    jobs.push_back({l.name, floats_for_bytes(2 * elems), [=](float *pool) {
                      std::memset(pool, 0, static_cast<std::size_t>(2 * elems));
                      return ak_kv_cache_store(tokens, kvh, hd, src->data(), src_strides,
                                               sl->data(), type, pool, pages, page, ps);
                    }});
  }
}

void add_rope_jobs(std::vector<Job> &jobs) {
  // NeoX pairs over whole contiguous rows at given positions; interleaved
  // pairs over the first 32 entries of rows inside a padded fused
  // projection, with given frequencies.
  {
    const std::int64_t batch = 2, seq = 64, heads = 8, hd = 64;
    auto x = share(random_floats(batch * seq * heads * hd, 90));
    std::vector<std::int32_t> pos(static_cast<std::size_t>(batch * seq));
    std::mt19937 rng(91);
    for (auto &p : pos) p = static_cast<std::int32_t>(rng() % 5000);
    auto positions = share(std::move(pos));
    jobs.push_back({"rope_neox", x->size(), [=](float *y) {
                      std::memcpy(y, x->data(), x->size() * sizeof(float));
                      return ak_rope(batch, seq, heads, hd, 0, AK_ROPE_NEOX, positions->data(),
                                     10000.0f, nullptr, y, nullptr);
                    }});
  }
  {
    const std::int64_t batch = 2, seq = 128, heads = 8, hd = 48, rot = 32;
    const std::int64_t row = 3 * heads * hd + 4; // q, k and v of one token, padded
    const std::int64_t strides[3] = {seq * row, row, hd};
    auto x = share(random_floats(batch * seq * row, 92));
    Floats f(static_cast<std::size_t>(rot / 2));
    for (std::size_t i = 0; i < f.size(); ++i) f[i] = 1.0f / static_cast<float>(1 + 3 * i);
    auto inv_freq = share(std::move(f));
    jobs.push_back({"rope_interleaved_strided", x->size(), [=](float *y) {
                      std::memcpy(y, x->data(), x->size() * sizeof(float));
                      return ak_rope(batch, seq, heads, hd, rot, AK_ROPE_INTERLEAVED, nullptr, 0.0f,
                                     inv_freq->data(), y, strides);
                    }});
  }
}

void add_misc_jobs(std::vector<Job> &jobs) {
  {
    const std::int64_t vocab = 500, dim = 256, ld = 260, tokens = 256;
    auto table = share(random_floats(vocab * ld, 100));
    std::vector<std::int32_t> id(static_cast<std::size_t>(tokens));
    std::mt19937 rng(101);
    for (auto &i : id) i = static_cast<std::int32_t>(rng() % (vocab + 1)) - 1; // -1: unknown
    auto ids = share(std::move(id));
    jobs.push_back({"embedding", static_cast<std::size_t>(tokens * dim), [=](float *out) {
                      return ak_embedding(tokens, ids->data(), vocab, dim, table->data(), ld, out,
                                          dim);
                    }});
  }
  jobs.push_back({"position_encoding", 64 * 65,
                  [](float *out) { return ak_position_encoding(64, 65, 10000.0f, out); }});
  {
    const std::int64_t n = 48, dm = 64, heads = 4, dk = 16, dv = 24;
    auto x = share(random_floats(n * dm, 110));
    auto wq = share(random_floats(heads * dm * dk, 111, 0.2f));
    auto wk = share(random_floats(heads * dm * dk, 112, 0.2f));
    auto wv = share(random_floats(heads * dm * dv, 113, 0.2f));
    jobs.push_back(
        {"mha_self_attention", static_cast<std::size_t>(heads * n * dv), [=](float *out) {
           return ak_mha_self_attention(n, dm, heads, dk, dv, x->data(), wq->data(), wk->data(),
                                        wv->data(), AK_MASK_CAUSAL_TOP_LEFT, out);
         }});
  }
}

} // namespace

std::vector<float> random_floats(std::int64_t n, std::uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float &x : v) x = dist(rng);
  return v;
}

std::vector<std::uint16_t> narrowed(ak_dtype type, const std::vector<float> &x) {
  std::vector<std::uint16_t> h(x.size());
  if (ak_convert(type, h.data(), AK_F32, x.data(), static_cast<std::int64_t>(x.size())) != AK_OK)
    throw std::runtime_error("ak_convert failed while preparing inputs");
  return h;
}

std::vector<Job> make_jobs() {
  std::vector<Job> jobs;
  add_gemm_jobs(jobs);
  add_softmax_jobs(jobs);
  add_convert_jobs(jobs);
  add_kv_store_jobs(jobs);
  add_rope_jobs(jobs);
  add_misc_jobs(jobs);
  add_attention_jobs(jobs);
  return jobs;
}

} // namespace ak_stress
