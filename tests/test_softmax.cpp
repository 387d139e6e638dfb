// ak_softmax, ak_log_softmax and ak_softmax_axis against the float64
// reference on every instruction set: awkward shapes, padded rows, in place,
// and the special values (-inf, all -inf rows, NaN, +inf, +-1e38).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "reference.hpp"
#include "test_support.hpp"

namespace ak_test {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr double kEps = std::numeric_limits<float>::epsilon(); // one ulp at 1, relative

// Error bounds. Softmax: docs/design.md's 2e-7 relative per element on unit-scale
// inputs. On wider inputs the bound follows from the parts: exp within 1 ulp,
// the rounding of the sum and of the division half an ulp each, summation a
// fraction of an ulp: 3 ulp. Log-softmax y = x - (m + log s) is conditioned
// by the magnitudes it subtracts: 2 ulp of |x| + |m| + |log s|.
constexpr double kSoftmaxUnitScaleRel = 2e-7;
constexpr double kSoftmaxRel = 3 * kEps;

// Checks a row's result; NaN expected means NaN required.
void expect_row(const float *got, const float *x, std::int64_t n, bool log, double rel_tol,
                const std::string &where) {
  const std::vector<double> ref = ref_softmax_row(x, n, log);
  double m = -INFINITY, s = 0;
  for (std::int64_t j = 0; j < n; ++j) m = std::fmax(m, x[j]);
  for (std::int64_t j = 0; j < n; ++j) s += std::isfinite(m) ? std::exp(x[j] - m) : 0.0;
  int bad = 0;
  for (std::int64_t j = 0; j < n && bad < 5; ++j) {
    const double want = ref[static_cast<std::size_t>(j)], y = got[j];
    bool ok;
    if (std::isnan(want))
      ok = std::isnan(y);
    else if (std::isinf(want))
      ok = y == want;
    else if (log)
      ok = std::fabs(y - want) <= 2 * kEps * (std::fabs(x[j]) + std::fabs(m) + std::log(s));
    else
      ok = std::fabs(y - want) <= rel_tol * want;
    if (!ok) {
      ++bad;
      ADD_FAILURE() << where << " element " << j << " of " << n << ": got " << y << ", expected "
                    << want << " (x = " << x[j] << ")";
    }
  }
}

class Softmax : public PerIsa {};

// Every awkward row length, padded rows (checked untouched), in place and
// out of place, softmax and log-softmax.
TEST_P(Softmax, RowsMatchReference) {
  const std::int64_t cols_list[] = {1,  2,  3,  7,   15,  16,  17,   31,
                                    33, 63, 65, 127, 129, 257, 1000, 4099};
  std::uint32_t seed = 1;
  for (bool log : {false, true})
    for (bool in_place : {false, true})
      for (std::int64_t cols : cols_list)
        for (std::int64_t rows : {1, 3, 17}) {
          const std::int64_t ld = cols + (seed % 3 == 0 ? 0 : 5);
          const std::string where = std::string(log ? "log_softmax" : "softmax") +
                                    (in_place ? " in place" : "") +
                                    " rows=" + std::to_string(rows) +
                                    " cols=" + std::to_string(cols) + " ld=" + std::to_string(ld);
          std::vector<float> x = random_normal(static_cast<std::size_t>(rows * ld), seed++);
          for (std::int64_t r = 0; r < rows; ++r)
            for (std::int64_t j = cols; j < ld; ++j) x[r * ld + j] = canary();
          const std::vector<float> x0 = x;
          std::vector<float> y(x.size(), canary());
          float *out = in_place ? x.data() : y.data();
          const ak_status st = log ? ak_log_softmax(rows, cols, x.data(), ld, out, ld)
                                   : ak_softmax(rows, cols, x.data(), ld, out, ld);
          ASSERT_EQ(st, AK_OK) << ak_last_error();
          for (std::int64_t r = 0; r < rows; ++r) {
            expect_row(out + r * ld, x0.data() + r * ld, cols, log, kSoftmaxUnitScaleRel,
                       where + " row " + std::to_string(r));
            for (std::int64_t j = cols; j < ld; ++j)
              ASSERT_TRUE(is_canary(out[r * ld + j])) << where << ": padding written";
          }
          if (!in_place) {
            ASSERT_EQ(0, std::memcmp(x.data(), x0.data(), x.size() * sizeof(float)));
          }
        }
}

// Wide dynamic range with some -inf entries: the 3-ulp bound.
TEST_P(Softmax, WideRangeAndMaskedEntries) {
  for (std::int64_t cols : {5, 64, 333, 32768}) {
    std::vector<float> x = random_normal(static_cast<std::size_t>(cols), 77, 10.0f);
    for (std::int64_t j = 0; j < cols; j += 3) x[j] = -kInf;
    std::vector<float> y(x.size()), z(x.size());
    ASSERT_EQ(ak_softmax(1, cols, x.data(), cols, y.data(), cols), AK_OK);
    ASSERT_EQ(ak_log_softmax(1, cols, x.data(), cols, z.data(), cols), AK_OK);
    expect_row(y.data(), x.data(), cols, false, kSoftmaxRel,
               "softmax cols=" + std::to_string(cols));
    expect_row(z.data(), x.data(), cols, true, 0, "log_softmax cols=" + std::to_string(cols));
    for (std::int64_t j = 0; j < cols; j += 3) {
      ASSERT_EQ(y[j], 0.0f);
      ASSERT_EQ(z[j], -kInf);
    }
    double sum = 0;
    for (float v : y) sum += v;
    EXPECT_NEAR(sum, 1.0, 1e-6);
  }
}

TEST_P(Softmax, AllNegativeInfinityRowGivesZerosNotNaN) {
  for (std::int64_t cols : {1, 7, 16, 100}) {
    std::vector<float> x(static_cast<std::size_t>(2 * cols), -kInf), y(x.size()), z(x.size());
    for (std::int64_t j = 0; j < cols; ++j) x[cols + j] = static_cast<float>(j); // row 1 normal
    ASSERT_EQ(ak_softmax(2, cols, x.data(), cols, y.data(), cols), AK_OK);
    ASSERT_EQ(ak_log_softmax(2, cols, x.data(), cols, z.data(), cols), AK_OK);
    for (std::int64_t j = 0; j < cols; ++j) {
      EXPECT_EQ(y[j], 0.0f);
      EXPECT_EQ(z[j], -kInf);
      EXPECT_TRUE(std::isfinite(y[cols + j]));
    }
  }
}

// A NaN among -inf entries: the row is NaN, not the zeros of an all -inf row.
TEST_P(Softmax, NanAmongNegativeInfinityGivesNaN) {
  for (std::int64_t cols : {1, 7, 16, 100}) {
    for (std::int64_t pos : {std::int64_t{0}, cols / 2, cols - 1}) {
      std::vector<float> x(static_cast<std::size_t>(cols), -kInf), y(x.size()), z(x.size());
      x[static_cast<std::size_t>(pos)] = kNaN;
      ASSERT_EQ(ak_softmax(1, cols, x.data(), cols, y.data(), cols), AK_OK);
      ASSERT_EQ(ak_log_softmax(1, cols, x.data(), cols, z.data(), cols), AK_OK);
      for (std::int64_t j = 0; j < cols; ++j) {
        EXPECT_TRUE(std::isnan(y[j])) << cols << " " << pos << " " << j;
        EXPECT_TRUE(std::isnan(z[j])) << cols << " " << pos << " " << j;
      }
    }
  }
}

// A NaN (or +inf, whose weight is inf/inf) makes its own row NaN and no other.
TEST_P(Softmax, NanAndPositiveInfinityStayInTheirRow) {
  for (float poison : {kNaN, kInf}) {
    for (std::int64_t pos : {0, 5, 16, 39}) {
      const std::int64_t rows = 3, cols = 40;
      std::vector<float> x = random_normal(static_cast<std::size_t>(rows * cols), 3);
      x[cols + pos] = poison;
      std::vector<float> y(x.size()), z(x.size());
      ASSERT_EQ(ak_softmax(rows, cols, x.data(), cols, y.data(), cols), AK_OK);
      ASSERT_EQ(ak_log_softmax(rows, cols, x.data(), cols, z.data(), cols), AK_OK);
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t j = 0; j < cols; ++j) {
          const std::size_t i = static_cast<std::size_t>(r * cols + j);
          EXPECT_EQ(std::isnan(y[i]), r == 1) << "row " << r << " col " << j;
          EXPECT_EQ(std::isnan(z[i]), r == 1) << "row " << r << " col " << j;
        }
    }
  }
}

