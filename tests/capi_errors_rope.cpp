// The misuse table's entries for ak_rope and ak_embedding (run by
// test_capi_errors.cpp: exact status, a message naming the argument, every
// buffer untouched), and their empty calls, which must succeed and write
// nothing.
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "capi_errors_table.hpp"

namespace ak_test {
namespace capi_errors {

using misuse::as_c_enum;
using misuse::kHuge;
using misuse::kInf;
using misuse::kNaN;

void add_rope_cases(std::vector<BadCase> &cases) {
  const std::string fn = "ak_rope";
  struct Call {
    std::int64_t batch = 2, seq_len = 3, heads = 2, head_dim = 8, rotary_dim = 0;
    int style = AK_ROPE_NEOX;
    std::vector<std::int32_t> positions{5, 6, 7, 0, -3, 1 << 24}; // empty: NULL
    float theta = 10000.0f;
    bool user_freq = false, null_x = false;
    std::vector<std::int64_t> strides; // empty: NULL
  };
  auto add = [&](const std::string &tag, ak_status st, const std::string &mentions, Call c) {
    cases.push_back({fn + "_" + tag, st, fn, mentions, [c](Buffers &buf) {
                       return ak_rope(c.batch, c.seq_len, c.heads, c.head_dim, c.rotary_dim,
                                      as_c_enum<ak_rope_style>(c.style),
                                      c.positions.empty() ? nullptr : c.positions.data(), c.theta,
                                      c.user_freq ? buf.in0.get() : nullptr,
                                      c.null_x ? nullptr : buf.out.get(),
                                      c.strides.empty() ? nullptr : c.strides.data());
                     }});
  };
  const struct {
    const char *name;
    std::int64_t Call::*field;
  } sizes[] = {{"batch", &Call::batch},
               {"seq_len", &Call::seq_len},
               {"num_heads", &Call::heads},
               {"head_dim", &Call::head_dim},
               {"rotary_dim", &Call::rotary_dim}};
  for (const auto &s : sizes) {
    Call c;
    c.*s.field = -1;
    add(std::string(s.name) + "_neg1", AK_ERR_BAD_SHAPE, std::string(s.name) + " = -1", c);
  }
  for (int v : {2, -1}) {
    Call c;
    c.style = v;
    add(std::string("style_") + (v < 0 ? "neg1" : "2"), AK_ERR_BAD_ARGUMENT,
        "style = " + std::to_string(v), c);
  }
  Call c;
  c.rotary_dim = 3;
  add("rotary_dim_odd", AK_ERR_BAD_SHAPE, "rotary_dim = 3", c);
  c.rotary_dim = 10;
  add("rotary_dim_past_head_dim", AK_ERR_BAD_SHAPE, "rotary_dim = 10", c);
  c = Call{};
  c.head_dim = 7;
  add("rotary_dim_0_odd_head_dim", AK_ERR_BAD_SHAPE, "rotary_dim = 0", c);
  const struct {
    const char *tag;
    float theta;
  } bad_thetas[] = {{"zero", 0.0f}, {"negative", -10000.0f}, {"nan", kNaN}, {"inf", kInf}};
  for (const auto &b : bad_thetas) {
    c = Call{};
    c.theta = b.theta;
    add(std::string("theta_") + b.tag, AK_ERR_BAD_ARGUMENT, "theta = ", c);
  }
  for (int i = 0; i < 3; ++i) {
    c = Call{};
    c.strides = {48, 16, 8};
    c.strides[static_cast<std::size_t>(i)] = -1;
    add("strides" + std::to_string(i) + "_negative", AK_ERR_BAD_STRIDE,
        "strides[" + std::to_string(i) + "] = -1", c);
  }
  const struct {
    const char *tag;
    std::vector<std::int64_t> strides;
    const char *mentions;
  } bad_strides[] = {{"head_under_row", {48, 16, 4}, "strides[2] (head) = 4"},
                     {"seq_overlaps_heads", {100, 10, 8}, "strides[1] = 10"},
                     {"batch_zero", {0, 16, 8}, "strides[0] = 0"},
                     {"seq_zero", {48, 0, 8}, "strides[1] = 0"}};
  for (const auto &b : bad_strides) {
    c = Call{};
    c.strides = b.strides;
    add(std::string("strides_") + b.tag, AK_ERR_BAD_STRIDE, b.mentions, c);
  }
  c = Call{};
  c.null_x = true;
  add("x_null", AK_ERR_NULL_POINTER, "x is NULL", c);
  c.user_freq = true;
  c.theta = kNaN; // theta is not read with a table: the NULL x is what fails
  add("x_null_theta_unused", AK_ERR_NULL_POINTER, "x is NULL", c);
  c = Call{};
  c.batch = kHuge;
  c.seq_len = kHuge;
  c.positions.clear();
  add("tokens_overflow", AK_ERR_OVERFLOW, "batch * seq_len", c);
  c = Call{};
  c.heads = kHuge;
  c.head_dim = kHuge;
  add("x_size_overflows", AK_ERR_OVERFLOW, "x overflows", c);
  c = Call{};
  c.strides = {std::int64_t{1} << 61, 16, 8};
  add("x_span_overflows", AK_ERR_OVERFLOW, "x overflows", c);
}

void add_embedding_cases(std::vector<BadCase> &cases) {
  const std::string fn = "ak_embedding";
  struct Call {
    std::int64_t n_tokens = 4, vocab = 5, dim = 8, ld_table = 8, ld_out = 8;
    std::vector<std::int32_t> ids{0, 4, -1, 2};
    bool null_ids = false, null_table = false, null_out = false;
  };
  auto add = [&](const std::string &tag, ak_status st, const std::string &mentions, Call c) {
    cases.push_back({fn + "_" + tag, st, fn, mentions, [c](Buffers &buf) {
                       return ak_embedding(c.n_tokens, c.null_ids ? nullptr : c.ids.data(), c.vocab,
                                           c.dim, c.null_table ? nullptr : buf.in0.get(),
                                           c.ld_table, c.null_out ? nullptr : buf.out.get(),
                                           c.ld_out);
                     }});
  };
  const struct {
    const char *name;
    std::int64_t Call::*field;
  } sizes[] = {{"n_tokens", &Call::n_tokens}, {"vocab_size", &Call::vocab}, {"dim", &Call::dim}};
  for (const auto &s : sizes) {
    Call c;
    c.*s.field = -1;
    add(std::string(s.name) + "_neg1", AK_ERR_BAD_SHAPE, std::string(s.name) + " = -1", c);
  }
  Call c;
  c.ld_table = 7;
  add("ld_table_under_dim", AK_ERR_BAD_STRIDE, "ld_table = 7", c);
  c = Call{};
  c.ld_out = 7;
  add("ld_out_under_dim", AK_ERR_BAD_STRIDE, "ld_out = 7", c);
  c = Call{};
  c.dim = 0;
  c.ld_out = 0;
  add("ld_out_0_dim_0", AK_ERR_BAD_STRIDE, "ld_out = 0", c);
  c = Call{};
  c.null_ids = true;
  add("ids_null", AK_ERR_NULL_POINTER, "ids is NULL", c);
  c = Call{};
  c.null_table = true;
  add("table_null", AK_ERR_NULL_POINTER, "table is NULL", c);
  c = Call{};
  c.null_out = true;
  add("out_null", AK_ERR_NULL_POINTER, "out is NULL", c);
  const struct {
    const char *tag;
    std::vector<std::int32_t> ids;
    const char *mentions;
  } bad_ids[] = {{"equal_vocab", {0, 1, 5, 2}, "ids[2] = 5"},
                 {"last", {0, 1, 2, 6}, "ids[3] = 6"},
                 {"int32_max", {std::numeric_limits<std::int32_t>::max(), 1, 2, 3}, "ids[0] = "}};
  for (const auto &b : bad_ids) {
    c = Call{};
    c.ids = b.ids;
    add(std::string("ids_") + b.tag, AK_ERR_BAD_ARGUMENT, b.mentions, c);
  }
  c = Call{};
  c.vocab = 0; // every known id is past an empty vocabulary
  c.null_table = true;
  add("ids_empty_vocab", AK_ERR_BAD_ARGUMENT, "ids[0] = 0", c);
  c = Call{};
  c.vocab = kHuge;
  c.ld_table = kHuge;
  add("table_span_overflows", AK_ERR_OVERFLOW, "table", c);
  c = Call{};
  c.ld_out = std::int64_t{1} << 60;
  add("out_span_overflows", AK_ERR_OVERFLOW, "out", c);
}

// Empty calls succeed whatever their NULL pointers, and write nothing.
TEST(CapiErrorsRopeEmpty, SucceedWithoutWriting) {
  Buffers buf;
  for (std::int64_t zero_axis = 0; zero_axis < 4; ++zero_axis) {
    std::int64_t dims[4] = {2, 3, 2, 8};
    dims[zero_axis] = 0;
    EXPECT_EQ(ak_rope(dims[0], dims[1], dims[2], dims[3], 0, AK_ROPE_NEOX, nullptr, 10000.0f,
                      nullptr, nullptr, nullptr),
              AK_OK)
        << ak_last_error();
  }
  const std::int32_t ids[] = {-1, 3};
  // No tokens: ids and out hold nothing (the table, as for ak_sgemm's B
  // with m = 0, must still be there unless it is empty too).
  EXPECT_EQ(ak_embedding(0, nullptr, 5, 8, buf.in0.get(), 8, nullptr, 8), AK_OK);
  EXPECT_EQ(ak_embedding(0, nullptr, 0, 8, nullptr, 8, nullptr, 8), AK_OK);
  EXPECT_EQ(ak_embedding(2, ids, 5, 0, nullptr, 1, nullptr, 1), AK_OK);
  EXPECT_TRUE(misuse::untouched(buf.in0, "input 0"));
  EXPECT_TRUE(misuse::untouched(buf.out, "output"));
}

} // namespace capi_errors
} // namespace ak_test
