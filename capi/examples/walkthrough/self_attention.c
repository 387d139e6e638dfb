/* Self-attention, step by step, on a 4-word sentence with 3-dimensional word
 * vectors: position encoding, the q/k/v projections (d_k = 2, d_v = 4), the
 * scaled scores, their softmax and the context vectors, each step printed;
 * then the same attention in one ak_attention call, shown equal.
 *
 *   cc self_attention.c -I<prefix>/include -L<prefix>/lib -lattnkern -lm -o self_attention
 *
 * The output is parsed by check_c_output.py, which recomputes every step in
 * float64; self_attention.py is the same walk in Python. */
#include <math.h>
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

enum { N = 4, D_MODEL = 3, D_K = 2, D_V = 4 };

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

int main(void) {
  /* Made-up word vectors and projections: short decimals, so that the
     printed inputs are the inputs. */
  float x[N * D_MODEL] = {0.1f, 0.9f, 0.2f, 0.8f, 0.3f, 0.5f, 0.4f, 0.2f, 0.9f, 0.3f, 0.7f, 0.6f};
  const float w_q[D_MODEL * D_K] = {0.6f, -0.2f, 0.3f, 0.8f, -0.5f, 0.4f};
  const float w_k[D_MODEL * D_K] = {0.4f, 0.7f, -0.6f, 0.2f, 0.5f, 0.3f};
  const float w_v[D_MODEL * D_V] = {0.2f, 0.5f, -0.3f, 0.8f, 0.7f, -0.1f,
                                    0.4f, 0.2f, -0.4f, 0.6f, 0.9f, 0.1f};
  show("word vectors", x, N, D_MODEL, words);

  /* 1. Word order: attention itself is blind to it, so each position adds
     its own sinusoid (sin, cos at frequency 1; an odd dim leaves column 2 at 0). */
  float pe[N * D_MODEL];
  AK_CHECK(ak_position_encoding(N, D_MODEL, 10000.0f, pe));
  show("position encoding", pe, N, D_MODEL, words);
  for (int i = 0; i < N * D_MODEL; ++i) x[i] += pe[i];
  show("x = word vectors + position encoding", x, N, D_MODEL, words);

  /* 2. Projections: queries and keys must share d_k; values may be wider. */
  float q[N * D_K], k[N * D_K], v[N * D_V];
  show("w_q", w_q, D_MODEL, D_K, NULL);
  show("w_k", w_k, D_MODEL, D_K, NULL);
  show("w_v", w_v, D_MODEL, D_V, NULL);
  AK_CHECK(ak_sgemm(AK_NO_TRANS, AK_NO_TRANS, N, D_K, D_MODEL, 1.0f, x, D_MODEL, w_q, D_K, 0.0f, q,
                    D_K));
  AK_CHECK(ak_sgemm(AK_NO_TRANS, AK_NO_TRANS, N, D_K, D_MODEL, 1.0f, x, D_MODEL, w_k, D_K, 0.0f, k,
                    D_K));
  AK_CHECK(ak_sgemm(AK_NO_TRANS, AK_NO_TRANS, N, D_V, D_MODEL, 1.0f, x, D_MODEL, w_v, D_V, 0.0f, v,
                    D_V));
  show("q = x w_q", q, N, D_K, words);
  show("k = x w_k", k, N, D_K, words);
  show("v = x w_v", v, N, D_V, words);

  /* 3. Scores q k^T, scaled by 1/sqrt(d_k) so that their spread does not grow
     with d_k and push the softmax into saturation; alpha does the scaling. */
  float scores[N * N];
  const float scale = 1.0f / sqrtf((float)D_K);
  AK_CHECK(ak_sgemm(AK_NO_TRANS, AK_TRANS, N, N, D_K, scale, q, D_K, k, D_K, 0.0f, scores, N));
  show("scores = q k^T / sqrt(d_k)", scores, N, N, words);

  /* 4. Each row becomes weights that sum to 1. */
  float weights[N * N];
  AK_CHECK(ak_softmax(N, N, scores, N, weights, N));
  show("weights = softmax(scores)", weights, N, N, words);

  /* 5. Each word's context vector: the values averaged with its weights. */
  float context[N * D_V];
  AK_CHECK(
      ak_sgemm(AK_NO_TRANS, AK_NO_TRANS, N, D_V, N, 1.0f, weights, N, v, D_V, 0.0f, context, D_V));
  show("context = weights v", context, N, D_V, words);

  /* 6. All of 3-5 in one fused call, which never forms the score matrix
     (except into probs, when asked). One batch, one head. */
  ak_attention_desc d;
  ak_attention_desc_init(&d);
  d.batch = 1, d.num_heads = 1, d.num_kv_heads = 1;
  d.q_len = N, d.kv_len = N, d.head_dim = D_K, d.head_dim_v = D_V; /* scale 0 = 1/sqrt(d_k) */
  float fused[N * D_V];
  AK_CHECK(ak_attention(&d, q, k, v, fused));
  show("ak_attention(q, k, v)", fused, N, D_V, words);
  float diff = 0.0f;
  for (int i = 0; i < N * D_V; ++i) diff = fmaxf(diff, fabsf(fused[i] - context[i]));
  printf("max |ak_attention - step by step| = %.1e\n", (double)diff);
  /* Different summation orders: equal to a few ulps, not necessarily bits. */
  return diff <= 1e-6f ? EXIT_SUCCESS : EXIT_FAILURE;
}