// Short rows go through the kernel several at a time (softmax_rows): each
// row must get the same bits as when it is computed alone, and a special row
// (NaN, +inf, all -inf, huge maxima) among ordinary ones must keep its own
// result and leave theirs alone.
TEST_P(Softmax, ShortRowsSameBitsAloneOrGrouped) {
  const std::int64_t rows = 23;
  for (const std::int64_t cols : {1, 16, 40, 100, 256})
    for (const bool log : {false, true}) {
      SCOPED_TRACE(std::string(log ? "log_softmax" : "softmax") + " cols=" + std::to_string(cols));
      std::vector<float> x = random_normal(static_cast<std::size_t>(rows * cols), 31);
      x[1 * cols + cols / 2] = kNaN; // row 1
      for (std::int64_t j = 0; j < cols; ++j) x[static_cast<std::size_t>(2 * cols + j)] = -kInf;
      x[5 * cols] = kInf;                     // row 5
      for (std::int64_t j = 0; j < cols; ++j) // row 6: maxima past vexp_shifted's range
        x[static_cast<std::size_t>(6 * cols + j)] = 1e30f * static_cast<float>(j % 3);
      for (std::int64_t j = 0; j < cols; ++j) x[static_cast<std::size_t>(9 * cols + j)] = -kInf;
      x[9 * cols + cols - 1] = kNaN; // row 9: NaN among -inf
      // Rows whose maximum is below 0 or above 64 subtract it; the others
      // sum exp(x) itself (unshifted_row): rows 12 and 14 make their group of
      // four (AVX-512) mixed, rows 16-19 a group of shifted rows, row 13's
      // maximum is exactly 0 and row 21's exactly 64.
      const auto offset_row = [&](std::int64_t r, float to_max) {
        float *row = x.data() + r * cols, m = row[0];
        for (std::int64_t j = 0; j < cols; ++j) m = std::fmax(m, row[j]);
        for (std::int64_t j = 0; j < cols; ++j) row[j] = row[j] - m + to_max;
      };
      offset_row(12, -20.0f);
      offset_row(13, 0.0f);
      offset_row(14, 70.0f);
      for (std::int64_t r = 16; r < 20; ++r) offset_row(r, -1.0f - static_cast<float>(r));
      offset_row(21, 64.0f);
      std::vector<float> all(x.size()), alone(x.size());
      const auto run = [&](std::int64_t n_rows, const float *in, float *out) {
        return log ? ak_log_softmax(n_rows, cols, in, cols, out, cols)
                   : ak_softmax(n_rows, cols, in, cols, out, cols);
      };
      ASSERT_EQ(run(rows, x.data(), all.data()), AK_OK);
      for (std::int64_t r = 0; r < rows; ++r)
        ASSERT_EQ(run(1, x.data() + r * cols, alone.data() + r * cols), AK_OK);
      ASSERT_EQ(0, std::memcmp(all.data(), alone.data(), all.size() * sizeof(float)));
      for (std::int64_t r = 0; r < rows; ++r) {
        const float *y = all.data() + r * cols;
        for (std::int64_t j = 0; j < cols; ++j) {
          if (r == 1 || r == 5 || r == 9)
            ASSERT_TRUE(std::isnan(y[j])) << "row " << r << " col " << j;
          else if (r == 2)
            ASSERT_EQ(y[j], log ? -kInf : 0.0f) << "col " << j;
          else
            ASSERT_FALSE(std::isnan(y[j])) << "row " << r << " col " << j;
        }
        if (r != 1 && r != 2 && r != 5 && r != 9)
          expect_row(y, x.data() + r * cols, cols, log, log ? 0 : kSoftmaxUnitScaleRel,
                     "row " + std::to_string(r));
      }
    }
}

