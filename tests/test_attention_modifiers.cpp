// ak_attention's score modifiers (softcap, ALiBi, sinks) and packed
// variable-length batches (cu_seqlens_q, cu_seqlens_k), on every
// instruction set: a grid of softcap x sinks x ALiBi x masks and windows x
// GQA x packed sequences x paging x storage type against the float64
// reference, the edge cases attnkern.h promises, and the same bits for 1, 2
// and 3 threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include "kv_attention_support.hpp"
#include "test_support.hpp"

namespace ak_test {
namespace kv {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
const ak_dtype kTypes[] = {AK_F32, AK_F16, AK_BF16};
const std::pair<std::int64_t, std::int64_t> kHeads[] = {{1, 1}, {4, 4}, {8, 2}, {6, 1}};
const std::int64_t kQLens[] = {1, 2, 5, 17, 70};
const std::int64_t kKvLens[] = {1, 9, 33, 100, 260, 1300};
const std::int64_t kDims[] = {8, 16, 19, 32, 64};
const int kMasks[] = {AK_MASK_NONE, AK_MASK_CAUSAL_TOP_LEFT, AK_MASK_CAUSAL_BOTTOM_RIGHT};
const std::int64_t kPageSizes[] = {1, 16, 33, 128};
const float kSoftcaps[] = {0.5f, 5.0f, 30.0f};
constexpr double kMaxWork = 2e6;
constexpr std::int64_t kMaxStorage = std::int64_t{1} << 21;
constexpr int kCases = 160;

template <class T, std::size_t N> const T &pick(std::mt19937 &rng, const T (&a)[N]) {
  return a[rng() % N];
}

std::vector<std::int32_t> random_lens(std::mt19937 &rng, std::int64_t n, std::int64_t max) {
  std::vector<std::int32_t> lens;
  for (std::int64_t b = 0; b < n; ++b)
    lens.push_back(rng() % 5 == 0 ? static_cast<std::int32_t>(max)
                                  : static_cast<std::int32_t>(rng() % (max + 1)));
  return lens;
}

KvCase random_case(std::mt19937 &rng, std::uint32_t seed) {
  KvCase c;
  c.batch = 1 + rng() % 4;
  std::tie(c.heads, c.kv_heads) = pick(rng, kHeads);
  c.q_len = pick(rng, kQLens);
  c.kv_len = pick(rng, kKvLens);
  c.head_dim = pick(rng, kDims);
  if (rng() % 3 == 0) c.head_dim_v = 16;
  c.mask = pick(rng, kMasks);
  if (rng() % 4 == 0) c.window_left = rng() % 50;
  if (rng() % 6 == 0) c.window_right = rng() % 20;
  c.bias = rng() % 4 == 0 ? BiasKind::PerHead : BiasKind::None;
  if (rng() % 2) c.softcap = pick(rng, kSoftcaps);
  c.alibi = rng() % 2;
  if (rng() % 2)
    for (std::int64_t h = 0; h < c.heads; ++h)
      c.sinks.push_back(rng() % 8 == 0 ? -kInf : static_cast<float>(rng() % 80) / 10.0f - 4.0f);
  const int storage = rng() % 3; // 0: tensors, 1: packed keys, 2: paged
  if (rng() % 2) c.q_lens = random_lens(rng, c.batch, c.q_len);
  if (storage == 1) {
    c.k_lens = random_lens(rng, c.batch, c.kv_len);
  } else if (rng() % 2) {
    c.kv_lens = random_lens(rng, c.batch, c.kv_len);
  }
  if (storage == 2) {
    c.page_size = pick(rng, kPageSizes);
    c.pool = static_cast<PoolLayout>(rng() % 3);
    c.gap = 2;
  }
  c.k_type = pick(rng, kTypes);
  c.v_type = pick(rng, kTypes);
  c.qo_layout = static_cast<QoLayout>(rng() % 2);
  c.kv_layout = static_cast<KvLayout>(rng() % 3);
  c.pad = 3;
  c.lse = rng() % 4 != 0;
  c.probs = c.q_lens.empty() && rng() % 3 == 0;
  c.seed = seed;
  return c;
}

const std::vector<KvCase> &grid_cases() {
  static const std::vector<KvCase> cases = [] {
    using Force = std::function<void(KvCase &)>;
    std::vector<Force> wanted;
    // Each modifier alone and all together, on each path: prefill, the
    // direct path (decode, GQA groups) and split decode.
    const Force alone[] = {[](KvCase &c) { c.softcap = 5.0f, c.alibi = false, c.sinks.clear(); },
                           [](KvCase &c) { c.softcap = 0.0f, c.alibi = true, c.sinks.clear(); },
                           [](KvCase &c) {
                             c.softcap = 0.0f, c.alibi = false;
                             c.sinks.assign(static_cast<std::size_t>(c.heads), 1.5f);
                           },
                           [](KvCase &c) {
                             c.softcap = 30.0f, c.alibi = true;
                             c.sinks.assign(static_cast<std::size_t>(c.heads), -0.5f);
                           }};
    const Force paths[] = {[](KvCase &c) { c.q_len = 70, c.kv_len = 260; },
                           [](KvCase &c) { c.q_len = 1, c.kv_len = 260, c.head_dim_v = 16; },
                           [](KvCase &c) { c.q_len = 2, c.kv_len = 1300, c.head_dim_v = 16; }};
    for (const Force &m : alone)
      for (const Force &path : paths) wanted.push_back([m, path](KvCase &c) { m(c), path(c); });
    for (int r = 0; r < kCases; ++r) wanted.push_back(nullptr);

    std::mt19937 rng(20261128u);
    std::vector<KvCase> out;
    for (const Force &f : wanted)
      for (;;) {
        KvCase c = random_case(rng, 9000u + 16u * static_cast<std::uint32_t>(out.size()));
        if (f) f(c);
        if (!c.q_lens.empty()) c.probs = false;
        // A forced shape leaves the lengths to fit.
        for (auto *lens : {&c.kv_lens, &c.k_lens})
          for (std::int32_t &n : *lens) n = std::min(n, static_cast<std::int32_t>(c.kv_len));
        for (std::int32_t &n : c.q_lens) n = std::min(n, static_cast<std::int32_t>(c.q_len));
        if (work(c) > kMaxWork || storage_elements(c) > kMaxStorage) continue;
        out.push_back(c);
        break;
      }
    return out;
  }();
  return cases;
}

TEST(AttentionModifiersGrid, Coverage) {
  int softcap = 0, alibi = 0, sinks = 0, packed_q = 0, packed_k = 0, paged = 0, all = 0;
  for (const KvCase &c : grid_cases()) {
    softcap += c.softcap > 0, alibi += c.alibi, sinks += !c.sinks.empty();
    packed_q += !c.q_lens.empty(), packed_k += !c.k_lens.empty(), paged += c.page_size > 0;
    all += c.softcap > 0 && c.alibi && !c.sinks.empty() && !c.q_lens.empty();
  }
  for (int n : {softcap, alibi, sinks, packed_q, packed_k, paged}) EXPECT_GE(n, 30);
  EXPECT_GE(all, 5);
}

class AttentionModifiers : public PerIsa {};

TEST_P(AttentionModifiers, SampledShapesMatchReference) { expect_cases_match(grid_cases()); }

// Rows that see no key (kv_lens 0, a window left of every key) get out = 0
// and lse = the sink; a -inf sink is no sink; a +inf sink leaves out and
// probs 0 and lse +inf; a NaN sink makes its head's rows NaN, on every
// path (prefill, direct, split decode).
TEST_P(AttentionModifiers, SinkEdgeCases) {
  for (std::int64_t kv_len : {40, 1300}) {
    for (std::int64_t q_len : {1, 40}) {
      KvCase c;
      c.batch = 2, c.heads = 4, c.kv_heads = 2, c.q_len = q_len, c.kv_len = kv_len;
      c.head_dim = 16, c.mask = AK_MASK_CAUSAL_BOTTOM_RIGHT;
      c.kv_lens = {static_cast<std::int32_t>(kv_len), 0};
      c.sinks = {0.75f, -kInf, kInf, kNaN};
      c.probs = q_len == 40;
      SCOPED_TRACE(describe(c));
      KvProblem p = make_problem(c);
      ASSERT_TRUE(run_and_check(p));
      for (std::int64_t i = 0; i < q_len; ++i) {
        // Entry 1 sees nothing: out 0, lse = the sink (NaN: NaN).
        EXPECT_EQ(p.lse[static_cast<std::size_t>(p.lse_index(1, 0, i))], 0.75f);
        EXPECT_EQ(p.lse[static_cast<std::size_t>(p.lse_index(1, 1, i))], -kInf);
        EXPECT_EQ(p.lse[static_cast<std::size_t>(p.lse_index(1, 2, i))], kInf);
        EXPECT_TRUE(std::isnan(p.lse[static_cast<std::size_t>(p.lse_index(1, 3, i))]));
        EXPECT_TRUE(std::isnan(p.lse[static_cast<std::size_t>(p.lse_index(0, 3, i))]));
      }
      // A -inf sink gives the bits of no sink at all.
      KvCase none = c;
      none.sinks = {0.75f, -kInf, kInf, kNaN};
      KvProblem with_minus_inf = make_problem(none);
      none.sinks.clear();
      KvProblem without = make_problem(none);
      ASSERT_EQ(run(with_minus_inf), AK_OK);
      ASSERT_EQ(run(without), AK_OK);
      const std::int64_t dv = 16;
      for (std::int64_t b = 0; b < 2; ++b)
        for (std::int64_t i = 0; i < q_len; ++i)
          for (std::int64_t e = 0; e < dv; ++e) {
            const std::size_t o =
                static_cast<std::size_t>(b * p.os.b + 1 * p.os.h + i * p.os.s + e);
            EXPECT_EQ(std::memcmp(&with_minus_inf.out[o], &without.out[o], sizeof(float)), 0);
          }
    }
  }
}

// A +inf sink leaves out 0 even where a visible v holds Inf or NaN (every
// key weighs exactly 0 and feeds nothing), split decode included.
TEST_P(AttentionModifiers, InfiniteSinkOutweighsInfiniteValues) {
  for (std::int64_t kv_len : {100, 1300}) {
    KvCase c;
    c.heads = 2, c.q_len = 1, c.kv_len = kv_len, c.head_dim = 16, c.sinks = {kInf, 0.0f};
    SCOPED_TRACE(describe(c));
    KvProblem p = make_problem(c);
    p.v.set(5 * 16 + 3, kInf), p.v_ref[5 * 16 + 3] = kInf;
    p.v.set(7 * 16 + 4, kNaN), p.v_ref[7 * 16 + 4] = kNaN;
    ASSERT_EQ(run(p), AK_OK) << ak_last_error();
    for (std::int64_t e = 0; e < 16; ++e) EXPECT_EQ(p.out[static_cast<std::size_t>(e)], 0.0f) << e;
    EXPECT_EQ(p.lse[0], kInf);
    // Head 1 (sink 0) weighs those values: its columns 3 and 4 are not numbers.
    EXPECT_TRUE(std::isinf(p.out[static_cast<std::size_t>(p.os.h + 3)]) ||
                std::isnan(p.out[static_cast<std::size_t>(p.os.h + 3)]));
    EXPECT_TRUE(std::isnan(p.out[static_cast<std::size_t>(p.os.h + 4)]));
  }
}

// softcap keeps a +inf score finite: q . k = +inf gives the score softcap,
// and the row a finite mean of the values.
TEST_P(AttentionModifiers, SoftcapSaturatesInfiniteScores) {
  for (std::int64_t kv_len : {5, 300, 1500}) {
    KvCase c;
    c.heads = 2, c.q_len = 1, c.kv_len = kv_len, c.head_dim = 16, c.softcap = 20.0f;
    SCOPED_TRACE(describe(c));
    KvProblem p = make_problem(c);
    for (std::int64_t e = 0; e < 16; ++e) p.q[static_cast<std::size_t>(e)] = e == 0 ? kInf : 0.0f;
    for (std::int64_t j = 0; j < kv_len; ++j) // k[0] > 0: every score of head 0 is +inf
      p.k.set(j * 16, 1.0f + static_cast<float>(j % 3)),
          p.k_ref[static_cast<std::size_t>(j * 16)] = p.k.get(j * 16);
    ASSERT_TRUE(run_and_check(p));
    for (std::int64_t e = 0; e < 16; ++e)
      EXPECT_TRUE(std::isfinite(p.out[static_cast<std::size_t>(e)]));
    EXPECT_NEAR(p.lse[0], 20.0f + std::log(static_cast<float>(kv_len)), 1e-4f);
  }
}

// One long sequence among short ones, packed: every thread count gives the
// same bits, with and without paging, ALiBi and sinks, causal chunked
// prefill (cu_seqlens_q with kv_lens over a paged cache) included.
TEST_P(AttentionModifiers, PackedSequencesSameBitsForThreadCounts) {
  KvCase varlen;
  varlen.batch = 5, varlen.heads = 4, varlen.kv_heads = 2, varlen.q_len = 200;
  varlen.kv_len = 200, varlen.head_dim = 32, varlen.mask = AK_MASK_CAUSAL_TOP_LEFT;
  varlen.q_lens = {3, 200, 17, 0, 64}, varlen.k_lens = {3, 200, 17, 0, 64};
  varlen.alibi = true, varlen.sinks = {0.5f, 1.0f, -1.0f, 2.0f}, varlen.probs = false;
  KvCase chunked = varlen;
  chunked.k_lens.clear();
  chunked.q_lens = {16, 16, 1, 0, 5}, chunked.kv_lens = {40, 200, 7, 0, 64};
  chunked.q_len = 16, chunked.mask = AK_MASK_CAUSAL_BOTTOM_RIGHT, chunked.page_size = 16;
  chunked.k_type = chunked.v_type = AK_BF16, chunked.softcap = 10.0f;
  // Few items (2 entries, 4 heads), so that 2 and 3 threads take items of
  // half the rows: empty query blocks then differ with the thread count.
  KvCase few = varlen;
  few.batch = 2, few.q_lens = {3, 200}, few.k_lens = {3, 200};
  KvCase decode = chunked;
  decode.q_lens = {1, 1, 1, 0, 1}, decode.q_len = 1, decode.kv_len = 2100;
  decode.kv_lens = {2100, 1500, 40, 0, 1025};
  for (const KvCase &c : {varlen, few, chunked, decode}) {
    SCOPED_TRACE(describe(c));
    KvProblem p = make_problem(c);
    EXPECT_TRUE(same_bits_for_thread_counts(p));
    EXPECT_TRUE(matches(p, reference(p)));
  }
}

AK_INSTANTIATE_PER_ISA(AttentionModifiers);

} // namespace
} // namespace kv
} // namespace ak_test
