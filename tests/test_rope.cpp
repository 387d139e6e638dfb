// ak_rope on every instruction set against the float64 reference
// (rope_reference.hpp): awkward head_dims, partial rotary_dim, both styles,
// strided views into a fused qkv output, scattered, negative and large
// positions, caller-supplied frequencies. Every entry outside the rotated
// parts must keep its bits; results must not depend on the thread count
// or the instruction set.
#include <gtest/gtest.h>

#include <attnkern.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "rope_reference.hpp"
#include "test_support.hpp"

namespace ak_test {
namespace {

enum class Positions { none, scattered, negative, large };
enum class Layout { contiguous, padded, fused_qkv };

struct RopeCase {
  std::int64_t batch = 1, seq_len = 3, heads = 2, head_dim = 8;
  std::int64_t rotary_dim = 0; // as passed (0 = head_dim)
  ak_rope_style style = AK_ROPE_NEOX;
  Positions positions = Positions::none;
  Layout layout = Layout::contiguous;
  bool user_freq = false;
  float theta = 10000.0f;
  std::uint32_t seed = 1;
};

std::string describe(const RopeCase &c) {
  return "batch " + std::to_string(c.batch) + " seq " + std::to_string(c.seq_len) + " heads " +
         std::to_string(c.heads) + " head_dim " + std::to_string(c.head_dim) + " rotary_dim " +
         std::to_string(c.rotary_dim) + " style " + std::to_string(c.style) + " positions " +
         std::to_string(static_cast<int>(c.positions)) + " layout " +
         std::to_string(static_cast<int>(c.layout)) + (c.user_freq ? " user inv_freq" : "");
}

// A case's buffers and resolved shape.
struct RopeSetup {
  RopeShape shape;
  std::vector<std::int32_t> positions; // empty: NULL
  std::vector<float> inv_freq;         // what the kernel uses
  bool pass_freq;
  std::vector<float> x;
  std::int64_t strides[3];
  bool pass_strides;
};

RopeSetup make_setup(const RopeCase &c) {
  RopeSetup s;
  std::mt19937 rng(c.seed);
  const std::int64_t rd = c.rotary_dim == 0 ? c.head_dim : c.rotary_dim;
  s.shape = {c.batch, c.seq_len, c.heads, c.head_dim, rd, c.style, {0, 0, 0}};
  std::int64_t *st = s.shape.strides;
  std::int64_t len;
  if (c.layout == Layout::contiguous) {
    st[2] = c.head_dim;
    st[1] = c.heads * c.head_dim;
    st[0] = c.seq_len * st[1];
    len = c.batch * st[0];
  } else if (c.layout == Layout::padded) {
    st[2] = c.head_dim + 3;
    st[1] = c.heads * st[2] + 5;
    st[0] = c.seq_len * st[1] + 1;
    len = c.batch * st[0] + 2;
  } else { // k of a [batch, seq, 3 * heads * head_dim] projection: q, k, v
    st[2] = c.head_dim;
    st[1] = 3 * c.heads * c.head_dim;
    st[0] = c.seq_len * st[1];
    len = c.batch * st[0] + c.heads * c.head_dim; // x below points at k's start
  }
  s.pass_strides = c.layout != Layout::contiguous || rng() % 2 == 0;
  for (int i = 0; i < 3; ++i) s.strides[i] = c.layout == Layout::contiguous ? 0 : st[i];
  s.x = random_normal(static_cast<std::size_t>(len), c.seed, 2.0f);
  if (c.positions != Positions::none) {
    s.positions.resize(static_cast<std::size_t>(c.batch * c.seq_len));
    for (auto &p : s.positions) {
      const std::uint32_t u = rng();
      if (c.positions == Positions::scattered) p = static_cast<std::int32_t>(u % 5000);
      if (c.positions == Positions::negative) p = static_cast<std::int32_t>(u % 20001) - 10000;
      if (c.positions == Positions::large)
        p = static_cast<std::int32_t>(u % (1u << 25)) - (1 << 24); // |p| <= 2^24
    }
  }
  s.pass_freq = c.user_freq;
  if (c.user_freq) { // a scaled table (as NTK, YaRN or llama3 make): any positive floats
    s.inv_freq.resize(static_cast<std::size_t>(rd / 2));
    std::uniform_real_distribution<float> u(1e-6f, 1.0f);
    for (auto &f : s.inv_freq) f = u(rng);
  } else {
    s.inv_freq = rope_default_inv_freq(rd, c.theta);
  }
  return s;
}

// Runs one case and checks it against the reference, returning the result.
std::vector<float> run_and_check(const RopeCase &c) {
  SCOPED_TRACE(describe(c));
  RopeSetup s = make_setup(c);
  const std::int64_t offset = c.layout == Layout::fused_qkv ? c.heads * c.head_dim : 0;
  std::vector<float> x = s.x;
  const ak_status st = ak_rope(c.batch, c.seq_len, c.heads, c.head_dim, c.rotary_dim, c.style,
                               s.positions.empty() ? nullptr : s.positions.data(), c.theta,
                               s.pass_freq ? s.inv_freq.data() : nullptr, x.data() + offset,
                               s.pass_strides ? s.strides : nullptr);
  EXPECT_EQ(st, AK_OK) << ak_last_error();
  // The reference on the same view: shift the buffer so that it starts at x.
  std::vector<float> view(s.x.begin() + offset, s.x.end());
  const std::vector<double> want = rope_reference(
      s.shape, s.positions.empty() ? nullptr : s.positions.data(), s.inv_freq.data(), view);
  const std::vector<bool> touched = rope_touched(s.shape, view.size());
  int bad = 0;
  for (std::size_t e = 0; e < x.size() && bad < 5; ++e) {
    const bool rotated = e >= static_cast<std::size_t>(offset) && touched[e - offset];
    if (!rotated && std::memcmp(&x[e], &s.x[e], sizeof(float)) != 0) {
      ADD_FAILURE() << "entry " << e << " outside the rotated parts changed";
      ++bad;
    }
  }
  const RopeShape &r = s.shape;
  for (std::int64_t b = 0; b < r.batch; ++b)
    for (std::int64_t q = 0; q < r.seq_len; ++q)
      for (std::int64_t h = 0; h < r.heads && bad < 5; ++h)
        for (std::int64_t i = 0; i < r.rotary_dim / 2; ++i) {
          std::int64_t ia, ib;
          rope_pair(r, i, &ia, &ib);
          const auto row =
              static_cast<std::size_t>(b * r.strides[0] + q * r.strides[1] + h * r.strides[2]);
          const double tol = rope_tolerance(view[row + ia], view[row + ib]);
          for (const std::int64_t k : {ia, ib}) {
            const double got = x[row + k + offset], exp = want[row + k];
            if (!(std::fabs(got - exp) <= tol)) {
              ADD_FAILURE() << "batch " << b << " seq " << q << " head " << h << " entry " << k
                            << ": got " << got << ", expected " << exp << " (tolerance " << tol
                            << ")";
              ++bad;
            }
          }
        }
  return x;
}

class Rope : public PerIsa {};

TEST_P(Rope, RandomShapesMatchReference) {
  std::mt19937 rng(7);
  const std::int64_t dims[] = {2, 4, 6, 8, 14, 16, 18, 30, 32, 34, 64, 66, 96, 128, 130, 256, 258};
  for (int i = 0; i < 48; ++i) {
    RopeCase c;
    c.seed = static_cast<std::uint32_t>(100 + i);
    c.head_dim = dims[rng() % (sizeof dims / sizeof dims[0])];
    if (rng() % 4 == 0) c.head_dim += 1; // odd head_dim: only a partial rotary_dim
    // Partial (at least one pair) or whole; an odd head_dim is always partial.
    const auto partial = 2 * static_cast<std::int64_t>(1 + rng() % (c.head_dim / 2));
    c.rotary_dim = c.head_dim % 2 == 0 && rng() % 2 ? 0 : partial;
    c.batch = 1 + rng() % 3;
    c.seq_len = 1 + 2 * (rng() % 4); // odd
    c.heads = 1 + rng() % 5;
    c.style = rng() % 2 ? AK_ROPE_NEOX : AK_ROPE_INTERLEAVED;
    c.positions = static_cast<Positions>(rng() % 4);
    c.layout = static_cast<Layout>(rng() % 3);
    c.user_freq = rng() % 3 == 0;
    c.theta = rng() % 2 ? 10000.0f : 500000.0f;
    run_and_check(c);
  }
}

// q and k rotated in place inside one [batch, seq, 3, heads, head_dim]
// projection output (two calls, one view each); v keeps its bits.
TEST_P(Rope, FusedQkvRotatesQAndKOnly) {
  const std::int64_t batch = 2, seq = 5, heads = 3, hd = 64, row = 3 * heads * hd;
  for (ak_rope_style style : {AK_ROPE_NEOX, AK_ROPE_INTERLEAVED}) {
    SCOPED_TRACE(style);
    const std::vector<float> qkv0 = random_normal(static_cast<std::size_t>(batch * seq * row), 3);
    std::vector<float> qkv = qkv0;
    const std::int64_t strides[3] = {seq * row, row, hd};
    const std::vector<std::int32_t> pos = {7, 8, 9, 10, 11, 0, 1, 2, 3, 4};
    ASSERT_EQ(ak_rope(batch, seq, heads, hd, 0, style, pos.data(), 10000.0f, nullptr, qkv.data(),
                      strides),
              AK_OK);
    ASSERT_EQ(ak_rope(batch, seq, heads, hd, 0, style, pos.data(), 10000.0f, nullptr,
                      qkv.data() + heads * hd, strides),
              AK_OK);
    const RopeShape shape{batch, seq, heads, hd, hd, style, {seq * row, row, hd}};
    const std::vector<float> f = rope_default_inv_freq(hd, 10000.0f);
    std::vector<float> q0(qkv0.begin(), qkv0.end()), k0(qkv0.begin() + heads * hd, qkv0.end());
    const std::vector<double> q_want = rope_reference(shape, pos.data(), f.data(), q0);
    const std::vector<double> k_want = rope_reference(shape, pos.data(), f.data(), k0);
    EXPECT_EQ(rope_first_off(shape, q0, q_want, qkv.data()), -1) << "q";
    EXPECT_EQ(rope_first_off(shape, k0, k_want, qkv.data() + heads * hd), -1) << "k";
    for (std::int64_t t = 0; t < batch * seq; ++t)
      for (std::int64_t e = 2 * heads * hd; e < row; ++e) {
        const auto i = static_cast<std::size_t>(t * row + e);
        ASSERT_EQ(std::memcmp(&qkv[i], &qkv0[i], sizeof(float)), 0) << "v changed at " << i;
      }
  }
}

// One decode step per sequence at scattered positions, a partial rotary_dim
// (GPT-J's 64 of 256) and a caller's table: checked by run_and_check.
TEST_P(Rope, DecodeStepsPartialRotary) {
  for (ak_rope_style style : {AK_ROPE_NEOX, AK_ROPE_INTERLEAVED}) {
    RopeCase c;
    c.batch = 5;
    c.seq_len = 1;
    c.heads = 4;
    c.head_dim = 256;
    c.rotary_dim = 64;
    c.style = style;
    c.positions = Positions::large;
    c.user_freq = true;
    run_and_check(c);
  }
}

// Bits independent of the thread count (the problem is large enough to be
// split over 3 threads).
TEST_P(Rope, SameBitsOnOneTwoThreeThreads) {
  RopeCase c;
  c.batch = 3;
  c.seq_len = 101;
  c.heads = 4;
  c.head_dim = 130;
  c.rotary_dim = 96;
  c.positions = Positions::negative;
  c.layout = Layout::padded;
  for (ak_rope_style style : {AK_ROPE_NEOX, AK_ROPE_INTERLEAVED}) {
    c.style = style;
    std::vector<float> first;
    for (int threads : {1, 2, 3}) {
      ASSERT_EQ(ak_set_num_threads(threads), AK_OK);
      const std::vector<float> x = run_and_check(c);
      if (threads == 1)
        first = x;
      else
        EXPECT_EQ(std::memcmp(x.data(), first.data(), x.size() * sizeof(float)), 0)
            << threads << " threads";
    }
  }
}

// Near position 2^20 an angle formed in fp32 (as many engines form it) is off
// by up to half an ulp of 2^20-ish radians; ak_rope's stays within 2e-6 of
// float64 up to 2^24.
TEST_P(Rope, LargePositionsBeatFp32Angles) {
  const std::int64_t hd = 128;
  const std::vector<float> f = rope_default_inv_freq(hd, 10000.0f);
  // (Not 2^20 itself: a power of two times a float is exact in fp32 too.)
  constexpr std::int32_t kNear2Pow20 = (1 << 20) + 12345;
  for (std::int32_t p : {kNear2Pow20, (1 << 24) - 1, -(1 << 24) + 3}) {
    SCOPED_TRACE(p);
    std::vector<float> x(hd);
    for (std::int64_t i = 0; i < hd / 2; ++i) x[i] = 1.0f; // (1, 0): out = (cos, sin)
    ASSERT_EQ(ak_rope(1, 1, 1, hd, 0, AK_ROPE_NEOX, &p, 0.0f, f.data(), x.data(), nullptr), AK_OK);
    double ours = 0.0, fp32 = 0.0;
    for (std::int64_t i = 0; i < hd / 2; ++i) {
      const double angle = static_cast<double>(p) * static_cast<double>(f[i]);
      const float angle32 = static_cast<float>(p) * f[i];
      ours = std::max(ours, std::fabs(x[i] - std::cos(angle)));
      ours = std::max(ours, std::fabs(x[i + hd / 2] - std::sin(angle)));
      fp32 = std::max(fp32, std::fabs(static_cast<double>(std::cos(angle32)) - std::cos(angle)));
    }
    EXPECT_LE(ours, 2e-6);
    if (p == kNear2Pow20) {
      EXPECT_GT(fp32, 1e-3) << "fp32 angles were expected to drift here";
    }
  }
}

// NaN or infinite frequencies make their pairs NaN, and nothing else.
TEST_P(Rope, NonFiniteFrequencyPoisonsItsPairOnly) {
  const float f[3] = {1.0f, NAN, INFINITY};
  std::vector<float> x(6, 1.0f);
  const std::int32_t p = 3;
  ASSERT_EQ(ak_rope(1, 1, 1, 6, 0, AK_ROPE_INTERLEAVED, &p, 0.0f, f, x.data(), nullptr), AK_OK);
  EXPECT_FALSE(std::isnan(x[0]) || std::isnan(x[1]));
  for (int i = 2; i < 6; ++i) EXPECT_TRUE(std::isnan(x[i])) << i;
}

AK_INSTANTIATE_PER_ISA(Rope);

// Every instruction set gives the same bits (the tables are formed without
// fused operations, the rotation with separate multiplies and adds).
TEST(RopeAcrossIsas, SameBitsOnEveryInstructionSet) {
  RopeCase c;
  c.batch = 2;
  c.seq_len = 7;
  c.heads = 3;
  c.head_dim = 258;
  c.rotary_dim = 0;
  c.positions = Positions::large;
  c.user_freq = true;
  for (ak_rope_style style : {AK_ROPE_NEOX, AK_ROPE_INTERLEAVED}) {
    c.style = style;
    std::vector<float> first;
    for (const std::string &isa : supported_isas()) {
      ASSERT_EQ(ak_set_isa(isa.c_str()), AK_OK);
      const std::vector<float> x = run_and_check(c);
      if (first.empty())
        first = x;
      else
        EXPECT_EQ(std::memcmp(x.data(), first.data(), x.size() * sizeof(float)), 0) << isa;
    }
  }
  ASSERT_EQ(ak_set_isa("auto"), AK_OK);
}

} // namespace
} // namespace ak_test
