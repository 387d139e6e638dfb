// ak_release_scratch frees the scratch buffers that threads keep between
// calls: those of the calling thread and of another thread still alive.
// glibc's mallinfo2 counts memory from mmap for all threads together
// (hblkhd); with the mmap threshold pinned at 64 KiB every scratch buffer
// comes from mmap, so the count returns to its level before the calls once
// they are freed. Exits 77 (skipped) without glibc.
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
  std::puts("ok");
  return 0;
#endif
}
