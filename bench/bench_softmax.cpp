// Row-wise softmax: ak_softmax vs oneDNN's softmax primitive (axis 1, plain
// layout) vs a plain std::exp loop, plus attnkern's log-softmax and
// middle-axis softmax on the same shapes. Benchmarks are named
//   softmax/<attnkern|onednn|scalar>/<rows>x<cols>/threads:<t>
//   softmax/<attnkern|onednn|scalar>/4096x4096_cold/threads:<t>
//   softmax/attnkern_log/<rows>x<cols>/threads:<t>     ak_log_softmax
//   softmax/attnkern_axis/<rows>x<cols>/threads:<t>    ak_softmax_axis(1, rows, cols)
// The _cold shape rotates over kColdPairs input/output pairs (512 MiB in all,
// 16x the 32 MiB L3), so no call finds its data in cache.
#include "bench_softmax.hpp"

#include "bench_common.hpp"
#include "peers.hpp"

#include <attnkern.h>
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace akb {
namespace {

struct SoftmaxShape {
  std::int64_t rows, cols;
  std::string label() const { return std::to_string(rows) + "x" + std::to_string(cols); }
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
  case Impl::openblas:
    break;
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
      std::snprintf(msg, sizeof msg, "%s softmax %s failed%s%s", impl_name(kImpls[i]),
                    s.label().c_str(), kImpls[i] == Impl::onednn ? ": " : "",
                    kImpls[i] == Impl::onednn ? onednn_for(s, w, threads).error().c_str() : "");
      v.error[i] = msg;
      std::fprintf(stderr, "ak_bench: %s\n", msg);
    } else if (!(v.err[i] <= agree_tolerance())) {
      std::snprintf(msg, sizeof msg,
                    "%s softmax %s threads:%d disagrees: max rel diff %.3g vs %s, "
                    "%.3g vs %s (tolerance %.1g)",
                    impl_name(kImpls[i]), s.label().c_str(), threads, diff[i][p],
                    impl_name(kImpls[p]), diff[i][q], impl_name(kImpls[q]), agree_tolerance());
      v.error[i] = msg;
      std::fprintf(stderr, "ak_bench: %s\n", msg);
    }
  }
  return cache.emplace(key, std::move(v)).first->second;
}

void set_counters(benchmark::State &state, const SoftmaxShape &s, double relerr) {
  const double elems = static_cast<double>(s.size());
  // Read x once, write y once.
  state.counters["bytes"] =
      benchmark::Counter(2.0 * 4.0 * elems, benchmark::Counter::kIsIterationInvariantRate,
                         benchmark::Counter::kIs1000);
  state.counters["elems"] = benchmark::Counter(elems, benchmark::Counter::kIsIterationInvariantRate,
                                               benchmark::Counter::kIs1000);
  state.counters["relerr"] = relerr;
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
  set_counters(state, s, v.err[impl_index]);
  if (impl == Impl::onednn) state.SetLabel(onednn_for(s, w, threads).impl_info());
  if (impl == Impl::scalar) state.SetLabel("std::exp loop, OpenMP over rows");
}

// ------------------------------------------------- out of cache (rotated)

// 4096x4096 with its inputs copied into kColdPairs (x, y) pairs of 64 MiB
// each: a call reads 64 MiB and writes 64 MiB, and the pair it uses was last
// touched 3 calls (384 MiB of traffic) earlier, so none of it is left in the
// 32 MiB L3. Every x is a bitwise copy of the in-cache 4096x4096 input.
constexpr SoftmaxShape kColdShape = {4096, 4096};
constexpr int kColdPairs = 4;

struct ColdWork {
  Buffer x[kColdPairs], y[kColdPairs];
  // threads -> one primitive per pair (a primitive is bound to its buffers).
  std::map<int, std::vector<std::unique_ptr<peers::OnednnSoftmax>>> onednn;
  int next = 0; // the pair the next call uses: the least recently touched one
};

ColdWork &cold_work() {
  static ColdWork c = [] {
    ColdWork cw;
    const Work &w = work_for(kColdShape);
    for (int k = 0; k < kColdPairs; ++k) {
      cw.x[k] = Buffer(kColdShape.size());
      cw.y[k] = Buffer(kColdShape.size());
      std::copy(w.x.data(), w.x.data() + w.x.size(), cw.x[k].data());
    }
    return cw;
  }();
  return c;
}

// Call after set_threads(threads).
peers::OnednnSoftmax &cold_onednn(ColdWork &c, int k, int threads) {
  auto &v = c.onednn[threads];
  if (v.empty()) {
    for (int i = 0; i < kColdPairs; ++i)
      v.push_back(std::make_unique<peers::OnednnSoftmax>(kColdShape.rows, kColdShape.cols,
                                                         c.x[i].data(), c.y[i].data()));
  }
  return *v[static_cast<std::size_t>(k)];
}