// Log-softmax of rows whose sum s is near 1 (one entry far above the
// others): log s is small, and so is the bound (2 ulp of |x| + |m| +
// log s) wherever x and m are small too. log s must come from the sum to
// better than a float (s rounded to float alone moved it by up to 6e-8)
// and the sum from exact two-sums (a Kahan fold lost half an ulp of 1 where
// the maximum came after the small terms). Rows of up to two vectors of the
// narrowest instruction set, the maximum first, last and between.
TEST_P(Softmax, LogSoftmaxOfRowsWhoseSumIsNearOne) {
  std::vector<std::vector<float>> rows = {{7.40471587e-05f, -7.78074503f},
                                          {-7.78074503f, 7.40471587e-05f},
                                          {-8.69314957f, 0.0001316329f},
                                          {-0.00611560186f, -2.66530752f}};
  for (const std::int64_t cols : {3, 5, 8})
    for (const std::int64_t top : {std::int64_t{0}, cols / 2, cols - 1}) {
      std::vector<float> x = random_normal(static_cast<std::size_t>(cols), 53, 0.5f);
      for (float &v : x) v -= 8.0f;
      x[static_cast<std::size_t>(top)] = 1e-4f;
      rows.push_back(x);
    }
  for (const auto &x : rows) {
    const std::int64_t n = static_cast<std::int64_t>(x.size());
    std::vector<float> z(x.size());
    ASSERT_EQ(ak_log_softmax(1, n, x.data(), n, z.data(), n), AK_OK);
    expect_row(z.data(), x.data(), n, true, 0, "log_softmax n=" + std::to_string(n));
  }
}

// Rows whose sum of exponentials nears the float range: equal entries (each
// weight 1 / n) and entries spread over 10 below the maximum, one 75 below. Rows with a
// maximum in [0, 64] sum exp(x) itself (unshifted_row): 32768 e^64 is far
// below FLT_MAX, 32768 e^87 is not (so a higher limit overflows), and below
// -87 exp(x) alone is subnormal (so a limit below 0 loses the weights'
// precision).
TEST_P(Softmax, RowsNearTheLimitsOfTheUnshiftedSum) {
  const std::int64_t n = 32768;
  for (const float v : {-95.0f, -50.0f, -0.0f, 0.0f, 30.0f, 64.0f, 64.5f, 80.0f, 87.0f, 88.7f})
    for (const bool spread : {false, true}) {
      SCOPED_TRACE(std::to_string(v) + (spread ? " spread" : " equal"));
      std::vector<float> x(static_cast<std::size_t>(n), v);
      if (spread) {
        const std::vector<float> u = random_normal(x.size(), 47);
        for (std::size_t j = 1; j < x.size(); ++j) x[j] = v - std::fmin(10.0f, std::fabs(3 * u[j]));
        x[1] = v - 75.0f; // a weight near e^-75: normal, but exp(x) is not where v < -12
      }
      std::vector<float> y(x.size()), z(x.size());
      ASSERT_EQ(ak_softmax(1, n, x.data(), n, y.data(), n), AK_OK);
      ASSERT_EQ(ak_log_softmax(1, n, x.data(), n, z.data(), n), AK_OK);
      expect_row(y.data(), x.data(), n, false, kSoftmaxUnitScaleRel, "softmax");
      expect_row(z.data(), x.data(), n, true, 0, "log_softmax");
    }
}

