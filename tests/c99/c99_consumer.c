/*
 * A plain C99 program using attnkern through its public header only. Built
 * twice: against the shared library and against the static one. Exits 0 when
 * every check passes, 1 otherwise (one line per failed check on stderr).
 */
#include <attnkern.h>

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "layout.h"

static int g_failures = 0;

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);                     \
      ++g_failures;                                                                                \
    }                                                                                              \
  } while (0)

static int near(float got, double want, double tol) {
  const double d = (double)got - want;
  return d <= tol && d >= -tol;
}

static int contains(const char *haystack, const char *needle) {
  return haystack != NULL && strstr(haystack, needle) != NULL;
}

static void check_version(void) {
  char expected[32];
  sprintf(expected, "%d.%d.%d", AK_VERSION_MAJOR, AK_VERSION_MINOR, AK_VERSION_PATCH);
  CHECK(ak_version() != NULL && strcmp(ak_version(), expected) == 0);
  CHECK(ak_abi_version() == AK_ABI_VERSION);
  CHECK(strncmp(ak_status_string(AK_ERR_BAD_SHAPE), "AK_ERR_BAD_SHAPE", 16) == 0);
}

static void check_isa(void) {
  static const char *const known[] = {"avx512", "avx2", "sse2", "neon", "scalar"};
  const char *isa = ak_get_isa();
  int found = 0;
  size_t i;
  CHECK(isa != NULL);
  for (i = 0; isa != NULL && i < sizeof known / sizeof known[0]; ++i)
    if (strcmp(isa, known[i]) == 0) found = 1;
  CHECK(found);
  CHECK(ak_isa_supported(isa) == 1 && ak_isa_supported("scalar") == 1);
  CHECK(ak_isa_supported("avx9000") == 0);
  CHECK(ak_set_isa("avx9000") == AK_ERR_BAD_ARGUMENT);
  CHECK(contains(ak_last_error(), "avx9000"));
  CHECK(isa != NULL && strcmp(ak_get_isa(), isa) == 0);
  CHECK(ak_set_num_threads(0) == AK_OK);
  CHECK(ak_get_num_threads() >= 1);
  CHECK(ak_set_num_threads_local(1) == AK_OK);
  CHECK(ak_get_num_threads_local() == 1 && ak_get_num_threads() == 1);
  CHECK(ak_set_num_threads_local(0) == AK_OK);
  ak_release_scratch();
}

static void check_sgemm(void) {
  /* A = [1 2 3; 4 5 6], B = [7 8; 9 10; 11 12]: A B = [58 64; 139 154]. */
  const float a[6] = {1, 2, 3, 4, 5, 6};
  const float b[6] = {7, 8, 9, 10, 11, 12};
  const float bt[6] = {7, 9, 11, 8, 10, 12}; /* B^T, stored 2 x 3 */
  /* C is 2 x 2 inside a 2 x 3 buffer (ldc = 3): column 2 must stay -1. */
  float c[6] = {-1, -1, -1, -1, -1, -1};
  CHECK(ak_sgemm(AK_NO_TRANS, AK_NO_TRANS, 2, 2, 3, 1.0f, a, 3, b, 2, 0.0f, c, 3) == AK_OK);
  CHECK(c[0] == 58 && c[1] == 64 && c[3] == 139 && c[4] == 154);
  CHECK(c[2] == -1 && c[5] == -1);
  /* Through B^T with alpha = 2, beta = 1: C = 2 A B + C = 3 A B. */
  CHECK(ak_sgemm(AK_NO_TRANS, AK_TRANS, 2, 2, 3, 2.0f, a, 3, bt, 3, 1.0f, c, 3) == AK_OK);
  CHECK(c[0] == 174 && c[1] == 192 && c[3] == 417 && c[4] == 462);
  CHECK(c[2] == -1 && c[5] == -1);
}

static void check_softmax(void) {
  const float x[6] = {1, 2, 3, 0, 0, 0};
  float y[6];
  CHECK(ak_softmax(2, 3, x, 3, y, 3) == AK_OK);
  CHECK(near(y[0], 0.0900305731703804, 1e-6) && near(y[1], 0.2447284710547976, 1e-6) &&
        near(y[2], 0.6652409557748218, 1e-6));
  CHECK(near(y[3], 1.0 / 3, 1e-6) && near(y[4], 1.0 / 3, 1e-6) && near(y[5], 1.0 / 3, 1e-6));
  CHECK(ak_log_softmax(1, 3, x, 3, y, 3) == AK_OK);
  CHECK(near(y[0], -2.4076059644443806, 1e-6) && near(y[2], -0.4076059644443806, 1e-6));
}

