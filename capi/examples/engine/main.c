/* engine: greedy decoding of a Hugging Face Llama checkpoint on the attnkern
 * C API. Token ids in, token ids out (tokenizing is not its business).
 *
 *   engine <model dir> --prompt 1,2,3 [--prompt 4,5 ...] [--steps N]
 *          [--page-size P] [--prefill-chunk C] [--fp32-cache | --compare]
 *          [--threads T] [--repeat R] [--dump-logits FILE] [--dump-kv FILE]
 *
 * The prompts are decoded together: one prefill over all of them (packed,
 * each of its own length; or in chunks of at most C tokens per sequence),
 * then one token per sequence per step. The K/V
 * cache is paged bf16 by default, contiguous fp32 with --fp32-cache;
 * --compare runs both and sets their speeds side by side (the fastest of
 * --repeat runs each, 3 by default there, 1 otherwise). --dump-logits
 * writes the logits of every step as float32 [steps, prompts, vocab];
 * --dump-kv the cache at the end, widened to float32, per layer K then V,
 * per sequence [tokens, kv_heads, head_dim]. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attnkern.h"
#include "forward.h"
#include "kv_cache.h"
#include "model.h"

enum { MAX_PROMPTS = 64 };

typedef struct {
  const char *model_dir, *dump_logits, *dump_kv;
  int32_t *prompts[MAX_PROMPTS];
  int32_t prompt_lens[MAX_PROMPTS];
  int n_prompts;
  long steps, page_size, threads, repeat, prefill_chunk;
  int fp32_cache, compare;
} options;

typedef struct {
  double prefill_s, decode_s;
  int64_t prefill_tokens, decode_tokens;
  int32_t *generated; /* [prompts, steps] */
} run_result;

static double now(void) {
  struct timespec ts;
  timespec_get(&ts, TIME_UTC);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Seconds from t0 to now, at least a nanosecond: C11 has only the wall
 * clock, which a coarse timer or a clock step can leave unchanged or move
 * back, and a rate must stay finite and positive. */
static double since(double t0) {
  const double s = now() - t0;
  return s > 1e-9 ? s : 1e-9;
}

static int usage(const char *why) {
  fprintf(stderr,
          "engine: %s\nusage: engine <model dir> --prompt 1,2,3 [--prompt 4,5 ...] [--steps N] "
          "[--page-size P]\n              [--prefill-chunk C] [--fp32-cache | --compare] "
          "[--threads T] [--repeat R] "
          "[--dump-logits FILE] [--dump-kv FILE]\n",
          why);
  return 2;
}

/* "12,7,3" into a malloc'ed array; -1 on anything but non-negative integers. */
static int parse_ids(const char *s, int32_t **out, int32_t *n) {
  size_t cap = 1;
  for (const char *p = s; *p; ++p) cap += *p == ',';
  int32_t *ids = malloc(cap * sizeof *ids);
  if (!ids) return -1;
  *n = 0;
  for (;;) {
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || v < 0 || v > INT32_MAX || (*end != ',' && *end != '\0')) return free(ids), -1;
    ids[(*n)++] = (int32_t)v;
    if (*end == '\0') break;
    s = end + 1;
  }
  *out = ids;
  return 0;
}

/* An integer in [lo, hi]; out-of-range text (ERANGE) is refused, so that no
 * later size arithmetic starts from LONG_MAX. */
static int parse_long(const char *s, long lo, long hi, long *out) {
  char *end;
  errno = 0;
  long v = s ? strtol(s, &end, 10) : 0;
  if (!s || end == s || *end != '\0' || errno == ERANGE || v < lo || v > hi) return -1;
  *out = v;
  return 0;
}

