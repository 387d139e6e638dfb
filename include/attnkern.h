/*
 * attnkern: numerics kernels for attention (SGEMM, softmax, fused
 * scaled-dot-product attention over fp32, f16 or bf16 K/V caches, paged or
 * not) behind one flat C ABI.
 *
 * Conventions: row-major everywhere; sizes, leading dimensions and strides are
 * int64_t counted in elements (never bytes). A leading dimension is at least
 * max(1, row length), also for an empty matrix (as in BLAS). Every function that can fail
 * returns an ak_status; on failure nothing has been written and
 * ak_last_error() names the argument and the reason.
 *
 * This header is C99-clean and C++-clean.
 */
#ifndef ATTNKERN_H
#define ATTNKERN_H

#include <stddef.h>
#include <stdint.h>

#define AK_VERSION_MAJOR 0
#define AK_VERSION_MINOR 1
#define AK_VERSION_PATCH 0
/* Bumped on any incompatible change of the binary interface. */
#define AK_ABI_VERSION 1

#if defined(_WIN32) && defined(AK_BUILDING_SHARED)
#define AK_API __declspec(dllexport)
#elif defined(__GNUC__) || defined(__clang__)
#define AK_API __attribute__((visibility("default")))
#else
#define AK_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- status */

typedef enum {
  AK_OK = 0,
  AK_ERR_NULL_POINTER,
  AK_ERR_BAD_SHAPE,
  AK_ERR_BAD_STRIDE,
  AK_ERR_BAD_ARGUMENT,
  AK_ERR_OVERFLOW,
  AK_ERR_OUT_OF_MEMORY,
  AK_ERR_UNSUPPORTED,
  AK_ERR_INTERNAL
} ak_status;

/* Strings returned by ak_status_string, ak_version and ak_get_isa are static:
   valid for the life of the process, never to be freed. */

/* A human-readable name for a status ("AK_ERR_BAD_SHAPE: ..."). */
AK_API const char *ak_status_string(ak_status s);
/* Detail of the last failure on the calling thread ("" if none yet). The
   pointer stays valid until the next attnkern call on this thread. */
AK_API const char *ak_last_error(void);
/* "MAJOR.MINOR.PATCH" of the library actually loaded. */
AK_API const char *ak_version(void);
/* AK_ABI_VERSION of the library actually loaded. */
AK_API int ak_abi_version(void);

/* --------------------------------------------------------- configuration */

/* The instruction set in use: "avx512" | "avx2" | "sse2" | "neon" | "scalar". */
AK_API const char *ak_get_isa(void);
/* 1 if ak_set_isa(name) would succeed on this CPU and build (NULL and "auto"
   always do), else 0. No side
   effects: safe to call while other threads run kernels. */
AK_API int ak_isa_supported(const char *name);
/* Force an instruction set; NULL or "auto" selects the best the CPU has.
   A set the CPU (or OS) does not support is AK_ERR_UNSUPPORTED. The
   environment variable AK_ISA sets the initial choice. Process-wide. */
AK_API ak_status ak_set_isa(const char *name);
/* The most threads a call uses, whatever the settings below ask for. */
#define AK_MAX_THREADS 1024
/* Threads used by each call; 0 = the OpenMP default. Process-wide (a thread's
   own ak_set_num_threads_local, below, comes first there). A call made
   from inside an OpenMP parallel region, a team of one included (an
   if(0) or num_threads(1) region), always runs on the calling thread, and
   so does every call in a child forked after this process may have run calls
   on several threads (OpenMP's runtime does not survive fork). A call never
   uses more than AK_MAX_THREADS threads nor more than the OpenMP thread
   limit (omp_get_thread_limit, OMP_THREAD_LIMIT); within those, starting
   the threads is the OpenMP runtime's: where it cannot create them (under
   an address-space limit, say), libgomp ends the process. */
AK_API ak_status ak_set_num_threads(int n);
/* The thread count a call from this thread would use now (resolves the
   per-thread override below, then 0 to the OpenMP default, within the
   limits above). */
