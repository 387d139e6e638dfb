// ak_sgemm and ak_sgemm_strided_batched against the float64 reference, on
// every instruction set: awkward sizes, every transpose pair, padded leading
// dimensions, alpha/beta cases, block-size edges, and a checksum test for
// products too large for the O(mnk) reference. SgemmBlocking sweeps the edges
// of the blocking ak_sgemm_get_blocking reports for each instruction set;
// SgemmSkinny covers small m (the streaming path), its thread determinism and
// its strided batches.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <random>

#include "reference.hpp"
#include "test_support.hpp"

namespace ak_test {
namespace {

struct GemmCase {
  bool ta, tb;
  std::int64_t m, n, k;
  float alpha, beta;
  // Extra floats at the end of every row of A, B and C: ld = minimal + pad.
  std::int64_t pad_a, pad_b, pad_c;
};

std::string describe(const GemmCase &g) {
  return "ta=" + std::to_string(g.ta) + " tb=" + std::to_string(g.tb) +
         " m=" + std::to_string(g.m) + " n=" + std::to_string(g.n) + " k=" + std::to_string(g.k) +
         " alpha=" + std::to_string(g.alpha) + " beta=" + std::to_string(g.beta) +
         " pad_a=" + std::to_string(g.pad_a) + " pad_b=" + std::to_string(g.pad_b) +
         " pad_c=" + std::to_string(g.pad_c);
}

// Stored shape and leading dimensions of one product's operands.
struct GemmLayout {
  std::int64_t a_rows, a_cols, lda, b_rows, b_cols, ldb, ldc;
};

GemmLayout layout_of(const GemmCase &g) {
  GemmLayout l;
  l.a_rows = g.ta ? g.k : g.m;
  l.a_cols = g.ta ? g.m : g.k;
  l.b_rows = g.tb ? g.n : g.k;
  l.b_cols = g.tb ? g.k : g.n;
  l.lda = l.a_cols + g.pad_a;
  l.ldb = l.b_cols + g.pad_b;
  l.ldc = g.n + g.pad_c;
  return l;
}

// Floats a rows x cols matrix with leading dimension ld spans: (rows - 1) *
// ld + cols, what the API requires (0 for an empty matrix).
std::int64_t extent(std::int64_t rows, std::int64_t cols, std::int64_t ld) {
  return rows <= 0 || cols <= 0 ? 0 : (rows - 1) * ld + cols;
}

// `count` rows x cols matrices `stride` floats apart (stride 0: one matrix),
// in a buffer of exactly the extent the API requires, so that ASan reports a
// read past its end. Entries of the matrices are ~N(0, 1); every other float
// (row padding, gaps between matrices) is NaN, which poisons any result it
// leaks into.
std::vector<float> operand(std::int64_t count, std::int64_t stride, std::int64_t rows,
                           std::int64_t cols, std::int64_t ld, std::uint32_t seed) {
  const std::int64_t one = extent(rows, cols, ld);
  if (one == 0 || count == 0) return {};
  const std::int64_t total = (count - 1) * stride + one;
  const std::vector<float> values = random_normal(static_cast<std::size_t>(total), seed);
  std::vector<float> x(static_cast<std::size_t>(total), std::numeric_limits<float>::quiet_NaN());
  for (std::int64_t i = 0; i < count; ++i)
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c) {
        const std::size_t at = static_cast<std::size_t>(i * stride + r * ld + c);
        x[at] = values[at];
      }
  return x;
}

// Output buffer for `count` m x n matrices `stride` apart, with kGuard floats
// before and after. Everything outside the matrices holds the canary; the
// matrices hold ~N(0, 1), or NaN for beta == 0 (which must ignore C).
constexpr std::int64_t kGuard = 64;

struct GuardedC {
  std::vector<float> buf;
  std::vector<bool> inside; // buf[i] belongs to one of the matrices
  float *data() { return buf.data() + kGuard; }
  const float *data() const { return buf.data() + kGuard; }
};

GuardedC guarded_c(std::int64_t count, std::int64_t stride, std::int64_t m, std::int64_t n,
                   std::int64_t ldc, float beta, std::uint32_t seed) {
  const std::int64_t span = count == 0 ? 0 : (count - 1) * stride + m * ldc;
  GuardedC out;
  out.buf.assign(static_cast<std::size_t>(span + 2 * kGuard), canary());
  out.inside.assign(out.buf.size(), false);
  const std::vector<float> values = random_normal(out.buf.size(), seed);
  for (std::int64_t i = 0; i < count; ++i)
    for (std::int64_t r = 0; r < m; ++r)
      for (std::int64_t c = 0; c < n; ++c) {
        const std::size_t at = static_cast<std::size_t>(kGuard + i * stride + r * ldc + c);
        out.buf[at] = beta == 0.0f ? std::numeric_limits<float>::quiet_NaN() : values[at];
        out.inside[at] = true;
      }
  return out;
}

// Every float outside the matrices must still be the canary.
int count_stray_writes(const GuardedC &c) {
  int bad = 0;
  for (std::size_t i = 0; i < c.buf.size(); ++i)
    if (!c.inside[i] && !is_canary(c.buf[i]) && bad++ < 5)
      ADD_FAILURE() << "C buffer float " << static_cast<std::int64_t>(i) - kGuard
                    << " (outside every matrix) was written: " << c.buf[i];
  return bad;
}

// Checks one product's C (c, with c0 its contents before the call) against the
// float64 reference; reports up to 5 failures and returns their count.
int compare_to_reference(const GemmCase &g, const float *a, std::int64_t lda, const float *b,
                         std::int64_t ldb, const float *c0, const float *c, std::int64_t ldc) {
  // The reference reads op(A) along rows and op(B) down columns; dense
  // copies of op(A) and op(B)^T make both walks contiguous whatever the
  // transposes (much faster for wide B). Copying is exact: same sums.
  std::vector<float> op_a(static_cast<std::size_t>(g.m * g.k)),
      op_bt(static_cast<std::size_t>(g.n * g.k));
  for (std::int64_t i = 0; i < g.m; ++i)
    for (std::int64_t p = 0; p < g.k; ++p)
      op_a[static_cast<std::size_t>(i * g.k + p)] = g.ta ? a[p * lda + i] : a[i * lda + p];
  for (std::int64_t j = 0; j < g.n; ++j)
    for (std::int64_t p = 0; p < g.k; ++p)
      op_bt[static_cast<std::size_t>(j * g.k + p)] = g.tb ? b[j * ldb + p] : b[p * ldb + j];
  const std::int64_t ld = std::max<std::int64_t>(g.k, 1);
  const std::vector<double> ref = ref_sgemm(false, true, g.m, g.n, g.k, g.alpha, op_a.data(), ld,
                                            op_bt.data(), ld, g.beta, c0, ldc);
  const std::vector<double> ra = row_norms(false, g.m, g.k, op_a.data(), ld);
  const std::vector<double> cb = col_norms(true, g.k, g.n, op_bt.data(), ld);
  // docs/design.md: error <= 1e-6 sqrt(k) relative to the product of norms, plus
  // the rounding of the beta * C term.
  const double eps = std::numeric_limits<float>::epsilon();
  int bad = 0;
  for (std::int64_t i = 0; i < g.m; ++i)
    for (std::int64_t j = 0; j < g.n; ++j) {
      const double got = c[i * ldc + j], want = ref[static_cast<std::size_t>(i * g.n + j)];
      const double beta_term = g.beta == 0.0f ? 0.0 : std::fabs(g.beta * c0[i * ldc + j]);
      const double tol = 1e-6 * std::sqrt(static_cast<double>(g.k)) * std::fabs(g.alpha) *
                             ra[static_cast<std::size_t>(i)] * cb[static_cast<std::size_t>(j)] +
                         2 * eps * (std::fabs(want) + beta_term) + 1e-30;
      if (!(std::fabs(got - want) <= tol) && bad++ < 5)
        ADD_FAILURE() << "C(" << i << "," << j << ") = " << got << ", expected " << want
                      << " (error " << std::fabs(got - want) << ", tolerance " << tol << ")";
    }
  return bad;
}

// Runs one product and checks every element of C against the reference, and
// that nothing around C's matrix (row padding, guards) was touched.
void check_gemm(const GemmCase &g, std::uint32_t seed) {
  SCOPED_TRACE(describe(g));
  const GemmLayout l = layout_of(g);
  const std::vector<float> a = operand(1, 0, l.a_rows, l.a_cols, l.lda, seed);
  const std::vector<float> b = operand(1, 0, l.b_rows, l.b_cols, l.ldb, seed + 1);
  GuardedC c = guarded_c(1, 0, g.m, g.n, l.ldc, g.beta, seed + 2);
  const GuardedC c0 = c;

  ASSERT_EQ(ak_sgemm(g.ta ? AK_TRANS : AK_NO_TRANS, g.tb ? AK_TRANS : AK_NO_TRANS, g.m, g.n, g.k,
                     g.alpha, a.data(), l.lda, b.data(), l.ldb, g.beta, c.data(), l.ldc),
            AK_OK)
      << ak_last_error();
  int bad = compare_to_reference(g, a.data(), l.lda, b.data(), l.ldb, c0.data(), c.data(), l.ldc);
  bad += count_stray_writes(c);
  ASSERT_EQ(bad, 0);
}

// Reproducible variety for the i-th case of a sweep: alpha/beta pairs (beta
// == 0 runs with NaN in C) and row padding of each operand (0 = the minimal
// leading dimension). The table lengths are coprime so that the combinations
// rotate against each other and against the sweep's own dimensions.
GemmCase varied(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, unsigned i) {
  static const float ab[5][2] = {
      {1.0f, 0.0f}, {-0.5f, 1.0f}, {2.0f, 0.25f}, {0.75f, 0.0f}, {-1.5f, 0.5f}};
  static const std::int64_t pads[7] = {1, 0, 3, 17, 2, 5, 8};
  GemmCase g{ta, tb, m, n, k, ab[i % 5][0], ab[i % 5][1], 0, 0, 0};
  g.pad_a = pads[i % 7];
  g.pad_b = pads[(i + 3) % 7];
  g.pad_c = pads[(i + 5) % 7];
  return g;
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
      check_gemm({ta, tb, s, 19, 23, 1.0f, 0.0f, 0, 0, 0}, seed++);
      check_gemm({ta, tb, 13, s, 29, 1.0f, 0.0f, 0, 0, 0}, seed++);
      check_gemm({ta, tb, 11, 21, s, 1.0f, 0.0f, 0, 0, 0}, seed++);
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
    GemmCase g{bool(rng() & 1),   bool(rng() & 2),  pick(), pick(), pick(),
               alphas[rng() % 3], betas[rng() % 4], 0,      0,      0};
    g.pad_a = g.pad_b = g.pad_c = static_cast<std::int64_t>(rng() % 5);
    if (g.m * g.n * g.k > 3'000'000) continue;
    check_gemm(g, 1000u + static_cast<std::uint32_t>(done++));
  }
}

