// Index arithmetic and OpenMP team queries shared by the GEMM drivers (and
// the attention kernel, which runs on the same micro-kernel).
#pragma once

#include <cstdint>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace attnkern {
namespace AK_ISA_NS {

inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
inline std::int64_t round_up(std::int64_t a, std::int64_t b) { return ceil_div(a, b) * b; }
inline std::int64_t min64(std::int64_t a, std::int64_t b) { return a < b ? a : b; }
inline std::int64_t max64(std::int64_t a, std::int64_t b) { return a > b ? a : b; }

inline int omp_thread_id() {
#ifdef _OPENMP
  return omp_get_thread_num();
#else
  return 0;
#endif
}

inline int omp_team_size() {
#ifdef _OPENMP
  return omp_get_num_threads();
#else
  return 1;
#endif
}

// Work-sharing loops that cost nothing on one thread: inside a team
// (`team` true, called from a parallel region) an `omp for` with its
// implicit barrier; alone, a plain loop (an orphaned `omp for` would still
// enter the OpenMP runtime, and its dynamic schedule takes locks).
template <class F> inline void team_for_static(bool team, std::int64_t n, F &&f) {
  if (team) {
#pragma omp for schedule(static)
    for (std::int64_t i = 0; i < n; ++i) f(i);
  } else {
    for (std::int64_t i = 0; i < n; ++i) f(i);
  }
}

// Handed out in runs of `chunk` consecutive indices: [k chunk, (k + 1) chunk).
template <class F>
inline void team_for_dynamic(bool team, std::int64_t n, F &&f, std::int64_t chunk = 1) {
  if (team) {
#pragma omp for schedule(dynamic, chunk)
    for (std::int64_t i = 0; i < n; ++i) f(i);
  } else {
    for (std::int64_t i = 0; i < n; ++i) f(i);
  }
}

} // namespace AK_ISA_NS
} // namespace attnkern
