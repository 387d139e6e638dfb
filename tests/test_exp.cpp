// The vectorized exp that softmax and attention use (src/vexp.hpp), checked
// element by element on every instruction set this CPU runs:
//   - at most 2 ulp from double-precision exp over [-87.3, 88.7], on every
//     128th float of that range (about 1.7e7 points per instruction set), or
//     on every float when AK_EXP_EXHAUSTIVE=1 (minutes; for manual runs);
//   - 0 for -inf and below -104, +inf on overflow and for +inf, NaN for NaN;
//   - exp(a - b) with the subtraction's rounding error carried (vexp_diff),
//     and softmax rows' variant with a floor under a (vexp_shifted)
//     within 2 ulp of exp of the exact difference;
//   - softmax rows' exp(x) with a floor under x (vexp_unshifted) within 2 ulp
//     over [-87.3, 64], the range its rows reach.
//   (those three within half an ulp and a hair on SSE2 and scalar, which compute them
//   in double: ExpProbe::softmax_exp_ulp; exp too on scalar: ExpProbe::exp_ulp);
//   - on every x86 instruction set, lanes whose exp is 0 (-inf, far below) raise no
//     underflow: Intel cores take a microcode assist for each underflowing
//     instruction (src/vexp.hpp, kExpZeroBelow).
#include "exp_probe/exp_probe.hpp"

#include <attnkern.h>
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

namespace {

float from_bits(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
std::uint32_t to_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// |y - exact| in units of the last place of the float nearest to `exact`
// (a normal float everywhere in the tested range).
// |y - exact| in units of the float spacing at exact (below FLT_MIN: the
// subnormal spacing 2^-149).
double ulp_error(float y, double exact) {
  const double unit = std::fabs(exact) < std::numeric_limits<float>::min()
                          ? std::ldexp(1.0, -149)
                          : std::ldexp(1.0, std::ilogb(static_cast<float>(exact)) - 23);
  return std::fabs(static_cast<double>(y) - exact) / unit;
}

// y[i] against exp(a[i] - b[i]) computed in double: at most `bound` ulp (NaN
// results count as failures), reporting the worst point.
void expect_difference_within(const char *what, const akt::ExpProbe &probe,
                              const std::vector<float> &a, const std::vector<float> &b,
                              const std::vector<float> &y) {
  const double bound = probe.softmax_exp_ulp;
  double worst = 0.0;
  std::size_t at = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    const double exact = std::exp(static_cast<double>(a[i]) - static_cast<double>(b[i]));
    const double err = ulp_error(y[i], exact);
    if (!(err <= worst)) {
      worst = std::isnan(err) ? std::numeric_limits<double>::infinity() : err;
      at = i;
    }
  }
  EXPECT_LE(worst, bound) << probe.isa << ": exp(" << a[at] << " - " << b[at] << ") = " << y[at];
  std::printf("[ %-8s ] %s: max %.3f ulp over %zu points (bound %.3f)\n", what, probe.isa, worst,
              y.size(), bound);
}

struct Worst {
  double ulp = 0.0;
  float x = 0.0f;
  float y = 0.0f;
  std::size_t points = 0;
};

using ExpFn = void (*)(const float *, float *, std::size_t);

// Runs exp (a probe's exp or exp_unshifted) over the floats between lo and hi
// (same sign) whose bit patterns are `stride` apart, in chunks.
void sweep(ExpFn exp, float lo, float hi, std::uint32_t stride, Worst &w) {
  std::uint32_t a = to_bits(lo), b = to_bits(hi);
  if (a > b) std::swap(a, b); // negative floats order backwards
  constexpr std::size_t kChunk = 1 << 16;
  std::vector<float> x(kChunk), y(kChunk);
  for (std::uint64_t u = a; u <= b;) {
    std::size_t n = 0;
    for (; n < kChunk && u <= b; ++n, u += stride) x[n] = from_bits(static_cast<std::uint32_t>(u));
    exp(x.data(), y.data(), n);
    for (std::size_t i = 0; i < n; ++i) {
      const double err = ulp_error(y[i], std::exp(static_cast<double>(x[i])));
      if (!(err <= w.ulp)) { // NaN results count as failures too
        w.ulp = std::isnan(err) ? std::numeric_limits<double>::infinity() : err;
        w.x = x[i];
        w.y = y[i];
      }
    }
    w.points += n;
  }
}

} // namespace

