/* One forward pass of a Llama model over a batch of sequences that each
 * bring some new tokens: a prompt (prefill), one token (decode), or a chunk
 * of a longer prompt (chunked prefill: the same code). */
#ifndef ENGINE_FORWARD_H
#define ENGINE_FORWARD_H

#include <stddef.h>
#include <stdint.h>

#include "kv_cache.h"
#include "model.h"

/* Sequence b (b < cache->batch) brings n_new[b] >= 0 tokens (at least one
   in all), packed one
   sequence after the other in tokens; its positions continue from the
   cache->lens[b] it holds. Appends their keys and values to the cache and
   writes the logits of each sequence's last new token to logits [batch,
   vocab]. 0, or -1 with err (an attnkern call failed, or out of memory). */
int llama_forward(const llama_model *m, kv_cache *cache, const int32_t *n_new,
                  const int32_t *tokens, float *logits, char *err, size_t err_size);

#endif