// Sizes around the cache-blocking edges of every instruction set's table
// (MR, NR in 1..32, KC = 256, MC up to 192): off-by-one bugs live here.
TEST_P(Sgemm, BlockEdges) {
  std::uint32_t seed = 5000;
  for (std::int64_t k : {255, 256, 257, 511, 513})
    check_gemm({false, false, 13, 35, k, 1.0f, 0.5f, 1, 1, 1}, seed++);
  for (std::int64_t m : {5, 6, 7, 11, 12, 13, 119, 120, 121, 143, 144, 145, 191, 192, 193, 385})
    check_gemm({false, true, m, 37, 41, 1.0f, 0.0f, 0, 0, 0}, seed++);
  for (std::int64_t n : {4, 5, 8, 9, 15, 16, 17, 31, 32, 33, 47, 48, 49, 63, 64, 65})
    check_gemm({true, false, 29, n, 43, -1.0f, 1.0f, 2, 2, 2}, seed++);
  // Widths on either side of AVX-512's second tile (6 x 64 for 33-64 and
  // 97-128 columns), with two k blocks and both layouts of A.
  for (std::int64_t n : {32, 33, 64, 65, 96, 97, 100, 128, 129})
    for (bool ta : {false, true}) check_gemm({ta, false, 29, n, 600, 1.0f, 0.5f, 1, 0, 2}, seed++);
  // Row-major A with a row stride of a multiple of 4 KiB (packed, not read in
  // place, once n spans 3 slivers) next to strides just off it.
  for (std::int64_t pad_a : {0, 1})
    for (std::int64_t n : {40, 64, 65, 100, 129})
      check_gemm({false, false, 37, n, 1024, 1.0f, 0.0f, pad_a, 0, 0}, seed++);
}

