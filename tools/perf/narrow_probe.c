/* The copy rate one core gets narrowing fp32 to 16 bits with the least
 * arithmetic (keep each float's upper half) and streaming stores, against
 * memcpy of the same traffic (reads + writes): the most ak_convert's
 * narrowing or ak_kv_cache_store can reach against the benchmark's memcpy
 * on this machine. Not part of the library; x86-64 with AVX-512BW only:
 *
 *   cc -O2 -mavx512f -mavx512bw tools/perf/narrow_probe.c -o /tmp/narrow_probe
 *   /tmp/narrow_probe [bytes requested ahead of the read, 0: none]
 *
 * 64 MiB of fp32 read and 32 MiB written, against a 48 MiB memcpy, on huge
 * pages; the median of 21 interleaved pairs. */
#define _GNU_SOURCE
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
static int by_value(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
static void *huge_buffer(size_t n) {
  void *p = aligned_alloc((size_t)2 << 20, n);
  if (!p) exit(1);
  madvise(p, n, MADV_HUGEPAGE);
  memset(p, 1, n);
  return p;
}

int main(int argc, char **argv) {
  enum { kPairs = 21 };
  const long ahead = argc > 1 ? atol(argv[1]) : 4096;
  const size_t n = (size_t)16 << 20, copy = (size_t)48 << 20;
  float *src = huge_buffer(n * 4);
  unsigned short *dst = huge_buffer(n * 2);
  char *from = huge_buffer(copy), *to = huge_buffer(copy);
  double narrow[kPairs], memcpy_s[kPairs], ratio[kPairs];
  for (int it = 0; it < kPairs; ++it) {
    const double t0 = now();
    for (size_t i = 0; i < n; i += 16) {
      if (ahead) _mm_prefetch((const char *)(src + i) + ahead, _MM_HINT_T1);
      const __m512i u = _mm512_castps_si512(_mm512_load_ps(src + i));
      _mm256_stream_si256((__m256i *)(dst + i), _mm512_cvtepi32_epi16(_mm512_srli_epi32(u, 16)));
    }
    _mm_sfence();
    const double t1 = now();
    memcpy(to, from, copy);
    const double t2 = now();
    narrow[it] = t1 - t0, memcpy_s[it] = t2 - t1, ratio[it] = (t2 - t1) / (t1 - t0);
  }
  qsort(narrow, kPairs, sizeof(double), by_value);
  qsort(memcpy_s, kPairs, sizeof(double), by_value);
  qsort(ratio, kPairs, sizeof(double), by_value);
  const double traffic = (double)(n * 6);
  printf("narrowing %.2f GB/s, memcpy %.2f GB/s (bytes read + written), narrowing/memcpy %.2f\n",
         traffic / narrow[kPairs / 2] / 1e9, traffic / memcpy_s[kPairs / 2] / 1e9,
         ratio[kPairs / 2]);
  return dst[n - 1] == 0x0101 ? 0 : 2; /* memset made every float 0x01010101 */
}
