// The memory traffic of a softmax down the columns of a large row-major
// matrix, without its arithmetic: how fast each way of moving the data can
// go on this machine, against a plain row copy (the rows softmax's traffic).
// Not part of the library; x86-64 with AVX-512 only (streaming stores by
// intrinsics). Prefetches are the kernel's own (__builtin_prefetch, locality
// 1: prefetcht2), built with the flags of the library's AVX-512 file:
//
//   g++ -std=c++17 -O2 -mavx512f -mavx512bw -mavx512dq -mavx512vl -mavx2 -mfma -fopenmp
//       tools/perf/column_pattern_probe.cpp -o /tmp/column_probe   (one line)
//   /tmp/column_probe [threads] [rows] [cols]   (default 1 4096 4096; rows a
//                                                multiple of 4, cols of 1024)
//
// Patterns, GB/s counted as ak_bench counts softmax (2 * rows * cols * 4
// bytes per call, whatever crosses the bus):
//   rows       x read once, y stored (the rows softmax: x, y's fill, y's write)
//   rows_nt    the same with streaming stores (x, y)
//   pieces     ak_softmax_axis's long-axis pieces: 1024 columns (4 KiB row
//              segments) at a time, four rows a step, a pass down every row
//              reading x and streaming y, then a pass back up reading y and
//              storing it (x, y, y, y)
//   blocks/w   w columns at a time copied down every row into a contiguous
//              per-thread scratch (rows x w floats: 0.5 / 1 / 2 / 4 MiB at
//              4096 rows for w = 32 / 64 / 128 / 256, so only the narrow
//              ones fit a 1 MiB L2), then streamed from it to y (x, y: what
//              a column softmax that keeps its exponentials in cache would
//              move)
// Threads take whole pieces or blocks, as ak_softmax_axis's threads take
// pieces or bands. Each pattern's output is checked after its timing (exit
// status 3 if wrong).
#include <immintrin.h>
#include <omp.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

namespace {

constexpr long kRowsAhead = 8; // prefetch distance down the rows (ak_softmax_axis's)
constexpr long kStep = 4;      // rows a step (ak_softmax_axis's kAxisStepRows)

float *huge_buffer(std::size_t bytes) {
  void *p = std::aligned_alloc(std::size_t{1} << 21, (bytes + (1 << 21) - 1) >> 21 << 21);
  if (p) madvise(p, bytes, MADV_HUGEPAGE);
  return static_cast<float *>(p);
}

// Median seconds of 7 calls, after one warm-up.
double median_seconds(const std::function<void()> &call) {
  call();
  std::vector<double> t;
  for (int rep = 0; rep < 7; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    call();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[3];
}

} // namespace

int main(int argc, char **argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 1;
  const long rows = argc > 2 ? std::atol(argv[2]) : 4096;
  const long cols = argc > 3 ? std::atol(argv[3]) : 4096;
  if (threads < 1 || rows < kStep || rows % kStep != 0 || cols < 1024 || cols % 1024 != 0) {
    std::fprintf(stderr, "usage: column_probe [threads] [rows, a multiple of 4] "
                         "[cols, a multiple of 1024]\n");
    return 2;
  }
  const std::size_t bytes = static_cast<std::size_t>(rows * cols) * 4;
  float *x = huge_buffer(bytes), *y = huge_buffer(bytes);
  std::vector<float *> scratch(static_cast<std::size_t>(threads));
  for (float *&s : scratch) s = huge_buffer(static_cast<std::size_t>(rows * 256) * 4);
  const auto release = [&] {
    std::free(x);
    std::free(y);
    for (float *s : scratch) std::free(s);
  };
  if (!x || !y || std::find(scratch.begin(), scratch.end(), nullptr) != scratch.end()) {
    std::fprintf(stderr, "column_probe: out of memory\n");
    release();
    return 1;
  }
  for (long i = 0; i < rows * cols; ++i) x[i] = y[i] = static_cast<float>(i % 1000);
  bool all_right = true;
  // One line per pattern; then y against what the pattern should have left
  // there (x + offset: pieces adds 1 once per call).
  const auto report = [&](const char *name, const std::function<void()> &call, float offset) {
    const double seconds = median_seconds(call);
    bool right = true;
    for (long i = 0; i < rows * cols && right; ++i) right = y[i] == x[i] + offset;
    std::printf("%-12s %2d thr  %6.1f GB/s%s\n", name, threads, 2.0 * bytes / seconds / 1e9,
                right ? "" : "  (wrong output)");
    all_right = all_right && right;
  };

  for (const bool stream : {false, true})
    report(
        stream ? "rows_nt" : "rows",
        [&] {
#pragma omp parallel num_threads(threads)
          {
#pragma omp for schedule(static)
            for (long i = 0; i < rows * cols; i += 16) {
              const __m512 v = _mm512_loadu_ps(x + i);
              if (stream)
                _mm512_stream_ps(y + i, v);
              else
                _mm512_storeu_ps(y + i, v);
            }
            _mm_sfence();
          }
        },
        0.0f);

  // pieces: y = x, then y + 1 (so each call leaves x + 1)
  report(
      "pieces",
      [&] {
#pragma omp parallel num_threads(threads)
        {
#pragma omp for schedule(static)
          for (long c0 = 0; c0 < cols; c0 += 1024) {
            for (long r = 0; r < rows; r += kStep)
              for (long j = c0; j < c0 + 1024; j += 16)
                for (long k = 0; k < kStep; ++k) {
                  const long i = (r + k) * cols + j;
                  if (r + k + kRowsAhead < rows)
                    __builtin_prefetch(x + i + kRowsAhead * cols, 0, 1);
                  _mm512_stream_ps(y + i, _mm512_loadu_ps(x + i));
                }
            _mm_sfence();
            for (long r = rows - kStep; r >= 0; r -= kStep)
              for (long j = c0; j < c0 + 1024; j += 16)
                for (long k = 0; k < kStep; ++k) {
                  const long i = (r + k) * cols + j;
                  if (r + k >= kRowsAhead) __builtin_prefetch(y + i - kRowsAhead * cols, 1, 1);
                  _mm512_storeu_ps(y + i,
                                   _mm512_add_ps(_mm512_loadu_ps(y + i), _mm512_set1_ps(1.0f)));
                }
          }
        }
      },
      1.0f);

  for (const long w : {32L, 64L, 128L, 256L}) {
    char name[32];
    std::snprintf(name, sizeof name, "blocks/%ld", w);
    report(
        name,
        [&] {
#pragma omp parallel num_threads(threads)
          {
            float *s = scratch[static_cast<std::size_t>(omp_get_thread_num())];
#pragma omp for schedule(static)
            for (long c0 = 0; c0 < cols; c0 += w) {
              for (long r = 0; r < rows; r += kStep)
                for (long j = 0; j < w; j += 16)
                  for (long k = 0; k < kStep; ++k) {
                    const float *xr = x + (r + k) * cols + c0 + j;
                    if (r + k + kRowsAhead < rows) __builtin_prefetch(xr + kRowsAhead * cols, 0, 1);
                    _mm512_store_ps(s + (r + k) * w + j, _mm512_loadu_ps(xr));
                  }
              for (long r = 0; r < rows; ++r)
                for (long j = 0; j < w; j += 16)
                  _mm512_stream_ps(y + r * cols + c0 + j, _mm512_load_ps(s + r * w + j));
            }
            _mm_sfence();
          }
        },
        0.0f);
  }
  release();
  return all_right ? 0 : 3;
}