// Products small enough for a team to share C out without a barrier (each
// thread its own rows or columns), where B's rows lie contiguous (NN, TN)
// and the micro-kernel may read full slivers of B in place (while k * ldb
// <= 32768 floats): padded row strides (which the kernel must step by),
// widths with and without an edge sliver, k * ldb at the limit and just
// past it, AVX-512's 6 x 64 tile on a team (n > 128); 2 and 3 threads,
// against the reference and bit for bit against one thread (packed B).
TEST_P(Sgemm, SmallProductsOnATeam) {
  const GemmCase cases[] = {
      {false, false, 40, 64, 64, 1.0f, 0.0f, 0, 3, 1},      // few rows: own columns
      {false, false, 100, 100, 200, -0.5f, 1.0f, 1, 17, 0}, // an edge sliver
      {true, false, 128, 100, 200, 2.0f, 0.25f, 3, 5, 2},   // A packed, an edge sliver
      {false, false, 128, 128, 256, 1.0f, 0.0f, 0, 0, 0},   // k * ldb = 32768: in place
      {false, false, 128, 128, 256, 0.75f, 0.5f, 2, 1, 3},  // 32768 + 256: packed
      {false, false, 203, 192, 64, 1.0f, -1.0f, 5, 8, 1},   // 6 x 64 on AVX-512
      {true, false, 64, 256, 64, -1.5f, 0.0f, 1, 2, 0},     // 6 x 64, A packed
      {false, false, 203, 64, 200, 1.0f, 0.5f, 8, 1, 5},    // rows no tile divides
  };
  std::uint32_t seed = 7000;
  for (const int threads : {2, 3})
    for (const GemmCase &g : cases) {
      ASSERT_EQ(ak_set_num_threads(threads), AK_OK);
      check_gemm(g, seed);
      const GemmLayout l = layout_of(g);
      const std::vector<float> a = operand(1, 0, l.a_rows, l.a_cols, l.lda, seed);
      const std::vector<float> b = operand(1, 0, l.b_rows, l.b_cols, l.ldb, seed + 1);
      std::vector<float> c[2];
      for (int run = 0; run < 2; ++run) {
        ASSERT_EQ(ak_set_num_threads(run == 0 ? threads : 1), AK_OK);
        c[run] = operand(1, 0, g.m, g.n, l.ldc, seed + 2);
        ASSERT_EQ(ak_sgemm(g.ta ? AK_TRANS : AK_NO_TRANS, AK_NO_TRANS, g.m, g.n, g.k, g.alpha,
                           a.data(), l.lda, b.data(), l.ldb, g.beta, c[run].data(), l.ldc),
                  AK_OK);
      }
      ASSERT_EQ(0, std::memcmp(c[0].data(), c[1].data(), c[0].size() * sizeof(float)))
          << describe(g) << ", " << threads << " threads";
      ++seed;
    }
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
    SCOPED_TRACE(describe({s.ta, s.tb, s.m, s.n, s.k, 1.0f, 0.5f, 0, 0, 0}));
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

// C as a [m, batch, n] tensor: each product's rows interleaved with the
// others' within one row of ldc, with gaps between the segments that no
// product may write. Small products run one per thread on a team, large ones
// each on the whole team; the same bits as a loop of ak_sgemm either way.
TEST_P(Sgemm, StridedBatchedInterleavedRows) {
  struct Shape {
    std::int64_t m, n, k, batch;
  };
  for (const Shape s : {Shape{3, 4, 2, 2}, Shape{37, 29, 45, 7}, Shape{130, 70, 90, 3}}) {
    const std::int64_t sc = s.n + 3, ldc = (s.batch - 1) * sc + s.n + 5; // gaps of 3, then 5
    const std::int64_t sa = s.m * s.k, sb = s.k * s.n;
    const auto a = random_normal(static_cast<std::size_t>(sa * s.batch), 14);
    const auto b = random_normal(static_cast<std::size_t>(sb * s.batch), 15);
    const auto c0 = random_normal(static_cast<std::size_t>(s.m * ldc), 16);
    std::vector<float> c_loop = c0;
    for (std::int64_t i = 0; i < s.batch; ++i)
      ASSERT_EQ(ak_sgemm(AK_NO_TRANS, AK_NO_TRANS, s.m, s.n, s.k, 1.5f, a.data() + i * sa, s.k,
                         b.data() + i * sb, s.n, 0.25f, c_loop.data() + i * sc, ldc),
                AK_OK);
    for (int threads : {1, 2, 3}) {
      ak_set_num_threads(threads);
      std::vector<float> c = c0;
      ASSERT_EQ(ak_sgemm_strided_batched(AK_NO_TRANS, AK_NO_TRANS, s.m, s.n, s.k, 1.5f, a.data(),
                                         s.k, sa, b.data(), s.n, sb, 0.25f, c.data(), ldc, sc,
                                         s.batch),
                AK_OK)
          << ak_last_error();
      for (std::size_t i = 0; i < c.size(); ++i)
        ASSERT_EQ(c[i], c_loop[i]) << "element " << i << " (" << i / ldc << ", " << i % ldc << "), "
                                   << threads << " threads, m = " << s.m;
    }
    ak_set_num_threads(0);
  }
}

AK_INSTANTIATE_PER_ISA(Sgemm);

// Runs a sweep's cases, numbering them for the rotation of `variety` and for
// distinct seeds.
class Sweep {
public:
  using Variety = GemmCase (*)(bool, bool, std::int64_t, std::int64_t, std::int64_t, unsigned);
  Sweep(Variety variety, std::uint32_t seed) : variety_(variety), seed_(seed) {}
  void run(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k) {
    check_gemm(variety_(ta, tb, m, n, k, case_), seed_ + 3 * case_);
    ++case_;
  }

private:
  Variety variety_;
  std::uint32_t seed_;
  unsigned case_ = 0;
};

// ------------------------------------------------- blocking of the ISA in use

// Bounds that keep the sweeps below cheap; a table outside them is reported
// rather than swept.
bool plausible(const ak_sgemm_blocking &b) {
  return b.mr >= 1 && b.mr <= 64 && b.nr >= 1 && b.nr <= 128 && b.mc >= b.mr && b.mc <= 1024 &&
         b.kc >= 1 && b.kc <= 2048 && b.nc >= b.nr && b.nc <= 16384 && b.skinny_m >= 0 &&
         b.skinny_m <= 64 && b.kc_narrow >= 1 && b.kc_narrow <= 2048 && b.narrow_n >= 0 &&
         b.narrow_n <= b.nc;
}

std::string describe(const ak_sgemm_blocking &b) {
  return "mr=" + std::to_string(b.mr) + " nr=" + std::to_string(b.nr) +
         " mc=" + std::to_string(b.mc) + " kc=" + std::to_string(b.kc) +
         " kc_narrow=" + std::to_string(b.kc_narrow) + " narrow_n=" + std::to_string(b.narrow_n) +
         " nc=" + std::to_string(b.nc) + " skinny_m=" + std::to_string(b.skinny_m);
}

// Sizes >= 1, each once, in order of first appearance.
std::vector<std::int64_t> distinct_positive(std::initializer_list<std::int64_t> sizes) {
  std::vector<std::int64_t> out;
  for (std::int64_t s : sizes)
    if (s >= 1 && std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
  return out;
}

// Per ISA: the blocking reported by ak_sgemm_get_blocking after ak_set_isa,
// and sizes one below, at and one above each of its block edges. Products
// with m <= skinny_m may take the skinny path instead (up to 8 rows always),
// so the blocked path's register-tile row edges are also probed at tile_m_,
// the first multiple of mr past skinny_m.
class SgemmBlocking : public PerIsa {
protected:
  void SetUp() override {
    PerIsa::SetUp();
    if (HasFatalFailure()) return;
    ASSERT_EQ(ak_sgemm_get_blocking(&blk_), AK_OK) << ak_last_error();
    ASSERT_TRUE(plausible(blk_)) << describe(blk_);
    const ak_sgemm_blocking &b = blk_;
    tile_m_ = (b.skinny_m / b.mr + 1) * b.mr;
    m_edges_ = distinct_positive({b.mr - 1, b.mr, b.mr + 1, b.skinny_m, b.skinny_m + 1, tile_m_ - 1,
                                  tile_m_, tile_m_ + 1, b.mc - 1, b.mc, b.mc + 1, 2 * b.mc + 1});
    n_edges_ = distinct_positive({b.nr - 1, b.nr, b.nr + 1, 2 * b.nr + 1});
    k_edges_ = distinct_positive({1, b.kc - 1, b.kc, b.kc + 1, 2 * b.kc, 2 * b.kc + 1,
                                  b.kc_narrow - 1, b.kc_narrow, b.kc_narrow + 1});
  }
  ak_sgemm_blocking blk_{};
  std::int64_t tile_m_ = 0;
  std::vector<std::int64_t> m_edges_, n_edges_, k_edges_;
};

TEST_P(SgemmBlocking, ReportsPlausibleTable) {
  // SetUp checked the ranges; the table is a pure function of the ISA.
  ak_sgemm_blocking again{};
  ASSERT_EQ(ak_sgemm_get_blocking(&again), AK_OK);
  EXPECT_EQ(describe(again), describe(blk_));
  EXPECT_EQ(ak_sgemm_get_blocking(nullptr), AK_ERR_NULL_POINTER);
  EXPECT_NE(std::string(ak_last_error()).find("out"), std::string::npos) << ak_last_error();
}

// Every m edge (register tile, skinny path, row blocks) against every n edge,
// with a small awkward k, and once more with k just past kc (two k blocks, so
// the second accumulates into C), for every transpose pair.
TEST_P(SgemmBlocking, RowEdges) {
  SCOPED_TRACE(describe(blk_));
  Sweep sweep(varied, 20000);
  for (int t = 0; t < 4; ++t)
    for (std::int64_t m : m_edges_) {
      for (std::int64_t n : n_edges_) sweep.run(t & 1, t & 2, m, n, 23);
      sweep.run(t & 1, t & 2, m, blk_.nr + 1, blk_.kc + 1);
    }
}

// Every k edge (one block, kc exactly, two and three equal blocks) with tall,
// skinny and short m against the n edges.
TEST_P(SgemmBlocking, DepthEdges) {
  SCOPED_TRACE(describe(blk_));
  const ak_sgemm_blocking &b = blk_;
  const std::int64_t mn[][2] = {
      {b.mr + 1, b.nr - 1}, {tile_m_ - 1, b.nr + 1},        {tile_m_ + 1, b.nr - 1},
      {b.skinny_m, b.nr},   {b.skinny_m + 1, 2 * b.nr + 1}, {1, 2 * b.nr + 1},
      {b.mc + 1, b.nr + 1}};
  Sweep sweep(varied, 30000);
  for (int t = 0; t < 4; ++t)
    for (std::int64_t k : k_edges_)
      for (const auto &s : mn)
        if (s[0] >= 1 && s[1] >= 1) sweep.run(t & 1, t & 2, s[0], s[1], k);
}

// Every n edge (register tile, several tiles, nc-wide B panels) with short
// m on both paths and tall m; the panel edges also with two k blocks.
TEST_P(SgemmBlocking, ColumnEdges) {
  SCOPED_TRACE(describe(blk_));
  const ak_sgemm_blocking &b = blk_;
  std::vector<std::int64_t> ns = n_edges_;
  for (std::int64_t n : {b.nc - 1, b.nc, b.nc + 1}) ns.push_back(n);
  Sweep sweep(varied, 40000);
  for (int t = 0; t < 4; ++t) {
    for (std::int64_t n : ns)
      for (std::int64_t m : distinct_positive({1, b.skinny_m, b.skinny_m + 1, b.mr + 1, b.mc + 1}))
        if (n < b.nc - 1 || m < b.mc) // wide panels only with short m
          sweep.run(t & 1, t & 2, m, n, 7);
    sweep.run(t & 1, t & 2, b.skinny_m + 1, b.nc + 1, b.kc + 1); // blocked path
    if (t == 0 || t == 3) {
      if (b.mr + 1 > b.skinny_m + 1) sweep.run(t & 1, t & 2, b.mr + 1, b.nc + 1, b.kc + 1);
      if (b.skinny_m >= 1) sweep.run(t & 1, t & 2, b.skinny_m, b.nc + 1, b.kc + 1);
    }
  }
}

// Where the instruction set has a second, wider tile (AVX-512: 6 x 64, KC
// 512, the tile of every product whose width it pads no more than the main
// tile; src/gemm/gemm_driver.hpp), its edges in terms of the main tile's
// table: 2 nr columns, kc_narrow deep, mr / 2 rows. On the other ISAs these
// are just more edges of the one tile.
TEST_P(SgemmBlocking, SecondTileEdges) {
  SCOPED_TRACE(describe(blk_));
  const ak_sgemm_blocking &b = blk_;
  const std::int64_t w = 2 * b.nr;
  const std::vector<std::int64_t> ns =
      distinct_positive({2 * w - 1, 2 * w, 2 * w + 1, 3 * w - 1, 3 * w, 3 * w + 1, 4 * w + 1});
  const std::vector<std::int64_t> ms = distinct_positive({tile_m_, tile_m_ + b.mr / 2 + 1});
  Sweep sweep(varied, 60000);
  for (int t : {0, 3})
    for (std::int64_t m : ms)
      for (std::int64_t n : ns)
        for (std::int64_t k : distinct_positive({b.kc_narrow - 1, b.kc_narrow + 1}))
          sweep.run(t & 1, t & 2, m, n, k);
  for (int t = 0; t < 4; ++t) // row blocks, with both tiles' widths
    for (std::int64_t m : distinct_positive({b.mc - 1, b.mc + 1}))
      for (std::int64_t n : distinct_positive({3 * w, 3 * w + 1}))
        sweep.run(t & 1, t & 2, m, n, 23);
}

// A smaller full cross product of the edges of all three dimensions.
TEST_P(SgemmBlocking, CrossProduct) {
  SCOPED_TRACE(describe(blk_));
  const ak_sgemm_blocking &b = blk_;
  Sweep sweep(varied, 50000);
  for (int t = 0; t < 4; ++t)
    for (std::int64_t m : distinct_positive({b.skinny_m, tile_m_ + 1, b.mc + 1}))
      for (std::int64_t n : distinct_positive({b.nr - 1, 2 * b.nr + 1}))
        for (std::int64_t k : distinct_positive({1, b.kc + 1, 2 * b.kc + 1}))
          sweep.run(t & 1, t & 2, m, n, k);
}

AK_INSTANTIATE_PER_ISA(SgemmBlocking);

// ------------------------------------------- skinny products (small m)

// m from 1 to past the skinny path's limit (at least 9).
std::int64_t skinny_m_max() {
  ak_sgemm_blocking b{};
  EXPECT_EQ(ak_sgemm_get_blocking(&b), AK_OK);
  return std::max<std::int64_t>(9, std::min<std::int64_t>(b.skinny_m, 64) + 1);
}

// The row counts the skinny sweeps take: every m up to 9 (each has a
// kernel of its own), then the row groups' edges (groups of 8 and 4, the
// 32 rows B stored n x k takes) up to the skinny limit and one past it.
// Under the sanitizers (kSanitized) fewer of the small ones.
std::vector<std::int64_t> skinny_ms() {
  const std::int64_t m_max = skinny_m_max();
  std::vector<std::int64_t> ms;
  const auto add = [&](std::int64_t m) {
    if (m >= 1 && m <= m_max && std::find(ms.begin(), ms.end(), m) == ms.end()) ms.push_back(m);
  };
  if (kSanitized)
    for (std::int64_t m : {1, 2, 3, 4, 5, 8, 9, 13, 16, 17, 32, 33}) add(m);
  else
    for (std::int64_t m :
         {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 16, 17, 20, 24, 25, 31, 32, 33, 40, 45})
      add(m);
  add(m_max - 1);
  add(m_max);
  return ms;
}

// Like varied(), with alpha mostly != 1, beta in {0, 1, 0.5} and every
// leading dimension padded.
GemmCase varied_skinny(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k,
                       unsigned i) {
  static const float alphas[4] = {-1.5f, 0.75f, 1.0f, 3.0f};
  static const float betas[3] = {0.0f, 1.0f, 0.5f};
  static const std::int64_t pads[5] = {1, 3, 17, 2, 5};
  GemmCase g{ta, tb, m, n, k, alphas[i % 4], betas[i % 3], 0, 0, 0};
  g.pad_a = pads[i % 5];
  g.pad_b = pads[(i + 2) % 5];
  g.pad_c = pads[(i + 4) % 5];
  return g;
}

class SgemmSkinny : public PerIsa {};

// 32 and 64: whole k blocks of the widest NN tiles (which are 48 and 64
// floats wide on AVX-512, so 47 to 49 and 97 cut them too); 2, 6 and 18
// with the rest: every remainder of n by the NT tiles' 2, 3 and 4 columns.
const std::int64_t kSkinnySizes[] = {1,  2,  3,  6,  15, 16, 17, 18,  31,  32,  33,
                                     47, 48, 49, 63, 64, 65, 97, 127, 129, 257, 1000};

// For each small m and transpose pair: every awkward n with a fixed k, and
// every awkward k with a fixed n.
TEST_P(SgemmSkinny, EachDimension) {
  Sweep sweep(varied_skinny, 60000);
  for (const std::int64_t m : skinny_ms())
    for (int t = 0; t < 4; ++t)
      for (std::int64_t s : kSkinnySizes) {
        const std::int64_t other = (m + t + s) % 2 ? 33 : 17;
        sweep.run(t & 1, t & 2, m, s, other);
        sweep.run(t & 1, t & 2, m, other, s);
      }
}

// Random (n, k) pairs from the awkward sizes.
TEST_P(SgemmSkinny, RandomPairs) {
  std::mt19937 rng(7);
  const std::size_t count = sizeof kSkinnySizes / sizeof kSkinnySizes[0];
  Sweep sweep(varied_skinny, 70000);
  for (const std::int64_t m : skinny_ms())
    for (int t = 0; t < 4; ++t)
      for (int r = 0; r < 2; ++r) {
        const std::int64_t n = kSkinnySizes[rng() % count], k = kSkinnySizes[rng() % count];
        sweep.run(t & 1, t & 2, m, n, k);
      }
}

// n = k = 1031 (past the awkward list: several k blocks, many column tiles):
// m = 1 and m = the skinny limit (8 if there is none) with every transpose
// pair, a few m between and just past it with one pair each.
TEST_P(SgemmSkinny, LargeSquarish) {
  const std::int64_t m_max = skinny_m_max();
  Sweep sweep(varied_skinny, 80000);
  for (int t = 0; t < 4; ++t) {
    sweep.run(t & 1, t & 2, 1, 1031, 1031);
    sweep.run(t & 1, t & 2, m_max - 1, 1031, 1031);
  }
  sweep.run(false, true, 3, 1031, 1031);
  sweep.run(true, false, 5, 1031, 1031);
  sweep.run(true, true, m_max, 1031, 1031);
}

// k just past 4096, the shallowest k block of the kernel for B stored n x
// k (skinny_k_block; the one for B stored k x n walks k 8 or 32 rows at a
// time).
TEST_P(SgemmSkinny, DeepK) {
  Sweep sweep(varied_skinny, 85000);
  for (const std::int64_t m : skinny_ms())
    for (int t = 0; t < 4; ++t) sweep.run(t & 1, t & 2, m, m % 2 ? 19 : 33, 4099);
}

// k past the deepest k block of the streaming kernels (with B stored n x
// k, skinny_k_block: the whole of k where m rows of A fit in an L2 share, up
// to 98304 floats for one row on AVX-512; cut into several equal blocks for
// more rows). Small integers, so that every partial sum is exact in float
// whatever the order: C must equal the integer result exactly, and a term
// lost or taken twice at a block's edge shows (the random data of the
// sweeps hides one term in 10^5 within docs/design.md's tolerance).
TEST_P(SgemmSkinny, DeepKExactSums) {
  const std::int64_t m_max = skinny_m_max() < 8 ? skinny_m_max() : 8;
  const std::int64_t n = 19, k = 98317;
  for (const bool tb : {false, true})
    for (const std::int64_t m : distinct_positive({1, 2, 5, m_max})) {
      SCOPED_TRACE("m=" + std::to_string(m) + (tb ? " B stored n x k" : " B stored k x n"));
      std::vector<float> a(static_cast<std::size_t>(m * k)), b(static_cast<std::size_t>(k * n));
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t p = 0; p < k; ++p)
          a[static_cast<std::size_t>(i * k + p)] = static_cast<float>((i * 7 + p * 13) % 5 - 2);
      for (std::int64_t p = 0; p < k; ++p)
        for (std::int64_t j = 0; j < n; ++j)
          b[static_cast<std::size_t>(tb ? j * k + p : p * n + j)] =
              static_cast<float>((j * 3 + p * 11) % 7 - 3);
      std::vector<float> c(static_cast<std::size_t>(m * n), canary());
      ASSERT_EQ(ak_sgemm(AK_NO_TRANS, tb ? AK_TRANS : AK_NO_TRANS, m, n, k, 1.0f, a.data(), k,
                         b.data(), tb ? k : n, 0.0f, c.data(), n),
                AK_OK)
          << ak_last_error();
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t j = 0; j < n; ++j) {
          std::int64_t want = 0; // |want| <= 6 k < 2^24: exact in float
          for (std::int64_t p = 0; p < k; ++p)
            want += ((i * 7 + p * 13) % 5 - 2) * ((j * 3 + p * 11) % 7 - 3);
          ASSERT_EQ(c[static_cast<std::size_t>(i * n + j)], static_cast<float>(want))
              << "C(" << i << "," << j << ")";
        }
    }
}

