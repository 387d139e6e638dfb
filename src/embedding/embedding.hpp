// The kernel behind ak_embedding: each token's table row copied (or a zero
// row for an unknown token) with this instruction set's vectors. Rows are
// independent, so the split over threads never changes a bit.
#pragma once

#include <cstdint>

#include "../kernel_table.hpp"
#include "../threading.hpp"

namespace attnkern {
namespace AK_ISA_NS {

// Floats copied per thread below which a lookup stays on one thread (as for
// ak_convert: a share of 64 KiB or more pays for starting the team).
constexpr std::int64_t kEmbeddingMinPerThread = std::int64_t{1} << 14;

// dst[0, dim) = src[0, dim), or zeros when src is null.
template <class V> void copy_or_zero_row(const float *src, float *dst, std::int64_t dim) {
  std::int64_t i = 0;
  if (!src) {
    for (; i + V::width <= dim; i += V::width) V::storeu(dst + i, V::zero());
    for (; i < dim; ++i) dst[i] = 0.0f;
    return;
  }
  for (; i + 4 * V::width <= dim; i += 4 * V::width) {
    const auto a = V::loadu(src + i), b = V::loadu(src + i + V::width);
    const auto c = V::loadu(src + i + 2 * V::width), d = V::loadu(src + i + 3 * V::width);
    V::storeu(dst + i, a);
    V::storeu(dst + i + V::width, b);
    V::storeu(dst + i + 2 * V::width, c);
    V::storeu(dst + i + 3 * V::width, d);
  }
  for (; i + V::width <= dim; i += V::width) V::storeu(dst + i, V::loadu(src + i));
  for (; i < dim; ++i) dst[i] = src[i];
}

template <class V> void embedding(const EmbeddingArgs &a, int threads) {
  const double work = static_cast<double>(a.n_tokens) * static_cast<double>(a.dim);
  threads = threads_for_work(threads, work, static_cast<double>(kEmbeddingMinPerThread));
  parallel_for_static(threads, a.n_tokens, [&](std::int64_t t) {
    const std::int32_t id = a.ids[t];
    copy_or_zero_row<V>(id < 0 ? nullptr : a.table + id * a.ld_table, a.out + t * a.ld_out, a.dim);
  });
}

} // namespace AK_ISA_NS
} // namespace attnkern
