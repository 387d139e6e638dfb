// The kernels behind ak_convert and ak_kv_cache_store: rows narrowed
// (narrow.hpp) or widened (widen.hpp) with this instruction set's vectors.
// Every element's result depends on that element alone, so how the work is
// split over threads never changes a bit.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../kernel_table.hpp"
#include "../threading.hpp"
#include "half.hpp"
#include "narrow.hpp"
#include "widen.hpp"

namespace attnkern {
namespace AK_ISA_NS {

// Elements per thread below which a conversion stays on one thread: a
// 64 KiB-256 KiB share, where starting the team costs about as much as the
// share's conversion.
constexpr std::int64_t kConvertMinPerThread = std::int64_t{1} << 16;
// f16 <-> bf16 goes through fp32 in blocks of this many elements (a stack
// buffer that stays in L1).
constexpr std::int64_t kConvertBlock = 512;

// fp32 <-> f16/bf16 outputs of this many bytes and more are written with
// streaming stores where the instruction set has them (vector_stores.hpp;
// copies go through memmove, which decides for itself, and f16 <-> bf16
// through an L1 buffer): they would not stay in cache for the caller anyway,
// and a plain store's miss first reads the line it overwrites, a third
// transfer besides the read and the write. memcpy switches likewise for
// large copies. A function of the size alone; the bits never change.
constexpr std::int64_t kConvertStreamMinBytes = std::int64_t{16} << 20;

// fp32 <-> f16/bf16 over one stretch, with streaming stores over the whole
// 64-byte lines of dst where `stream` (a partial line streamed is slow to
// flush; the ends take plain stores).
template <class V>
void convert_between_f32(DType dt, void *dst, DType st, const void *src, std::int64_t n,
                         bool stream) {
  const auto run = [&](std::int64_t lo, std::int64_t hi, auto streamed) {
    constexpr bool kStream = decltype(streamed)::value;
    if (hi <= lo) return; // (a streamed row's empty ends, once per row of a store)
    if (st == DType::f32)
      narrow_row<V, kStream>(dt, static_cast<const float *>(src) + lo,
                             static_cast<std::uint16_t *>(dst) + lo, hi - lo);
    else
      widen_row<V, kStream>(st, static_cast<const std::uint16_t *>(src) + lo,
                            static_cast<float *>(dst) + lo, hi - lo);
  };
  const std::int64_t ds = dtype_size(dt);
  const auto address = reinterpret_cast<std::uintptr_t>(dst);
  if (!stream || address % ds != 0) return run(0, n, std::false_type{});
  const std::int64_t head = std::min(n, static_cast<std::int64_t>((64 - address % 64) % 64) / ds);
  const std::int64_t lines_end = head + (n - head) * ds / 64 * 64 / ds;
  run(0, head, std::false_type{});
  run(head, lines_end, std::true_type{});
  run(lines_end, n, std::false_type{});
}

// One contiguous stretch of a conversion, dst and src already offset.
template <class V>
void convert_range(DType dt, void *dst, DType st, const void *src, std::int64_t n,
                   bool stream = false) {
  if (dt == st) {
    // A copy of the bits; dst == src (in place) has nothing to do.
    if (dst != src) std::memmove(dst, src, static_cast<std::size_t>(n) * dtype_size(dt));
    return;
  }
  if (st == DType::f32 || dt == DType::f32)
    return convert_between_f32<V>(dt, dst, st, src, n, stream);
  // f16 <-> bf16: exact widening, then the one rounding. Block by block, so
  // dst == src works: a block is read whole before it is written.
  alignas(64) float buf[kConvertBlock];
  const auto *s = static_cast<const std::uint16_t *>(src);
  auto *d = static_cast<std::uint16_t *>(dst);
  for (std::int64_t i = 0; i < n; i += kConvertBlock) {
    const std::int64_t len = std::min(kConvertBlock, n - i);
    widen_row<V>(st, s + i, buf, len);
    narrow_row<V>(dt, buf, d + i, len);
  }
}

template <class V>
void convert(DType dt, void *dst, DType st, const void *src, std::int64_t n, int threads) {
  threads =
      threads_for_work(threads, static_cast<double>(n), static_cast<double>(kConvertMinPerThread));
  const bool stream = n * dtype_size(dt) >= kConvertStreamMinBytes;
  if (threads <= 1) {
    convert_range<V>(dt, dst, st, src, n, stream);
    if (stream) V::stream_fence();
    return;
  }
  // One contiguous share per thread, split at multiples of 64 elements (whole
  // cache lines of the 16-bit side, whole vectors everywhere).
  const std::int64_t blocks = (n + 63) / 64;
  const std::int64_t ds = dtype_size(dt), ss = dtype_size(st);
  parallel_for_static(threads, threads, [&](std::int64_t t) {
    const std::int64_t lo = std::min(n, blocks * t / threads * 64);
    const std::int64_t hi = std::min(n, blocks * (t + 1) / threads * 64);
    if (hi <= lo) return;
    convert_range<V>(dt, static_cast<char *>(dst) + lo * ds, st,
                     static_cast<const char *>(src) + lo * ss, hi - lo, stream);
    if (stream) V::stream_fence();
  });
}

// The rows of token t: every head's head_dim values, each to its slot.
template <class V> void kv_store_token(const KvStoreArgs &a, std::int64_t t, bool stream) {
  const std::int64_t slot = a.slots[t];
  if (slot < 0) return;
  const std::int64_t page = slot / a.page_size, offset = slot % a.page_size;
  const std::int64_t esize = dtype_size(a.dst_type);
  const std::int64_t base = page * a.page_strides[0] + offset * a.page_strides[2];
  const float *src = a.src + t * a.src_strides[0];
  for (std::int64_t h = 0; h < a.num_kv_heads; ++h) {
    void *dst = static_cast<char *>(a.pool) + (base + h * a.page_strides[1]) * esize;
    convert_range<V>(a.dst_type, dst, DType::f32, src + h * a.src_strides[1], a.head_dim, stream);
  }
}

template <class V> void kv_cache_store(const KvStoreArgs &a, int threads) {
  const double work = static_cast<double>(a.n_tokens) * static_cast<double>(a.num_kv_heads) *
                      static_cast<double>(a.head_dim);
  threads = threads_for_work(threads, work, static_cast<double>(kConvertMinPerThread));
  const bool stream = work * dtype_size(a.dst_type) >= static_cast<double>(kConvertStreamMinBytes);
  // One contiguous share of the tokens per thread, fenced once at its end
  // (a fence per token waited on every row's streamed lines).
  parallel_for_static(threads, threads, [&](std::int64_t part) {
    const std::int64_t lo = a.n_tokens * part / threads, hi = a.n_tokens * (part + 1) / threads;
    for (std::int64_t t = lo; t < hi; ++t) kv_store_token<V>(a, t, stream);
    if (stream) V::stream_fence();
  });
}

} // namespace AK_ISA_NS
} // namespace attnkern
