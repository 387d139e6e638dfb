// Bit-identical results for 1, 2, 3, 4 and 8 threads (docs/design.md: no
// reduction is split by thread count), on every instruction set. Teams of
// more than two run SGEMM's column groups (gemm_plan.hpp's plan_packed).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "test_support.hpp"

namespace ak_test {
namespace {

class Determinism : public PerIsa {
protected:
  // Runs `fn` (which fills `out`) with 1, 2, 3, 4 and 8 threads; all must
  // agree.
  template <class F> void expect_same_for_thread_counts(F fn, std::size_t n) {
    std::vector<float> first;
    for (int threads : {1, 2, 3, 4, 8}) {
      ASSERT_EQ(ak_set_num_threads(threads), AK_OK);
      std::vector<float> out(n);
      fn(out.data());
      if (first.empty()) {
        first = out;
      } else {
        ASSERT_EQ(0, std::memcmp(first.data(), out.data(), n * sizeof(float)))
            << "threads = " << threads << " differs from threads = 1";
      }
    }
  }
};

TEST_P(Determinism, Sgemm) {
  struct Shape {
    std::int64_t m, n, k;
    bool ta, tb;
  };
  // Tall, wide, deep (several KC blocks) and square-ish, every transpose;
  // then products small enough for threads to share C out without a
  // barrier: by rows (100 x 100 x 100, 203 x 96 x 200, 150 x 128 x 64) or,
  // with few rows, by columns (30 x 200 x 100); those 33-64 and 97-128 wide
  // run on AVX-512's 6 x 64 tile on one thread, on the 12 x 32 tile on
  // several: the same arithmetic per element. 64 x 2100 x 520: a panel too
  // wide for one thread's share of L2, cut into column groups on 3 threads
  // and more (how many depends on the tile); 20 x 4200 x 300: two panels,
  // the second narrower than the groups.
  for (const Shape s : {Shape{517, 33, 700, false, false}, Shape{13, 1500, 300, false, true},
                        Shape{300, 301, 1100, true, false}, Shape{257, 263, 129, true, true},
                        Shape{100, 100, 100, false, false}, Shape{100, 64, 700, false, false},
                        Shape{90, 50, 600, true, true}, Shape{70, 128, 600, false, true},
                        Shape{203, 96, 200, false, false}, Shape{150, 128, 64, true, true},
                        Shape{30, 200, 100, false, true}, Shape{64, 2100, 520, false, false},
                        Shape{64, 2100, 520, true, true}, Shape{20, 4200, 300, false, true}}) {
    const auto a = random_normal(static_cast<std::size_t>(s.m * s.k), 1);
    const auto b = random_normal(static_cast<std::size_t>(s.k * s.n), 2);
    const auto c0 = random_normal(static_cast<std::size_t>(s.m * s.n), 3);
    expect_same_for_thread_counts(
        [&](float *c) {
          std::copy(c0.begin(), c0.end(), c);
          ASSERT_EQ(ak_sgemm(s.ta ? AK_TRANS : AK_NO_TRANS, s.tb ? AK_TRANS : AK_NO_TRANS, s.m, s.n,
                             s.k, 1.25f, a.data(), s.ta ? s.m : s.k, b.data(), s.tb ? s.k : s.n,
                             0.5f, c, s.n),
                    AK_OK);
        },
        c0.size());
  }
}

TEST_P(Determinism, SgemmStridedBatched) {
  const std::int64_t m = 40, n = 56, k = 300, batch = 9;
  const auto a = random_normal(static_cast<std::size_t>(m * k * batch), 4);
  const auto b = random_normal(static_cast<std::size_t>(k * n * batch), 5);
  expect_same_for_thread_counts(
      [&](float *c) {
        ASSERT_EQ(ak_sgemm_strided_batched(AK_NO_TRANS, AK_TRANS, m, n, k, 1.0f, a.data(), k, m * k,
                                           b.data(), k, k * n, 0.0f, c, n, m * n, batch),
                  AK_OK);
      },
      static_cast<std::size_t>(m * n * batch));
}

TEST_P(Determinism, Softmax) {
  const std::int64_t rows = 67, cols = 3001;
  const auto x = random_normal(static_cast<std::size_t>(rows * cols), 6, 4.0f);
  expect_same_for_thread_counts(
      [&](float *y) { ASSERT_EQ(ak_softmax(rows, cols, x.data(), cols, y, cols), AK_OK); },
      x.size());
  expect_same_for_thread_counts(
      [&](float *y) { ASSERT_EQ(ak_log_softmax(rows, cols, x.data(), cols, y, cols), AK_OK); },
      x.size());
  // softmax_axis: many outer slices; one slice whose columns are cut into
  // pieces at different places for each thread count; one and three slices
  // whose bands of rows the team shares out, and one of fewer than 2^17
  // elements that does so since the limit went to 2^15; two planes of 2^13
  // elements, one per thread (whole planes go out from 2^13 elements a
  // thread; some columns past vexp_shifted's range, so that vectors take
  // both exps; some rising, so that their shifts move and the bands'
  // shifts differ).
  struct AxisShape {
    std::int64_t outer, axis, inner;
  };
  for (const AxisShape a :
       {AxisShape{7, 301, 143}, AxisShape{1, 37, 2100}, AxisShape{1, 301, 640},
        AxisShape{3, 200, 700}, AxisShape{1, 256, 300}, AxisShape{2, 64, 128}}) {
    auto t = random_normal(static_cast<std::size_t>(a.outer * a.axis * a.inner), 7, 4.0f);
    for (std::int64_t r = 0; r < a.axis; ++r) {
      for (std::int64_t i = 100; i < a.inner; i += 300)
        t[static_cast<std::size_t>(r * a.inner + i)] += 1e5f;
      for (std::int64_t i = 7; i < a.inner; i += 50) // shifts that move down the axis
        t[static_cast<std::size_t>(r * a.inner + i)] += static_cast<float>(r);
    }
    expect_same_for_thread_counts(
        [&](float *y) { ASSERT_EQ(ak_softmax_axis(a.outer, a.axis, a.inner, t.data(), y), AK_OK); },
        t.size());
  }
}

// NaN results are the same bits too: a column (or row) with a NaN or +inf
// is NaN throughout, whichever path its exponentials took. In softmax_axis
// the short axes' path follows what the thread did before (its guess gate)
// and the bands' shifts meet differently, and which NaN a division leaves
// (sign, payload) follows its operands: 1 thread and 2 gave NaNs of
// opposite signs before.
TEST_P(Determinism, NanResults) {
  struct AxisShape {
    std::int64_t outer, axis, inner;
  };
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const AxisShape a : {AxisShape{3, 31, 1025}, AxisShape{1, 256, 512}, AxisShape{7, 301, 143},
                            AxisShape{2, 20, 700}, AxisShape{3, 200, 700}}) {
    auto t = random_normal(static_cast<std::size_t>(a.outer * a.axis * a.inner), 8);
    const auto at = [&](std::int64_t o, std::int64_t r, std::int64_t i) -> float & {
      return t[static_cast<std::size_t>((o * a.axis + r) * a.inner + i)];
    };
    for (std::int64_t o = 0; o < a.outer; ++o) {
      at(o, a.axis / 6, a.inner - 1) = 70.0f; // a column past the guess's range
      if (o > 0) { // and in the next slices, +inf then NaN in the same column
        at(o, a.axis - 5, a.inner - 1) = inf;
        at(o, a.axis - 1, a.inner - 1) = nan;
      }
      for (std::int64_t i = o % 5; i < a.inner; i += 5) { // +inf, then NaN, down a column
        at(o, (a.axis * 5 / 16 + i) % a.axis, i) = inf;
        at(o, (a.axis * 15 / 32 + 3 * i) % a.axis, i) = nan;
      }
      for (std::int64_t i = 2; i < a.inner; i += 7) at(o, (i * 7) % a.axis, i) = -nan;
      for (std::int64_t i = 3; i < a.inner; i += 11) at(o, (i * 3) % a.axis, i) = inf;
    }
    expect_same_for_thread_counts(
        [&](float *y) { ASSERT_EQ(ak_softmax_axis(a.outer, a.axis, a.inner, t.data(), y), AK_OK); },
        t.size());
    // rows: the same values as a matrix
    const std::int64_t rows = a.outer * a.axis, cols = a.inner;
    expect_same_for_thread_counts(
        [&](float *y) { ASSERT_EQ(ak_softmax(rows, cols, t.data(), cols, y, cols), AK_OK); },
        t.size());
    expect_same_for_thread_counts(
        [&](float *y) { ASSERT_EQ(ak_log_softmax(rows, cols, t.data(), cols, y, cols), AK_OK); },
        t.size());
  }
}

AK_INSTANTIATE_PER_ISA(Determinism);

} // namespace
} // namespace ak_test
