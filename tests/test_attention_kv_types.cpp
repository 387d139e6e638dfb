// ak_attention with K and V stored as f32, f16 or bf16 (k_type, v_type,
// independently), on every instruction set: a sampled grid over shapes, GQA
// and MQA, masks, windows, bias, kv_lens, lse and probs, strided q, k, v and
// out, head_dim != head_dim_v and the awkward sizes; each of the kernel's
// paths (packed prefill, the direct path of at most 32 rows, split-KV
// decode) with every pair of types; f16 subnormals.
//
// The reference runs in float64 on the stored values (kv_attention_support),
// so the fp32 suite's tolerances hold unchanged: out 1e-5, lse 1e-5, probs
// 1e-6. The f32/f32 cases without paging are the 0.1 behaviour reached
// through the 0.2 descriptor.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <utility>
#include <vector>

#include "../src/convert/half.hpp"
#include "kv_attention_support.hpp"
#include "test_support.hpp"

namespace ak_test {
namespace kv {
namespace {

const ak_dtype kTypes[] = {AK_F32, AK_F16, AK_BF16};
const std::int64_t kBatches[] = {1, 2, 3};
// MHA, GQA and MQA; 16 query heads on one kv head fill a direct item with
// 2 queries, a packed one with 3 and more.
const std::pair<std::int64_t, std::int64_t> kHeads[] = {{1, 1}, {4, 4}, {8, 2}, {6, 1}, {16, 1}};
const std::int64_t kQLens[] = {1, 3, 17, 63, 65, 129};
const std::int64_t kKvLens[] = {1, 3, 17, 63, 65, 129, 300};
const std::int64_t kDims[] = {1, 3, 16, 17, 32, 63, 64, 65, 128};
const int kMasks[] = {AK_MASK_NONE, AK_MASK_CAUSAL_TOP_LEFT, AK_MASK_CAUSAL_BOTTOM_RIGHT};
const std::int64_t kWindows[] = {0, 1, 3, 17, 64};
constexpr int kWindowKinds = 5; // none, left, right, both, both 0
constexpr double kMaxWork = 3e6;
constexpr int kRandomCases = 160;

template <class T, std::size_t N> const T &pick(std::mt19937 &rng, const T (&a)[N]) {
  return a[rng() % N];
}

std::int64_t group(const KvCase &c) { return c.heads / c.kv_heads; }
std::int64_t dv(const KvCase &c) { return c.head_dim_v ? c.head_dim_v : c.head_dim; }
// The paths of the kernel (src/attention/attention_plan.hpp): up to 32 rows
// (q_len x group) with d_v a multiple of the vector width read K and V in
// place; more rows are packed.
bool direct(const KvCase &c) { return c.q_len * group(c) <= 32 && dv(c) % 16 == 0; }
bool packed(const KvCase &c) { return c.q_len * group(c) > 32; }
bool half_kv(const KvCase &c) { return c.k_type != AK_F32 || c.v_type != AK_F32; }

KvCase random_case(std::mt19937 &rng, std::uint32_t seed) {
  KvCase c;
  c.batch = pick(rng, kBatches);
  std::tie(c.heads, c.kv_heads) = pick(rng, kHeads);
  c.q_len = pick(rng, kQLens);
  c.kv_len = pick(rng, kKvLens);
  c.head_dim = pick(rng, kDims);
  switch (rng() % 3) {
  case 0: // the default: head_dim
    break;
  case 1:
    c.head_dim_v = c.head_dim;
    break;
  default:
    while (c.head_dim_v == 0 || c.head_dim_v == c.head_dim) c.head_dim_v = pick(rng, kDims);
  }
  if (rng() % 4 == 0) // unit-scale logits still: 0.5 to 1.5 times the default
    c.scale = static_cast<float>((0.5 + (rng() % 1000) / 1000.0) /
                                 std::sqrt(static_cast<double>(c.head_dim)));
  c.mask = pick(rng, kMasks);
  const int window = static_cast<int>(rng() % kWindowKinds);
  if (window == 1 || window == 3) c.window_left = pick(rng, kWindows);
  if (window == 2 || window == 3) c.window_right = pick(rng, kWindows);
  if (window == 4) c.window_left = c.window_right = 0;
  c.bias = static_cast<BiasKind>(rng() % 3);
  if (rng() % 2) {
    const auto kv = static_cast<std::int32_t>(c.kv_len);
    for (std::int64_t b = 0; b < c.batch; ++b) {
      const unsigned kind = rng() % 3;
      c.kv_lens.push_back(kind == 0   ? 0
                          : kind == 1 ? kv
                                      : static_cast<std::int32_t>(1 + rng() % kv));
    }
  }
  c.k_type = pick(rng, kTypes);
  c.v_type = pick(rng, kTypes);
  c.qo_layout = static_cast<QoLayout>(rng() % 2);
  c.kv_layout = static_cast<KvLayout>(rng() % 3);
  const std::int64_t pads[] = {1, 3, 16};
  c.pad = pick(rng, pads);
  c.lse = rng() % 2;
  c.probs = rng() % 2;
  c.seed = seed;
  return c;
}

using Force = std::function<void(KvCase &)>;
using Accept = std::function<bool(const KvCase &)>;

// Every listed value of every dimension once (that value forced, the rest
// random), each pair of types on each path, then random cases; each case
// within kMaxWork.
const std::vector<KvCase> &grid_cases() {
  static const std::vector<KvCase> cases = [] {
    std::vector<std::pair<Force, Accept>> wanted;
    auto force = [&](Force f, Accept a = nullptr) { wanted.emplace_back(std::move(f), a); };
    for (ak_dtype kt : kTypes)
      for (ak_dtype vt : kTypes) {
        const Force types = [kt, vt](KvCase &c) { c.k_type = kt, c.v_type = vt; };
        force(types, packed);
        force(types, [](const KvCase &c) { return direct(c) && c.q_len * group(c) <= 8; });
        force(types, [](const KvCase &c) { return direct(c) && c.q_len * group(c) > 8; });
      }
    for (std::int64_t v : kBatches) force([v](KvCase &c) { c.batch = v; });
    for (auto hv : kHeads) force([hv](KvCase &c) { std::tie(c.heads, c.kv_heads) = hv; });
    for (std::int64_t v : kQLens) force([v](KvCase &c) { c.q_len = v; });
    for (std::int64_t v : kKvLens) force([v](KvCase &c) { c.kv_len = v; });
    for (std::int64_t v : kDims) {
      force([v](KvCase &c) { c.head_dim = v; });
      force([v](KvCase &c) { c.head_dim_v = v; });
    }
    for (int m : kMasks)
      for (std::int64_t w : kWindows) {
        force([m, w](KvCase &c) { c.mask = m, c.window_left = w; }, half_kv);
        force([m, w](KvCase &c) { c.mask = m, c.window_right = w; }, half_kv);
      }
    for (int b = 0; b < 3; ++b) force([b](KvCase &c) { c.bias = static_cast<BiasKind>(b); });
    for (int l = 0; l < 2; ++l) force([l](KvCase &c) { c.qo_layout = static_cast<QoLayout>(l); });
    for (int l = 0; l < 3; ++l) force([l](KvCase &c) { c.kv_layout = static_cast<KvLayout>(l); });
    for (int v = 0; v < 4; ++v) force([v](KvCase &c) { c.lse = v & 1, c.probs = v & 2; });
    force(nullptr, [](const KvCase &c) { return !c.kv_lens.empty() && half_kv(c); });
    for (int r = 0; r < kRandomCases; ++r) force(nullptr);

    std::mt19937 rng(20250301u);
    std::vector<KvCase> out;
    for (const auto &[f, accept] : wanted)
      for (;;) { // redraw the free choices until the case is wanted and cheap
        KvCase c = random_case(rng, 5000u + 16u * static_cast<std::uint32_t>(out.size()));
        if (f) f(c);
        // A forced batch or kv_len leaves kv_lens to fit.
        if (c.kv_lens.size() != static_cast<std::size_t>(c.batch)) c.kv_lens.clear();
        for (std::int32_t &n : c.kv_lens) n = std::min(n, static_cast<std::int32_t>(c.kv_len));
        if (c.head_dim_v == c.head_dim && rng() % 2) c.head_dim_v = 0;
        if ((accept && !accept(c)) || work(c) > kMaxWork) continue;
        out.push_back(c);
        break;
      }
    return out;
  }();
  return cases;
}

// The sample reaches what it is meant to: every pair of types on the packed
// and the direct path, K and V of different types with d_k != d_v.
TEST(AttentionKvTypesGrid, Coverage) {
  const auto &cases = grid_cases();
  auto any = [&](const Accept &pred) { return std::any_of(cases.begin(), cases.end(), pred); };
  for (ak_dtype kt : kTypes)
    for (ak_dtype vt : kTypes) {
      const auto types = [kt, vt](const KvCase &c) { return c.k_type == kt && c.v_type == vt; };
      EXPECT_TRUE(any([&](const KvCase &c) { return types(c) && packed(c); }));
      EXPECT_TRUE(any([&](const KvCase &c) { return types(c) && direct(c); }));
    }
  EXPECT_TRUE(any([](const KvCase &c) {
    return c.k_type != c.v_type && c.head_dim_v != 0 && c.head_dim_v != c.head_dim;
  }));
  EXPECT_TRUE(any([](const KvCase &c) { return half_kv(c) && c.kv_layout == KvLayout::Bshd; }));
  EXPECT_TRUE(any([](const KvCase &c) { return half_kv(c) && c.kv_heads == 1 && c.heads > 1; }));
}

class AttentionKvTypes : public PerIsa {};

TEST_P(AttentionKvTypes, SampledShapesMatchReferenceOnStoredValues) {
  expect_cases_match(grid_cases());
}

// Split-KV decode (q_len <= 16, more than 1024 keys: chunks of 1024 merged),
// a handful of cases over the type pairs, with GQA, MQA, kv_lens, windows,
// bias, lse and probs.
TEST_P(AttentionKvTypes, SplitDecode) {
  std::vector<KvCase> cases;
  KvCase c;
  c.q_len = 1, c.kv_len = 2500, c.heads = 8, c.kv_heads = 2, c.head_dim = 64;
  c.mask = AK_MASK_CAUSAL_BOTTOM_RIGHT, c.k_type = AK_F16, c.v_type = AK_F16;
  cases.push_back(c);
  c = KvCase{};
  c.batch = 2, c.q_len = 2, c.kv_len = 1500, c.heads = c.kv_heads = 2, c.head_dim = 128;
  c.kv_lens = {1500, 1100}, c.k_type = AK_BF16, c.v_type = AK_BF16;
  cases.push_back(c);
  c = KvCase{};
  c.q_len = 16, c.kv_len = 1100, c.heads = 2, c.kv_heads = 1, c.head_dim = 17, c.head_dim_v = 48;
  c.mask = AK_MASK_CAUSAL_BOTTOM_RIGHT, c.window_left = 300, c.k_type = AK_F16;
  c.v_type = AK_BF16, c.kv_layout = KvLayout::Bshd;
  cases.push_back(c);
  c = KvCase{};
  c.q_len = 3, c.kv_len = 1100, c.heads = 16, c.kv_heads = 1, c.head_dim = 32, c.head_dim_v = 16;
  c.bias = BiasKind::PerHead, c.k_type = AK_BF16, c.v_type = AK_F16;
  cases.push_back(c);
  c = KvCase{};
  c.q_len = 1, c.kv_len = 2049, c.heads = 6, c.kv_heads = 1, c.head_dim = 3, c.head_dim_v = 10;
  c.k_type = AK_F32, c.v_type = AK_F16, c.qo_layout = QoLayout::PaddedBshd, c.pad = 3;
  cases.push_back(c);
  c = KvCase{};
  c.batch = 3, c.q_len = 3, c.kv_len = 1025, c.heads = 4, c.kv_heads = 2, c.head_dim = 65;
  c.head_dim_v = 32, c.kv_lens = {1025, 0, 600}, c.k_type = AK_F16, c.v_type = AK_F32;
  c.kv_layout = KvLayout::PaddedBhsd, c.pad = 16, c.mask = AK_MASK_CAUSAL_BOTTOM_RIGHT;
  cases.push_back(c);
  std::uint32_t seed = 90;
  for (KvCase &s : cases) {
    s.seed = seed += 8;
    SCOPED_TRACE(describe(s));
    KvProblem p = make_problem(s);
    EXPECT_TRUE(run_and_check(p));
  }
}

// f16 subnormals (below 2^-14) are widened exactly, not flushed: v of
// magnitude ~2^-16, with out's tolerance scaled alike. Also on the direct
// path (d_v 32, 4 rows) and in split decode.
TEST_P(AttentionKvTypes, F16SubnormalValuesAreKept) {
  for (std::int64_t q_len : {4, 40})
    for (std::int64_t kv_len : {70, 1500}) {
      KvCase c;
      c.heads = 2, c.kv_heads = 1, c.q_len = q_len, c.kv_len = kv_len, c.head_dim = 16;
      c.head_dim_v = 32, c.k_type = AK_F16, c.v_type = AK_F16;
      c.v_scale = 1.0f / 65536.0f, c.seed = 300 + static_cast<std::uint32_t>(q_len + kv_len);
      SCOPED_TRACE(describe(c));
      KvProblem p = make_problem(c);
      EXPECT_TRUE(run_and_check(p));
    }
}

// An Inf in V, at a key that one thread count's items see and another's
// do not: the staged packed path must weigh it alike (which P V kernel a
// block takes may not follow the rows an item holds), so the bits agree.
TEST_P(AttentionKvTypes, InfInStagedValuesSameBitsForThreadCounts) {
  const std::int64_t L = 384, d = 64;
  std::vector<float> q(L * d), kf(L * d), vf(L * d);
  std::uint32_t x = 7;
  const auto next = [&] {
    return ((x = x * 1664525u + 1013904223u) >> 8) * (1.0f / 16777216.0f) - 0.5f;
  };
  for (auto *a : {&q, &kf, &vf})
    for (float &e : *a) e = next();
  std::vector<std::uint16_t> k(L * d), v(L * d);
  for (std::int64_t i = 0; i < L * d; ++i)
    k[i] = attnkern::float_to_f16(kf[i]), v[i] = attnkern::float_to_f16(vf[i]);
  v[250 * d] = 0x7c00; // +inf
  ak_attention_desc desc;
  ak_attention_desc_init(&desc);
  desc.batch = 1, desc.num_heads = desc.num_kv_heads = 1, desc.q_len = desc.kv_len = L;
  desc.head_dim = d, desc.mask = AK_MASK_CAUSAL_TOP_LEFT, desc.k_type = desc.v_type = AK_F16;
  std::vector<float> out[3];
  const int saved = ak_get_num_threads();
  for (int t = 1; t <= 3; ++t) {
    out[t - 1].assign(L * d, 0.0f);
    ASSERT_EQ(ak_set_num_threads(t), AK_OK);
    ASSERT_EQ(ak_attention(&desc, q.data(), reinterpret_cast<const float *>(k.data()),
                           reinterpret_cast<const float *>(v.data()), out[t - 1].data()),
              AK_OK)
        << ak_last_error();
  }
  ak_set_num_threads(saved);
  for (int t = 1; t < 3; ++t)
    EXPECT_EQ(std::memcmp(out[0].data(), out[t].data(), out[0].size() * sizeof(float)), 0)
        << "threads 1 and " << t + 1;
}

AK_INSTANTIATE_PER_ISA(AttentionKvTypes);

} // namespace
} // namespace kv
} // namespace ak_test
