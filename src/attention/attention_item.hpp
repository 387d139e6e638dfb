// A work item of the attention kernel: the rows (query head, query) of one
// batch entry, kv head, group of its query heads and block of queries, over
// one chunk of keys. This header holds the item's state, where it sits, its
// Q rows and the loop over its key blocks (run); the other members are
// defined by path, in headers that attention.hpp includes:
//   packed_path.hpp  K and V packed, the register-tiled micro-kernel
//   direct_path.hpp  K and V read in place, GEMV-like kernels
//   row_update.hpp   each row's online-softmax step and its end
#pragma once

#include <cstdint>
#include <limits>

#include "../gemm/gemm_common.hpp"
#include "../gemm/gemm_pack.hpp"
#include "../kernel_table.hpp"
#include "../simd.hpp"
#include "attention_plan.hpp"
#include "kv_staging.hpp"
#include "row_state.hpp"
#include "visible_keys.hpp"

namespace attnkern {
namespace AK_ISA_NS {

template <class V, class Cfg> class AttentionItem {
  using Plan = AttentionPlan<Cfg>;
  using reg = typename V::reg;
  static constexpr int MR = Cfg::mr, NV = Cfg::nv, W = V::width, NR = NV * W;
  static constexpr int kDirectOneCall = Plan::kDirectOneCall;

public:
  AttentionItem(const AttentionArgs &a, const Plan &p, float *scratch) : a_(a), p_(p) {
    float *s = scratch;
    qpack_ = s, s += p.rows_pad * a.dk;
    kpack_ = s, s += a.dk * p.bk_pad;
    vpack_ = s, s += Plan::kBk * p.dv_pad;
    scores_ = s, s += p.scores_floats();
    st_.acc = s, s += p.rows_pad * p.dv_pad;
    st_.m = s, s += p.rows_pad;
    st_.l = s, s += p.rows_pad + 64;
    kst_ = s, s += Plan::kBk * a.dk;
    vst_ = s;
  }

  // Runs item `index`; partials (split) go to `partial`. `warm_next`: this
  // thread runs item index + 1 next, so the last key block requests that
  // item's first K rows, as each block does for the next block's; else each
  // chunk's K stream starts cold.
  void run(std::int64_t index, float *partial, bool warm_next = false) {
    next_item_k_ = nullptr, next_item_keys_ = 0;
    next_rows_ = 0;
    if (warm_next && index + 1 < p_.items && !a_.staged()) find_item_keys(index + 1);
    decode_index(index);
    if (nq_ <= 0) return; // a query block past its entry's packed sequence
    setup_rows();
    if (warm_next && index + 1 < p_.items && !p_.direct) plan_next_item(index + 1);
    // Few rows (decode, GQA groups, a few queries per step as in
    // speculative decoding): padding them to an MR-row tile would multiply
    // the arithmetic, and packing K and V would double their traffic or,
    // with 9 to 32 rows, cost as much as the arithmetic. Instead the rows
    // take GEMV-like kernels that read K and V where they lie, once per
    // block; past 8 rows, in groups of rows. From 48 rows on packing is
    // about even, and keeps them. A function of the shape alone
    // (AttentionPlan::direct).
    direct_ = p_.direct;
    dbk_ = in_order_nv(rows_) ? Plan::kInOrderBk : Plan::kDirectBk;
    sld_ = direct_ ? dbk_ : p_.bk_pad;
    sbase_ = scores_;
    typed_ = direct_ && a_.staged() && widens_in_registers<V>() && rows_ <= kDirectOneCall;
    pack_q();
    const float ninf = -std::numeric_limits<float>::infinity();
    for (std::int64_t r = 0; r < p_.rows_pad; ++r) st_.m[r] = ninf, st_.l[r] = 0.0f;
    for (std::int64_t x = 0; x < p_.rows_pad * p_.dv_pad; ++x) st_.acc[x] = 0.0f;
    // A sink joins each row's normalizer once: as the state of a row that
    // has seen one key of weight 1 and value 0. Split rows take it when
    // their chunks merge (merge_chunks).
    if (a_.sinks && !p_.split())
      for (std::int64_t r = 0; r < rows_; ++r) start_with_sink(r, a_.sinks[head_of(r)]);
    if (a_.probs) fill_probs(ninf);
    if (direct_) { // an item holds its whole group: [u_lo_, u_hi_) follows the shape
      for (std::int64_t j0 = u_lo_; j0 < u_hi_; j0 += dbk_) key_block(j0, min64(j0 + dbk_, u_hi_));
    } else {
      // Key blocks on a grid of the shape's (kBk apart from the chunk's
      // first key, cut at the chunk's end or the entry's kv_lens), not from
      // the first to the last key this item's rows see: the rows an item
      // holds follow the thread count (AttentionPlan), and a row's online
      // softmax and its exp's vector/scalar split follow the blocks, so
      // blocks bounded by the item's keys gave other bits on other thread
      // counts. The keys a block gains are masked for every row (tiles skip
      // them).
      const std::int64_t end = min64(c1_, n_);
      if (u_hi_ > u_lo_) // (else no row sees a key, and u_lo_ may not be one)
        for (std::int64_t j0 = c0_ + (u_lo_ - c0_) / Plan::kBk * Plan::kBk; j0 < u_hi_;
             j0 += Plan::kBk)
          key_block(j0, min64(j0 + Plan::kBk, end));
    }
    if (p_.split())
      write_partials(partial);
    else
      finish_rows();
  }

private:
  // Where item `index` sits: batch entry, kv head, group of its query
  // heads, block of queries, chunk of keys (the order of the items).
  struct ItemCoords {
    std::int64_t b, kvh, hc, qb, chunk;
  };
  ItemCoords coords(std::int64_t index) const {
    ItemCoords c{};
    c.chunk = index % p_.n_chunks, index /= p_.n_chunks;
    c.qb = index % p_.n_qb, index /= p_.n_qb;
    c.hc = index % p_.n_hc, index /= p_.n_hc;
    c.kvh = index % a_.kv_heads, c.b = index / a_.kv_heads;
    return c;
  }

  // The first K row of item `index`'s chunk and its key count (where an
  // unmasked item starts reading), into next_item_k_ / next_item_keys_.
  void find_item_keys(std::int64_t index) {
    const ItemCoords c = coords(index);
    const std::int64_t c0 = c.chunk * p_.chunk;
    next_item_keys_ = min64(c0 + p_.chunk, a_.keys_of(c.b)) - c0;
    next_item_k_ = next_item_keys_ > 0 ? a_.k_row(c.b, c.kvh, c0) : nullptr;
    if (!next_item_k_) next_item_keys_ = 0;
  }

  void decode_index(std::int64_t index) {
    const ItemCoords c = coords(index);
    chunk_ = c.chunk, kvh_ = c.kvh, b_ = c.b;
    h0_ = kvh_ * p_.group + c.hc * p_.heads_per_item;
    nh_ = min64(p_.heads_per_item, (kvh_ + 1) * p_.group - h0_);
    i0_ = c.qb * p_.bq;
    q_len_ = a_.q_len_of(b_);
    nq_ = min64(p_.bq, q_len_ - i0_);
    rows_ = nq_ > 0 ? nh_ * nq_ : 0;
    n_ = a_.keys_of(b_);
    c0_ = chunk_ * p_.chunk;
    c1_ = min64(c0_ + p_.chunk, a_.kv_len);
  }

  std::int64_t head_of(std::int64_t r) const { return h0_ + r / nq_; }
  std::int64_t query_of(std::int64_t r) const { return i0_ + r % nq_; }

  // Visible key range of each row within this chunk, and their union.
  void setup_rows() {
    u_lo_ = c1_, u_hi_ = c0_;
    for (std::int64_t iq = 0; iq < nq_; ++iq) {
      const KeyRange kr = visible_keys(a_, b_, n_, i0_ + iq);
      const std::int64_t lo = max64(kr.lo, c0_), hi = max64(min64(kr.hi, c1_), lo);
      lo_[iq] = lo, hi_[iq] = hi;
      if (hi > lo) u_lo_ = min64(u_lo_, lo), u_hi_ = max64(u_hi_, hi);
    }
    if (u_hi_ < u_lo_) u_hi_ = u_lo_;
    // The hull of the keys the entry's queries see (both ends only grow
    // with the query): staging zeroes the rows outside it, whose pages may
    // not exist. A function of the shape alone, unlike [u_lo_, u_hi_)
    // (the rows an item holds follow the thread count), so that a block's
    // staged rows, and with them which P V kernel it takes, are too.
    hull_lo_ = hull_hi_ = 0;
    if (a_.staged()) {
      const auto sees = [&](std::int64_t i) {
        const KeyRange kr = visible_keys(a_, b_, n_, i);
        return kr.hi > kr.lo;
      };
      std::int64_t first = 0, last = q_len_ - 1;
      while (first <= last && !sees(first)) ++first;
      while (last >= first && !sees(last)) --last;
      if (first <= last)
        hull_lo_ = visible_keys(a_, b_, n_, first).lo, hull_hi_ = visible_keys(a_, b_, n_, last).hi;
    }
  }

  // Q rows, times scale, into MR-tall slivers (zero rows pad the last one).
  void pack_q() {
    const std::int64_t dk = a_.dk;
    if (direct_) { // plain rows, row r at qpack_ + r * dk
      for (std::int64_t r = 0; r < rows_; ++r) {
        const float *src = a_.q_row(b_, head_of(r), query_of(r));
        for (std::int64_t d = 0; d < dk; ++d) qpack_[r * dk + d] = src[d] * a_.scale;
      }
      return;
    }
    // A tile of MR queries of one head is equally spaced in Q: the GEMM's
    // transposing pack (16 x 16 blocks in registers on AVX-512), then the
    // scale in place (the same single rounding of q * scale).
    for (std::int64_t r0 = 0; r0 < p_.rows_pad; r0 += MR) {
      float *dst = qpack_ + r0 * dk;
      if (r0 + MR <= rows_ && head_of(r0) == head_of(r0 + MR - 1)) {
        const float *src = a_.q_row(b_, head_of(r0), query_of(r0));
        pack_a_sliver<MR>(dk, MR, src, a_.q_strides[2], 1, dst);
        const reg vs = V::set1(a_.scale);
        std::int64_t x = 0;
        for (; x + W <= MR * dk; x += W) V::storeu(dst + x, V::mul(V::loadu(dst + x), vs));
        for (; x < MR * dk; ++x) dst[x] *= a_.scale;
        continue;
      }
      for (std::int64_t r = r0; r < r0 + MR; ++r) {
        if (r < rows_) {
          const float *src = a_.q_row(b_, head_of(r), query_of(r));
          for (std::int64_t d = 0; d < dk; ++d) dst[d * MR + r - r0] = src[d] * a_.scale;
        } else {
          for (std::int64_t d = 0; d < dk; ++d) dst[d * MR + r - r0] = 0.0f;
        }
      }
    }
  }

  float *probs_row(std::int64_t r) const {
    return a_.probs + ((b_ * a_.heads + head_of(r)) * a_.q_len + query_of(r)) * a_.kv_len;
  }

  void fill_probs(float value) {
    for (std::int64_t r = 0; r < rows_; ++r) {
      float *pr = probs_row(r);
      for (std::int64_t j = c0_; j < c1_; ++j) pr[j] = value;
    }
  }

  // Software prefetch, into L2 (prefetcht2; into L1 the requests hold the
  // core's few L1 miss buffers).
  static void prefetch_row(const float *row, std::int64_t len) {
    for (std::int64_t x = 0; x < len; x += 16) __builtin_prefetch(row + x, 0, 1);
  }
  // Rows [first, min(first + rows, end)) of a block at `base`.
  static void prefetch_rows(const float *base, std::int64_t stride, std::int64_t len,
                            std::int64_t first, std::int64_t rows, std::int64_t end) {
    for (std::int64_t j = first; j < first + rows && j < end; ++j)
      prefetch_row(base + j * stride, len);
  }

  // The stored rows a pass requests `ahead` keys past the ones it reads
  // (the typed path): at(j, n) is the row of key first + j + ahead, where
  // that key and the n - 1 after it lie before `end` and in one page (one
  // row pointer and one stride reach them), else null. A pass asks for
  // keys in increasing order, so the page it last looked up (its keys
  // [lo, hi) and first row) is kept: one block-table lookup per page
  // rather than two divisions and a lookup per tile.
  struct RowsAhead {
    const KvLayout *t = nullptr;
    std::int64_t b = 0, h = 0, first = 0, ahead = 0, end = 0;
    mutable std::int64_t lo = 0, hi = 0;
    mutable const unsigned char *lo_row = nullptr;
    template <class T> const T *at(std::int64_t j, std::int64_t n) const {
      const std::int64_t key = first + j + ahead;
      if (!t || key + n > end) return nullptr;
      if (!t->block_table) return reinterpret_cast<const T *>(t->row(b, h, key));
      if (key < lo || key >= hi) {
        lo = key - key % t->page_size, hi = lo + t->page_size;
        lo_row = t->row(b, h, lo);
      }
      if (key + n > hi) return nullptr;
      return reinterpret_cast<const T *>(lo_row + (key - lo) * t->strides[2] * t->elem_bytes());
    }
  };

  // The block's K rows [j0, j1) as fp32 rows kblk_ (stride ks_), in place
  // or staged (kv_staging.hpp; `first_run`: the first of a pass); likewise
  // V (vblk_, vs_).
  void locate_k(std::int64_t j0, std::int64_t j1, bool first_run = true) {
    if (!a_.staged()) {
      kblk_ = a_.k_row(b_, kvh_, j0);
      ks_ = a_.k_strides[2];
      return;
    }
    stage_rows<V>(a_.k_src, b_, kvh_, j0, j1, hull_lo_, hull_hi_, a_.dk, kst_, a_.dk, first_run);
    kblk_ = kst_, ks_ = a_.dk;
  }
  void locate_v(std::int64_t j0, std::int64_t j1, bool first_run = true) {
    if (!a_.staged()) {
      vblk_ = a_.v_row(b_, kvh_, j0);
      vs_ = a_.v_strides[2];
      return;
    }
    stage_rows<V>(a_.v_src, b_, kvh_, j0, j1, hull_lo_, hull_hi_, a_.dv, vst_, a_.dv, first_run);
    vblk_ = vst_, vs_ = a_.dv;
  }

  // The packed path (packed_path.hpp).
  void plan_next_item(std::int64_t index);
  void prefetch_next(std::int64_t count);
  void key_block(std::int64_t j0, std::int64_t j1); // direct items: key_block_direct
  void mark_active_tiles(std::int64_t j0, std::int64_t j1);
  bool tile_active(std::int64_t t) const;

  // The direct path (direct_path.hpp).
  static constexpr std::int64_t kKeysAhead = 16; // K rows requested ahead of the K pass
  static constexpr std::int64_t kPvKeys = 16;    // keys per run of the P V pass
  static constexpr std::int64_t kStagedRun = Plan::kStagedRun; // staged keys per run
  static_assert(kStagedRun % kPvKeys == 0 && kStagedRun % 4 == 0,
                "staged runs split the P V runs and the K tiles as the whole block does");
  void key_block_direct(std::int64_t j0, std::int64_t j1);
  template <int M, int Max = kDirectOneCall, class F>
  static void rows_dispatch(std::int64_t rows, F &&f);
  int in_order_nv(std::int64_t rows) const;
  template <int M> int in_order_vectors() const;
  template <int M>
  void direct_scores(std::int64_t bk, const float *kb, const float *vb, bool first);
  void direct_scores_grouped(std::int64_t bk, const float *kb, const float *vb, bool first);
  bool next_k_spread(int nv) const;
  void direct_pv_grouped(std::int64_t bk, const float *vb, const float *kn, std::int64_t next);
  template <int M, class T>
  void direct_pv(std::int64_t bk, const T *vb, std::int64_t vs, const float *kn, std::int64_t next,
                 const RowsAhead &ahead = {});
  template <int M, int NV, class T>
  void direct_pv_in_order(std::int64_t bk, const T *vb, std::int64_t vs, const RowsAhead &ahead);

  // The typed path (typed_path.hpp).
  void key_block_typed(std::int64_t j0, std::int64_t j1);
  RowsAhead typed_ahead(const KvLayout &t, std::int64_t first, std::int64_t len) const;
  template <int M, class T>
  void typed_scores(std::int64_t n, const T *kb, std::int64_t ks, const RowsAhead &ahead);
  template <int M, class T> void typed_scores_paged(std::int64_t j0, std::int64_t bk);

  // Each row's online-softmax step and its end (row_update.hpp).
  void softmax_update(std::int64_t r, std::int64_t j0, std::int64_t bk);
  void modify_scores(std::int64_t r, std::int64_t j0, std::int64_t a, std::int64_t e);
  void start_with_sink(std::int64_t r, float sink);
  void exact_pv(std::int64_t bk); // V's block located (locate_v)
  void finish_rows();
  void write_partials(float *partial) const;

  const AttentionArgs &a_;
  const Plan &p_;
  float *qpack_, *kpack_, *vpack_, *scores_;
  float *kst_, *vst_; // staged K and V rows (a_.staged())
  const float *kblk_ = nullptr, *vblk_ = nullptr;
  std::int64_t ks_ = 0, vs_ = 0;
  float *sbase_ = nullptr; // the direct kernels' score column 0 (scores_ + the run's offset)
  RowState st_;
  std::int64_t lo_[Plan::kMaxRows], hi_[Plan::kMaxRows];
  // Per MR-row tile, for the block in progress (mark_active_tiles).
  std::int64_t tile_lo_[Plan::kMaxRows], tile_hi_[Plan::kMaxRows];
  std::int64_t b_ = 0, kvh_ = 0, h0_ = 0, nh_ = 0, i0_ = 0, nq_ = 0, rows_ = 0, n_ = 0;
  std::int64_t q_len_ = 0; // the entry's queries (AttentionArgs::q_len_of)
  std::int64_t chunk_ = 0, c0_ = 0, c1_ = 0, u_lo_ = 0, u_hi_ = 0;
  std::int64_t hull_lo_ = 0, hull_hi_ = 0; // setup_rows
  bool direct_ = false;
  bool typed_ = false;                 // direct items on the typed path (typed_path.hpp)
  const float *next_item_k_ = nullptr; // see run()
  std::int64_t next_item_keys_ = 0;
  const float *next_q_ = nullptr, *next_k_ = nullptr, *next_v_ = nullptr; // plan_next_item
  std::int64_t next_nq_ = 1, next_keys_ = 0, next_rows_ = 0, next_done_ = 0;
  std::int64_t sld_ = 0; // stride of the score rows
  std::int64_t dbk_ = 0; // keys per block of a direct item
};

} // namespace AK_ISA_NS
} // namespace attnkern
