// The packed path of a work item (the rows of a query block, or more): for
// each block of keys, K^T and V packed into the GEMM's slivers and the
// register-tiled micro-kernel over MR-row tiles:
//   S = (scale Q) K^T, the rows' online softmax, O = O * corr + P V.
// Also the requests for the next item's first rows while the last key block
// computes.
#pragma once

#include <cstdint>

#include "../gemm/gemm_common.hpp"
#include "../gemm/gemm_pack.hpp"
#include "../gemm/sgemm_ukernel.hpp"
#include "attention_item.hpp"
#include "row_state.hpp"
#include "visible_keys.hpp"

namespace attnkern {
namespace AK_ISA_NS {

// Packed items: the next item's Q rows and first K and V blocks, to be
// requested into L2 a few rows at a time while this item's last key block
// computes (prefetch_next). Short prefill (an encoder's L of 128-512 over
// many heads) reads a new head every item or two, and its first touch of
// Q, K and V otherwise waits on L3 or memory in the packing loops.
template <class V, class Cfg>
inline void AttentionItem<V, Cfg>::plan_next_item(std::int64_t index) {
  const ItemCoords c = coords(index);
  const std::int64_t h0 = c.kvh * p_.group + c.hc * p_.heads_per_item;
  const std::int64_t nh = min64(p_.heads_per_item, (c.kvh + 1) * p_.group - h0);
  const std::int64_t i0 = c.qb * p_.bq, nq = min64(p_.bq, a_.q_len_of(c.b) - i0);
  if (nq <= 0) return; // an empty item (packed sequences): nothing to request
  const std::int64_t n = a_.keys_of(c.b);
  const std::int64_t c0 = c.chunk * p_.chunk, c1 = min64(min64(c0 + p_.chunk, a_.kv_len), n);
  const std::int64_t lo = max64(visible_keys(a_, c.b, n, i0).lo, c0);
  const std::int64_t j0 = c0 + max64(lo - c0, 0) / Plan::kBk * Plan::kBk;
  const std::int64_t keys = max64(min64(j0 + Plan::kBk, c1) - j0, 0);
  next_q_ = a_.q_row(c.b, h0, i0);
  next_nq_ = nq;
  if (a_.staged()) { // the staging loop requests its own rows ahead
    next_k_ = next_v_ = nullptr, next_keys_ = 0, next_rows_ = nh * nq, next_done_ = 0;
    return;
  }
  // (No key: no pointer formed, as j0 may lie past the tensor's end.)
  next_k_ = keys > 0 ? a_.k_row(c.b, c.kvh, j0) : nullptr;
  next_v_ = keys > 0 ? a_.v_row(c.b, c.kvh, j0) : nullptr;
  next_keys_ = keys;
  next_rows_ = nh * nq + 2 * keys;
  next_done_ = 0;
}

// Requests `count` more rows of the next item (plan_next_item): Q's rows,
// then K's, then V's.
template <class V, class Cfg> inline void AttentionItem<V, Cfg>::prefetch_next(std::int64_t count) {
  const std::int64_t q_rows = next_rows_ - 2 * next_keys_;
  for (const std::int64_t end = min64(next_done_ + count, next_rows_); next_done_ < end;
       ++next_done_) {
    const std::int64_t r = next_done_;
    if (r < q_rows)
      prefetch_row(next_q_ + r / next_nq_ * a_.q_strides[1] + r % next_nq_ * a_.q_strides[2],
                   a_.dk);
    else if (r < q_rows + next_keys_)
      prefetch_row(next_k_ + (r - q_rows) * a_.k_strides[2], a_.dk);
    else
      prefetch_row(next_v_ + (r - q_rows - next_keys_) * a_.v_strides[2], a_.dv);
  }
}

// One block of keys [j0, j1) of the item (direct items: key_block_direct).
template <class V, class Cfg>
inline void AttentionItem<V, Cfg>::key_block(std::int64_t j0, std::int64_t j1) {
  if (direct_) return key_block_direct(j0, j1);
  const std::int64_t bk = j1 - j0, dk = a_.dk;
  // K^T block as the GEMM's B: NR keys per sliver, dk deep; only the
  // slivers that hold keys (the tiles below form no others).
  locate_k(j0, j1);
  for (std::int64_t jj = 0; jj < bk; jj += NR) {
    const int cols = static_cast<int>(min64(NR, bk - jj));
    pack_b_sliver<NR>(dk, cols, kblk_ + jj * ks_, 1, ks_, kpack_ + jj * dk);
  }
  // Row tiles none of whose rows sees a key of this block (above the
  // causal diagonal, left of a window) are skipped throughout: their
  // scores are never formed, read or weighed. The others form scores only
  // for the NR-key slivers that hold keys some row of the tile sees, and
  // weigh only the keys of their span (the rest weigh exactly 0): a tile
  // on the causal diagonal does about the work of its visible triangle.
  mark_active_tiles(j0, j1);
  // The next item's rows go out during the last block, spread over its
  // row tiles (twice: Q K^T and P V).
  const std::int64_t next_per_tile =
      next_rows_ > 0 && j0 + Plan::kBk >= u_hi_ ? ceil_div(next_rows_, 2 * ceil_div(rows_, MR)) : 0;
  // S = (scale Q) K^T over the active row tiles.
  for (std::int64_t r0 = 0; r0 < p_.rows_pad; r0 += MR) {
    const std::int64_t t = r0 / MR;
    if (next_per_tile) prefetch_next(next_per_tile);
    if (!tile_active(t)) continue;
    for (std::int64_t jj = tile_lo_[t] / NR * NR; jj < tile_hi_[t]; jj += NR)
      sgemm_ukernel<V, MR, NV>(dk, qpack_ + r0 * dk, kpack_ + jj * dk, 1.0f, 0.0f,
                               scores_ + r0 * p_.bk_pad + jj, p_.bk_pad);
  }
  // softmax_update overwrites the scores a row does not see with -inf, so
  // the slivers left unformed above are never read as scores.
  for (std::int64_t r = 0; r < rows_; ++r)
    if (tile_active(r / MR)) softmax_update(r, j0, bk);
  for (std::int64_t r = rows_; r < p_.rows_pad; ++r) // padding rows weigh nothing
    for (std::int64_t j = 0; j < bk; ++j) scores_[r * p_.bk_pad + j] = 0.0f;
  // V block as the GEMM's B: NR value columns per sliver, bk deep.
  locate_v(j0, j1);
  for (std::int64_t s = 0; s * NR < p_.dv_pad; ++s) {
    const std::int64_t d0 = s * NR;
    pack_b_sliver<NR>(bk, static_cast<int>(min64(NR, a_.dv - d0)), vblk_ + d0, vs_, 1,
                      vpack_ + d0 * bk);
  }
  if (has_non_finite<V>(vpack_, bk * p_.dv_pad)) {
    // Inf/NaN in V: a zero weight times Inf would still be NaN, so the
    // rows accumulate only the keys they actually weigh.
    exact_pv(bk);
    return;
  }
  // The weights are the GEMM's A, read in place from the score rows (in
  // L1/L2) rather than packed.
  for (std::int64_t r0 = 0; r0 < p_.rows_pad; r0 += MR) {
    const std::int64_t t = r0 / MR;
    if (next_per_tile) prefetch_next(next_per_tile);
    if (!tile_active(t)) continue;
    const std::int64_t k0 = tile_lo_[t], k1 = tile_hi_[t];
    for (std::int64_t d0 = 0; d0 < p_.dv_pad; d0 += NR)
      sgemm_ukernel<V, MR, NV, 0>(k1 - k0, scores_ + r0 * p_.bk_pad + k0,
                                  vpack_ + d0 * bk + k0 * NR, 1.0f, 1.0f,
                                  st_.acc + r0 * p_.dv_pad + d0, p_.dv_pad, p_.bk_pad);
  }
}

// For each MR-row tile, the keys of block [j0, j1) that some row of it
// sees, as offsets from j0: [tile_lo_, tile_hi_), empty when none does.
template <class V, class Cfg>
inline void AttentionItem<V, Cfg>::mark_active_tiles(std::int64_t j0, std::int64_t j1) {
  for (std::int64_t t = 0; t * MR < p_.rows_pad; ++t) {
    std::int64_t lo = j1 - j0, hi = 0;
    for (std::int64_t r = t * MR; r < min64((t + 1) * MR, rows_); ++r) {
      const std::int64_t iq = r % nq_;
      const std::int64_t a = max64(lo_[iq], j0), e = min64(hi_[iq], j1);
      if (e > a) lo = min64(lo, a - j0), hi = max64(hi, e - j0);
    }
    tile_lo_[t] = lo, tile_hi_[t] = hi;
  }
}

template <class V, class Cfg> inline bool AttentionItem<V, Cfg>::tile_active(std::int64_t t) const {
  return tile_hi_[t] > tile_lo_[t];
}

} // namespace AK_ISA_NS
} // namespace attnkern
