#include "reference.hpp"

#include <cmath>
#include <limits>

namespace ak_test {

namespace {
double op_at(bool trans, const float *x, std::int64_t ld, std::int64_t r, std::int64_t c) {
  return trans ? x[c * ld + r] : x[r * ld + c];
}
} // namespace

std::vector<double> ref_sgemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k,
                              double alpha, const float *a, std::int64_t lda, const float *b,
                              std::int64_t ldb, double beta, const float *c, std::int64_t ldc) {
  std::vector<double> out(static_cast<std::size_t>(m * n));
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double s = 0.0;
      if (alpha != 0.0)
        for (std::int64_t p = 0; p < k; ++p) s += op_at(ta, a, lda, i, p) * op_at(tb, b, ldb, p, j);
      const double c0 = beta == 0.0 ? 0.0 : beta * c[i * ldc + j];
      out[static_cast<std::size_t>(i * n + j)] = alpha * s + c0;
    }
  return out;
}

std::vector<double> row_norms(bool ta, std::int64_t m, std::int64_t k, const float *a,
                              std::int64_t lda) {
  std::vector<double> out(static_cast<std::size_t>(m));
  for (std::int64_t i = 0; i < m; ++i) {
    double s = 0.0;
    for (std::int64_t p = 0; p < k; ++p) {
      const double v = op_at(ta, a, lda, i, p);
      s += v * v;
    }
    out[static_cast<std::size_t>(i)] = std::sqrt(s);
  }
  return out;
}

// The columns of op(B) are the rows of op(B)^T, i.e. of B read with the other
// transpose flag.
std::vector<double> col_norms(bool tb, std::int64_t k, std::int64_t n, const float *b,
                              std::int64_t ldb) {
  return row_norms(!tb, n, k, b, ldb);
}

std::vector<double> ref_softmax_row(const float *x, std::int64_t n, bool log) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> y(static_cast<std::size_t>(n));
  double m = -inf;
  bool poisoned = false; // NaN or +inf: the row's sum is not a number
  for (std::int64_t j = 0; j < n; ++j) {
    if (std::isnan(x[j]) || x[j] == inf) poisoned = true;
    m = std::fmax(m, static_cast<double>(x[j]));
  }
  if (poisoned) {
    for (auto &v : y) v = nan;
    return y;
  }
  if (m == -inf) {
    for (auto &v : y) v = log ? -inf : 0.0;
    return y;
  }
  double s = 0.0;
  for (std::int64_t j = 0; j < n; ++j) s += std::exp(static_cast<double>(x[j]) - m);
  for (std::int64_t j = 0; j < n; ++j) {
    const double d = static_cast<double>(x[j]) - m;
    y[static_cast<std::size_t>(j)] = log ? d - std::log(s) : std::exp(d) / s;
  }
  return y;
}

std::vector<double> ref_softmax_axis(std::int64_t outer, std::int64_t axis_len, std::int64_t inner,
                                     const float *x) {
  std::vector<double> y(static_cast<std::size_t>(outer * axis_len * inner));
  std::vector<float> line(static_cast<std::size_t>(axis_len));
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t i = 0; i < inner; ++i) {
      const std::int64_t base = o * axis_len * inner + i;
      for (std::int64_t a = 0; a < axis_len; ++a)
        line[static_cast<std::size_t>(a)] = x[base + a * inner];
      const std::vector<double> r = ref_softmax_row(line.data(), axis_len, false);
      for (std::int64_t a = 0; a < axis_len; ++a)
        y[static_cast<std::size_t>(base + a * inner)] = r[static_cast<std::size_t>(a)];
    }
  return y;
}

std::vector<double> ref_position_encoding(std::int64_t max_len, std::int64_t dim, double base) {
  std::vector<double> out(static_cast<std::size_t>(max_len * dim), 0.0);
  for (std::int64_t p = 0; p < max_len; ++p)
    for (std::int64_t i = 0; 2 * i + 1 < dim; ++i) {
      const double angle = static_cast<double>(p) / std::pow(base, 2.0 * i / dim);
      out[static_cast<std::size_t>(p * dim + 2 * i)] = std::sin(angle);
      out[static_cast<std::size_t>(p * dim + 2 * i + 1)] = std::cos(angle);
    }
  return out;
}

} // namespace ak_test