bool call_cold(Impl impl, ColdWork &c, int k, int threads) {
  const SoftmaxShape &s = kColdShape;
  const float *x = c.x[k].data();
  float *y = c.y[k].data();
  switch (impl) {
  case Impl::attnkern:
    return ak_softmax(s.rows, s.cols, x, s.cols, y, s.cols) == AK_OK;
  case Impl::onednn:
    return cold_onednn(c, k, threads).run();
  case Impl::scalar:
    peers::scalar_softmax(s.rows, s.cols, x, y, threads);
    return true;
  case Impl::openblas:
    break;
  }
  return false;
}

// The in-cache 4096x4096 verdict covers the arithmetic (same inputs, same
// call); on top of it, once per (implementation, threads), the output of every
// pair must match the implementation's own output on the in-cache buffers
// (which that verdict checked against the peers) to the agreement tolerance.
const std::string &cold_error(int impl_index, int threads) {
  static std::map<std::pair<int, int>, std::string> cache;
  const auto key = std::make_pair(impl_index, threads);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  std::string err = verdict_for(kColdShape, threads).error[impl_index];
  if (err.empty()) {
    const Impl impl = kImpls[impl_index];
    set_threads(threads);
    Work &w = work_for(kColdShape);
    ColdWork &c = cold_work();
    Buffer ref(kColdShape.size());
    bool ok = call(impl, kColdShape, w, ref.data(), threads);
    for (int k = 0; ok && k < kColdPairs; ++k) {
      char msg[320];
      if (!call_cold(impl, c, k, threads)) {
        std::snprintf(msg, sizeof msg, "%s softmax %s_cold pair %d failed%s%s", impl_name(impl),
                      kColdShape.label().c_str(), k, impl == Impl::onednn ? ": " : "",
                      impl == Impl::onednn ? cold_onednn(c, k, threads).error().c_str() : "");
        err = msg;
        ok = false;
      } else {
        const double d = max_rel_diff(ref.data(), c.y[k].data(), kColdShape.size());
        if (!(d <= agree_tolerance())) {
          std::snprintf(msg, sizeof msg,
                        "%s softmax %s_cold threads:%d pair %d differs from the in-cache "
                        "output by %.3g (tolerance %.1g)",
                        impl_name(impl), kColdShape.label().c_str(), threads, k, d,
                        agree_tolerance());
          err = msg;
          ok = false;
        }
      }
    }
    if (!err.empty()) std::fprintf(stderr, "ak_bench: %s\n", err.c_str());
    c.next = 0; // pairs touched in order 0..kColdPairs-1: pair 0 is the coldest
  }
  return cache.emplace(key, std::move(err)).first->second;
}

void BM_softmax_cold(benchmark::State &state, int impl_index, int threads) {
  const Impl impl = kImpls[impl_index];
  const std::string &err = cold_error(impl_index, threads);
  if (!err.empty()) {
    state.SkipWithError(err.c_str());
    return;
  }
  ColdWork &c = cold_work();
  set_threads(threads);
  settle(impl, threads);
  for (auto _ : state) {
    const int k = c.next;
    c.next = (k + 1) % kColdPairs;
    if (!call_cold(impl, c, k, threads)) {
      state.SkipWithError("softmax call failed inside the timed loop");
      break;
    }
    benchmark::ClobberMemory();
  }
  set_counters(state, kColdShape, verdict_for(kColdShape, threads).err[impl_index]);
  std::string label = std::to_string(kColdPairs) + " rotated x/y pairs of 64 MiB";
  if (impl == Impl::onednn) label = cold_onednn(c, 0, threads).impl_info() + ", " + label;
  if (impl == Impl::scalar) label = "std::exp loop, OpenMP over rows, " + label;
  state.SetLabel(label);
}

// ------------------------------------------ log-softmax and softmax_axis

// attnkern's other two softmax entry points on the same inputs and output
// buffer as softmax/attnkern: ak_log_softmax over the rows, and
// ak_softmax_axis(outer 1, axis_len rows, inner cols), the softmax over axis 0
// (down each column) of the same rows x cols matrix.
enum Variant { kLog = 0, kAxis = 1 };
constexpr const char *kVariantNames[] = {"attnkern_log", "attnkern_axis"};
constexpr const char *kVariantFns[] = {"ak_log_softmax", "ak_softmax_axis"};

bool call_variant(int variant, const SoftmaxShape &s, const float *x, float *y) {
  if (variant == kLog) return ak_log_softmax(s.rows, s.cols, x, s.cols, y, s.cols) == AK_OK;
  return ak_softmax_axis(1, s.rows, s.cols, x, y) == AK_OK;
}

