// Misuse of the descriptor fields added in 0.2 (storage types, softcap,
// ALiBi, sinks, paged K/V, packed variable-length batches) and of
// struct_size, in the pattern of test_attention_errors.cpp: a rejected call
// returns the exact status, ak_last_error() starts with "ak_attention: " and
// names the field as a whole word, and every buffer (q, k, v, bias, out, lse,
// probs, kv_lens, the block table) keeps its bits. Then the calls at the
// edges of those rules that must succeed: page ids that no visible key needs
// may be anything, an empty pool may be NULL.
//
// The buffers are misuse::Canary blocks and the library gets their middle,
// so that a wrongly accepted call stays inside memory.
#include <gtest/gtest.h>

#include <attnkern.h>

#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "misuse_support.hpp"

namespace ak_test {
namespace {

using namespace misuse;
constexpr std::int64_t kBufferLen = std::int64_t{1} << 14;
using Canary = misuse::Canary<kBufferLen>;
constexpr std::int32_t kI32Min = std::numeric_limits<std::int32_t>::min();
constexpr std::int32_t kI32Max = std::numeric_limits<std::int32_t>::max();
constexpr std::int64_t kI64Min = std::numeric_limits<std::int64_t>::min();

struct Buffers {
  Canary q{1}, k{2}, v{3}, bias{4}, out{5}, lse{6}, probs{7};
  std::vector<std::int32_t> kv_lens, block_table; // the call's copies
};

// A desc followed by zeroed room, so that a wrongly trusted struct_size
// reads zeros rather than leaving the object.
struct PaddedDesc {
  ak_attention_desc d;
  unsigned char room[64];
};

struct KvCall {
  ak_attention_desc d;
  std::vector<std::int32_t> kv_lens, block_table; // block_table empty: none
  bool null_k = false, null_v = false, with_bias = true;
  bool alibi = false, sinks = false, with_probs = true;
  std::vector<std::int32_t> cu_q, cu_k; // packed sequences' offsets (empty: none)
};

void set3(std::int64_t dst[3], std::int64_t a, std::int64_t b, std::int64_t c) {
  dst[0] = a, dst[1] = b, dst[2] = c;
}

// 2 batches, 4 query heads on 2 kv heads, 5 queries, 7 keys, head_dim 6,
// head_dim_v 4, causal bottom-right, a full bias, kv_lens {7, 3}, lse and
// probs, explicit contiguous strides (as test_attention_errors.cpp).
KvCall valid_plain() {
  KvCall c;
  ak_attention_desc_init(&c.d);
  ak_attention_desc &d = c.d;
  d.batch = 2, d.num_heads = 4, d.num_kv_heads = 2, d.q_len = 5, d.kv_len = 7;
  d.head_dim = 6, d.head_dim_v = 4, d.mask = AK_MASK_CAUSAL_BOTTOM_RIGHT;
  set3(d.bias_strides, 4 * 5 * 7, 5 * 7, 7);
  set3(d.q_strides, 4 * 5 * 6, 5 * 6, 6);
  set3(d.k_strides, 2 * 7 * 6, 7 * 6, 6);
  set3(d.v_strides, 2 * 7 * 4, 7 * 4, 4);
  set3(d.o_strides, 4 * 5 * 4, 5 * 4, 4);
  c.kv_lens = {7, 3};
  return c;
}

// The same keys through a block table: pages of 2 slots, 4 per sequence
// (ceil(7 / 2)), 8 in a contiguous pool, shuffled. Batch 0 needs all four
// pages; batch 1 (3 keys, queries aligned to key i - 2) only pages 0 and 1.
// The same call packed: 5 and 4 queries (cu_seqlens_q) over 7 and 3 keys
// (cu_seqlens_k) in one [1, heads, total] tensor each; no probs.
KvCall valid_packed() {
  KvCall c = valid_plain();
  c.cu_q = {0, 5, 9}, c.cu_k = {0, 7, 10};
  c.kv_lens.clear();
  c.with_probs = false;
  set3(c.d.q_strides, 0, 9 * 6, 6);
  set3(c.d.o_strides, 0, 9 * 4, 4);
  set3(c.d.k_strides, 0, 10 * 6, 6);
  set3(c.d.v_strides, 0, 10 * 4, 4);
  c.alibi = c.sinks = true;
  c.d.softcap = 30.0f;
  return c;
}

KvCall valid_paged() {
  KvCall c = valid_plain();
  set3(c.d.k_strides, 0, 0, 0);
  set3(c.d.v_strides, 0, 0, 0);
  c.d.page_size = 2, c.d.block_table_stride = 4, c.d.num_pages = 8;
  c.block_table = {3, 0, 6, 5, 1, 7, 2, 4};
  return c;
}

ak_status call(const KvCall &c, Buffers &buf) {
  static const float kSlopes[4] = {0.5f, 0.25f, 0.125f, 0.0625f};
  static const float kSinks[4] = {0.0f, 1.0f, -1.0f, 2.0f};
  PaddedDesc pd{};
  pd.d = c.d;
  buf.kv_lens = c.kv_lens;
  buf.block_table = c.block_table;
  pd.d.bias = c.with_bias ? buf.bias.mid() : nullptr;
  pd.d.kv_lens = buf.kv_lens.empty() ? nullptr : buf.kv_lens.data();
  pd.d.block_table = buf.block_table.empty() ? nullptr : buf.block_table.data();
  pd.d.lse = buf.lse.mid();
  pd.d.probs = c.with_probs ? buf.probs.mid() : nullptr;
  if (c.alibi) pd.d.alibi_slopes = kSlopes;
  if (c.sinks) pd.d.sinks = kSinks;
  if (!c.cu_q.empty()) pd.d.cu_seqlens_q = c.cu_q.data();
  if (!c.cu_k.empty()) pd.d.cu_seqlens_k = c.cu_k.data();
  return ak_attention(&pd.d, buf.q.mid(), c.null_k ? nullptr : buf.k.mid(),
                      c.null_v ? nullptr : buf.v.mid(), buf.out.mid());
}

::testing::AssertionResult all_untouched(const Buffers &b) {
  const std::pair<const Canary *, const char *> all[] = {
      {&b.q, "q"},     {&b.k, "k"},     {&b.v, "v"},        {&b.bias, "bias"},
      {&b.out, "out"}, {&b.lse, "lse"}, {&b.probs, "probs"}};
  for (const auto &[c, name] : all) {
    auto r = untouched(*c, name, Canary::kMid);
    if (!r) return r;
  }
  return ::testing::AssertionSuccess();
}

bool mentions_word(const std::string &text, const std::string &word) {
  auto ident = [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_'; };
  for (std::size_t pos = text.find(word); pos != std::string::npos;
       pos = text.find(word, pos + 1)) {
    const std::size_t end = pos + word.size();
    if ((pos == 0 || !ident(text[pos - 1])) && (end == text.size() || !ident(text[end])))
      return true;
  }
  return false;
}

struct BadCase {
  std::string name;
  ak_status expected;
  std::vector<std::string> mentions;
  KvCall call;
};

std::string tag(std::int64_t v) {
  if (v == kI64Min) return "int64_min";
  if (v == kI32Min) return "int32_min";
  if (v == kI32Max) return "int32_max";
  return v < 0 ? "neg" + std::to_string(-v) : std::to_string(v);
}

std::vector<BadCase> bad_cases() {
  std::vector<BadCase> cases;
  auto add = [&](const std::string &name, ak_status st, std::vector<std::string> m, KvCall c) {
    cases.push_back({name, st, std::move(m), std::move(c)});
  };
  KvCall c;
  for (std::uint32_t size : {AK_ATTENTION_DESC_SIZE_0_1 - 1, AK_ATTENTION_DESC_SIZE_0_1 + 1,
                             AK_ATTENTION_DESC_SIZE_0_1 - 8, AK_ATTENTION_DESC_SIZE_0_1 + 8,
                             std::uint32_t{sizeof(ak_attention_desc)} - 1,
                             std::uint32_t{sizeof(ak_attention_desc)} + 1}) {
    c = valid_plain();
    c.d.struct_size = size;
    add("struct_size_" + std::to_string(size), AK_ERR_BAD_ARGUMENT, {"struct_size"}, c);
  }
  for (int t : {3, -1, kI32Min}) {
    c = valid_plain();
    c.d.k_type = t;
    add("k_type_" + tag(t), AK_ERR_BAD_ARGUMENT, {"k_type"}, c);
    c = valid_plain();
    c.d.v_type = t;
    add("v_type_" + tag(t), AK_ERR_BAD_ARGUMENT, {"v_type"}, c);
  }
  c = valid_paged();
  c.d.k_type = 3;
  add("k_type_3_paged", AK_ERR_BAD_ARGUMENT, {"k_type"}, c);
  const std::pair<const char *, float> bad_softcaps[] = {
      {"nan", kNaN}, {"inf", kInf}, {"neg_inf", -kInf}, {"negative", -1.0f}, {"neg_nan", -kNaN}};
  for (const auto &[name, v] : bad_softcaps) {
    c = valid_plain();
    c.d.softcap = v;
    add(std::string("softcap_") + name, AK_ERR_BAD_ARGUMENT, {"softcap"}, c);
  }
  // Packed sequences: offsets that do not start at 0, decrease or pass the
  // bound; batch strides; probs; keys given twice.
  const std::pair<const char *, std::vector<std::int32_t>> bad_cu_q[] = {
      {"start_1", {1, 5, 9}},
      {"decreasing", {0, 5, 4}},
      {"past_q_len", {0, 6, 9}},
      {"int32_min", {0, kI32Min, 9}},
      {"huge_step", {0, 5, kI32Max}}};
  for (const auto &[name, cu] : bad_cu_q) {
    c = valid_packed();
    c.cu_q = cu;
    add(std::string("cu_seqlens_q_") + name, AK_ERR_BAD_ARGUMENT, {"cu_seqlens_q"}, c);
  }
  const std::pair<const char *, std::vector<std::int32_t>> bad_cu_k[] = {
      {"start_neg1", {-1, 7, 10}}, {"decreasing", {0, 7, 6}}, {"past_kv_len", {0, 8, 10}}};
  for (const auto &[name, cu] : bad_cu_k) {
    c = valid_packed();
    c.cu_k = cu;
    add(std::string("cu_seqlens_k_") + name, AK_ERR_BAD_ARGUMENT, {"cu_seqlens_k"}, c);
  }
  const std::pair<const char *, std::int64_t(ak_attention_desc::*)[3]> batch_strides[] = {
      {"q_strides", &ak_attention_desc::q_strides},
      {"o_strides", &ak_attention_desc::o_strides},
      {"k_strides", &ak_attention_desc::k_strides},
      {"v_strides", &ak_attention_desc::v_strides}};
  for (const auto &[name, field] : batch_strides) {
    c = valid_packed();
    (c.d.*field)[0] = 100;
    add(std::string(name) + "_0_packed", AK_ERR_BAD_STRIDE, {name}, c);
  }
  c = valid_packed();
  c.with_probs = true;
  add("probs_with_cu_seqlens_q", AK_ERR_BAD_ARGUMENT, {"probs", "cu_seqlens_q"}, c);
  c = valid_packed();
  c.kv_lens = {7, 3};
  add("kv_lens_with_cu_seqlens_k", AK_ERR_BAD_ARGUMENT, {"kv_lens", "cu_seqlens_k"}, c);
  c = valid_paged();
  c.cu_k = {0, 7, 10};
  c.kv_lens.clear();
  add("block_table_with_cu_seqlens_k", AK_ERR_BAD_ARGUMENT, {"block_table", "cu_seqlens_k"}, c);
  c = valid_paged(); // packed queries over pages: batch 1's second page is still needed
  c.cu_q = {0, 2, 7}, c.with_probs = false;
  set3(c.d.q_strides, 0, 7 * 6, 6);
  set3(c.d.o_strides, 0, 7 * 4, 4);
  c.block_table[5] = -1;
  add("block_table_5_neg1_packed_queries", AK_ERR_BAD_ARGUMENT, {"block_table"}, c);
  c = valid_packed(); // 9 packed queries: rows past the first 9 would be out of q's span
  c.cu_q = {0, 5, 9};
  c.d.q_strides[1] = kI64Min / 2;
  add("q_strides_1_negative_packed", AK_ERR_BAD_STRIDE, {"q_strides"}, c);

  // Paging fields without a block table.
  const std::pair<const char *, std::int64_t ak_attention_desc::*> page_fields[] = {
      {"page_size", &ak_attention_desc::page_size},
      {"num_pages", &ak_attention_desc::num_pages},
      {"block_table_stride", &ak_attention_desc::block_table_stride}};
  for (const auto &[name, field] : page_fields)
    for (std::int64_t v : {std::int64_t{16}, std::int64_t{-1}}) {
      c = valid_plain();
      c.d.*field = v;
      add(std::string(name) + "_" + tag(v) + "_without_block_table", AK_ERR_BAD_ARGUMENT, {name},
          c);
    }
  const std::pair<const char *, std::int64_t(ak_attention_desc::*)[3]> pool_strides[] = {
      {"k_page_strides", &ak_attention_desc::k_page_strides},
      {"v_page_strides", &ak_attention_desc::v_page_strides}};
  for (const auto &[name, field] : pool_strides)
    for (int axis = 0; axis < 3; ++axis) {
      c = valid_plain();
      (c.d.*field)[axis] = 1;
      add(std::string(name) + "_" + std::to_string(axis) + "_without_block_table",
          AK_ERR_BAD_ARGUMENT, {name}, c);
      c = valid_paged();
      (c.d.*field)[axis] = -1;
      add(std::string(name) + "_" + std::to_string(axis) + "_negative", AK_ERR_BAD_STRIDE, {name},
          c);
    }

  // With a block table.
  for (std::int64_t v : {std::int64_t{0}, std::int64_t{-1}, kI64Min}) {
    c = valid_paged();
    c.d.page_size = v;
    add("page_size_" + tag(v), AK_ERR_BAD_ARGUMENT, {"page_size"}, c);
  }
  for (std::int64_t v : {std::int64_t{-1}, kI64Min}) {
    c = valid_paged();
    c.d.num_pages = v;
    add("num_pages_" + tag(v), AK_ERR_BAD_SHAPE, {"num_pages"}, c);
  }
  for (std::int64_t v : {std::int64_t{3}, std::int64_t{0}, std::int64_t{-1}}) {
    c = valid_paged(); // needs ceil(7 / 2) = 4
    c.d.block_table_stride = v;
    add("block_table_stride_" + tag(v), AK_ERR_BAD_STRIDE, {"block_table_stride"}, c);
  }
  c = valid_paged();
  c.d.page_size = 1; // now 7 pages per sequence
  add("block_table_stride_below_kv_len_pages", AK_ERR_BAD_STRIDE, {"block_table_stride"}, c);
  const std::pair<const char *, std::int64_t(ak_attention_desc::*)[3]> kv_strides[] = {
      {"k_strides", &ak_attention_desc::k_strides}, {"v_strides", &ak_attention_desc::v_strides}};
  for (const auto &[name, field] : kv_strides)
    for (int axis = 0; axis < 3; ++axis) {
      c = valid_paged();
      (c.d.*field)[axis] = 100;
      add(std::string(name) + "_" + std::to_string(axis) + "_with_block_table", AK_ERR_BAD_STRIDE,
          {name}, c);
    }
  // Page ids a visible key needs, out of [0, num_pages).
  for (std::int32_t id : {-1, 8, kI32Min, kI32Max})
    for (int entry : {0, 3, 5}) { // batch 0's first and last pages, batch 1's second
      c = valid_paged();
      c.block_table[static_cast<std::size_t>(entry)] = id;
      add("block_table_" + std::to_string(entry) + "_" + tag(id), AK_ERR_BAD_ARGUMENT,
          {"block_table"}, c);
    }
  c = valid_paged();
  c.d.k_type = AK_F16, c.d.v_type = AK_BF16;
  c.block_table[5] = 8;
  add("block_table_5_8_half", AK_ERR_BAD_ARGUMENT, {"block_table"}, c);
  c = valid_paged();
  c.d.num_pages = 7; // page 7 (batch 1's second) is needed
  add("num_pages_below_a_needed_id", AK_ERR_BAD_ARGUMENT, {"block_table", "num_pages"}, c);
  for (bool KvCall::*flag : {&KvCall::null_k, &KvCall::null_v}) {
    c = valid_paged();
    c.*flag = true;
    const char *name = flag == &KvCall::null_k ? "k" : "v";
    add(std::string(name) + "_null_paged", AK_ERR_NULL_POINTER, {name}, c);
  }
  // Pools whose extent overflows int64_t.
  const std::vector<std::string> any = {
      "k", "v", "num_pages", "page_size", "k_page_strides", "v_page_strides", "block_table"};
  c = valid_paged();
  c.d.num_pages = std::int64_t{1} << 61;
  add("num_pages_overflow", AK_ERR_OVERFLOW, any, c);
  c = valid_paged();
  c.d.page_size = std::int64_t{1} << 61;
  c.block_table = {0, 0};
  c.d.block_table_stride = 1;
  add("page_size_overflow", AK_ERR_OVERFLOW, any, c);
  return cases;
}

void PrintTo(const BadCase &c, std::ostream *os) { *os << c.name; }

class AttentionKvErrors : public ::testing::TestWithParam<BadCase> {};

TEST_P(AttentionKvErrors, RejectsWithoutWriting) {
  const BadCase &bc = GetParam();
  Buffers buf;
  ASSERT_EQ(ak_set_num_threads(-7), AK_ERR_BAD_ARGUMENT); // another message first
  const ak_status st = call(bc.call, buf);
  EXPECT_EQ(st, bc.expected) << "got " << ak_status_string(st) << ", expected "
                             << ak_status_string(bc.expected) << " (" << ak_last_error() << ")";
  const std::string msg = ak_last_error(), prefix = "ak_attention: ";
  ASSERT_EQ(msg.rfind(prefix, 0), 0u) << "message: " << msg;
  bool named = false;
  std::string want;
  for (const std::string &w : bc.mentions) {
    named = named || mentions_word(msg.substr(prefix.size()), w);
    want += (want.empty() ? "" : " or ") + w;
  }
  EXPECT_TRUE(named) << "message does not name " << want << ": " << msg;
  EXPECT_TRUE(all_untouched(buf));
  EXPECT_EQ(buf.kv_lens, bc.call.kv_lens);
  EXPECT_EQ(buf.block_table, bc.call.block_table);
}

INSTANTIATE_TEST_SUITE_P(, AttentionKvErrors, ::testing::ValuesIn(bad_cases()),
                         [](const ::testing::TestParamInfo<BadCase> &info) {
                           return info.param.name;
                         });

TEST(AttentionKvErrorsTable, NamesAreUnique) {
  std::set<std::string> names;
  for (const BadCase &bc : bad_cases()) EXPECT_TRUE(names.insert(bc.name).second) << bc.name;
}

// ------------------------------------------------- calls that succeed

struct GoodCase {
  std::string name;
  KvCall call;
};

std::vector<GoodCase> good_cases() {
  std::vector<GoodCase> cases;
  cases.push_back({"plain", valid_plain()});
  cases.push_back({"paged", valid_paged()});
  KvCall c = valid_paged();
  c.d.k_type = AK_F16, c.d.v_type = AK_BF16;
  cases.push_back({"paged_f16_bf16", c});
  c = valid_plain();
  c.d.k_type = AK_BF16, c.d.v_type = AK_F16;
  cases.push_back({"plain_bf16_f16", c});
  c = valid_paged(); // batch 1 sees keys 0..2: its pages 2 and 3 are never read
  c.block_table[6] = -1, c.block_table[7] = kI32Min;
  cases.push_back({"unneeded_pages_past_kv_lens", c});
  c = valid_paged();
  c.d.block_table_stride = 6; // two columns past the pages of kv_len, never read
  c.block_table = {3, 0, 6, 5, -1, kI32Max, 1, 7, 2, 4, 8, kI32Min};
  cases.push_back({"junk_past_the_pages_of_kv_len", c});
  c = valid_paged(); // top-left: batch 0's queries see keys 0..4; key 6's page is never read
  c.d.mask = AK_MASK_CAUSAL_TOP_LEFT;
  c.block_table[3] = -1;
  cases.push_back({"unneeded_page_in_the_causal_future", c});
  c = valid_paged(); // window 0: batch 0's queries see keys 2..6; page 0 is never read
  c.d.window_left = 0;
  c.block_table[0] = 8;
  cases.push_back({"unneeded_page_left_of_the_window", c});
  c = valid_paged(); // nothing visible: an empty pool, every id unread
  c.kv_lens = {0, 0};
  c.d.num_pages = 0;
  c.null_k = c.null_v = true;
  c.block_table = {-1, -1, -1, -1, -1, -1, -1, -1};
  cases.push_back({"empty_pool_null_k_v", c});
  c = valid_paged();
  c.d.kv_len = 0, c.d.block_table_stride = 0, c.d.num_pages = 0;
  c.kv_lens = {0, 0}, c.block_table = {-1}, c.with_bias = false;
  c.null_k = c.null_v = true;
  cases.push_back({"kv_len_0_paged", c});
  cases.push_back({"packed_softcap_alibi_sinks", valid_packed()});
  c = valid_packed(); // queries packed, keys per entry (kv_lens) through a block table
  c.cu_k.clear();
  c.kv_lens = {7, 3};
  c.d.k_strides[0] = c.d.v_strides[0] = 0;
  {
    const KvCall paged = valid_paged();
    std::memcpy(c.d.k_strides, paged.d.k_strides, sizeof c.d.k_strides);
    std::memcpy(c.d.v_strides, paged.d.v_strides, sizeof c.d.v_strides);
    c.d.page_size = paged.d.page_size, c.d.block_table_stride = paged.d.block_table_stride;
    c.d.num_pages = paged.d.num_pages, c.block_table = paged.block_table;
  }
  cases.push_back({"packed_queries_paged_keys", c});
  // Pages align per sequence: entry 0's 2 queries (of q_len 5) with a
  // window of 0 see keys 5 and 6 only, so its page 1 (keys 2, 3), which 5
  // queries would need, is never read.
  c = valid_paged();
  c.cu_q = {0, 2, 7}, c.with_probs = false, c.d.window_left = 0;
  set3(c.d.q_strides, 0, 7 * 6, 6);
  set3(c.d.o_strides, 0, 7 * 4, 4);
  c.block_table[0] = -1, c.block_table[1] = kI32Min;
  cases.push_back({"packed_queries_unneeded_pages_per_sequence", c});
  return cases;
}

void PrintTo(const GoodCase &c, std::ostream *os) { *os << c.name; }

class AttentionKvAccepted : public ::testing::TestWithParam<GoodCase> {};

TEST_P(AttentionKvAccepted, SucceedsWithoutTouchingInputs) {
  Buffers buf;
  for (Canary *in : {&buf.q, &buf.k, &buf.v, &buf.bias}) // finite: no excuse to fail
    for (float &x : in->data) x = 0.25f;
  const ak_status st = call(GetParam().call, buf);
  EXPECT_EQ(st, AK_OK) << ak_status_string(st) << ": " << ak_last_error();
  EXPECT_EQ(buf.block_table, GetParam().call.block_table);
  for (std::int64_t e = 0; e < 4; ++e) EXPECT_FALSE(std::isnan(buf.out.mid()[e])) << e;
}

INSTANTIATE_TEST_SUITE_P(, AttentionKvAccepted, ::testing::ValuesIn(good_cases()),
                         [](const ::testing::TestParamInfo<GoodCase> &info) {
                           return info.param.name;
                         });

} // namespace
} // namespace ak_test
