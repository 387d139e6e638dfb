/* The read bandwidth one core gets from a pool read page by page in a
 * shuffled order (as decode reads a paged K/V cache), against the same bytes
 * read in address order, with software requests `ahead` pages on (as the
 * typed decode path requests its rows), on 4 KiB pages or on huge pages.
 * Not part of the library; x86-64 with AVX-512 only:
 *
 *   cc -O2 -mavx512f tools/perf/page_read_probe.c -o /tmp/page_read_probe
 *   /tmp/page_read_probe [page bytes] [pages ahead] [huge: 0 or 1]
 *                        (default 4096 2 0: a bf16 page of 16 keys at d 128)
 *
 * Prints the medians of 15 interleaved passes over 256 MiB, in order and
 * shuffled, and their ratio: the most a paged decode of that page size can
 * reach against a contiguous cache on this machine. */
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

/* Sums every float of the pages in `order`, requesting page c + ahead's
 * lines while reading page c's. */
static float read_pages(const char *buf, const size_t *order, size_t n, size_t page, int ahead) {
  __m512 acc = _mm512_setzero_ps();
  for (size_t c = 0; c < n; ++c) {
    const char *p = buf + order[c] * page;
    const char *q = ahead > 0 && c + (size_t)ahead < n ? buf + order[c + (size_t)ahead] * page : 0;
    for (size_t x = 0; x < page; x += 64) {
      if (q) __builtin_prefetch(q + x, 0, 1);
      acc = _mm512_add_ps(acc, _mm512_load_ps((const float *)(p + x)));
    }
  }
  return _mm512_reduce_add_ps(acc);
}

int main(int argc, char **argv) {
  const size_t page = argc > 1 ? (size_t)atol(argv[1]) : 4096, total = (size_t)256 << 20;
  const int ahead = argc > 2 ? atoi(argv[2]) : 2, huge = argc > 3 ? atoi(argv[3]) : 0;
  enum { kPasses = 15 };
  if (page < 64 || page % 64 || total % page) {
    fprintf(stderr, "page bytes: a multiple of 64 that divides 256 MiB\n");
    return 2;
  }
  const size_t n = total / page;
  char *buf = aligned_alloc((size_t)2 << 20, total);
  size_t *order = malloc(n * sizeof *order), *in_order = malloc(n * sizeof *in_order);
  if (!buf || !order || !in_order) return 1;
  if (huge) madvise(buf, total, MADV_HUGEPAGE);
  for (size_t i = 0; i < total / sizeof(float); ++i) ((float *)buf)[i] = 1.0f;
  for (size_t i = 0; i < n; ++i) order[i] = in_order[i] = i;
  srand(7);
  for (size_t i = n - 1; i > 0; --i) {
    const size_t j = (size_t)rand() % (i + 1), t = order[i];
    order[i] = order[j], order[j] = t;
  }
  double secs[2][kPasses];
  for (int pass = 0; pass < kPasses; ++pass)
    for (int shuffled = 0; shuffled < 2; ++shuffled) {
      const double t0 = now();
      const float sum = read_pages(buf, shuffled ? order : in_order, n, page, ahead);
      secs[shuffled][pass] = now() - t0;
      if (sum != (float)(total / sizeof(float))) return 3; /* each lane sums 2^22 ones: exact */
    }
  qsort(secs[0], kPasses, sizeof(double), by_value);
  qsort(secs[1], kPasses, sizeof(double), by_value);
  const double a = secs[0][kPasses / 2], b = secs[1][kPasses / 2];
  printf("pages of %zu bytes, requests %d pages ahead, %s: in order %.2f GB/s, shuffled %.2f GB/s, "
         "shuffled/in order %.3f\n",
         page, ahead, huge ? "huge pages" : "4 KiB pages", (double)total / a / 1e9,
         (double)total / b / 1e9, a / b);
  return 0;
}