namespace akt {
// Test names and failure messages show the instruction set, not the bytes.
void PrintTo(const ExpProbe &p, std::ostream *os) { *os << p.isa; }
} // namespace akt

namespace {

class VexpTest : public ::testing::TestWithParam<akt::ExpProbe> {
protected:
  void SetUp() override {
    if (!ak_isa_supported(GetParam().isa)) GTEST_SKIP() << GetParam().isa << " not on this CPU";
  }
};

TEST_P(VexpTest, WithinTwoUlpOverTheWholeRange) {
  const char *full = std::getenv("AK_EXP_EXHAUSTIVE");
  const std::uint32_t stride = full && std::strcmp(full, "1") == 0 ? 1 : 128;
  Worst w;
  sweep(GetParam().exp, -87.3f, -0.0f, stride, w);
  sweep(GetParam().exp, 0.0f, 88.7f, stride, w);
  EXPECT_GE(w.points, stride == 1 ? std::size_t{2000000000} : std::size_t{10000000});
  EXPECT_LE(w.ulp, GetParam().exp_ulp)
      << GetParam().isa << ": exp(" << w.x << ") = " << w.y << " vs "
      << std::exp(static_cast<double>(w.x)) << " (" << w.points << " points)";
  std::printf("[ vexp     ] %s: max %.3f ulp over %zu points (worst exp(%.9g), bound %.3f)\n",
              GetParam().isa, w.ulp, w.points, static_cast<double>(w.x), GetParam().exp_ulp);
}

TEST_P(VexpTest, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> x = {-inf,   -1e30f, -1000.0f, -104.5f, -104.0001f, inf,  1e30f,
                                88.73f, 89.0f,  100.0f,   nan,     -nan,       0.0f, -0.0f};
  std::vector<float> y(x.size());
  GetParam().exp(x.data(), y.data(), x.size());
  for (int i = 0; i < 5; ++i) EXPECT_EQ(y[i], 0.0f) << "exp(" << x[i] << ")";
  for (int i = 5; i < 10; ++i) EXPECT_EQ(y[i], inf) << "exp(" << x[i] << ")";
  EXPECT_TRUE(std::isnan(y[10]));
  EXPECT_TRUE(std::isnan(y[11]));
  EXPECT_EQ(y[12], 1.0f);
  EXPECT_EQ(y[13], 1.0f);
  // Between -104 and -87.3 the results are subnormal: tiny, never negative
  // or larger than the smallest normal float's neighbourhood.
  const std::vector<float> deep = {-87.5f, -90.0f, -95.0f, -100.0f, -103.9f};
  std::vector<float> yd(deep.size());
  GetParam().exp(deep.data(), yd.data(), deep.size());
  for (std::size_t i = 0; i < deep.size(); ++i) {
    EXPECT_GE(yd[i], 0.0f) << "exp(" << deep[i] << ")";
    EXPECT_LE(yd[i], 1.2e-38f) << "exp(" << deep[i] << ")";
    EXPECT_NEAR(yd[i], std::exp(static_cast<double>(deep[i])), 1e-44) << "exp(" << deep[i] << ")";
  }
}

TEST_P(VexpTest, DifferenceWithinTwoUlpOfTheExactDifference) {
  // Softmax's exp(x - max): max and x of similar size, where x - max alone
  // may be inexact in float.
  std::mt19937 rng(20261121);
  std::uniform_real_distribution<float> mag(-80.0f, 80.0f), gap(-85.0f, 0.0f);
  constexpr std::size_t n = 1 << 20;
  std::vector<float> a(n), b(n), y(n);
  for (std::size_t i = 0; i < n; ++i) {
    b[i] = mag(rng);
    a[i] = b[i] + gap(rng);
  }
  GetParam().exp_diff(a.data(), b.data(), y.data(), n);
  expect_difference_within("exp_diff", GetParam(), a, b, y);
  // Masked lanes: -inf - finite is exactly 0 after exp; NaN stays NaN.
  const float inf = std::numeric_limits<float>::infinity();
  const float xa[] = {-inf, std::numeric_limits<float>::quiet_NaN(), 3.0f};
  const float xb[] = {2.0f, 2.0f, 3.0f};
  float out[3];
  GetParam().exp_diff(xa, xb, out, 3);
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_TRUE(std::isnan(out[1]));
  EXPECT_EQ(out[2], 1.0f);
}

// Softmax rows' exp(x - max) (vexp_shifted): maxima up to the 65536 its
// callers allow, gaps reaching past -104 and the -176 floor (those must come out 0,
// or a subnormal within the bound), and the masked and NaN lanes.
TEST_P(VexpTest, ShiftedWithinTwoUlpOfTheExactDifference) {
  std::mt19937 rng(20261122);
  std::uniform_real_distribution<float> mag(-65536.0f, 65536.0f), small(-4.0f, 4.0f),
      gap(-190.0f, 0.0f);
  constexpr std::size_t n = 1 << 20;
  std::vector<float> a(n), b(n), y(n);
  for (std::size_t i = 0; i < n; ++i) {
    b[i] = i % 2 ? mag(rng) : small(rng);
    a[i] = std::min(b[i], b[i] + gap(rng));
  }
  GetParam().exp_shifted(a.data(), b.data(), y.data(), n);
  expect_difference_within("shifted", GetParam(), a, b, y);
  const float inf = std::numeric_limits<float>::infinity();
  const float xa[] = {-inf, std::numeric_limits<float>::quiet_NaN(), 3.0f, -65536.0f, 65536.0f};
  const float xb[] = {2.0f, 2.0f, 3.0f, 65536.0f, 65536.0f};
  float out[5];
  GetParam().exp_shifted(xa, xb, out, 5);
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_TRUE(std::isnan(out[1]));
  EXPECT_EQ(out[2], 1.0f);
  EXPECT_EQ(out[3], 0.0f);
  EXPECT_EQ(out[4], 1.0f);
}

// Softmax rows' exp(x) for rows whose maximum is in [0, 64]
// (vexp_unshifted): every 128th float of [-87.3, 64], and the floor: -inf
// and everything below -104 give 0, NaN stays NaN.
TEST_P(VexpTest, UnshiftedWithinTwoUlpOverItsRange) {
  Worst w;
  sweep(GetParam().exp_unshifted, -87.3f, -0.0f, 128, w);
  sweep(GetParam().exp_unshifted, 0.0f, 64.0f, 128, w);
  EXPECT_LE(w.ulp, GetParam().softmax_exp_ulp)
      << GetParam().isa << ": exp(" << w.x << ") = " << w.y << " vs "
      << std::exp(static_cast<double>(w.x)) << " (" << w.points << " points)";
  std::printf("[ %-8s ] %s: max %.3f ulp over %zu points (bound %.3f)\n", "unshift", GetParam().isa,
              w.ulp, w.points, GetParam().softmax_exp_ulp);
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x = {-inf,    -1e30f,     -1000.0f,
                                -105.5f, -104.0001f, 0.0f,
                                -0.0f,   64.0f,      std::numeric_limits<float>::quiet_NaN()};
  std::vector<float> y(x.size());
  GetParam().exp_unshifted(x.data(), y.data(), x.size());
  for (int i = 0; i < 5; ++i) EXPECT_EQ(y[i], 0.0f) << "exp(" << x[i] << ")";
  EXPECT_EQ(y[5], 1.0f);
  EXPECT_EQ(y[6], 1.0f);
  EXPECT_LE(ulp_error(y[7], std::exp(64.0)), GetParam().softmax_exp_ulp);
  EXPECT_TRUE(std::isnan(y[8]));
}

// Masked keys and entries (-inf) and arguments far below the range give 0
// without an underflow on the way (the MXCSR's sticky underflow flag stays
// clear): an underflowing multiply or vscalefps costs an Intel core a
// microcode assist (a masked softmax ran 5-6 times slower for it, AVX2 and
// AVX-512). SSE2 and scalar, which compute in double, zero such lanes before
// the rounding to float. On AVX2 the claim holds from -176 down
// (kExpZeroFloor); between -176 and -104 the two-factor scaling still
// underflows, a case left as it is.
TEST_P(VexpTest, ZeroLanesRaiseNoUnderflow) {
#if defined(__x86_64__) || defined(__i386__)
  const float inf = std::numeric_limits<float>::infinity();
  // 32 lanes: whole vectors on every ISA (the probes pad a tail with zeros)
  std::vector<float> x(32), b(32, 2.0f), y(32);
  const float far[] = {-inf, -1e30f, -3.4e38f, -10000.0f, -1000.0f, -200.0f, -176.5f, -177.0f};
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = far[i % 8];
  const auto underflow_after = [&](auto &&run) {
    _mm_setcsr(_mm_getcsr() & ~0x3Fu); // clear the sticky exception flags
    run();
    return (_mm_getcsr() & 0x10u) != 0; // UE
  };
  EXPECT_FALSE(underflow_after([&] { GetParam().exp(x.data(), y.data(), x.size()); })) << "exp";
  for (float v : y) EXPECT_EQ(v, 0.0f);
  EXPECT_FALSE(underflow_after([&] {
    GetParam().exp_diff(x.data(), b.data(), y.data(), x.size());
  })) << "exp_diff";
  for (float v : y) EXPECT_EQ(v, 0.0f);
  EXPECT_FALSE(underflow_after([&] { GetParam().exp_unshifted(x.data(), y.data(), x.size()); }))
      << "exp_unshifted";
  for (float v : y) EXPECT_EQ(v, 0.0f);
  // (exp_shifted's probe takes a lane at a time, with b[i] in every lane)
  EXPECT_FALSE(underflow_after([&] {
    GetParam().exp_shifted(x.data(), b.data(), y.data(), x.size());
  })) << "exp_shifted";
  for (float v : y) EXPECT_EQ(v, 0.0f);
  // The control: a result in the subnormal range does raise it.
  const float deep = -95.0f;
  float out;
  EXPECT_TRUE(underflow_after([&] { GetParam().exp(&deep, &out, 1); }));
  EXPECT_GT(out, 0.0f);
#else
  GTEST_SKIP() << "x86 only";
#endif
}

// ak_attention's softcap, cap * tanh(s / cap), against float64 on every
// instruction set: within 3.5 ulp of the capped score over scores from
// cap * FLT_MIN to 40 caps either side (tanh's own 2.2 ulp, s / cap's
// rounding carried through tanh, at most half an ulp, and the product with
// cap's half: 3.23 measured, near s / cap = 0.57), every
// 4097th float, for caps of 0.5, 30 and a subnormal one (whose reciprocal
// is infinite); +-inf gives +-cap, NaN stays NaN, zero stays zero.
TEST_P(VexpTest, SoftcapWithinThreeAndAHalfUlp) {
  const akt::ExpProbe &probe = GetParam();
  const float kInf = std::numeric_limits<float>::infinity();
  for (const float cap : {0.5f, 30.0f, 1e-40f}) {
    double worst = 0.0;
    float at = 0.0f, got = 0.0f;
    std::vector<float> s;
    // From where s / cap is a normal float (below, the quotient's own
    // rounding is 2^-149 absolute, however small s is: no matter for a score).
    const std::uint32_t first = std::max<std::uint32_t>(1, to_bits(cap * FLT_MIN));
    for (std::uint64_t u = first; u <= to_bits(40.0f * cap); u += 4097) {
      s.push_back(from_bits(static_cast<std::uint32_t>(u)));
      s.push_back(-s.back());
    }
    std::vector<float> y = s;
    probe.softcap(y.data(), y.size(), cap);
    for (std::size_t i = 0; i < s.size(); ++i) {
      const double exact = cap * std::tanh(static_cast<double>(s[i]) / cap);
      const double err = ulp_error(y[i], exact);
      if (!(err <= worst)) {
        worst = std::isnan(err) ? std::numeric_limits<double>::infinity() : err;
        at = s[i], got = y[i];
      }
    }
    EXPECT_LE(worst, 3.5) << probe.isa << ": cap " << cap << ", s " << at << " gave " << got;
    float special[] = {kInf, -kInf, std::numeric_limits<float>::quiet_NaN(), 0.0f, -0.0f};
    probe.softcap(special, 5, cap);
    EXPECT_EQ(special[0], cap) << probe.isa;
    EXPECT_EQ(special[1], -cap) << probe.isa;
    EXPECT_TRUE(std::isnan(special[2])) << probe.isa;
    EXPECT_EQ(special[3], 0.0f) << probe.isa;
    EXPECT_EQ(special[4], 0.0f) << probe.isa;
  }
}

INSTANTIATE_TEST_SUITE_P(PerIsa, VexpTest, ::testing::ValuesIn(akt::exp_probes()),
                         [](const ::testing::TestParamInfo<akt::ExpProbe> &info) {
                           return std::string(info.param.isa);
                         });

} // namespace
