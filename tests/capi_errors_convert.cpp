// The misuse table's entries for ak_convert and ak_kv_cache_store (run by
// test_capi_errors.cpp: exact status, a message naming the argument, every
// buffer untouched), and their empty calls, which must succeed and write
// nothing.
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "capi_errors_table.hpp"

namespace ak_test {
namespace capi_errors {

using misuse::as_c_enum;
using misuse::kHuge;

namespace {
constexpr std::int64_t kI64Min = std::numeric_limits<std::int64_t>::min();
}

void add_convert_cases(std::vector<BadCase> &cases) {
  const std::string fn = "ak_convert";
  struct Call {
    int dst_type = AK_F16, src_type = AK_F32;
    std::int64_t n = 37;
    bool null_dst = false, null_src = false, in_place = false;
  };
  auto add = [&](const std::string &tag, ak_status st, const std::string &mentions, Call c) {
    cases.push_back({fn + "_" + tag, st, fn, mentions, [c](Buffers &buf) {
                       void *dst = c.null_dst ? nullptr : buf.out.get();
                       const void *src = c.null_src ? nullptr : c.in_place ? dst : buf.in0.get();
                       return ak_convert(as_c_enum<ak_dtype>(c.dst_type), dst,
                                         as_c_enum<ak_dtype>(c.src_type), src, c.n);
                     }});
  };
  for (int v : {3, -1}) {
    const std::string tag = v < 0 ? "neg1" : std::to_string(v);
    Call c;
    c.dst_type = v;
    add("dst_type_" + tag, AK_ERR_BAD_ARGUMENT, "dst_type = " + std::to_string(v), c);
    c = Call{};
    c.src_type = v;
    add("src_type_" + tag, AK_ERR_BAD_ARGUMENT, "src_type = " + std::to_string(v), c);
  }
  Call c;
  c.n = -1;
  add("n_neg1", AK_ERR_BAD_SHAPE, "n = -1", c);
  c.n = kI64Min;
  add("n_int64_min", AK_ERR_BAD_SHAPE, "n = ", c);
  c = Call{};
  c.null_dst = true;
  add("dst_null", AK_ERR_NULL_POINTER, "dst is NULL", c);
  c = Call{};
  c.null_src = true;
  c.src_type = AK_BF16;
  add("src_null", AK_ERR_NULL_POINTER, "src is NULL", c);
  // 2^61 elements: 2^63 bytes of fp32 overflow, 2^62 bytes of f16 do not
  // (so that call goes on to the NULL check).
  c = Call{};
  c.n = std::int64_t{1} << 61;
  add("n_bytes_overflow_f32", AK_ERR_OVERFLOW, "n = 2305843009213693952", c);
  c.dst_type = AK_F16;
  c.src_type = AK_BF16;
  c.null_dst = true;
  add("n_2pow61_halves_fit", AK_ERR_NULL_POINTER, "dst is NULL", c);
  c.n = std::int64_t{1} << 62;
  c.null_dst = false;
  add("n_bytes_overflow_halves", AK_ERR_OVERFLOW, "n = 4611686018427387904", c);
  for (const auto &[tag, dt, st] : {std::tuple<const char *, int, int>{"f32_to_f16", 1, 0},
                                    std::tuple<const char *, int, int>{"bf16_to_f32", 0, 2}}) {
    c = Call{};
    c.dst_type = dt;
    c.src_type = st;
    c.in_place = true;
    add(std::string("in_place_") + tag, AK_ERR_BAD_ARGUMENT, "dst == src", c);
  }
}

void add_kv_cache_store_cases(std::vector<BadCase> &cases) {
  const std::string fn = "ak_kv_cache_store";
  struct Call {
    std::int64_t n_tokens = 3, heads = 2, head_dim = 4, num_pages = 2, page_size = 4;
    int dst_type = AK_F16;
    std::vector<std::int64_t> slots{0, 5, -1};
    std::vector<std::int64_t> src_strides, page_strides; // empty: NULL
    bool null_src = false, null_pool = false, null_slots = false;
  };
  auto add = [&](const std::string &tag, ak_status st, const std::string &mentions, Call c) {
    cases.push_back({fn + "_" + tag, st, fn, mentions, [c](Buffers &buf) {
                       return ak_kv_cache_store(
                           c.n_tokens, c.heads, c.head_dim, c.null_src ? nullptr : buf.in0.get(),
                           c.src_strides.empty() ? nullptr : c.src_strides.data(),
                           c.null_slots ? nullptr : c.slots.data(), as_c_enum<ak_dtype>(c.dst_type),
                           c.null_pool ? nullptr : buf.out.get(), c.num_pages, c.page_size,
                           c.page_strides.empty() ? nullptr : c.page_strides.data());
                     }});
  };
  const struct {
    const char *name;
    std::int64_t Call::*field;
  } sizes[] = {{"n_tokens", &Call::n_tokens},
               {"num_kv_heads", &Call::heads},
               {"head_dim", &Call::head_dim},
               {"num_pages", &Call::num_pages},
               {"page_size", &Call::page_size}};
  for (const auto &s : sizes) {
    Call c;
    c.*s.field = -1;
    add(std::string(s.name) + "_neg1", AK_ERR_BAD_SHAPE, std::string(s.name) + " = -1", c);
  }
  Call c;
  c.dst_type = 3;
  add("dst_type_3", AK_ERR_BAD_ARGUMENT, "dst_type = 3", c);
  c = Call{};
  c.page_size = 0;
  add("page_size_0", AK_ERR_BAD_ARGUMENT, "page_size = 0", c);
  c = Call{};
  c.src_strides = {-1, 4};
  add("src_strides0_negative", AK_ERR_BAD_STRIDE, "src_strides[0] = -1", c);
  c.src_strides = {8, -4};
  add("src_strides1_negative", AK_ERR_BAD_STRIDE, "src_strides[1] = -4", c);
  for (int i = 0; i < 3; ++i) {
    c = Call{};
    c.page_strides = {32, 16, 4};
    c.page_strides[static_cast<std::size_t>(i)] = -2;
    add("page_strides" + std::to_string(i) + "_negative", AK_ERR_BAD_STRIDE,
        "page_strides[" + std::to_string(i) + "] = -2", c);
  }
  // Pool rows that would overlap: a slot stride under head_dim, a head
  // stride under a page's slots, a page stride under its slots.
  const struct {
    const char *tag;
    std::vector<std::int64_t> strides;
    const char *mentions;
  } overlaps[] = {{"slot", {32, 16, 3}, "page_strides[2] = 3"},
                  {"head", {32, 8, 4}, "page_strides[1] = 8"},
                  {"page", {12, 64, 4}, "page_strides[0] = 12"},
                  {"page_zero", {0, 16, 4}, "page_strides[0] = 0"}};
  for (const auto &o : overlaps) {
    c = Call{};
    c.page_strides = o.strides;
    add(std::string("page_strides_overlap_") + o.tag, AK_ERR_BAD_STRIDE, o.mentions, c);
  }
  c = Call{};
  c.null_src = true;
  add("src_null", AK_ERR_NULL_POINTER, "src is NULL", c);
  c = Call{};
  c.null_pool = true;
  add("pool_null", AK_ERR_NULL_POINTER, "pool is NULL", c);
  c = Call{};
  c.null_slots = true;
  add("slots_null", AK_ERR_NULL_POINTER, "slots is NULL", c);
  const struct {
    const char *tag;
    std::vector<std::int64_t> slots;
    const char *mentions;
  } bad_slots[] = {{"past_pool", {0, 8, -1}, "slots[1] = 8"},
                   {"below_minus1", {0, -2, 1}, "slots[1] = -2"},
                   {"int64_min", {kI64Min, 1, 2}, "slots[0] = "},
                   {"duplicate", {5, 1, 5}, "slots[0] and slots[2]"},
                   {"duplicate_after_skip", {-1, 7, 7}, "slots[1] and slots[2]"}};
  for (const auto &b : bad_slots) {
    c = Call{};
    c.slots = b.slots;
    add("slots_" + std::string(b.tag), AK_ERR_BAD_ARGUMENT, b.mentions, c);
  }
  // A pool of far more slots than tokens: duplicates found by sorting the
  // tokens (a small pool takes a bit per slot). The call fails before it
  // would touch the pool, so the buffer need not be that large.
  c = Call{};
  c.num_pages = 1000;
  c.n_tokens = 4;
  c.slots = {7, 5, 7, 5};
  add("slots_duplicate_large_pool", AK_ERR_BAD_ARGUMENT, "slots[1] and slots[3]", c);
  // Spans past a byte count: the source's, the pool's (2^61 elements of
  // fp32; the same count of f16 fits, and that call fails on its NULL pool).
  c = Call{};
  c.n_tokens = 3;
  c.src_strides = {std::int64_t{1} << 61, 4};
  add("src_span_overflows", AK_ERR_OVERFLOW, "src", c);
  c = Call{};
  c.num_pages = kHuge;
  c.page_size = kHuge;
  add("pool_size_overflows", AK_ERR_OVERFLOW, "pool", c);
  c = Call{};
  c.num_pages = std::int64_t{1} << 56; // x 2 heads x 4 slots x 4 = 2^61 elements
  c.dst_type = AK_F32;
  add("pool_bytes_overflow_f32", AK_ERR_OVERFLOW, "pool", c);
  c.dst_type = AK_BF16;
  c.null_pool = true;
  add("pool_2pow61_halves_fit", AK_ERR_NULL_POINTER, "pool is NULL", c);
}

// Empty calls succeed whatever their NULL pointers, and write nothing.
TEST(CapiErrorsConvertEmpty, SucceedWithoutWriting) {
  Buffers buf;
  EXPECT_EQ(ak_convert(AK_F16, nullptr, AK_F32, nullptr, 0), AK_OK);
  EXPECT_EQ(ak_convert(AK_F32, buf.out.get(), AK_BF16, buf.out.get(), 0), AK_OK);
  const std::int64_t slots[] = {0, 1};
  EXPECT_EQ(ak_kv_cache_store(0, 2, 4, nullptr, nullptr, nullptr, AK_F16, nullptr, 0, 0, nullptr),
            AK_OK);
  EXPECT_EQ(ak_kv_cache_store(2, 0, 4, nullptr, nullptr, slots, AK_BF16, nullptr, 1, 4, nullptr),
            AK_OK);
  EXPECT_EQ(ak_kv_cache_store(2, 2, 0, nullptr, nullptr, slots, AK_F32, nullptr, 1, 4, nullptr),
            AK_OK);
  // Pages of no slots: nothing to name (only -1).
  const std::int64_t skipped[] = {-1, -1};
  EXPECT_EQ(
      ak_kv_cache_store(2, 2, 4, buf.in0.get(), nullptr, skipped, AK_F16, nullptr, 0, 4, nullptr),
      AK_OK);
  EXPECT_TRUE(misuse::untouched(buf.in0, "input 0"));
  EXPECT_TRUE(misuse::untouched(buf.out, "output"));
}

} // namespace capi_errors
} // namespace ak_test
