// ak_position_encoding against the float64 reference.
#include <gtest/gtest.h>

#include <cmath>

#include "reference.hpp"
#include "test_support.hpp"

namespace ak_test {
namespace {

TEST(PositionEncoding, MatchesReference) {
  for (std::int64_t dim : {1, 2, 3, 7, 64, 129})
    for (std::int64_t max_len : {1, 5, 513}) {
      for (float base : {10000.0f, 500.0f}) {
        std::vector<float> out(static_cast<std::size_t>(max_len * dim) + 1, canary());
        ASSERT_EQ(ak_position_encoding(max_len, dim, base, out.data()), AK_OK) << ak_last_error();
        const auto ref = ref_position_encoding(max_len, dim, base);
        for (std::size_t i = 0; i < ref.size(); ++i)
          ASSERT_NEAR(out[i], ref[i], 6e-8)
              << "dim=" << dim << " max_len=" << max_len << " i=" << i;
        EXPECT_TRUE(is_canary(out.back())) << "wrote past the table";
        if (dim % 2 == 1) {
          for (std::int64_t p = 0; p < max_len; ++p)
            EXPECT_EQ(out[static_cast<std::size_t>(p * dim + dim - 1)], 0.0f);
        }
      }
    }
}

} // namespace
} // namespace ak_test
