// The per-instruction-set kernel table: the only thing the C API layer knows
// about the kernels. Every entry receives arguments the C API layer has
// already validated; the only failure a kernel can report is running out of
// memory for its scratch buffers.
#pragma once

#include <cstdint>

#include "convert/half.hpp"

namespace attnkern {

struct GemmArgs {
  bool trans_a, trans_b;
  std::int64_t m, n, k;
  float alpha;
  const float *a;
  std::int64_t lda;
  const float *b;
  std::int64_t ldb;
  float beta;
  float *c;
  std::int64_t ldc;
};

struct GemmBatch {
  std::int64_t count;                        // >= 1
  std::int64_t stride_a, stride_b, stride_c; // elements between products
};

enum class KernelStatus { ok, out_of_memory };

// Where the rows of K or V lie and how they are stored: a [batch, kv_head,
// seq] tensor, or pages through a block table (row j of entry b is slot
// j % page_size of page block_table[b * table_stride + j / page_size]), in
// fp32, f16 or bf16 (DType's values). Strides in elements of the type.
struct KvLayout {
  const void *data;
  int type;                // 0 fp32, 1 f16, 2 bf16
  std::int64_t strides[3]; // [batch, head, seq], or paged [page, head, slot]
  const std::int32_t *block_table;
  std::int64_t table_stride, page_size;
  // Packed variable-length keys (no block table): entry b's keys are rows
  // cu_seqlens[b].. of a [1, head, seq] tensor.
  const std::int32_t *cu_seqlens = nullptr;

  int elem_bytes() const { return type == 0 ? 4 : 2; }
  // Row j of (entry b, kv head h). Only for keys whose page was validated.
  const unsigned char *row(std::int64_t b, std::int64_t h, std::int64_t j) const {
    std::int64_t off;
    if (block_table) {
      const std::int64_t page = block_table[b * table_stride + j / page_size];
      off = page * strides[0] + h * strides[1] + (j % page_size) * strides[2];
    } else {
      if (cu_seqlens) j += cu_seqlens[b];
      off = b * strides[0] + h * strides[1] + j * strides[2];
    }
    return static_cast<const unsigned char *>(data) + off * elem_bytes();
  }
};

// ak_attention's arguments after validation: every default resolved (scale,
// head_dim_v, contiguous strides), enums as plain ints.
struct AttentionArgs {
  std::int64_t batch, heads, kv_heads, q_len, kv_len, dk, dv;
  float scale;
  int mask;                               // 0 none, 1 causal top-left, 2 causal bottom-right
  std::int64_t window_left, window_right; // -1 = unbounded
  const float *q, *k, *v;
  float *out;
  std::int64_t q_strides[3], k_strides[3], v_strides[3], o_strides[3]; // [batch, head, seq]
  const float *bias;                                                   // optional
  std::int64_t bias_strides[3];
  const std::int32_t *kv_lens; // optional
  float *lse, *probs;          // optional
  // Score modifiers (attnkern.h): softcap (0 = off), ALiBi slopes and sink
  // logits per query head (optional).
  float softcap;
  const float *alibi_slopes, *sinks;
  // Packed variable-length batch (optional): entry b's queries are rows
  // cu_q[b] .. cu_q[b+1]-1 of q and out (q_strides[0] = o_strides[0] = 0),
  // its keys rows cu_k[b].. of k and v (k/v_strides[0] = 0) where cu_k is
  // given. q_len and kv_len bound every entry's lengths; lse is then
  // [heads, total_q].
  const std::int32_t *cu_q, *cu_k;
  std::int64_t total_q;
  // K and V as stored. Where both are fp32 tensors (no block table) the
  // kernels read them in place through k, v and k/v_strides above; else
  // (staged) they widen or gather each block's rows into scratch first, and
  // k and v are null.
  KvLayout k_src, v_src;
  bool staged() const { return k_src.type != 0 || v_src.type != 0 || k_src.block_table; }