// A large B (n k >= 2^21 floats), where products of more rows than one
// skinny tile takes stream it too (the plan; smaller ones are packed): row
// groups 8 + 1, 8 + 8, 8 + 8 + 1, 32 and 33 (the most rows that B stored
// n x k takes, and one past) and up to the skinny limit and one past it, B
// stored either way (n = 523: strips, single vectors and 11 lanes on
// AVX-512, 3 lanes on AVX2 and SSE2).
TEST_P(SgemmSkinny, LargeB) {
  const std::int64_t m_max = skinny_m_max();
  Sweep sweep(varied_skinny, 86000);
  // (Under the sanitizers: a group of 8 + 1, the most rows of B stored
  // n x k and one past, and the limit.)
  const std::vector<std::int64_t> ms =
      kSanitized ? distinct_positive({9, 32, 33, m_max})
                 : distinct_positive({9, 16, 17, 32, 33, m_max - 1, m_max});
  for (const bool tb : {false, true})
    for (const std::int64_t m : ms) sweep.run(m % 2 == 1, tb, m, 523, 4099);
  // B stored along k past 8 rows: every remainder of n by the wide tiles'
  // 3 and 4 columns (n = 523 leaves 1 by 3 and 3 by 4).
  for (const std::int64_t m : distinct_positive({9, 12, 16, 24, 32}))
    if (m <= m_max && (!kSanitized || m == 12 || m == 32))
      for (const std::int64_t n : {522, 524}) sweep.run(false, true, m, n, 4099);
}

