// SGEMM: ak_sgemm vs OpenBLAS cblas_sgemm vs oneDNN dnnl_sgemm, row-major,
// alpha 1, beta 0. Benchmarks:
//   sgemm/<impl>/<shape>/threads:<t>              the three-way comparison
//   sgemm_isa/<isa>/<shape>/threads:1             attnkern forced to one ISA
//                                                 (ak_set_isa), and plain_loop:
//                                                 a plain i-p-j triple loop
//   sgemm_batched/<impl>/b<count>_<m>x<n>x<k>/threads:<t>
//                                                 ak_sgemm_strided_batched vs a
//                                                 loop of dnnl_sgemm calls
#include "bench_sgemm.hpp"

#include "bench_common.hpp"
#include "peers.hpp"

#include <attnkern.h>
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace akb {
namespace {

struct GemmShape {
  std::string label; // nn_<n>, nt_<n>, tn_<n>, tt_<n>, qk_L<L>_d<d>, pv_L<L>_d<d>,
                     // skinny_nn_m<m>, skinny_nt_m<m>
  bool trans_a;      // A stored k x m (op(A) = A^T)
  bool trans_b;      // B stored n x k (op(B) = B^T)
  std::int64_t m, n, k;
  std::string b_key{}; // shapes with the same b_key share one B (empty: the label)

  std::int64_t lda() const { return trans_a ? m : k; }
  std::int64_t ldb() const { return trans_b ? k : n; }
  std::int64_t ldc() const { return n; }
  std::size_t a_size() const { return static_cast<std::size_t>(m * k); }
  std::size_t b_size() const { return static_cast<std::size_t>(k * n); }
  std::size_t c_size() const { return static_cast<std::size_t>(m * n); }
  double flops() const { return 2.0 * double(m) * double(n) * double(k); }
  // Compulsory traffic with beta = 0: read A and B once, write C once.
  double bytes() const { return 4.0 * double(a_size() + b_size() + c_size()); }
  std::string op() const { return std::string(trans_a ? "T" : "N") + (trans_b ? "T" : "N"); }
  std::string label_text() const {
    char label[96];
    std::snprintf(label, sizeof label, "m=%lld n=%lld k=%lld %s", static_cast<long long>(m),
                  static_cast<long long>(n), static_cast<long long>(k), op().c_str());
    return label;
  }
};

GemmShape square(const char *prefix, bool ta, bool tb, std::int64_t s) {
  return {prefix + std::to_string(s), ta, tb, s, s, s};
}

std::vector<GemmShape> gemm_shapes() {
  std::vector<GemmShape> shapes;
  for (std::int64_t s : {64, 128, 256, 512, 1024, 2048}) {
    shapes.push_back(square("nn_", false, false, s));
    shapes.push_back(square("nt_", false, true, s));
    if (s == 1024) {
      // All four transpose combinations at 1024^3: A stored k x m as well.
      shapes.push_back(square("tn_", true, false, s));
      shapes.push_back(square("tt_", true, true, s));
    }
  }
  // Attention: Q K^T is L x L x d with K stored L x d (B transposed);
  // P V is L x d x L with V stored L x d (B as is).
  for (std::int64_t d : {64, 128}) {
    for (std::int64_t L : {256, 1024, 4096}) {
      const std::string tag = "_L" + std::to_string(L) + "_d" + std::to_string(d);
      shapes.push_back({"qk" + tag, false, true, L, L, d});
      shapes.push_back({"pv" + tag, false, false, L, d, L});
    }
  }
  // Decode projections: a few token rows times a 4096 x 4096 weight, B stored
  // k x n (skinny_nn) or n x k (skinny_nt, the usual weight layout). All of
  // them share one 64 MiB B (larger than a typical L3), so B comes from memory
  // on every call: the table reads them in GB/s. m = 16, 32 and 48: batched
  // decode steps (the skinny target covers 1-8; the skinny path takes B stored
  // n x k up to 32 rows, k x n up to 48 on AVX-512).
  for (std::int64_t m : {1, 2, 4, 8, 16, 32, 48}) {
    for (bool tb : {false, true}) {
      shapes.push_back({std::string(tb ? "skinny_nt_m" : "skinny_nn_m") + std::to_string(m), false,
                        tb, m, 4096, 4096, "skinny_B_4096x4096"});
    }
  }
  return shapes;
}

bool call(Impl impl, const GemmShape &s, const float *a, const float *b, float *c) {
  switch (impl) {
  case Impl::attnkern:
    return ak_sgemm(s.trans_a ? AK_TRANS : AK_NO_TRANS, s.trans_b ? AK_TRANS : AK_NO_TRANS, s.m,
                    s.n, s.k, 1.0f, a, s.lda(), b, s.ldb(), 0.0f, c, s.ldc()) == AK_OK;
  case Impl::openblas:
    return peers::openblas_sgemm(s.trans_a, s.trans_b, s.m, s.n, s.k, a, s.lda(), b, s.ldb(), c,
                                 s.ldc());
  case Impl::onednn:
    return peers::onednn_sgemm(s.trans_a, s.trans_b, s.m, s.n, s.k, a, s.lda(), b, s.ldb(), c,
                               s.ldc());
  case Impl::scalar:
    break;
  }
  return false;
}

// Inputs, generated on first use and kept for the whole run (about 0.5 GB
// for all shapes), so that every benchmark of a shape reads the same data
// however the runs are ordered (random interleaving included).
Buffer &input(const std::string &key, std::size_t n) {
  static std::map<std::string, Buffer> cache;
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  Buffer buf(n);
  fill_normal(buf, seed_of(key));
  return cache.emplace(key, std::move(buf)).first->second;
}

// The output of a shape (one per label).
Buffer &output(const std::string &label, std::size_t n) {
  static std::map<std::string, Buffer> cache;
  auto it = cache.find(label);
  if (it != cache.end()) return it->second;
  return cache.emplace(label, Buffer(n)).first->second;
}

struct Work {
  const float *a, *b;
  float *c;
};

Work work_for(const GemmShape &s) {
  const std::string b_key = s.b_key.empty() ? s.label : s.b_key;
  return {input(s.label + "/A", s.a_size()).data(), input(b_key + "/B", s.b_size()).data(),
          output(s.label, s.c_size()).data()};
}

constexpr Impl kImpls[] = {Impl::attnkern, Impl::onednn, Impl::openblas};

struct Verdict {
  double err[3] = {0, 0, 0}; // per kImpls entry: difference to the closest peer
  std::string error[3];      // empty when that implementation agrees
};

// Given the outputs of three implementations (ran[i]: the call succeeded),
// checks that each agrees with at least one other, so that one broken kernel
// is named and a fast but wrong result is never reported.
Verdict judge(const char *what, const std::string &label, int threads, const char *const names[3],
              const Buffer out[3], const bool ran[3], std::size_t n) {
  Verdict v;
  double diff[3][3] = {};
  for (int i = 0; i < 3; ++i)
    for (int j = i + 1; j < 3; ++j)
      diff[i][j] = diff[j][i] = max_rel_diff(out[i].data(), out[j].data(), n);
  for (int i = 0; i < 3; ++i) {
    const int p = (i + 1) % 3, q = (i + 2) % 3;
    v.err[i] = std::min(diff[i][p], diff[i][q]);
    char msg[256];
    if (!ran[i]) {
      std::snprintf(msg, sizeof msg, "%s %s %s returned an error", names[i], what, label.c_str());
      v.error[i] = msg;
    } else if (!(v.err[i] <= agree_tolerance())) {
      std::snprintf(msg, sizeof msg,
                    "%s %s %s threads:%d disagrees: max rel diff %.3g vs %s, "
                    "%.3g vs %s (tolerance %.1g)",
                    names[i], what, label.c_str(), threads, diff[i][p], names[p], diff[i][q],
                    names[q], agree_tolerance());
      v.error[i] = msg;
      std::fprintf(stderr, "ak_bench: %s\n", msg);
    }
  }
  return v;
}

// Runs all three on the benchmark's own inputs at `threads`. Once per
// (shape, threads).
const Verdict &verdict_for(const GemmShape &s, int threads) {
  static std::map<std::pair<std::string, int>, Verdict> cache;
  const auto key = std::make_pair(s.label, threads);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;

  set_threads(threads);
  const Work w = work_for(s);
  Buffer out[3];
  bool ran[3];
  const char *names[3];
  for (int i = 0; i < 3; ++i) {
    out[i] = Buffer(s.c_size());
    ran[i] = call(kImpls[i], s, w.a, w.b, out[i].data());
    names[i] = impl_name(kImpls[i]);
  }
  settle(Impl::openblas, threads); // OpenBLAS ran last: its workers may spin
  return cache.emplace(key, judge("sgemm", s.label, threads, names, out, ran, s.c_size()))
      .first->second;
}

void set_counters(benchmark::State &state, double flops, double bytes) {
  state.counters["flops"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate,
                                               benchmark::Counter::kIs1000);
  state.counters["bytes"] = benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate,
                                               benchmark::Counter::kIs1000);
}

void BM_sgemm(benchmark::State &state, int impl_index, const GemmShape &s, int threads) {
  const Impl impl = kImpls[impl_index];
  const Verdict &v = verdict_for(s, threads);
  if (!v.error[impl_index].empty()) {
    state.SkipWithError(v.error[impl_index].c_str());
    return;
  }
  const Work w = work_for(s);
  set_threads(threads);
  const bool skinny = s.label.rfind("skinny", 0) == 0; // memory-bound: see read_gbps_now
  const double read_before = skinny ? read_gbps_now(threads) : 0.0;
  settle(impl, threads);

  for (auto _ : state) {
    if (!call(impl, s, w.a, w.b, w.c)) {
      state.SkipWithError("sgemm call failed inside the timed loop");
      break;
    }
    benchmark::ClobberMemory();
  }
  if (skinny) state.counters["read_adj"] = (read_before + read_gbps_now(threads)) / 2;
  set_counters(state, s.flops(), s.bytes());
  state.counters["relerr"] = v.err[impl_index];
  state.SetLabel(s.label_text());
}

// ------------------------------------------------------------ sgemm_isa

// The reference for "what does SIMD code buy": C = A B as a plain triple loop
// in i-p-j order (the inner loop runs along rows of B and C), compiled with
// the benchmark's own flags (the baseline ISA, no intrinsics; the compiler may
// vectorize it). NN only.
__attribute__((noinline)) void plain_loop_sgemm(std::int64_t m, std::int64_t n, std::int64_t k,
                                                const float *a, const float *b, float *c) {
  for (std::int64_t i = 0; i < m; ++i) {
    float *ci = c + i * n;
    for (std::int64_t j = 0; j < n; ++j) ci[j] = 0.0f;
    for (std::int64_t p = 0; p < k; ++p) {
      const float aip = a[i * k + p];
      const float *bp = b + p * n;
      for (std::int64_t j = 0; j < n; ++j) ci[j] += aip * bp[j];
    }
  }
}

constexpr const char *kPlainLoop = "plain_loop";

// Forces attnkern to an instruction set for as long as it lives; restores
// the one in use before (normally the one "auto" picks).
class ForcedIsa {
public:
  explicit ForcedIsa(const std::string &isa) : prev_(ak_get_isa()) {
    ok_ = ak_set_isa(isa.c_str()) == AK_OK;
  }
  ~ForcedIsa() { ak_set_isa(prev_.c_str()); }
  ForcedIsa(const ForcedIsa &) = delete;
  ForcedIsa &operator=(const ForcedIsa &) = delete;
  bool ok() const { return ok_; }

private:
  std::string prev_;
  bool ok_ = false;
};

bool call_isa(const std::string &isa, const GemmShape &s, const float *a, const float *b,
              float *c) {
  if (isa == kPlainLoop) {
    plain_loop_sgemm(s.m, s.n, s.k, a, b, c);
    return true;
  }
  return call(Impl::attnkern, s, a, b, c);
}

void BM_sgemm_isa(benchmark::State &state, const std::string &isa, const GemmShape &s) {
  constexpr int threads = 1;
  set_threads(threads);
  std::optional<ForcedIsa> forced;
  if (isa != kPlainLoop) {
    forced.emplace(isa);
    if (!forced->ok()) {
      state.SkipWithError(("ak_set_isa(\"" + isa + "\") failed: " + ak_last_error()).c_str());
      return;
    }
  }
  const Work w = work_for(s);
  // Agreement, once per (isa, shape): against oneDNN on the same inputs.
  static std::map<std::string, double> checked;
  const std::string key = isa + "/" + s.label;
  if (checked.find(key) == checked.end()) {
    Buffer mine(s.c_size()), ref(s.c_size());
    const bool ran = call_isa(isa, s, w.a, w.b, mine.data());
    const bool ran_ref = call(Impl::onednn, s, w.a, w.b, ref.data());
    checked[key] = ran && ran_ref ? max_rel_diff(mine.data(), ref.data(), s.c_size())
                                  : std::numeric_limits<double>::infinity();
  }
  const double err = checked[key];
  if (!(err <= agree_tolerance())) {
    char msg[200];
    std::snprintf(msg, sizeof msg,
                  "sgemm_isa %s %s: max rel diff %.3g to oneDNN (tolerance %.1g) or a failed call",
                  isa.c_str(), s.label.c_str(), err, agree_tolerance());
    std::fprintf(stderr, "ak_bench: %s\n", msg);
    state.SkipWithError(msg);
    return;
  }
  settle(Impl::attnkern, threads);
  for (auto _ : state) {
    if (!call_isa(isa, s, w.a, w.b, w.c)) {
      state.SkipWithError("sgemm call failed inside the timed loop");
      break;
    }
    benchmark::ClobberMemory();
  }
  set_counters(state, s.flops(), s.bytes());
  state.counters["relerr"] = err;
  state.SetLabel(s.label_text() + (isa == kPlainLoop ? " plain i-p-j loop, baseline ISA"
                                                     : " ak_set_isa(" + isa + ")"));
}

// -------------------------------------------------------- sgemm_batched

struct BatchShape {
  std::int64_t batch, m, n, k; // NN, each matrix dense, matrices back to back
  std::string label() const {
    return "b" + std::to_string(batch) + "_" + std::to_string(m) + "x" + std::to_string(n) + "x" +
           std::to_string(k);
  }
  std::size_t a_size() const { return static_cast<std::size_t>(batch * m * k); }
  std::size_t b_size() const { return static_cast<std::size_t>(batch * k * n); }
  std::size_t c_size() const { return static_cast<std::size_t>(batch * m * n); }
  double flops() const { return 2.0 * double(batch) * double(m) * double(n) * double(k); }
  double bytes() const { return 4.0 * double(a_size() + b_size() + c_size()); }
};

const BatchShape kBatchShapes[] = {{64, 128, 128, 64}, {8, 512, 512, 512}};

// attnkern: one ak_sgemm_strided_batched call; onednn and openblas: a loop of
// single calls (openblas only in the agreement check).
bool call_batched(Impl impl, const BatchShape &s, const float *a, const float *b, float *c) {
  if (impl == Impl::attnkern)
    return ak_sgemm_strided_batched(AK_NO_TRANS, AK_NO_TRANS, s.m, s.n, s.k, 1.0f, a, s.k,
                                    s.m * s.k, b, s.n, s.k * s.n, 0.0f, c, s.n, s.m * s.n,
                                    s.batch) == AK_OK;
  for (std::int64_t i = 0; i < s.batch; ++i) {
    const float *ai = a + i * s.m * s.k;
    const float *bi = b + i * s.k * s.n;
    float *ci = c + i * s.m * s.n;
    const bool ok =
        impl == Impl::onednn
            ? peers::onednn_sgemm(false, false, s.m, s.n, s.k, ai, s.k, bi, s.n, ci, s.n)
            : peers::openblas_sgemm(false, false, s.m, s.n, s.k, ai, s.k, bi, s.n, ci, s.n);
    if (!ok) return false;
  }
  return true;
}

constexpr Impl kBatchedImpls[] = {Impl::attnkern, Impl::onednn}; // timed

void BM_sgemm_batched(benchmark::State &state, int impl_index, const BatchShape &s, int threads) {
  const Impl impl = kBatchedImpls[impl_index];
  const std::string label = s.label();
  const float *a = input("batched/" + label + "/A", s.a_size()).data();
  const float *b = input("batched/" + label + "/B", s.b_size()).data();
  float *c = output("batched/" + label, s.c_size()).data();

  static std::map<std::pair<std::string, int>, Verdict> verdicts;
  const auto key = std::make_pair(label, threads);
  if (verdicts.find(key) == verdicts.end()) {
    set_threads(threads);
    const Impl all[3] = {Impl::attnkern, Impl::onednn, Impl::openblas};
    Buffer out[3];
    bool ran[3];
    const char *names[3];
    for (int i = 0; i < 3; ++i) {
      out[i] = Buffer(s.c_size());
      ran[i] = call_batched(all[i], s, a, b, out[i].data());
      names[i] = impl_name(all[i]);
    }
    settle(Impl::openblas, threads);
    verdicts.emplace(key, judge("sgemm_batched", label, threads, names, out, ran, s.c_size()));
  }
  const Verdict &v = verdicts.at(key); // kBatchedImpls[i] is all[i]
  if (!v.error[impl_index].empty()) {
    state.SkipWithError(v.error[impl_index].c_str());
    return;
  }
  set_threads(threads);
  settle(impl, threads);
  for (auto _ : state) {
    if (!call_batched(impl, s, a, b, c)) {
      state.SkipWithError("sgemm call failed inside the timed loop");
      break;
    }
    benchmark::ClobberMemory();
  }
  set_counters(state, s.flops(), s.bytes());
  state.counters["relerr"] = v.err[impl_index];
  char text[128];
  std::snprintf(text, sizeof text, "batch=%lld m=%lld n=%lld k=%lld NN %s",
                static_cast<long long>(s.batch), static_cast<long long>(s.m),
                static_cast<long long>(s.n), static_cast<long long>(s.k),
                impl == Impl::attnkern ? "ak_sgemm_strided_batched" : "loop of dnnl_sgemm");
  state.SetLabel(text);
}

// Long enough for a stable median of a few iterations; the big shapes take
// 0.1-1 s per call, so they run few iterations whatever this says.
double min_time_for(double flops) { return flops >= 1e9 ? 0.5 : 0.25; }

} // namespace

