// Coverage-guided differential fuzzing of ak_sgemm and
// ak_sgemm_strided_batched (libFuzzer).
//
// Each input picks the transposes, m, n and k (small, skinny, or a skinny
// product over a B of 8 MiB and more, which takes the wide skinny tiles),
// padded leading dimensions, alpha and beta (0, 1, -1 or another value),
// a batch with its strides (0 for a shared A or B; C's matrices one after
// another or their rows interleaved), a NaN in C where beta is 0, a few
// special values (NaN, +inf, -inf) in A or B, the instruction set and the
// thread count. The call must then:
// - for a shape the generator made invalid on purpose (a negative size, a
//   leading dimension below its minimum, overlapping C matrices): return an
//   error with a message, and write nothing;
// - otherwise: return AK_OK, agree with the float64 reference
//   (tests/reference.cpp) within tests/test_sgemm.cpp's bound (1e-6 sqrt(k)
//   times the norms of op(A)'s row and op(B)'s column, plus the rounding of
//   beta C), with NaN and infinities exactly where the reference has them;
//   leave C's padding untouched; and give the same bits on the other thread
//   count. Every row is checked, but where m n k > 2^24 (the B of 8 MiB)
//   only the first, the last and three between.
// A disagreement aborts, so that libFuzzer keeps the input.
// (The library runs small problems on one thread whatever the setting, so
// the thread-count comparison bites only on the larger inputs: about one
// in ten of the committed attention inputs, one in three of the softmax
// and sgemm ones.)
// Build and run: scripts/fuzz.sh; replayed by ctest from
// tests/fuzz/corpus/sgemm.txt.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "attnkern.h"
#include "fuzz/fuzz_support.hpp"
#include "reference.hpp"

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
using ak_fuzz::kCanary;