static void check_errors(void) {
  const float x[4] = {0, 0, 0, 0};
  float y[4] = {5, 5, 5, 5};
  ak_attention_desc d;
  /* A C caller may pass any int for an enum parameter. */
  CHECK(ak_sgemm((ak_trans)2, AK_NO_TRANS, 1, 1, 1, 1.0f, x, 1, x, 1, 0.0f, y, 1) ==
        AK_ERR_BAD_ARGUMENT);
  CHECK(contains(ak_last_error(), "ta = 2"));
  CHECK(ak_softmax(-1, 4, x, 4, y, 4) == AK_ERR_BAD_SHAPE);
  CHECK(contains(ak_last_error(), "ak_softmax") && contains(ak_last_error(), "rows"));
  CHECK(ak_softmax(1, 4, NULL, 4, y, 4) == AK_ERR_NULL_POINTER);
  CHECK(contains(ak_last_error(), "x is NULL"));
  CHECK(ak_softmax(1, 4, x, 3, y, 4) == AK_ERR_BAD_STRIDE);
  CHECK(contains(ak_last_error(), "ldx"));
  CHECK(y[0] == 5 && y[1] == 5 && y[2] == 5 && y[3] == 5);
  CHECK(ak_softmax(0, 4, NULL, 4, NULL, 4) == AK_OK); /* empty: NULL is fine */

  ak_attention_desc_init(&d);
  CHECK(d.struct_size == sizeof d && d.window_left == -1 && d.window_right == -1);
  /* The 0.2 fields start at their defaults: fp32, no paging, no modifiers. */
  CHECK(d.k_type == AK_F32 && d.v_type == AK_F32 && d.softcap == 0.0f);
  CHECK(d.alibi_slopes == NULL && d.sinks == NULL && d.block_table == NULL);
  CHECK(d.block_table_stride == 0 && d.page_size == 0 && d.num_pages == 0);
  CHECK(d.k_page_strides[0] == 0 && d.k_page_strides[1] == 0 && d.k_page_strides[2] == 0);
  CHECK(d.v_page_strides[0] == 0 && d.v_page_strides[1] == 0 && d.v_page_strides[2] == 0);
  CHECK(d.cu_seqlens_q == NULL && d.cu_seqlens_k == NULL);
}

/* ak_rope and ak_embedding from C: a quarter turn of one pair, a lookup with
   an unknown token, and a refused id. */
static void check_rope_embedding(void) {
  float x[4] = {1.0f, 0.0f, 7.0f, 8.0f}; /* rotary_dim 2 of head_dim 4 */
  const float quarter_turn = 1.57079632679f;
  const int32_t pos = 1;
  const float table[6] = {1, 2, 3, 4, 5, 6};
  const int32_t ids[2] = {2, -1}, bad[1] = {3};
  float out[4] = {9, 9, 9, 9};
  CHECK(ak_rope(1, 1, 1, 4, 2, AK_ROPE_INTERLEAVED, &pos, 0.0f, &quarter_turn, x, NULL) == AK_OK);
  CHECK(x[0] > -1e-6f && x[0] < 1e-6f && x[1] > 1.0f - 1e-6f && x[1] < 1.0f + 1e-6f);
  CHECK(x[2] == 7.0f && x[3] == 8.0f);
  CHECK(ak_embedding(2, ids, 3, 2, table, 2, out, 2) == AK_OK);
  CHECK(out[0] == 5 && out[1] == 6 && out[2] == 0 && out[3] == 0);
  CHECK(ak_embedding(1, bad, 3, 2, table, 2, out, 2) == AK_ERR_BAD_ARGUMENT);
  CHECK(contains(ak_last_error(), "ids[0] = 3"));
}

/* A C99 compiler lays the descriptor out as every binding expects on LP64,
   the 0.1 size included (a 0.1 program passes it as struct_size). */
static void check_layout(void) {
  size_t got[AK_TEST_LAYOUT_FIELDS];
  static const size_t lp64[AK_TEST_LAYOUT_FIELDS] = AK_TEST_LAYOUT_LP64;
  int i;
  AK_TEST_LAYOUT(got);
  CHECK(AK_ATTENTION_DESC_SIZE_0_1 == offsetof(ak_attention_desc, k_type));
  if (!AK_TEST_IS_LP64) return;
  CHECK(AK_ATTENTION_DESC_SIZE_0_1 == 240 && sizeof(ak_attention_desc) == 368);
  for (i = 0; i < AK_TEST_LAYOUT_FIELDS; ++i) {
    if (got[i] != lp64[i]) {
      fprintf(stderr, "layout entry %d: %lu, the LP64 ABI has %lu\n", i, (unsigned long)got[i],
              (unsigned long)lp64[i]);
      ++g_failures;
    }
  }
}

int main(void) {
  check_version();
  check_isa();
  check_sgemm();
  check_softmax();
  check_errors();
  check_rope_embedding();
  check_layout();
  if (g_failures != 0) {
    fprintf(stderr, "c99_consumer: %d check(s) failed\n", g_failures);
    return 1;
  }
  printf("c99_consumer: all checks passed (isa %s, attnkern %s)\n", ak_get_isa(), ak_version());
  return 0;
}
