#include "bench_common.hpp"

#include "peers.hpp"

#include <attnkern.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <new>
#include <omp.h>
#include <random>
#include <thread>

#include <sys/mman.h>

namespace akb {

const char *impl_name(Impl impl) {
  switch (impl) {
  case Impl::attnkern:
    return "attnkern";
  case Impl::onednn:
    return "onednn";
  case Impl::openblas:
    return "openblas";
  case Impl::scalar:
    return "scalar";
  }
  return "?";
}

void Buffer::Free::operator()(float *p) const { std::free(p); }

namespace {

constexpr std::size_t kHugePage = std::size_t{2} << 20;

bool huge_pages_wanted() {
  static const bool wanted = [] {
    const char *env = std::getenv("AK_BENCH_HUGEPAGES");
    return env == nullptr || std::string(env) != "0";
  }();
  return wanted;
}

// AnonHugePages of this process, in KiB (0 where the kernel does not say).
long anon_huge_kib() {
  std::ifstream in("/proc/self/smaps_rollup");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("AnonHugePages:", 0) == 0) return std::strtol(line.c_str() + 14, nullptr, 10);
  return 0;
}

} // namespace

Buffer::Buffer(std::size_t n) : n_(n) {
  std::size_t bytes = std::max<std::size_t>(n, 1) * sizeof(float);
  const bool huge = huge_pages_wanted() && bytes >= kHugeBufferBytes;
  const std::size_t align = huge ? kHugePage : 64;
  bytes = (bytes + align - 1) / align * align; // aligned_alloc wants a multiple of the alignment
  auto *p = static_cast<float *>(std::aligned_alloc(align, bytes));
  if (p == nullptr) throw std::bad_alloc();
  if (huge) madvise(p, bytes, MADV_HUGEPAGE); // advice only: without THP it changes nothing
  std::fill(p, p + n, 0.0f);
  p_.reset(p);
}

std::string huge_pages_note() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string thp;
  std::getline(in, thp);
  if (thp.empty()) thp = "unknown";
  if (!huge_pages_wanted())
    return "off (AK_BENCH_HUGEPAGES=0): 4 KiB pages; kernel THP setting: " + thp;
  // A probe buffer shows whether the advice takes effect here.
  const long before = anon_huge_kib();
  std::string got;
  {
    Buffer probe(kHugeBufferBytes / sizeof(float));
    got = anon_huge_kib() > before ? "granted" : "not granted";
  }
  return "buffers of 4 MiB and more 2 MiB-aligned with MADV_HUGEPAGE (" + got +
         "); kernel THP setting: " + thp;
}

void fill_normal(Buffer &buf, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  float *p = buf.data();
  for (std::size_t i = 0; i < buf.size(); ++i) p[i] = dist(gen);
}

std::uint64_t seed_of(const std::string &key) {
  std::uint64_t h = 1469598103934665603ull; // FNV-1a
  for (unsigned char ch : key) {
    h ^= ch;
    h *= 1099511628211ull;
  }
  return h;
}

double max_rel_diff(const float *x, const float *y, std::size_t n) {
  double diff = 0.0, scale = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    const double a = x[i], b = y[i];
    if (!std::isfinite(a) || !std::isfinite(b)) return std::numeric_limits<double>::infinity();
    diff = std::max(diff, std::fabs(a - b));
    scale = std::max(scale, std::max(std::fabs(a), std::fabs(b)));
  }
  return scale > 0.0 ? diff / scale : diff;
}

double agree_tolerance() {
  static const double tol = [] {
    const char *s = std::getenv("AK_BENCH_TOLERANCE");
    char *end = nullptr;
    const double v = s != nullptr ? std::strtod(s, &end) : 0.0;
    return s != nullptr && end != s && v >= 0.0 ? v : 1e-4;
  }();
  return tol;
}

