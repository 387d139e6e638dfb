// ak_convert and ak_kv_cache_store on arrays far larger than the last-level
// cache, each beside a memcpy that moves the same bytes, in the same run:
// a conversion reads one array and writes another, so a copy of the same
// total traffic is the rate it can hope for. Benchmarks:
//   convert/{attnkern,memcpy}/<from>_to_<to>_64MiB/threads:<t>   (64 MiB of fp32)
//   convert/{attnkern,memcpy}/kv_store_bf16_p16_64MiB/threads:<t>
// The counter `bytes` is bytes read + bytes written per second, as the
// membw copy counts them (the store also counts its slot indices).
#include "bench_convert.hpp"

#include "bench_common.hpp"

#include <attnkern.h>
#include <benchmark/benchmark.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace akb {
namespace {

constexpr std::size_t kFloats = std::size_t{16} << 20; // 64 MiB of fp32

// The store: 16384 tokens of 8 KV heads x 128 into pages of 16 slots, the
// pages in shuffled order (as a serving engine's allocator hands them out).
constexpr std::int64_t kHeads = 8, kHeadDim = 128, kPageSize = 16;
constexpr std::int64_t kTokens = static_cast<std::int64_t>(kFloats) / (kHeads * kHeadDim);

// The same split as membw/copy: each thread memcpys one contiguous share.
__attribute__((noinline)) void split_memcpy(char *dst, const char *src, std::size_t bytes,
                                            int threads) {
  constexpr std::size_t kLine = 64;
  const std::size_t lines = bytes / kLine;
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    const std::size_t t = static_cast<std::size_t>(omp_get_thread_num());
    const std::size_t nt = static_cast<std::size_t>(omp_get_num_threads());
    const std::size_t lo = lines * t / nt * kLine;
    const std::size_t hi = t + 1 == nt ? bytes : lines * (t + 1) / nt * kLine;
    std::memcpy(dst + lo, src + lo, hi - lo);
  }
}

struct Conversion {
  const char *name;
  ak_dtype from, to;
};
constexpr Conversion kConversions[] = {{"f32_to_bf16", AK_F32, AK_BF16},
                                       {"bf16_to_f32", AK_BF16, AK_F32},
                                       {"f32_to_f16", AK_F32, AK_F16},
                                       {"f16_to_f32", AK_F16, AK_F32}};

int size_of(ak_dtype t) { return t == AK_F32 ? 4 : 2; }

// Normal fp32 values, and the same values in both 16-bit types (all three
// as Buffers: huge pages where granted, like the references).
struct Arrays {
  Buffer f32{kFloats}, f16{kFloats / 2}, bf16{kFloats / 2}, out{kFloats};
  Arrays() {
    fill_normal(f32, seed_of("convert"));
    ak_convert(AK_F16, f16.data(), AK_F32, f32.data(), static_cast<std::int64_t>(kFloats));
    ak_convert(AK_BF16, bf16.data(), AK_F32, f32.data(), static_cast<std::int64_t>(kFloats));
  }
  const void *of(ak_dtype t) const {
    return t == AK_F32 ? f32.data() : t == AK_F16 ? f16.data() : bf16.data();
  }
};
Arrays &arrays() {
  static Arrays a;
  return a;
}

// Whether 4096 results, widened, lie within the narrower type's half ulp
// of the fp32 inputs (a spot check that the timed calls did the work).
bool spot_check(const Conversion &c) {
  Arrays &a = arrays();
  const ak_dtype half = c.from == AK_F32 ? c.to : c.from;
  const double rel = half == AK_BF16 ? 1.0 / 256 : 1.0 / 2048;
  std::vector<float> back(4096);
  if (c.to == AK_F32)
    std::memcpy(back.data(), a.out.data(), back.size() * sizeof(float));
  else if (ak_convert(AK_F32, back.data(), c.to, a.out.data(), 4096) != AK_OK)
    return false;
  for (std::size_t i = 0; i < back.size(); ++i) {
    const double x = a.f32.data()[i];
    if (!(std::fabs(back[i] - x) <= rel * std::fabs(x) + 1e-7)) return false;
  }
  return true;
}

void bytes_counter(benchmark::State &state, double bytes) {
  state.counters["bytes"] = benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate,
                                               benchmark::Counter::kIs1000);
}

void BM_convert(benchmark::State &state, Conversion c, int threads) {
  Arrays &a = arrays();
  set_threads(threads);
  settle(Impl::attnkern, threads);
  const auto n = static_cast<std::int64_t>(kFloats);
  for (auto _ : state) {
    if (ak_convert(c.to, a.out.data(), c.from, a.of(c.from), n) != AK_OK) {
      state.SkipWithError(ak_last_error());
      return;
    }
    benchmark::ClobberMemory();
  }
  if (!spot_check(c)) {
    state.SkipWithError("convert: results off by more than half an ulp");
    return;
  }
  bytes_counter(state, double(kFloats) * (size_of(c.from) + size_of(c.to)));
  state.SetLabel(std::string("ak_convert of 16 Mi values; bytes read + written"));
}

