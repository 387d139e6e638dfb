#include "scratch.hpp"

#include <cstdlib>

namespace ak {
namespace {

constexpr std::size_t kAlign = 64; // a cache line, and one AVX-512 register
// Buffers up to this size (16 MiB) stay with their thread for the next call;
// larger ones (a big batched projection) go back to the system, so that an
// engine's worker threads do not each keep the largest buffer they ever used.
constexpr std::size_t kMaxCachedFloats = std::size_t{4} << 20;

struct CachedBuffer {
  float *data = nullptr;
  std::size_t capacity = 0;
  ~CachedBuffer() { std::free(data); }
};
thread_local CachedBuffer t_cache;

} // namespace

Scratch::Scratch(std::size_t floats) {
  if (floats == 0) floats = 1;
  if (t_cache.data && t_cache.capacity >= floats) {
    data_ = t_cache.data;
    capacity_ = t_cache.capacity;
    t_cache.data = nullptr;
    t_cache.capacity = 0;
    return;
  }
  const std::size_t bytes = (floats * sizeof(float) + kAlign - 1) / kAlign * kAlign;
  data_ = static_cast<float *>(std::aligned_alloc(kAlign, bytes));
  capacity_ = data_ ? bytes / sizeof(float) : 0;
}

Scratch::~Scratch() {
  if (!data_) return;
  if (capacity_ <= kMaxCachedFloats && capacity_ >= t_cache.capacity) { // keep the larger
    std::free(t_cache.data);
    t_cache.data = data_;
    t_cache.capacity = capacity_;
  } else {
    std::free(data_);
  }
}

} // namespace ak
