// One ak_attention call described by its options, and built in an Arena with
// every tensor, table and optional array exactly as long as the header says:
// q, k, v, out (contiguous, strided or packed), K/V pools, the block table
// ([batch, block_table_stride]), bias, kv_lens, ALiBi slopes, sinks,
// cu_seqlens, lse and probs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "guard_harness.hpp"

namespace guard {

struct AttnSpec {
  std::string label;
  std::int64_t batch = 1, heads = 1, kv_heads = 1, q_len = 1, kv_len = 1, dk = 8, dv = 0;
  int mask = AK_MASK_NONE;
  std::int64_t window_left = -1, window_right = -1;
  ak_dtype k_type = AK_F32, v_type = AK_F32;
  bool strided = false; // q, k, v, out token-major [b, s, h, d] with gaps between heads
  enum Bias { no_bias, full_bias, head_broadcast_bias, one_row_bias } bias = no_bias;
  std::vector<std::int32_t> kv_lens;
  bool alibi = false, sinks = false, lse = false, probs = false;
  float softcap = 0.0f;
  // Paged K/V when page_size > 0.
  std::int64_t page_size = 0;
  enum Pool { contiguous_pool, head_major_gaps, slot_major_gaps } pool = contiguous_pool;
  std::int64_t extra_cols = 0; // block-table columns past ceil(kv_len / page_size)
  // Packed variable-length batch.
  std::vector<std::int32_t> cu_q, cu_k;
  // NaN in every K and V row that no query of its entry sees (the header:
  // harmless there). Blocks that hold such rows take the kernels' exact
  // paths (a non-finite value in a loaded block).
  bool poison_hidden = false;
  // Column 0 of every V row near FLT_MAX: the fp32 accumulator overflows
  // and the rows are recomputed (outputs stay finite). Not for f16 V.
  bool huge_v = false;
};

// The block table of a paged spec: every page that holds a key some query
// sees gets its own id (shuffled); every other entry, the columns past the
// pages of kv_len included, is -1 or num_pages, which lie a pool page
// before or past the pool, inside a guard (the library must not read them).
struct PageTable {
  std::vector<std::int32_t> ids; // [batch, stride]
  std::int64_t stride = 0, num_pages = 0;
  std::vector<std::int64_t> needed; // indices into ids of the pages a visible key needs
};
PageTable make_page_table(const AttnSpec &s);

// Keys [lo, hi) that some query of entry b sees (lo == hi: none), from the
// masks, windows and key counts as the header defines them.
void visible_hull(const AttnSpec &s, std::int64_t b, std::int64_t *lo, std::int64_t *hi);

// Buffers of one call, in `ar`. `table` is the block table to pass (a copy
// of make_page_table's, possibly corrupted); ignored without paging.
struct AttnCall {
  ak_attention_desc d;
  const float *q;
  const void *k, *v;
  float *out;
  std::int64_t out_n, out_written, lse_n, probs_n;
};
AttnCall build_call(Arena &ar, const AttnSpec &s, const PageTable &table);

// Runs the spec through run_case: status AK_OK, out, lse and probs written
// in full (finite where they must be), the same in every placement.
void attention_case(const AttnSpec &s);

std::string describe(const AttnSpec &s);

// A spec of these shapes, every other field at its default.
inline AttnSpec spec(const char *label, std::int64_t batch, std::int64_t heads,
                     std::int64_t kv_heads, std::int64_t q_len, std::int64_t kv_len,
                     std::int64_t dk, std::int64_t dv = 0) {
  AttnSpec s;
  s.label = label;
  s.batch = batch, s.heads = heads, s.kv_heads = kv_heads;
  s.q_len = q_len, s.kv_len = kv_len, s.dk = dk, s.dv = dv;
  return s;
}

} // namespace guard