// A memcpy of (read + written) / 2 bytes: the same traffic as `total`.
void BM_memcpy(benchmark::State &state, double total, int threads) {
  Arrays &a = arrays();
  const auto bytes = static_cast<std::size_t>(total / 2);
  set_threads(threads);
  settle(Impl::scalar, threads); // an OpenMP region
  for (auto _ : state) {
    split_memcpy(reinterpret_cast<char *>(a.out.data()),
                 reinterpret_cast<const char *>(a.f32.data()), bytes, threads);
    benchmark::ClobberMemory();
  }
  if (std::memcmp(a.out.data(), a.f32.data(), bytes) != 0) {
    state.SkipWithError("memcpy: the copy differs from its source");
    return;
  }
  bytes_counter(state, double(bytes) * 2);
  state.SetLabel("memcpy of the same bytes read + written, split over the threads");
}

std::vector<std::int64_t> shuffled_slots() {
  const std::int64_t pages = kTokens / kPageSize;
  std::vector<std::int64_t> order(static_cast<std::size_t>(pages));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(seed_of("kv_store")));
  std::vector<std::int64_t> slots(static_cast<std::size_t>(kTokens));
  for (std::int64_t t = 0; t < kTokens; ++t)
    slots[static_cast<std::size_t>(t)] =
        order[static_cast<std::size_t>(t / kPageSize)] * kPageSize + t % kPageSize;
  return slots;
}

double kv_store_bytes() {
  return double(kFloats) * (4 + 2) + double(kTokens) * sizeof(std::int64_t);
}

void BM_kv_store(benchmark::State &state, int threads) {
  Arrays &a = arrays();
  static const std::vector<std::int64_t> slots = shuffled_slots();
  set_threads(threads);
  settle(Impl::attnkern, threads);
  for (auto _ : state) {
    if (ak_kv_cache_store(kTokens, kHeads, kHeadDim, a.f32.data(), nullptr, slots.data(), AK_BF16,
                          a.out.data(), kTokens / kPageSize, kPageSize, nullptr) != AK_OK) {
      state.SkipWithError(ak_last_error());
      return;
    }
    benchmark::ClobberMemory();
  }
  // Token 0's first head landed in its page, as ak_convert rounds it.
  std::vector<std::uint16_t> want(kHeadDim);
  ak_convert(AK_BF16, want.data(), AK_F32, a.f32.data(), kHeadDim);
  const auto *pool = reinterpret_cast<const std::uint16_t *>(a.out.data());
  const std::int64_t page = slots[0] / kPageSize;
  const std::uint16_t *row = pool + (page * kHeads * kPageSize + slots[0] % kPageSize) * kHeadDim;
  if (std::memcmp(row, want.data(), want.size() * sizeof(std::uint16_t)) != 0) {
    state.SkipWithError("kv_store: token 0 is not where its slot says");
    return;
  }
  bytes_counter(state, kv_store_bytes());
  state.SetLabel("ak_kv_cache_store of 16384 tokens x 8 heads x 128 into bf16 pages of 16 "
                 "slots, pages shuffled; bytes read (fp32 rows, slots) + written");
}

void configure(benchmark::internal::Benchmark *b) {
  b->Unit(benchmark::kMillisecond)->MinTime(0.25)->UseRealTime();
}

} // namespace

void register_convert_benchmarks() {
  for (int threads : bench_thread_counts()) {
    const std::string t = "/threads:" + std::to_string(threads);
    for (const Conversion &c : kConversions) {
      const std::string shape = std::string(c.name) + "_64MiB";
      const double total = double(kFloats) * (size_of(c.from) + size_of(c.to));
      configure(benchmark::RegisterBenchmark(("convert/attnkern/" + shape + t).c_str(), BM_convert,
                                             c, threads));
      configure(benchmark::RegisterBenchmark(("convert/memcpy/" + shape + t).c_str(), BM_memcpy,
                                             total, threads));
    }
    const std::string shape = "kv_store_bf16_p16_64MiB";
    configure(benchmark::RegisterBenchmark(("convert/attnkern/" + shape + t).c_str(), BM_kv_store,
                                           threads));
    configure(benchmark::RegisterBenchmark(("convert/memcpy/" + shape + t).c_str(), BM_memcpy,
                                           kv_store_bytes(), threads));
  }
}

} // namespace akb