// Like varied_skinny(), with A's leading dimension (when A is stored m x k)
// a multiple of 1024 floats: rows 4 KiB apart, which the skinny path copies
// to a padded block because they would all share one L1 set.
GemmCase aliased_skinny(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k,
                        unsigned i) {
  GemmCase g = varied_skinny(ta, tb, m, n, k, i);
  if (!ta) g.pad_a = (k + 1023) / 1024 * 1024 - k + (i % 2 ? 1024 : 0);
  return g;
}

// Aliased row strides of A for the skinny row counts; k = 1024 also makes
// the copy's own unpadded stride alias, k = 1000 does not; n = 1024 makes
// the rows of the running sums alias (padded too).
TEST_P(SgemmSkinny, AliasedRowStrides) {
  Sweep sweep(aliased_skinny, 87000);
  const std::vector<std::int64_t> all = skinny_ms();
  // (Under the sanitizers every other row count, the first and last kept.)
  std::vector<std::int64_t> ms;
  for (std::size_t i = 0; i < all.size(); ++i)
    if (!kSanitized || i % 2 == 0 || i + 1 == all.size()) ms.push_back(all[i]);
  for (const std::int64_t m : ms)
    for (int t = 0; t < 4; ++t)
      for (const std::int64_t k : {1000, 1024})
        sweep.run(t & 1, t & 2, m, k == 1000 ? 1024 : m % 2 ? 37 : 64, k);
}