void register_sgemm_benchmarks() {
  const std::vector<GemmShape> shapes = gemm_shapes();
  for (const GemmShape &s : shapes) {
    for (int threads : bench_thread_counts()) {
      for (int i = 0; i < 3; ++i) {
        const std::string name = std::string("sgemm/") + impl_name(kImpls[i]) + "/" + s.label +
                                 "/threads:" + std::to_string(threads);
        benchmark::RegisterBenchmark(name.c_str(), BM_sgemm, i, s, threads)
            ->Unit(benchmark::kMicrosecond)
            ->MinTime(min_time_for(s.flops()))
            ->UseRealTime();
      }
    }
  }

  // attnkern forced to a narrower instruction set (one thread), and the plain
  // loop next to SSE2 at 512^3.
  auto shape = [&](const char *label) {
    return *std::find_if(shapes.begin(), shapes.end(),
                         [&](const GemmShape &s) { return s.label == label; });
  };
  const std::pair<const char *, const char *> isa_runs[] = {
      {"avx2", "nn_1024"}, {"sse2", "nn_1024"}, {"sse2", "nn_512"}, {kPlainLoop, "nn_512"}};
  for (const auto &[isa, label] : isa_runs) {
    if (std::string(isa) != kPlainLoop && !ak_isa_supported(isa)) continue;
    const GemmShape s = shape(label);
    const std::string name = std::string("sgemm_isa/") + isa + "/" + s.label + "/threads:1";
    benchmark::RegisterBenchmark(name.c_str(), BM_sgemm_isa, std::string(isa), s)
        ->Unit(benchmark::kMicrosecond)
        ->MinTime(min_time_for(s.flops()))
        ->UseRealTime();
  }

  for (const BatchShape &s : kBatchShapes) {
    for (int threads : bench_thread_counts()) {
      for (int i = 0; i < 2; ++i) {
        const std::string name = std::string("sgemm_batched/") + impl_name(kBatchedImpls[i]) + "/" +
                                 s.label() + "/threads:" + std::to_string(threads);
        benchmark::RegisterBenchmark(name.c_str(), BM_sgemm_batched, i, s, threads)
            ->Unit(benchmark::kMicrosecond)
            ->MinTime(min_time_for(s.flops()))
            ->UseRealTime();
      }
    }
  }
}

} // namespace akb
