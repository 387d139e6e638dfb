// SGEMM: ak_sgemm vs OpenBLAS cblas_sgemm vs oneDNN dnnl_sgemm, row-major,
// alpha 1, beta 0. Benchmarks are named sgemm/<impl>/<shape>/threads:<t>.
#include "bench_sgemm.hpp"

#include "bench_common.hpp"
#include "peers.hpp"

#include <attnkern.h>
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace akb {
namespace {

struct GemmShape {
  std::string label; // nn_<n>, nt_<n>, qk_L<L>_d<d>, pv_L<L>_d<d>
  bool trans_b;      // B stored n x k (op(B) = B^T)
  std::int64_t m, n, k;

  std::int64_t lda() const { return k; }
  std::int64_t ldb() const { return trans_b ? k : n; }
  std::int64_t ldc() const { return n; }
  std::size_t a_size() const { return static_cast<std::size_t>(m * k); }
  std::size_t b_size() const { return static_cast<std::size_t>(k * n); }
  std::size_t c_size() const { return static_cast<std::size_t>(m * n); }
  double flops() const { return 2.0 * double(m) * double(n) * double(k); }
  // Compulsory traffic with beta = 0: read A and B once, write C once.
  double bytes() const { return 4.0 * double(a_size() + b_size() + c_size()); }
};

std::vector<GemmShape> gemm_shapes() {
  std::vector<GemmShape> shapes;
  for (std::int64_t s : {64, 128, 256, 512, 1024, 2048}) {
    shapes.push_back({"nn_" + std::to_string(s), false, s, s, s});
    shapes.push_back({"nt_" + std::to_string(s), true, s, s, s});
  }
  // Attention: Q K^T is L x L x d with K stored L x d (B transposed);
  // P V is L x d x L with V stored L x d (B as is).
  for (std::int64_t d : {64, 128}) {
    for (std::int64_t L : {256, 1024, 4096}) {
      const std::string tag = "_L" + std::to_string(L) + "_d" + std::to_string(d);
      shapes.push_back({"qk" + tag, true, L, L, d});
      shapes.push_back({"pv" + tag, false, L, d, L});
    }
  }
  return shapes;
}

bool call(Impl impl, const GemmShape &s, const float *a, const float *b, float *c) {
  switch (impl) {
  case Impl::attnkern:
    return ak_sgemm(AK_NO_TRANS, s.trans_b ? AK_TRANS : AK_NO_TRANS, s.m, s.n,
                    s.k, 1.0f, a, s.lda(), b, s.ldb(), 0.0f, c, s.ldc()) == AK_OK;
  case Impl::openblas:
    return peers::openblas_sgemm(s.trans_b, s.m, s.n, s.k, a, s.lda(), b,
                                 s.ldb(), c, s.ldc());
  case Impl::onednn:
    return peers::onednn_sgemm(s.trans_b, s.m, s.n, s.k, a, s.lda(), b, s.ldb(),
                               c, s.ldc());
  case Impl::scalar: break;
  }
  return false;
}

// Inputs and output of one shape, generated on first use and kept for the
// whole run (about 0.4 GB for all shapes), so that every benchmark of a shape
// reads the same data however the runs are ordered (random interleaving
// included).
struct Work {
  Buffer a, b, c;
};

Work &work_for(const GemmShape &s) {
  static std::map<std::string, Work> cache;
  auto it = cache.find(s.label);
  if (it != cache.end()) return it->second;
  Work w;
  w.a = Buffer(s.a_size());
  w.b = Buffer(s.b_size());
  w.c = Buffer(s.c_size());
  fill_normal(w.a, seed_of(s.label + "/A"));
  fill_normal(w.b, seed_of(s.label + "/B"));
  return cache.emplace(s.label, std::move(w)).first->second;
}

constexpr Impl kImpls[] = {Impl::attnkern, Impl::onednn, Impl::openblas};

struct Verdict {
  double err[3] = {0, 0, 0}; // per kImpls entry: difference to the closest peer
  std::string error[3];      // empty when that implementation agrees
};

// Runs all three on the benchmark's own inputs at `threads` and checks that
// each agrees with at least one other (so one broken kernel is named, and a
// fast but wrong result is never reported). Once per (shape, threads).
const Verdict &verdict_for(const GemmShape &s, int threads) {
  static std::map<std::pair<std::string, int>, Verdict> cache;
  const auto key = std::make_pair(s.label, threads);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;

  set_threads(threads);
  Work &w = work_for(s);
  Verdict v;
  std::vector<Buffer> out;
  bool ran[3];
  for (int i = 0; i < 3; ++i) {
    out.emplace_back(s.c_size());
    ran[i] = call(kImpls[i], s, w.a.data(), w.b.data(), out.back().data());
  }
  settle(Impl::openblas, threads); // OpenBLAS ran last: its workers may spin
  double diff[3][3] = {};
  for (int i = 0; i < 3; ++i)
    for (int j = i + 1; j < 3; ++j)
      diff[i][j] = diff[j][i] = max_rel_diff(out[i].data(), out[j].data(), s.c_size());
  for (int i = 0; i < 3; ++i) {
    const int p = (i + 1) % 3, q = (i + 2) % 3;
    v.err[i] = std::min(diff[i][p], diff[i][q]);
    char msg[256];
    if (!ran[i]) {
      std::snprintf(msg, sizeof msg, "%s sgemm %s returned an error",
                    impl_name(kImpls[i]), s.label.c_str());
      v.error[i] = msg;
    } else if (!(v.err[i] <= agree_tolerance())) {
      std::snprintf(msg, sizeof msg,
                    "%s sgemm %s threads:%d disagrees: max rel diff %.3g vs %s, "
                    "%.3g vs %s (tolerance %.1g)",
                    impl_name(kImpls[i]), s.label.c_str(), threads, diff[i][p],
                    impl_name(kImpls[p]), diff[i][q], impl_name(kImpls[q]),
                    agree_tolerance());
      v.error[i] = msg;
      std::fprintf(stderr, "ak_bench: %s\n", msg);
    }
  }
  return cache.emplace(key, std::move(v)).first->second;
}

void BM_sgemm(benchmark::State &state, int impl_index, const GemmShape &s,
              int threads) {
  const Impl impl = kImpls[impl_index];
  const Verdict &v = verdict_for(s, threads);
  if (!v.error[impl_index].empty()) {
    state.SkipWithError(v.error[impl_index].c_str());
    return;
  }
  Work &w = work_for(s);
  set_threads(threads);
  settle(impl, threads);
  const float *a = w.a.data();
  const float *b = w.b.data();
  float *c = w.c.data();

  for (auto _ : state) {
    if (!call(impl, s, a, b, c)) {
      state.SkipWithError("sgemm call failed inside the timed loop");
      break;
    }
    benchmark::ClobberMemory();
  }
  state.counters["flops"] = benchmark::Counter(
      s.flops(), benchmark::Counter::kIsIterationInvariantRate,
      benchmark::Counter::kIs1000);
  state.counters["bytes"] = benchmark::Counter(
      s.bytes(), benchmark::Counter::kIsIterationInvariantRate,
      benchmark::Counter::kIs1000);
  state.counters["relerr"] = v.err[impl_index];
  char label[96];
  std::snprintf(label, sizeof label, "m=%lld n=%lld k=%lld %s",
                static_cast<long long>(s.m), static_cast<long long>(s.n),
                static_cast<long long>(s.k), s.trans_b ? "NT" : "NN");
  state.SetLabel(label);
}

} // namespace

void register_sgemm_benchmarks() {
  for (const GemmShape &s : gemm_shapes()) {
    // Long enough for a stable median of a few iterations; the big shapes
    // take 0.1-1 s per call, so they run few iterations whatever this says.
    const double min_time = s.flops() >= 1e9 ? 0.5 : 0.25;
    for (int threads : {1, 2}) {
      for (int i = 0; i < 3; ++i) {
        const std::string name = std::string("sgemm/") + impl_name(kImpls[i]) +
                                 "/" + s.label + "/threads:" + std::to_string(threads);
        benchmark::RegisterBenchmark(name.c_str(), BM_sgemm, i, s, threads)
            ->Unit(benchmark::kMicrosecond)
            ->MinTime(min_time)
            ->UseRealTime();
      }
    }
  }
}

} // namespace akb
