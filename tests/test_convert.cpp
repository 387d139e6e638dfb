// ak_convert on every instruction set against references written from the
// formats' definitions alone (tests/half_reference.hpp, no code shared with
// the library): every f16 and bf16 value widened; fp32 narrowed over a dense
// sample of its bit patterns, every rounding tie and its neighbours, the f16
// overflow threshold, the subnormals, the specials; tails, in place, f16 <->
// bf16 and the split over threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "half_reference.hpp"
#include "test_support.hpp"

namespace ak_test {
namespace {

using Half = std::vector<std::uint16_t>;

std::uint32_t bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
float from_bits(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

Half all_halves() {
  Half h(65536);
  for (std::uint32_t i = 0; i < 65536; ++i) h[i] = static_cast<std::uint16_t>(i);
  return h;
}

// The fp32 inputs of the narrowing tests (about 2.4M): every 4099th bit
// pattern; each tie of f16 and of bf16 (the midpoint of two neighbours)
// with its 2-3 neighbours on either side; a sweep of f16's subnormal range;
// and the specials.
const std::vector<float> &narrow_inputs() {
  static const std::vector<float> xs = [] {
    std::vector<std::uint32_t> u;
    for (std::uint64_t b = 0; b <= 0xffffffffu; b += 4099)
      u.push_back(static_cast<std::uint32_t>(b));
    const auto around = [&](std::uint32_t center, int reach) {
      for (int d = -reach; d <= reach; ++d) u.push_back(center + static_cast<std::uint32_t>(d));
    };
    for (std::uint32_t s : {0u, 0x80000000u}) {
      // f16 ties: between every two finite neighbours and between 65504 and
      // the next step, 65520 (which rounds to inf); in fp32 for all of them.
      const std::vector<double> &grid = f16_grid();
      for (std::size_t i = 0; i + 1 < grid.size(); ++i)
        around(s | bits(static_cast<float>((grid[i] + grid[i + 1]) / 2)), 3);
      for (std::uint32_t hi = 0; hi < 0x8000u; ++hi) around(s | hi << 16 | 0x8000u, 2);
      for (std::uint32_t b = 0x32800000u; b < 0x38800000u; b += 997) u.push_back(s | b);
      for (std::uint32_t b : {0x00000000u, 0x00000001u, 0x007fffffu, 0x00800000u, 0x7f7fffffu,
                              0x7f800000u, 0x7f800001u, 0x7fc00000u, 0x7fffffffu, 0x7fbfffffu,
                              0x7f80ffffu, 0x7f810000u, 0x7fff8000u, 0x7f807fffu, 0x477fe000u,
                              0x477fefffu, 0x477ff000u, 0x477ff001u, 0x33000000u, 0x33000001u})
        u.push_back(s | b);
    }
    std::vector<float> out(u.size());
    for (std::size_t i = 0; i < u.size(); ++i) out[i] = from_bits(u[i]);
    return out;
  }();
  return xs;
}

// The expected bits of narrow_inputs() in t.
const Half &narrow_expected(ak_dtype t) {
  static const auto make = [](ak_dtype type) {
    const std::vector<float> &xs = narrow_inputs();
    Half out(xs.size());
    for (std::size_t i = 0; i < xs.size(); ++i) out[i] = ref_narrow(type, xs[i]);
    return out;
  };
  static const Half f16 = make(AK_F16), bf16 = make(AK_BF16);
  return t == AK_F16 ? f16 : bf16;
}

::testing::AssertionResult same_halves(const Half &got, const Half &want, const float *x,
                                       std::size_t n) {
  for (std::size_t i = 0; i < n; ++i)
    if (got[i] != want[i])
      return ::testing::AssertionFailure()
             << "element " << i << ": input bits 0x" << std::hex << (x ? bits(x[i]) : 0u)
             << " gave 0x" << got[i] << ", expected 0x" << want[i];
  return ::testing::AssertionSuccess();
}

class Convert : public PerIsa {};

TEST_P(Convert, WidensEveryHalfValue) {
  const Half h = all_halves();
  for (ak_dtype t : {AK_F16, AK_BF16}) {
    std::vector<float> out(h.size(), canary());
    ASSERT_EQ(ak_convert(AK_F32, out.data(), t, h.data(), 65536), AK_OK) << ak_last_error();
    for (std::uint32_t i = 0; i < 65536; ++i) {
      const double want = ref_widen(t, static_cast<std::uint16_t>(i));
      const bool negative = (i & 0x8000u) != 0;
      if (std::isnan(want)) {
        ASSERT_TRUE(std::isnan(out[i])) << t << " 0x" << std::hex << i;
        ASSERT_EQ(std::signbit(out[i]), negative) << t << " 0x" << std::hex << i;
      } else {
        // The exact value and its sign (-0 included).
        ASSERT_EQ(bits(out[i]), bits(static_cast<float>(want))) << t << " 0x" << std::hex << i;
      }
    }
  }
}

TEST_P(Convert, NarrowsAsRoundToNearestEven) {
  const std::vector<float> &xs = narrow_inputs();
  for (ak_dtype t : {AK_F16, AK_BF16}) {
    Half out(xs.size(), 0x5a5a);
    ASSERT_EQ(ak_convert(t, out.data(), AK_F32, xs.data(), static_cast<std::int64_t>(xs.size())),
              AK_OK)
        << ak_last_error();
    EXPECT_TRUE(same_halves(out, narrow_expected(t), xs.data(), xs.size())) << "type " << t;
  }
}

TEST_P(Convert, NamedValues) {
  const struct {
    float x;
    std::uint16_t f16, bf16;
  } cases[] = {
      {0.0f, 0x0000, 0x0000},
      {-0.0f, 0x8000, 0x8000},
      {1.0f, 0x3c00, 0x3f80},
      {65504.0f, 0x7bff, 0x4780},
      {65519.996f, 0x7bff, 0x4780},
      {65520.0f, 0x7c00, 0x4780},
      {-65520.0f, 0xfc00, 0xc780},
      {FLT_MAX, 0x7c00, 0x7f80}, // rounds past bf16's largest finite value
      {-FLT_MAX, 0xfc00, 0xff80},
      {from_bits(0x7f7f7fffu), 0x7c00, 0x7f7f}, // just below that tie: stays finite
      {INFINITY, 0x7c00, 0x7f80},
      {-INFINITY, 0xfc00, 0xff80},
      {5.9604645e-8f, 0x0001, 0x3380}, // 2^-24, f16's smallest subnormal
      {2.9802322e-8f, 0x0000, 0x3300}, // 2^-25: the tie to 0 rounds to even (0)
      {from_bits(0x33000001u), 0x0001, 0x3300},
      {FLT_MIN, 0x0000, 0x0080},
      {from_bits(0x00000001u), 0x0000, 0x0000}, // fp32's smallest subnormal
      {from_bits(0x7f800001u), 0x7e00, 0x7fc0}, // signalling NaN, lowest payload: quieted
      {from_bits(0xff80ffffu), 0xfe07, 0xffc0}, // never rounded into -inf
      {from_bits(0x7fffffffu), 0x7fff, 0x7fff},
  };
  for (const auto &c : cases) {
    std::uint16_t f16 = 0, bf16 = 0;
    ASSERT_EQ(ak_convert(AK_F16, &f16, AK_F32, &c.x, 1), AK_OK);
    ASSERT_EQ(ak_convert(AK_BF16, &bf16, AK_F32, &c.x, 1), AK_OK);
    EXPECT_EQ(f16, c.f16) << std::hex << "f16 of 0x" << bits(c.x);
    EXPECT_EQ(bf16, c.bf16) << std::hex << "bf16 of 0x" << bits(c.x);
    EXPECT_EQ(f16, ref_narrow(AK_F16, c.x)) << "the reference itself, 0x" << std::hex << bits(c.x);
    EXPECT_EQ(bf16, ref_narrow(AK_BF16, c.x))
        << "the reference itself, 0x" << std::hex << bits(c.x);
  }
}

// Every length and offset around the vector widths: the vector part and the
// tail agree with the whole-array result, and nothing past n is written.
TEST_P(Convert, TailsAndOffsets) {
  const std::vector<float> &xs = narrow_inputs();
  const std::size_t base = 1000003; // somewhere in the middle of the inputs
  for (ak_dtype t : {AK_F16, AK_BF16}) {
    const Half &want = narrow_expected(t);
    for (std::int64_t n = 0; n <= 70; ++n) {
      for (std::size_t off = 0; off < 4; ++off) {
        Half out(static_cast<std::size_t>(n) + 8, 0x5a5a);
        const float *src = xs.data() + base + off;
        ASSERT_EQ(ak_convert(t, out.data() + 1, AK_F32, src, n), AK_OK);
        EXPECT_EQ(out[0], 0x5a5a);
        for (std::int64_t i = 0; i < n; ++i)
          ASSERT_EQ(out[static_cast<std::size_t>(i) + 1],
                    want[base + off + static_cast<std::size_t>(i)])
              << "type " << t << ", n " << n << ", offset " << off << ", element " << i;
        for (std::size_t i = static_cast<std::size_t>(n) + 1; i < out.size(); ++i)
          ASSERT_EQ(out[i], 0x5a5a) << "written past n = " << n;
        // And back: widening the halves gives their exact values.
        std::vector<float> back(static_cast<std::size_t>(n) + 2, canary());
        ASSERT_EQ(ak_convert(AK_F32, back.data(), t, out.data() + 1, n), AK_OK);
        for (std::int64_t i = 0; i < n; ++i) {
          const double v = ref_widen(t, out[static_cast<std::size_t>(i) + 1]);
          if (std::isnan(v)) continue;
          ASSERT_EQ(bits(back[static_cast<std::size_t>(i)]), bits(static_cast<float>(v)));
        }
        ASSERT_TRUE(is_canary(back[static_cast<std::size_t>(n)]));
      }
    }
  }
}

// f16 -> bf16 and bf16 -> f16 of every value: the one rounding of the exact
// value, out of place and in place alike.
TEST_P(Convert, HalfToHalfEveryValue) {
  for (ak_dtype from : {AK_F16, AK_BF16}) {
    const ak_dtype to = from == AK_F16 ? AK_BF16 : AK_F16;
    const Half h = all_halves();
    Half out(h.size(), 0x5a5a);
    ASSERT_EQ(ak_convert(to, out.data(), from, h.data(), 65536), AK_OK) << ak_last_error();
    for (std::uint32_t i = 0; i < 65536; ++i) {
      const double v = ref_widen(from, static_cast<std::uint16_t>(i));
      if (std::isnan(v)) {
        ASSERT_TRUE(std::isnan(ref_widen(to, out[i]))) << std::hex << "0x" << i;
        ASSERT_EQ(out[i] & 0x8000u, i & 0x8000u) << std::hex << "0x" << i;
      } else {
        ASSERT_EQ(out[i], ref_narrow(to, static_cast<float>(v))) << std::hex << "0x" << i;
      }
    }
    Half in_place = all_halves();
    ASSERT_EQ(ak_convert(to, in_place.data(), from, in_place.data(), 65536), AK_OK);
    EXPECT_TRUE(same_halves(in_place, out, nullptr, out.size())) << "in place, from " << from;
  }
}

// One type to itself: the bits copied, NaN payloads and all; in place a no-op.
TEST_P(Convert, SameTypeCopiesBits) {
  const Half h = all_halves();
  for (ak_dtype t : {AK_F16, AK_BF16}) {
    Half out(h.size(), 0x5a5a);
    ASSERT_EQ(ak_convert(t, out.data(), t, h.data(), 65536), AK_OK);
    EXPECT_EQ(out, h);
    ASSERT_EQ(ak_convert(t, out.data(), t, out.data(), 65536), AK_OK);
    EXPECT_EQ(out, h);
  }
  const std::vector<float> &xs = narrow_inputs();
  std::vector<float> out(xs.size());
  ASSERT_EQ(ak_convert(AK_F32, out.data(), AK_F32, xs.data(), static_cast<std::int64_t>(xs.size())),
            AK_OK);
  EXPECT_EQ(std::memcmp(out.data(), xs.data(), xs.size() * sizeof(float)), 0);
}

// Split over two threads (the inputs are large enough to be split), the
// same bits as on one.
TEST_P(Convert, ThreadsGiveTheSameBits) {
  const std::vector<float> &xs = narrow_inputs();
  const auto n = static_cast<std::int64_t>(xs.size());
  for (ak_dtype t : {AK_F16, AK_BF16}) {
    Half halves(xs.size());
    std::vector<float> one(xs.size()), two(xs.size());
    ASSERT_EQ(ak_set_num_threads(2), AK_OK);
    ASSERT_EQ(ak_convert(t, halves.data(), AK_F32, xs.data(), n), AK_OK);
    EXPECT_TRUE(same_halves(halves, narrow_expected(t), xs.data(), xs.size()));
    ASSERT_EQ(ak_convert(AK_F32, two.data(), t, halves.data(), n), AK_OK);
    ASSERT_EQ(ak_set_num_threads(1), AK_OK);
    ASSERT_EQ(ak_convert(AK_F32, one.data(), t, halves.data(), n), AK_OK);
    EXPECT_EQ(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)), 0);
  }
}

// Outputs of 16 MiB and more are written with streaming stores from the
// first 64-byte boundary: the same bits as the reference, from an
// unaligned destination, on one thread and on two, in both directions.
TEST_P(Convert, LargeOutputsGiveTheSameBits) {
  const std::vector<float> &xs = narrow_inputs();
  const std::size_t n = (std::size_t{8} << 20) + 37; // over 16 MiB of halves
  std::vector<float> src(n);
  for (std::size_t i = 0; i < n; ++i) src[i] = xs[(i * 7) % xs.size()];
  for (ak_dtype t : {AK_F16, AK_BF16}) {
    const Half &want = narrow_expected(t);
    for (int threads : {1, 2}) {
      SCOPED_TRACE("type " + std::to_string(t) + ", threads " + std::to_string(threads));
      ASSERT_EQ(ak_set_num_threads(threads), AK_OK);
      Half out(n + 2, 0x5a5a);
      ASSERT_EQ(ak_convert(t, out.data() + 1, AK_F32, src.data(), static_cast<std::int64_t>(n)),
                AK_OK);
      ASSERT_EQ(out[0], 0x5a5a);
      ASSERT_EQ(out[n + 1], 0x5a5a);
      for (std::size_t i = 0; i < n; ++i)
        ASSERT_EQ(out[i + 1], want[(i * 7) % xs.size()]) << "element " << i;
      std::vector<float> back(n + 2, canary());
      ASSERT_EQ(
          ak_convert(AK_F32, back.data() + 1, t, out.data() + 1, static_cast<std::int64_t>(n)),
          AK_OK);
      ASSERT_TRUE(is_canary(back[0]));
      ASSERT_TRUE(is_canary(back[n + 1]));
      for (std::size_t i = 0; i < n; ++i) {
        const double v = ref_widen(t, out[i + 1]);
        if (std::isnan(v))
          ASSERT_TRUE(std::isnan(back[i + 1])) << "element " << i;
        else
          ASSERT_EQ(bits(back[i + 1]), bits(static_cast<float>(v))) << "element " << i;
      }
    }
  }
}

AK_INSTANTIATE_PER_ISA(Convert);

} // namespace
} // namespace ak_test
