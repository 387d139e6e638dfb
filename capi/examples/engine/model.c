/* Weights are widened to fp32 once, here: ak_sgemm multiplies fp32. The q, k
 * and v projections are stacked into one matrix (and gate and up into
 * another), so that each takes one GEMM per layer instead of three (two);
 * the kernels downstream read q, k and v as strided views of its output. */
#include "model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "safetensors.h"

typedef struct {
  const st_file *st;
  char *err;
  size_t err_size;
} loader;

/* Allocates rows x cols floats (or NULL on failure, with the message set). */
static float *alloc_floats(loader *l, int64_t rows, int64_t cols) {
  if (rows <= 0 || cols <= 0 || (uint64_t)rows > SIZE_MAX / sizeof(float) / (uint64_t)cols) {
    snprintf(l->err, l->err_size, "a weight of %lld x %lld floats is too large", (long long)rows,
             (long long)cols);
    return NULL;
  }
  float *p = malloc((size_t)rows * (size_t)cols * sizeof(float));
  if (!p)
    snprintf(l->err, l->err_size, "out of memory for %lld x %lld floats", (long long)rows,
             (long long)cols);
  return p;
}

/* Loads tensor `name` of shape [rows, cols] (cols 0: a vector [rows]) into dst. */
static int load(loader *l, const char *name, int64_t rows, int64_t cols, float *dst) {
  const int64_t shape[2] = {rows, cols};
  return st_load_f32(l->st, name, cols ? 2 : 1, shape, dst, l->err, l->err_size);
}

static int load_layer(loader *l, const llama_config *c, int64_t i, llama_layer *w) {
  const int64_t h = c->hidden, q = c->heads * c->head_dim, kv = c->kv_heads * c->head_dim;
  const int64_t inter = c->intermediate;
  char name[128];
#define NAME(suffix)                                                                               \
  (snprintf(name, sizeof name, "model.layers.%lld.%s", (long long)i, suffix), name)
  if (!(w->input_norm = alloc_floats(l, h, 1)) || !(w->wqkv = alloc_floats(l, q + 2 * kv, h)) ||
      !(w->wo = alloc_floats(l, h, q)) || !(w->post_attn_norm = alloc_floats(l, h, 1)) ||
      !(w->w_gate_up = alloc_floats(l, 2 * inter, h)) || !(w->w_down = alloc_floats(l, h, inter)))
    return -1;
  if (load(l, NAME("input_layernorm.weight"), h, 0, w->input_norm) ||
      load(l, NAME("self_attn.q_proj.weight"), q, h, w->wqkv) ||
      load(l, NAME("self_attn.k_proj.weight"), kv, h, w->wqkv + q * h) ||
      load(l, NAME("self_attn.v_proj.weight"), kv, h, w->wqkv + (q + kv) * h) ||
      load(l, NAME("self_attn.o_proj.weight"), h, q, w->wo) ||
      load(l, NAME("post_attention_layernorm.weight"), h, 0, w->post_attn_norm) ||
      load(l, NAME("mlp.gate_proj.weight"), inter, h, w->w_gate_up) ||
      load(l, NAME("mlp.up_proj.weight"), inter, h, w->w_gate_up + inter * h) ||
      load(l, NAME("mlp.down_proj.weight"), h, inter, w->w_down))
    return -1;
#undef NAME
  return 0;
}

/* "BF16", "F16+F32", ...: the distinct dtypes of the tensors, for the report. */
static void describe_dtypes(const st_file *st, char *out, size_t size) {
  static const char *const known[] = {"BF16", "F16", "F32"};
  out[0] = '\0';
  for (int k = 0; k < 3; ++k)
    for (size_t i = 0; i < st->count; ++i)
      if (strcmp(st->tensors[i].dtype, known[k]) == 0) {
        snprintf(out + strlen(out), size - strlen(out), "%s%s", out[0] ? "+" : "", known[k]);
        break;
      }
}

int model_load(const char *dir, llama_model *m, char *err, size_t err_size) {
  memset(m, 0, sizeof *m);
  char path[4096];
  snprintf(path, sizeof path, "%s/config.json", dir);
  if (config_load(path, &m->cfg, err, err_size)) return -1;
  const llama_config *c = &m->cfg;
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  FILE *probe = fopen(path, "rb");
  if (!probe) {
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    FILE *index = fopen(path, "rb");
    if (index) fclose(index);
    return snprintf(err, err_size, "%s/model.safetensors: cannot open%s", dir,
                    index ? " (sharded checkpoints are not supported: one file only)" : ""),
           -1;
  }
  fclose(probe);
  st_file st;
  if (st_open(path, &st, err, err_size)) return -1;
  loader l = {&st, err, err_size};
  int rc = -1;
  describe_dtypes(&st, m->dtypes, sizeof m->dtypes);
  if (!(m->layers = calloc((size_t)c->layers, sizeof *m->layers))) {
    snprintf(err, err_size, "out of memory");
    goto done;
  }
  if (!(m->embed = alloc_floats(&l, c->vocab, c->hidden)) ||
      !(m->norm = alloc_floats(&l, c->hidden, 1)) ||
      load(&l, "model.embed_tokens.weight", c->vocab, c->hidden, m->embed) ||
      load(&l, "model.norm.weight", c->hidden, 0, m->norm))
    goto done;
  if (c->tie_word_embeddings) {
    m->lm_head = m->embed;
  } else if (!(m->lm_head = alloc_floats(&l, c->vocab, c->hidden)) ||
             load(&l, "lm_head.weight", c->vocab, c->hidden, m->lm_head)) {
    goto done;
  }
  for (int64_t i = 0; i < c->layers; ++i)
    if (load_layer(&l, c, i, &m->layers[i])) goto done;
  rc = 0;
done:
  st_close(&st);
  if (rc) model_free(m);
  return rc;
}

void model_free(llama_model *m) {
  if (m->lm_head != m->embed) free(m->lm_head);
  free(m->embed);
  free(m->norm);
  for (int64_t i = 0; m->layers && i < m->cfg.layers; ++i) {
    llama_layer *w = &m->layers[i];
    free(w->input_norm), free(w->wqkv), free(w->wo);
    free(w->post_attn_norm), free(w->w_gate_up), free(w->w_down);
  }
  free(m->layers);
  memset(m, 0, sizeof *m);
}