[[noreturn]] void fail(const char *what, long long a = 0, long long b = 0, double got = 0,
                       double want = 0) {
  ak_fuzz::fail("fuzz_sgemm", what, a, b, got, want);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *bytes, std::size_t size) {
  ak_fuzz::Choices in(bytes, size);
  const char *isa = in.isa();
  const int threads = in.threads();
  const bool ta = in.flag(), tb = in.flag();

  std::int64_t m = 0, n = 0, k = 0;
  switch (in.in<int>(0, 15)) {
  case 0: // a skinny product over a B of 2^21 floats and more
    m = in.in(1, 48), n = in.in(1024, 2100), k = in.in(2048, 2100);
    break;
  case 1:
  case 2:
  case 3: // skinny
    m = in.in(1, 16), n = in.in(0, 600), k = in.in(0, 600);
    break;
  default:
    m = in.in(0, 90), n = in.in(0, 140), k = in.in(0, 300);
    break;
  }
  bool invalid = false;
  const std::int64_t batch = in.in<int>(0, 3) == 0 ? in.in(0, 4) : 1;
  const bool batched = batch != 1 || in.flag();
  // op(A) is m x k, op(B) k x n: stored rows x cols, each row padded.
  const std::int64_t a_rows = ta ? k : m, a_cols = ta ? m : k;
  const std::int64_t b_rows = tb ? n : k, b_cols = tb ? k : n;
  auto ld_for = [&](std::int64_t cols) { return (cols > 1 ? cols : 1) + in.in(0, 9); };
  std::int64_t lda = ld_for(a_cols), ldb = ld_for(b_cols), ldc = ld_for(n);
  std::int64_t stride_a = a_rows * lda + in.in(0, 7), stride_b = b_rows * ldb + in.in(0, 7);
  if (in.in<int>(0, 7) == 0) stride_a = 0;
  if (in.in<int>(0, 7) == 0) stride_b = 0;
  std::int64_t stride_c = m * ldc + in.in(0, 7);
  if (batched && batch > 1 && in.in<int>(0, 3) == 0) { // C rows interleaved: [m, batch, n]
    stride_c = n + in.in(0, 3);
    ldc = std::max<std::int64_t>((batch - 1) * stride_c + n + in.in(0, 3), 1);
  }
  switch (in.in<int>(0, 63)) {
  case 0:
    lda = (a_cols > 1 ? a_cols : 1) - 1, invalid = true;
    break;
  case 1:
    m = -1, invalid = true;
    break;
  case 2: // C's matrices overlap
    if (batched && batch > 1 && m > 1 && n > 0) stride_c = (m - 1) * ldc + n - 1, invalid = true;
    break;
  default:
    break;
  }

  const float alpha = std::vector<float>{1.0f, -1.0f, 0.0f, 0.75f}[in.in<int>(0, 3)];
  const float beta = std::vector<float>{0.0f, 1.0f, -1.0f, 0.5f}[in.in<int>(0, 3)];
  const std::int64_t count = batched ? batch : 1;
  auto extent = [](std::int64_t rows, std::int64_t ld, std::int64_t stride, std::int64_t b) {
    return rows <= 0 || b <= 0 ? 1 : (b - 1) * stride + rows * ld + 1;
  };
  const std::int64_t n_a = invalid ? 64 : extent(a_rows, lda, stride_a, count);
  const std::int64_t n_b = invalid ? 64 : extent(b_rows, ldb, stride_b, count);
  const std::int64_t n_c = invalid ? 64 : extent(m, ldc, stride_c, count);

  std::mt19937 rng(in.u32());
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> a(static_cast<std::size_t>(n_a), kCanary),
      b(static_cast<std::size_t>(n_b), kCanary);
  std::vector<float> c(static_cast<std::size_t>(n_c), kCanary);
  std::vector<char> a_entry(a.size()), b_entry(b.size()), c_entry(c.size());
  auto mark = [&](std::vector<char> &e, std::int64_t rows, std::int64_t cols, std::int64_t ld,
                  std::int64_t stride) {
    if (invalid) return;
    for (std::int64_t i = 0; i < count; ++i)
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t j = 0; j < cols; ++j) e[i * stride + r * ld + j] = 1;
  };
  mark(a_entry, a_rows, a_cols, lda, stride_a);
  mark(b_entry, b_rows, b_cols, ldb, stride_b);
  mark(c_entry, m, n, ldc, stride_c);
  for (std::size_t e = 0; e < a.size(); ++e)
    if (a_entry[e]) a[e] = normal(rng);
  for (std::size_t e = 0; e < b.size(); ++e)
    if (b_entry[e]) b[e] = normal(rng);
  const bool c_nan = beta == 0.0f && in.flag(); // beta == 0 ignores C, NaN included
  for (std::size_t e = 0; e < c.size(); ++e)
    if (c_entry[e]) c[e] = c_nan && (rng() & 3) == 0 ? kNaN : normal(rng);
  const int n_special = in.in<int>(0, 2);
  for (int s = 0; s < n_special; ++s) {
    const float value = std::vector<float>{kNaN, kInf, -kInf}[in.in<int>(0, 2)];
    std::vector<float> &t = in.flag() ? a : b;
    const std::vector<char> &entry = &t == &a ? a_entry : b_entry;
    const std::size_t e = in.u32() % t.size();
    if (entry[e]) t[e] = value;
  }
  const std::vector<float> c0 = c;

  if (ak_set_isa(isa) != AK_OK) fail("ak_set_isa");
  auto call = [&]() {
    if (batched)
      return ak_sgemm_strided_batched(ta ? AK_TRANS : AK_NO_TRANS, tb ? AK_TRANS : AK_NO_TRANS, m,
                                      n, k, alpha, a.data(), lda, stride_a, b.data(), ldb, stride_b,
                                      beta, c.data(), ldc, stride_c, batch);
    return ak_sgemm(ta ? AK_TRANS : AK_NO_TRANS, tb ? AK_TRANS : AK_NO_TRANS, m, n, k, alpha,
                    a.data(), lda, b.data(), ldb, beta, c.data(), ldc);
  };
  ak_set_num_threads(threads);
  const ak_status st = call();
  if (invalid) {
    if (st == AK_OK) fail("an invalid shape was accepted");
    if (std::string(ak_last_error()).empty()) fail("an error without a message");
    for (std::size_t e = 0; e < c.size(); ++e)
      if (!ak_fuzz::same_bits(c[e], c0[e])) fail("C written on error", static_cast<long long>(e));
    return 0;
  }
  if (st != AK_OK) {
    std::fprintf(stderr, "%s\n", ak_last_error());
    fail("a valid shape was refused", st);
  }

  // Every row of C against the reference; for the largest products (the
  // wide skinny tiles' B of 8 MiB), the first, the last and rows in between.
  const double eps = std::numeric_limits<float>::epsilon();
  const std::int64_t row_step = m * n * k > (std::int64_t{1} << 24) ? (m + 3) / 4 : 1;
  for (std::int64_t i = 0; i < count; ++i) {
    const float *ai = a.data() + i * stride_a, *bi = b.data() + i * stride_b;
    const float *ci0 = c0.data() + i * stride_c;
    const std::vector<double> cb = ak_test::col_norms(tb, k, n, bi, ldb);
    for (std::int64_t r = 0; r < m; r = r + row_step < m || r == m - 1 ? r + row_step : m - 1) {
      const float *a_row = ta ? ai + r : ai + r * lda; // op(A)'s row r
      const std::vector<double> ref =
          ak_test::ref_sgemm(ta, tb, 1, n, k, alpha, a_row, lda, bi, ldb, beta, ci0 + r * ldc, ldc);
      const double ra = ak_test::row_norms(ta, 1, k, a_row, lda)[0];
      for (std::int64_t j = 0; j < n; ++j) {
        const double got = c[i * stride_c + r * ldc + j], want = ref[j];
        bool ok;
        if (std::isnan(want)) {
          ok = std::isnan(got);
        } else if (std::isinf(want)) {
          ok = got == want;
        } else {
          const double beta_term = beta == 0.0f ? 0.0 : std::fabs(beta * ci0[r * ldc + j]);
          const double product = alpha == 0.0f || k == 0 ? 0.0 : std::fabs(alpha) * ra * cb[j];
          const double tol = 1e-6 * std::sqrt(static_cast<double>(k)) * product +
                             2 * eps * (std::fabs(want) + beta_term) + 1e-30;
          ok = std::fabs(got - want) <= tol;
        }
        if (!ok) fail("C", r, j, got, want);
      }
    }
  }
  for (std::size_t e = 0; e < c.size(); ++e)
    if (!c_entry[e] && !ak_fuzz::same_bits(c[e], c0[e]))
      fail("C's padding written", static_cast<long long>(e));

  // The same bits on the other thread count.
  const std::vector<float> first = c;
  c = c0;
  ak_set_num_threads(3 - threads);
  if (call() != AK_OK) fail("the second call was refused");
  for (std::size_t e = 0; e < c.size(); ++e)
    if (!ak_fuzz::same_bits(first[e], c[e]))
      fail("differs across thread counts", static_cast<long long>(e), 0, c[e], first[e]);
  return 0;
}