AK_API int ak_get_num_threads(void);
/* Threads used by calls made from the calling thread only, overriding
   ak_set_num_threads there; 0 = follow the process-wide setting again. For an
   engine that calls from worker threads of its own: each worker sets 1 (no
   OpenMP pool per worker, no oversubscription) while other callers keep the
   process-wide count. The OpenMP-region and fork rules above still apply.
   Negative n is AK_ERR_BAD_ARGUMENT and changes nothing. */
AK_API ak_status ak_set_num_threads_local(int n);
/* The calling thread's override (0 if none): save it to restore it later. */
AK_API int ak_get_num_threads_local(void);
/* Each thread that runs a call keeps its largest scratch buffer (packed
   panels, up to 16 MiB) for the next call. This frees every thread's kept
   buffer, in the whole process: for an engine going idle, or after a large
   call on a thread that will not call again soon. Calls running meanwhile
   keep the buffers they use; the next call allocates anew. */
AK_API void ak_release_scratch(void);

/* ----------------------------------------------------------------- sgemm */

typedef enum { AK_NO_TRANS = 0, AK_TRANS = 1 } ak_trans;

/* C = alpha * op(A) * op(B) + beta * C, op(X) = X or X^T, op(A) is m x k,
   op(B) is k x n. beta == 0 ignores C's contents (NaN included); alpha == 0
   or k == 0 never reads A or B. */
AK_API ak_status ak_sgemm(ak_trans ta, ak_trans tb, int64_t m, int64_t n, int64_t k, float alpha,
                          const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
                          float *c, int64_t ldc);

/* The SGEMM blocking of the instruction set in use, for tests that probe
   every block edge and for tuning: the register tile is mr x nr; A is cut
   into row blocks of at most mc rows; k into ceil(k / kc) blocks of nearly
   equal depth (at most kc; the split depends on the shape alone); B into panels at
   most nc wide; products with n <= narrow_n use kc_narrow in place of kc.
   Products with m <= skinny_m take the streaming (GEMV-like) path instead
   (past 8 rows only for a B of 2^21 floats and more, and with B transposed
   for at most 32 rows). */
typedef struct {
  int64_t mr, nr, mc, kc, nc, skinny_m, kc_narrow, narrow_n;
} ak_sgemm_blocking;
AK_API ak_status ak_sgemm_get_blocking(ak_sgemm_blocking *out);

/* batch independent products; matrix i starts at a + i * stride_a etc. A
   stride of 0 for A or B reuses one matrix for every product. C's matrices
   must not overlap: stride_c >= (m - 1) * ldc + n, or rows interleaved as in
   a [m, batch, n] tensor: n <= stride_c and (batch - 1) * stride_c + n <= ldc
   (else AK_ERR_BAD_STRIDE). */
AK_API ak_status ak_sgemm_strided_batched(ak_trans ta, ak_trans tb, int64_t m, int64_t n, int64_t k,
                                          float alpha, const float *a, int64_t lda,
                                          int64_t stride_a, const float *b, int64_t ldb,
                                          int64_t stride_b, float beta, float *c, int64_t ldc,
                                          int64_t stride_c, int64_t batch);

/* --------------------------------------------------------------- softmax */

/* Row-wise softmax over the last axis of a rows x cols matrix; y may equal x
   (with ldy == ldx), any other overlap of y and x is not allowed (not
   checked). -inf entries get weight 0; an all -inf row gives zeros;
   a NaN (or +inf) makes its row NaN. Entries past cols are never touched. */
AK_API ak_status ak_softmax(int64_t rows, int64_t cols, const float *x, int64_t ldx, float *y,
                            int64_t ldy);
/* Row-wise log(softmax(x)); -inf entries (and every entry of an all -inf
   row) give -inf. */
AK_API ak_status ak_log_softmax(int64_t rows, int64_t cols, const float *x, int64_t ldx, float *y,
                                int64_t ldy);
/* Softmax along the middle axis of a contiguous [outer, axis_len, inner]
   tensor (axis 0 of a matrix: outer = 1, inner = cols); y may equal x, but
   not overlap it otherwise (not checked). */
