// ak_release_scratch frees the scratch buffers that threads keep between
// calls: those of the calling thread and of another thread still alive.
// glibc's mallinfo2 counts memory from mmap for all threads together
// (hblkhd); with the mmap threshold pinned at 64 KiB every scratch buffer
// comes from mmap, so the count returns to its level before the calls once
// they are freed. Then a thread whose own thread_local destructor calls in
// after the library's per-thread state is gone (destructors run in reverse
// order of creation): that call must keep nothing, or its buffer is lost.
// Exits 77 (skipped) without glibc.
#include <attnkern.h>

#include <cstdint>
#include <cstdio>
#include <future>
#include <thread>
#include <vector>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace {

bool one_product(std::int64_t n, const std::vector<float> &a, const std::vector<float> &b,
                 std::vector<float> &c) {
  return ak_sgemm(AK_NO_TRANS, AK_NO_TRANS, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(),
                  n) == AK_OK;
}

const std::int64_t kN = 512;
const std::vector<float> &input() {
  static const std::vector<float> x(static_cast<std::size_t>(kN * kN), 0.5f);
  return x;
}

// A user's thread_local that calls in from its destructor.
struct CallsWhenTheThreadEnds {
  bool armed = false;
  ~CallsWhenTheThreadEnds() {
    std::vector<float> c(input().size());
    if (armed) one_product(kN, input(), input(), c);
  }
};
thread_local CallsWhenTheThreadEnds t_late_caller;

} // namespace

int main() {
#if !defined(__GLIBC__)
  std::puts("skipped: mallinfo2 is glibc's");
  return 77;
#else
  if (mallopt(M_MMAP_THRESHOLD, 64 * 1024) != 1) return 2;
  ak_set_num_threads(1);
  const std::int64_t n = 512;
  const std::vector<float> a(static_cast<std::size_t>(n * n), 0.5f), b(a);
  std::vector<float> c(a.size()), c2(a.size());
  const auto mapped = [] { return static_cast<long long>(mallinfo2().hblkhd); };
  const long long before = mapped();

  std::promise<void> release_done;
  std::promise<bool> worker_ran;
  std::thread worker([&] {
    worker_ran.set_value(one_product(n, a, b, c2));
    release_done.get_future().wait(); // stays alive, its buffer kept
  });
  const bool ok = worker_ran.get_future().get() && one_product(n, a, b, c);
  const long long kept = mapped();
  ak_release_scratch();
  const long long after = mapped();
  release_done.set_value();
  worker.join();

  std::printf("mapped: %lld before the calls, %lld kept after them, %lld after release\n", before,
              kept, after);
  if (!ok || c[0] != 0.25f * static_cast<float>(n)) {
    std::puts("FAIL: the products failed");
    return 1;
  }
  // Each of the two threads kept a buffer larger than the threshold.
  if (kept < before + 2 * 64 * 1024) {
    std::puts("FAIL: the calls kept no scratch (nothing for the check to see)");
    return 1;
  }
  if (after != before) {
    std::puts("FAIL: ak_release_scratch left kept buffers");
    return 1;
  }

  // The late caller: created before the library's state, so destroyed after.
  input(); // its static input allocated before the count
  const long long before_late = mapped();
  std::thread([&] {
    t_late_caller.armed = true;
    std::vector<float> c3(a.size());
    one_product(n, a, b, c3);
  }).join();
  ak_release_scratch();
  const long long after_late = mapped();
  std::printf("mapped: %lld before the late caller's thread, %lld after it and a release\n",
              before_late, after_late);
  if (after_late != before_late) {
    std::puts("FAIL: a call from a thread_local destructor left a buffer nobody frees");
    return 1;
  }

  // A call whose scratch is too large to keep (48 MiB) leaves the buffer
  // kept by an earlier call where it is.
  one_product(n, a, b, c);
  const long long kept_small = mapped();
  const std::int64_t tokens = 64, dk = 65536;
  std::vector<float> x(tokens, 0.01f), w(static_cast<std::size_t>(dk), 0.01f),
      out(static_cast<std::size_t>(tokens * dk));
  const long long with_inputs = mapped();
  if (ak_mha_self_attention(tokens, 1, 1, dk, dk, x.data(), w.data(), w.data(), w.data(),
                            AK_MASK_NONE, out.data()) != AK_OK) {
    std::printf("FAIL: the large call failed: %s\n", ak_last_error());
    return 1;
  }
  const long long after_large = mapped();
  std::printf("mapped: %lld with a buffer kept, %lld with the large call's inputs, %lld after it\n",
              kept_small, with_inputs, after_large);
  if (kept_small <= before_late || after_large != with_inputs) {
    std::puts("FAIL: the large call dropped the kept buffer (or kept its own)");
    return 1;
  }
  ak_release_scratch();
  std::puts("ok");
  return 0;
#endif
}
