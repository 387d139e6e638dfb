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

// n floats ~ N(0, scale^2) from a seeded generator.
std::vector<float> random_normal(std::size_t n, std::uint32_t seed, float scale = 1.0f);

// A value no kernel produces, to detect stray writes (bit-compared).
float canary();
bool is_canary(float v);

} // namespace ak_test