// Finite inputs of any magnitude never overflow: max is subtracted first.
TEST_P(Softmax, HugeMagnitudesNeverOverflow) {
  const float big = 1e38f, max = std::numeric_limits<float>::max();
  std::vector<std::vector<float>> rows = {
      {big, -big, 0.0f, big}, {-max, max},  {max, max, max}, {-max, -max},
      {big, big * 0.5f},      {1.0f, 1e20f}}; // 1 - 1e20 is inexact: its rounding error (2^42) must
                                              // not reach exp
  for (const float scale : {1e20f, 1e30f})    // inexact differences in every vector lane
    rows.push_back(random_normal(100, 41, scale));
  for (const auto &x : rows) {
    const std::int64_t n = static_cast<std::int64_t>(x.size());
    std::vector<float> y(x.size()), z(x.size());
    ASSERT_EQ(ak_softmax(1, n, x.data(), n, y.data(), n), AK_OK);
    ASSERT_EQ(ak_log_softmax(1, n, x.data(), n, z.data(), n), AK_OK);
    expect_row(y.data(), x.data(), n, false, kSoftmaxRel, "huge");
    for (std::size_t j = 0; j < x.size(); ++j) {
      EXPECT_TRUE(std::isfinite(y[j]));
      EXPECT_FALSE(std::isnan(z[j]));
    }
  }
}

// The same along an axis, on both schemes (short axes and pieces), where a
// moving shift's rescale factor meets inexact differences too: a column of
// -inf but for -(2^64 - 2^41), 2^63 + 2^40 and 2^64 once gave NaN.
TEST_P(Softmax, AxisHugeMagnitudesNeverOverflow) {
  for (const std::int64_t axis : {9, 33, 301}) {
    SCOPED_TRACE(axis);
    const std::int64_t inner = 20;
    std::vector<float> x = random_normal(static_cast<std::size_t>(axis * inner), 43, 1e20f);
    for (std::int64_t a = 0; a < axis; ++a) {
      x[a * inner] = a == 0 ? -0x1.fffffcp63f : a == 4 ? 0x1.000002p63f : a == 8 ? 0x1p64f : -kInf;
      x[a * inner + 1] = 1e30f * static_cast<float>(a % 7) - 3e30f;
    }
    std::vector<float> y(x.size());
    ASSERT_EQ(ak_softmax_axis(1, axis, inner, x.data(), y.data()), AK_OK);
    const std::vector<double> ref = ref_softmax_axis(1, axis, inner, x.data());
    for (std::size_t k = 0; k < y.size(); ++k)
      ASSERT_NEAR(y[k], ref[k], kSoftmaxRel * ref[k] + 1e-38)
          << "row " << k / inner << " column " << k % inner;
  }
}

TEST_P(Softmax, AxisMatchesReference) {
  std::uint32_t seed = 500;
  for (std::int64_t outer : {1, 3})
    // axes up to 32 take blocks of columns, longer ones pieces
    // (src/softmax/softmax_axis.hpp)
    for (std::int64_t axis : {1, 2, 7, 32, 33, 100, 300})
      // up to 33: single vectors and tails; then several vectors with
      // tails; 129 and 300: a block of 8 vectors and more; 1100 and 2100:
      // several pieces of columns (the last narrower)
      for (std::int64_t inner : {1, 2, 3, 15, 16, 17, 33, 70, 129, 300, 1100, 2100}) {
        for (bool in_place : {false, true}) {
          const std::size_t n = static_cast<std::size_t>(outer * axis * inner);
          std::vector<float> x = random_normal(n, seed++);
          const std::vector<float> x0 = x;
          std::vector<float> y(n, canary());
          float *out = in_place ? x.data() : y.data();
          ASSERT_EQ(ak_softmax_axis(outer, axis, inner, x.data(), out), AK_OK) << ak_last_error();
          const std::vector<double> ref = ref_softmax_axis(outer, axis, inner, x0.data());
          for (std::size_t i = 0; i < n; ++i)
            ASSERT_LE(std::fabs(out[i] - ref[i]), kSoftmaxUnitScaleRel * ref[i])
                << "outer=" << outer << " axis=" << axis << " inner=" << inner << " i=" << i
                << " got " << out[i] << " want " << ref[i];
        }
      }
}

