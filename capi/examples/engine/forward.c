/* Every token of the batch goes through the GEMMs together (one packed
 * [tokens, features] matrix); only attention needs to know which sequence a
 * token belongs to, and ak_attention takes that as cu_seqlens_q (several new
 * tokens per sequence) or as a plain batch (one each: decode). */
#include "forward.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnkern.h"

#define CHECK(call)                                                                                \
  do {                                                                                             \
    ak_status st_ = (call);                                                                        \
    if (st_ != AK_OK) {                                                                            \
      snprintf(err, err_size, "%s: %s", #call, ak_last_error());                                   \
      goto done;                                                                                   \
    }                                                                                              \
  } while (0)

/* y = x / rms(x) * w, row by row; the mean square summed in double. */
static void rms_norm(int64_t rows, int64_t dim, const float *x, int64_t ldx, const float *w,
                     double eps, float *y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x + r * ldx;
    double ss = 0;
    for (int64_t i = 0; i < dim; ++i) ss += (double)xr[i] * xr[i];
    const float inv = (float)(1.0 / sqrt(ss / (double)dim + eps));
    for (int64_t i = 0; i < dim; ++i) y[r * dim + i] = xr[i] * inv * w[i];
  }
}

/* SwiGLU: act = silu(gate) * up, from the [gate | up] rows of gu. */
static void swiglu(int64_t rows, int64_t inter, const float *gu, float *act) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < inter; ++i) {
      const float g = gu[r * 2 * inter + i], u = gu[r * 2 * inter + inter + i];
      act[r * inter + i] = g / (1.0f + expf(-g)) * u;
    }
}

typedef struct {
  float *x, *h, *qkv, *attn, *gu, *act, *last;
  int32_t *pos, *cu, *kv_lens;
  int64_t *slots;
} buffers;

static int alloc_buffers(buffers *b, const llama_config *c, int64_t total, int64_t batch) {
  const int64_t qkv = (c->heads + 2 * c->kv_heads) * c->head_dim;
  b->x = malloc((size_t)(total * c->hidden) * sizeof(float));
  b->h = malloc((size_t)(total * c->hidden) * sizeof(float));
  b->qkv = malloc((size_t)(total * qkv) * sizeof(float));
  b->attn = malloc((size_t)(total * c->heads * c->head_dim) * sizeof(float));
  b->gu = malloc((size_t)(total * 2 * c->intermediate) * sizeof(float));
  b->act = malloc((size_t)(total * c->intermediate) * sizeof(float));
  b->last = malloc((size_t)(batch * c->hidden) * sizeof(float));
  b->pos = malloc((size_t)total * sizeof(int32_t));
  b->cu = malloc((size_t)(batch + 1) * sizeof(int32_t));
  b->kv_lens = malloc((size_t)batch * sizeof(int32_t));
  b->slots = malloc((size_t)total * sizeof(int64_t));
  return b->x && b->h && b->qkv && b->attn && b->gu && b->act && b->last && b->pos && b->cu &&
                 b->kv_lens && b->slots
             ? 0
             : -1;
}

static void free_buffers(buffers *b) {
  free(b->x), free(b->h), free(b->qkv), free(b->attn), free(b->gu), free(b->act);
  free(b->last), free(b->pos), free(b->cu), free(b->kv_lens), free(b->slots);
}

