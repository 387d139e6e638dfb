// Process-wide thread-count setting and the per-call resolution of it.
#pragma once

#include <cstdint>

namespace ak {

void set_thread_setting(int n); // 0 = OpenMP default
// Threads the next call may use: 1 inside an OpenMP parallel region (a guest
// never spawns a nested team), else the setting or the OpenMP default.
int threads_for_call();

// Caps a thread count so that each thread gets at least `min_work` units of
// `work` (tiny problems run on one thread). Never affects results.
int threads_for_work(int threads, double work, double min_work);

} // namespace ak
