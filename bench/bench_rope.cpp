// ak_rope and ak_embedding at prefill sizes, with the rate counted as bytes
// read + written per second so that it compares with membw/copy (the rate
// a pass over the same bytes can hope for). Benchmarks:
//   rope/{attnkern,sincos_loop}/neox_4096x32x128/threads:<t>
//   embedding/attnkern/4096x4096_of_32000/threads:<t>
// The baseline is what a straightforward implementation does: per element,
// the angle in fp32 and std::sin / std::cos of it, in the same process and
// on the same data; both runs are spot-checked against each other.
#include "bench_rope.hpp"

#include "bench_common.hpp"

#include <attnkern.h>
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace akb {
namespace {

// Llama-style q: 4096 tokens of 32 heads x 128, NeoX pairs, theta 10000.
constexpr std::int64_t kTokens = 4096, kHeads = 32, kHeadDim = 128;
constexpr std::size_t kRopeFloats = std::size_t{kTokens * kHeads * kHeadDim}; // 64 MiB
constexpr float kTheta = 10000.0f;

// Embedding: 4096 tokens of 4096 from a 32000-row table (500 MiB).
constexpr std::int64_t kLookups = 4096, kDim = 4096, kVocab = 32000;

Buffer &rope_input() {
  static Buffer x = [] {
    Buffer b(kRopeFloats);
    fill_normal(b, seed_of("rope"));
    return b;
  }();
  return x;
}

std::vector<float> inv_freq() {
  std::vector<float> f(kHeadDim / 2);
  for (std::size_t i = 0; i < f.size(); ++i)
    f[i] = static_cast<float>(std::pow(static_cast<double>(kTheta), -2.0 * double(i) / kHeadDim));
  return f;
}

// The baseline: one token after another, every element's angle formed in
// fp32 and its sine and cosine from the C library, as a plain loop would.
__attribute__((noinline)) void sincos_loop(float *x, const std::vector<float> &freq) {
  const std::int64_t half = kHeadDim / 2;
  for (std::int64_t t = 0; t < kTokens; ++t)
    for (std::int64_t h = 0; h < kHeads; ++h) {
      float *row = x + (t * kHeads + h) * kHeadDim;
      for (std::int64_t i = 0; i < half; ++i) {
        const float angle = static_cast<float>(t) * freq[static_cast<std::size_t>(i)];
        const float c = std::cos(angle), s = std::sin(angle);
        const float a = row[i], b = row[i + half];
        row[i] = a * c - b * s;
        row[i + half] = a * s + b * c;
      }
    }
}

void bytes_counter(benchmark::State &state, double bytes) {
  state.counters["bytes"] = benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate,
                                               benchmark::Counter::kIs1000);
}

// Both implementations rotate the input copied into `work` (every
// iteration rotates the previous result further, which costs the same).
// The spot check: token 1 (angles below 1 rad, where fp32 angles are exact
// enough) once from the input, by each.
bool agree_on_token_one() {
  const std::vector<float> freq = inv_freq();
  std::vector<float> ours(rope_input().data(), rope_input().data() + 2 * kHeads * kHeadDim);
  std::vector<float> theirs = ours;
  const std::int32_t positions[2] = {0, 1};
  if (ak_rope(1, 2, kHeads, kHeadDim, 0, AK_ROPE_NEOX, positions, kTheta, nullptr, ours.data(),
              nullptr) != AK_OK)
    return false;
  const std::int64_t half = kHeadDim / 2;
  for (std::int64_t h = 0; h < 2 * kHeads; ++h) {
    float *row = theirs.data() + h * kHeadDim;
    const float p = h < kHeads ? 0.0f : 1.0f;
    for (std::int64_t i = 0; i < half; ++i) {
      const float c = std::cos(p * freq[i]), s = std::sin(p * freq[i]), a = row[i],
                  b = row[i + half];
      row[i] = a * c - b * s;
      row[i + half] = a * s + b * c;
    }
  }
  return max_rel_diff(ours.data(), theirs.data(), ours.size()) < 1e-5;
}

void BM_rope(benchmark::State &state, bool attnkern, int threads) {
  static Buffer work(kRopeFloats);
  std::copy(rope_input().data(), rope_input().data() + kRopeFloats, work.data());
  const std::vector<float> freq = inv_freq();
  set_threads(threads);
  settle(attnkern ? Impl::attnkern : Impl::scalar, threads);
  for (auto _ : state) {
    if (attnkern) {
      if (ak_rope(1, kTokens, kHeads, kHeadDim, 0, AK_ROPE_NEOX, nullptr, kTheta, nullptr,
                  work.data(), nullptr) != AK_OK) {
        state.SkipWithError(ak_last_error());
        return;
      }
    } else {
      sincos_loop(work.data(), freq);
    }
    benchmark::ClobberMemory();
  }
  if (!agree_on_token_one()) {
    state.SkipWithError("rope: ak_rope and the sincos loop disagree on token 1");
    return;
  }
  bytes_counter(state, 2.0 * double(kRopeFloats) * sizeof(float));
  state.SetLabel(attnkern ? "ak_rope, NeoX, [1, 4096, 32, 128] in place; bytes read + written"
                          : "plain loop, fp32 angle and std::sin/std::cos per element, one "
                            "thread; bytes read + written");
}

void BM_embedding(benchmark::State &state, int threads) {
  static Buffer table = [] {
    Buffer b(std::size_t{kVocab * kDim});
    fill_normal(b, seed_of("embedding"));
    return b;
  }();
  static Buffer out(std::size_t{kLookups * kDim});
  static const std::vector<std::int32_t> ids = [] {
    std::vector<std::int32_t> v(kLookups);
    std::mt19937 rng(static_cast<std::uint32_t>(seed_of("embedding_ids")));
    for (auto &id : v) id = static_cast<std::int32_t>(rng() % kVocab);
    return v;
  }();
  set_threads(threads);
  settle(Impl::attnkern, threads);
  for (auto _ : state) {
    if (ak_embedding(kLookups, ids.data(), kVocab, kDim, table.data(), kDim, out.data(), kDim) !=
        AK_OK) {
      state.SkipWithError(ak_last_error());
      return;
    }
    benchmark::ClobberMemory();
  }
  const float *want = table.data() + std::int64_t{ids[7]} * kDim;
  if (max_rel_diff(out.data() + 7 * kDim, want, kDim) != 0.0) {
    state.SkipWithError("embedding: row 7 is not its table row");
    return;
  }
  bytes_counter(state, 2.0 * double(kLookups * kDim) * sizeof(float));
  state.SetLabel("ak_embedding of 4096 ids into 4096 x 4096 from a 32000-row table; bytes read "
                 "+ written");
}

void configure(benchmark::internal::Benchmark *b) {
  b->Unit(benchmark::kMillisecond)->MinTime(0.25)->UseRealTime();
}

} // namespace

void register_rope_benchmarks() {
  for (int threads : bench_thread_counts()) {
    const std::string t = "/threads:" + std::to_string(threads);
    configure(benchmark::RegisterBenchmark(("rope/attnkern/neox_4096x32x128" + t).c_str(), BM_rope,
                                           true, threads));
    if (threads == 1) // the plain loop is serial
      configure(benchmark::RegisterBenchmark(("rope/sincos_loop/neox_4096x32x128" + t).c_str(),
                                             BM_rope, false, threads));
    configure(benchmark::RegisterBenchmark(("embedding/attnkern/4096x4096_of_32000" + t).c_str(),
                                           BM_embedding, threads));
  }
}

} // namespace akb
