/* The hyperparameters of a Hugging Face Llama checkpoint, from its config.json. */
#ifndef ENGINE_CONFIG_H
#define ENGINE_CONFIG_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
  int64_t hidden, intermediate, heads, kv_heads, layers, vocab, head_dim, max_positions;
  double rms_norm_eps, rope_theta;
  int tie_word_embeddings;
  char torch_dtype[16]; /* informative: each tensor carries its own dtype */
} llama_config;

/* Reads and checks config.json. A feature this engine does not implement
   (RoPE scaling, biases, another activation) is refused, never ignored:
   ignoring it would give wrong logits without a word. 0, or -1 with err. */
int config_load(const char *path, llama_config *c, char *err, size_t err_size);

#endif
