// Shared pieces of ak_bench: buffers, inputs, agreement checks, thread control.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace akb {

// The implementations compared. The order is the order of registration.
enum class Impl { attnkern = 0, onednn = 1, openblas = 2, scalar = 3 };
const char *impl_name(Impl impl);

// 64-byte aligned float storage, zero-filled (so its pages are touched before
// anything is timed). Buffers of kHugeBufferBytes and more are 2 MiB-aligned
// and advised as transparent huge pages (unless AK_BENCH_HUGEPAGES=0), for
// every implementation and the bandwidth references alike: on 4 KiB pages a
// streaming read's rate can follow where the buffer lies rather than the code
// reading it (by up to a third between two buffers of one process), which
// would skew a kernel against the read reference it is held to.
constexpr std::size_t kHugeBufferBytes = std::size_t{4} << 20;
class Buffer {
public:
  Buffer() = default;
  explicit Buffer(std::size_t n);
  float *data() { return p_.get(); }
  const float *data() const { return p_.get(); }
  std::size_t size() const { return n_; }

private:
  struct Free {
    void operator()(float *p) const;
  };
  std::unique_ptr<float, Free> p_;
  std::size_t n_ = 0;
};

// What Buffer does about huge pages here, for the context: on or off, and
// whether a probe buffer was granted them.
std::string huge_pages_note();

// Standard normal entries from a fixed seed: the same shape always sees the
// same inputs, in the timed runs and in the agreement check alike.
void fill_normal(Buffer &buf, std::uint64_t seed);
std::uint64_t seed_of(const std::string &key);

// max_i |x_i - y_i| / max(max_i |x_i|, max_i |y_i|): a relative difference
// that does not blow up on entries near zero. Infinity if either holds a NaN
// or an infinity.
double max_rel_diff(const float *x, const float *y, std::size_t n);

// Largest max_rel_diff an implementation may show against its closest peer:
// 1e-4, or the value of the environment variable AK_BENCH_TOLERANCE (set it
// tiny to see the check reject results).
double agree_tolerance();

// Sets the thread count of every library at once: attnkern
// (ak_set_num_threads), OpenBLAS (openblas_set_num_threads) and the OpenMP
// runtime that oneDNN and the scalar softmax use (omp_set_num_threads).
void set_threads(int threads);

// The thread counts every benchmark runs at: 1 and 2 (this project's 2-core
// machines), or the comma-separated list in AK_BENCH_THREADS (e.g. "1,4,16"
// on a larger machine). Entries that are not integers in [1, 1024] are
// skipped with a warning on stderr; an empty result falls back to 1 and 2.
const std::vector<int> &bench_thread_counts();

// Call before the timed loop of a benchmark of `impl` with `threads` (and
// after any untimed call of `impl`). When the thread pool used last belongs to
// another runtime and had more than one thread, waits until its workers stop
// busy-waiting: OpenBLAS's pthreads and GNU OpenMP both spin for a while after
// each call and would steal a core from whatever runs next on a 2-core machine.
void settle(Impl impl, int threads);

// The streaming-read reference (membw/read): the sum of x[0, n) on
// `threads` threads, 32 independent float accumulators per thread (the
// compiler keeps them in vector registers), so the loop runs at the speed of
// the loads, i.e. of memory for an array far larger than L3.
double stream_sum(const float *x, std::size_t n, int threads);
// Its array: 256 MiB of ones (a Buffer, so on huge pages like the rest).
const Buffer &membw_read_buffer();

// GB/s of a streaming read of membw_read_buffer() on `threads` threads,
// taken now: the median of three passes. The memory-bound benchmarks
// (decode, skinny SGEMM) take one before and one after their timed loop and
// report the mean as the counter read_adj: on a shared machine the read rate
// drifts by 10-20 % over minutes, so a reference taken next to the workload is the
// steadier yardstick for its % of read BW (the run's membw/read stays in the
// tables beside it).
double read_gbps_now(int threads);

} // namespace akb
