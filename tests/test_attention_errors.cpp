// Misuse of ak_attention and ak_mha_self_attention: every field of
// ak_attention_desc and every pointer argument against the kinds of bad value
// docs/design.md lists, and the degenerate calls that must succeed.
//
// A rejected call must return the exact status, leave a message in
// ak_last_error() that starts with the function's name and names the
// offending field (as a whole word: "q_strides", "kv_lens", ...), and leave
// every buffer it was given, inputs and outputs (out, lse, probs), bit for bit
// as it was.
//
// Every float buffer is kBufferLen floats and the library gets a pointer to
// its middle, so that a wrongly accepted call with the small shapes and
// strides below (negative ones included) stays inside memory and shows up as a
// failed assertion rather than a crash. NULL pointers and the overflow cases
// cannot be backed by memory; each table entry is its own test, so a crash
// there fails only that entry.
#include <gtest/gtest.h>

#include <attnkern.h>

#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <limits>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "misuse_support.hpp"

namespace ak_test {
namespace {

constexpr std::int64_t kBufferLen = std::int64_t{1} << 15;
constexpr std::int64_t kI64Min = std::numeric_limits<std::int64_t>::min();
constexpr std::int64_t kI64Max = std::numeric_limits<std::int64_t>::max();

// kHuge, bits_of, as_c_enum, canary buffers, ...: shared with
// test_capi_errors.cpp. The library gets each buffer's mid().
using namespace misuse;
using Canary = misuse::Canary<kBufferLen>;

struct Buffers {
  Canary q{1}, k{2}, v{3}, bias{4}, out{5}, lse{6}, probs{7};
  Canary x{8}, w_q{9}, w_k{10}, w_v{11};
  std::vector<std::int32_t> kv_lens; // copied from the call; checked unchanged
};

::testing::AssertionResult all_untouched(const Buffers &b) {
  const std::pair<const Canary *, const char *> all[] = {
      {&b.q, "q"},     {&b.k, "k"},     {&b.v, "v"},         {&b.bias, "bias"},
      {&b.out, "out"}, {&b.lse, "lse"}, {&b.probs, "probs"}, {&b.x, "x"},
      {&b.w_q, "w_q"}, {&b.w_k, "w_k"}, {&b.w_v, "w_v"}};
  for (const auto &[c, name] : all) {
    auto r = untouched(*c, name, Canary::kMid);
    if (!r) return r;
  }
  return ::testing::AssertionSuccess();
}

bool is_ident(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Whether `word` occurs in `text` as a whole identifier.
bool mentions_word(const std::string &text, const std::string &word) {
  for (std::size_t pos = text.find(word); pos != std::string::npos;
       pos = text.find(word, pos + 1)) {
    const std::size_t end = pos + word.size();
    if ((pos == 0 || !is_ident(text[pos - 1])) && (end == text.size() || !is_ident(text[end])))
      return true;
  }
  return false;
}

// Leaves another function's message in ak_last_error(), so that the message
// checked afterwards is known to come from the call under test.
void prime_last_error() {
  ASSERT_EQ(ak_set_num_threads(-7), AK_ERR_BAD_ARGUMENT);
  ASSERT_EQ(std::string(ak_last_error()).rfind("ak_set_num_threads: ", 0), 0u);
}

// --------------------------------------------------------- ak_attention

// A desc followed by zeroed room: a library that wrongly trusts a larger
// struct_size reads zeros instead of leaving the object.
struct PaddedDesc {
  ak_attention_desc d;
  unsigned char room[64];
};

struct AttnCall {
  ak_attention_desc d;
  std::vector<std::int32_t> kv_lens;
  bool null_desc = false, null_q = false, null_k = false, null_v = false, null_out = false;
  bool with_bias = true, with_lse = true, with_probs = true;
};

void set3(std::int64_t dst[3], std::int64_t a, std::int64_t b, std::int64_t c) {
  dst[0] = a;
  dst[1] = b;
  dst[2] = c;
}

// A valid call: 2 batches, 4 query heads on 2 kv heads, 5 queries, 7 keys,
// head_dim 6, head_dim_v 4 (distinct, so that a check against the wrong one
// shows), a causal mask, a full bias, kv_lens, lse and probs, explicit
// contiguous strides.
AttnCall valid_attention() {
  AttnCall c;
  ak_attention_desc_init(&c.d);
  ak_attention_desc &d = c.d;
  d.batch = 2;
  d.num_heads = 4;
  d.num_kv_heads = 2;
  d.q_len = 5;
  d.kv_len = 7;
  d.head_dim = 6;
  d.head_dim_v = 4;
  d.mask = AK_MASK_CAUSAL_BOTTOM_RIGHT;
  set3(d.bias_strides, 4 * 5 * 7, 5 * 7, 7);
  set3(d.q_strides, 4 * 5 * 6, 5 * 6, 6);
  set3(d.k_strides, 2 * 7 * 6, 7 * 6, 6);
  set3(d.v_strides, 2 * 7 * 4, 7 * 4, 4);
  set3(d.o_strides, 4 * 5 * 4, 5 * 4, 4);
  c.kv_lens = {7, 3};
  return c;
}

// The same with all-zero (contiguous) strides, for the overflow cases where
// explicit strides would be caught first as too small.
AttnCall valid_attention_contiguous() {
  AttnCall c = valid_attention();
  set3(c.d.q_strides, 0, 0, 0);
  set3(c.d.k_strides, 0, 0, 0);
  set3(c.d.v_strides, 0, 0, 0);
  set3(c.d.o_strides, 0, 0, 0);
  return c;
}

ak_status call_attention(const AttnCall &c, Buffers &buf) {
  PaddedDesc pd{};
  pd.d = c.d;
  buf.kv_lens = c.kv_lens;
  pd.d.bias = c.with_bias ? buf.bias.mid() : nullptr;
  pd.d.kv_lens = buf.kv_lens.empty() ? nullptr : buf.kv_lens.data();
  pd.d.lse = c.with_lse ? buf.lse.mid() : nullptr;
  pd.d.probs = c.with_probs ? buf.probs.mid() : nullptr;
  return ak_attention(c.null_desc ? nullptr : &pd.d, c.null_q ? nullptr : buf.q.mid(),
                      c.null_k ? nullptr : buf.k.mid(), c.null_v ? nullptr : buf.v.mid(),
                      c.null_out ? nullptr : buf.out.mid());
}

// -------------------------------------------------------------- the table

struct BadCase {
  std::string name;                  // unique, [A-Za-z0-9_]
  ak_status expected;                // the exact status
  std::string function;              // the message must start with "function: "
  std::vector<std::string> mentions; // and name one of these as a word
  std::function<ak_status(Buffers &)> call;
  std::vector<std::int32_t> kv_lens; // kv_lens handed over, to check unchanged
};

std::string num_tag(std::int64_t v) {
  if (v == kI64Min) return "int64_min";
  if (v == kI64Max) return "int64_max";
  return v < 0 ? "neg" + std::to_string(-v) : std::to_string(v);
}

void add_attention_cases(std::vector<BadCase> &cases) {
  const std::string fn = "ak_attention";
  auto add = [&](const std::string &tag, ak_status st, std::vector<std::string> mentions,
                 const AttnCall &c) {
    cases.push_back({"attention_" + tag, st, fn, std::move(mentions),
                     [c](Buffers &buf) { return call_attention(c, buf); }, c.kv_lens});
  };

  {
    AttnCall c = valid_attention();
    c.null_desc = true;
    add("desc_null", AK_ERR_NULL_POINTER, {"d", "desc"}, c);
  }
  for (const auto &[tag, size] : {std::pair<const char *, std::uint32_t>{"0", 0u},
                                  {"minus8", sizeof(ak_attention_desc) - 8},
                                  {"plus8", sizeof(ak_attention_desc) + 8}}) {
    AttnCall c = valid_attention();
    c.d.struct_size = size;
    add(std::string("struct_size_") + tag, AK_ERR_BAD_ARGUMENT, {"struct_size"}, c);
  }

  struct SizeField {
    const char *name;
    std::int64_t ak_attention_desc::*field;
  };
  const SizeField sizes[] = {{"batch", &ak_attention_desc::batch},
                             {"num_heads", &ak_attention_desc::num_heads},
                             {"num_kv_heads", &ak_attention_desc::num_kv_heads},
                             {"q_len", &ak_attention_desc::q_len},
                             {"kv_len", &ak_attention_desc::kv_len},
                             {"head_dim", &ak_attention_desc::head_dim},
                             {"head_dim_v", &ak_attention_desc::head_dim_v}};
  for (const SizeField &f : sizes)
    for (std::int64_t v : {std::int64_t{-1}, kI64Min}) {
      AttnCall c = valid_attention();
      c.d.*f.field = v;
      add(std::string(f.name) + "_" + num_tag(v), AK_ERR_BAD_SHAPE, {f.name}, c);
    }
  {
    AttnCall c = valid_attention();
    c.d.num_kv_heads = 3; // 4 % 3 != 0
    add("num_heads_not_multiple_of_num_kv_heads", AK_ERR_BAD_SHAPE, {"num_kv_heads", "num_heads"},
        c);
    c = valid_attention();
    c.d.num_heads = 2; // more kv heads than query heads
    c.d.num_kv_heads = 4;
    set3(c.d.q_strides, 2 * 5 * 6, 5 * 6, 6);
    set3(c.d.o_strides, 2 * 5 * 4, 5 * 4, 4);
    add("num_kv_heads_above_num_heads", AK_ERR_BAD_SHAPE, {"num_kv_heads", "num_heads"}, c);
    c = valid_attention();
    c.d.num_kv_heads = 0;
    add("num_kv_heads_0", AK_ERR_BAD_SHAPE, {"num_kv_heads"}, c);
    c = valid_attention();
    c.d.head_dim = 0;
    add("head_dim_0", AK_ERR_BAD_SHAPE, {"head_dim"}, c);
    c.d.head_dim_v = 0;
    add("head_dim_0_head_dim_v_0", AK_ERR_BAD_SHAPE, {"head_dim"}, c);
  }

  for (int v : {3, -1, std::numeric_limits<std::int32_t>::min()}) {
    AttnCall c = valid_attention();
    c.d.mask = v;
    add("mask_" + num_tag(v), AK_ERR_BAD_ARGUMENT, {"mask"}, c);
  }
  for (std::int64_t v : {std::int64_t{-2}, kI64Min}) {
    AttnCall c = valid_attention();
    c.d.window_left = v;
    add("window_left_" + num_tag(v), AK_ERR_BAD_ARGUMENT, {"window_left"}, c);
    c = valid_attention();
    c.d.window_right = v;
    add("window_right_" + num_tag(v), AK_ERR_BAD_ARGUMENT, {"window_right"}, c);
  }
  const std::pair<const char *, float> bad_scales[] = {
      {"nan", kNaN}, {"neg_nan", -kNaN}, {"negative", -0.5f}, {"inf", kInf}, {"neg_inf", -kInf}};
  for (const auto &[tag, v] : bad_scales) {
    AttnCall c = valid_attention();
    c.d.scale = v;
    add(std::string("scale_") + tag, AK_ERR_BAD_ARGUMENT, {"scale"}, c);
  }
  const std::pair<const char *, std::vector<std::int32_t>> bad_lens[] = {
      {"above_kv_len", {8, 3}},
      {"above_kv_len_last", {7, 8}},
      {"negative", {7, -1}},
      {"int32_min", {std::numeric_limits<std::int32_t>::min(), 3}}};
  for (const auto &[tag, lens] : bad_lens) {
    AttnCall c = valid_attention();
    c.kv_lens = lens;
    add(std::string("kv_lens_") + tag, AK_ERR_BAD_ARGUMENT, {"kv_lens"}, c);
  }

  // Strides: negative (each axis of each tensor, and next to zeros), a seq
  // stride that makes rows overlap.
  struct StrideField {
    const char *name, *tensor;
    std::int64_t (ak_attention_desc::*field)[3];
  };
  const StrideField strides[] = {{"q_strides", "q", &ak_attention_desc::q_strides},
                                 {"k_strides", "k", &ak_attention_desc::k_strides},
                                 {"v_strides", "v", &ak_attention_desc::v_strides},
                                 {"o_strides", "out", &ak_attention_desc::o_strides},
                                 {"bias_strides", "bias", &ak_attention_desc::bias_strides}};
  for (const StrideField &f : strides) {
    for (int axis = 0; axis < 3; ++axis) {
      AttnCall c = valid_attention();
      (c.d.*f.field)[axis] = -1;
      add(std::string(f.name) + "_" + std::to_string(axis) + "_negative", AK_ERR_BAD_STRIDE,
          {f.name, f.tensor}, c);
    }
    AttnCall c = valid_attention();
    set3(c.d.*f.field, 0, 0, -1);
    add(std::string(f.name) + "_negative_among_zeros", AK_ERR_BAD_STRIDE, {f.name, f.tensor}, c);
  }
  {
    const std::pair<const StrideField *, std::int64_t> small_seq[] = {
        {&strides[0], 5}, {&strides[1], 5}, {&strides[2], 3}, {&strides[3], 3}};
    for (const auto &[f, v] : small_seq) {
      AttnCall c = valid_attention();
      (c.d.*f->field)[2] = v; // one below its row length (head_dim 6, head_dim_v 4)
      add(std::string(f->name) + "_seq_below_row_length", AK_ERR_BAD_STRIDE, {f->name, f->tensor},
          c);
    }
  }
  {
    // out rows of different (b, h, s) that share memory.
    const struct {
      const char *tag;
      std::int64_t s[3];
    } overlaps[] = {
        {"head_0", {80, 0, 4}},              // every head on the same rows
        {"batch_0", {0, 20, 4}},             // both batches on the same rows
        {"head_eq_seq", {80, 4, 4}},         // (h + 1, s) is (h, s + 1)
        {"head_19", {80, 19, 4}},            // head h + 1 starts inside the last row of head h
        {"batch_79", {79, 20, 4}},           // batch 1 starts inside the last row of batch 0
        {"seq_0", {80, 20, 0}},              // every query on the same row
        {"bshd_seq_too_small", {80, 4, 12}}, // [b, s, h, d] with the seq stride for 3 heads
    };
    for (const auto &o : overlaps) {
      AttnCall c = valid_attention();
      set3(c.d.o_strides, o.s[0], o.s[1], o.s[2]);
      add(std::string("o_strides_overlap_") + o.tag, AK_ERR_BAD_STRIDE, {"o_strides", "out"}, c);
    }
  }

  // Sizes whose extents overflow int64_t (or their byte count does).
  const std::vector<std::string> any_size = {
      "q",        "k",          "v",         "out",       "q_len",        "kv_len",
      "head_dim", "head_dim_v", "batch",     "num_heads", "num_kv_heads", "probs",
      "lse",      "bias",       "q_strides", "k_strides", "v_strides",    "o_strides"};
  {
    AttnCall c = valid_attention_contiguous();
    c.d.q_len = kHuge;
    c.d.head_dim = kHuge;
    add("q_len_head_dim_overflow", AK_ERR_OVERFLOW, any_size, c);
    c = valid_attention_contiguous();
    c.d.kv_len = kHuge;
    c.d.head_dim = kHuge;
    add("kv_len_head_dim_overflow", AK_ERR_OVERFLOW, any_size, c);
    c = valid_attention_contiguous();
    c.d.kv_len = kHuge;
    c.d.head_dim_v = kHuge;
    add("kv_len_head_dim_v_overflow", AK_ERR_OVERFLOW, any_size, c);
    c = valid_attention_contiguous();
    c.d.batch = kHuge;
    c.d.num_heads = kHuge;
    c.d.num_kv_heads = kHuge;
    c.kv_lens.clear(); // kv_lens[batch] cannot be backed by memory
    add("batch_num_heads_overflow", AK_ERR_OVERFLOW, any_size, c);
    c = valid_attention_contiguous();
    c.d.q_len = kI64Max;
    add("q_len_int64_max", AK_ERR_OVERFLOW, any_size, c);
    // q, k, v and out stay below 2^36 floats; probs [1, 1, 2^31, 2^31] is 2^64 bytes.
    c = valid_attention_contiguous();
    c.d.batch = c.d.num_heads = c.d.num_kv_heads = 1;
    c.d.q_len = c.d.kv_len = kBytesOverflow;
    c.d.head_dim = c.d.head_dim_v = 1;
    c.with_bias = false;
    c.kv_lens = {7};
    add("probs_bytes_overflow", AK_ERR_OVERFLOW, {"probs"}, c);
    // Explicit strides whose last row lies past int64_t.
    c = valid_attention();
    c.d.q_strides[2] = std::int64_t{1} << 62;
    add("q_strides_span_overflow", AK_ERR_OVERFLOW, {"q_strides", "q"}, c);
    c = valid_attention();
    c.d.o_strides[0] = kI64Max - 10;
    add("o_strides_span_overflow", AK_ERR_OVERFLOW, {"o_strides", "out"}, c);
    c = valid_attention();
    c.d.k_strides[1] = std::int64_t{1} << 62; // 2^62 floats: 2^64 bytes
    add("k_strides_span_bytes_overflow", AK_ERR_OVERFLOW, {"k_strides", "k"}, c);
    // Each part of a span in range, their sum not: strides of 2^58 over 2
    // batches, 4 heads and 5 rows add up to 8 x 2^58 = 2^61 floats and a
    // row, whose byte count passes 2^63 (q, and bias).
    const std::int64_t s58 = std::int64_t{1} << 58;
    c = valid_attention();
    set3(c.d.q_strides, s58, s58, s58);
    add("q_strides_span_sum_overflow", AK_ERR_OVERFLOW, {"q"}, c);
    c = valid_attention();
    set3(c.d.bias_strides, s58, s58, s58);
    add("bias_strides_span_sum_overflow", AK_ERR_OVERFLOW, {"bias span"}, c);
  }

  // NULL tensors with work to do.
  for (const char *which : {"q", "k", "v", "out"}) {
    AttnCall c = valid_attention();
    bool &flag = which[0] == 'q'   ? c.null_q
                 : which[0] == 'k' ? c.null_k
                 : which[0] == 'v' ? c.null_v
                                   : c.null_out;
    flag = true;
    add(std::string(which) + "_null", AK_ERR_NULL_POINTER, {which}, c);
  }
  {
    // kv_len 0 leaves no k, v to read, but out still gets its zero rows (and q
    // still has an extent).
    AttnCall c = valid_attention();
    c.d.kv_len = 0;
    c.kv_lens = {0, 0};
    c.with_bias = false;
    c.null_k = c.null_v = true;
    AttnCall o = c;
    o.null_out = true;
    add("out_null_kv_len_0", AK_ERR_NULL_POINTER, {"out"}, o);
    AttnCall q = c;
    q.null_q = true;
    add("q_null_kv_len_0", AK_ERR_NULL_POINTER, {"q"}, q);
  }
}

// ------------------------------------------------ ak_mha_self_attention

struct MhaCall {
  std::int64_t n_tokens = 5, d_model = 4, num_heads = 2, d_k = 3, d_v = 2;
  int mask = AK_MASK_CAUSAL_TOP_LEFT;
  bool null_x = false, null_w_q = false, null_w_k = false, null_w_v = false, null_out = false;
};

ak_status call_mha(const MhaCall &c, Buffers &buf) {
  return ak_mha_self_attention(
      c.n_tokens, c.d_model, c.num_heads, c.d_k, c.d_v, c.null_x ? nullptr : buf.x.mid(),
      c.null_w_q ? nullptr : buf.w_q.mid(), c.null_w_k ? nullptr : buf.w_k.mid(),
      c.null_w_v ? nullptr : buf.w_v.mid(), as_c_enum<ak_mask>(c.mask),
      c.null_out ? nullptr : buf.out.mid());
}

void add_mha_cases(std::vector<BadCase> &cases) {
  const std::string fn = "ak_mha_self_attention";
  auto add = [&](const std::string &tag, ak_status st, std::vector<std::string> mentions,
                 const MhaCall &c) {
    cases.push_back({"mha_" + tag,
                     st,
                     fn,
                     std::move(mentions),
                     [c](Buffers &buf) { return call_mha(c, buf); },
                     {}});
  };
  struct SizeField {
    const char *name;
    std::int64_t MhaCall::*field;
  };
  const SizeField sizes[] = {{"n_tokens", &MhaCall::n_tokens},
                             {"d_model", &MhaCall::d_model},
                             {"num_heads", &MhaCall::num_heads},
                             {"d_k", &MhaCall::d_k},
                             {"d_v", &MhaCall::d_v}};
  for (const SizeField &f : sizes)
    for (std::int64_t v : {std::int64_t{-1}, kI64Min}) {
      MhaCall c;
      c.*f.field = v;
      add(std::string(f.name) + "_" + num_tag(v), AK_ERR_BAD_SHAPE, {f.name}, c);
    }
  {
    MhaCall c;
    c.d_k = 0; // the scale 1/sqrt(d_k) does not exist
    add("d_k_0", AK_ERR_BAD_SHAPE, {"d_k"}, c);
  }
  for (int v : {3, -1}) {
    MhaCall c;
    c.mask = v;
    add("mask_" + num_tag(v), AK_ERR_BAD_ARGUMENT, {"mask"}, c);
  }
  const struct {
    const char *name;
    bool MhaCall::*flag;
  } pointers[] = {{"x", &MhaCall::null_x},
                  {"w_q", &MhaCall::null_w_q},
                  {"w_k", &MhaCall::null_w_k},
                  {"w_v", &MhaCall::null_w_v},
                  {"out", &MhaCall::null_out}};
  for (const auto &p : pointers) {
    MhaCall c;
    c.*p.flag = true;
    add(std::string(p.name) + "_null", AK_ERR_NULL_POINTER, {p.name}, c);
  }
  const std::vector<std::string> any_size = {"x",        "w_q",     "w_k",       "w_v", "out",
                                             "n_tokens", "d_model", "num_heads", "d_k", "d_v"};
  {
    MhaCall c;
    c.n_tokens = kHuge;
    c.d_model = kHuge;
    add("x_overflow", AK_ERR_OVERFLOW, any_size, c);
    c = MhaCall{};
    c.num_heads = kHuge;
    c.d_model = kHuge;
    add("w_overflow", AK_ERR_OVERFLOW, any_size, c);
    c = MhaCall{};
    c.n_tokens = kBytesOverflow;
    c.num_heads = 1;
    c.d_model = 1;
    c.d_k = 1;
    c.d_v = kBytesOverflow;
    add("out_bytes_overflow", AK_ERR_OVERFLOW, any_size, c);
  }
}

std::vector<BadCase> all_bad_cases() {
  std::vector<BadCase> cases;
  add_attention_cases(cases);
  add_mha_cases(cases);
  return cases;
}

void PrintTo(const BadCase &c, std::ostream *os) { *os << c.name; }

class AttentionErrorsBadInput : public ::testing::TestWithParam<BadCase> {};

TEST_P(AttentionErrorsBadInput, RejectsWithoutWriting) {
  const BadCase &bc = GetParam();
  Buffers buf;
  prime_last_error();

  const ak_status st = bc.call(buf);

  EXPECT_EQ(st, bc.expected) << "got " << ak_status_string(st) << ", expected "
                             << ak_status_string(bc.expected) << " (" << ak_last_error() << ")";
  const std::string msg = ak_last_error();
  EXPECT_FALSE(msg.empty());
  const std::string prefix = bc.function + ": ";
  ASSERT_EQ(msg.rfind(prefix, 0), 0u) << "message: " << msg;
  const std::string detail = msg.substr(prefix.size());
  bool named = false;
  for (const std::string &w : bc.mentions) named = named || mentions_word(detail, w);
  std::string want;
  for (const std::string &w : bc.mentions) want += (want.empty() ? "" : " or ") + w;
  EXPECT_TRUE(named) << "message does not name " << want << ": " << msg;
  EXPECT_TRUE(all_untouched(buf));
  EXPECT_EQ(buf.kv_lens, bc.kv_lens);
}

INSTANTIATE_TEST_SUITE_P(, AttentionErrorsBadInput, ::testing::ValuesIn(all_bad_cases()),
                         [](const ::testing::TestParamInfo<BadCase> &info) {
                           return info.param.name;
                         });

TEST(AttentionErrorsTable, NamesAreUnique) {
  std::set<std::string> names;
  for (const BadCase &bc : all_bad_cases()) EXPECT_TRUE(names.insert(bc.name).second) << bc.name;
}

// The table's starting points are valid: each entry changes one thing.
TEST(AttentionErrorsTable, BaseCallsAreValid) {
  for (const AttnCall &c : {valid_attention(), valid_attention_contiguous()}) {
    Buffers buf;
    // Finite inputs (the canaries are NaN), so that the call has no excuse.
    for (Canary *in : {&buf.q, &buf.k, &buf.v, &buf.bias})
      std::fill(in->data.begin(), in->data.end(), 0.5f);
    EXPECT_EQ(call_attention(c, buf), AK_OK) << ak_last_error();
    EXPECT_FALSE(std::isnan(buf.out.mid()[0]));
  }
  Buffers buf;
  EXPECT_EQ(call_mha(MhaCall{}, buf), AK_OK) << ak_last_error();
}

// ------------------------------------------------- calls that succeed

struct GoodCase {
  std::string name;
  std::function<ak_status(Buffers &)> call;
  bool writes; // false: every buffer must be untouched
};

std::vector<GoodCase> all_good_cases() {
  std::vector<GoodCase> cases;
  auto add = [&](const std::string &tag, const AttnCall &c, bool writes) {
    cases.push_back(
        {"attention_" + tag, [c](Buffers &buf) { return call_attention(c, buf); }, writes});
  };
  AttnCall c = valid_attention();
  c.d.batch = 0;
  c.kv_lens.clear();
  add("batch_0", c, false);
  c.null_q = c.null_k = c.null_v = c.null_out = true;
  c.with_bias = c.with_lse = c.with_probs = false;
  add("batch_0_all_null", c, false);
  c.d.head_dim = c.d.head_dim_v = 0; // no work: head_dim 0 is fine
  set3(c.d.q_strides, 0, 0, 0);
  set3(c.d.k_strides, 0, 0, 0);
  set3(c.d.v_strides, 0, 0, 0);
  set3(c.d.o_strides, 0, 0, 0);
  add("batch_0_head_dim_0_all_null", c, false);

  c = valid_attention();
  c.d.num_heads = c.d.num_kv_heads = 0;
  add("heads_0", c, false);
  c.null_q = c.null_k = c.null_v = c.null_out = true;
  c.with_bias = c.with_lse = c.with_probs = false;
  add("heads_0_all_null", c, false);

  c = valid_attention();
  c.d.q_len = 0;
  add("q_len_0", c, false);
  c.null_q = c.null_out = true;
  c.with_bias = c.with_lse = c.with_probs = false;
  add("q_len_0_null_q_out", c, false);

  // Empty with the default strides (all 0, which the library fills in from
  // the sizes) and with the contiguous ones spelled out, {h*s*d, s*d, d},
  // which are 0 where s = 0: no rows, so none overlap.
  c = valid_attention_contiguous();
  c.d.q_len = 0;
  add("q_len_0_default_strides", c, false);
  c = valid_attention();
  c.d.q_len = 0;
  set3(c.d.q_strides, 0, 0, 6);
  set3(c.d.o_strides, 0, 0, 4);
  add("q_len_0_contiguous_strides", c, false);
  c = valid_attention_contiguous();
  c.d.num_heads = c.d.num_kv_heads = 0;
  add("heads_0_default_strides", c, false);
  c = valid_attention_contiguous();
  c.d.batch = 0;
  c.kv_lens.clear();
  add("batch_0_default_strides", c, false);

  c = valid_attention();
  c.d.kv_len = 0;
  c.kv_lens = {0, 0};
  c.null_k = c.null_v = true;
  c.with_bias = false;
  add("kv_len_0_null_k_v", c, true);

  c = valid_attention();
  c.d.v_strides[2] = 5; // below head_dim 6, at least head_dim_v 4
  add("v_seq_stride_between_head_dim_v_and_head_dim", c, true);
  c = valid_attention();
  set3(c.d.o_strides, 5 * 4 * 4, 4, 4 * 4); // [b, s, h, d]
  add("o_strides_bshd", c, true);
  c = valid_attention();
  set3(c.d.bias_strides, 0, 0, 7);
  add("bias_broadcast", c, true);
  c = valid_attention();
  c.with_bias = c.with_lse = c.with_probs = false;
  c.kv_lens.clear();
  add("no_optional_pointers", c, true);
  c = valid_attention();
  c.d.window_left = c.d.window_right = kI64Max; // must not overflow d(i) -+ window
  c.d.mask = AK_MASK_NONE;
  add("windows_int64_max", c, true);

  MhaCall m;
  m.num_heads = 0;
  cases.push_back({"mha_heads_0", [m](Buffers &buf) { return call_mha(m, buf); }, false});
  m = MhaCall{};
  m.n_tokens = 0;
  m.null_x = m.null_out = true;
  cases.push_back({"mha_n_tokens_0_null", [m](Buffers &buf) { return call_mha(m, buf); }, false});
  return cases;
}

void PrintTo(const GoodCase &c, std::ostream *os) { *os << c.name; }

class AttentionErrorsAccepted : public ::testing::TestWithParam<GoodCase> {};

TEST_P(AttentionErrorsAccepted, Succeeds) {
  Buffers buf;
  const ak_status st = GetParam().call(buf);
  EXPECT_EQ(st, AK_OK) << ak_status_string(st) << ": " << ak_last_error();
  if (!GetParam().writes) {
    EXPECT_TRUE(all_untouched(buf));
  }
  for (const Canary *in : {&buf.q, &buf.k, &buf.v, &buf.bias, &buf.x, &buf.w_q, &buf.w_k, &buf.w_v})
    EXPECT_TRUE(untouched(*in, "an input", Canary::kMid));
}

INSTANTIATE_TEST_SUITE_P(, AttentionErrorsAccepted, ::testing::ValuesIn(all_good_cases()),
                         [](const ::testing::TestParamInfo<GoodCase> &info) {
                           return info.param.name;
                         });

// A window wider than any sequence (up to INT64_MAX) is the same as none.
TEST(AttentionErrorsEdges, HugeWindowsEqualNoWindow) {
  for (int mask : {AK_MASK_NONE, AK_MASK_CAUSAL_TOP_LEFT, AK_MASK_CAUSAL_BOTTOM_RIGHT}) {
    std::vector<float> results[2];
    for (int huge = 0; huge < 2; ++huge) {
      Buffers buf;
      for (Canary *in : {&buf.q, &buf.k, &buf.v, &buf.bias})
        for (std::size_t i = 0; i < in->data.size(); ++i)
          in->data[i] = static_cast<float>((i * 2654435761u) % 1000) / 500.0f - 1.0f;
      AttnCall c = valid_attention();
      c.d.mask = mask;
      if (huge) c.d.window_left = c.d.window_right = kI64Max;
      ASSERT_EQ(call_attention(c, buf), AK_OK) << ak_last_error();
      results[huge] = buf.out.data;
      results[huge].insert(results[huge].end(), buf.lse.data.begin(), buf.lse.data.end());
      results[huge].insert(results[huge].end(), buf.probs.data.begin(), buf.probs.data.end());
    }
    ASSERT_EQ(0,
              std::memcmp(results[0].data(), results[1].data(), results[0].size() * sizeof(float)))
        << "mask " << mask;
  }
}

} // namespace
} // namespace ak_test
