// Process-wide thread-count setting and the per-call resolution of it.
#pragma once

#include <cstdint>

namespace attnkern {

void set_thread_setting(int n); // 0 = OpenMP default
// The calling thread's override of the process-wide setting (0 = none).
void set_thread_local_setting(int n);
int thread_local_setting();
// Threads a call would use now: 1 inside an OpenMP parallel region (a guest
// never spawns a nested team) and in a child forked after this process may
// have run a team (see threading.cpp), else the calling thread's override,
// the process-wide setting or the OpenMP default, first that is set.
int threads_setting_now();
// The same, for a call about to run (which may start a team).
int threads_for_call();

// Caps a thread count so that each thread gets at least `min_work` units of
// `work` (tiny problems run on one thread). Never affects results.
int threads_for_work(int threads, double work, double min_work);

// f(i) for i in [0, n), statically split over `threads` threads; on one
// thread a plain loop that never enters the OpenMP runtime (whose team of
// one still costs around a microsecond a call: a tenth of a small softmax).
template <class F> void parallel_for_static(int threads, std::int64_t n, F &&f) {
  if (threads > n) threads = static_cast<int>(n); // no idle team members
  if (threads <= 1) {
    for (std::int64_t i = 0; i < n; ++i) f(i);
    return;
  }
#pragma omp parallel for schedule(static) num_threads(threads)
  for (std::int64_t i = 0; i < n; ++i) f(i);
}

} // namespace attnkern