AK_API ak_status ak_softmax_axis(int64_t outer, int64_t axis_len, int64_t inner, const float *x,
                                 float *y);

/* --------------------------------------------- storage types and caches */

/* Storage type of K/V caches (and of ak_convert's arrays). q, out, bias,
   lse and probs are always fp32, and so is every accumulation. */
typedef enum { AK_F32 = 0, AK_F16 = 1, AK_BF16 = 2 } ak_dtype;

/* dst[i] = src[i] converted, for i < n. Narrowing rounds to nearest, ties
   to even; a finite value past the f16 range becomes +-inf (bf16 has
   fp32's range: only values that round past FLT_MAX do); f16 subnormals
   are kept (no flush to zero); NaN stays NaN, sign kept, in bf16 too (never
   rounded into inf); widening is exact. dst may equal src only when both
   types have the same size; any other overlap is not allowed (not
   checked). n = 0 is a no-op. */
AK_API ak_status ak_convert(ak_dtype dst_type, void *dst, ak_dtype src_type, const void *src,
                            int64_t n);

/* New keys or values into a cache pool: src [n_tokens, num_kv_heads,
   head_dim] fp32 with [token, head] strides (src_strides NULL or both 0 =
   contiguous; head_dim contiguous). Token t goes to slot slots[t] = page *
   page_size + offset, or nowhere if slots[t] = -1. The pool holds num_pages
   pages of [num_kv_heads, page_size, head_dim] in dst_type, with [page,
   head, offset] strides in elements of dst_type (page_strides NULL or all 0
   = contiguous). A contiguous [num_kv_heads, max_len, head_dim] cache is one
   page of page_size max_len. Values are rounded exactly as ak_convert
   rounds them. A slot < -1 or >= num_pages * page_size, or two tokens
   naming one slot, is AK_ERR_BAD_ARGUMENT and nothing is written. The pool
   must not overlap src (not checked). */
AK_API ak_status ak_kv_cache_store(int64_t n_tokens, int64_t num_kv_heads, int64_t head_dim,
                                   const float *src, const int64_t src_strides[2],
                                   const int64_t *slots, ak_dtype dst_type, void *pool,
                                   int64_t num_pages, int64_t page_size,
                                   const int64_t page_strides[3]);

/* ------------------------------------------- rotary positions, embeddings */

/* Which entries of a row form the pairs that ak_rope rotates. */
typedef enum {
  AK_ROPE_NEOX = 0,       /* (i, i + rotary_dim/2): GPT-NeoX, Llama in HF layout */
  AK_ROPE_INTERLEAVED = 1 /* (2i, 2i + 1): GPT-J, Meta's Llama layout */
} ak_rope_style;

/* Rotary position embedding, in place, on x [batch, seq_len, num_heads,
   head_dim] with [batch, seq, head] strides (strides NULL or all 0 =
   contiguous; head_dim contiguous). For i < rotary_dim/2 the pair (a, b)
   of `style` is rotated by angle = positions[b, s] * inv_freq[i]:
     x_a' = x_a cos(angle) - x_b sin(angle), x_b' = x_a sin(angle) + x_b cos(angle).
   positions [batch, seq_len], any int32 (NULL = 0 .. seq_len-1 in every
   batch entry); inv_freq [rotary_dim/2] (NULL = theta^(-2i/rotary_dim),
   rounded to float; theta must then be finite and > 0). rotary_dim even
   and <= head_dim, 0 = head_dim (which must then be even); entries past
   rotary_dim are never touched. Angles are formed and reduced in double:
   within 2e-6 of float64 for |position| < 2^24 (with inv_freq <= 1; NaN or
   inf in inv_freq makes its pairs NaN). Strides must be non-negative,
   strides[2] >= head_dim, and distinct rows must not overlap (checked): q
   and k may be views into one fused projection output. */
AK_API ak_status ak_rope(int64_t batch, int64_t seq_len, int64_t num_heads, int64_t head_dim,
                         int64_t rotary_dim, ak_rope_style style, const int32_t *positions,
                         float theta, const float *inv_freq, float *x, const int64_t strides[3]);