static int parse_args(int argc, char **argv, options *o) {
  int repeat_given = 0;
  memset(o, 0, sizeof *o);
  o->steps = 8, o->page_size = 16, o->repeat = 1;
  for (int i = 1; i < argc; ++i) {
    const char *a = argv[i], *next = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--prompt") == 0 && next) {
      if (o->n_prompts == MAX_PROMPTS) return usage("too many prompts");
      if (parse_ids(next, &o->prompts[o->n_prompts], &o->prompt_lens[o->n_prompts]))
        return usage("--prompt takes token ids: 1,2,3");
      ++o->n_prompts, ++i;
    } else if (strcmp(a, "--steps") == 0) {
      if (parse_long(next, 1, 1L << 20, &o->steps))
        return usage("--steps takes an integer from 1 to 2^20");
      ++i;
    } else if (strcmp(a, "--page-size") == 0) {
      if (parse_long(next, 1, 1L << 20, &o->page_size))
        return usage("--page-size takes an integer from 1 to 2^20");
      ++i;
    } else if (strcmp(a, "--prefill-chunk") == 0) {
      if (parse_long(next, 0, INT32_MAX, &o->prefill_chunk))
        return usage("--prefill-chunk takes an integer from 0 to 2^31 - 1");
      ++i;
    } else if (strcmp(a, "--threads") == 0) {
      if (parse_long(next, 0, 4096, &o->threads))
        return usage("--threads takes an integer from 0 to 4096");
      ++i;
    } else if (strcmp(a, "--repeat") == 0) {
      if (parse_long(next, 1, 1000, &o->repeat))
        return usage("--repeat takes an integer from 1 to 1000");
      ++i, repeat_given = 1;
    } else if (strcmp(a, "--dump-logits") == 0 && next) {
      o->dump_logits = next, ++i;
    } else if (strcmp(a, "--dump-kv") == 0 && next) {
      o->dump_kv = next, ++i;
    } else if (strcmp(a, "--fp32-cache") == 0) {
      o->fp32_cache = 1;
    } else if (strcmp(a, "--compare") == 0) {
      o->compare = 1;
    } else if (a[0] == '-' || o->model_dir) {
      return usage("unknown or incomplete argument");
    } else {
      o->model_dir = a;
    }
  }
  if (!o->model_dir) return usage("no model directory");
  if (!o->n_prompts) return usage("no --prompt");
  if (o->compare && o->fp32_cache) return usage("--compare runs both caches: drop --fp32-cache");
  /* The first run of a process also starts the threads and faults the
     memory in: a comparison keeps the fastest of three unless told. */
  if (o->compare && !repeat_given) o->repeat = 3;
  return 0;
}

static int write_floats(const char *path, const float *x, size_t n) {
  FILE *f = fopen(path, "wb");
  int ok = f && fwrite(x, sizeof *x, n, f) == n;
  if (f) ok = fclose(f) == 0 && ok;
  if (!ok) fprintf(stderr, "engine: cannot write %s\n", path);
  return ok ? 0 : -1;
}

/* The cache after the run, per layer K then V, per sequence its tokens. */
static int dump_kv(const char *path, const kv_cache *c) {
  FILE *f = fopen(path, "wb");
  int ok = f != NULL;
  int64_t longest = 0;
  for (int64_t b = 0; b < c->batch; ++b) longest = c->lens[b] > longest ? c->lens[b] : longest;
  float *rows = malloc((size_t)(longest * c->kv_heads * c->head_dim + 1) * sizeof *rows);
  ok = ok && rows;
  for (int64_t l = 0; ok && l < c->layers; ++l)
    for (int which = 0; ok && which < 2; ++which)
      for (int64_t b = 0; ok && b < c->batch; ++b) {
        const size_t n = (size_t)(c->lens[b] * c->kv_heads * c->head_dim);
        ok = kv_cache_read(c, l, which, b, rows) == 0 && fwrite(rows, sizeof *rows, n, f) == n;
      }
  free(rows);
  if (f) ok = fclose(f) == 0 && ok;
  if (!ok) fprintf(stderr, "engine: cannot write %s\n", path);
  return ok ? 0 : -1;
}

static int32_t argmax(const float *x, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (x[i] > x[best]) best = i;
  return (int32_t)best;
}

/* Prefill, then steps - 1 decode steps; the logits of every step go to
   all_logits [steps, prompts, vocab] when it is not NULL. */
