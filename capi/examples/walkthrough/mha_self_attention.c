/* Multi-head self-attention with per-head weights: the sentence of
 * self_attention.c (word vectors + position encoding) through
 * ak_mha_self_attention with 2 heads, each with its own w_q, w_k (d_k = 2)
 * and w_v (d_v = 3); each head's output printed, then the heads side by side
 * as a transformer layer would feed them to its output projection.
 *
 *   cc mha_self_attention.c -I<prefix>/include -L<prefix>/lib -lattnkern -lm -o mha_self_attention
 *
 * check_c_output.py recomputes every head in float64 from the printed
 * inputs; mha_self_attention.py is the same in Python. */
#include <stdio.h>
#include <stdlib.h>

#include "attnkern.h"

#define AK_CHECK(call)                                                                             \
  do {                                                                                             \
    ak_status st_ = (call);                                                                        \
    if (st_ != AK_OK) {                                                                            \
      fprintf(stderr, "%s failed: %s\n  %s\n", #call, ak_status_string(st_), ak_last_error());     \
      return EXIT_FAILURE;                                                                         \
    }                                                                                              \
  } while (0)

enum { N = 4, D_MODEL = 3, HEADS = 2, D_K = 2, D_V = 3 };

static const char *const words[N] = {"the", "cat", "sat", "down"};

/* Prints a step as "-- title [rows x cols]" and one labelled row a line (the
 * layout check_c_output.py reads; labels NULL: the row numbers). */
static void show(const char *title, const float *m, int rows, int cols, const char *const *labels) {
  printf("-- %s [%d x %d]\n", title, rows, cols);
  for (int r = 0; r < rows; ++r) {
    if (labels)
      printf("%-12s", labels[r]);
    else
      printf("%-12d", r);
    for (int c = 0; c < cols; ++c) printf("%11.6f", m[r * cols + c]);
    printf("\n");
  }
}

/* Made-up weights in tenths from -0.5 to 0.5, different for every head and
 * matrix (which = 0, 1, 2 for q, k, v); mha_self_attention.py uses the same. */
static void make_weights(int which, int cols, float *w) {
  for (int h = 0; h < HEADS; ++h)
    for (int r = 0; r < D_MODEL; ++r)
      for (int c = 0; c < cols; ++c)
        w[(h * D_MODEL + r) * cols + c] =
            (float)((7 * h + 5 * r + 3 * c + 2 * which) % 11 - 5) / 10;
}

int main(void) {
  float x[N * D_MODEL] = {0.1f, 0.9f, 0.2f, 0.8f, 0.3f, 0.5f, 0.4f, 0.2f, 0.9f, 0.3f, 0.7f, 0.6f};
  float pe[N * D_MODEL];
  AK_CHECK(ak_position_encoding(N, D_MODEL, 10000.0f, pe));
  for (int i = 0; i < N * D_MODEL; ++i) x[i] += pe[i];
  show("x = word vectors + position encoding", x, N, D_MODEL, words);

  /* [head, d_model, d]: each head projects the same x its own way, so that
     heads can attend to different relations between the words. */
  float w_q[HEADS * D_MODEL * D_K], w_k[HEADS * D_MODEL * D_K], w_v[HEADS * D_MODEL * D_V];
  make_weights(0, D_K, w_q);
  make_weights(1, D_K, w_k);
  make_weights(2, D_V, w_v);
  char title[64];
  for (int h = 0; h < HEADS; ++h) {
    snprintf(title, sizeof title, "head %d w_q", h);
    show(title, w_q + h * D_MODEL * D_K, D_MODEL, D_K, NULL);
    snprintf(title, sizeof title, "head %d w_k", h);
    show(title, w_k + h * D_MODEL * D_K, D_MODEL, D_K, NULL);
    snprintf(title, sizeof title, "head %d w_v", h);
    show(title, w_v + h * D_MODEL * D_V, D_MODEL, D_V, NULL);
  }

  /* Projections, scores scaled by 1/sqrt(d_k), softmax and context, for
     every head in one call; out is [head, word, d_v]. */
  float out[HEADS * N * D_V];
  AK_CHECK(ak_mha_self_attention(N, D_MODEL, HEADS, D_K, D_V, x, w_q, w_k, w_v, AK_MASK_NONE, out));
  for (int h = 0; h < HEADS; ++h) {
    snprintf(title, sizeof title, "head %d context", h);
    show(title, out + h * N * D_V, N, D_V, words);
  }

  /* Side by side, [word, head * d_v]: the input of a layer's w_o. */
  float concat[N * HEADS * D_V];
  for (int t = 0; t < N; ++t)
    for (int h = 0; h < HEADS; ++h)
      for (int c = 0; c < D_V; ++c) concat[(t * HEADS + h) * D_V + c] = out[(h * N + t) * D_V + c];
  show("heads concatenated", concat, N, HEADS * D_V, words);
  return EXIT_SUCCESS;
}