/* Token embedding lookup: out[t, :] = table[ids[t], :] for t < n_tokens,
   from table [vocab_size, dim] (leading dimension ld_table) into out
   [n_tokens, dim] (ld_out). ids[t] < 0 is an unknown token and gives a
   zero row; any ids[t] >= vocab_size is AK_ERR_BAD_ARGUMENT and nothing is
   written. out must not overlap table (not checked). */
AK_API ak_status ak_embedding(int64_t n_tokens, const int32_t *ids, int64_t vocab_size, int64_t dim,
                              const float *table, int64_t ld_table, float *out, int64_t ld_out);

/* ------------------------------------------------------------- attention */

typedef enum {
  AK_MASK_NONE = 0,
  AK_MASK_CAUSAL_TOP_LEFT = 1,    /* key j visible to query i iff j <= i */
  AK_MASK_CAUSAL_BOTTOM_RIGHT = 2 /* iff j <= i + (kv_len - q_len) */
} ak_mask;

typedef struct {
  uint32_t struct_size;                   /* = sizeof(ak_attention_desc): lets the struct grow */
  int64_t batch, num_heads, num_kv_heads; /* num_heads % num_kv_heads == 0 */
  int64_t q_len, kv_len;
  int64_t head_dim, head_dim_v;      /* d_k (q, k) and d_v (v, out); 0 = head_dim */
  float scale;                       /* 0 = 1/sqrt(head_dim) */
  int32_t mask;                      /* an ak_mask value */
  int64_t window_left, window_right; /* around the aligned diagonal; -1 = none */
  const float *bias;                 /* optional additive [b, h, q, kv] */
  int64_t bias_strides[3];           /* [b, h, q]; 0 broadcasts; kv contiguous */
  const int32_t *kv_lens;            /* optional [batch] valid kv length (padding) */
  int64_t q_strides[3];              /* [batch, head, seq]; all 0 = contiguous */
  int64_t k_strides[3];              /* [b, h, s, d] for that tensor */
  int64_t v_strides[3];
  int64_t o_strides[3];
  float *lse;   /* optional out [b, h, q_len]: log-sum-exp of scaled scores */
  float *probs; /* optional out [b, h, q_len, kv_len]: attention weights */
  /* ---- added in 0.2 (a 0.1 program's smaller struct_size leaves them at
     their defaults, as ak_attention_desc_init sets them) ---- */
  int32_t k_type, v_type;     /* ak_dtype of k and v (and of their pools); default AK_F32 */
  float softcap;              /* > 0: s -> softcap * tanh(s / softcap); 0 = off */
  const float *alibi_slopes;  /* optional [num_heads]: + slopes[h] * (j - d(i)) */
  const float *sinks;         /* optional [num_heads] sink logits joining the normalizer */
  const int32_t *block_table; /* optional paged K/V: [batch, block_table_stride] page ids */
  int64_t block_table_stride, page_size, num_pages;
  int64_t k_page_strides[3];   /* [page, kv_head, slot] of the K pool; all 0 = contiguous */
  int64_t v_page_strides[3];   /* [num_pages, num_kv_heads, page_size, dim] */
  const int32_t *cu_seqlens_q; /* optional packed variable-length batch: [batch + 1] */
  const int32_t *cu_seqlens_k; /* row offsets of q/out and of k/v (see ak_attention) */
} ak_attention_desc;

/* The struct_size of a 0.1 descriptor (on this ABI): ak_attention accepts
   it, and every field added since takes its default. */
#define AK_ATTENTION_DESC_SIZE_0_1 ((uint32_t)(offsetof(ak_attention_desc, k_type)))

/* Zeroes *d, sets struct_size and window_left = window_right = -1. Always
   start from this: a zeroed struct is not the default (a window of 0 means
   "the diagonal only"). The macro passes this header's sizeof, so that the
   library initializes exactly the struct the caller has; the exported
   function of the same name serves programs built against the 0.1 header
   (it initializes AK_ATTENTION_DESC_SIZE_0_1 bytes). Bindings call
   ak_attention_desc_init_sized with the size of their struct. A size the
   library does not know is stored as given (after zeroing the bytes it
   knows), so that ak_attention refuses the descriptor rather than ignore
   fields. */