const std::vector<int> &bench_thread_counts() {
  static const std::vector<int> counts = [] {
    std::vector<int> v;
    bool skipped = false;
    const char *text = std::getenv("AK_BENCH_THREADS");
    if (const char *s = text) {
      while (*s != '\0') {
        char *end = nullptr;
        const long t = std::strtol(s, &end, 10);
        if (end == s) { // not a number: skip one character
          if (*s != ',' && *s != ' ') skipped = true;
          ++s;
          continue;
        }
        if (t > 0 && t <= 1024) {
          if (std::find(v.begin(), v.end(), t) == v.end()) v.push_back(static_cast<int>(t));
        } else {
          skipped = true;
        }
        s = end;
      }
    }
    if (skipped || (text && v.empty()))
      std::fprintf(stderr,
                   "ak_bench: AK_BENCH_THREADS=\"%s\" is not a comma list of thread counts "
                   "(1-1024); using the counts read from it, else 1,2\n",
                   text);
    if (v.empty()) v = {1, 2};
    return v;
  }();
  return counts;
}

void set_threads(int threads) {
  ak_set_num_threads(threads);
  peers::openblas_set_threads(threads);
  peers::omp_set_threads(threads);
}

namespace {
// Which thread pool ran last, and with how many threads.
enum class Pool { none, openblas, openmp };
Pool g_last_pool = Pool::none;
int g_last_threads = 1;
} // namespace

void settle(Impl impl, int threads) {
  const Pool pool = impl == Impl::openblas ? Pool::openblas : Pool::openmp;
  if (g_last_pool != Pool::none && g_last_pool != pool && g_last_threads > 1) {
    // Idle workers busy-wait before they sleep: OpenBLAS (pthreads build)
    // for about 2^28 cycles (~0.1 s), GNU OpenMP for a few ms; the waits
    // below cover both, so no spinning pool steals a core from the next one.
    std::this_thread::sleep_for(
        std::chrono::milliseconds(g_last_pool == Pool::openblas ? 200 : 20));
  }
  g_last_pool = pool;
  g_last_threads = threads;
}

constexpr std::size_t kMembwFloats = std::size_t{64} << 20; // 256 MiB

__attribute__((noinline)) double stream_sum(const float *x, std::size_t n, int threads) {
  constexpr std::size_t kLanes = 32;
  const std::size_t chunks = n / kLanes;
  double total = 0.0;
#pragma omp parallel num_threads(threads) reduction(+ : total) if (threads > 1)
  {
    const std::size_t t = static_cast<std::size_t>(omp_get_thread_num());
    const std::size_t nt = static_cast<std::size_t>(omp_get_num_threads());
    const std::size_t c0 = chunks * t / nt, c1 = chunks * (t + 1) / nt;
    float acc[kLanes] = {};
    for (std::size_t c = c0; c < c1; ++c) {
      const float *p = x + c * kLanes;
      for (std::size_t j = 0; j < kLanes; ++j) acc[j] += p[j];
    }
    double part = 0.0;
    for (std::size_t j = 0; j < kLanes; ++j) part += acc[j];
    total += part;
  }
  for (std::size_t i = chunks * kLanes; i < n; ++i) total += x[i];
  return total;
}

const Buffer &membw_read_buffer() {
  static const Buffer buf = [] {
    Buffer b(kMembwFloats);
    std::fill(b.data(), b.data() + b.size(), 1.0f);
    return b;
  }();
  return buf;
}

double read_gbps_now(int threads) {
  const Buffer &buf = membw_read_buffer();
  settle(Impl::scalar, threads); // an OpenMP loop
  double gbps[3];
  for (double &g : gbps) {
    const auto t0 = std::chrono::steady_clock::now();
    const double sum = stream_sum(buf.data(), buf.size(), threads);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // All ones: each float lane sums at most 2^21 of them, exactly.
    g = sum == static_cast<double>(buf.size()) ? 4.0 * double(buf.size()) / s / 1e9 : 0.0;
  }
  std::sort(gbps, gbps + 3);
  return gbps[1];
}

} // namespace akb
