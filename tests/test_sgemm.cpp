// ak_sgemm and ak_sgemm_strided_batched against the float64 reference, on
// every instruction set: awkward sizes, every transpose pair, padded leading
// dimensions, alpha/beta cases, block-size edges, and a checksum test for
// products too large for the O(mnk) reference.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "reference.hpp"
#include "test_support.hpp"

namespace ak_test {
namespace {

struct GemmCase {
  bool ta, tb;
  std::int64_t m, n, k;
  float alpha, beta;
  std::int64_t pad; // extra floats at the end of every row of A, B and C
};

std::string describe(const GemmCase &g) {
  return "ta=" + std::to_string(g.ta) + " tb=" + std::to_string(g.tb) +
         " m=" + std::to_string(g.m) + " n=" + std::to_string(g.n) + " k=" + std::to_string(g.k) +
         " alpha=" + std::to_string(g.alpha) + " beta=" + std::to_string(g.beta) +
         " pad=" + std::to_string(g.pad);
}

// Runs one product and checks every element of C against the reference, and
// that the padding past n in each row of C was not touched.
void check_gemm(const GemmCase &g, std::uint32_t seed) {
  SCOPED_TRACE(describe(g));
  const std::int64_t a_rows = g.ta ? g.k : g.m, a_cols = g.ta ? g.m : g.k;
  const std::int64_t b_rows = g.tb ? g.n : g.k, b_cols = g.tb ? g.k : g.n;
  const std::int64_t lda = a_cols + g.pad, ldb = b_cols + g.pad, ldc = g.n + g.pad;
  const std::vector<float> a = random_normal(static_cast<std::size_t>(a_rows * lda) + 1, seed);
  const std::vector<float> b = random_normal(static_cast<std::size_t>(b_rows * ldb) + 1, seed + 1);
  std::vector<float> c = random_normal(static_cast<std::size_t>(g.m * ldc) + 1, seed + 2);
  for (std::int64_t i = 0; i < g.m; ++i)
    for (std::int64_t j = g.n; j < ldc; ++j) c[i * ldc + j] = canary();
  if (g.beta == 0.0f) // beta == 0 must ignore C, NaN included
    for (std::int64_t i = 0; i < g.m; ++i)
      for (std::int64_t j = 0; j < g.n; ++j)
        c[i * ldc + j] = std::numeric_limits<float>::quiet_NaN();

  const std::vector<double> ref = ref_sgemm(g.ta, g.tb, g.m, g.n, g.k, g.alpha, a.data(), lda,
                                            b.data(), ldb, g.beta, c.data(), ldc);
  const std::vector<double> ra = row_norms(g.ta, g.m, g.k, a.data(), lda);
  const std::vector<double> cb = col_norms(g.tb, g.k, g.n, b.data(), ldb);
  const std::vector<float> c0 = c;

  ASSERT_EQ(ak_sgemm(g.ta ? AK_TRANS : AK_NO_TRANS, g.tb ? AK_TRANS : AK_NO_TRANS, g.m, g.n, g.k,
                     g.alpha, a.data(), lda, b.data(), ldb, g.beta, c.data(), ldc),
            AK_OK)
      << ak_last_error();

  // DESIGN.md: error <= 1e-6 sqrt(k) relative to the product of norms, plus
  // the rounding of the beta * C term.
  const double eps = std::numeric_limits<float>::epsilon();
  int reported = 0;
  for (std::int64_t i = 0; i < g.m; ++i) {
    for (std::int64_t j = 0; j < g.n; ++j) {
      const double got = c[i * ldc + j], want = ref[static_cast<std::size_t>(i * g.n + j)];
      const double beta_term = g.beta == 0.0f ? 0.0 : std::fabs(g.beta * c0[i * ldc + j]);
      const double tol = 1e-6 * std::sqrt(static_cast<double>(g.k)) * std::fabs(g.alpha) *
                             ra[static_cast<std::size_t>(i)] * cb[static_cast<std::size_t>(j)] +
                         2 * eps * (std::fabs(want) + beta_term) + 1e-30;
      if (!(std::fabs(got - want) <= tol) && reported++ < 5)
        ADD_FAILURE() << "C(" << i << "," << j << ") = " << got << ", expected " << want
                      << " (tolerance " << tol << ")";
    }
    for (std::int64_t j = g.n; j < ldc; ++j)
      if (!is_canary(c[i * ldc + j]) && reported++ < 5)
        ADD_FAILURE() << "padding C(" << i << "," << j << ") was written";
  }
  ASSERT_EQ(reported, 0);
}

class Sgemm : public PerIsa {};

// Each awkward size along one dimension, the other two fixed and small, for
// every transpose pair.
TEST_P(Sgemm, AwkwardSizesEachDimension) {
  const std::int64_t sizes[] = {1, 2, 3, 7, 15, 16, 17, 31, 33, 63, 65, 127, 129, 257, 1000};
  std::uint32_t seed = 1;
  for (int t = 0; t < 4; ++t)
    for (std::int64_t s : sizes) {
      const bool ta = t & 1, tb = t & 2;
      check_gemm({ta, tb, s, 19, 23, 1.0f, 0.0f, 0}, seed++);
      check_gemm({ta, tb, 13, s, 29, 1.0f, 0.0f, 0}, seed++);
      check_gemm({ta, tb, 11, 21, s, 1.0f, 0.0f, 0}, seed++);
    }
}

// Random triples from the awkward list (kept to a few million multiply-adds
// each so that the float64 reference stays fast), with padded leading
// dimensions and the alpha/beta combinations.
TEST_P(Sgemm, RandomShapesAlphaBetaPadding) {
  const std::int64_t sizes[] = {1, 2, 3, 7, 15, 16, 17, 31, 33, 63, 65, 127, 129, 257};
  const float alphas[] = {1.0f, -0.5f, 2.0f};
  const float betas[] = {0.0f, 1.0f, 0.25f, -1.0f};
  std::mt19937 rng(42);
  auto pick = [&] { return sizes[rng() % (sizeof sizes / sizeof sizes[0])]; };
  int done = 0;
  while (done < 48) {
    GemmCase g{
        bool(rng() & 1), bool(rng() & 2),   pick(),           pick(),
        pick(),          alphas[rng() % 3], betas[rng() % 4], static_cast<std::int64_t>(rng() % 5)};
    if (g.m * g.n * g.k > 3'000'000) continue;
    check_gemm(g, 1000u + static_cast<std::uint32_t>(done++));
  }
}

// Sizes around the cache-blocking edges of every instruction set's table
// (MR, NR in 1..32, KC = 256, MC up to 192): off-by-one bugs live here.
TEST_P(Sgemm, BlockEdges) {
  std::uint32_t seed = 5000;
  for (std::int64_t k : {255, 256, 257, 511, 513})
    check_gemm({false, false, 13, 35, k, 1.0f, 0.5f, 1}, seed++);
  for (std::int64_t m : {5, 6, 7, 11, 12, 13, 119, 120, 121, 143, 144, 145, 191, 192, 193, 385})
    check_gemm({false, true, m, 37, 41, 1.0f, 0.0f, 0}, seed++);
  for (std::int64_t n : {4, 5, 8, 9, 15, 16, 17, 31, 32, 33, 47, 48, 49, 63, 64, 65})
    check_gemm({true, false, 29, n, 43, -1.0f, 1.0f, 2}, seed++);
}

// Special scalars: alpha == 0 and k == 0 leave beta * C (and never read A, B).
TEST_P(Sgemm, AlphaZeroAndEmptyK) {
  std::vector<float> a(64, std::numeric_limits<float>::quiet_NaN()), b = a;
  std::vector<float> c(12, 3.0f);
  ASSERT_EQ(ak_sgemm(AK_NO_TRANS, AK_NO_TRANS, 3, 4, 5, 0.0f, a.data(), 5, b.data(), 4, 2.0f,
                     c.data(), 4),
            AK_OK);
  for (float v : c) EXPECT_EQ(v, 6.0f);
  std::fill(c.begin(), c.end(), std::numeric_limits<float>::quiet_NaN());
  ASSERT_EQ(
      ak_sgemm(AK_NO_TRANS, AK_NO_TRANS, 3, 4, 0, 1.0f, nullptr, 1, nullptr, 4, 0.0f, c.data(), 4),
      AK_OK);
  for (float v : c) EXPECT_EQ(v, 0.0f);
}

// Infinities and NaN in A propagate like IEEE arithmetic says (they are not
// filtered by packing or zero-padding).
TEST_P(Sgemm, NanAndInfPropagate) {
  std::vector<float> a(6 * 5, 1.0f), b(5 * 7, 1.0f), c(6 * 7, 0.0f);
  a[2 * 5 + 3] = std::numeric_limits<float>::quiet_NaN(); // row 2 of A
  b[1 * 7 + 4] = std::numeric_limits<float>::infinity();  // column 4 of B
  ASSERT_EQ(ak_sgemm(AK_NO_TRANS, AK_NO_TRANS, 6, 7, 5, 1.0f, a.data(), 5, b.data(), 7, 0.0f,
                     c.data(), 7),
            AK_OK);
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 7; ++j) {
      const float v = c[i * 7 + j];
      if (i == 2)
        EXPECT_TRUE(std::isnan(v)) << i << "," << j;
      else if (j == 4)
        EXPECT_EQ(v, std::numeric_limits<float>::infinity()) << i << "," << j;
      else
        EXPECT_EQ(v, 5.0f) << i << "," << j;
    }
}

// Large products, checked with the checksum C t == alpha A (B t) + beta C0 t
// for a random vector t (BLIS's test): O(mk + kn) work instead of O(mnk).
TEST_P(Sgemm, LargeProductsChecksum) {
  struct Shape {
    bool ta, tb;
    std::int64_t m, n, k;
  };
  for (const Shape s : {Shape{false, false, 1000, 777, 513}, Shape{false, true, 512, 1000, 64},
                        Shape{true, false, 333, 1029, 1000}, Shape{true, true, 600, 400, 700}}) {
    SCOPED_TRACE(describe({s.ta, s.tb, s.m, s.n, s.k, 1.0f, 0.5f, 0}));
    const std::int64_t lda = s.ta ? s.m : s.k, ldb = s.tb ? s.k : s.n;
    const auto a = random_normal(static_cast<std::size_t>(s.m * s.k), 7);
    const auto b = random_normal(static_cast<std::size_t>(s.k * s.n), 8);
    auto c = random_normal(static_cast<std::size_t>(s.m * s.n), 9);
    const auto c0 = c;
    const auto t = random_normal(static_cast<std::size_t>(s.n), 10);
    ASSERT_EQ(ak_sgemm(s.ta ? AK_TRANS : AK_NO_TRANS, s.tb ? AK_TRANS : AK_NO_TRANS, s.m, s.n, s.k,
                       1.0f, a.data(), lda, b.data(), ldb, 0.5f, c.data(), s.n),
              AK_OK);
    std::vector<double> bt(static_cast<std::size_t>(s.k), 0.0), abs_bt(bt.size(), 0.0);
    for (std::int64_t p = 0; p < s.k; ++p)
      for (std::int64_t j = 0; j < s.n; ++j) {
        const double v = s.tb ? b[j * ldb + p] : b[p * ldb + j];
        bt[p] += v * t[j];
        abs_bt[p] += std::fabs(v * t[j]);
      }
    for (std::int64_t i = 0; i < s.m; ++i) {
      double want = 0, bound = 0, got = 0;
      for (std::int64_t p = 0; p < s.k; ++p) {
        const double v = s.ta ? a[p * lda + i] : a[i * lda + p];
        want += v * bt[p];
        bound += std::fabs(v) * abs_bt[p];
      }
      for (std::int64_t j = 0; j < s.n; ++j) {
        want += 0.5 * c0[i * s.n + j] * t[j];
        bound += std::fabs(0.5 * c0[i * s.n + j] * t[j]);
        got += static_cast<double>(c[i * s.n + j]) * t[j];
      }
      // fp32 rounding of each C entry is relative to the summed magnitudes.
      ASSERT_NEAR(got, want, 1e-6 * std::sqrt(static_cast<double>(s.k)) * bound) << "row " << i;
    }
  }
}

TEST_P(Sgemm, StridedBatchedMatchesLoopOfSgemm) {
  const std::int64_t m = 37, n = 29, k = 45, batch = 7;
  for (const bool shared_b : {false, true}) {
    const std::int64_t sa = m * k + 3, sb = shared_b ? 0 : k * n + 5, sc = m * n + 2;
    const auto a = random_normal(static_cast<std::size_t>(sa * batch), 11);
    const auto b = random_normal(static_cast<std::size_t>(k * n + 5) * batch, 12);
    auto c = random_normal(static_cast<std::size_t>(sc * batch), 13);
    auto c_loop = c;
    ASSERT_EQ(ak_sgemm_strided_batched(AK_NO_TRANS, AK_TRANS, m, n, k, 0.75f, a.data(), k, sa,
                                       b.data(), k, sb, 0.5f, c.data(), n, sc, batch),
              AK_OK)
        << ak_last_error();
    for (std::int64_t i = 0; i < batch; ++i)
      ASSERT_EQ(ak_sgemm(AK_NO_TRANS, AK_TRANS, m, n, k, 0.75f, a.data() + i * sa, k,
                         b.data() + i * sb, k, 0.5f, c_loop.data() + i * sc, n),
                AK_OK);
    for (std::size_t i = 0; i < c.size(); ++i) ASSERT_EQ(c[i], c_loop[i]) << "element " << i;
  }
}

AK_INSTANTIATE_PER_ISA(Sgemm);

} // namespace
} // namespace ak_test
