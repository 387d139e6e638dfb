#include "threading.hpp"

#include "attnkern.h"

#include <atomic>

#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(_OPENMP) && (defined(__unix__) || defined(__APPLE__))
#include <pthread.h>
#define AK_FORK_GUARD 1
#endif

namespace attnkern {
namespace {
std::atomic<int> g_threads{0};
// The calling thread's own count (0 = follow g_threads): an engine's worker
// threads set 1 without touching other callers. Plain thread_local int: no
// destructor, nothing to release when a thread exits.
thread_local int t_threads = 0;

#ifdef AK_FORK_GUARD
// OpenMP's runtime does not survive fork: its worker threads are not copied
// into the child, and libgomp's next team there waits for them forever (a
// pre-forking server, Python's multiprocessing). So once this process may
// have started a team, a child forked from it runs every call on the calling
// thread. Results are the same on any thread count.
std::atomic<bool> g_team_started{false}, g_forked_after_team{false};
void on_fork_child() {
  if (g_team_started.load(std::memory_order_relaxed))
    g_forked_after_team.store(true, std::memory_order_relaxed);
}
[[maybe_unused]] const int g_atfork_registered = pthread_atfork(nullptr, nullptr, on_fork_child);
#endif
} // namespace

void set_thread_setting(int n) { g_threads.store(n, std::memory_order_relaxed); }
void set_thread_local_setting(int n) { t_threads = n; }
int thread_local_setting() { return t_threads; }

int threads_setting_now() {
#ifdef _OPENMP
  // Any enclosing region counts, a team of one included (num_threads(1),
  // if(0)): omp_in_parallel() is false in those, yet the call belongs to
  // the calling thread all the same.
  if (omp_get_level() > 0) return 1;
#ifdef AK_FORK_GUARD
  if (g_forked_after_team.load(std::memory_order_relaxed)) return 1;
#endif
  int n = t_threads > 0 ? t_threads : g_threads.load(std::memory_order_relaxed);
  if (n <= 0) n = omp_get_max_threads();
  // Never more than the runtime's limit or AK_MAX_THREADS: a count that
  // asks for more threads than the process can create would end it.
  const int limit = omp_get_thread_limit();
  if (n > limit) n = limit;
  return n > AK_MAX_THREADS ? AK_MAX_THREADS : n;
#else
  return 1;
#endif
}

int threads_for_call() {
  const int threads = threads_setting_now();
#ifdef AK_FORK_GUARD
  if (threads > 1 && !g_team_started.load(std::memory_order_relaxed))
    g_team_started.store(true, std::memory_order_relaxed);
#endif
  return threads;
}

int threads_for_work(int threads, double work, double min_work) {
  if (threads <= 1) return 1;
  const double most = work / min_work;
  if (most < 2.0) return 1;
  return most < threads ? static_cast<int>(most) : threads;
}

} // namespace attnkern