AK_API void ak_attention_desc_init_sized(ak_attention_desc *d, uint32_t size);
AK_API void ak_attention_desc_init(ak_attention_desc *d);
#define ak_attention_desc_init(d) ak_attention_desc_init_sized((d), (uint32_t)sizeof *(d))

/* out[b,h,i,:] = sum_j w[i,j] v[b,h/(num_heads/num_kv_heads),j,:] with
   w[i,:] = softmax_j(scale * q[b,h,i,:] . k[b,hk,j,:] + bias[b,h,i,j]) over the
   keys j visible to query i, w = 0 elsewhere. With n = kv_lens ? kv_lens[b]
   : kv_len, key j is visible to query i iff
     j < n, and
     lo(i) <= j <= hi(i), where d(i) = i + (n - q_len) for
       AK_MASK_CAUSAL_BOTTOM_RIGHT and d(i) = i otherwise (the aligned
       diagonal), hi(i) = d(i) for the causal masks (else unbounded),
       further limited to d(i) + window_right if window_right >= 0, and
       lo(i) = d(i) - window_left if window_left >= 0 (else 0),
   and bias[b,h,i,j] != -inf. Windows align like the mask: with
   AK_MASK_NONE they are measured from d(i) = i (top-left), so a decode
   step with a window should use AK_MASK_CAUSAL_BOTTOM_RIGHT. A query with
   no visible key gets out = 0, lse = -inf and probs = 0. Keys and values
   at positions not visible to a query never reach that query's output (NaN
   or Inf stored there is harmless); a NaN in a visible q, k or bias entry
   makes that query's output row NaN, a NaN in a visible v entry the output
   entries it feeds. A key whose weight is exactly 0 in fp32 (a score of
   -inf, or one about 104 or more below the row's largest, whose exponential
   underflows) feeds nothing: NaN or Inf in its v does not reach the output.
   lse = log sum_j exp(scale q.k_j + bias_j) over the
   visible keys: a score of +inf or NaN (from an infinite or NaN q, k or
   bias entry) makes the row's output, probs and lse NaN; scores of -inf
   weigh 0. A q.k whose fp32 sum overflows is +inf, -inf, NaN or finite
   depending on the order its products are summed in, which differs
   between instruction sets; the first two kinds give one result: NaN.
   Scores are formed in fp32 as (scale * q) . k + bias: a scaled query entry
   or a score past FLT_MAX is infinite (as above).
   Score modifiers, in this order inside a score s = scale * q.k:
     softcap > 0: s = softcap * tanh(s / softcap) (Gemma 2). tanh saturates,
       so an infinite q.k gives a finite score of +-softcap; NaN stays NaN.
     + bias[b,h,i,j] + alibi_slopes[h] * (j - d(i)) (ALiBi, computed per
       key, never stored; d(i) the aligned diagonal above, whose choice
       changes lse but not the weights).
     Then the masks, windows and key counts decide visibility, and
     sinks[h] (gpt-oss, StreamingLLM) joins each row's normalizer as a
     logit with no value: w_ij = exp(s_ij - lse_i) with
     lse_i = log(exp(sinks[h]) + sum_j exp(s_ij)), so the weights sum to
     less than 1. A row with no visible key gets out = 0 and lse = sinks[h];
     a NaN sink makes its head's rows NaN (out and lse); a sink of -inf is
     no sink; a sink of +inf gives out = 0, probs = 0 and lse = +inf.
   Packed variable-length batch (cu_seqlens_q, optional, [batch + 1] with
   cu_seqlens_q[0] = 0, non-decreasing): sequence b's queries are rows
   cu_seqlens_q[b] .. cu_seqlens_q[b+1] - 1 of q and out, each
   q_len_b = cu_seqlens_q[b+1] - cu_seqlens_q[b] <= q_len long; q and out
   are then one [1, num_heads, cu_seqlens_q[batch]] tensor each:
   q_strides[0] and o_strides[0] must be 0 (all three 0 = contiguous
   [num_heads, total, dim]; {0, dim, num_heads * dim} is the token-major
   [total, num_heads, dim] of most engines). Its keys likewise come from
   cu_seqlens_k (n_b <= kv_len; k_strides[0] and v_strides[0] 0) where it
   is set, else from kv_lens (or kv_len) and the block table: a paged cache
   with cu_seqlens_q and kv_lens is chunked prefill. cu_seqlens_k with a
   block table or with kv_lens is AK_ERR_BAD_ARGUMENT. Masks, windows and
   ALiBi align per sequence with q_len_b and n_b in place of q_len and n;
   the bias is indexed by the query's row inside its sequence; lse is
   [num_heads, cu_seqlens_q[batch]]; probs must be NULL. probs are exp(score - lse)
   with lse rounded to fp32, so for scores of magnitude past ~1e7 a row of
   probs may not sum to 1 (out, from the unrounded sums, is unaffected).
   With finite inputs and finite scores every output is finite, v's
   entries near FLT_MAX included (entries whose fp32 sums overflow are
   recomputed, the weights summed in double).
   No output (out, lse, probs) may overlap an input (q, k, v, bias) or
   another output; this is not checked.
   struct_size must be sizeof(ak_attention_desc) of this header or of an
   earlier release (AK_ATTENTION_DESC_SIZE_0_1); fields past it take their
   defaults. Any other size is AK_ERR_BAD_ARGUMENT.
   Storage types: k_type and v_type (ak_dtype) may differ. Half-precision
   keys and values are widened to fp32 exactly as they are read; q and the
   weights are never rounded to a narrower type, so the result is the fp32
   computation on the stored values.
   Paged K/V (block_table != NULL): k and v point at pools of num_pages
   pages, each [num_kv_heads, page_size, dim] with [page, kv_head, slot]
   strides k_page_strides / v_page_strides (all 0 = contiguous), in
   elements of k_type / v_type; k_strides and v_strides must then be all 0.
   Key j of batch entry b is slot j % page_size of page
   block_table[b * block_table_stride + j / page_size]. page_size >= 1,
   block_table_stride >= ceil(kv_len / page_size), and every page id that
   holds a key some query may see by the masks, windows and kv_lens (bias
   aside: a key hidden only by a -inf bias is still read) must lie in
   [0, num_pages); other entries, e.g. -1 for pages past kv_lens[b] or
   left of a sliding window, are never read. Else AK_ERR_BAD_ARGUMENT
   before anything is written.
   Without a block table, page_size, num_pages and the page strides must
   be 0.
   Strides: q_strides etc. give the [batch, head, seq] strides of a tensor
   whose last (head_dim) axis is contiguous; all three 0 means contiguous
   [batch, heads, seq, dim]. bias_strides are taken as given (0 broadcasts
   along that axis; all three 0 is one [kv_len] row for every query); the
   bias kv axis is contiguous. lse is contiguous [batch, num_heads, q_len], probs
   contiguous [batch, num_heads, q_len, kv_len]. */
AK_API ak_status ak_attention(const ak_attention_desc *d, const float *q, const float *k,
                              const float *v, float *out);

/* ------------------------------------------------ worked-example helpers */

/* out[p][2i] = sin(p / base^(2i/dim)), out[p][2i+1] = cos(p / base^(2i/dim))
   for p < max_len; an odd dim leaves the last column 0. */
AK_API ak_status ak_position_encoding(int64_t max_len, int64_t dim, float base, float *out);

/* x [n_tokens, d_model]; w_q, w_k [num_heads, d_model, d_k];
   w_v [num_heads, d_model, d_v]; out [num_heads, n_tokens, d_v] =
   softmax((x w_q)(x w_k)^T / sqrt(d_k)) (x w_v) per head. out must not
   overlap an input (not checked). */
AK_API ak_status ak_mha_self_attention(int64_t n_tokens, int64_t d_model, int64_t num_heads,
                                       int64_t d_k, int64_t d_v, const float *x, const float *w_q,
                                       const float *w_k, const float *w_v, ak_mask mask,
                                       float *out);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* ATTNKERN_H */
