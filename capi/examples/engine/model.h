/* A Llama model in memory: fp32 weights, whatever the checkpoint's dtypes,
 * loaded from a Hugging Face checkpoint directory (config.json and
 * model.safetensors). */
#ifndef ENGINE_MODEL_H
#define ENGINE_MODEL_H

#include <stddef.h>

#include "config.h"

typedef struct {
  float *input_norm; /* [hidden] */
  float *wqkv;       /* [(heads + 2 kv_heads) * head_dim, hidden]: q, k, v projections stacked */
  float *wo;         /* [hidden, heads * head_dim] */
  float *post_attn_norm; /* [hidden] */
  float *w_gate_up;      /* [2 intermediate, hidden]: gate, then up */
  float *w_down;         /* [hidden, intermediate] */
} llama_layer;

typedef struct {
  llama_config cfg;
  float *embed;   /* [vocab, hidden] */
  float *norm;    /* [hidden] */
  float *lm_head; /* [vocab, hidden]; == embed when the embeddings are tied */
  llama_layer *layers;
  char dtypes[32]; /* the dtypes the checkpoint's tensors had, e.g. "BF16" or "F16+F32" */
} llama_model;

/* Loads dir/config.json and dir/model.safetensors. 0, or -1 with err. */
int model_load(const char *dir, llama_model *m, char *err, size_t err_size);
void model_free(llama_model *m);

#endif