// Bit-identical results for 1 and 2 threads and for repeated calls (no
// reduction may be split by thread count, docs/design.md).
TEST_P(SgemmSkinny, DeterministicAcrossThreadsAndCalls) {
  // B of 2^21 floats and more, so that past 8 rows the skinny paths take
  // it too (the plan), with up to 45 rows: the row groups of the widest
  // of them (13: a group of 8 and one of 5; 45: five of 8 and one of 5).
  const std::int64_t n = 1031, k = 2063;
  const auto a = random_normal(static_cast<std::size_t>(45 * k), 90);
  const auto b = random_normal(static_cast<std::size_t>(k * n), 91);
  const auto c0 = random_normal(static_cast<std::size_t>(45 * n), 92);
  // (Under the sanitizers: the widest groups, and one repeated call.)
  const std::vector<std::int64_t> ms = kSanitized ? std::vector<std::int64_t>{1, 13, 45}
                                                  : std::vector<std::int64_t>{1, 4, 8, 13, 32, 45};
  const std::vector<int> calls =
      kSanitized ? std::vector<int>{1, 2, 2} : std::vector<int>{1, 2, 1, 2};
  for (const std::int64_t m : ms)
    for (int t = 0; t < 4; ++t)
      for (const float beta : {0.0f, 0.5f}) {
        const bool ta = t & 1, tb = t & 2;
        SCOPED_TRACE(describe({ta, tb, m, n, k, 1.25f, beta, 0, 0, 0}));
        std::vector<float> first;
        for (const int threads : calls) {
          ASSERT_EQ(ak_set_num_threads(threads), AK_OK);
          std::vector<float> c(c0.begin(), c0.begin() + m * n);
          ASSERT_EQ(ak_sgemm(ta ? AK_TRANS : AK_NO_TRANS, tb ? AK_TRANS : AK_NO_TRANS, m, n, k,
                             1.25f, a.data(), ta ? m : k, b.data(), tb ? k : n, beta, c.data(), n),
                    AK_OK)
              << ak_last_error();
          if (first.empty())
            first = c;
          else
            ASSERT_EQ(0, std::memcmp(first.data(), c.data(), c.size() * sizeof(float)))
                << "threads = " << threads << " differs from the first call (threads = 1)";
        }
      }
}

