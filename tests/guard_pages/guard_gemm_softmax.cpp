// ak_sgemm (every transpose pair, leading dimensions past the minimum, the
// skinny and packed paths, block edges), ak_sgemm_strided_batched (strides
// of 0, rows interleaved), ak_softmax, ak_log_softmax and ak_softmax_axis
// (in place too) with guarded buffers.
#include <cmath>
#include <string>
#include <vector>

#include "guard_harness.hpp"

namespace guard {
namespace {

// A rows x cols matrix (leading dimension ld): random inside, the canary in
// the gaps past each row's cols, which must keep it.
float *matrix_in(Arena &ar, std::int64_t rows, std::int64_t cols, std::int64_t ld) {
  const std::int64_t n = matrix_extent(rows, cols, ld);
  float *p = ar.out(n);
  std::vector<float> row(static_cast<std::size_t>(cols));
  for (std::int64_t r = 0; r < rows; ++r) {
    fill_uniform(row.data(), cols, ar.next_seed(), 1.0f);
    for (std::int64_t c = 0; c < cols; ++c) p[r * ld + c] = row[static_cast<std::size_t>(c)];
  }
  return p;
}

std::string shape(const char *what, std::int64_t a, std::int64_t b, std::int64_t c) {
  return std::string(what) + " " + std::to_string(a) + "x" + std::to_string(b) + "x" +
         std::to_string(c);
}

struct Gemm {
  std::int64_t m, n, k;
};

void sgemm_case(ak_trans ta, ak_trans tb, Gemm g, std::int64_t pad, float alpha, float beta) {
  const std::string name = shape("ak_sgemm", g.m, g.n, g.k) + " ta " + std::to_string(ta) + " tb " +
                           std::to_string(tb) + " pad " + std::to_string(pad) + " alpha " +
                           std::to_string(alpha) + " beta " + std::to_string(beta);
  run_case(name, [&](Arena &ar) {
    const std::int64_t ar_rows = ta ? g.k : g.m, ac = ta ? g.m : g.k;
    const std::int64_t br = tb ? g.n : g.k, bc = tb ? g.k : g.n;
    const std::int64_t lda = (ac > 0 ? ac : 1) + pad, ldb = (bc > 0 ? bc : 1) + pad;
    const std::int64_t ldc = (g.n > 0 ? g.n : 1) + pad;
    float *a = matrix_in(ar, ar_rows, ac, lda);
    float *b = matrix_in(ar, br, bc, ldb);
    if (alpha == 0.0f) { // never read: NaN there must not reach C
      for (std::int64_t i = 0; i < matrix_extent(ar_rows, ac, lda); ++i) a[i] = NAN;
      for (std::int64_t i = 0; i < matrix_extent(br, bc, ldb); ++i) b[i] = NAN;
    }
    const std::int64_t ext_c = matrix_extent(g.m, g.n, ldc);
    float *c = beta == 0.0f ? ar.out(ext_c) : matrix_in(ar, g.m, g.n, ldc);
    std::vector<float> c0(c, c + ext_c);
    ar.expect_ok(ak_sgemm(ta, tb, g.m, g.n, g.k, alpha, a, lda, b, ldb, beta, c, ldc), "ak_sgemm");
    ar.keep("c", c, ext_c, g.m * g.n);
    if (!ar.plain()) return;
    // The product itself, once: a float64 sum per element.
    for (std::int64_t i = 0; i < g.m; ++i)
      for (std::int64_t j = 0; j < g.n; ++j) {
        double s = 0.0, mag = 0.0;
        if (alpha != 0.0f)
          for (std::int64_t l = 0; l < g.k; ++l) {
            const double x = ta ? a[l * lda + i] : a[i * lda + l];
            const double y = tb ? b[j * ldb + l] : b[l * ldb + j];
            s += x * y, mag += std::fabs(x * y);
          }
        const double c_in = beta == 0.0f ? 0.0 : c0[static_cast<std::size_t>(i * ldc + j)];
        const double want = alpha * s + beta * c_in;
        const double tol = 1e-5 * (std::fabs(alpha) * mag + std::fabs(beta * c_in)) + 1e-6;
        if (std::fabs(c[i * ldc + j] - want) > tol) {
          ar.check(false, "c[" + std::to_string(i) + "][" + std::to_string(j) + "] = " +
                              std::to_string(c[i * ldc + j]) + ", want " + std::to_string(want));
          return;
        }
      }
  });
}

void sgemm_cases() {
  ak_sgemm_blocking bl{};
  if (ak_sgemm_get_blocking(&bl) != AK_OK) fail("ak_sgemm_get_blocking failed");
  std::vector<Gemm> shapes = {{1, 1, 1},   {3, 5, 7},   {17, 15, 9},  {8, 16, 4},
                              {7, 33, 65}, {65, 3, 17}, {1, 257, 31}, {31, 17, 300},
                              {4, 9, 130}, {0, 5, 3},   {5, 0, 3},    {4, 6, 0}};
  // n and k around the vector widths 4, 8 and 16.
  for (std::int64_t n : {3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33})
    shapes.push_back({1 + n % 5, n, 1 + (n * 7) % 19});
  // Past each block edge of this instruction set: a second row block, a
  // second k block, a register tile and a panel's tail.
  shapes.push_back({bl.mc + 1, bl.nr + 1, 33});
  shapes.push_back({bl.mr + 1, 2 * bl.nr + 3, bl.kc + 1});
  shapes.push_back({bl.skinny_m + 1, bl.narrow_n + 1, 67});
  for (const Gemm &g : shapes)
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb) {
        const bool small = g.m * g.n * g.k < 20000;
        sgemm_case(static_cast<ak_trans>(ta), static_cast<ak_trans>(tb), g, 0, 1.0f, 0.0f);
        if (small)
          sgemm_case(static_cast<ak_trans>(ta), static_cast<ak_trans>(tb), g, 3, -0.5f, 0.75f);
      }
  // Enough work for a team of two, and alpha = 0 (A and B never read).
  sgemm_case(AK_NO_TRANS, AK_TRANS, {96, 80, 130}, 1, 1.0f, 0.0f);
  sgemm_case(AK_TRANS, AK_NO_TRANS, {9, 17, 5}, 2, 0.0f, 0.5f);
}

struct Batched {
  Gemm g;
  std::int64_t batch, sa, sb; // -1: one matrix (the minimum), -2: one matrix + 5, 0: broadcast
  bool interleave_c;
};

void batched_case(ak_trans ta, ak_trans tb, const Batched &c) {
  const Gemm g = c.g;
  const std::string name = shape("ak_sgemm_strided_batched", g.m, g.n, g.k) + " batch " +
                           std::to_string(c.batch) + " ta " + std::to_string(ta) + " tb " +
                           std::to_string(tb) + " sa " + std::to_string(c.sa) + " sb " +
                           std::to_string(c.sb) + (c.interleave_c ? " interleaved c" : "");
  run_case(name, [&](Arena &ar) {
    const std::int64_t ar_rows = ta ? g.k : g.m, ac = ta ? g.m : g.k;
    const std::int64_t br = tb ? g.n : g.k, bc = tb ? g.k : g.n;
    const std::int64_t lda = ac + 1, ldb = bc;
    const std::int64_t ea = matrix_extent(ar_rows, ac, lda), eb = matrix_extent(br, bc, ldb);
    const auto stride = [](std::int64_t s, std::int64_t extent) {
      return s == -1 ? extent : s == -2 ? extent + 5 : s;
    };
    const std::int64_t sa = stride(c.sa, ea), sb = stride(c.sb, eb);
    // C: matrices one after another, or a [m, batch, n] tensor.
    const std::int64_t ldc = c.interleave_c ? c.batch * g.n : g.n + 2;
    const std::int64_t sc = c.interleave_c ? g.n : matrix_extent(g.m, g.n, ldc);
    const std::int64_t ext_c = (c.batch - 1) * sc + matrix_extent(g.m, g.n, ldc);
    float *a = ar.in((c.batch - 1) * sa + ea);
    float *b = ar.in((c.batch - 1) * sb + eb);
    float *cc = ar.out(ext_c);
    ar.expect_ok(ak_sgemm_strided_batched(ta, tb, g.m, g.n, g.k, 1.0f, a, lda, sa, b, ldb, sb, 0.0f,
                                          cc, ldc, sc, c.batch),
                 "ak_sgemm_strided_batched");
    ar.keep("c", cc, ext_c, c.batch * g.m * g.n);
  });
}

void batched_cases() {
  const Batched cases[] = {{{3, 5, 7}, 3, -1, -1, false},  {{1, 17, 9}, 4, 0, -2, false},
                           {{17, 3, 33}, 2, -2, 0, false}, {{5, 16, 8}, 3, -1, -1, true},
                           {{9, 7, 65}, 5, 0, 0, true},    {{64, 48, 40}, 3, -1, 0, false},
                           {{1, 1, 1}, 1, 0, 0, false}};
  for (const Batched &c : cases)
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb)
        batched_case(static_cast<ak_trans>(ta), static_cast<ak_trans>(tb), c);
}

