#include "kv_cache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t dtype_size(ak_dtype t) { return t == AK_F32 ? 4 : 2; }

static int64_t pages_for(int64_t tokens, int64_t page_size) {
  return (tokens + page_size - 1) / page_size;
}

int kv_cache_init(kv_cache *c, int paged, ak_dtype dtype, int64_t layers, int64_t kv_heads,
                  int64_t head_dim, int64_t batch, const int64_t *max_lens, int64_t page_size,
                  char *err, size_t err_size) {
  memset(c, 0, sizeof *c);
  c->paged = paged, c->dtype = paged ? dtype : AK_F32;
  c->layers = layers, c->batch = batch, c->kv_heads = kv_heads, c->head_dim = head_dim;
  int64_t longest = 1;
  for (int64_t b = 0; b < batch; ++b)
    if (max_lens[b] > longest) longest = max_lens[b];
  if (paged) {
    if (page_size < 1) return snprintf(err, err_size, "page size must be >= 1"), -1;
    c->page_size = page_size;
    for (int64_t b = 0; b < batch; ++b) c->num_pages += pages_for(max_lens[b], page_size);
    c->table_stride = pages_for(longest, page_size);
  } else {
    c->page_size = longest, c->num_pages = batch;
  }
  const size_t pool =
      (size_t)(c->num_pages * kv_heads * c->page_size * head_dim) * dtype_size(c->dtype);
  c->k = calloc((size_t)layers, sizeof *c->k);
  c->v = calloc((size_t)layers, sizeof *c->v);
  c->lens = calloc((size_t)batch, sizeof *c->lens);
  int ok = c->k && c->v && c->lens;
  for (int64_t l = 0; ok && l < layers; ++l)
    ok = (c->k[l] = malloc(pool ? pool : 1)) && (c->v[l] = malloc(pool ? pool : 1));
  if (ok && paged) {
    c->block_table = malloc((size_t)(batch * c->table_stride + 1) * sizeof *c->block_table);
    c->free_pages = malloc((size_t)(c->num_pages + 1) * sizeof *c->free_pages);
    ok = c->block_table && c->free_pages;
  }
  if (!ok) {
    kv_cache_free(c);
    return snprintf(err, err_size, "out of memory for the K/V cache"), -1;
  }
  if (paged) {
    for (int64_t i = 0; i < batch * c->table_stride; ++i) c->block_table[i] = -1;
    /* Handed out from the top: page 0 first, then in the order sequences
       grow, so that a sequence's pages interleave with the others' once
       decoding starts, as in a serving engine. */
    for (int64_t i = 0; i < c->num_pages; ++i) c->free_pages[i] = (int32_t)(c->num_pages - 1 - i);
    c->n_free = c->num_pages;
  }
  return 0;
}

void kv_cache_free(kv_cache *c) {
  for (int64_t l = 0; l < c->layers; ++l) {
    if (c->k) free(c->k[l]);
    if (c->v) free(c->v[l]);
  }
  free(c->k), free(c->v), free(c->lens), free(c->block_table), free(c->free_pages);
  memset(c, 0, sizeof *c);
}

int kv_cache_reserve(kv_cache *c, int64_t b, int64_t new_len, char *err, size_t err_size) {
  if (!c->paged) {
    if (new_len > c->page_size)
      return snprintf(err, err_size, "sequence %lld: %lld tokens past the cache's %lld",
                      (long long)b, (long long)new_len, (long long)c->page_size),
             -1;
    return 0;
  }
  const int64_t need = pages_for(new_len, c->page_size);
  if (need > c->table_stride)
    return snprintf(err, err_size, "sequence %lld: %lld tokens past its block table", (long long)b,
                    (long long)new_len),
           -1;
  int32_t *row = c->block_table + b * c->table_stride;
  for (int64_t p = 0; p < need; ++p) {
    if (row[p] >= 0) continue;
    if (c->n_free == 0) return snprintf(err, err_size, "the K/V page pool is exhausted"), -1;
    row[p] = c->free_pages[--c->n_free];
  }
  return 0;
}

int64_t kv_cache_slot(const kv_cache *c, int64_t b, int64_t pos) {
  if (!c->paged) return b * c->page_size + pos;
  const int32_t page = c->block_table[b * c->table_stride + pos / c->page_size];
  return (int64_t)page * c->page_size + pos % c->page_size;
}

void kv_cache_describe(const kv_cache *c, int64_t layer, ak_attention_desc *d, const float **k,
                       const float **v) {
  d->k_type = d->v_type = (int32_t)c->dtype;
  if (c->paged) {
    d->block_table = c->block_table;
    d->block_table_stride = c->table_stride;
    d->page_size = c->page_size;
    d->num_pages = c->num_pages;
  } else {
    /* [batch, kv_heads, max_len, head_dim]: sequence b is page b. */
    const int64_t s[3] = {c->kv_heads * c->page_size * c->head_dim, c->page_size * c->head_dim,
                          c->head_dim};
    memcpy(d->k_strides, s, sizeof s);
    memcpy(d->v_strides, s, sizeof s);
  }
  /* The library takes const float * for every k/v type: the pools' bytes. */
  *k = (const float *)c->k[layer];
  *v = (const float *)c->v[layer];
}

int kv_cache_read(const kv_cache *c, int64_t layer, int which, int64_t b, float *out) {
  const unsigned char *pool = which ? c->v[layer] : c->k[layer];
  const size_t es = dtype_size(c->dtype);
  for (int64_t pos = 0; pos < c->lens[b]; ++pos) {
    const int64_t slot = kv_cache_slot(c, b, pos);
    const int64_t page = slot / c->page_size, off = slot % c->page_size;
    for (int64_t h = 0; h < c->kv_heads; ++h) {
      const int64_t at = ((page * c->kv_heads + h) * c->page_size + off) * c->head_dim;
      float *dst = out + (pos * c->kv_heads + h) * c->head_dim;
      if (ak_convert(AK_F32, dst, c->dtype, pool + (size_t)at * es, c->head_dim) != AK_OK)
        return -1;
    }
  }
  return 0;
}