// The exact result, computed in double and rounded once: log-softmax over
// each row, or softmax over each column (the transposed problem).
Buffer variant_reference(int variant, const SoftmaxShape &s, const float *x) {
  Buffer ref(s.size());
  float *r = ref.data();
  const std::int64_t R = s.rows, C = s.cols;
  if (variant == kLog) {
    for (std::int64_t i = 0; i < R; ++i) {
      const float *xi = x + i * C;
      double m = -std::numeric_limits<double>::infinity(), sum = 0.0;
      for (std::int64_t j = 0; j < C; ++j) m = std::max(m, double(xi[j]));
      for (std::int64_t j = 0; j < C; ++j) sum += std::exp(double(xi[j]) - m);
      const double off = m + std::log(sum);
      for (std::int64_t j = 0; j < C; ++j) r[i * C + j] = static_cast<float>(double(xi[j]) - off);
    }
    return ref;
  }
  std::vector<double> m(static_cast<std::size_t>(C), -std::numeric_limits<double>::infinity());
  std::vector<double> sum(static_cast<std::size_t>(C), 0.0);
  for (std::int64_t i = 0; i < R; ++i)
    for (std::int64_t j = 0; j < C; ++j) m[j] = std::max(m[j], double(x[i * C + j]));
  for (std::int64_t i = 0; i < R; ++i)
    for (std::int64_t j = 0; j < C; ++j) sum[j] += std::exp(double(x[i * C + j]) - m[j]);
  for (std::int64_t i = 0; i < R; ++i)
    for (std::int64_t j = 0; j < C; ++j)
      r[i * C + j] = static_cast<float>(std::exp(double(x[i * C + j]) - m[j]) / sum[j]);
  return ref;
}

struct VariantVerdict {
  double err = 0.0; // max rel diff to the double reference
  std::string error;
};

// Once per (variant, shape), outside the timed loops, at every thread count:
// the output must match the double reference to the agreement tolerance.
const VariantVerdict &variant_verdict(int variant, const SoftmaxShape &s, int threads) {
  static std::map<std::tuple<int, std::string, int>, VariantVerdict> cache;
  auto it = cache.find(std::make_tuple(variant, s.label(), threads));
  if (it != cache.end()) return it->second;
  Work &w = work_for(s);
  const Buffer ref = variant_reference(variant, s, w.x.data());
  Buffer out(s.size());
  for (int t : bench_thread_counts()) {
    set_threads(t);
    VariantVerdict v;
    char msg[400];
    if (!call_variant(variant, s, w.x.data(), out.data())) {
      std::snprintf(msg, sizeof msg, "%s %s failed: %s", kVariantFns[variant], s.label().c_str(),
                    ak_last_error());
      v.error = msg;
    } else {
      v.err = max_rel_diff(out.data(), ref.data(), s.size());
      if (!(v.err <= agree_tolerance())) {
        std::snprintf(msg, sizeof msg,
                      "%s %s threads:%d disagrees with the double reference: max rel diff %.3g "
                      "(tolerance %.1g)",
                      kVariantFns[variant], s.label().c_str(), t, v.err, agree_tolerance());
        v.error = msg;
      }
    }
    if (!v.error.empty()) std::fprintf(stderr, "ak_bench: %s\n", v.error.c_str());
    cache[std::make_tuple(variant, s.label(), t)] = std::move(v);
  }
  return cache[std::make_tuple(variant, s.label(), threads)];
}

void BM_softmax_variant(benchmark::State &state, int variant, SoftmaxShape s, int threads) {
  const VariantVerdict &v = variant_verdict(variant, s, threads);
  if (!v.error.empty()) {
    state.SkipWithError(v.error.c_str());
    return;
  }
  Work &w = work_for(s);
  set_threads(threads);
  settle(Impl::attnkern, threads);
  const float *x = w.x.data();
  float *y = w.y.data();
  for (auto _ : state) {
    if (!call_variant(variant, s, x, y)) {
      state.SkipWithError("softmax call failed inside the timed loop");
      break;
    }
    benchmark::ClobberMemory();
  }
  set_counters(state, s, v.err);
  state.SetLabel(variant == kLog ? "ak_log_softmax over rows"
                                 : "ak_softmax_axis(1, rows, cols): over each column");
}

void configure(benchmark::internal::Benchmark *b) {
  b->Unit(benchmark::kMicrosecond)->MinTime(0.25)->UseRealTime();
}

} // namespace

void register_softmax_benchmarks() {
  for (const SoftmaxShape &s : kShapes) {
    for (int threads : bench_thread_counts()) {
      const std::string tail = "/" + s.label() + "/threads:" + std::to_string(threads);
      for (int i = 0; i < 3; ++i) {
        const std::string name = std::string("softmax/") + impl_name(kImpls[i]) + tail;
        configure(benchmark::RegisterBenchmark(name.c_str(), BM_softmax, i, s, threads));
      }
      for (int variant : {kLog, kAxis}) {
        const std::string name = std::string("softmax/") + kVariantNames[variant] + tail;
        configure(
            benchmark::RegisterBenchmark(name.c_str(), BM_softmax_variant, variant, s, threads));
      }
    }
  }
  for (int threads : bench_thread_counts()) {
    for (int i = 0; i < 3; ++i) {
      const std::string name = std::string("softmax/") + impl_name(kImpls[i]) + "/" +
                               kColdShape.label() + "_cold/threads:" + std::to_string(threads);
      configure(benchmark::RegisterBenchmark(name.c_str(), BM_softmax_cold, i, threads));
    }
  }
}

} // namespace akb
