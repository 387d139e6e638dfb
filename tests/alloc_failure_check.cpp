// Out of memory at any allocation of any allocating entry point: the call
// returns AK_ERR_OUT_OF_MEMORY with its message and leaves every output as
// it was, or, where it can do without the memory (softmax's staging row),
// succeeds with the same bits as always. Allocations fail on demand through
// the library's injection hook (fail_allocation_for_test, reached through
// the static library), the n-th one for n = 1, 2, ... until a call makes
// fewer; at 1 and 2 threads, on every instruction set.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "../src/scratch.hpp"
#include "attnkern.h"

namespace {

// The bytes a call may write, with the values they hold before it.
struct Outputs {
  std::vector<std::vector<float> *> bufs;
  std::vector<std::vector<float>> before;
  void snapshot() {
    before.clear();
    for (auto *b : bufs) before.push_back(*b);
  }
  void restore() {
    for (std::size_t i = 0; i < bufs.size(); ++i) *bufs[i] = before[i];
  }
  bool unchanged() const {
    for (std::size_t i = 0; i < bufs.size(); ++i)
      if (std::memcmp(bufs[i]->data(), before[i].data(), before[i].size() * sizeof(float)) != 0)
        return false;
    return true;
  }
};

struct Entry {
  std::string name;
  std::function<ak_status()> call;
  Outputs out;
  bool may_do_without = false; // succeeds without the memory (same bits)
};

std::vector<float> ramp(std::size_t n, float step) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = static_cast<float>(static_cast<int>(i % 23) - 11) * step;
  return v;
}

// Runs e with the n-th allocation failing for n = 1.. until the call
// completes without reaching it (or 64 tries).
void check_entry(Entry &e) {
  SCOPED_TRACE(e.name + " on " + ak_get_isa() + " at " + std::to_string(ak_get_num_threads()) +
               " threads");
  e.out.snapshot();
  ASSERT_EQ(e.call(), AK_OK) << ak_last_error();
  std::vector<std::vector<float>> want;
  for (auto *b : e.out.bufs) want.push_back(*b);
  bool failed_once = false;
  for (long n = 1; n <= 64; ++n) {
    e.out.restore();
    attnkern::fail_allocation_for_test(n);
    const ak_status st = e.call();
    const bool reached = !attnkern::injected_allocation_failure_pending();
    attnkern::fail_allocation_for_test(0);
    if (st == AK_ERR_OUT_OF_MEMORY) {
      failed_once = true;
      EXPECT_FALSE(e.may_do_without) << "allocation " << n;
      EXPECT_NE(std::strstr(ak_last_error(), "out of memory"), nullptr) << ak_last_error();
      EXPECT_TRUE(e.out.unchanged()) << "allocation " << n << " failed after a store";
    } else {
      ASSERT_EQ(st, AK_OK) << ak_last_error();
      for (std::size_t i = 0; i < want.size(); ++i)
        EXPECT_EQ(std::memcmp(e.out.bufs[i]->data(), want[i].data(), want[i].size() * 4), 0)
            << "allocation " << n << ": output " << i << " differs";
    }
    if (!reached) break; // the call made fewer than n allocations
  }
  if (!e.may_do_without) {
    EXPECT_TRUE(failed_once) << "no allocation to fail: a test that cannot fail";
  }
}

