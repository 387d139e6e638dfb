// The calls of the concurrency stress test (concurrency_stress.cpp): one
// job per use of a C API entry point, each over inputs shared read-only by
// every thread and writing only into the buffer its caller passes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "attnkern.h"

namespace ak_stress {

struct Job {
  std::string name;
  std::size_t floats = 0; // the output buffer's size, in floats
  // Runs the call into `out`. Every byte of out[0, floats) is written (in
  // place arguments and pools are first set from the job's inputs), so that
  // two runs compare with memcmp whatever the buffer held before.
  std::function<ak_status(float *out)> run;
};

// N(0, scale^2) floats from `seed`.
std::vector<float> random_floats(std::int64_t n, std::uint32_t seed, float scale = 1.0f);
// x rounded to f16 or bf16 storage (by ak_convert).
std::vector<std::uint16_t> narrowed(ak_dtype type, const std::vector<float> &x);

// Shapes small enough for ThreadSanitizer, yet each past the library's
// thresholds for a team of 2 or more threads (and for split-KV decode).
std::vector<Job> make_jobs();
// The ak_attention jobs (concurrency_attention_jobs.cpp).
void add_attention_jobs(std::vector<Job> &jobs);

} // namespace ak_stress