// Special values along the axis stay in their column (one inner index).
// inner = 21: one vector and a tail; 300: several vectors, where one
// special column changes its vector's exp (see choose_shifts in
// src/softmax/softmax_axis.hpp).
TEST_P(Softmax, AxisSpecialValuesStayInTheirColumn) {
  for (const std::int64_t axis : {9, 300})
    for (const std::int64_t inner : {21, 300}) {
      SCOPED_TRACE(inner);
      SCOPED_TRACE(axis);
      const std::int64_t outer = 2;
      std::vector<float> x = random_normal(static_cast<std::size_t>(outer * axis * inner), 9);
      for (std::int64_t a = 0; a < axis; ++a) x[a * inner + 4] = -kInf; // column 4: all -inf
      x[3 * inner + 18] = kNaN;                                         // column 18: NaN
      x[axis * inner + 5 * inner + 20] = kInf;                          // outer 1, column 20
      // outer 1, column 10: maxima past vexp_shifted's range
      std::vector<float> column(static_cast<std::size_t>(axis));
      for (std::int64_t a = 0; a < axis; ++a) {
        column[static_cast<std::size_t>(a)] = 70000.0f + 0.125f * static_cast<float>(a % 64);
        x[(axis + a) * inner + 10] = column[static_cast<std::size_t>(a)];
      }
      std::vector<float> y(x.size());
      ASSERT_EQ(ak_softmax_axis(outer, axis, inner, x.data(), y.data()), AK_OK);
      const std::vector<double> ref = ref_softmax_row(column.data(), axis, false);
      for (std::int64_t a = 0; a < axis; ++a) {
        const double want = ref[static_cast<std::size_t>(a)];
        EXPECT_NEAR(y[static_cast<std::size_t>((axis + a) * inner + 10)], want, kSoftmaxRel * want);
      }
      for (std::int64_t o = 0; o < outer; ++o)
        for (std::int64_t a = 0; a < axis; ++a)
          for (std::int64_t i = 0; i < inner; ++i) {
            const float v = y[static_cast<std::size_t>((o * axis + a) * inner + i)];
            const bool nan_col = (o == 0 && i == 18) || (o == 1 && i == 20);
            if (o == 0 && i == 4)
              EXPECT_EQ(v, 0.0f);
            else
              EXPECT_EQ(std::isnan(v), nan_col) << o << "," << a << "," << i;
          }
    }
}

// A column's result is its own: the same bits whatever its neighbours in
// the vector, among them a column whose maximum is past vexp_shifted's range
// (its vector takes vexp_diff), a NaN column and an all -inf column. Axis
// lengths with and without a remainder of single rows, several vectors.
TEST_P(Softmax, AxisColumnSameBitsWhateverItsNeighbours) {
  for (const std::int64_t axis : {9, 37, 301}) {
    SCOPED_TRACE(axis);
    const std::int64_t inner = 48;
    const std::vector<float> plain =
        random_normal(static_cast<std::size_t>(axis * inner), 31, 4.0f);
    std::vector<float> mixed = plain;
    for (std::int64_t a = 0; a < axis; ++a) {
      mixed[a * inner + 1] = 1e6f + static_cast<float>(a % 16);
      mixed[a * inner + 18] = -kInf;
      mixed[a * inner + 33] = -70000.0f - static_cast<float>(a % 16);
    }
    mixed[5 * inner + 40] = kNaN;
    std::vector<float> y_plain(plain.size()), y_mixed(mixed.size());
    ASSERT_EQ(ak_softmax_axis(1, axis, inner, plain.data(), y_plain.data()), AK_OK);
    ASSERT_EQ(ak_softmax_axis(1, axis, inner, mixed.data(), y_mixed.data()), AK_OK);
    for (std::int64_t i = 0; i < inner; ++i) {
      if (i == 1 || i == 18 || i == 33 || i == 40) continue;
      for (std::int64_t a = 0; a < axis; ++a) {
        const std::size_t k = static_cast<std::size_t>(a * inner + i);
        ASSERT_EQ(0, std::memcmp(&y_plain[k], &y_mixed[k], sizeof(float)))
            << "column " << i << " row " << a << ": " << y_plain[k] << " vs " << y_mixed[k];
      }
    }
    for (std::int64_t a = 0; a < axis; ++a) {
      EXPECT_TRUE(std::isnan(y_mixed[static_cast<std::size_t>(a * inner + 40)]));
      EXPECT_EQ(y_mixed[static_cast<std::size_t>(a * inner + 18)], 0.0f);
    }
    // the shifted-out columns are right too
    for (const std::int64_t col : {1, 33}) {
      std::vector<float> line(static_cast<std::size_t>(axis));
      for (std::int64_t a = 0; a < axis; ++a)
        line[static_cast<std::size_t>(a)] = mixed[static_cast<std::size_t>(a * inner + col)];
      const std::vector<double> ref = ref_softmax_row(line.data(), axis, false);
      for (std::int64_t a = 0; a < axis; ++a) {
        const double want = ref[static_cast<std::size_t>(a)];
        EXPECT_NEAR(y_mixed[static_cast<std::size_t>(a * inner + col)], want, kSoftmaxRel * want)
            << "column " << col << " row " << a;
      }
    }
  }
}