// Every allocating entry point, on its allocating paths.
void check_all() {
  // ak_sgemm: packed (both transposes) and skinny with A copied.
  for (bool trans_a : {false, true}) {
    const std::int64_t m = trans_a ? 4 : 150, n = 130, k = 170;
    auto a = ramp(static_cast<std::size_t>(m * k), 0.01f),
         b = ramp(static_cast<std::size_t>(k * n), 0.02f);
    std::vector<float> c = ramp(static_cast<std::size_t>(m * n), 0.5f);
    Entry e{std::string("ak_sgemm ") + (trans_a ? "skinny, A transposed" : "packed"),
            [&] {
              return ak_sgemm(trans_a ? AK_TRANS : AK_NO_TRANS, AK_NO_TRANS, m, n, k, 1.0f,
                              a.data(), trans_a ? m : k, b.data(), n, 0.5f, c.data(), n);
            },
            {{&c}, {}}};
    check_entry(e);
  }
  // ak_sgemm_strided_batched: many small products (one per thread) and a
  // few larger ones (the team on each in turn); beta != 0, so that a
  // product written twice would show.
  for (std::int64_t batch : {64, 3}) {
    const std::int64_t s = batch == 64 ? 20 : 96;
    auto a = ramp(static_cast<std::size_t>(batch * s * s), 0.01f);
    auto b = ramp(static_cast<std::size_t>(batch * s * s), 0.03f);
    std::vector<float> c = ramp(static_cast<std::size_t>(batch * s * s), 0.25f);
    Entry e{"ak_sgemm_strided_batched batch " + std::to_string(batch),
            [&] {
              return ak_sgemm_strided_batched(AK_NO_TRANS, AK_TRANS, s, s, s, 1.0f, a.data(), s,
                                              s * s, b.data(), s, s * s, 0.5f, c.data(), s, s * s,
                                              batch);
            },
            {{&c}, {}}};
    check_entry(e);
  }
  // Softmax: rows, out of place and out of cache (a staging row per thread
  // where the instruction set streams its stores; without it the call uses
  // ordinary stores and the same bits), and an axis.
  for (bool log : {false, true}) {
    const std::int64_t rows = 160, cols = 65536;
    auto x = ramp(static_cast<std::size_t>(rows * cols), 0.1f);
    std::vector<float> y(x.size(), 3.0f);
    Entry e{log ? "ak_log_softmax" : "ak_softmax",
            [&] {
              return (log ? ak_log_softmax : ak_softmax)(rows, cols, x.data(), cols, y.data(),
                                                         cols);
            },
            {{&y}, {}},
            true};
    check_entry(e);
  }
  {
    const std::int64_t outer = 3, len = 50, inner = 40;
    auto xa = ramp(static_cast<std::size_t>(outer * len * inner), 0.2f);
    std::vector<float> ya(xa.size(), 3.0f);
    Entry ax{"ak_softmax_axis",
             [&] { return ak_softmax_axis(outer, len, inner, xa.data(), ya.data()); },
             {{&ya}, {}}};
    check_entry(ax);
  }
  // ak_attention: prefill, decode split into chunks, 16-bit paged keys.
  for (int variant = 0; variant < 3; ++variant) {
    const std::int64_t heads = 4, kv_heads = 2, d = 64;
    const std::int64_t q_len = variant == 0 ? 70 : 1, kv_len = variant == 0 ? 90 : 3000;
    auto q = ramp(static_cast<std::size_t>(heads * q_len * d), 0.05f);
    auto k = ramp(static_cast<std::size_t>(kv_heads * kv_len * d), 0.04f);
    auto v = ramp(static_cast<std::size_t>(kv_heads * kv_len * d), 0.3f);
    std::vector<std::uint16_t> k16(k.size()), v16(v.size());
    const std::int64_t page = 16, pages = kv_len / page + 1;
    std::vector<std::int32_t> table(static_cast<std::size_t>(pages));
    for (std::int64_t p = 0; p < pages; ++p)
      table[static_cast<std::size_t>(p)] = static_cast<std::int32_t>((p * 7) % pages);
    std::vector<float> out(static_cast<std::size_t>(heads * q_len * d), 5.0f);
    std::vector<float> lse(static_cast<std::size_t>(heads * q_len), 5.0f);
    ak_attention_desc desc;
    ak_attention_desc_init(&desc);
    desc.batch = 1, desc.num_heads = heads, desc.num_kv_heads = kv_heads;
    desc.q_len = q_len, desc.kv_len = kv_len, desc.head_dim = d, desc.lse = lse.data();
    desc.mask = AK_MASK_CAUSAL_BOTTOM_RIGHT;
    const void *kp = k.data(), *vp = v.data();
    if (variant == 2) {
      // A pool of `pages` pages [page, kv_head, slot, d], filled as stored.
      k16.assign(static_cast<std::size_t>(pages * kv_heads * page * d), 0);
      v16.assign(k16.size(), 0);
      desc.k_type = desc.v_type = AK_BF16;
      desc.block_table = table.data(), desc.block_table_stride = pages;
      desc.page_size = page, desc.num_pages = pages;
      kp = k16.data(), vp = v16.data();
    }
    Entry e{"ak_attention variant " + std::to_string(variant),
            [&] {
              return ak_attention(&desc, q.data(), static_cast<const float *>(kp),
                                  static_cast<const float *>(vp), out.data());
            },
            {{&out, &lse}, {}}};
    check_entry(e);
  }
  // ak_mha_self_attention: projections into scratch, then attention.
  {
    const std::int64_t t = 33, dm = 48, h = 3, dk = 16;
    auto x = ramp(static_cast<std::size_t>(t * dm), 0.05f);
    auto w = ramp(static_cast<std::size_t>(h * dm * dk), 0.02f);
    std::vector<float> out(static_cast<std::size_t>(h * t * dk), 9.0f);
    Entry e{"ak_mha_self_attention",
            [&] {
              return ak_mha_self_attention(t, dm, h, dk, dk, x.data(), w.data(), w.data(), w.data(),
                                           AK_MASK_CAUSAL_TOP_LEFT, out.data());
            },
            {{&out}, {}}};
    check_entry(e);
  }
  // ak_kv_cache_store: the duplicate-slot check's map or sorted list.
  for (std::int64_t capacity : {64, 1 << 20}) {
    const std::int64_t tokens = 8, kvh = 2, d = 8;
    auto src = ramp(static_cast<std::size_t>(tokens * kvh * d), 0.5f);
    std::vector<std::int64_t> slots(static_cast<std::size_t>(tokens));
    for (std::int64_t i = 0; i < tokens; ++i)
      slots[static_cast<std::size_t>(i)] = (i * 5) % capacity;
    std::vector<float> pool(static_cast<std::size_t>(capacity * kvh * d), 2.0f);
    Entry e{"ak_kv_cache_store capacity " + std::to_string(capacity),
            [&] {
              return ak_kv_cache_store(tokens, kvh, d, src.data(), nullptr, slots.data(), AK_F32,
                                       pool.data(), capacity, 1, nullptr);
            },
            {{&pool}, {}}};
    check_entry(e);
  }
  // ak_rope: a default frequency table too long for the stack.
  {
    const std::int64_t d = 2048, tokens = 3;
    std::vector<float> x = ramp(static_cast<std::size_t>(tokens * d), 0.5f);
    Entry e{"ak_rope head_dim 2048",
            [&] {
              return ak_rope(1, tokens, 1, d, 0, AK_ROPE_NEOX, nullptr, 10000.0f, nullptr, x.data(),
                             nullptr);
            },
            {{&x}, {}}};
    check_entry(e);
  }
}

TEST(AllocationFailure, LeavesOutputsAsTheyWereOnEveryEntryPoint) {
  for (const char *isa : {"avx512", "avx2", "sse2", "neon", "scalar"}) {
    if (!ak_isa_supported(isa)) continue;
    ASSERT_EQ(ak_set_isa(isa), AK_OK);
    for (int threads : {1, 2}) {
      ASSERT_EQ(ak_set_num_threads(threads), AK_OK);
      check_all();
    }
  }
  ak_set_isa(nullptr);
  ak_set_num_threads(0);
}

} // namespace