  // Entry b's query count and key count.
  std::int64_t q_len_of(std::int64_t b) const { return cu_q ? cu_q[b + 1] - cu_q[b] : q_len; }
  std::int64_t keys_of(std::int64_t b) const {
    return cu_k ? cu_k[b + 1] - cu_k[b] : kv_lens ? kv_lens[b] : kv_len;
  }
  // The diagonal the masks align query i of an entry with n keys to
  // (bottom-right: the last query with the last key), also ALiBi's origin.
  std::int64_t diagonal(std::int64_t b, std::int64_t n, std::int64_t i) const {
    return mask == 2 ? i + (n - q_len_of(b)) : i;
  }
  // Query i of (entry b, head h), its output row, and the index of its lse.
  const float *q_row(std::int64_t b, std::int64_t h, std::int64_t i) const {
    return q + b * q_strides[0] + h * q_strides[1] + (cu_q ? cu_q[b] + i : i) * q_strides[2];
  }
  float *out_row(std::int64_t b, std::int64_t h, std::int64_t i) const {
    return out + b * o_strides[0] + h * o_strides[1] + (cu_q ? cu_q[b] + i : i) * o_strides[2];
  }
  std::int64_t lse_index(std::int64_t b, std::int64_t h, std::int64_t i) const {
    return cu_q ? h * total_q + cu_q[b] + i : (b * heads + h) * q_len + i;
  }
  // Key j's fp32 K and V rows in place (not staged()).
  const float *k_row(std::int64_t b, std::int64_t h, std::int64_t j) const {
    return k + b * k_strides[0] + h * k_strides[1] + (cu_k ? cu_k[b] + j : j) * k_strides[2];
  }
  const float *v_row(std::int64_t b, std::int64_t h, std::int64_t j) const {
    return v + b * v_strides[0] + h * v_strides[1] + (cu_k ? cu_k[b] + j : j) * v_strides[2];
  }
};

// ak_kv_cache_store's arguments after validation: strides resolved (src in
// floats, the pool in elements of dst_type), every slot in [-1, num_pages *
// page_size) and no slot named twice.
struct KvStoreArgs {
  std::int64_t n_tokens, num_kv_heads, head_dim;
  const float *src;
  std::int64_t src_strides[2]; // [token, head]
  const std::int64_t *slots;   // -1: token skipped
  DType dst_type;
  void *pool;
  std::int64_t page_size;
  std::int64_t page_strides[3]; // [page, head, slot]
};

// ak_rope's arguments after validation: rotary_dim resolved (even, > 0),
// strides resolved and checked (rows never overlap), inv_freq always given
// (the default table made by the C API layer).
struct RopeArgs {
  std::int64_t batch, seq_len, heads, head_dim, rotary_dim;
  bool interleaved;              // pairs (2i, 2i + 1), else (i, i + rotary_dim/2)
  const std::int32_t *positions; // [batch, seq_len]; null: s
  const float *inv_freq;         // [rotary_dim / 2]
  float *x;
  std::int64_t strides[3]; // [batch, seq, head]
};

// ak_embedding's arguments after validation: every id below vocab_size.
struct EmbeddingArgs {
  std::int64_t n_tokens, dim;
  const std::int32_t *ids; // < 0: a zero row
  const float *table;
  std::int64_t ld_table;
  float *out;
  std::int64_t ld_out;
};

// Where the softmax kernels write their output with streaming stores, chosen
// per instruction set and CPU by the configuration table
// (src/isa/config_<isa>.hpp). A threshold of 0 means never. Only where the
// bits are stored changes, never their values.
struct SoftmaxTuning {
  // Row softmax: outputs (rows x cols floats, out of place) of at least
  // this many bytes go through a per-thread row buffer to streaming stores.
  std::int64_t stream_rows_min_bytes = 0;
  // softmax_axis: pieces whose exponentials (in flight at once) reach this
  // many bytes write them to y in streaming stores in the first pass.
  std::int64_t stream_axis_min_bytes = 0;
};

// The SGEMM blocking of one instruction set (see ak_sgemm_blocking).
struct GemmBlocking {
  std::int64_t mr, nr, mc, kc, nc, skinny_m, kc_narrow, narrow_n;
};

struct KernelTable {
  const char *name; // as ak_get_isa() reports it
  GemmBlocking gemm_blocking;
  KernelStatus (*sgemm)(const GemmArgs &args, const GemmBatch &batch, int threads);
  // Row-wise softmax (log_softmax when `log`) of a rows x cols matrix.
  void (*softmax_rows)(std::int64_t rows, std::int64_t cols, const float *x, std::int64_t ldx,
                       float *y, std::int64_t ldy, bool log, int threads);
  // Softmax along the middle axis of a contiguous [outer, axis, inner] tensor.
  KernelStatus (*softmax_axis)(std::int64_t outer, std::int64_t axis_len, std::int64_t inner,
                               const float *x, float *y, int threads);
  KernelStatus (*attention)(const AttentionArgs &args, int threads);
  // dst[i] = src[i] converted (half.hpp's rounding), i < n; dst == src only
  // for types of one size.
  void (*convert)(DType dst_type, void *dst, DType src_type, const void *src, std::int64_t n,
                  int threads);
  void (*kv_cache_store)(const KvStoreArgs &args, int threads);
  void (*rope)(const RopeArgs &args, int threads);
  void (*embedding)(const EmbeddingArgs &args, int threads);
};

// One accessor per instruction-set translation unit that the build compiled.
namespace avx512 {
const KernelTable &kernel_table();
}
namespace avx2 {
const KernelTable &kernel_table();
}
namespace sse2 {
const KernelTable &kernel_table();
}
namespace neon {
const KernelTable &kernel_table();
}
namespace scalar {
const KernelTable &kernel_table();
}

} // namespace attnkern
