// Helpers shared by the suites: the instruction sets to sweep, random data,
// canary-filled buffers.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "attnkern.h"

namespace ak_test {

// Every instruction set ak_set_isa() accepts on this machine, best first.
const std::vector<std::string> &supported_isas();

// Fixture parameterized by instruction set: selects it for the test's
// duration, and restores the automatic choice and default threads after.
class PerIsa : public ::testing::TestWithParam<std::string> {
protected:
  void SetUp() override;
  void TearDown() override;
};

// A name for gtest from an ISA parameter.
std::string isa_name(const ::testing::TestParamInfo<std::string> &info);

#define AK_INSTANTIATE_PER_ISA(suite)                                                              \
  INSTANTIATE_TEST_SUITE_P(Isa, suite, ::testing::ValuesIn(::ak_test::supported_isas()),           \
                           ::ak_test::isa_name)

// Whether this build runs under AddressSanitizer (CI's sanitizer stage, at
// -O1 and several times slower): there the heaviest sweeps, whose float64
// references cost m n k each, take a sample of their cases. The sample
// keeps every kernel shape and edge; the Release and Clang runs take all.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

// n floats ~ N(0, scale^2) from a seeded generator.
std::vector<float> random_normal(std::size_t n, std::uint32_t seed, float scale = 1.0f);

// A value no kernel produces, to detect stray writes (bit-compared).
float canary();
bool is_canary(float v);

} // namespace ak_test
