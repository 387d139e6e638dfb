#include "threading.hpp"

#include <atomic>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace ak {
namespace {
std::atomic<int> g_threads{0};
}

void set_thread_setting(int n) { g_threads.store(n, std::memory_order_relaxed); }

int threads_for_call() {
#ifdef _OPENMP
  if (omp_in_parallel()) return 1;
  const int n = g_threads.load(std::memory_order_relaxed);
  return n > 0 ? n : omp_get_max_threads();
#else
  return 1;
#endif
}

int threads_for_work(int threads, double work, double min_work) {
  if (threads <= 1) return 1;
  const double most = work / min_work;
  if (most < 2.0) return 1;
  return most < threads ? static_cast<int>(most) : threads;
}

} // namespace ak