static int generate(const llama_model *m, const options *o, int paged, run_result *r,
                    float *all_logits, int dump) {
  const llama_config *c = &m->cfg;
  const int64_t batch = o->n_prompts, vocab = c->vocab;
  int64_t max_lens[MAX_PROMPTS], total = 0;
  for (int b = 0; b < o->n_prompts; ++b) {
    max_lens[b] = o->prompt_lens[b] + o->steps - 1;
    total += o->prompt_lens[b];
    if (max_lens[b] > c->max_positions)
      return fprintf(stderr,
                     "engine: prompt %d plus %ld steps passes max_position_embeddings %lld\n", b,
                     o->steps, (long long)c->max_positions),
             -1;
  }
  char err[512];
  kv_cache cache;
  if (kv_cache_init(&cache, paged, AK_BF16, c->layers, c->kv_heads, c->head_dim, batch, max_lens,
                    o->page_size, err, sizeof err))
    return fprintf(stderr, "engine: %s\n", err), -1;
  int32_t *tokens = malloc((size_t)total * sizeof *tokens), n_new[MAX_PROMPTS],
          done_len[MAX_PROMPTS];
  float *logits = malloc((size_t)(batch * vocab) * sizeof *logits);
  float *pass = malloc((size_t)(batch * vocab) * sizeof *pass);
  int rc = -1;
  if (!tokens || !logits || !pass) {
    fprintf(stderr, "engine: out of memory\n");
    goto done;
  }
  r->prefill_tokens = total, r->decode_tokens = batch * (o->steps - 1);
  r->prefill_s = r->decode_s = 0;
  /* Prefill: every prompt in one packed pass, or in passes of at most
     prefill_chunk tokens per sequence (chunked prefill: later chunks attend
     to the cached keys of earlier ones). A sequence's first logits are those
     of the pass that ends its prompt. */
  for (int b = 0; b < o->n_prompts; ++b) done_len[b] = 0;
  for (int left = 1; left;) {
    int32_t t = 0;
    for (int b = 0; b < o->n_prompts; ++b) {
      const int32_t rest = o->prompt_lens[b] - done_len[b];
      n_new[b] = o->prefill_chunk && rest > o->prefill_chunk ? (int32_t)o->prefill_chunk : rest;
      memcpy(tokens + t, o->prompts[b] + done_len[b], (size_t)n_new[b] * sizeof *tokens);
      t += n_new[b];
    }
    const double t0 = now();
    if (llama_forward(m, &cache, n_new, tokens, pass, err, sizeof err)) {
      fprintf(stderr, "engine: prefill: %s\n", err);
      goto done;
    }
    r->prefill_s += since(t0);
    left = 0;
    for (int b = 0; b < o->n_prompts; ++b) {
      done_len[b] += n_new[b];
      if (n_new[b] && done_len[b] == o->prompt_lens[b])
        memcpy(logits + b * vocab, pass + b * vocab, (size_t)vocab * sizeof *logits);
      left |= done_len[b] < o->prompt_lens[b];
    }
  }
  for (long step = 0; step < o->steps; ++step) {
    if (step > 0) { /* decode: one token per sequence */
      const double t0 = now();
      if (llama_forward(m, &cache, n_new, tokens, logits, err, sizeof err)) {
        fprintf(stderr, "engine: step %ld: %s\n", step, err);
        goto done;
      }
      r->decode_s += since(t0);
    }
    if (all_logits) memcpy(all_logits + step * batch * vocab, logits, (size_t)(batch * vocab) * 4);
    for (int64_t b = 0; b < batch; ++b) { /* greedy: the next input is the best token */
      tokens[b] = argmax(logits + b * vocab, vocab);
      r->generated[b * o->steps + step] = tokens[b];
      n_new[b] = 1;
    }
  }
  rc = dump && o->dump_kv ? dump_kv(o->dump_kv, &cache) : 0;
done:
  free(tokens), free(logits), free(pass);
  kv_cache_free(&cache);
  return rc;
}

static void report(const char *name, const options *o, const run_result *r) {
  printf("%s: prefill %lld tokens in %.3f ms: %.0f tokens/s; decode %lld tokens in %.3f ms: "
         "%.0f tokens/s\n",
         name, (long long)r->prefill_tokens, 1e3 * r->prefill_s,
         (double)r->prefill_tokens / r->prefill_s, (long long)r->decode_tokens, 1e3 * r->decode_s,
         r->decode_tokens ? (double)r->decode_tokens / r->decode_s : 0.0);
  for (int b = 0; b < o->n_prompts; ++b) {
    printf("  sequence %d:", b);
    for (long s = 0; s < o->steps; ++s)
      printf("%c%d", s ? ',' : ' ', r->generated[b * o->steps + s]);
    printf("\n");
  }
}