void softmax_case(bool log, std::int64_t rows, std::int64_t cols, std::int64_t pad, bool in_place) {
  const std::string name =
      shape(log ? "ak_log_softmax" : "ak_softmax", rows, cols, pad) + (in_place ? " in place" : "");
  run_case(name, [&](Arena &ar) {
    // y's rows another distance apart than x's, unless in place.
    const std::int64_t ld = cols + pad, ldy = in_place ? ld : cols + pad / 2;
    const std::int64_t ny = matrix_extent(rows, cols, ldy);
    float *x = matrix_in(ar, rows, cols, ld);
    for (std::int64_t r = 0; r < rows; ++r) x[r * ld] *= 30.0f; // a dominant entry
    float *y = in_place ? x : ar.out(ny);
    const auto fn = log ? ak_log_softmax : ak_softmax;
    ar.expect_ok(fn(rows, cols, x, ld, y, ldy), log ? "ak_log_softmax" : "ak_softmax");
    ar.keep("y", y, ny, rows * cols);
    if (!ar.plain() || log) return;
    for (std::int64_t r = 0; r < rows; ++r) {
      double sum = 0.0;
      for (std::int64_t c = 0; c < cols; ++c) sum += y[r * ldy + c];
      if (std::fabs(sum - 1.0) > 1e-5) {
        ar.check(false, "row " + std::to_string(r) + " sums to " + std::to_string(sum));
        return;
      }
    }
  });
}