int llama_forward(const llama_model *m, kv_cache *cache, const int32_t *n_new,
                  const int32_t *tokens, float *logits, char *err, size_t err_size) {
  const llama_config *c = &m->cfg;
  const int64_t batch = cache->batch, hd = c->head_dim, nh = c->heads, nkv = c->kv_heads;
  const int64_t H = c->hidden, q_dim = nh * hd, ld_qkv = (nh + 2 * nkv) * hd;
  const int64_t inter = c->intermediate;
  int64_t total = 0, q_len = 0, kv_len = 0;
  int decode = 1, rc = -1;
  for (int64_t b = 0; b < batch; ++b) {
    total += n_new[b];
    if (n_new[b] > q_len) q_len = n_new[b];
    if (cache->lens[b] + n_new[b] > kv_len) kv_len = cache->lens[b] + n_new[b];
    decode &= n_new[b] == 1;
  }
  buffers buf;
  memset(&buf, 0, sizeof buf);
  if (alloc_buffers(&buf, c, total, batch)) {
    snprintf(err, err_size, "out of memory for the activations");
    goto done;
  }
  /* Positions, slots and the sequence offsets; room in the cache first. */
  buf.cu[0] = 0;
  for (int64_t b = 0, t = 0; b < batch; ++b) {
    const int32_t start = cache->lens[b];
    if (kv_cache_reserve(cache, b, start + n_new[b], err, err_size)) goto done;
    for (int32_t i = 0; i < n_new[b]; ++i, ++t) {
      buf.pos[t] = start + i;
      buf.slots[t] = kv_cache_slot(cache, b, start + i);
    }
    buf.cu[b + 1] = (int32_t)t;
    buf.kv_lens[b] = start + n_new[b];
  }
  CHECK(ak_embedding(total, tokens, c->vocab, H, m->embed, H, buf.x, H));

  for (int64_t l = 0; l < c->layers; ++l) {
    const llama_layer *w = &m->layers[l];
    float *q = buf.qkv, *k = buf.qkv + q_dim, *v = buf.qkv + q_dim + nkv * hd;
    /* Attention block: x += o_proj(attention(rope(q), rope(k), v)). */
    rms_norm(total, H, buf.x, H, w->input_norm, c->rms_norm_eps, buf.h);
    CHECK(ak_sgemm(AK_NO_TRANS, AK_TRANS, total, ld_qkv, H, 1.0f, buf.h, H, w->wqkv, H, 0.0f,
                   buf.qkv, ld_qkv));
    /* q and k in place inside the stacked output: [1, tokens, heads, hd] views. */
    const int64_t rope_strides[3] = {total * ld_qkv, ld_qkv, hd};
    CHECK(ak_rope(1, total, nh, hd, 0, AK_ROPE_NEOX, buf.pos, (float)c->rope_theta, NULL, q,
                  rope_strides));
    CHECK(ak_rope(1, total, nkv, hd, 0, AK_ROPE_NEOX, buf.pos, (float)c->rope_theta, NULL, k,
                  rope_strides));
    const int64_t kv_src[2] = {ld_qkv, hd};
    CHECK(ak_kv_cache_store(total, nkv, hd, k, kv_src, buf.slots, cache->dtype, cache->k[l],
                            cache->num_pages, cache->page_size, NULL));
    CHECK(ak_kv_cache_store(total, nkv, hd, v, kv_src, buf.slots, cache->dtype, cache->v[l],
                            cache->num_pages, cache->page_size, NULL));

    ak_attention_desc d;
    ak_attention_desc_init(&d);
    d.batch = batch, d.num_heads = nh, d.num_kv_heads = nkv, d.head_dim = hd;
    d.q_len = q_len, d.kv_len = kv_len, d.kv_lens = buf.kv_lens;
    /* Each sequence's new queries are the last of its keys: the causal mask
       aligned bottom-right (query i sees keys up to i + kv_lens[b] - q_len_b). */
    d.mask = AK_MASK_CAUSAL_BOTTOM_RIGHT;
    if (decode) { /* token b is sequence b's only query: a plain batch of q_len 1 */
      const int64_t qs[3] = {ld_qkv, hd, ld_qkv}, os[3] = {q_dim, hd, q_dim};
      memcpy(d.q_strides, qs, sizeof qs), memcpy(d.o_strides, os, sizeof os);
    } else { /* packed: token-major [total, heads, hd] rows, sequence b's from cu[b] */
      const int64_t qs[3] = {0, hd, ld_qkv}, os[3] = {0, hd, q_dim};
      memcpy(d.q_strides, qs, sizeof qs), memcpy(d.o_strides, os, sizeof os);
      d.cu_seqlens_q = buf.cu;
    }
    const float *kp, *vp;
    kv_cache_describe(cache, l, &d, &kp, &vp);
    CHECK(ak_attention(&d, q, kp, vp, buf.attn));
    /* beta = 1: the residual add is the GEMM's accumulate. */
    CHECK(ak_sgemm(AK_NO_TRANS, AK_TRANS, total, H, q_dim, 1.0f, buf.attn, q_dim, w->wo, q_dim,
                   1.0f, buf.x, H));

    /* MLP block: x += down(silu(gate(h)) * up(h)). */
    rms_norm(total, H, buf.x, H, w->post_attn_norm, c->rms_norm_eps, buf.h);
    CHECK(ak_sgemm(AK_NO_TRANS, AK_TRANS, total, 2 * inter, H, 1.0f, buf.h, H, w->w_gate_up, H,
                   0.0f, buf.gu, 2 * inter));
    swiglu(total, inter, buf.gu, buf.act);
    CHECK(ak_sgemm(AK_NO_TRANS, AK_TRANS, total, H, inter, 1.0f, buf.act, inter, w->w_down, inter,
                   1.0f, buf.x, H));
  }
  for (int64_t b = 0; b < batch; ++b) cache->lens[b] += n_new[b];

  /* Only each sequence's last token predicts the next one (a sequence with
     no new tokens gets a row of zeros). */
  for (int64_t b = 0; b < batch; ++b) {
    if (n_new[b] == 0)
      memset(buf.last + b * H, 0, (size_t)H * sizeof(float));
    else
      rms_norm(1, H, buf.x + (int64_t)(buf.cu[b + 1] - 1) * H, H, m->norm, c->rms_norm_eps,
               buf.last + b * H);
  }
  CHECK(ak_sgemm(AK_NO_TRANS, AK_TRANS, batch, c->vocab, H, 1.0f, buf.last, H, m->lm_head, H, 0.0f,
                 logits, c->vocab));
  rc = 0;
done:
  free_buffers(&buf);
  return rc;
}
