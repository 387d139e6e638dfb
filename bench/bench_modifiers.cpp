// The score modifiers and packed variable-length batches of ak_attention,
// against attnkern's own plain path in the same process:
//   mods/attnkern_<plain|softcap|alibi|sinks>/h<H>_d<d>_L<L>_causal/threads:<t>
//     prefill, batch 1, q_len = kv_len = L: the cost of each modifier
//     (softcap 30, BLOOM's ALiBi slopes, a sink per head); at L 32768 only
//     plain and ALiBi, whose [h, L, L] bias would take 32 GiB at 8 heads
//     (max_rss_MiB: the process's peak resident memory after the run)
//   varlen/attnkern_<packed|separate|single>/h<H>_d<d>_<causal|nomask>/threads:<t>
//     8 sequences of 64 .. 2048 tokens packed in one call (cu_seqlens_q/k),
//     the same as 8 separate calls, and one 2048-token sequence alone;
//     `flops` counts the useful work (per sequence 4 L^2 d H, half causal)
// Each variant is checked first on sampled rows against a float64 reference.
#include "bench_modifiers.hpp"

#include "bench_common.hpp"
#include "paired_timing.hpp"

#include <attnkern.h>
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace akb {
namespace {

constexpr float kSoftcap = 30.0f;
const std::vector<std::int64_t> kVarlenLens = {64, 128, 256, 512, 768, 1024, 1536, 2048};

// q, k, v and out of `rows` tokens x heads, [head, token, d] (contiguous).
struct Tensors {
  Buffer q, k, v, o;
  std::vector<float> slopes, sinks;
};

Tensors &tensors(std::int64_t heads, std::int64_t rows, std::int64_t d) {
  static std::vector<std::pair<std::string, Tensors>> cache;
  const std::string key =
      std::to_string(heads) + "/" + std::to_string(rows) + "/" + std::to_string(d);
  for (auto &[k, t] : cache)
    if (k == key) return t;
  Tensors t;
  const auto n = static_cast<std::size_t>(heads * rows * d);
  t.q = Buffer(n), t.k = Buffer(n), t.v = Buffer(n), t.o = Buffer(n);
  fill_normal(t.q, seed_of("mods/Q/" + key));
  fill_normal(t.k, seed_of("mods/K/" + key));
  fill_normal(t.v, seed_of("mods/V/" + key));
  for (std::int64_t h = 0; h < heads; ++h) {
    t.slopes.push_back(std::exp2(-8.0f * static_cast<float>(h + 1) / static_cast<float>(heads)));
    t.sinks.push_back(0.5f * static_cast<float>(h % 4));
  }
  cache.emplace_back(key, std::move(t));
  return cache.back().second;
}

// A descriptor over [1, heads, L, d] tensors with the variant's modifier.
ak_attention_desc describe(const std::string &variant, std::int64_t heads, std::int64_t L,
                           std::int64_t d, bool causal, Tensors &t) {
  ak_attention_desc a;
  ak_attention_desc_init(&a);
  a.batch = 1, a.num_heads = a.num_kv_heads = heads, a.q_len = a.kv_len = L, a.head_dim = d;
  a.mask = causal ? AK_MASK_CAUSAL_TOP_LEFT : AK_MASK_NONE;
  if (variant == "softcap") a.softcap = kSoftcap;
  if (variant == "alibi") a.alibi_slopes = t.slopes.data();
  if (variant == "sinks") a.sinks = t.sinks.data();
  return a;
}

// Row i of head h of sequence [q0, q0 + len) (keys [k0, k0 + len)) in
// float64, against out: the largest absolute difference.
double row_diff(const ak_attention_desc &a, const Tensors &t, std::int64_t rows, std::int64_t h,
                std::int64_t q0, std::int64_t k0, std::int64_t len, std::int64_t i) {
  const std::int64_t d = a.head_dim;
  const float *q = t.q.data() + (h * rows + q0 + i) * d;
  const std::int64_t end = a.mask != AK_MASK_NONE ? i + 1 : len;
  std::vector<double> s(static_cast<std::size_t>(end));
  double m = a.sinks ? a.sinks[h] : -INFINITY;
  for (std::int64_t j = 0; j < end; ++j) {
    const float *k = t.k.data() + (h * rows + k0 + j) * d;
    double dot = 0;
    for (std::int64_t c = 0; c < d; ++c) dot += double(q[c]) * k[c];
    double x = dot / std::sqrt(double(d));
    if (a.softcap > 0) x = a.softcap * std::tanh(x / a.softcap);
    if (a.alibi_slopes) x += double(a.alibi_slopes[h]) * double(j - i);
    s[static_cast<std::size_t>(j)] = x;
    m = std::max(m, x);
  }
  double z = a.sinks ? std::exp(a.sinks[h] - m) : 0.0;
  for (double x : s) z += std::exp(x - m);
  double worst = 0;
  for (std::int64_t c = 0; c < d; ++c) {
    double acc = 0;
    for (std::int64_t j = 0; j < end; ++j)
      acc += std::exp(s[static_cast<std::size_t>(j)] - m) / z *
             t.v.data()[(h * rows + k0 + j) * d + c];
    worst = std::max(worst, std::fabs(acc - t.o.data()[(h * rows + q0 + i) * d + c]));
  }
  return worst;
}

double max_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

void BM_mods(benchmark::State &state, int threads, std::string variant, std::int64_t heads,
             std::int64_t L, std::int64_t d) {
  Tensors &t = tensors(heads, L, d);
  const ak_attention_desc a = describe(variant, heads, L, d, true, t);
  set_threads(threads);
  if (ak_attention(&a, t.q.data(), t.k.data(), t.v.data(), t.o.data()) != AK_OK) {
    state.SkipWithError(ak_last_error());
    return;
  }
  double diff = 0;
  for (std::int64_t h : {std::int64_t{0}, heads - 1})
    for (std::int64_t i : {std::int64_t{0}, L / 3, L - 1})
      diff = std::max(diff, row_diff(a, t, L, h, 0, 0, L, i));
  if (!(diff <= agree_tolerance())) {
    state.SkipWithError(("differs from the double reference by " + std::to_string(diff)).c_str());
    return;
  }
  settle(Impl::attnkern, threads);
  // The plain call on the same data alongside: vs_plain, the time ratio.
  const ak_attention_desc plain = describe("plain", heads, L, d, true, t);
  const double vs_plain = paired_ratio(
      state, [&] { ak_attention(&a, t.q.data(), t.k.data(), t.v.data(), t.o.data()); },
      [&] { ak_attention(&plain, t.q.data(), t.k.data(), t.v.data(), t.o.data()); });
  state.counters["vs_plain"] = vs_plain;
  state.counters["flops"] = benchmark::Counter(
      2.0 * double(L) * double(L) * double(d) * double(heads),
      benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
  state.counters["refdiff"] = diff;
  state.counters["max_rss_MiB"] = max_rss_mib();
}

// The packed batch: cu offsets of kVarlenLens, all tokens in [head, token, d].
void BM_varlen(benchmark::State &state, int threads, std::string how, std::int64_t heads,
               std::int64_t d, bool causal) {
  std::vector<std::int32_t> cu(1, 0);
  for (std::int64_t n : kVarlenLens) cu.push_back(static_cast<std::int32_t>(cu.back() + n));
  const std::int64_t total = cu.back(), longest = kVarlenLens.back();
  Tensors &t = tensors(heads, total, d);
  set_threads(threads);
  // One call per sequence in `seqs` (separate), or one packed call.
  ak_attention_desc packed = describe("plain", heads, longest, d, causal, t);
  packed.batch = static_cast<std::int64_t>(kVarlenLens.size());
  packed.cu_seqlens_q = packed.cu_seqlens_k = cu.data();
  const std::int64_t strides[3] = {0, total * d, d};
  for (auto *s : {packed.q_strides, packed.k_strides, packed.v_strides, packed.o_strides})
    std::memcpy(s, strides, sizeof strides);
  const auto one = [&](std::int64_t b) {
    ak_attention_desc a = packed;
    a.batch = 1, a.cu_seqlens_q = a.cu_seqlens_k = nullptr;
    a.q_len = a.kv_len = kVarlenLens[static_cast<std::size_t>(b)];
    const std::int64_t off = cu[static_cast<std::size_t>(b)] * d, s3[3] = {0, total * d, d};
    for (auto *s : {a.q_strides, a.k_strides, a.v_strides, a.o_strides})
      std::memcpy(s, s3, sizeof s3);
    return ak_attention(&a, t.q.data() + off, t.k.data() + off, t.v.data() + off, t.o.data() + off);
  };
  const std::int64_t first = how == "single" ? std::int64_t(kVarlenLens.size()) - 1 : 0;
  const auto call = [&] {
    if (how == "packed")
      return ak_attention(&packed, t.q.data(), t.k.data(), t.v.data(), t.o.data());
    ak_status st = AK_OK;
    for (std::int64_t b = first; b < std::int64_t(kVarlenLens.size()) && st == AK_OK; ++b)
      st = one(b);
    return st;
  };
  if (call() != AK_OK) {
    state.SkipWithError(ak_last_error());
    return;
  }
  double diff = 0;
  for (std::int64_t b = first; b < std::int64_t(kVarlenLens.size()); b += 3) {
    const std::int64_t n = kVarlenLens[static_cast<std::size_t>(b)];
    for (std::int64_t i : {std::int64_t{0}, n - 1})
      diff = std::max(diff, row_diff(packed, t, total, heads - 1, cu[static_cast<std::size_t>(b)],
                                     cu[static_cast<std::size_t>(b)], n, i));
  }
  if (!(diff <= agree_tolerance())) {
    state.SkipWithError(("differs from the double reference by " + std::to_string(diff)).c_str());
    return;
  }
  settle(Impl::attnkern, threads);
  // Each timed call paired with another (paired_ratio): packed with the
  // separate calls (vs_separate: their time over the packed call's), the
  // single sequence with the packed batch (packed_vs_single: the packed
  // call's useful rate over the single one's).
  const std::int64_t last = std::int64_t(kVarlenLens.size()) - 1;
  double total_flops = 0;
  for (std::int64_t n : kVarlenLens)
    total_flops += 4.0 * double(n) * double(n) * double(d) * double(heads) * (causal ? 0.5 : 1.0);
  const double longest_flops =
      4.0 * double(longest) * double(longest) * double(d) * double(heads) * (causal ? 0.5 : 1.0);
  if (how == "packed") {
    state.counters["vs_separate"] = 1.0 / paired_ratio(state, call, [&] {
                                      for (std::int64_t b = 0; b <= last; ++b) one(b);
                                    });
  } else if (how == "single") {
    const double t_ratio = paired_ratio(state, call, [&] {
      ak_attention(&packed, t.q.data(), t.k.data(), t.v.data(), t.o.data());
    }); // single time / packed time
    state.counters["packed_vs_single"] = (total_flops / longest_flops) * t_ratio;
  } else {
    for (auto _ : state) {
      call();
      benchmark::ClobberMemory();
    }
  }
  state.counters["flops"] = benchmark::Counter(how == "single" ? longest_flops : total_flops,
                                               benchmark::Counter::kIsIterationInvariantRate,
                                               benchmark::Counter::kIs1000);
  state.counters["refdiff"] = diff;
}

} // namespace

void register_modifier_benchmarks() {
  const auto reg = [](const std::string &name, auto fn, auto... args) {
    benchmark::RegisterBenchmark(name.c_str(), fn, args...)
        ->Unit(benchmark::kMillisecond)
        ->MinTime(1.0)
        ->UseRealTime();
  };
  for (int threads : bench_thread_counts()) {
    const std::string thr = "/threads:" + std::to_string(threads);
    for (const char *v : {"plain", "softcap", "alibi", "sinks"})
      reg(std::string("mods/attnkern_") + v + "/h8_d128_L2048_causal" + thr, BM_mods, threads,
          std::string(v), std::int64_t{8}, std::int64_t{2048}, std::int64_t{128});
    for (const char *v : {"plain", "alibi"})
      reg(std::string("mods/attnkern_") + v + "/h8_d128_L32768_causal" + thr, BM_mods, threads,
          std::string(v), std::int64_t{8}, std::int64_t{32768}, std::int64_t{128});
    for (bool causal : {false, true})
      for (const char *how : {"packed", "separate", "single"})
        reg(std::string("varlen/attnkern_") + how + "/h8_d128_" + (causal ? "causal" : "nomask") +
                thr,
            BM_varlen, threads, std::string(how), std::int64_t{8}, std::int64_t{128}, causal);
  }
}

} // namespace akb