void softmax_axis_case(std::int64_t outer, std::int64_t axis, std::int64_t inner, bool in_place) {
  run_case(shape("ak_softmax_axis", outer, axis, inner) + (in_place ? " in place" : ""),
           [&](Arena &ar) {
             const std::int64_t n = outer * axis * inner;
             float *x = ar.in(n, 4.0f);
             float *y = in_place ? x : ar.out(n);
             ar.expect_ok(ak_softmax_axis(outer, axis, inner, x, y), "ak_softmax_axis");
             ar.keep("y", y, n, n);
             if (!ar.plain() || n == 0) return;
             for (std::int64_t o = 0; o < outer; ++o)
               for (std::int64_t i = 0; i < inner; ++i) {
                 double sum = 0.0;
                 for (std::int64_t a = 0; a < axis; ++a) sum += y[(o * axis + a) * inner + i];
                 if (std::fabs(sum - 1.0) > 1e-5) {
                   ar.check(false, "column sums to " + std::to_string(sum));
                   return;
                 }
               }
           });
}

void softmax_cases() {
  const std::int64_t shapes[][2] = {{1, 1},   {3, 3},   {2, 7},    {5, 15},   {4, 16},
                                    {3, 17},  {2, 31},  {1, 33},   {2, 63},   {1, 65},
                                    {3, 127}, {2, 129}, {1, 1000}, {64, 200}, {0, 5}};
  for (bool log : {false, true})
    for (const auto &s : shapes) {
      softmax_case(log, s[0], s[1], 0, false);
      softmax_case(log, s[0], s[1], 5, false);
      softmax_case(log, s[0], s[1], 3, true);
    }
  const std::int64_t axes[][3] = {{1, 1, 1},     {2, 3, 5},   {1, 17, 15}, {3, 8, 16},
                                  {2, 5, 33},    {4, 65, 1},  {1, 1, 257}, {2, 7, 129},
                                  {1, 257, 300}, {3, 65, 400}};
  for (const auto &s : axes)
    for (bool in_place : {false, true}) softmax_axis_case(s[0], s[1], s[2], in_place);
}

} // namespace

void gemm_softmax_cases() {
  sgemm_cases();
  batched_cases();
  softmax_cases();
}

} // namespace guard
