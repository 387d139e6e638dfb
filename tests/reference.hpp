// Scalar float64 reference implementations of every kernel: the ground truth
// the tests compare the library's fp32 kernels against.
#pragma once

#include <cstdint>
#include <vector>

namespace ak_test {

// C = alpha * op(A) op(B) + beta * C0 in double, C0 read from c (beta == 0
// ignores it). Returns m x n, row-major, dense.
std::vector<double> ref_sgemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k,
                              double alpha, const float *a, std::int64_t lda, const float *b,
                              std::int64_t ldb, double beta, const float *c, std::int64_t ldc);

// Euclidean norms of the rows of op(A) and the columns of op(B): with
// Cauchy-Schwarz they bound |op(A) op(B)| element-wise, which is what the
// error bound of an fp32 dot product is relative to.
std::vector<double> row_norms(bool ta, std::int64_t m, std::int64_t k, const float *a,
                              std::int64_t lda);
std::vector<double> col_norms(bool tb, std::int64_t k, std::int64_t n, const float *b,
                              std::int64_t ldb);

// One row's softmax (or log-softmax) in double, with the library's special
// cases: all -inf -> 0 (log: -inf); NaN or +inf anywhere -> all NaN.
std::vector<double> ref_softmax_row(const float *x, std::int64_t n, bool log);

// Softmax along the middle axis of [outer, axis_len, inner].
std::vector<double> ref_softmax_axis(std::int64_t outer, std::int64_t axis_len, std::int64_t inner,
                                     const float *x);

// The sinusoidal position-encoding table [max_len, dim].
std::vector<double> ref_position_encoding(std::int64_t max_len, std::int64_t dim, double base);

} // namespace ak_test