/* Runs one cache layout o->repeat times, keeping the fastest times. */
static int run_mode(const llama_model *m, const options *o, int paged, float *logits, int dump,
                    run_result *best) {
  run_result r = *best;
  for (long i = 0; i < o->repeat; ++i) {
    if (generate(m, o, paged, &r, i == 0 ? logits : NULL, dump && i == 0)) return -1;
    if (i == 0 || r.prefill_s < best->prefill_s) best->prefill_s = r.prefill_s;
    if (i == 0 || r.decode_s < best->decode_s) best->decode_s = r.decode_s;
    best->prefill_tokens = r.prefill_tokens, best->decode_tokens = r.decode_tokens;
  }
  return 0;
}

int main(int argc, char **argv) {
  options o;
  int rc = parse_args(argc, argv, &o);
  llama_model m;
  char err[512];
  memset(&m, 0, sizeof m);
  if (rc == 0 && o.threads && ak_set_num_threads((int)o.threads) != AK_OK)
    rc = 1, fprintf(stderr, "engine: %s\n", ak_last_error());
  if (rc == 0 && model_load(o.model_dir, &m, err, sizeof err))
    rc = 1, fprintf(stderr, "engine: %s\n", err);
  if (rc) goto done;
  const llama_config *c = &m.cfg;
  printf("model %s: %lld layers, hidden %lld, %lld heads (%lld kv) of %lld, intermediate %lld, "
         "vocab %lld; tensors %s, run in fp32 (attnkern %s, %s)\n",
         o.model_dir, (long long)c->layers, (long long)c->hidden, (long long)c->heads,
         (long long)c->kv_heads, (long long)c->head_dim, (long long)c->intermediate,
         (long long)c->vocab, m.dtypes, ak_version(), ak_get_isa());
  for (int b = 0; b < o.n_prompts; ++b)
    for (int32_t i = 0; i < o.prompt_lens[b]; ++i)
      if (o.prompts[b][i] >= c->vocab) {
        fprintf(stderr, "engine: prompt %d: token %d is not below vocab_size %lld\n", b,
                o.prompts[b][i], (long long)c->vocab);
        rc = 1;
        goto done;
      }
  const size_t n_logits = (size_t)(o.steps * o.n_prompts * c->vocab);
  float *logits = o.dump_logits ? malloc(n_logits * sizeof *logits) : NULL;
  run_result paged = {0}, flat = {0};
  paged.generated = malloc((size_t)(o.n_prompts * o.steps) * sizeof(int32_t));
  flat.generated = malloc((size_t)(o.n_prompts * o.steps) * sizeof(int32_t));
  char name[64];
  snprintf(name, sizeof name, "bf16 paged cache (page size %ld)", o.page_size);
  if (!paged.generated || !flat.generated || (o.dump_logits && !logits)) {
    rc = 1, fprintf(stderr, "engine: out of memory\n");
  } else if (!o.fp32_cache && run_mode(&m, &o, 1, logits, 1, &paged) == 0) {
    report(name, &o, &paged);
  } else if (!o.fp32_cache) {
    rc = 1;
  }
  if (rc == 0 && (o.fp32_cache || o.compare)) {
    if (run_mode(&m, &o, 0, o.compare ? NULL : logits, !o.compare, &flat))
      rc = 1;
    else
      report("fp32 contiguous cache", &o, &flat);
  }
  if (rc == 0 && o.compare) {
    int same = memcmp(paged.generated, flat.generated,
                      (size_t)(o.n_prompts * o.steps) * sizeof(int32_t)) == 0;
    printf("bf16 paged / fp32 contiguous: prefill %.2fx, decode %.2fx the tokens/s; generated ids "
           "%s\n",
           flat.prefill_s / paged.prefill_s,
           paged.decode_s > 0 ? flat.decode_s / paged.decode_s : 0.0,
           same ? "the same"
                : "differ (the bf16 cache moves logits by ~1e-3: greedy follows it where two "
                  "tokens nearly tie)");
  }
  if (rc == 0 && o.dump_logits && write_floats(o.dump_logits, logits, n_logits)) rc = 1;
  free(logits), free(paged.generated), free(flat.generated);
done:
  for (int b = 0; b < o.n_prompts; ++b) free(o.prompts[b]);
  model_free(&m);
  return rc;
}
