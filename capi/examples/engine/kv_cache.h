/* The K/V cache of a batch of sequences, in one of two layouts:
 *  - paged: per layer one K and one V pool of num_pages pages, each
 *    [kv_heads, page_size, head_dim] in bf16 (or another ak_dtype); a
 *    sequence's pages come from a free list as it grows and a block table
 *    maps its positions to them. Memory follows the tokens actually held.
 *  - contiguous: per layer [batch, kv_heads, max_len, head_dim] fp32, every
 *    sequence with room for max_len tokens: the baseline.
 * Both are written with ak_kv_cache_store (a contiguous cache is one page of
 * max_len slots per sequence) and read by ak_attention. */
#ifndef ENGINE_KV_CACHE_H
#define ENGINE_KV_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "attnkern.h"

typedef struct {
  int paged;
  ak_dtype dtype;
  int64_t layers, batch, kv_heads, head_dim;
  int64_t page_size, num_pages; /* contiguous: page_size = max_len, one page per sequence */
  void **k, **v;                /* [layers] pools */
  int32_t *free_pages;          /* paged: a stack of the page ids not in use */
  int64_t n_free;
  int32_t *block_table; /* paged: [batch, table_stride] page ids, -1 = none yet */
  int64_t table_stride;
  int32_t *lens; /* [batch] tokens held per sequence */
} kv_cache;

/* max_lens[b]: the most tokens sequence b will hold. A paged cache gets
   exactly the pages they need (its pool could be shared by more sequences
   than it holds at once; this program sizes it to fit). 0, or -1 with err. */
int kv_cache_init(kv_cache *c, int paged, ak_dtype dtype, int64_t layers, int64_t kv_heads,
                  int64_t head_dim, int64_t batch, const int64_t *max_lens, int64_t page_size,
                  char *err, size_t err_size);
void kv_cache_free(kv_cache *c);

/* Makes room for sequence b to hold new_len tokens, taking pages from the
   free list as needed. 0, or -1 with err when the pool is exhausted. */
int kv_cache_reserve(kv_cache *c, int64_t b, int64_t new_len, char *err, size_t err_size);

/* The slot (page * page_size + offset) of position pos of sequence b, for
   ak_kv_cache_store; pos must lie inside what kv_cache_reserve made room for. */
int64_t kv_cache_slot(const kv_cache *c, int64_t b, int64_t pos);

/* Points the descriptor's K/V fields at layer `layer` of the cache (k_type,
   v_type, block table and pages, or the contiguous strides); kv_lens and
   kv_len are the caller's. Returns the K and V base pointers. */
void kv_cache_describe(const kv_cache *c, int64_t layer, ak_attention_desc *d, const float **k,
                       const float **v);

/* Widens sequence b's cached keys (which = 0) or values (1) of `layer` to fp32
   [lens[b], kv_heads, head_dim] into out, for inspection. */
int kv_cache_read(const kv_cache *c, int64_t layer, int which, int64_t b, float *out);

#endif
