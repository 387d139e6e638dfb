#include "test_support.hpp"

#include <cstring>

namespace ak_test {

const std::vector<std::string> &supported_isas() {
  static const std::vector<std::string> isas = [] {
    std::vector<std::string> out;
    for (const char *name : {"avx512", "avx2", "sse2", "neon", "scalar"})
      if (ak_isa_supported(name)) out.emplace_back(name);
    return out;
  }();
  return isas;
}

void PerIsa::SetUp() {
  ASSERT_EQ(ak_set_isa(GetParam().c_str()), AK_OK) << ak_last_error();
  ASSERT_EQ(std::string(ak_get_isa()), GetParam());
}

void PerIsa::TearDown() {
  ak_set_isa("auto");
  ak_set_num_threads(0);
}

std::string isa_name(const ::testing::TestParamInfo<std::string> &info) { return info.param; }

std::vector<float> random_normal(std::size_t n, std::uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> out(n);
  for (float &v : out) v = dist(rng);
  return out;
}

namespace {
constexpr std::uint32_t kCanaryBits = 0x7fc0cafeu; // a quiet NaN with a payload
}

float canary() {
  float f;
  std::memcpy(&f, &kCanaryBits, sizeof f);
  return f;
}

bool is_canary(float v) {
  std::uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return bits == kCanaryBits;
}

} // namespace ak_test
