// Row-wise softmax: ak_softmax vs oneDNN's softmax primitive (axis 1, plain
// layout) vs a plain std::exp loop. Benchmarks are named
// softmax/<impl>/<rows>x<cols>/threads:<t>.
#include "bench_softmax.hpp"

#include "bench_common.hpp"
#include "peers.hpp"

#include <attnkern.h>
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace akb {
namespace {

struct SoftmaxShape {
  std::int64_t rows, cols;
  std::string label() const {
    return std::to_string(rows) + "x" + std::to_string(cols);
  }
  std::size_t size() const { return static_cast<std::size_t>(rows * cols); }
};

constexpr SoftmaxShape kShapes[] = {{128, 128}, {1024, 1024}, {4096, 4096}, {16, 32768}};
constexpr Impl kImpls[] = {Impl::attnkern, Impl::onednn, Impl::scalar};

// Input, output and the oneDNN primitives (bound to those buffers) of one
// shape, built on first use and kept for the whole run (as for sgemm).
struct Work {
  Buffer x, y;
  // One per thread count: a oneDNN primitive keeps the thread count that was
  // in effect when it was created (it is part of oneDNN's primitive cache key).
  std::map<int, std::unique_ptr<peers::OnednnSoftmax>> onednn;
};

Work &work_for(const SoftmaxShape &s) {
  static std::map<std::string, Work> cache;
  auto it = cache.find(s.label());
  if (it != cache.end()) return it->second;
  Work &w = cache[s.label()];
  w.x = Buffer(s.size());
  w.y = Buffer(s.size());
  fill_normal(w.x, seed_of("softmax/" + s.label()));
  return w;
}

// Call after set_threads(threads).
peers::OnednnSoftmax &onednn_for(const SoftmaxShape &s, Work &w, int threads) {
  auto &p = w.onednn[threads];
  if (!p) p = std::make_unique<peers::OnednnSoftmax>(s.rows, s.cols, w.x.data(), w.y.data());
  return *p;
}

// Writes softmax(w.x) into y (w.y for the timed runs).
bool call(Impl impl, const SoftmaxShape &s, Work &w, float *y, int threads) {
  switch (impl) {
  case Impl::attnkern:
    return ak_softmax(s.rows, s.cols, w.x.data(), s.cols, y, s.cols) == AK_OK;
  case Impl::onednn: {
    peers::OnednnSoftmax &p = onednn_for(s, w, threads);
    if (y == w.y.data()) return p.run();
    if (!p.run()) return false;
    std::copy(w.y.data(), w.y.data() + s.size(), y);
    return true;
  }
  case Impl::scalar:
    peers::scalar_softmax(s.rows, s.cols, w.x.data(), y, threads);
    return true;
  case Impl::openblas: break;
  }
  return false;
}

struct Verdict {
  double err[3] = {0, 0, 0};
  std::string error[3];
};

// As for sgemm: each implementation must agree with at least one other.
const Verdict &verdict_for(const SoftmaxShape &s, int threads) {
  static std::map<std::pair<std::string, int>, Verdict> cache;
  const auto key = std::make_pair(s.label(), threads);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;

  set_threads(threads);
  Work &w = work_for(s);
  Verdict v;
  std::vector<Buffer> out;
  bool ran[3];
  for (int i = 0; i < 3; ++i) {
    out.emplace_back(s.size());
    ran[i] = call(kImpls[i], s, w, out.back().data(), threads);
  }
  double diff[3][3] = {};
  for (int i = 0; i < 3; ++i)
    for (int j = i + 1; j < 3; ++j)
      diff[i][j] = diff[j][i] = max_rel_diff(out[i].data(), out[j].data(), s.size());
  for (int i = 0; i < 3; ++i) {
    const int p = (i + 1) % 3, q = (i + 2) % 3;
    v.err[i] = std::min(diff[i][p], diff[i][q]);
    char msg[320];
    if (!ran[i]) {
      std::snprintf(msg, sizeof msg, "%s softmax %s failed%s%s",
                    impl_name(kImpls[i]), s.label().c_str(),
                    kImpls[i] == Impl::onednn ? ": " : "",
                    kImpls[i] == Impl::onednn ? onednn_for(s, w, threads).error().c_str()
                                              : "");
      v.error[i] = msg;
      std::fprintf(stderr, "ak_bench: %s\n", msg);
    } else if (!(v.err[i] <= agree_tolerance())) {
      std::snprintf(msg, sizeof msg,
                    "%s softmax %s threads:%d disagrees: max rel diff %.3g vs %s, "
                    "%.3g vs %s (tolerance %.1g)",
                    impl_name(kImpls[i]), s.label().c_str(), threads, diff[i][p],
                    impl_name(kImpls[p]), diff[i][q], impl_name(kImpls[q]),
                    agree_tolerance());
      v.error[i] = msg;
      std::fprintf(stderr, "ak_bench: %s\n", msg);
    }
  }
  return cache.emplace(key, std::move(v)).first->second;
}

void BM_softmax(benchmark::State &state, int impl_index, SoftmaxShape s, int threads) {
  const Impl impl = kImpls[impl_index];
  const Verdict &v = verdict_for(s, threads);
  if (!v.error[impl_index].empty()) {
    state.SkipWithError(v.error[impl_index].c_str());
    return;
  }
  Work &w = work_for(s);
  set_threads(threads);
  settle(impl, threads);
  float *y = w.y.data();

  for (auto _ : state) {
    if (!call(impl, s, w, y, threads)) {
      state.SkipWithError("softmax call failed inside the timed loop");
      break;
    }
    benchmark::ClobberMemory();
  }
  const double elems = static_cast<double>(s.size());
  // Read x once, write y once.
  state.counters["bytes"] = benchmark::Counter(
      2.0 * 4.0 * elems, benchmark::Counter::kIsIterationInvariantRate,
      benchmark::Counter::kIs1000);
  state.counters["elems"] = benchmark::Counter(
      elems, benchmark::Counter::kIsIterationInvariantRate,
      benchmark::Counter::kIs1000);
  state.counters["relerr"] = v.err[impl_index];
  if (impl == Impl::onednn) state.SetLabel(onednn_for(s, w, threads).impl_info());
  if (impl == Impl::scalar) state.SetLabel("std::exp loop, OpenMP over rows");
}

} // namespace

void register_softmax_benchmarks() {
  for (const SoftmaxShape &s : kShapes) {
    for (int threads : {1, 2}) {
      for (int i = 0; i < 3; ++i) {
        const std::string name = std::string("softmax/") + impl_name(kImpls[i]) +
                                 "/" + s.label() + "/threads:" + std::to_string(threads);
        benchmark::RegisterBenchmark(name.c_str(), BM_softmax, i, s, threads)
            ->Unit(benchmark::kMicrosecond)
            ->MinTime(0.25)
            ->UseRealTime();
      }
    }
  }
}

} // namespace akb