// The pieces sum each column against a shift that moves when a value
// passes it by more than 32, from 0 where the first rows' maximum is in
// [0, 32] (src/softmax/softmax_axis.hpp): columns whose shift moves once or
// several times, late, after many -inf rows or for one spike, or that lie
// far below 0, must still match the reference (short axes too), and in place (where every
// exponential is recomputed) must give the bits of out of place (where the
// first pass keeps them and only stale rows are recomputed).
TEST_P(Softmax, AxisShiftMovesAlongTheAxis) {
  for (const std::int64_t axis : {9, 33, 301})
    for (const std::int64_t inner : {40, 1100}) {
      SCOPED_TRACE("axis=" + std::to_string(axis) + " inner=" + std::to_string(inner));
      std::vector<float> x = random_normal(static_cast<std::size_t>(axis * inner), 77);
      for (std::int64_t a = 0; a < axis; ++a)
        for (std::int64_t i = 0; i < inner; ++i) {
          float &v = x[static_cast<std::size_t>(a * inner + i)];
          const float fa = static_cast<float>(a);
          switch (i % 7) {
          case 0:
            v += 0.75f * fa;
            break; // rising: the shift moves every ~43 rows
          case 1:
            v = a < axis / 2 ? -kInf : v;
            break; // first finite value half way down
          case 2:
            v += a == axis - 2 ? 90.0f : 0.0f;
            break; // one spike near the end
          case 3:
            v -= 0.75f * fa;
            break; // falling: set once
          case 4:
            v *= 12.0f;
            break; // wide but unordered
          case 5:
            v -= 95.0f;
            break; // far below 0: shifted by its maximum, not by 0
          default:
            break; // unit scale
          }
        }
      std::vector<float> y(x.size(), canary()), in_place = x;
      ASSERT_EQ(ak_softmax_axis(1, axis, inner, x.data(), y.data()), AK_OK);
      ASSERT_EQ(ak_softmax_axis(1, axis, inner, in_place.data(), in_place.data()), AK_OK);
      ASSERT_EQ(0, std::memcmp(y.data(), in_place.data(), y.size() * sizeof(float)));
      const std::vector<double> ref = ref_softmax_axis(1, axis, inner, x.data());
      for (std::size_t k = 0; k < y.size(); ++k)
        ASSERT_NEAR(y[k], ref[k], kSoftmaxRel * ref[k] + 1e-38)
            << "row " << k / static_cast<std::size_t>(inner) << " column "
            << k % static_cast<std::size_t>(inner);
    }
}

// Short axes first take every exponential as if the column's maximum were
// in [0, 64], and redo the block where the maxima found on the way refute
// that (then skip the guess for a few blocks); in place too, where the redo
// needs x intact. Blocks of unit-normal columns (confirmed), a block with
// one column of each kind that refutes it (-95 below, 70 above, NaN, +inf),
// the blocks after it (no guess) and later ones (guessing again) must all
// give the bits of out of place and match the reference.
TEST_P(Softmax, AxisShortGuessConfirmedOrRedone) {
  for (const std::int64_t axis : {3, 16, 32})
    for (const int kind : {0, 1, 2, 3}) {
      SCOPED_TRACE("axis=" + std::to_string(axis) + " kind=" + std::to_string(kind));
      const std::int64_t inner = 40 * 128 + 7; // 40 blocks of 8 AVX-512 vectors and a tail
      std::vector<float> x = random_normal(static_cast<std::size_t>(axis * inner), 91);
      const std::int64_t odd = 3 * 128 + 77, late = 36 * 128 + 5; // block 3, block 36
      for (const std::int64_t col : {odd, late})
        for (std::int64_t a = 0; a < axis; ++a) {
          float &v = x[static_cast<std::size_t>(a * inner + col)];
          v = kind == 0 ? v - 95.0f : kind == 1 ? v + 70.0f : v;
          if (a == axis / 2) v = kind == 2 ? kNaN : kind == 3 ? kInf : v;
        }
      std::vector<float> y(x.size(), canary()), in_place = x;
      ASSERT_EQ(ak_softmax_axis(1, axis, inner, x.data(), y.data()), AK_OK);
      ASSERT_EQ(ak_softmax_axis(1, axis, inner, in_place.data(), in_place.data()), AK_OK);
      ASSERT_EQ(0, std::memcmp(y.data(), in_place.data(), y.size() * sizeof(float)));
      const std::vector<double> ref = ref_softmax_axis(1, axis, inner, x.data());
      for (std::size_t k = 0; k < y.size(); ++k) {
        if (std::isnan(ref[k])) {
          ASSERT_TRUE(std::isnan(y[k])) << k;
          continue;
        }
        ASSERT_NEAR(y[k], ref[k], kSoftmaxRel * ref[k] + 1e-38)
            << "row " << k / static_cast<std::size_t>(inner) << " column "
            << k % static_cast<std::size_t>(inner);
      }
    }
}

