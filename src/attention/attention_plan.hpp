// The plan of an attention call: how its rows and keys are cut into work
// items (rows per item, key blocks, split chunks), which path the items take
// (packed or direct), and the scratch each thread needs.
#pragma once

#include <cstdint>

#include "../gemm/gemm_common.hpp"
#include "../kernel_table.hpp"

namespace attnkern {
namespace AK_ISA_NS {

// Decisions shared by every work item: the shape's, and the rows an item
// holds, which also follows the thread count (see the constructor).
template <class Cfg> struct AttentionPlan {
  static constexpr int MR = Cfg::mr, NR = Cfg::nv * Cfg::width;
  static constexpr std::int64_t kMaxRows = 384;
  // Rows per item (target): each packed K and V block serves all of them, so
  // more rows amortize the packing. 384 keeps Q, the scores and the
  // accumulator (about 200 KiB each at d = 128) and the K and V blocks (64
  // KiB each) in a 1 MiB L2.
  static constexpr std::int64_t kRows = kMaxRows / MR * MR;
  static constexpr std::int64_t kBk = (128 + NR - 1) / NR * NR; // keys per block
  static constexpr std::int64_t kKvChunk = 1024;                // keys per split chunk
  static constexpr std::int64_t kSplitMaxQ = 16; // split keys only for q blocks this short
  // Items read K and V in place where q_len x group <= kDirectRows and d_v
  // is a multiple of the vector width (`direct` below; AttentionItem::run),
  // kDirectBk keys at a time; up to kDirectOneCall rows go to the GEMV-like
  // kernels in one call, more in groups of rows.
  static constexpr std::int64_t kDirectRows = 32;
  static constexpr int kDirectOneCall = 8;
  static constexpr std::int64_t kDirectBk = 256;
  // Keys per block of the direct items whose 1 or 2 rows read K and V in
  // address order (AttentionItem::in_order_nv): a whole split chunk. Each
  // block is a K pass and then a V pass, and every switch between the two
  // streams restarts the hardware prefetcher: the longer the blocks, the
  // fewer the restarts. (Groups of 4, which take the requests ahead, keep
  // kDirectBk.)
  static constexpr std::int64_t kInOrderBk = kKvChunk;
  // Direct items over staged K/V (AttentionArgs::staged) widen their
  // blocks' rows kStagedRun keys at a time, into rows that stay in L1 (8
  // KiB at d = 128): staging a whole block would write each line back out
  // of L1, and those writes hold the miss buffers the stream from memory
  // needs. A run is one of the P V pass's, so the sums keep their order
  // and the results are the in-place path's bits on the widened values.
  static constexpr std::int64_t kStagedRun = 16;
  static_assert(kDirectRows <= kBk, "direct items save their accumulator in the V block");
  static_assert(kDirectBk % 16 == 0 && kInOrderBk % 16 == 0,
                "a score row has room for whole vectors (softmax_update)");
  static_assert(2 * kInOrderBk <= kDirectRows * kDirectBk, "in-order rows fit the score rows");
  static_assert(kRows <= kMaxRows, "row arrays are sized for kMaxRows");

  std::int64_t group, bq, heads_per_item, n_hc, n_qb, n_chunks, chunk;
  std::int64_t rows_pad, bk_pad, dv_pad;
  std::int64_t items;
  // Whether items read K and V in place (AttentionItem::run): when a query
  // block's whole group of heads has at most kDirectRows rows. A function
  // of the shape alone, not of the rows an item holds, which follow the
  // thread count: else the thread count would pick the path, and with it the
  // last bits of the results.
  bool direct;

  // On a team, items of half the rows where the full ones would leave
  // fewer than 4 per thread (few heads, short L), so that the dynamic
  // schedule can still even the threads out. The rows an item holds change
  // no result: each row's arithmetic is its own, the keys a tile skips
  // weigh exactly 0, and the key blocks lie on a grid of the shape's
  // (AttentionItem::run).
  AttentionPlan(const AttentionArgs &a, int threads) {
    plan_rows(a, kRows);
    if (threads > 1 && items < 4 * threads) plan_rows(a, kRows / 2 / MR * MR);
    // q_len * group <= kDirectRows rows fit one item in either plan.
    static_assert(kDirectRows <= kRows / 2 / MR * MR, "a direct item holds its whole group");
    direct = a.q_len * group <= kDirectRows && a.dv % Cfg::width == 0;
  }
  bool split() const { return n_chunks > 1; }
  std::int64_t scores_floats() const { return max64(rows_pad * bk_pad, kDirectRows * kDirectBk); }
  // Floats of per-thread scratch.
  std::int64_t scratch_floats(const AttentionArgs &a) const {
    return rows_pad * a.dk                           // packed scaled Q
           + a.dk * bk_pad                           // packed K block
           + kBk * dv_pad                            // packed V block
           + scores_floats()                         // scores / weights
           + rows_pad * dv_pad                       // output accumulator
           + 2 * rows_pad + 64                       // m, l
           + (a.staged() ? kBk * (a.dk + a.dv) : 0); // staged K and V rows
  }

private:
  void plan_rows(const AttentionArgs &a, std::int64_t rows) {
    group = a.heads / a.kv_heads;
    bq = min64(a.q_len, rows);
    heads_per_item = min64(max64(rows / bq, 1), group);
    n_hc = ceil_div(group, heads_per_item);
    n_qb = ceil_div(a.q_len, bq);
    const bool split = a.q_len <= kSplitMaxQ && a.kv_len > kKvChunk;
    chunk = split ? kKvChunk : max64(a.kv_len, 1);
    n_chunks = split ? ceil_div(a.kv_len, kKvChunk) : 1;
    rows_pad = round_up(bq * heads_per_item, MR);
    bk_pad = round_up(kBk, NR);
    dv_pad = round_up(a.dv, NR);
    items = a.batch * a.kv_heads * n_hc * n_qb * n_chunks;
  }
};

} // namespace AK_ISA_NS
} // namespace attnkern
