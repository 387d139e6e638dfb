// Softmax along the middle axis of a contiguous [outer, axis, inner] tensor,
// for one instruction set: each (outer, inner) index is a column, one
// softmax over axis_len elements `inner` floats apart, vectorized across
// inner. Two schemes, chosen by the shape alone:
//
// - long axes (softmax_axis_long.hpp): the columns cut into pieces and the
//   rows into bands, two row-major passes over each band of a piece (sums
//   against a running shift, then the division), the bands merged between.
// - short axes (softmax_axis_short.hpp): a block of 8 vectors of columns at
//   a time with its state in registers, walked down the axis for each of
//   three passes (maximum, exponentials, division), since a short block
//   stays in cache between them (its exponentials in a small contiguous
//   buffer, not in y).
//
// Each scheme's result for a column depends on that column's elements alone
// (never on its neighbours, the piece it falls in or the thread count; the
// bands depend on axis_len alone); the two schemes shift by different
// amounts, so their bits differ.
#pragma once

#include <cstddef>
#include <cstdint>

#include "../gemm/gemm_common.hpp"
#include "../kernel_table.hpp"
#include "../scratch.hpp"
#include "../threading.hpp"
#include "softmax_axis_common.hpp"
#include "softmax_axis_long.hpp"
#include "softmax_axis_short.hpp"
#include "softmax_rows.hpp"

namespace attnkern {
namespace AK_ISA_NS {

template <class V>
KernelStatus softmax_axis(std::int64_t outer, std::int64_t axis_len, std::int64_t inner,
                          const float *x, float *y, int threads, const SoftmaxTuning &tuning) {
  if (inner == 1) { // rows of a matrix
    softmax_rows<V>(outer, axis_len, x, axis_len, y, axis_len, false, threads, tuning);
    return KernelStatus::ok;
  }
  // A thread per 32768 elements at least (per-thread work of a few
  // microseconds below that; smaller planes ran slower on two threads than
  // on one, split by blocks, bands or columns: docs/tuning.md).
  const double elements = static_cast<double>(outer) * axis_len * inner;
  if (axis_len <= kShortAxisMax) {
    softmax_axis_short<V>(outer, axis_len, inner, x, y,
                          threads_for_work(threads, elements, 1 << 15));
    return KernelStatus::ok;
  }
  // Long axes (softmax_axis_long.hpp): the plan of threads, pieces and
  // bands, then every piece. (Written here rather than in a function of
  // that file: moved there, even always inlined, GCC 12 changed its
  // inlining elsewhere in the translation unit, GEMM kernels included.)
  //
  // Whole planes to each thread share no state, no barrier and no page:
  // there a thread pays from 2^13 elements on.
  const int plane_threads = threads_for_work(threads, elements, 1 << 13);
  threads = threads_for_work(threads, elements, 1 << 15);
  if (plane_threads > threads && outer % plane_threads == 0) threads = plane_threads;
  // Bands of rows (a function of the shape) and pieces of whole lines (16
  // floats, a multiple of every vector width, so that no two threads write
  // one line of y), at most kPieceMax wide.
  const AxisBands bands = axis_bands(axis_len);
  const std::int64_t lines = ceil_div(inner, 16);
  std::int64_t pieces = ceil_div(inner, kPieceMax);
  // Threads take whole planes where there are enough to go round evenly.
  // Otherwise, on a plane of 2^15 elements or more, the team goes through
  // its pieces one by one and shares out each one's bands (see
  // kMinBandRows): split by columns, narrow pieces ran slower on two
  // threads than on one (docs/tuning.md). Planes with fewer bands
  // than threads split columns: two pieces per thread where the lines allow
  // (each piece's rows then stay in L2).
  const bool planes_even = outer >= threads && (outer % threads == 0 || outer >= 4 * threads);
  const std::int64_t piece_width = inner < kPieceMax ? inner : kPieceMax;
  const bool by_band = threads > 1 && !planes_even && axis_len * piece_width >= (1 << 15) &&
                       (bands.count >= threads || bands.count > outer * pieces);
  if (threads > 1 && !by_band && !planes_even) {
    const std::int64_t want = (2 * threads + outer - 1) / outer;
    if (want > pieces) pieces = want < lines ? want : lines;
  }
  const std::int64_t piece_lines = ceil_div(lines, pieces);
  const std::int64_t width = piece_lines * 16;
  pieces = ceil_div(lines, piece_lines);
  const AxisStateLayout lay{width, width / V::width, bands.count};
  // One set of states per thread (or one for the team), each on pages of
  // its own.
  const std::int64_t stride = round_up(lay.set_floats(), 1024);
  const int sets = by_band ? 1 : threads;
  Scratch scratch(static_cast<std::size_t>(stride * sets + 1024));
  if (!scratch.data()) return KernelStatus::out_of_memory;
  // Exponentials that would not outlast the first pass in cache go to y
  // in streaming stores (whole vectors, which y's alignment and a multiple
  // of 16 columns keep aligned), one transfer of y fewer.
  const std::int64_t in_flight = by_band ? 1 : threads < outer * pieces ? threads : outer * pieces;
  // Out of place, pieces whose exponentials (axis_len x width floats, times
  // the pieces in flight) reach the table's threshold would be evicted
  // before the second pass reads them.
  const bool stream = tuning.stream_axis_min_bytes > 0 && x != y && inner % 16 == 0 &&
                      reinterpret_cast<std::uintptr_t>(y) % 64 == 0 &&
                      axis_len * width * 4 * in_flight >= tuning.stream_axis_min_bytes;
  const auto piece = [&](std::int64_t op, float *set, bool team) {
    const std::int64_t o = op / pieces, p = op % pieces;
    const std::int64_t off = o * axis_len * inner + p * width;
    const std::int64_t w = p + 1 < pieces ? width : inner - p * width;
    softmax_axis_piece<V>(x + off, y + off, axis_len, inner, w, lay, set, bands, team, stream);
  };
  if (by_band) {
#pragma omp parallel num_threads(threads)
    for (std::int64_t op = 0; op < outer * pieces; ++op) piece(op, scratch.data(), true);
  } else {
    parallel_for_static(threads, outer * pieces, [&](std::int64_t op) {
      piece(op, scratch.data() + stride * (threads > 1 ? omp_thread_id() : 0), false);
    });
  }
  return KernelStatus::ok;
}

} // namespace AK_ISA_NS
} // namespace attnkern