// Out of place into a 64-byte aligned y, a piece of 16 MiB of exponentials
// or more takes streaming stores in the first pass on AVX-512
// (stream_axis_min_bytes in src/isa/config_avx512.hpp); a y one float off
// its alignment, in place, and the other instruction sets do not. All three give the same bits, on
// 1 and 2 threads, and match the reference, with shifts that move on the way (a rising column) and
// stale rows redone.
TEST_P(Softmax, AxisStreamedExponentialsSameBits) {
  const std::int64_t axis = 4099, inner = 1024; // 4099 x 1024 floats: 16.01 MiB
  std::vector<float> x = random_normal(static_cast<std::size_t>(axis * inner), 123);
  for (std::int64_t a = 0; a < axis; ++a) {
    x[static_cast<std::size_t>(a * inner + 5)] += 0.05f * static_cast<float>(a); // moves ~6 times
    x[static_cast<std::size_t>(a * inner + 700)] = a == axis - 3 ? 60.0f : -kInf;
  }
  const std::size_t n = x.size();
  std::vector<float> store(n + 32, canary());
  const auto base = reinterpret_cast<std::uintptr_t>(store.data());
  float *const aligned = store.data() + (64 - base % 64) % 64 / sizeof(float);
  const std::vector<double> ref = ref_softmax_axis(1, axis, inner, x.data());
  std::vector<float> first;
  for (const int threads : {1, 2})
    for (const int mode : {0, 1, 2}) { // aligned y, y one float off, in place
      SCOPED_TRACE("threads=" + std::to_string(threads) + " mode=" + std::to_string(mode));
      ASSERT_EQ(ak_set_num_threads(threads), AK_OK);
      std::vector<float> in_place;
      if (mode == 2) in_place = x;
      float *y = mode == 0 ? aligned : mode == 1 ? aligned + 1 : in_place.data();
      const float *src = mode == 2 ? y : x.data();
      ASSERT_EQ(ak_softmax_axis(1, axis, inner, src, y), AK_OK) << ak_last_error();
      if (first.empty()) {
        first.assign(y, y + n);
        for (std::size_t k = 0; k < n; ++k)
          ASSERT_NEAR(y[k], ref[k], kSoftmaxRel * ref[k] + 1e-38)
              << "row " << k / inner << " column " << k % inner;
      } else {
        ASSERT_EQ(0, std::memcmp(first.data(), y, n * sizeof(float)));
      }
    }
}

// Softmax rows out of place on FMA instruction sets, and log-softmax rows
// on any, first take exp(x) as if each row's maximum were in [0, 64] ([1,
// 64] for log-softmax), redoing the rows where the maxima (or a NaN sum)
// refute it and then not guessing for a few items; softmax in place never
// guesses. Short rows (grouped) and long ones; rows that refute it, the
// rows after them and later ones must all give the bits of in place and
// match the reference.
// The guess's range test at its edges: rows whose maximum is exactly 0 or
// 64 (softmax) or 1 or 64 (log-softmax) are guessed, the floats just
// outside are not. Row 0 may be guessed (the first item of its thread);
// row 2, after a refuting row 1, is not: equal entries must give equal bits.
TEST_P(Softmax, RowsGuessAtTheEdgesOfItsRange) {
  const std::int64_t rows = 40, cols = 1000;
  for (const bool log : {false, true}) {
    const float lowest = log ? 1.0f : 0.0f;
    for (const float top :
         {lowest, std::nextafter(lowest, -1.0f), 64.0f, std::nextafter(64.0f, 100.0f), 32.0f}) {
      SCOPED_TRACE(std::string(log ? "log " : "") + "max " + std::to_string(top));
      std::vector<float> x = random_normal(static_cast<std::size_t>(rows * cols), 71);
      for (std::int64_t j = 0; j < cols; ++j) {
        float &v = x[static_cast<std::size_t>(j)];
        v = top - 0.05f - std::fabs(v);                 // below the maximum, set once below
        x[static_cast<std::size_t>(cols + j)] -= 95.0f; // row 1 refutes
      }
      x[static_cast<std::size_t>(cols / 2)] = top;
      std::copy(x.begin(), x.begin() + cols, x.begin() + 2 * cols);
      std::vector<float> y(x.size(), canary());
      ASSERT_EQ(log ? ak_log_softmax(rows, cols, x.data(), cols, y.data(), cols)
                    : ak_softmax(rows, cols, x.data(), cols, y.data(), cols),
                AK_OK);
      ASSERT_EQ(0, std::memcmp(&y[0], &y[static_cast<std::size_t>(2 * cols)],
                               static_cast<std::size_t>(cols) * sizeof(float)));
      expect_row(y.data(), x.data(), cols, log, kSoftmaxRel, "row 0");
    }
  }
}