// Strided batches of skinny products against the reference, item by item:
// gaps between the matrices, B (or A) reused with stride 0, every transpose
// pair, beta == 0 over NaN and beta != 0.
TEST_P(SgemmSkinny, StridedBatched) {
  const std::int64_t batch = 5;
  struct Shape {
    std::int64_t m, n, k;
  };
  unsigned i = 0;
  for (int t = 0; t < 4; ++t)
    for (const Shape s : {Shape{1, 65, 33}, Shape{5, 129, 17}, Shape{8, 31, 257}, Shape{3, 1, 63}})
      for (const int reuse : {0, 1, 2}) { // 0: none, 1: stride_b = 0, 2: stride_a = 0
        const GemmCase g = varied_skinny(t & 1, t & 2, s.m, s.n, s.k, i++);
        SCOPED_TRACE(describe(g) + " batch=5 reuse=" + std::to_string(reuse));
        const GemmLayout l = layout_of(g);
        const std::int64_t ea = extent(l.a_rows, l.a_cols, l.lda);
        const std::int64_t eb = extent(l.b_rows, l.b_cols, l.ldb);
        const std::int64_t sa = reuse == 2 ? 0 : ea + 3, sb = reuse == 1 ? 0 : eb + 7;
        const std::int64_t sc = g.m * l.ldc + 5;
        const std::vector<float> a = operand(batch, sa, l.a_rows, l.a_cols, l.lda, 100 + i);
        const std::vector<float> b = operand(batch, sb, l.b_rows, l.b_cols, l.ldb, 200 + i);
        GuardedC c = guarded_c(batch, sc, g.m, g.n, l.ldc, g.beta, 300 + i);
        const GuardedC c0 = c;
        ASSERT_EQ(ak_sgemm_strided_batched(g.ta ? AK_TRANS : AK_NO_TRANS,
                                           g.tb ? AK_TRANS : AK_NO_TRANS, g.m, g.n, g.k, g.alpha,
                                           a.data(), l.lda, sa, b.data(), l.ldb, sb, g.beta,
                                           c.data(), l.ldc, sc, batch),
                  AK_OK)
            << ak_last_error();
        int bad = 0;
        for (std::int64_t p = 0; p < batch; ++p) {
          SCOPED_TRACE("batch item " + std::to_string(p));
          bad += compare_to_reference(g, a.data() + p * sa, l.lda, b.data() + p * sb, l.ldb,
                                      c0.data() + p * sc, c.data() + p * sc, l.ldc);
        }
        bad += count_stray_writes(c);
        ASSERT_EQ(bad, 0);
      }
}

AK_INSTANTIATE_PER_ISA(SgemmSkinny);

} // namespace
} // namespace ak_test
