// Timing a call against a baseline call on the same machine state: the
// ratios that the modifier, packed-batch and K/V storage tables report.
#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

namespace akb {

// Seconds that f takes.
template <class F> double seconds(F &&f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

inline double median(std::vector<double> x) {
  if (x.empty()) return NAN;
  std::sort(x.begin(), x.end());
  const std::size_t n = x.size();
  return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

// The timed loop of `timed`, each iteration paired with an untimed call of
// `baseline` right before or after it (alternately): the median of the
// per-pair time ratios timed / baseline. On a shared machine whose speed
// drifts by 10-20% between runs, a pair sees one machine state, so the
// ratio stays within a few percent where separate medians do not.
template <class T, class B> double paired_ratio(benchmark::State &state, T &&timed, B &&baseline) {
  std::vector<double> ratios;
  bool baseline_first = true;
  for (auto _ : state) {
    double tb = 0, tt = 0;
    if (baseline_first) {
      state.PauseTiming();
      tb = seconds(baseline);
      state.ResumeTiming();
    }
    tt = seconds(timed);
    benchmark::ClobberMemory();
    if (!baseline_first) {
      state.PauseTiming();
      tb = seconds(baseline);
      state.ResumeTiming();
    }
    ratios.push_back(tt / tb);
    baseline_first = !baseline_first;
  }
  return median(ratios);
}

} // namespace akb
