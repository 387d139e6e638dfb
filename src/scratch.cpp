#include "scratch.hpp"

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <vector>

#if defined(__unix__) || defined(__APPLE__)
#include <pthread.h>
#endif

namespace ak {
namespace {

constexpr std::size_t kAlign = 64; // a cache line, and one AVX-512 register
// Buffers up to this size (16 MiB) stay with their thread for the next call;
// larger ones (a big batched projection) go back to the system, so that an
// engine's worker threads do not each keep the largest buffer they ever used.
constexpr std::size_t kMaxCachedFloats = std::size_t{4} << 20;

// A cached buffer carries its capacity in its first line, so that one atomic
// pointer hands over buffer and size together: release_cached_scratch may
// take a buffer from another thread's cache while that thread looks for one.
struct Block {
  std::size_t capacity; // floats after the header line
};
constexpr std::size_t kHeaderFloats = kAlign / sizeof(float);
float *floats_of(Block *b) { return reinterpret_cast<float *>(b) + kHeaderFloats; }
Block *block_of(float *p) { return reinterpret_cast<Block *>(p - kHeaderFloats); }

Block *allocate_block(std::size_t floats) {
  const std::size_t bytes = (floats * sizeof(float) + kAlign - 1) / kAlign * kAlign + kAlign;
  auto *b = static_cast<Block *>(std::aligned_alloc(kAlign, bytes));
  if (b) b->capacity = (bytes - kAlign) / sizeof(float);
  return b;
}

// Every thread's cache slot, for release_cached_scratch. A thread registers
// its slot when it first caches a buffer and leaves when it exits.
struct Registry {
  std::mutex lock;
  std::vector<std::atomic<Block *> *> slots;
};
Registry &registry() {
  static Registry *r = new Registry; // never destroyed: threads may exit after main
  return *r;
}

#if defined(__unix__) || defined(__APPLE__)
// Held across fork, so that a child never inherits it locked by a thread
// that does not exist there.
void lock_registry() { registry().lock.lock(); }
void unlock_registry() { registry().lock.unlock(); }
[[maybe_unused]] const int g_registry_atfork =
    pthread_atfork(lock_registry, unlock_registry, unlock_registry);
#endif

struct CacheSlot {
  std::atomic<Block *> block{nullptr};
  bool registered = false;
  ~CacheSlot() {
    if (registered) {
      Registry &r = registry();
      std::lock_guard<std::mutex> hold(r.lock);
      for (auto &s : r.slots)
        if (s == &block) {
          s = r.slots.back();
          r.slots.pop_back();
          break;
        }
    }
    std::free(block.exchange(nullptr));
  }
  void keep(Block *b) {
    if (!registered) {
      Registry &r = registry();
      std::lock_guard<std::mutex> hold(r.lock);
      r.slots.push_back(&block);
      registered = true;
    }
    std::free(block.exchange(b));
  }
};
thread_local CacheSlot t_cache;

} // namespace

Scratch::Scratch(std::size_t floats) {
  if (floats == 0) floats = 1;
  Block *b = t_cache.block.exchange(nullptr);
  if (!b || b->capacity < floats) {
    std::free(b);
    b = allocate_block(floats);
    if (!b) return;
  }
  data_ = floats_of(b);
  capacity_ = b->capacity;
}

Scratch::~Scratch() {
  if (!data_) return;
  Block *mine = block_of(data_);
  if (capacity_ > kMaxCachedFloats) {
    std::free(mine);
    return;
  }
  // Keep the larger of this buffer and one cached meanwhile (a nested
  // acquisition on the same thread).
  Block *cached = t_cache.block.exchange(nullptr);
  if (cached && cached->capacity > capacity_) std::swap(cached, mine);
  std::free(cached);
  t_cache.keep(mine);
}

void release_cached_scratch() {
  Registry &r = registry();
  std::lock_guard<std::mutex> hold(r.lock);
  for (std::atomic<Block *> *slot : r.slots) std::free(slot->exchange(nullptr));
}

} // namespace ak
