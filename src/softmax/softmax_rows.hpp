// Softmax and log-softmax over the rows of a matrix, for one instruction
// set: the driver that shares the rows out among threads, groups short
// rows R at a time (softmax_row_kernel.hpp does the arithmetic) and routes
// large outputs through a row buffer to streaming stores.
//
// Reads the instruction set's configuration table (src/isa/config_<isa>.hpp,
// SoftmaxBlocks), which its translation unit includes before this header.
#pragma once

#include <cstddef>
#include <cstdint>

#include "../kernel_table.hpp"
#include "../scratch.hpp"
#include "../simd.hpp"
#include "../threading.hpp"
#include "softmax_guess_gate.hpp"
#include "softmax_row_kernel.hpp"

namespace attnkern {
namespace AK_ISA_NS {

// Rows longer than this many floats never stream: their row buffer would
// not fit in L2.
constexpr std::int64_t kStreamRowMax = 65536;

// dst[0:n) = src[0:n): whole vectors at vector-aligned addresses of dst in
// streaming stores, the few floats before and after them in plain ones.
template <class V> void store_row_streaming(const float *src, float *dst, std::int64_t n) {
  constexpr int W = V::width;
  std::int64_t j = 0;
  for (; j < n && reinterpret_cast<std::uintptr_t>(dst + j) % (W * 4) != 0; ++j) dst[j] = src[j];
  for (; j + W <= n; j += W) V::store_stream(dst + j, V::loadu(src + j));
  for (; j < n; ++j) dst[j] = src[j];
}

template <class V>
void softmax_rows(std::int64_t rows, std::int64_t cols, const float *x, std::int64_t ldx, float *y,
                  std::int64_t ldy, bool log, int threads, const SoftmaxTuning &tuning) {
  // Rows of up to 16 vectors go R at a time, so that their short passes'
  // latencies overlap (R: the configuration table's SoftmaxBlocks), the rest
  // one at a time; either way each row gets the same arithmetic, so the
  // grouping never changes a result.
  constexpr int R = SoftmaxBlocks::rows_at_once;
  const std::int64_t per_item = cols <= 16 * V::width ? R : 1;
  const std::int64_t groups = rows / per_item, items = groups + rows % per_item;
  // A thread per 4096 elements at least (a few microseconds of work each).
  threads = threads_for_work(threads, static_cast<double>(rows) * cols, 1 << 12);
  if (threads > items) threads = static_cast<int>(items);
  // Large outputs through a row buffer to streaming stores, where the
  // configuration table asks for it (SoftmaxTuning); the same arithmetic
  // either way.
  const bool stream = tuning.stream_rows_min_bytes > 0 && x != y && per_item == 1 &&
                      cols <= kStreamRowMax &&
                      static_cast<double>(rows) * static_cast<double>(cols) * 4 >=
                          static_cast<double>(tuning.stream_rows_min_bytes);
  // staged: the row buffer, or nullptr (rows written straight into y)
  const auto thread_rows = [&](std::int64_t t, float *staged) {
    // log-softmax, and softmax out of place with FMA, guess
    GuessGate gate(log || (V::has_fma && x != y));
    for (std::int64_t it = items * t / threads; it < items * (t + 1) / threads; ++it) {
      const std::int64_t r0 = it < groups ? it * per_item : groups * per_item + (it - groups);
      const auto row_at = [&](std::int64_t r) { return r < rows ? x + r * ldx : nullptr; };
      bool held;
      if (it < groups && per_item == R) {
        const float *xs[R], *next[R];
        float *ys[R];
        for (int q = 0; q < R; ++q) {
          xs[q] = x + (r0 + q) * ldx;
          ys[q] = y + (r0 + q) * ldy;
          next[q] = row_at(r0 + q + R);
        }
        held = softmax_rows_at<V, R>(xs, ys, cols, log, next, gate.open());
      } else {
        const float *xs[1] = {x + r0 * ldx}, *next[1] = {row_at(r0 + 1)};
        float *ys[1] = {staged ? staged : y + r0 * ldy};
        held = softmax_rows_at<V, 1>(xs, ys, cols, log, next, gate.open());
        if (staged) store_row_streaming<V>(staged, y + r0 * ldy, cols);
      }
      gate.after(held);
    }
    if (staged) V::stream_fence(); // y complete before the caller reads it
  };
  parallel_for_static(threads, threads, [&](std::int64_t t) {
    if (!stream) return thread_rows(t, nullptr);
    Scratch stage(static_cast<std::size_t>(cols));
    thread_rows(t, stage.data()); // without memory for it, ordinary stores
  });
}

} // namespace AK_ISA_NS
} // namespace attnkern
