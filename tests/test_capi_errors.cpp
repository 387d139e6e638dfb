// C-API misuse: every entry point against every kind of bad argument, and the
// empty / degenerate calls that must succeed.
//
// The contract under test (docs/design.md, "The contract"): bad
// input never crashes and never writes. Each rejected call must return the
// exact status, leave a message in ak_last_error() that starts with the
// function's name and names the offending argument, leave every buffer it was
// given bit-for-bit as it was, and leave the process-wide configuration alone.
//
// Every buffer handed to the library is kBufferLen floats, far more than any
// call below would touch if it were wrongly accepted (dimensions are single
// digits, strides at most a few hundred), so a validation defect shows up as a
// failed assertion rather than a segfault. The only exceptions are NULL
// pointers and the int64 overflow cases, which cannot be backed by memory;
// each table entry is its own test, so a crash there fails only that entry.
#include <gtest/gtest.h>

#include <attnkern.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <ostream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "capi_errors_table.hpp"
#include "misuse_support.hpp"

namespace {

// kHuge, bits_of, as_c_enum, canary buffers, ...: shared with
// test_attention_errors.cpp; the table's entry (BadCase) and its buffers:
// shared with capi_errors_convert.cpp.
using namespace ak_test::misuse;
using namespace ak_test::capi_errors;
using ak_test::capi_errors::Canary; // not misuse's template of that name

// Leaves a message from another function in ak_last_error(), so that the
// message checked afterwards is known to come from the call under test.
void prime_last_error(const std::string &function_under_test) {
  if (function_under_test == "ak_set_num_threads") {
    ASSERT_EQ(ak_softmax(-7, 1, nullptr, 1, nullptr, 1), AK_ERR_BAD_SHAPE);
    ASSERT_EQ(std::string(ak_last_error()).rfind("ak_softmax: ", 0), 0u);
  } else {
    ASSERT_EQ(ak_set_num_threads(-7), AK_ERR_BAD_ARGUMENT);
    ASSERT_EQ(std::string(ak_last_error()).rfind("ak_set_num_threads: ", 0), 0u);
  }
}

// ------------------------------------------------------------------- sgemm

struct GemmCall {
  int ta = AK_NO_TRANS, tb = AK_NO_TRANS; // int: the table holds invalid values too
  std::int64_t m = 3, n = 5, k = 4;       // distinct, so a wrong minimum ld shows
  std::int64_t lda = 0, ldb = 0, ldc = 0;
  std::int64_t stride_a = 64, stride_b = 64, stride_c = 64, batch = 2;
  float alpha = 1.0f, beta = 0.0f;
  bool null_a = false, null_b = false, null_c = false;
};

// Tight (minimal) leading dimensions for the storage each transpose implies.
std::int64_t min_lda(const GemmCall &g) { return g.ta == AK_TRANS ? g.m : g.k; }
std::int64_t min_ldb(const GemmCall &g) { return g.tb == AK_TRANS ? g.k : g.n; }

GemmCall valid_gemm(ak_trans ta = AK_NO_TRANS, ak_trans tb = AK_NO_TRANS) {
  GemmCall g;
  g.ta = ta;
  g.tb = tb;
  g.lda = min_lda(g);
  g.ldb = min_ldb(g);
  g.ldc = g.n;
  return g;
}

ak_status call_gemm(const GemmCall &g, bool batched, Buffers &buf) {
  const float *a = g.null_a ? nullptr : buf.in0.get();
  const float *b = g.null_b ? nullptr : buf.in1.get();
  float *c = g.null_c ? nullptr : buf.out.get();
  // The enums are made in the argument list, never stored (see as_c_enum).
  if (!batched)
    return ak_sgemm(as_c_enum<ak_trans>(g.ta), as_c_enum<ak_trans>(g.tb), g.m, g.n, g.k, g.alpha, a,
                    g.lda, b, g.ldb, g.beta, c, g.ldc);
  return ak_sgemm_strided_batched(as_c_enum<ak_trans>(g.ta), as_c_enum<ak_trans>(g.tb), g.m, g.n,
                                  g.k, g.alpha, a, g.lda, g.stride_a, b, g.ldb, g.stride_b, g.beta,
                                  c, g.ldc, g.stride_c, g.batch);
}

const char *trans_tag(ak_trans t) { return t == AK_TRANS ? "T" : "N"; }

std::string num_tag(std::int64_t v) {
  return v < 0 ? "neg" + std::to_string(-v) : std::to_string(v);
}

// ------------------------------------------------------------- the table

void add_gemm_cases(std::vector<BadCase> &cases, bool batched) {
  const std::string fn = batched ? "ak_sgemm_strided_batched" : "ak_sgemm";
  auto add = [&](const std::string &tag, ak_status st, const std::string &mentions,
                 const GemmCall &g) {
    cases.push_back({fn + "_" + tag, st, fn, mentions,
                     [g, batched](Buffers &buf) { return call_gemm(g, batched, buf); }});
  };

  for (int v : {2, -1}) {
    GemmCall g = valid_gemm();
    g.ta = v;
    add("ta_" + num_tag(v), AK_ERR_BAD_ARGUMENT, "ta = " + std::to_string(v), g);
    g = valid_gemm();
    g.tb = v;
    add("tb_" + num_tag(v), AK_ERR_BAD_ARGUMENT, "tb = " + std::to_string(v), g);
  }

  for (const char *dim : {"m", "n", "k"}) {
    for (std::int64_t v : {std::int64_t{-1}, std::numeric_limits<std::int64_t>::min()}) {
      GemmCall g = valid_gemm();
      std::int64_t &field = dim[0] == 'm' ? g.m : dim[0] == 'n' ? g.n : g.k;
      field = v;
      add(std::string(dim) + "_" + (v == -1 ? "neg1" : "int64_min"), AK_ERR_BAD_SHAPE,
          std::string(dim) + " = " + std::to_string(v), g);
    }
  }

  for (ak_trans ta : {AK_NO_TRANS, AK_TRANS}) {
    for (ak_trans tb : {AK_NO_TRANS, AK_TRANS}) {
      const std::string combo = std::string(trans_tag(ta)) + trans_tag(tb);
      GemmCall g = valid_gemm(ta, tb);
      g.lda = min_lda(g) - 1;
      add("lda_too_small_" + combo, AK_ERR_BAD_STRIDE, "lda = " + std::to_string(g.lda), g);
      g = valid_gemm(ta, tb);
      g.ldb = min_ldb(g) - 1;
      add("ldb_too_small_" + combo, AK_ERR_BAD_STRIDE, "ldb = " + std::to_string(g.ldb), g);
      g = valid_gemm(ta, tb);
      g.ldc = g.n - 1;
      add("ldc_too_small_" + combo, AK_ERR_BAD_STRIDE, "ldc = " + std::to_string(g.ldc), g);
    }
  }
  {
    GemmCall g = valid_gemm();
    g.lda = -1;
    add("lda_negative", AK_ERR_BAD_STRIDE, "lda = -1", g);
    g = valid_gemm();
    g.ldc = 0;
    add("ldc_zero", AK_ERR_BAD_STRIDE, "ldc = 0", g);
    // A leading dimension is at least 1 even for an empty matrix (as in BLAS).
    g = valid_gemm();
    g.k = 0;
    g.lda = 0;
    add("lda_zero_k0", AK_ERR_BAD_STRIDE, "lda = 0", g);
    g = valid_gemm();
    g.n = 0;
    g.ldb = 1;
    g.ldc = 0;
    add("ldc_zero_n0", AK_ERR_BAD_STRIDE, "ldc = 0", g);
  }

  {
    GemmCall g = valid_gemm();
    g.null_a = true;
    add("a_null", AK_ERR_NULL_POINTER, "a is NULL", g);
    g = valid_gemm();
    g.null_b = true;
    add("b_null", AK_ERR_NULL_POINTER, "b is NULL", g);
    g = valid_gemm();
    g.null_c = true;
    add("c_null", AK_ERR_NULL_POINTER, "c is NULL", g);
    // beta == 0 ignores C's contents but C is still written.
    g = valid_gemm();
    g.null_c = true;
    g.beta = 0.0f;
    g.k = 0;
    g.lda = 1;
    add("c_null_k0", AK_ERR_NULL_POINTER, "c is NULL", g);
  }

  // Extents that overflow int64_t, or whose byte size does (> 2^61 floats).
  {
    GemmCall g = valid_gemm();
    g.m = kHuge;
    g.lda = kHuge;
    add("a_extent_overflows", AK_ERR_OVERFLOW, "A spans", g);
    g = valid_gemm(AK_TRANS, AK_NO_TRANS);
    g.k = kHuge;
    g.lda = kHuge;
    g.ldb = g.n;
    add("a_extent_overflows_T", AK_ERR_OVERFLOW, "A spans", g);
    g = valid_gemm();
    g.k = kHuge;
    g.lda = kHuge;
    g.ldb = kHuge;
    add("b_extent_overflows", AK_ERR_OVERFLOW, "B spans", g);
    g = valid_gemm();
    g.m = kHuge;
    g.ldc = kHuge;
    add("c_extent_overflows", AK_ERR_OVERFLOW, "C spans", g);
    g = valid_gemm();
    g.m = kBytesOverflow;
    g.ldc = kBytesOverflow;
    add("c_extent_bytes_overflow", AK_ERR_OVERFLOW, "C spans", g);
    g = valid_gemm();
    g.m = std::numeric_limits<std::int64_t>::max();
    add("m_int64_max", AK_ERR_OVERFLOW, "A spans", g);
  }

  if (!batched) return;

  {
    GemmCall g = valid_gemm();
    g.batch = -1;
    add("batch_neg1", AK_ERR_BAD_SHAPE, "batch = -1", g);
    g.batch = std::numeric_limits<std::int64_t>::min();
    add("batch_int64_min", AK_ERR_BAD_SHAPE, "batch = ", g);
  }
  for (const char *which : {"a", "b", "c"}) {
    GemmCall g = valid_gemm();
    std::int64_t &s = which[0] == 'a' ? g.stride_a : which[0] == 'b' ? g.stride_b : g.stride_c;
    s = -1;
    add(std::string("stride_") + which + "_negative", AK_ERR_BAD_STRIDE,
        std::string("stride_") + which, g);
    // Negative strides are rejected even when a single product never uses them.
    g.batch = 1;
    add(std::string("stride_") + which + "_negative_batch1", AK_ERR_BAD_STRIDE,
        std::string("stride_") + which, g);
  }
  {
    // C is 3 x 5 with ldc 5: 15 floats; with ldc 7: 2 * 7 + 5 = 19 floats.
    GemmCall g = valid_gemm();
    g.stride_c = 14;
    add("stride_c_overlaps", AK_ERR_BAD_STRIDE, "stride_c = 14", g);
    g.stride_c = 0;
    add("stride_c_zero", AK_ERR_BAD_STRIDE, "stride_c = 0", g);
    g = valid_gemm();
    g.ldc = 7;
    g.stride_c = 18;
    add("stride_c_overlaps_padded_ldc", AK_ERR_BAD_STRIDE, "stride_c = 18", g);
    g = valid_gemm();
    g.batch = 3;
    g.stride_c = 1;
    add("stride_c_one_batch3", AK_ERR_BAD_STRIDE, "stride_c = 1", g);
    // Rows interleaved ([m, batch, n]) but overlapping: segments of 5 floats
    // 4 apart; or the last product's segment past a row of ldc = 10.
    g = valid_gemm();
    g.ldc = 10;
    g.stride_c = 4;
    add("stride_c_interleaved_overlaps", AK_ERR_BAD_STRIDE, "stride_c = 4", g);
    g.batch = 3;
    g.stride_c = 5;
    add("stride_c_interleaved_past_ldc", AK_ERR_BAD_STRIDE, "stride_c = 5", g);
  }
  {
    GemmCall g = valid_gemm();
    g.batch = kHuge;
    g.stride_a = kHuge;
    add("batch_span_a_overflows", AK_ERR_OVERFLOW, "A overflows", g);
    g = valid_gemm();
    g.batch = kHuge;
    g.stride_b = kHuge;
    add("batch_span_b_overflows", AK_ERR_OVERFLOW, "B overflows", g);
    g = valid_gemm();
    g.batch = kHuge;
    g.stride_c = kHuge;
    add("batch_span_c_overflows", AK_ERR_OVERFLOW, "C overflows", g);
    g = valid_gemm();
    g.batch = kBytesOverflow;
    g.stride_c = kBytesOverflow;
    add("batch_span_c_bytes_overflow", AK_ERR_OVERFLOW, "C overflows", g);
  }
  // A span of exactly 2^61 floats (one past the bound every extent keeps):
  // no int64 wrap-around, but its byte size does not fit. With k = 0 the
  // call only scales C.
  for (int which = 0; which < 4; ++which) {
    GemmCall g = valid_gemm();
    g.m = g.n = g.k = g.lda = g.ldb = g.ldc = 1;
    g.stride_a = g.stride_b = g.stride_c = 1;
    std::int64_t &stride = which == 0 ? g.stride_a : which == 1 ? g.stride_b : g.stride_c;
    stride = std::numeric_limits<std::int64_t>::max() / 4;
    if (which == 3) g.k = 0;
    const char *tags[] = {"a", "b", "c", "c_k0"}, *names[] = {"A", "B", "C", "C"};
    add(std::string("batch_span_") + tags[which] + "_2pow61", AK_ERR_OVERFLOW,
        std::string("batch of ") + names[which] + " spans more than 2^61", g);
  }
  {
    GemmCall g = valid_gemm();
    g.null_c = true;
    g.batch = 1;
    add("c_null_batch1", AK_ERR_NULL_POINTER, "c is NULL", g);
  }
}

using SoftmaxFn = ak_status (*)(std::int64_t, std::int64_t, const float *, std::int64_t, float *,
                                std::int64_t);

void add_softmax_cases(std::vector<BadCase> &cases, const std::string &fn, SoftmaxFn f) {
  struct Call {
    std::int64_t rows = 4, cols = 6, ldx = 6, ldy = 6;
    bool null_x = false, null_y = false, in_place = false;
  };
  auto add = [&](const std::string &tag, ak_status st, const std::string &mentions, Call c) {
    cases.push_back({fn + "_" + tag, st, fn, mentions, [c, f](Buffers &buf) {
                       float *y = c.null_y ? nullptr : buf.out.get();
                       const float *x = c.null_x ? nullptr : c.in_place ? y : buf.in0.get();
                       return f(c.rows, c.cols, x, c.ldx, y, c.ldy);
                     }});
  };
  Call c;
  c.rows = -1;
  add("rows_neg1", AK_ERR_BAD_SHAPE, "rows = -1", c);
  c = Call{};
  c.cols = -1;
  add("cols_neg1", AK_ERR_BAD_SHAPE, "cols = -1", c);
  c = Call{};
  c.rows = std::numeric_limits<std::int64_t>::min();
  add("rows_int64_min", AK_ERR_BAD_SHAPE, "rows = ", c);
  c = Call{};
  c.ldx = 5;
  add("ldx_too_small", AK_ERR_BAD_STRIDE, "ldx = 5", c);
  c = Call{};
  c.ldy = 5;
  add("ldy_too_small", AK_ERR_BAD_STRIDE, "ldy = 5", c);
  c = Call{};
  c.ldx = -6;
  add("ldx_negative", AK_ERR_BAD_STRIDE, "ldx = -6", c);
  c = Call{};
  c.ldy = 0;
  add("ldy_zero", AK_ERR_BAD_STRIDE, "ldy = 0", c);
  c = Call{};
  c.cols = 0; // at least 1 even for an empty row (as in BLAS)
  c.ldx = 0;
  c.ldy = 1;
  add("ldx_zero_cols0", AK_ERR_BAD_STRIDE, "ldx = 0", c);
  c = Call{};
  c.null_x = true;
  add("x_null", AK_ERR_NULL_POINTER, "x is NULL", c);
  c = Call{};
  c.null_y = true;
  add("y_null", AK_ERR_NULL_POINTER, "y is NULL", c);
  c = Call{};
  c.in_place = true;
  c.ldx = 6;
  c.ldy = 8;
  add("in_place_ldy_ne_ldx", AK_ERR_BAD_ARGUMENT, "ldx = 6, ldy = 8", c);
  c.ldx = 8;
  c.ldy = 6;
  add("in_place_ldx_ne_ldy", AK_ERR_BAD_ARGUMENT, "ldx = 8, ldy = 6", c);
  c = Call{};
  c.rows = kHuge;
  c.ldx = kHuge;
  add("x_extent_overflows", AK_ERR_OVERFLOW, "x spans", c);
  c = Call{};
  c.rows = kHuge;
  c.ldy = kHuge;
  add("y_extent_overflows", AK_ERR_OVERFLOW, "y spans", c);
  c = Call{};
  c.rows = kBytesOverflow;
  c.ldx = kBytesOverflow;
  add("x_extent_bytes_overflow", AK_ERR_OVERFLOW, "x spans", c);
}

void add_softmax_axis_cases(std::vector<BadCase> &cases) {
  const std::string fn = "ak_softmax_axis";
  struct Call {
    std::int64_t outer = 2, axis_len = 3, inner = 4;
    bool null_x = false, null_y = false;
  };
  auto add = [&](const std::string &tag, ak_status st, const std::string &mentions, Call c) {
    cases.push_back({fn + "_" + tag, st, fn, mentions, [c](Buffers &buf) {
                       return ak_softmax_axis(c.outer, c.axis_len, c.inner,
                                              c.null_x ? nullptr : buf.in0.get(),
                                              c.null_y ? nullptr : buf.out.get());
                     }});
  };
  Call c;
  c.outer = -1;
  add("outer_neg1", AK_ERR_BAD_SHAPE, "outer = -1", c);
  c = Call{};
  c.axis_len = -1;
  add("axis_len_neg1", AK_ERR_BAD_SHAPE, "axis_len = -1", c);
  c = Call{};
  c.inner = -1;
  add("inner_neg1", AK_ERR_BAD_SHAPE, "inner = -1", c);
  c = Call{};
  c.outer = -2;
  c.axis_len = -3; // a product of two negatives is positive: must still fail
  add("outer_and_axis_len_negative", AK_ERR_BAD_SHAPE, "outer = -2", c);
  c = Call{};
  c.null_x = true;
  add("x_null", AK_ERR_NULL_POINTER, "x is NULL", c);
  c = Call{};
  c.null_y = true;
  add("y_null", AK_ERR_NULL_POINTER, "y is NULL", c);
  c = Call{};
  c.outer = std::int64_t{1} << 30;
  c.axis_len = std::int64_t{1} << 20;
  c.inner = std::int64_t{1} << 20;
  add("total_overflows", AK_ERR_OVERFLOW, "outer * axis_len * inner", c);
  c = Call{};
  c.outer = 1;
  c.axis_len = kHuge;
  c.inner = kHuge;
  add("plane_overflows", AK_ERR_OVERFLOW, "axis_len * inner", c);
  c = Call{};
  c.outer = 1;
  c.axis_len = kBytesOverflow;
  c.inner = kBytesOverflow;
  add("plane_bytes_overflow", AK_ERR_OVERFLOW, "axis_len * inner", c);
}

void add_posenc_cases(std::vector<BadCase> &cases) {
  const std::string fn = "ak_position_encoding";
  struct Call {
    std::int64_t max_len = 8, dim = 6;
    float base = 10000.0f;
    bool null_out = false;
  };
  auto add = [&](const std::string &tag, ak_status st, const std::string &mentions, Call c) {
    cases.push_back({fn + "_" + tag, st, fn, mentions, [c](Buffers &buf) {
                       return ak_position_encoding(c.max_len, c.dim, c.base,
                                                   c.null_out ? nullptr : buf.out.get());
                     }});
  };
  Call c;
  c.max_len = -1;
  add("max_len_neg1", AK_ERR_BAD_SHAPE, "max_len = -1", c);
  c = Call{};
  c.dim = -1;
  add("dim_neg1", AK_ERR_BAD_SHAPE, "dim = -1", c);
  c = Call{};
  c.max_len = -2;
  c.dim = -3;
  add("max_len_and_dim_negative", AK_ERR_BAD_SHAPE, "max_len = -2", c);
  const struct {
    const char *tag;
    float base;
  } bad_bases[] = {{"zero", 0.0f},          {"neg_zero", -0.0f},
                   {"negative", -10000.0f}, {"nan", kNaN},
                   {"neg_nan", -kNaN},      {"inf", kInf},
                   {"neg_inf", -kInf},      {"lowest", std::numeric_limits<float>::lowest()}};
  for (const auto &b : bad_bases) {
    c = Call{};
    c.base = b.base;
    add(std::string("base_") + b.tag, AK_ERR_BAD_ARGUMENT, "base = ", c);
  }
  c = Call{};
  c.null_out = true;
  add("out_null", AK_ERR_NULL_POINTER, "out is NULL", c);
  c = Call{};
  c.max_len = kHuge;
  c.dim = kHuge;
  add("total_overflows", AK_ERR_OVERFLOW, "max_len * dim", c);
  c = Call{};
  c.max_len = kBytesOverflow;
  c.dim = kBytesOverflow;
  add("total_bytes_overflow", AK_ERR_OVERFLOW, "max_len * dim", c);
}

void add_config_cases(std::vector<BadCase> &cases) {
  for (const char *name : {"avx9000", "", "auto ", "AVX2x", "avx2 "}) {
    std::string tag = "unknown_";
    for (const char *p = name; *p; ++p)
      tag += std::isalnum(static_cast<unsigned char>(*p)) ? *p : '_';
    if (!*name) tag += "empty";
    cases.push_back({"ak_set_isa_" + tag, AK_ERR_BAD_ARGUMENT, "ak_set_isa",
                     "\"" + std::string(name) + "\"",
                     [name](Buffers &) { return ak_set_isa(name); }});
  }
  // A set this build knows but this CPU or build cannot run.
#if defined(__x86_64__) || defined(_M_X64)
  cases.push_back({"ak_set_isa_neon_on_x86", AK_ERR_UNSUPPORTED, "ak_set_isa", "\"neon\"",
                   [](Buffers &) { return ak_set_isa("neon"); }});
#elif defined(__aarch64__)
  cases.push_back({"ak_set_isa_avx2_on_arm", AK_ERR_UNSUPPORTED, "ak_set_isa", "\"avx2\"",
                   [](Buffers &) { return ak_set_isa("avx2"); }});
#endif
  for (const auto &[tag, n] :
       {std::pair<const char *, int>{"neg1", -1},
        std::pair<const char *, int>{"int_min", std::numeric_limits<int>::min()}}) {
    cases.push_back({std::string("ak_set_num_threads_") + tag, AK_ERR_BAD_ARGUMENT,
                     "ak_set_num_threads", "n = " + std::to_string(n),
                     [n = n](Buffers &) { return ak_set_num_threads(n); }});
    cases.push_back({std::string("ak_set_num_threads_local_") + tag, AK_ERR_BAD_ARGUMENT,
                     "ak_set_num_threads_local", "n = " + std::to_string(n),
                     [n = n](Buffers &) { return ak_set_num_threads_local(n); }});
  }
}

std::vector<BadCase> all_bad_cases() {
  std::vector<BadCase> cases;
  add_gemm_cases(cases, false);
  add_gemm_cases(cases, true);
  add_softmax_cases(cases, "ak_softmax", ak_softmax);
  add_softmax_cases(cases, "ak_log_softmax", ak_log_softmax);
  add_softmax_axis_cases(cases);
  add_posenc_cases(cases);
  add_convert_cases(cases);
  add_kv_cache_store_cases(cases);
  add_rope_cases(cases);
  add_embedding_cases(cases);
  add_config_cases(cases);
  return cases;
}

class CapiErrorsBadInput : public ::testing::TestWithParam<BadCase> {};

TEST_P(CapiErrorsBadInput, RejectsWithoutWriting) {
  const BadCase &bc = GetParam();
  Buffers buf;
  const std::string isa_before = ak_get_isa();
  const int threads_before = ak_get_num_threads();
  prime_last_error(bc.function);

  const ak_status st = bc.call(buf);

  EXPECT_EQ(st, bc.expected) << "got " << ak_status_string(st) << ", expected "
                             << ak_status_string(bc.expected);
  const std::string msg = ak_last_error();
  EXPECT_FALSE(msg.empty());
  EXPECT_EQ(msg.rfind(bc.function + ": ", 0), 0u) << "message: " << msg;
  EXPECT_NE(msg.find(bc.mentions), std::string::npos)
      << "message does not mention \"" << bc.mentions << "\": " << msg;
  EXPECT_TRUE(untouched(buf.in0, "input 0"));
  EXPECT_TRUE(untouched(buf.in1, "input 1"));
  EXPECT_TRUE(untouched(buf.out, "output"));
  EXPECT_EQ(ak_get_isa(), isa_before);
  EXPECT_EQ(ak_get_num_threads(), threads_before);
  EXPECT_EQ(ak_get_num_threads_local(), 0);
}

INSTANTIATE_TEST_SUITE_P(, CapiErrorsBadInput, ::testing::ValuesIn(all_bad_cases()),
                         [](const ::testing::TestParamInfo<BadCase> &info) {
                           return info.param.name;
                         });

TEST(CapiErrorsTable, NamesAreUnique) {
  std::set<std::string> names;
  for (const BadCase &bc : all_bad_cases()) EXPECT_TRUE(names.insert(bc.name).second) << bc.name;
}

// ------------------------------------------------- empty calls succeed

struct EmptyCase {
  std::string name;
  std::function<ak_status(Buffers &)> call;
};

std::vector<EmptyCase> all_empty_cases() {
  std::vector<EmptyCase> cases;
  for (bool batched : {false, true}) {
    const std::string fn = batched ? "sgemm_strided_batched" : "sgemm";
    for (ak_trans ta : {AK_NO_TRANS, AK_TRANS}) {
      for (ak_trans tb : {AK_NO_TRANS, AK_TRANS}) {
        const std::string combo = std::string(trans_tag(ta)) + trans_tag(tb);
        auto add = [&](const std::string &tag, GemmCall g) {
          cases.push_back({fn + "_" + tag + "_" + combo,
                           [g, batched](Buffers &buf) { return call_gemm(g, batched, buf); }});
        };
        auto refit = [](GemmCall g) { // tight leading dimensions for the new sizes
          g.lda = std::max<std::int64_t>(1, min_lda(g));
          g.ldb = std::max<std::int64_t>(1, min_ldb(g));
          g.ldc = std::max<std::int64_t>(1, g.n);
          return g;
        };
        GemmCall g = valid_gemm(ta, tb);
        g.m = 0;
        add("m0", refit(g));
        g.null_a = g.null_c = true; // A and C have no elements
        add("m0_null_a_c", refit(g));
        g = valid_gemm(ta, tb);
        g.n = 0;
        add("n0", refit(g));
        g.null_b = g.null_c = true;
        add("n0_null_b_c", refit(g));
        g = valid_gemm(ta, tb);
        g.m = g.n = g.k = 0;
        g.null_a = g.null_b = g.null_c = true;
        add("mnk0_all_null", refit(g));
        if (batched) {
          g = valid_gemm(ta, tb);
          g.batch = 0;
          add("batch0", g);
          g.null_a = g.null_b = g.null_c = true;
          add("batch0_all_null", g);
          g.stride_c = 0; // no products, so no overlap
          add("batch0_stride_c0", g);
        }
      }
    }
  }
  for (const auto &[fn, f] : {std::pair<std::string, SoftmaxFn>{"softmax", ak_softmax},
                              std::pair<std::string, SoftmaxFn>{"log_softmax", ak_log_softmax}}) {
    cases.push_back({fn + "_rows0", [f = f](Buffers &buf) {
                       return f(0, 6, buf.in0.get(), 6, buf.out.get(), 6);
                     }});
    cases.push_back(
        {fn + "_rows0_null", [f = f](Buffers &) { return f(0, 6, nullptr, 6, nullptr, 6); }});
    cases.push_back({fn + "_cols0", [f = f](Buffers &buf) {
                       return f(4, 0, buf.in0.get(), 1, buf.out.get(), 1);
                     }});
    cases.push_back(
        {fn + "_cols0_null", [f = f](Buffers &) { return f(4, 0, nullptr, 1, nullptr, 1); }});
    cases.push_back({fn + "_rows0_in_place", [f = f](Buffers &buf) {
                       return f(0, 6, buf.out.get(), 6, buf.out.get(), 6);
                     }});
  }
  const std::int64_t shapes[][3] = {{0, 3, 4}, {2, 0, 4}, {2, 3, 0}, {0, 0, 0}};
  for (const auto &s : shapes) {
    const std::string tag =
        std::to_string(s[0]) + "x" + std::to_string(s[1]) + "x" + std::to_string(s[2]);
    cases.push_back({"softmax_axis_" + tag, [s](Buffers &buf) {
                       return ak_softmax_axis(s[0], s[1], s[2], buf.in0.get(), buf.out.get());
                     }});
    cases.push_back({"softmax_axis_" + tag + "_null", [s](Buffers &) {
                       return ak_softmax_axis(s[0], s[1], s[2], nullptr, nullptr);
                     }});
  }
  // Empty whatever the other sizes' product: 2^40 x 2^40 would overflow.
  const std::int64_t big = std::int64_t{1} << 40;
  const std::int64_t empty_huge[][3] = {{0, big, big}, {big, 0, big}, {big, big, 0}};
  for (const auto &s : empty_huge) {
    const std::string tag = std::string("softmax_axis_empty_") +
                            (s[0] == 0   ? "outer"
                             : s[1] == 0 ? "axis"
                                         : "inner") +
                            "_huge_rest";
    cases.push_back(
        {tag, [s](Buffers &) { return ak_softmax_axis(s[0], s[1], s[2], nullptr, nullptr); }});
  }
  cases.push_back({"position_encoding_max_len0", [](Buffers &buf) {
                     return ak_position_encoding(0, 6, 10000.0f, buf.out.get());
                   }});
  cases.push_back({"position_encoding_dim0", [](Buffers &buf) {
                     return ak_position_encoding(8, 0, 10000.0f, buf.out.get());
                   }});
  cases.push_back({"position_encoding_max_len0_null",
                   [](Buffers &) { return ak_position_encoding(0, 6, 10000.0f, nullptr); }});
  cases.push_back({"position_encoding_dim0_null",
                   [](Buffers &) { return ak_position_encoding(8, 0, 10000.0f, nullptr); }});
  return cases;
}

void PrintTo(const EmptyCase &c, std::ostream *os) { *os << c.name; }

class CapiErrorsEmpty : public ::testing::TestWithParam<EmptyCase> {};

TEST_P(CapiErrorsEmpty, SucceedsWithoutWriting) {
  Buffers buf;
  const ak_status st = GetParam().call(buf);
  EXPECT_EQ(st, AK_OK) << ak_status_string(st) << ": " << ak_last_error();
  EXPECT_TRUE(untouched(buf.in0, "input 0"));
  EXPECT_TRUE(untouched(buf.in1, "input 1"));
  EXPECT_TRUE(untouched(buf.out, "output"));
}

INSTANTIATE_TEST_SUITE_P(, CapiErrorsEmpty, ::testing::ValuesIn(all_empty_cases()),
                         [](const ::testing::TestParamInfo<EmptyCase> &info) {
                           return info.param.name;
                         });

// ------------------------------------------ degenerate products and regions

// A k == 0 product only scales C by beta (beta == 0: zeros, even over NaN),
// for each of `batch` products; the padding past n and between products stays.
class CapiErrorsKZero : public ::testing::TestWithParam<bool> {};

TEST_P(CapiErrorsKZero, AppliesBetaOnly) {
  const bool batched = GetParam();
  const std::int64_t m = 3, n = 5, ldc = 7, stride_c = 32, batch = batched ? 3 : 1;
  auto inside = [&](std::int64_t i) {
    const std::int64_t p = i / stride_c, r = (i % stride_c) / ldc, j = (i % stride_c) % ldc;
    return p < batch && r < m && j < n;
  };
  for (float beta : {0.0f, 1.0f, 2.0f, -0.5f}) {
    SCOPED_TRACE("beta = " + std::to_string(beta));
    Canary c(3);
    for (std::int64_t i = 0; i < kBufferLen; ++i) // NaN (the canary) stays in C for beta == 0
      if (inside(i) && beta != 0.0f) c.data[i] = static_cast<float>(i % 17) - 8.0f;
    const std::vector<float> before = c.data;
    const ak_status st =
        batched ? ak_sgemm_strided_batched(AK_NO_TRANS, AK_NO_TRANS, m, n, 0, 1.0f, nullptr, 1, 0,
                                           nullptr, n, 0, beta, c.get(), ldc, stride_c, batch)
                : ak_sgemm(AK_NO_TRANS, AK_NO_TRANS, m, n, 0, 1.0f, nullptr, 1, nullptr, n, beta,
                           c.get(), ldc);
    ASSERT_EQ(st, AK_OK) << ak_last_error();
    for (std::int64_t i = 0; i < kBufferLen; ++i) {
      if (inside(i))
        ASSERT_EQ(c.data[i], beta == 0.0f ? 0.0f : beta * before[i]) << "C[" << i << "]";
      else
        ASSERT_EQ(bits_of(c.data[i]), canary_bits(3, i)) << "C[" << i << "] outside C written";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(, CapiErrorsKZero, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool> &info) {
                           return std::string(info.param ? "Batched" : "Single");
                         });

// The minimal leading dimension of each storage layout is accepted.
TEST(CapiErrorsDegenerate, TightLeadingDimensionsAccepted) {
  for (bool batched : {false, true})
    for (ak_trans ta : {AK_NO_TRANS, AK_TRANS})
      for (ak_trans tb : {AK_NO_TRANS, AK_TRANS}) {
        SCOPED_TRACE(std::string(batched ? "batched " : "") + trans_tag(ta) + trans_tag(tb));
        Buffers buf;
        std::fill(buf.in0.data.begin(), buf.in0.data.end(), 1.0f);
        std::fill(buf.in1.data.begin(), buf.in1.data.end(), 1.0f);
        const GemmCall g = valid_gemm(ta, tb);
        EXPECT_EQ(call_gemm(g, batched, buf), AK_OK) << ak_last_error();
      }
}

// "alpha == 0 never reads A or B": NaN in A and B must not reach C.
TEST(CapiErrorsDegenerate, AlphaZeroDoesNotReadAB) {
  const std::int64_t m = 3, n = 5, k = 4;
  std::vector<float> a(m * k, kNaN), b(k * n, kNaN), c(m * n);
  for (std::size_t i = 0; i < c.size(); ++i) c[i] = static_cast<float>(i) - 7.0f;
  ASSERT_EQ(ak_sgemm(AK_NO_TRANS, AK_NO_TRANS, m, n, k, 0.0f, a.data(), k, b.data(), n, 2.0f,
                     c.data(), n),
            AK_OK)
      << ak_last_error();
  for (std::size_t i = 0; i < c.size(); ++i)
    EXPECT_EQ(c[i], 2.0f * (static_cast<float>(i) - 7.0f)) << "C[" << i << "]";
}

// A valid product with padded leading dimensions writes exactly C's m x n.
TEST(CapiErrorsDegenerate, SgemmWritesOnlyItsRegion) {
  for (ak_trans ta : {AK_NO_TRANS, AK_TRANS}) {
    for (ak_trans tb : {AK_NO_TRANS, AK_TRANS}) {
      SCOPED_TRACE(std::string(trans_tag(ta)) + trans_tag(tb));
      const std::int64_t m = 3, n = 5, k = 4, ldc = 8;
      const std::int64_t lda = (ta == AK_TRANS ? m : k) + 2, ldb = (tb == AK_TRANS ? k : n) + 1;
      std::vector<float> a(64, 1.0f), b(64, 1.0f);
      Canary c(3);
      ASSERT_EQ(
          ak_sgemm(ta, tb, m, n, k, 1.0f, a.data(), lda, b.data(), ldb, 0.0f, c.get() + 1, ldc),
          AK_OK)
          << ak_last_error();
      for (std::int64_t i = 0; i < kBufferLen; ++i) {
        const std::int64_t r = (i - 1) / ldc, col = (i - 1) % ldc;
        const bool inside = i >= 1 && r < m && col < n;
        if (inside)
          EXPECT_EQ(c.data[i], static_cast<float>(k)) << "C[" << i << "]";
        else
          ASSERT_EQ(bits_of(c.data[i]), canary_bits(3, i)) << "C[" << i << "] written";
      }
    }
  }
}

// An operand the products do not read (A and B with k = 0; every one with
// m = 0) may have any stride: the call reads none of it and never offsets
// its pointer (an offset past int64 is undefined, which UBSan stops).
TEST(CapiErrorsDegenerate, StridedBatchIgnoresStridesOfUnreadOperands) {
  constexpr std::int64_t kFar = std::numeric_limits<std::int64_t>::max();
  float a[1] = {1.0f}, b[1] = {1.0f}, c[3] = {2.0f, 4.0f, 8.0f};
  ASSERT_EQ(ak_sgemm_strided_batched(AK_NO_TRANS, AK_NO_TRANS, 1, 1, 0, 1.0f, a, 1, kFar, b, 1,
                                     kFar, 0.5f, c, 1, 1, 3),
            AK_OK)
      << ak_last_error();
  EXPECT_EQ(c[0], 1.0f);
  EXPECT_EQ(c[1], 2.0f);
  EXPECT_EQ(c[2], 4.0f);
  // m = 0 over the largest batch (B, which is not empty, shared): nothing
  // to do, at once.
  EXPECT_EQ(ak_sgemm_strided_batched(AK_NO_TRANS, AK_NO_TRANS, 0, 1, 1, 1.0f, a, 1, kFar, b, 1, 0,
                                     0.0f, c, 1, kFar, kFar),
            AK_OK)
      << ak_last_error();
  EXPECT_EQ(c[0], 1.0f);
}

TEST(CapiErrorsDegenerate, SoftmaxLeavesPaddingAlone) {
  for (bool in_place : {false, true}) {
    SCOPED_TRACE(in_place ? "in place" : "out of place");
    const std::int64_t rows = 3, cols = 5, ld = 9;
    Canary y(3);
    std::vector<float> x(rows * ld, 0.0f);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t j = 0; j < cols; ++j) {
        x[r * ld + j] = static_cast<float>(j);
        if (in_place) y.data[r * ld + j] = static_cast<float>(j);
      }
    ASSERT_EQ(ak_softmax(rows, cols, in_place ? y.get() : x.data(), ld, y.get(), ld), AK_OK)
        << ak_last_error();
    for (std::int64_t i = 0; i < kBufferLen; ++i) {
      if (i < rows * ld && i % ld < cols)
        EXPECT_TRUE(y.data[i] > 0.0f && y.data[i] < 1.0f) << "y[" << i << "] = " << y.data[i];
      else
        ASSERT_EQ(bits_of(y.data[i]), canary_bits(3, i)) << "y[" << i << "] written";
    }
  }
}

TEST(CapiErrorsDegenerate, PositionEncodingWritesExactlyItsTable) {
  for (std::int64_t dim : {1, 6, 7}) {
    SCOPED_TRACE("dim = " + std::to_string(dim));
    const std::int64_t max_len = 5;
    Canary out(3);
    ASSERT_EQ(ak_position_encoding(max_len, dim, 10000.0f, out.get()), AK_OK) << ak_last_error();
    for (std::int64_t i = 0; i < kBufferLen; ++i) {
      if (i < max_len * dim)
        EXPECT_FALSE(std::isnan(out.data[i])) << "out[" << i << "]";
      else
        ASSERT_EQ(bits_of(out.data[i]), canary_bits(3, i)) << "out[" << i << "] written";
    }
    for (std::int64_t p = 0; p < max_len && dim % 2 == 1; ++p)
      EXPECT_EQ(out.data[p * dim + dim - 1], 0.0f) << "odd dim: last column of row " << p;
  }
}

// ------------------------------------------------------ status and version

TEST(CapiErrorsStatus, StringsAreDistinctAndNamed) {
  const std::pair<ak_status, const char *> all[] = {{AK_OK, "AK_OK"},
                                                    {AK_ERR_NULL_POINTER, "AK_ERR_NULL_POINTER"},
                                                    {AK_ERR_BAD_SHAPE, "AK_ERR_BAD_SHAPE"},
                                                    {AK_ERR_BAD_STRIDE, "AK_ERR_BAD_STRIDE"},
                                                    {AK_ERR_BAD_ARGUMENT, "AK_ERR_BAD_ARGUMENT"},
                                                    {AK_ERR_OVERFLOW, "AK_ERR_OVERFLOW"},
                                                    {AK_ERR_OUT_OF_MEMORY, "AK_ERR_OUT_OF_MEMORY"},
                                                    {AK_ERR_UNSUPPORTED, "AK_ERR_UNSUPPORTED"},
                                                    {AK_ERR_INTERNAL, "AK_ERR_INTERNAL"}};
  std::set<std::string> seen;
  for (const auto &[status, name] : all) {
    const char *s = ak_status_string(status);
    ASSERT_NE(s, nullptr) << name;
    EXPECT_NE(std::string(s), "") << name;
    EXPECT_EQ(std::string(s).rfind(name, 0), 0u) << "\"" << s << "\" does not start with " << name;
    EXPECT_TRUE(seen.insert(s).second) << "duplicate: " << s;
  }
  for (int v : {-1, 9, 100, std::numeric_limits<int>::max(), std::numeric_limits<int>::min()}) {
    const char *s = ak_status_string(as_c_enum<ak_status>(v));
    ASSERT_NE(s, nullptr) << v;
    EXPECT_NE(std::string(s), "") << v;
    EXPECT_EQ(seen.count(s), 0u) << v << " reads as a real status: " << s;
  }
}

TEST(CapiErrorsStatus, VersionMatchesHeader) {
  const std::string expected = std::to_string(AK_VERSION_MAJOR) + "." +
                               std::to_string(AK_VERSION_MINOR) + "." +
                               std::to_string(AK_VERSION_PATCH);
  ASSERT_NE(ak_version(), nullptr);
  EXPECT_EQ(std::string(ak_version()), expected);
  EXPECT_EQ(ak_abi_version(), AK_ABI_VERSION);
}

// ------------------------------------------------------------ configuration

TEST(CapiErrorsConfig, IsaRoundTripsAndAutoRestores) {
  const std::string original = ak_get_isa();
  const std::set<std::string> known = {"avx512", "avx2", "sse2", "neon", "scalar"};
  EXPECT_EQ(known.count(original), 1u) << original;
  EXPECT_EQ(ak_set_isa(original.c_str()), AK_OK) << ak_last_error();
  EXPECT_EQ(ak_get_isa(), original);
  EXPECT_EQ(ak_set_isa("scalar"), AK_OK) << ak_last_error(); // always available
  EXPECT_STREQ(ak_get_isa(), "scalar");
  EXPECT_EQ(ak_set_isa(nullptr), AK_OK) << ak_last_error();
  const std::string best = ak_get_isa();
  EXPECT_EQ(ak_set_isa("scalar"), AK_OK);
  EXPECT_EQ(ak_set_isa("auto"), AK_OK) << ak_last_error();
  EXPECT_EQ(ak_get_isa(), best);
  ASSERT_EQ(ak_set_isa(original.c_str()), AK_OK); // leave it as found
}

// "1 if ak_set_isa(name) would succeed on this CPU and build, else 0. No side
// effects."
TEST(CapiErrorsConfig, IsaSupportedAgreesWithSetIsa) {
  const std::string original = ak_get_isa();
  const char *const names[] = {nullptr, "auto",   "avx512",  "avx2", "sse2",
                               "neon",  "scalar", "avx9000", "",     "AVX2"};
  for (const char *name : names) {
    const std::string shown = name ? "\"" + std::string(name) + "\"" : "NULL";
    ASSERT_EQ(ak_set_isa(original.c_str()), AK_OK);
    const int supported = ak_isa_supported(name);
    EXPECT_EQ(ak_get_isa(), original) << "ak_isa_supported(" << shown << ") changed the ISA";
    const ak_status st = ak_set_isa(name);
    EXPECT_EQ(supported, st == AK_OK ? 1 : 0)
        << "ak_isa_supported(" << shown << ") = " << supported << " but ak_set_isa(" << shown
        << ") = " << ak_status_string(st);
  }
  ASSERT_EQ(ak_set_isa(original.c_str()), AK_OK); // leave it as found
}

TEST(CapiErrorsConfig, ThreadCount) {
  const int before = ak_get_num_threads();
  EXPECT_GE(before, 1);
  EXPECT_EQ(ak_set_num_threads(1), AK_OK);
  EXPECT_EQ(ak_get_num_threads(), 1);
  EXPECT_EQ(ak_set_num_threads(0), AK_OK);
  EXPECT_GE(ak_get_num_threads(), 1);
}

TEST(CapiErrorsConfig, SgemmBlockingFollowsTheIsa) {
  EXPECT_EQ(ak_sgemm_get_blocking(nullptr), AK_ERR_NULL_POINTER);
  EXPECT_NE(std::strstr(ak_last_error(), "out is NULL"), nullptr) << ak_last_error();
  const std::string original = ak_get_isa();
  for (const char *name : {"avx512", "avx2", "sse2", "neon", "scalar"}) {
    if (!ak_isa_supported(name)) continue;
    ASSERT_EQ(ak_set_isa(name), AK_OK);
    ak_sgemm_blocking b{};
    ASSERT_EQ(ak_sgemm_get_blocking(&b), AK_OK) << name;
    EXPECT_GE(b.mr, 1) << name;
    EXPECT_GE(b.nr, 1) << name;
    EXPECT_EQ(b.mc % b.mr, 0) << name << ": mc must hold whole register tiles";
    EXPECT_EQ(b.nc % b.nr, 0) << name << ": nc must hold whole register tiles";
    EXPECT_GE(b.kc, 1) << name;
    EXPECT_GE(b.skinny_m, 0) << name;
  }
  ASSERT_EQ(ak_set_isa(original.c_str()), AK_OK);
}

// -------------------------------------------------------------- attention

TEST(CapiErrorsDesc, InitSetsSizeAndWindows) {
  ak_attention_desc d;
  std::memset(&d, 0xAB, sizeof d);
  ak_attention_desc_init(&d);
  EXPECT_EQ(d.struct_size, sizeof(ak_attention_desc));
  EXPECT_EQ(d.window_left, -1);
  EXPECT_EQ(d.window_right, -1);
  EXPECT_EQ(d.batch, 0);
  EXPECT_EQ(d.num_heads, 0);
  EXPECT_EQ(d.head_dim_v, 0);
  EXPECT_EQ(d.scale, 0.0f);
  EXPECT_EQ(d.mask, AK_MASK_NONE);
  EXPECT_EQ(d.bias, nullptr);
  EXPECT_EQ(d.kv_lens, nullptr);
  EXPECT_EQ(d.lse, nullptr);
  EXPECT_EQ(d.probs, nullptr);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(d.q_strides[i], 0) << i;
  ak_attention_desc_init_sized(nullptr, sizeof d); // documented as a no-op, must not crash
  (ak_attention_desc_init)(nullptr);
}

// ------------------------------------------------------- last error per thread

TEST(CapiErrorsThreads, LastErrorIsThreadLocal) {
  ASSERT_EQ(ak_set_num_threads(-3), AK_ERR_BAD_ARGUMENT);
  const std::string mine = ak_last_error();
  ASSERT_NE(mine.find("n = -3"), std::string::npos) << mine;

  std::string fresh, theirs;
  std::thread other([&] {
    fresh = ak_last_error();
    EXPECT_EQ(ak_softmax(-5, 1, nullptr, 1, nullptr, 1), AK_ERR_BAD_SHAPE);
    theirs = ak_last_error();
  });
  other.join();
  EXPECT_EQ(fresh, "") << "a new thread must start with no message";
  EXPECT_NE(theirs.find("rows = -5"), std::string::npos) << theirs;
  EXPECT_EQ(std::string(ak_last_error()), mine);
}

TEST(CapiErrorsThreads, ConcurrentFailuresKeepTheirOwnMessages) {
  constexpr int kThreads = 8, kIterations = 500;
  std::vector<int> mismatches(kThreads, 0);
  std::vector<std::thread> pool;
  for (int t = 0; t < kThreads; ++t) {
    pool.emplace_back([t, &mismatches] {
      for (int i = 0; i < kIterations; ++i) {
        const std::int64_t v = -1 - (t * kIterations + i);
        const ak_status st = t % 2 ? ak_softmax_axis(v, 1, 1, nullptr, nullptr)
                                   : ak_position_encoding(1, v, 10.0f, nullptr);
        const std::string want = (t % 2 ? "outer = " : "dim = ") + std::to_string(v) + " ";
        if (st != AK_ERR_BAD_SHAPE || std::string(ak_last_error()).find(want) == std::string::npos)
          ++mismatches[t];
      }
    });
  }
  for (std::thread &th : pool) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
}

} // namespace
