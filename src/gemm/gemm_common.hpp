// Index arithmetic and OpenMP team queries shared by the GEMM drivers (and
// the attention kernel, which runs on the same micro-kernel).
#pragma once

#include <cstdint>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace ak {
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

} // namespace AK_ISA_NS
} // namespace ak
