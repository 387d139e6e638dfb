#include "scratch.hpp"

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <mutex>

#if defined(__unix__) || defined(__APPLE__)
#include <pthread.h>
#endif

namespace attnkern {
namespace {

constexpr std::size_t kAlign = 64; // a cache line, and one AVX-512 register
// Buffers up to this size (16 MiB) stay with their thread for the next call;
// larger ones (a big batched projection) go back to the system, so that an
// engine's worker threads do not each keep the largest buffer they ever used.
constexpr std::size_t kMaxCachedFloats = std::size_t{4} << 20;

// A kept buffer carries its capacity in its first line, so that one atomic
// pointer hands over buffer and size together: release_cached_scratch may
// take a buffer from another thread's slot while that thread looks for one.
struct Block {
  std::size_t capacity; // floats after the header line
};
constexpr std::size_t kHeaderFloats = kAlign / sizeof(float);
float *floats_of(Block *b) { return reinterpret_cast<float *>(b) + kHeaderFloats; }
Block *block_of(float *p) { return reinterpret_cast<Block *>(p - kHeaderFloats); }

Block *allocate_block(std::size_t floats) {
  if (floats > (SIZE_MAX - 2 * kAlign) / sizeof(float)) return nullptr;
  const std::size_t bytes = (floats * sizeof(float) + kAlign - 1) / kAlign * kAlign + kAlign;
  auto *b = static_cast<Block *>(std::aligned_alloc(kAlign, bytes));
  if (b) b->capacity = (bytes - kAlign) / sizeof(float);
  return b;
}

// One thread's kept buffer. Slots that hold (or held) a buffer are linked
// into a process-wide list, so that release_cached_scratch reaches every
// thread's; the links live in the slots themselves, so that joining the
// list never allocates (it happens in ~Scratch, which must not throw).
struct CacheSlot {
  std::atomic<Block *> block{nullptr};
  CacheSlot *prev = nullptr, *next = nullptr;
  bool linked = false;
  ~CacheSlot();
  void keep(Block *b);
};

struct Registry {
  std::mutex lock;
  CacheSlot *head = nullptr;
  void link(CacheSlot *s) {
    s->prev = nullptr;
    s->next = head;
    if (head) head->prev = s;
    head = s;
    s->linked = true;
  }
  void unlink(CacheSlot *s) {
    (s->prev ? s->prev->next : head) = s->next;
    if (s->next) s->next->prev = s->prev;
    s->prev = s->next = nullptr;
    s->linked = false;
  }
};
Registry &registry() {
  static Registry *r = new Registry; // never destroyed: threads may exit after main
  return *r;
}

thread_local CacheSlot t_cache;
// Set once the thread's slot is destroyed (at thread exit): a call made later
// by another thread_local's destructor keeps nothing. Trivially destructible,
// so it outlives every destructor on the thread.
thread_local bool t_cache_gone = false;

CacheSlot::~CacheSlot() {
  t_cache_gone = true;
  if (linked) {
    Registry &r = registry();
    std::lock_guard<std::mutex> hold(r.lock);
    r.unlink(this);
  }
  std::free(block.exchange(nullptr));
}

void CacheSlot::keep(Block *b) {
  if (!linked) {
    Registry &r = registry();
    std::lock_guard<std::mutex> hold(r.lock);
    r.link(this);
  }
  std::free(block.exchange(b));
}

#if defined(__unix__) || defined(__APPLE__)
// The lock is held across fork, so that a child never inherits it held by a
// thread that does not exist there. The child also drops the other threads'
// slots: they live in those threads' storage, which the child may unmap
// once it reuses their stacks; their buffers are freed while still reachable.
void lock_registry() { registry().lock.lock(); }
void unlock_registry() { registry().lock.unlock(); }
void child_keeps_own_slot() {
  Registry &r = registry();
  CacheSlot *own = t_cache.linked ? &t_cache : nullptr;
  for (CacheSlot *s = r.head; s;) {
    CacheSlot *next = s->next;
    if (s != own) std::free(s->block.exchange(nullptr));
    s = next;
  }
  r.head = nullptr;
  if (own) r.link(own);
  r.lock.unlock();
}
[[maybe_unused]] const int g_registry_atfork =
    pthread_atfork(lock_registry, unlock_registry, child_keeps_own_slot);
#endif

} // namespace

namespace {
std::atomic<long> g_fail_countdown{0};
} // namespace

void fail_allocation_for_test(long n) {
  g_fail_countdown.store(n > 0 ? n : 0, std::memory_order_relaxed);
}

bool injected_allocation_failure() {
  long left = g_fail_countdown.load(std::memory_order_relaxed);
  while (left > 0)
    if (g_fail_countdown.compare_exchange_weak(left, left - 1, std::memory_order_relaxed))
      return left == 1;
  return false;
}

bool injected_allocation_failure_pending() {
  return g_fail_countdown.load(std::memory_order_relaxed) > 0;
}

Scratch::Scratch(std::size_t floats) {
  if (injected_allocation_failure()) return;
  if (floats == 0) floats = 1;
  // A request too large to keep leaves the kept buffer for the next call.
  Block *b =
      floats <= kMaxCachedFloats && !t_cache_gone ? t_cache.block.exchange(nullptr) : nullptr;
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
  if (capacity_ > kMaxCachedFloats || t_cache_gone) {
    std::free(mine);
    return;
  }
  // Keep the larger of this buffer and one kept meanwhile (a nested
  // acquisition on the same thread).
  Block *kept = t_cache.block.exchange(nullptr);
  if (kept && kept->capacity > capacity_) std::swap(kept, mine);
  std::free(kept);
  try {
    t_cache.keep(mine);
  } catch (...) { // a lock that fails: keep nothing, throw nothing
    std::free(mine);
  }
}

void release_cached_scratch() {
  Registry &r = registry();
  std::lock_guard<std::mutex> hold(r.lock);
  for (CacheSlot *s = r.head; s; s = s->next) std::free(s->block.exchange(nullptr));
}

} // namespace attnkern
