// The worked examples of the tutorials the API follows, to the digits given.
#include <gtest/gtest.h>

#include <cmath>

#include "test_support.hpp"

namespace ak_test {
namespace {

// Sinusoidal encoding, dim 3, base 10000: only the first pair varies (its
// frequency is base^0 = 1) and the odd last column stays 0.
TEST(WorkedExamples, PositionEncodingDim3) {
  const float want[4][3] = {{0.0f, 1.0f, 0.0f},
                            {0.84147098f, 0.54030231f, 0.0f},
                            {0.90929743f, -0.41614684f, 0.0f},
                            {0.14112001f, -0.9899925f, 0.0f}};
  float out[4][3];
  ASSERT_EQ(ak_position_encoding(4, 3, 10000.0f, &out[0][0]), AK_OK);
  for (int p = 0; p < 4; ++p)
    for (int j = 0; j < 3; ++j) EXPECT_NEAR(out[p][j], want[p][j], 1e-7) << p << "," << j;
}

// Scaled dot-product scores of the tutorial, divided by sqrt(d_k = 6), then a
// row-wise softmax; on every instruction set.
class WorkedSoftmax : public PerIsa {};
TEST_P(WorkedSoftmax, ScaledScoresRowSoftmax) {
  const float scores[3][3] = {{5.06798984f, 3.09132164f, 3.47594607f},
                              {3.09132164f, 2.35205625f, 2.25159346f},
                              {3.47594607f, 2.25159346f, 2.57544933f}};
  const double want[3][3] = {{0.50805787, 0.22669918, 0.26524295},
                             {0.40828812, 0.30192217, 0.28978971},
                             {0.43497103, 0.26386552, 0.30116346}};
  float x[3][3], y[3][3];
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) x[i][j] = scores[i][j] / std::sqrt(6.0f);
  ASSERT_EQ(ak_softmax(3, 3, &x[0][0], 3, &y[0][0], 3), AK_OK);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) EXPECT_NEAR(y[i][j], want[i][j], 1e-7) << i << "," << j;
}
AK_INSTANTIATE_PER_ISA(WorkedSoftmax);

} // namespace
} // namespace ak_test
