// ak_attention over paged K/V (block_table != NULL), on every instruction
// set: page sizes 1, 7, 16, 33, 64, 128 and 4096; page ids shuffled or in
// order; pools contiguous (all-zero page strides) or with gaps between
// slots, heads and pages, head-major or slot-major; fp32, f16 and bf16; -1
// for every page that holds no key a query sees (past kv_lens[b], left of a
// window, in the causal future) and junk in the block table's columns past
// ceil(kv_len / page_size); prefill, the direct path and split-KV decode.
// Results against the float64 reference on the contiguous stored values,
// with the fp32 tolerances; the same bits for 1, 2 and 3 threads.
//
// An entry that must not be read is -1 (or, past the pages of kv_len,
// INT32_MIN, INT32_MAX, num_pages): a library that reads one reads outside
// the pool, which the sanitizer build reports.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <utility>
#include <vector>

#include "kv_attention_support.hpp"
#include "test_support.hpp"

namespace ak_test {
namespace kv {
namespace {

const std::int64_t kPageSizes[] = {1, 7, 16, 33, 64, 128, 4096};
const PoolLayout kPools[] = {PoolLayout::Contiguous, PoolLayout::HeadMajorGaps,
                             PoolLayout::SlotMajorGaps};
const ak_dtype kTypes[] = {AK_F32, AK_F16, AK_BF16};
const std::pair<std::int64_t, std::int64_t> kHeads[] = {{1, 1}, {4, 4}, {8, 2}, {6, 1}};
const std::int64_t kQLens[] = {1, 3, 17, 65};
const std::int64_t kKvLens[] = {1, 7, 33, 64, 100, 129, 300};
const std::int64_t kDims[] = {3, 16, 17, 32, 64, 65};
const int kMasks[] = {AK_MASK_NONE, AK_MASK_CAUSAL_TOP_LEFT, AK_MASK_CAUSAL_BOTTOM_RIGHT};
const std::int64_t kWindows[] = {0, 5, 40};
constexpr double kMaxWork = 2e6;
constexpr std::int64_t kMaxStorage = std::int64_t{1} << 21; // pool elements
constexpr int kRandomCases = 100;

template <class T, std::size_t N> const T &pick(std::mt19937 &rng, const T (&a)[N]) {
  return a[rng() % N];
}

KvCase random_case(std::mt19937 &rng, std::uint32_t seed) {
  KvCase c;
  c.batch = 1 + rng() % 3;
  std::tie(c.heads, c.kv_heads) = pick(rng, kHeads);
  c.q_len = pick(rng, kQLens);
  c.kv_len = pick(rng, kKvLens);
  c.head_dim = pick(rng, kDims);
  if (rng() % 2) c.head_dim_v = pick(rng, kDims);
  c.mask = pick(rng, kMasks);
  if (rng() % 3 == 0) c.window_left = pick(rng, kWindows);
  if (rng() % 4 == 0) c.window_right = pick(rng, kWindows);
  c.bias = static_cast<BiasKind>(rng() % 3);
  if (rng() % 2) {
    const auto kv = static_cast<std::int32_t>(c.kv_len);
    for (std::int64_t b = 0; b < c.batch; ++b)
      c.kv_lens.push_back(rng() % 4 == 0 ? 0 : static_cast<std::int32_t>(1 + rng() % kv));
  }
  c.k_type = pick(rng, kTypes);
  c.v_type = pick(rng, kTypes);
  c.qo_layout = static_cast<QoLayout>(rng() % 2);
  c.pad = 3;
  c.page_size = pick(rng, kPageSizes);
  c.pool = pick(rng, kPools);
  c.gap = 1 + rng() % 5;
  c.shuffle_pages = rng() % 4 != 0;
  c.unneeded_minus1 = rng() % 4 != 0;
  c.extra_pages = rng() % 3 == 0 ? 3 : 0;
  c.extra_cols = rng() % 3 == 0 ? 2 : 0;
  c.lse = rng() % 2;
  c.probs = rng() % 2;
  c.seed = seed;
  return c;
}

using Force = std::function<void(KvCase &)>;
using Accept = std::function<bool(const KvCase &)>;

bool has_minus1(const KvCase &c, const KvProblem &p) {
  const std::int64_t pps = c.kv_len == 0 ? 0 : (c.kv_len + c.page_size - 1) / c.page_size;
  for (std::int64_t b = 0; b < c.batch; ++b)
    for (std::int64_t col = 0; col < pps; ++col)
      if (p.block_table[static_cast<std::size_t>(b * p.desc.block_table_stride + col)] == -1)
        return true;
  return false;
}

const std::vector<KvCase> &grid_cases() {
  static const std::vector<KvCase> cases = [] {
    std::vector<std::pair<Force, Accept>> wanted;
    auto force = [&](Force f, Accept a = nullptr) { wanted.emplace_back(std::move(f), a); };
    const Accept half = [](const KvCase &c) { return c.k_type != AK_F32 || c.v_type != AK_F32; };
    const Accept fp32 = [](const KvCase &c) { return c.k_type == AK_F32 && c.v_type == AK_F32; };
    for (std::int64_t ps : kPageSizes)
      for (const Accept &types : {half, fp32}) {
        force([ps](KvCase &c) { c.page_size = ps; }, types);
        // Several pages per sequence, more than one query row.
        force([ps](KvCase &c) { c.page_size = ps, c.kv_len = 300, c.q_len = 17; }, types);
      }
    for (PoolLayout l : kPools)
      for (const Accept &types : {half, fp32}) force([l](KvCase &c) { c.pool = l; }, types);
    for (int v = 0; v < 4; ++v)
      force([v](KvCase &c) { c.shuffle_pages = v & 1, c.unneeded_minus1 = v & 2; });
    for (int m : kMasks)
      for (std::int64_t w : kWindows)
        force([m, w](KvCase &c) { c.mask = m, c.window_left = w, c.unneeded_minus1 = true; });
    force([](KvCase &c) { c.extra_cols = 2, c.extra_pages = 3; });
    // The direct path: at most 32 rows, d_v a multiple of 16.
    for (ak_dtype t : kTypes)
      force([t](KvCase &c) { c.k_type = c.v_type = t, c.head_dim_v = 32, c.q_len = 3; });
    for (int r = 0; r < kRandomCases; ++r) force(nullptr);

    std::mt19937 rng(20250302u);
    std::vector<KvCase> out;
    for (const auto &[f, accept] : wanted)
      for (;;) {
        KvCase c = random_case(rng, 7000u + 16u * static_cast<std::uint32_t>(out.size()));
        if (f) f(c);
        // A forced batch or kv_len leaves kv_lens to fit.
        if (c.kv_lens.size() != static_cast<std::size_t>(c.batch)) c.kv_lens.clear();
        for (std::int32_t &n : c.kv_lens) n = std::min(n, static_cast<std::int32_t>(c.kv_len));
        if ((accept && !accept(c)) || work(c) > kMaxWork || storage_elements(c) > kMaxStorage)
          continue;
        out.push_back(c);
        break;
      }
    return out;
  }();
  return cases;
}

TEST(AttentionPagedGrid, Coverage) {
  const auto &cases = grid_cases();
  for (std::int64_t ps : kPageSizes)
    EXPECT_TRUE(std::any_of(cases.begin(), cases.end(), [ps](const KvCase &c) {
      return c.page_size == ps && c.k_type != AK_F32;
    })) << ps;
  int with_minus1 = 0;
  for (const KvCase &c : cases) with_minus1 += c.unneeded_minus1 && has_minus1(c, make_problem(c));
  EXPECT_GE(with_minus1, 20);
}

class AttentionPaged : public PerIsa {};

TEST_P(AttentionPaged, SampledShapesMatchReference) { expect_cases_match(grid_cases()); }

// A decode step over a sliding window: the pages wholly left of every
// query's window, and those past kv_lens[b], are -1.
TEST_P(AttentionPaged, PagesLeftOfTheWindowAndPastKvLensAreMinus1) {
  for (ak_dtype t : {AK_F32, AK_BF16}) {
    KvCase c;
    c.batch = 3, c.heads = 4, c.kv_heads = 2, c.q_len = 2, c.kv_len = 900, c.head_dim = 32;
    c.mask = AK_MASK_CAUSAL_BOTTOM_RIGHT, c.window_left = 100, c.kv_lens = {900, 450, 0};
    c.k_type = c.v_type = t, c.page_size = 16, c.pool = PoolLayout::SlotMajorGaps, c.gap = 2;
    SCOPED_TRACE(describe(c));
    KvProblem p = make_problem(c);
    // Batch 0 needs keys 798..899 (pages 49..56 of 57), batch 1 keys
    // 348..449, batch 2 none.
    const std::int64_t st = p.desc.block_table_stride;
    EXPECT_EQ(p.block_table[0], -1);
    EXPECT_EQ(p.block_table[static_cast<std::size_t>(st + 40)], -1);
    for (std::int64_t col = 0; col < st; ++col)
      EXPECT_EQ(p.block_table[static_cast<std::size_t>(2 * st + col)], -1);
    EXPECT_TRUE(run_and_check(p));
  }
}

// Split-KV decode (more than 1024 keys, q_len <= 16) through a block table:
// page sizes that divide the 1024-key chunks and ones that straddle them.
TEST_P(AttentionPaged, SplitDecode) {
  struct Split {
    std::int64_t page_size, q_len, kv_len;
    ak_dtype k, v;
    PoolLayout pool;
  };
  const Split splits[] = {{16, 1, 2500, AK_F16, AK_F16, PoolLayout::Contiguous},
                          {7, 4, 1100, AK_BF16, AK_F32, PoolLayout::HeadMajorGaps},
                          {128, 6, 2049, AK_F32, AK_F32, PoolLayout::SlotMajorGaps},
                          {4096, 1, 3000, AK_F16, AK_BF16, PoolLayout::Contiguous},
                          {33, 2, 1500, AK_BF16, AK_BF16, PoolLayout::SlotMajorGaps}};
  std::uint32_t seed = 400;
  for (const Split &s : splits) {
    KvCase c;
    c.batch = 2, c.heads = 4, c.kv_heads = 1, c.q_len = s.q_len, c.kv_len = s.kv_len;
    c.head_dim = 32, c.mask = AK_MASK_CAUSAL_BOTTOM_RIGHT;
    c.kv_lens = {static_cast<std::int32_t>(s.kv_len), static_cast<std::int32_t>(s.kv_len / 2)};
    if (s.page_size == 33) c.window_left = 700;
    c.k_type = s.k, c.v_type = s.v, c.page_size = s.page_size, c.pool = s.pool, c.gap = 3;
    c.seed = seed += 8;
    SCOPED_TRACE(describe(c));
    KvProblem p = make_problem(c);
    EXPECT_TRUE(run_and_check(p));
  }
}

// The same bits for 1, 2 and 3 threads with a block table: prefill split
// into query blocks, a batched split decode, a wide group.
TEST_P(AttentionPaged, SameBitsForThreadCounts) {
  KvCase prefill;
  prefill.batch = 2, prefill.heads = 4, prefill.kv_heads = 2, prefill.q_len = 100;
  prefill.kv_len = 150, prefill.head_dim = 32, prefill.mask = AK_MASK_CAUSAL_BOTTOM_RIGHT;
  prefill.k_type = AK_F16, prefill.v_type = AK_F16, prefill.page_size = 16;
  KvCase decode;
  decode.batch = 3, decode.heads = 8, decode.kv_heads = 2, decode.q_len = 1, decode.kv_len = 3000;
  decode.head_dim = 32, decode.kv_lens = {3000, 1800, 2500}, decode.k_type = AK_BF16;
  decode.v_type = AK_BF16, decode.page_size = 64, decode.pool = PoolLayout::HeadMajorGaps;
  decode.gap = 4;
  KvCase wide;
  wide.heads = 64, wide.kv_heads = 1, wide.q_len = 1, wide.kv_len = 700, wide.head_dim = 32;
  wide.k_type = AK_F32, wide.v_type = AK_F16, wide.page_size = 7;
  for (KvCase c : {prefill, decode, wide}) {
    SCOPED_TRACE(describe(c));
    KvProblem p = make_problem(c);
    EXPECT_TRUE(same_bits_for_thread_counts(p));
    EXPECT_TRUE(matches(p, reference(p)));
  }
}

AK_INSTANTIATE_PER_ISA(AttentionPaged);

} // namespace
} // namespace kv
} // namespace ak_test
