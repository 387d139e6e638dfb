// One vector of a conversion's results stored to memory, with a plain store
// or, for large outputs, a streaming (non-temporal) store: it writes the
// line without reading it first, so a conversion moves the bytes it reads
// and writes and no more, as memcpy does for large copies. Streaming stores
// need the address aligned to the vector's size, and an sfence before the
// data is read by another thread (stream_fence in simd.hpp).
#pragma once

#include <cstdint>

#include "../simd.hpp"

namespace attnkern {
namespace AK_ISA_NS {

// Where a narrowing streams its output, its loop also requests the source
// 4 KiB ahead, a line per line read (into L2): it reads twice the bytes it
// writes, and the hardware prefetcher alone left that read short of the
// copy's. The address is formed as an integer, as it may lie past the end
// (a prefetch never faults).
template <bool Stream> AK_ALWAYS_INLINE void request_source_ahead(const float *p) {
  if constexpr (Stream)
    __builtin_prefetch(reinterpret_cast<const void *>(reinterpret_cast<std::uintptr_t>(p) + 4096),
                       0, 1);
}

#if defined(AK_ISA_HAS_XSIMD) && defined(__AVX512F__)
template <bool Stream> AK_ALWAYS_INLINE void store_vector(float *p, __m512 v) {
  if constexpr (Stream)
    _mm512_stream_ps(p, v);
  else
    _mm512_storeu_ps(p, v);
}
#endif
#if defined(AK_ISA_HAS_XSIMD) && defined(__AVX__)
template <bool Stream> AK_ALWAYS_INLINE void store_vector(void *p, __m256i v) {
  if constexpr (Stream)
    _mm256_stream_si256(static_cast<__m256i *>(p), v);
  else
    _mm256_storeu_si256(static_cast<__m256i *>(p), v);
}
template <bool Stream> AK_ALWAYS_INLINE void store_vector(float *p, __m256 v) {
  if constexpr (Stream)
    _mm256_stream_ps(p, v);
  else
    _mm256_storeu_ps(p, v);
}
#endif
#if defined(AK_ISA_HAS_XSIMD) && defined(__SSE2__)
template <bool Stream> AK_ALWAYS_INLINE void store_vector(void *p, __m128i v) {
  if constexpr (Stream)
    _mm_stream_si128(static_cast<__m128i *>(p), v);
  else
    _mm_storeu_si128(static_cast<__m128i *>(p), v);
}
#endif

} // namespace AK_ISA_NS
} // namespace attnkern
