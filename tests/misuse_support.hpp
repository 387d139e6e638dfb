// Helpers shared by the misuse suites (test_capi_errors.cpp,
// test_attention_errors.cpp): awkward argument values, bit-level float
// access, C-style enum values, and canary-filled buffers that show whether a
// rejected call wrote anything.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <ios>
#include <limits>
#include <ostream>
#include <vector>

namespace ak_test {
namespace misuse {

inline constexpr std::int64_t kHuge = std::int64_t{1} << 40; // (kHuge - 1) * kHuge overflows int64
// (2^31)^2 = 2^62 floats: the count fits int64_t, its size in bytes does not.
inline constexpr std::int64_t kBytesOverflow = std::int64_t{1} << 31;
inline constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
inline constexpr float kInf = std::numeric_limits<float>::infinity();

inline std::uint32_t bits_of(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

inline float float_of(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// A C caller may pass any int where an enum parameter is expected: that is
// legal C. C++ cannot hold such a value in an enum without undefined
// behaviour, so the value travels as an int and its bits become the enum only
// here, right at the call, with UBSan's enum check off for this helper alone:
// a sanitizer that still objects does so inside the library, which is where
// such a value must be handled.
template <class E>
#if defined(__GNUC__) || defined(__clang__)
__attribute__((no_sanitize("enum")))
#endif
E as_c_enum(int v) {
  static_assert(sizeof(E) == sizeof(int), "C enums are int-sized on the supported ABIs");
  E e;
  std::memcpy(&e, &v, sizeof e);
  return e;
}

// Quiet NaN whose payload encodes the buffer's id and the element's index, so
// that a copied, shifted or recomputed value never passes for the original.
inline std::uint32_t canary_bits(std::uint32_t id, std::int64_t i) {
  return 0x7FC00000u | (id << 16) | static_cast<std::uint32_t>(i & 0xFFFF);
}

// One buffer of Len floats filled with its canary pattern. The library gets
// either its start (get()) or its middle (mid(), so that negative strides stay
// inside memory too).
template <std::int64_t Len> struct Canary {
  static constexpr std::int64_t kLen = Len;
  static constexpr std::int64_t kMid = Len / 2;

  explicit Canary(std::uint32_t buffer_id) : id(buffer_id), data(Len) {
    for (std::int64_t i = 0; i < Len; ++i) data[i] = float_of(canary_bits(id, i));
  }
  float *get() { return data.data(); }
  float *mid() { return data.data() + kMid; }
  // Index of the first element that no longer holds its canary, or -1.
  std::int64_t first_changed() const {
    for (std::int64_t i = 0; i < Len; ++i)
      if (bits_of(data[i]) != canary_bits(id, i)) return i;
    return -1;
  }
  std::uint32_t id;
  std::vector<float> data;
};

// Success if `c` still holds its canary everywhere; otherwise names the first
// written element, its index counted from `origin` (the element the library's
// pointer addressed: 0 for get(), Canary::kMid for mid()).
template <std::int64_t Len>
::testing::AssertionResult untouched(const Canary<Len> &c, const char *name,
                                     std::int64_t origin = 0) {
  const std::int64_t i = c.first_changed();
  if (i < 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << name << "[" << i - origin << "] was written (now bits 0x" << std::hex
         << bits_of(c.data[i]) << ", canary 0x" << canary_bits(c.id, i) << std::dec << ")";
}

} // namespace misuse
} // namespace ak_test
