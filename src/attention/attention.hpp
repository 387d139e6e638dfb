// Fused scaled-dot-product attention (FlashAttention-2 style) for one
// instruction set.
//
// Work item = (batch, kv head, group of its query heads, block of queries,
// chunk of keys). Its rows are (query head, query) pairs that share one K/V
// head, so GQA/MQA heads reuse each K and V block. For each block of keys
// that some row can see:
//   S = (scale Q) K^T         register-tiled GEMM micro-kernel on packed K
//   mask, bias, online softmax per row (running max m, running sum l)
//   O = O * exp(m_old - m_new) + P V   the same micro-kernel, packed V
// and at the end out = O / l, lse = m + log l. Where a query block's whole
// group of heads has at most kDirectRows rows (decode, a few queries of a
// GQA group; AttentionPlan::direct), items skip the packing and the
// register tile: GEMV-like kernels read K and V in place
// (key_block_direct). Scratch is per thread and sized by the blocks, never
// by q_len x kv_len.
//
// Keys are split into fixed chunks (kKvChunk) only for short query blocks
// (decode); the split depends on the shape alone, so results are identical
// for every thread count. Chunks are merged by log-sum-exp in chunk order.
//
// The pieces: visible_keys.hpp (which keys a query sees), attention_plan.hpp
// (items, blocks, chunks, path), attention_item.hpp (a work item) with
// packed_path.hpp, direct_path.hpp and row_update.hpp (its members by path),
// row_state.hpp (the rows' online-softmax state and their end),
// merge_chunks.hpp (split rows) and overflow_repair.hpp (rows whose fp32
// accumulator overflowed). The measurements behind the tuning choices are in
// docs/tuning.md (attention).
#pragma once

#include <cstdint>

#include "../gemm/gemm_common.hpp"
#include "../kernel_table.hpp"
#include "../scratch.hpp"
#include "../threading.hpp"
#include "attention_item.hpp"
#include "attention_plan.hpp"
#include "direct_path.hpp"
#include "merge_chunks.hpp"
#include "packed_path.hpp"
#include "row_update.hpp"
#include "typed_path.hpp"

namespace attnkern {
namespace AK_ISA_NS {

template <class V, class Cfg> KernelStatus attention(const AttentionArgs &a, int threads) {
  if (a.batch == 0 || a.heads == 0 || a.q_len == 0) return KernelStatus::ok;
  const double flops = 2.0 * a.batch * a.heads * a.q_len * static_cast<double>(a.kv_len + 1) *
                       static_cast<double>(a.dk + a.dv);
  threads = threads_for_work(threads, flops, 2.0e6);
  // Head dimensions past 2^30 floats would need over 2 TiB of scratch per
  // thread (hundreds of rows of them), and their sums below could overflow.
  if (a.dk > (std::int64_t{1} << 30) || a.dv > (std::int64_t{1} << 30))
    return KernelStatus::out_of_memory;
  const AttentionPlan<Cfg> plan(a, threads);
  if (plan.items < threads) threads = static_cast<int>(max64(plan.items, 1));
  const std::int64_t rows_total = a.batch * a.heads * a.q_len;
  // All scratch up front, so that running out of memory writes nothing.
  const std::int64_t per_thread = plan.scratch_floats(a) + plan.dv_pad; // + merge row
  const std::int64_t partial_floats = plan.split() ? rows_total * plan.n_chunks * (a.dv + 2) : 0;
  Scratch scratch(static_cast<std::size_t>(per_thread * threads + partial_floats));
  if (!scratch.data()) return KernelStatus::out_of_memory;
  float *const partial = scratch.data() + per_thread * threads;
  const auto run = [&](bool team) {
    float *mine = scratch.data() + per_thread * (team ? omp_thread_id() : 0);
    AttentionItem<V, Cfg> item(a, plan, mine);
    // Split (decode) items go out in runs of consecutive chunks, a quarter of
    // a thread's share each, so that a thread knows its next item (the next
    // chunk of the same head) except at a run's end and can request its K
    // rows ahead (run's warm_next); runs rather than one static share keep
    // the balance when a core is slowed by something else.
    // Short packed items (kShortItemKeys keys at most: an encoder's) go out
    // in runs too (an eighth of a share) where they all do the same work (no
    // mask, window or kv_lens), so that a thread can request its next item's
    // rows (AttentionItem::plan_next_item): 2 threads, batch 8, 12 heads, d
    // rows (AttentionItem::plan_next_item). Longer items gain less than the
    // last run's imbalance costs, and with a causal mask the later items see
    // more keys, so runs would cost the balance.
    constexpr std::int64_t kShortItemKeys = 256;
    const bool short_uniform = a.kv_len <= kShortItemKeys && a.mask == 0 && a.window_left < 0 &&
                               a.window_right < 0 && !a.kv_lens && !a.cu_q && !a.cu_k;
    const std::int64_t run_len = !team           ? 1
                                 : plan.split()  ? max64(1, plan.items / (4 * threads))
                                 : short_uniform ? max64(1, plan.items / (8 * threads))
                                                 : 1;
    team_for_dynamic(
        team, plan.items,
        [&](std::int64_t it) { item.run(it, partial, !team || (it + 1) % run_len != 0); }, run_len);
    if (plan.split()) {
      float *acc = mine + plan.scratch_floats(a);
      team_for_static(team, rows_total,
                      [&](std::int64_t row) { merge_chunks<V, Cfg>(a, plan, partial, acc, row); });
    }
  };
  if (threads > 1) {
#pragma omp parallel num_threads(threads)
    run(true);
  } else {
    run(false);
  }
  return KernelStatus::ok;
}

} // namespace AK_ISA_NS
} // namespace attnkern
