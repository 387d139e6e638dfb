// A program built against the 0.1 header keeps working: its descriptor is
// the 0.1 struct (everything up to and including `probs`), struct_size =
// AK_ATTENTION_DESC_SIZE_0_1, and every field added since takes its default.
//
// The 0.1 struct below is a verbatim copy, allocated on the heap with
// exactly its own size, so that the sanitizer build reports any read past
// its end; its results must equal those of a full descriptor bit for bit.
// A full descriptor that says struct_size = AK_ATTENTION_DESC_SIZE_0_1 must
// likewise ignore whatever its newer fields hold.
#include <gtest/gtest.h>

#include <attnkern.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace ak_test {
namespace {

// ak_attention_desc as the 0.1 header declared it.
typedef struct {
  uint32_t struct_size;
  int64_t batch, num_heads, num_kv_heads;
  int64_t q_len, kv_len;
  int64_t head_dim, head_dim_v;
  float scale;
  int32_t mask;
  int64_t window_left, window_right;
  const float *bias;
  int64_t bias_strides[3];
  const int32_t *kv_lens;
  int64_t q_strides[3];
  int64_t k_strides[3];
  int64_t v_strides[3];
  int64_t o_strides[3];
  float *lse;
  float *probs;
} ak_attention_desc_0_1;

static_assert(sizeof(ak_attention_desc_0_1) == AK_ATTENTION_DESC_SIZE_0_1,
              "the 0.1 descriptor is the prefix of the current one");
static_assert(sizeof(void *) != 8 || sizeof(ak_attention_desc_0_1) == 240, "240 bytes on LP64");

// A call with every 0.1 feature: GQA, a mask and a window, a bias, kv_lens,
// strided q and out, lse and probs.
struct Call {
  std::int64_t batch = 2, heads = 4, kv_heads = 2, q_len = 9, kv_len = 40, dk = 24, dv = 16;
  std::vector<float> q, k, v, bias, out, lse, probs;
  std::vector<std::int32_t> kv_lens{40, 23};

