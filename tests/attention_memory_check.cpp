// Flat memory: ak_attention over a long sequence must not allocate anything
// of size q_len x kv_len. Batch 1, 1 head, head_dim 64, L = 65536 (a score
// matrix would be 16 GiB), causal; the peak resident set may grow by less
// than 64 MiB over the inputs and outputs, which are allocated and touched
// before the call. Prints the figures; exits non-zero on failure.
//
//   attention_memory_check [L] [threads]     (defaults 65536, 2)
#include <attnkern.h>

#include <sys/resource.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

double peak_rss_mib() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0; // Linux reports KiB
}

} // namespace

int main(int argc, char **argv) {
  const std::int64_t L = argc > 1 ? std::atoll(argv[1]) : 65536;
  const int threads = argc > 2 ? std::atoi(argv[2]) : 2;
  const std::int64_t d = 64;
  const std::size_t n = static_cast<std::size_t>(L * d);
  std::vector<float> q(n), k(n), v(n), out(n, -1.0f);
  std::uint32_t s = 12345;
  auto next = [&s] {
    s = s * 1664525u + 1013904223u;
    return static_cast<float>(s >> 8) / 16777216.0f - 0.5f;
  };
  for (std::size_t i = 0; i < n; ++i) {
    q[i] = next();
    k[i] = next();
    v[i] = next();
  }
  ak_set_num_threads(threads);
  const double before = peak_rss_mib();

  ak_attention_desc desc;
  ak_attention_desc_init(&desc);
  desc.batch = 1;
  desc.num_heads = desc.num_kv_heads = 1;
  desc.q_len = desc.kv_len = L;
  desc.head_dim = d;
  desc.mask = AK_MASK_CAUSAL_TOP_LEFT;
  const ak_status st = ak_attention(&desc, q.data(), k.data(), v.data(), out.data());
  const double after = peak_rss_mib();
  if (st != AK_OK) {
    std::fprintf(stderr, "ak_attention failed: %s\n", ak_last_error());
    return 1;
  }
  // Query 0 sees key 0 only: its output is v[0] exactly.
  for (std::int64_t c = 0; c < d; ++c)
    if (out[c] != v[c]) {
      std::fprintf(stderr, "out[0][%lld] = %g, expected v[0][%lld] = %g\n",
                   static_cast<long long>(c), out[c], static_cast<long long>(c), v[c]);
      return 1;
    }
  for (float x : out)
    if (!std::isfinite(x)) {
      std::fprintf(stderr, "non-finite output\n");
      return 1;
    }
  const double io = 4.0 * 4.0 * static_cast<double>(n) / (1024.0 * 1024.0);
  const double grew = after - before;
  std::printf("L=%lld d=%lld threads=%d: inputs+output %.0f MiB, peak RSS %.1f MiB before the "
              "call, %.1f MiB after: grew %.1f MiB (limit 64)\n",
              static_cast<long long>(L), static_cast<long long>(d), threads, io, before, after,
              grew);
  return grew < 64.0 ? 0 : 1;
}
