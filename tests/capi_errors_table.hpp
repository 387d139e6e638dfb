// The misuse table of test_capi_errors.cpp: an entry is a call that must be
// refused, with the status, the function and the words its message must
// hold. Entries for ak_convert and ak_kv_cache_store are made in
// capi_errors_convert.cpp, those for ak_rope and ak_embedding in
// capi_errors_rope.cpp.
#pragma once

#include <attnkern.h>

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "misuse_support.hpp"

namespace ak_test {
namespace capi_errors {

inline constexpr std::int64_t kBufferLen = std::int64_t{1} << 14;
using Canary = misuse::Canary<kBufferLen>;

// The buffers every table entry may use: two inputs and one output (each
// kBufferLen floats, far more than any wrongly accepted call would touch).
struct Buffers {
  Canary in0{1}, in1{2}, out{3};
};

struct BadCase {
  std::string name;     // unique, [A-Za-z0-9_]
  ak_status expected;   // the exact status
  std::string function; // the message must start with "function: "
  std::string mentions; // and contain this (the argument's name, usually with its value)
  std::function<ak_status(Buffers &)> call;
};
// gtest names a failing entry by this (found by argument-dependent lookup).
inline void PrintTo(const BadCase &c, std::ostream *os) { *os << c.name; }

void add_convert_cases(std::vector<BadCase> &cases);
void add_kv_cache_store_cases(std::vector<BadCase> &cases);
// capi_errors_rope.cpp
void add_rope_cases(std::vector<BadCase> &cases);
void add_embedding_cases(std::vector<BadCase> &cases);

} // namespace capi_errors
} // namespace ak_test