TEST_P(Softmax, RowsGuessConfirmedOrRedone) {
  for (const bool log : {false, true})
    for (const std::int64_t cols : {40, 1000})
      for (const int kind : {0, 1, 2, 3, 4, 5}) {
        SCOPED_TRACE(std::string(log ? "log " : "") + "cols=" + std::to_string(cols) +
                     " kind=" + std::to_string(kind));
        const std::int64_t rows = 200;
        std::vector<float> x = random_normal(static_cast<std::size_t>(rows * cols), 93);
        if (log) // maxima of unit-normal rows are above 1: the guess holds
          for (float &v : x) v += 0.5f;
        for (const std::int64_t r : {13, 150}) // refuting rows
          for (std::int64_t j = 0; j < cols; ++j) {
            float &v = x[static_cast<std::size_t>(r * cols + j)];
            v = kind == 0 ? v - 95.0f : kind == 1 ? v + 70.0f : kind == 4 ? -kInf : v;
            v = kind == 5 ? 0.15f * v + 0.2f : v; // maximum in (0, 1): refutes log's guess
            if (j == cols / 3) v = kind == 2 ? kNaN : kind == 3 ? kInf : v;
          }
        // Row 20 comes after a refuted row (13), within the items that do
        // not guess, on one or two threads: the same entries as row 5
        // (guessed) must give the same bits.
        std::copy(x.begin() + 5 * cols, x.begin() + 6 * cols, x.begin() + 20 * cols);
        const auto run = [&](const float *in, float *out) {
          return log ? ak_log_softmax(rows, cols, in, cols, out, cols)
                     : ak_softmax(rows, cols, in, cols, out, cols);
        };
        std::vector<float> y(x.size(), canary()), in_place = x;
        ASSERT_EQ(run(x.data(), y.data()), AK_OK);
        ASSERT_EQ(run(in_place.data(), in_place.data()), AK_OK);
        ASSERT_EQ(0, std::memcmp(y.data(), in_place.data(), y.size() * sizeof(float)));
        ASSERT_EQ(0, std::memcmp(&y[static_cast<std::size_t>(5 * cols)],
                                 &y[static_cast<std::size_t>(20 * cols)],
                                 static_cast<std::size_t>(cols) * sizeof(float)));
        for (std::int64_t r = 0; r < rows; ++r)
          expect_row(&y[static_cast<std::size_t>(r * cols)], &x[static_cast<std::size_t>(r * cols)],
                     cols, log, kSoftmaxRel, "row " + std::to_string(r));
      }
}

// Softmax and log-softmax outputs of 32 MiB and more, on AVX-512 Intel CPUs, are staged
// row by row and stored with streaming stores (softmax_rows); elsewhere this
// checks the ordinary path at the same size. Rows y aligned to a vector,
// off by one float with padded rows (left untouched), and in place (never
// staged) must give the same bits, on one thread and two, and match the
// reference; refuted guesses (a shifted row, a NaN row, an all -inf row)
// and the rows after them included.
TEST_P(Softmax, LargeOutputRowsSameBitsWhereverStored) {
  const std::int64_t rows = 2051, cols = 4099, ld = cols + 3; // 32.07 MiB of output
  std::vector<float> x = random_normal(static_cast<std::size_t>(rows * cols), 321);
  for (std::int64_t j = 0; j < cols; ++j) {
    x[static_cast<std::size_t>(7 * cols + j)] += 80.0f;
    x[static_cast<std::size_t>(1000 * cols + j)] = -kInf;
  }
  x[static_cast<std::size_t>(1500 * cols + 17)] = kNaN;
  const std::size_t n = x.size();
  std::vector<float> store(static_cast<std::size_t>(rows * ld) + 32, canary());
  const auto base = reinterpret_cast<std::uintptr_t>(store.data());
  float *const aligned = store.data() + (64 - base % 64) % 64 / sizeof(float);
  for (const bool log : {false, true}) {
    std::vector<float> first;
    for (const int threads : {1, 2})
      for (const int mode : {0, 1, 2}) { // aligned y, y one float off and padded, in place
        if (kSanitized && threads == 1 && mode != 0) continue; // (a sample: 4 of 6)
        SCOPED_TRACE(std::string(log ? "log " : "") + "threads=" + std::to_string(threads) +
                     " mode=" + std::to_string(mode));
        ASSERT_EQ(ak_set_num_threads(threads), AK_OK);
        std::fill(store.begin(), store.end(), canary());
        std::vector<float> in_place;
        if (mode == 2) in_place = x;
        float *y = mode == 0 ? aligned : mode == 1 ? aligned + 1 : in_place.data();
        const std::int64_t ldy = mode == 1 ? ld : cols;
        const float *src = mode == 2 ? y : x.data();
        ASSERT_EQ(log ? ak_log_softmax(rows, cols, src, cols, y, ldy)
                      : ak_softmax(rows, cols, src, cols, y, ldy),
                  AK_OK)
            << ak_last_error();
        std::vector<float> got(n);
        for (std::int64_t r = 0; r < rows; ++r) {
          std::memcpy(&got[static_cast<std::size_t>(r * cols)], y + r * ldy,
                      static_cast<std::size_t>(cols) * sizeof(float));
          for (std::int64_t j = cols; j < ldy; ++j) {
            ASSERT_TRUE(is_canary(y[r * ldy + j])) << "row " << r << ": padding written";
          }
        }
        ASSERT_TRUE(mode != 0 || is_canary(y[n])) << "written past the end";
        if (first.empty()) {
          first = got;
          for (std::int64_t r = 0; r < rows; ++r)
            expect_row(&got[static_cast<std::size_t>(r * cols)],
                       &x[static_cast<std::size_t>(r * cols)], cols, log, kSoftmaxRel,
                       "row " + std::to_string(r));
        } else {
          ASSERT_EQ(0, std::memcmp(first.data(), got.data(), n * sizeof(float)));
        }
      }
  }
}

AK_INSTANTIATE_PER_ISA(Softmax);

} // namespace
} // namespace ak_test