  Call() {
    q = random_normal(static_cast<std::size_t>(batch * q_len * heads * (dk + 3)), 11);
    k = random_normal(static_cast<std::size_t>(batch * kv_heads * kv_len * dk), 12);
    v = random_normal(static_cast<std::size_t>(batch * kv_heads * kv_len * dv), 13);
    bias = random_normal(static_cast<std::size_t>(heads * q_len * kv_len), 14);
    reset();
  }
  void reset() {
    out.assign(static_cast<std::size_t>(batch * heads * q_len * dv), canary());
    lse.assign(static_cast<std::size_t>(batch * heads * q_len), canary());
    probs.assign(static_cast<std::size_t>(batch * heads * q_len * kv_len), canary());
  }
  // Fills the 0.1 fields of d (any struct with their names).
  template <class D> void fill(D &d) {
    d.batch = batch, d.num_heads = heads, d.num_kv_heads = kv_heads;
    d.q_len = q_len, d.kv_len = kv_len, d.head_dim = dk, d.head_dim_v = dv;
    d.scale = 0.0f, d.mask = AK_MASK_CAUSAL_BOTTOM_RIGHT;
    d.window_left = 20, d.window_right = -1;
    d.bias = bias.data();
    d.bias_strides[0] = 0, d.bias_strides[1] = q_len * kv_len, d.bias_strides[2] = kv_len;
    d.kv_lens = kv_lens.data();
    // q as [b, s, h, d] with 3 floats of padding per head
    d.q_strides[0] = q_len * heads * (dk + 3), d.q_strides[1] = dk + 3;
    d.q_strides[2] = heads * (dk + 3);
    d.lse = lse.data(), d.probs = probs.data();
  }
  ak_status run(const void *desc) {
    reset();
    return ak_attention(static_cast<const ak_attention_desc *>(desc), q.data(), k.data(), v.data(),
                        out.data());
  }
};

::testing::AssertionResult same_bits(const std::vector<float> &a, const std::vector<float> &b,
                                     const char *what) {
  if (a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << " differs";
}

// The results of a full, default descriptor.
struct Expected {
  std::vector<float> out, lse, probs;
};
Expected full_result(Call &call) {
  ak_attention_desc d;
  ak_attention_desc_init(&d);
  call.fill(d);
  EXPECT_EQ(call.run(&d), AK_OK) << ak_last_error();
  return {call.out, call.lse, call.probs};
}

TEST(AttentionDescCompat, StructOf01OnTheHeapEqualsTheFullDescriptor) {
  Call call;
  const Expected want = full_result(call);
  // Exactly sizeof(ak_attention_desc_0_1) bytes: nothing past it to read.
  struct Free {
    void operator()(ak_attention_desc_0_1 *p) const { ::operator delete(p); }
  };
  std::unique_ptr<ak_attention_desc_0_1, Free> d(
      static_cast<ak_attention_desc_0_1 *>(::operator new(sizeof(ak_attention_desc_0_1))));
  std::memset(d.get(), 0, sizeof *d);
  d->struct_size = AK_ATTENTION_DESC_SIZE_0_1;
  call.fill(*d);
  ASSERT_EQ(call.run(d.get()), AK_OK) << ak_last_error();
  EXPECT_TRUE(same_bits(call.out, want.out, "out"));
  EXPECT_TRUE(same_bits(call.lse, want.lse, "lse"));
  EXPECT_TRUE(same_bits(call.probs, want.probs, "probs"));
}

// A 0.1 program calls the exported ak_attention_desc_init (its header had
// no macro) on its 240 bytes: the library must write no byte past them, and
// leave a descriptor ak_attention takes.
TEST(AttentionDescCompat, ExportedInitOf01WritesOnlyItsBytes) {
  Call call;
  const Expected want = full_result(call);
  struct Free {
    void operator()(ak_attention_desc_0_1 *p) const { ::operator delete(p); }
  };
  std::unique_ptr<ak_attention_desc_0_1, Free> d(
      static_cast<ak_attention_desc_0_1 *>(::operator new(sizeof(ak_attention_desc_0_1))));
  std::memset(d.get(), 0x5a, sizeof *d);
  (ak_attention_desc_init)(reinterpret_cast<ak_attention_desc *>(d.get())); // not the macro
  EXPECT_EQ(d->struct_size, AK_ATTENTION_DESC_SIZE_0_1);
  EXPECT_EQ(d->window_left, -1);
  EXPECT_EQ(d->window_right, -1);
  EXPECT_EQ(d->bias, nullptr);
  EXPECT_EQ(d->probs, nullptr);
  call.fill(*d);
  ASSERT_EQ(call.run(d.get()), AK_OK) << ak_last_error();
  EXPECT_TRUE(same_bits(call.out, want.out, "out"));
}

// The header's macro initializes the caller's whole struct; an unknown size
// is kept, so that ak_attention refuses it.
TEST(AttentionDescCompat, SizedInitKeepsTheCallersSize) {
  ak_attention_desc d;
  std::memset(&d, 0x5a, sizeof d);
  ak_attention_desc_init(&d);
  EXPECT_EQ(d.struct_size, sizeof d);
  EXPECT_EQ(d.k_type, AK_F32);
  EXPECT_EQ(d.block_table, nullptr);
  EXPECT_EQ(d.cu_seqlens_k, nullptr);
  ak_attention_desc_init_sized(&d, sizeof d + 8);
  EXPECT_EQ(d.struct_size, sizeof d + 8);
  EXPECT_EQ(ak_attention(&d, nullptr, nullptr, nullptr, nullptr), AK_ERR_BAD_ARGUMENT);
  EXPECT_NE(std::string(ak_last_error()).find("struct_size"), std::string::npos);
}

// Fields past struct_size are not the caller's: a 0.1 program's memory
// there may hold anything.
TEST(AttentionDescCompat, FieldsPastStructSizeOf01AreIgnored) {
  Call call;
  const Expected want = full_result(call);
  // Real memory behind the pointers, so that a library that wrongly uses
  // them fails the comparison rather than crashing.
  const std::vector<float> junk(4096, std::numeric_limits<float>::quiet_NaN());
  const std::vector<std::int32_t> junk_ids(4096, -5);
  ak_attention_desc d;
  ak_attention_desc_init(&d);
  call.fill(d);
  d.struct_size = AK_ATTENTION_DESC_SIZE_0_1;
  d.k_type = 77, d.v_type = AK_BF16;
  d.softcap = std::numeric_limits<float>::quiet_NaN();
  d.alibi_slopes = junk.data(), d.sinks = junk.data();
  d.block_table = junk_ids.data();
  d.block_table_stride = -3, d.page_size = 0, d.num_pages = -1;
  for (int i = 0; i < 3; ++i) d.k_page_strides[i] = d.v_page_strides[i] = -9;
  d.cu_seqlens_q = junk_ids.data(), d.cu_seqlens_k = junk_ids.data();
  ASSERT_EQ(call.run(&d), AK_OK) << ak_last_error();
  EXPECT_TRUE(same_bits(call.out, want.out, "out"));
  EXPECT_TRUE(same_bits(call.lse, want.lse, "lse"));
  EXPECT_TRUE(same_bits(call.probs, want.probs, "probs"));
}

// The 0.2 defaults spelled out (f32 K and V, no paging, no softcap) change
// nothing: the same bits as the descriptor from ak_attention_desc_init.
TEST(AttentionDescCompat, ExplicitDefaultsEqualInit) {
  Call call;
  const Expected want = full_result(call);
  ak_attention_desc d;
  std::memset(&d, 0, sizeof d);
  d.struct_size = sizeof d;
  call.fill(d);
  d.k_type = AK_F32, d.v_type = AK_F32, d.softcap = 0.0f;
  ASSERT_EQ(call.run(&d), AK_OK) << ak_last_error();
  EXPECT_TRUE(same_bits(call.out, want.out, "out"));
  EXPECT_TRUE(same_bits(call.lse, want.lse, "lse"));
  EXPECT_TRUE(same_bits(call.probs, want.probs, "probs"));
}

} // namespace
} // namespace ak_test
