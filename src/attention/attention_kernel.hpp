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
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "../gemm/gemm_driver.hpp"
#include "../gemm/gemm_pack.hpp"
#include "../gemm/sgemm_ukernel.hpp"
#include "../kernel_table.hpp"
#include "../scratch.hpp"
#include "../simd.hpp"
#include "../threading.hpp"
#include "../vexp.hpp"

namespace attnkern {
namespace AK_ISA_NS {

// Which keys of a batch entry query i sees: [lo, hi) (see attnkern.h).
struct KeyRange {
  std::int64_t lo, hi;
};

inline KeyRange visible_keys(const AttentionArgs &a, std::int64_t n, std::int64_t i) {
  const std::int64_t d = a.mask == 2 ? i + (n - a.q_len) : i;
  std::int64_t hi = n;
  if (a.mask != 0) hi = min64(hi, d + 1);
  if (a.window_right >= 0) hi = min64(hi, d + a.window_right + 1);
  std::int64_t lo = a.window_left >= 0 ? d - a.window_left : 0;
  lo = min64(max64(lo, 0), n);
  return {lo, min64(max64(hi, lo), n)};
}

// Outputs are weighted means of v's rows, so with finite inputs and finite
// scores every one is finite; but the unnormalised fp32 accumulator
// (weights up to 1, summed over the keys) passes FLT_MAX where v holds
// values near it (four equal keys of 1e38 gave +inf). Where a row came out
// with non-finite entries although its log-sum-exp is finite, this
// recomputes those entries from the inputs: scores as the kernel forms
// them (the dot product rounded to fp32, plus the bias in fp32), weights
// exp(s - max) against this function's own largest score (so that one key
// weighs 1 and no sum under- or overflows), summed in double, keys whose
// weight is 0 in fp32 left out. That also mends entries made NaN where an
// Inf in v, weighed in an earlier key block or chunk, met a rescaling
// factor that underflowed to 0 (Inf * 0) because the row's largest score
// came later, far above its key's: a key whose final weight is 0 feeds
// nothing.
//
// An entry whose column holds a non-finite v at a key the row weighs stays
// as the kernel made it: NaN or Inf in v reaches the entries it feeds.
// Whether a key weighs is judged against the kernel's row maximum `m_row`
// (as the kernel judged it), scoring only keys that hold such a value, each
// once per tile of columns: a row that weighs an Inf stops at its first
// such key. (Recomputed scores can differ from the kernel's where q . k
// cancels; the sums then skip the non-finite values judged dead rather
// than weigh them.) A mended row costs up to three passes over its keys'
// scores. Columns go in tiles of kTile: no allocation (it runs on a team).
// Rare by construction, and a function of the inputs alone (the same
// whatever the thread count).
inline void recompute_overflowed_entries(const AttentionArgs &a, std::int64_t b, std::int64_t h,
                                         std::int64_t i, float m_row, float *out) {
  const std::int64_t n = a.kv_lens ? a.kv_lens[b] : a.kv_len;
  const KeyRange keys = visible_keys(a, n, i);
  const std::int64_t kvh = h / (a.heads / a.kv_heads), vs = a.v_strides[2];
  const float *q = a.q + b * a.q_strides[0] + h * a.q_strides[1] + i * a.q_strides[2];
  const float *k = a.k + b * a.k_strides[0] + kvh * a.k_strides[1];
  const float *v = a.v + b * a.v_strides[0] + kvh * a.v_strides[1];
  const float *bias =
      a.bias ? a.bias + b * a.bias_strides[0] + h * a.bias_strides[1] + i * a.bias_strides[2]
             : nullptr;
  const float ninf = -std::numeric_limits<float>::infinity();
  const auto score = [&](std::int64_t j) {
    if (bias && bias[j] == ninf) return ninf;
    const float *kj = k + j * a.k_strides[2];
    double part[4] = {}; // four chains: this runs up to three times per key
    std::int64_t d = 0;
    for (; d + 4 <= a.dk; d += 4)
      for (int x = 0; x < 4; ++x) part[x] += static_cast<double>(q[d + x] * a.scale) * kj[d + x];
    for (; d < a.dk; ++d) part[0] += static_cast<double>(q[d] * a.scale) * kj[d];
    const float sj = static_cast<float>((part[0] + part[1]) + (part[2] + part[3]));
    return bias ? sj + bias[j] : sj;
  };
  // The largest recomputed score, found when first needed; false where one
  // is NaN or +inf (the kernel's lse would not be finite then either).
  float m = ninf;
  int m_state = 0; // 0 not looked for yet, 1 found, -1 none to use
  const auto max_found = [&] {
    if (m_state == 0) {
      m_state = 1;
      for (std::int64_t j = keys.lo; j < keys.hi && m_state > 0; ++j) {
        const float sj = score(j);
        if (!(sj < std::numeric_limits<float>::infinity())) m_state = -1;
        m = sj > m ? sj : m;
      }
      if (m == ninf) m_state = -1;
    }
    return m_state > 0;
  };
  constexpr int kTile = 256;
  for (std::int64_t d0 = 0; d0 < a.dv; d0 += kTile) {
    std::int64_t cols[kTile];
    bool poisoned[kTile] = {};
    int candidates = 0;
    for (std::int64_t d = d0; d < min64(d0 + kTile, a.dv); ++d)
      if (!std::isfinite(out[d])) cols[candidates++] = d;
    if (candidates == 0) continue;
    // Keys holding a non-finite v in a candidate column not yet poisoned:
    // each scored once; one that weighs poisons those columns.
    int clean = candidates;
    for (std::int64_t j = keys.lo; j < keys.hi && clean > 0; ++j) {
      const float *vj = v + j * vs;
      int c = 0;
      while (c < candidates && (poisoned[c] || std::isfinite(vj[cols[c]]))) ++c;
      if (c == candidates) continue;
      if (static_cast<float>(std::exp(static_cast<double>(score(j) - m_row))) == 0.0f) continue;
      for (; c < candidates; ++c)
        if (!poisoned[c] && !std::isfinite(vj[cols[c]])) poisoned[c] = true, --clean;
    }
    int bad = 0;
    for (int c = 0; c < candidates; ++c)
      if (!poisoned[c]) cols[bad++] = cols[c];
    if (bad == 0) continue;
    if (!max_found()) return;
    double acc[kTile] = {}, l = 0.0;
    for (std::int64_t j = keys.lo; j < keys.hi; ++j) {
      const double w = std::exp(static_cast<double>(score(j) - m));
      if (static_cast<float>(w) == 0.0f) continue;
      l += w;
      const float *vj = v + j * vs;
      for (int c = 0; c < bad; ++c) // a non-finite value here sits at a key judged dead above
        if (std::isfinite(vj[cols[c]])) acc[c] += w * vj[cols[c]];
    }
    // A weighted mean of finite floats: within +-FLT_MAX but for rounding.
    const double most = std::numeric_limits<float>::max();
    for (int c = 0; c < bad; ++c) {
      const double mean = acc[c] / l;
      out[cols[c]] = static_cast<float>(mean > most ? most : mean < -most ? -most : mean);
    }
  }
}

// Decisions shared by every work item: the shape's, and the rows an item
// holds, which also follows the thread count (see the constructor).
template <class Cfg> struct AttentionPlan {
  static constexpr int MR = Cfg::mr, NR = Cfg::nv * Cfg::width;
  static constexpr std::int64_t kMaxRows = 384;
  // Rows per item (target): each packed K and V block serves all of them, so
  // more rows amortize the packing (about 9 % of a d = 128 prefill's time at
  // 192 rows). 384 keeps Q, the scores and the accumulator (about 200 KiB
  // each at d = 128) and the K and V blocks (64 KiB each) in a 1 MiB L2.
  // Against 192, 8 heads, L 1024 and 4096, d 64 and 128, medians of 5-8
  // alternating runs: 1 thread +0-5 % (causal +2 %), 2 threads +1-3 %.
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
  // streams restarts the hardware prefetcher; a plain read of K and V in
  // that order ran at 0.87 / 0.95 / 0.99 of one linear read with blocks of
  // 64 / 256 / 1024 rows of 512 bytes. 32 heads, d 128 and 64, kv 8192 and
  // 32768, and one head over 262144 keys, A/B in one process (ad-hoc
  // harness, alternating calls, medians of 21), 256 -> 1024: 1 thread
  // +5-15 %, 2 threads -2 to +11 %. (Groups of 4, with the requests ahead:
  // 0.88-0.92, so they keep kDirectBk.)
  static constexpr std::int64_t kInOrderBk = kKvChunk;
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
  // thread count: with 196 query heads over one kv head, 2 threads made
  // items of 192 and 4 rows and took the 4 in place, 1 thread all 196
  // packed, and the results differed in the last bits.
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
    return rows_pad * a.dk      // packed scaled Q
           + a.dk * bk_pad      // packed K block
           + kBk * dv_pad       // packed V block
           + scores_floats()    // scores / weights
           + rows_pad * dv_pad  // output accumulator
           + 2 * rows_pad + 64; // m, l
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

// Per-row state of a work item, held in the thread's scratch.
struct RowState {
  float *m, *l, *acc;
};

// probe + sum of (x - x) over x[0, n) for n a multiple of the width: x - x
// is NaN exactly for inf and NaN, so the probe turns NaN once any is seen.
template <class V>
inline typename V::reg add_non_finite_probe(typename V::reg probe, const float *x, std::int64_t n) {
  for (std::int64_t j = 0; j < n; j += V::width) {
    const typename V::reg v = V::loadu(x + j);
    probe = V::add(probe, V::sub(v, v));
  }
  return probe;
}

template <class V> inline bool has_non_finite(const float *x, std::int64_t n) {
  const std::int64_t j = n / V::width * V::width;
  const typename V::reg probe = add_non_finite_probe<V>(V::zero(), x, j);
  float tail = 0.0f;
  for (std::int64_t i = j; i < n; ++i) tail += x[i] - x[i];
  const float s = V::reduce_add(probe) + tail;
  return s != s;
}

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
    st_.l = s;
  }

  // Runs item `index`; partials (split) go to `partial`. `warm_next`: this
  // thread runs item index + 1 next, so the last key block requests that
  // item's first K rows, as each block does for the next block's; else each
  // chunk's K stream starts cold (decode, 1 thread, 32 heads, d 128, 256 or
  // 1024 chunks per call: +3-6 % over 32 and 8 kv heads, kv 8192 and 32768).
  void run(std::int64_t index, float *partial, bool warm_next = false) {
    next_item_k_ = nullptr, next_item_keys_ = 0;
    next_rows_ = 0;
    if (warm_next && index + 1 < p_.items) find_item_keys(index + 1);
    decode_index(index);
    setup_rows();
    if (warm_next && index + 1 < p_.items && !p_.direct) plan_next_item(index + 1);
    // Few rows (decode, GQA groups, a few queries per step as in
    // speculative decoding): padding them to an MR-row tile would multiply
    // the arithmetic, and packing K and V would double their traffic or,
    // with 9 to 32 rows, cost as much as the arithmetic (transposing K took
    // a quarter of the time). Instead the rows take GEMV-like kernels that
    // read K and V where they lie, once per block; past 8 rows, in groups of
    // rows. 1 thread, d 128, kv 4096-8192, 5 alternating runs of an ad-hoc
    // harness, GFLOP/s against packing: 16 rows (4 queries x GQA 4, 16
    // queries MHA, GQA 16 decode) 26-31 -> 53-65, 32 rows 42-48 -> 61-68;
    // 2 threads 50-56 -> 94-134, 86-98 -> 107-125. From 48 rows on, about
    // even with packing, which keeps them. A function of the shape alone
    // (AttentionPlan::direct).
    direct_ = p_.direct;
    dbk_ = in_order_nv(rows_) ? Plan::kInOrderBk : Plan::kDirectBk;
    sld_ = direct_ ? dbk_ : p_.bk_pad;
    pack_q();
    const float ninf = -std::numeric_limits<float>::infinity();
    for (std::int64_t r = 0; r < p_.rows_pad; ++r) st_.m[r] = ninf, st_.l[r] = 0.0f;
    for (std::int64_t x = 0; x < p_.rows_pad * p_.dv_pad; ++x) st_.acc[x] = 0.0f;
    if (a_.probs) fill_probs(ninf);
    if (direct_) { // an item holds its whole group: [u_lo_, u_hi_) follows the shape
      for (std::int64_t j0 = u_lo_; j0 < u_hi_; j0 += dbk_) key_block(j0, min64(j0 + dbk_, u_hi_));
    } else {
      // Key blocks on a grid of the shape's (kBk apart from the chunk's
      // first key, cut at the chunk's end or the entry's kv_lens), not from
      // the first to the last key this item's rows see: the rows an item
      // holds follow the thread count (AttentionPlan), and a row's online
      // softmax and its exp's vector/scalar split follow the blocks. Bounded
      // by the item's keys, 49 of 150 random prefill shapes (left windows,
      // bottom-right masks, q_len over 192) gave other bits on 2-4 threads
      // than on 1. The keys a block gains are masked for every row (tiles
      // skip them); prefill and window rows of ak_bench measured no slower.
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
    next_item_k_ = a_.k + c.b * a_.k_strides[0] + c.kvh * a_.k_strides[1] + c0 * a_.k_strides[2];
    next_item_keys_ = min64(c0 + p_.chunk, a_.kv_len) - c0;
  }

  // Packed items: the next item's Q rows and first K and V blocks, to be
  // requested into L2 a few rows at a time while this item's last key block
  // computes (prefetch_next). Short prefill (an encoder's L of 128-512 over
  // many heads) reads a new head every item or two, and its first touch of
  // Q, K and V otherwise waits on L3 or memory in the packing loops.
  void plan_next_item(std::int64_t index) {
    const ItemCoords c = coords(index);
    const std::int64_t h0 = c.kvh * p_.group + c.hc * p_.heads_per_item;
    const std::int64_t nh = min64(p_.heads_per_item, (c.kvh + 1) * p_.group - h0);
    const std::int64_t i0 = c.qb * p_.bq, nq = min64(p_.bq, a_.q_len - i0);
    const std::int64_t n = a_.kv_lens ? a_.kv_lens[c.b] : a_.kv_len;
    const std::int64_t c0 = c.chunk * p_.chunk, c1 = min64(min64(c0 + p_.chunk, a_.kv_len), n);
    const std::int64_t lo = max64(visible_keys(a_, n, i0).lo, c0);
    const std::int64_t j0 = c0 + max64(lo - c0, 0) / Plan::kBk * Plan::kBk;
    const std::int64_t keys = max64(min64(j0 + Plan::kBk, c1) - j0, 0);
    next_q_ = a_.q + c.b * a_.q_strides[0] + h0 * a_.q_strides[1] + i0 * a_.q_strides[2];
    next_nq_ = nq;
    // (No key: no pointer formed, as j0 may lie past the tensor's end.)
    next_k_ = keys > 0
                  ? a_.k + c.b * a_.k_strides[0] + c.kvh * a_.k_strides[1] + j0 * a_.k_strides[2]
                  : nullptr;
    next_v_ = keys > 0
                  ? a_.v + c.b * a_.v_strides[0] + c.kvh * a_.v_strides[1] + j0 * a_.v_strides[2]
                  : nullptr;
    next_keys_ = keys;
    next_rows_ = nh * nq + 2 * keys;
    next_done_ = 0;
  }

  // Requests `count` more rows of the next item (plan_next_item): Q's rows,
  // then K's, then V's.
  void prefetch_next(std::int64_t count) {
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

  void decode_index(std::int64_t index) {
    const ItemCoords c = coords(index);
    chunk_ = c.chunk, kvh_ = c.kvh, b_ = c.b;
    h0_ = kvh_ * p_.group + c.hc * p_.heads_per_item;
    nh_ = min64(p_.heads_per_item, (kvh_ + 1) * p_.group - h0_);
    i0_ = c.qb * p_.bq;
    nq_ = min64(p_.bq, a_.q_len - i0_);
    rows_ = nh_ * nq_;
    n_ = a_.kv_lens ? a_.kv_lens[b_] : a_.kv_len;
    c0_ = chunk_ * p_.chunk;
    c1_ = min64(c0_ + p_.chunk, a_.kv_len);
  }

  std::int64_t head_of(std::int64_t r) const { return h0_ + r / nq_; }
  std::int64_t query_of(std::int64_t r) const { return i0_ + r % nq_; }

  // Visible key range of each row within this chunk, and their union.
  void setup_rows() {
    u_lo_ = c1_, u_hi_ = c0_;
    for (std::int64_t iq = 0; iq < nq_; ++iq) {
      const KeyRange kr = visible_keys(a_, n_, i0_ + iq);
      const std::int64_t lo = max64(kr.lo, c0_), hi = max64(min64(kr.hi, c1_), lo);
      lo_[iq] = lo, hi_[iq] = hi;
      if (hi > lo) u_lo_ = min64(u_lo_, lo), u_hi_ = max64(u_hi_, hi);
    }
    if (u_hi_ < u_lo_) u_hi_ = u_lo_;
  }

  // Q rows, times scale, into MR-tall slivers (zero rows pad the last one).
  void pack_q() {
    const std::int64_t dk = a_.dk;
    if (direct_) { // plain rows, row r at qpack_ + r * dk
      for (std::int64_t r = 0; r < rows_; ++r) {
        const float *src = a_.q + b_ * a_.q_strides[0] + head_of(r) * a_.q_strides[1] +
                           query_of(r) * a_.q_strides[2];
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
        const float *src = a_.q + b_ * a_.q_strides[0] + head_of(r0) * a_.q_strides[1] +
                           query_of(r0) * a_.q_strides[2];
        pack_a_sliver<MR>(dk, MR, src, a_.q_strides[2], 1, dst);
        const reg vs = V::set1(a_.scale);
        std::int64_t x = 0;
        for (; x + W <= MR * dk; x += W) V::storeu(dst + x, V::mul(V::loadu(dst + x), vs));
        for (; x < MR * dk; ++x) dst[x] *= a_.scale;
        continue;
      }
      for (std::int64_t r = r0; r < r0 + MR; ++r) {
        if (r < rows_) {
          const float *src = a_.q + b_ * a_.q_strides[0] + head_of(r) * a_.q_strides[1] +
                             query_of(r) * a_.q_strides[2];
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

  void key_block(std::int64_t j0, std::int64_t j1) {
    if (direct_) return key_block_direct(j0, j1);
    const std::int64_t bk = j1 - j0, dk = a_.dk;
    const float *kb = a_.k + b_ * a_.k_strides[0] + kvh_ * a_.k_strides[1];
    const float *vb = a_.v + b_ * a_.v_strides[0] + kvh_ * a_.v_strides[1];
    // K^T block as the GEMM's B: NR keys per sliver, dk deep; only the
    // slivers that hold keys (the tiles below form no others).
    for (std::int64_t jj = 0; jj < bk; jj += NR) {
      const int cols = static_cast<int>(min64(NR, bk - jj));
      pack_b_sliver<NR>(dk, cols, kb + (j0 + jj) * a_.k_strides[2], 1, a_.k_strides[2],
                        kpack_ + jj * dk);
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
    const std::int64_t next_per_tile = next_rows_ > 0 && j0 + Plan::kBk >= u_hi_
                                           ? ceil_div(next_rows_, 2 * ceil_div(rows_, MR))
                                           : 0;
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
    for (std::int64_t s = 0; s * NR < p_.dv_pad; ++s) {
      const std::int64_t d0 = s * NR;
      pack_b_sliver<NR>(bk, static_cast<int>(min64(NR, a_.dv - d0)), vb + j0 * a_.v_strides[2] + d0,
                        a_.v_strides[2], 1, vpack_ + d0 * bk);
    }
    if (has_non_finite<V>(vpack_, bk * p_.dv_pad)) {
      // Inf/NaN in V: a zero weight times Inf would still be NaN, so the
      // rows accumulate only the keys they actually weigh.
      exact_pv(j0, bk);
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
  void mark_active_tiles(std::int64_t j0, std::int64_t j1) {
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
  bool tile_active(std::int64_t t) const { return tile_hi_[t] > tile_lo_[t]; }

  // key_block for direct_ items: the same steps with K and V read in place,
  // each once, in blocks of dbk_ keys. Memory runs a pass ahead of the
  // arithmetic: the K pass requests the block's V rows, the P V pass the
  // next block's K rows, except for items read in order (in_order_nv,
  // kInOrderBk). (With the requests, blocks of 128 keys measured ~7 %
  // slower than 256, 512 and 1024 ~5 % and ~30 %; one K pass and one V pass
  // over the whole chunk, each prefetching only its own rows ahead, streamed
  // at ~12 GB/s.)
  void key_block_direct(std::int64_t j0, std::int64_t j1) {
    const std::int64_t bk = j1 - j0;
    const float *kb = a_.k + b_ * a_.k_strides[0] + kvh_ * a_.k_strides[1] + j0 * a_.k_strides[2];
    const float *vb = a_.v + b_ * a_.v_strides[0] + kvh_ * a_.v_strides[1] + j0 * a_.v_strides[2];
    for (std::int64_t r = 0; r < rows_; ++r)
      for (std::int64_t j = 0; j < bk; ++j) scores_[r * sld_ + j] = 0.0f;
    const bool first = j0 == u_lo_;
    if (rows_ <= kDirectOneCall)
      rows_dispatch<1>(rows_,
                       [&](auto m) { direct_scores<decltype(m)::value>(bk, kb, vb, first); });
    else
      direct_scores_grouped(bk, kb, vb, first);
    for (std::int64_t r = 0; r < rows_; ++r) softmax_update(r, j0, bk);
    // Inf/NaN in V shows as Inf/NaN in the accumulator (a zero weight times
    // Inf is NaN): only then is the block redone from a copy of the
    // accumulator, weighing just the keys the rows see (exact_pv). A finite
    // V whose sum overflows takes that path too, to the same result; such a
    // row is recomputed when it is finished (recompute_overflowed_entries).
    float *const saved = vpack_; // unused by direct items
    const std::int64_t acc_floats = rows_ * p_.dv_pad;
    for (std::int64_t x = 0; x < acc_floats; ++x) saved[x] = st_.acc[x];
    // The next block's K rows, or after the last block the next item's.
    const float *kn = kb + bk * a_.k_strides[2];
    std::int64_t next = min64(u_hi_ - j1, dbk_);
    if (next == 0 && next_item_k_) kn = next_item_k_, next = min64(next_item_keys_, dbk_);
    if (rows_ <= kDirectOneCall)
      rows_dispatch<1>(rows_, [&](auto m) { direct_pv<decltype(m)::value>(bk, vb, kn, next); });
    else
      direct_pv_grouped(bk, vb, kn, next);
    if (has_non_finite<V>(st_.acc, acc_floats)) {
      for (std::int64_t x = 0; x < acc_floats; ++x) st_.acc[x] = saved[x];
      exact_pv(j0, bk);
    }
  }

  // Software prefetch, into L2 (prefetcht2; into L1 the requests hold the
  // core's few L1 miss buffers and measured ~20% slower).
  static void prefetch_row(const float *row, std::int64_t len) {
    for (std::int64_t x = 0; x < len; x += 16) __builtin_prefetch(row + x, 0, 1);
  }
  // Rows [first, min(first + rows, end)) of a block at `base`.
  static void prefetch_rows(const float *base, std::int64_t stride, std::int64_t len,
                            std::int64_t first, std::int64_t rows, std::int64_t end) {
    for (std::int64_t j = first; j < first + rows && j < end; ++j)
      prefetch_row(base + j * stride, len);
  }
  // K rows requested ahead of the K pass (items not in order: GQA groups of
  // 4 and more). 32 heads over 8 kv heads, d 128, kv 8192, medians of 3
  // alternating runs, decode over read GB/s, 32 -> 16 rows: 1 thread, huge
  // pages 0.82 -> 0.89 (twice), 4 KiB pages 0.83 -> 0.86; 2 threads 34.3 ->
  // 35.2 GB/s; 8 and 64 rows ran at 0.77 and 0.80.
  static constexpr std::int64_t kKeysAhead = 16;

  // f(std::integral_constant<int, rows>), for 1 <= rows <= Max.
  template <int M, int Max = kDirectOneCall, class F>
  static void rows_dispatch(std::int64_t rows, F &&f) {
    if constexpr (M <= Max) {
      if (rows == M) return f(std::integral_constant<int, M>{});
      rows_dispatch<M + 1, Max>(rows, f);
    }
  }

  static constexpr std::int64_t kPvKeys = 16; // keys per run of the P V pass

  // Whether an M-row item reads K and V strictly in address order and
  // leaves them to the hardware prefetcher: items of 1 or 2 rows (MHA
  // decode, GQA groups of 2) whose V rows are 1, 2, 4 or 8 vectors (d 16 to
  // 128 on AVX-512), so that the P V pass can take whole rows, and the K
  // pass takes its rows one by one. There, the requests ahead (below) only
  // cost bandwidth (the likely cause: each holds one of the core's few L1
  // miss buffers); they pay where a pass steps across rows, a pattern the
  // hardware prefetcher does not follow, or does more arithmetic per byte.
  // 32 heads, kv 8192, 1 thread, huge pages, medians of 3-4 alternating
  // runs, decode GB/s over a streaming read in the same process, in order /
  // requests ahead: d 128 0.89 / 0.82 (2 threads 0.92 / 0.94; 4 KiB pages
  // 0.82-0.83 / 0.78-0.80), d 64 0.92 / 0.70, groups of 2 0.89 / 0.85.
  // Groups of 4 (4 FMAs per vector loaded) ran at 0.55 in order against
  // 0.83-0.88 with the requests. Returns the vectors per V row, or 0 for the
  // requests ahead.
  int in_order_nv(std::int64_t rows) const {
    const std::int64_t nv = a_.dv / W;
    return rows <= 2 && (nv == 1 || nv == 2 || nv == 4 || nv == 8) ? static_cast<int>(nv) : 0;
  }
  template <int M> int in_order_vectors() const { return in_order_nv(M); }

  // scores_[r][j] += (scale q_r) . k_j for j < bk, J keys at a time.
  // Unless in order, the block's K rows are also requested kKeysAhead rows
  // ahead: the requests of the P V pass before did not all arrive (without
  // these, 10-15 % slower), and its V rows alongside.
  template <int M>
  void direct_scores(std::int64_t bk, const float *kb, const float *vb, bool first) {
    constexpr int J0 = skinny_acc_budget<V>() / M;
    // At most 4 keys at once: 16 measured slower at M = 1.
    constexpr int J = J0 < 1 ? 1 : J0 > 4 ? 4 : J0;
    // From 4 rows on, a step loads its M Q vectors once into registers (4 Q
    // and 4 K loads per 16 FMAs at M = 4, against 20 with a load per use):
    // there the arithmetic, not K's stream, is the limit. 32 heads over 8,
    // d 128, 1 thread, A/B in one process: +0-13 % at kv 1024-32768; groups
    // of 6 and 8 even to +7 %, of 3 even (left as they were).
    constexpr bool kQInRegisters = M >= 4;
    const std::int64_t ks = a_.k_strides[2], vs = a_.v_strides[2];
    if (in_order_vectors<M>()) {
      std::int64_t j = 0;
      for (; j + J <= bk; j += J)
        skinny_k_tile<V, M, J, true>(0, a_.dk, qpack_, a_.dk, kb + j * ks, ks, scores_ + j, sld_);
      for (; j < bk; ++j)
        skinny_k_tile<V, M, 1>(0, a_.dk, qpack_, a_.dk, kb + j * ks, ks, scores_ + j, sld_);
      return;
    }
    if (first) prefetch_rows(kb, ks, a_.dk, 0, kKeysAhead, bk);
    std::int64_t j = 0;
    for (; j + J <= bk; j += J) {
      prefetch_rows(kb, ks, a_.dk, j + kKeysAhead, J, bk);
      prefetch_rows(vb, vs, a_.dv, j, J, bk);
      skinny_k_tile<V, M, J, false, kQInRegisters>(0, a_.dk, qpack_, a_.dk, kb + j * ks, ks,
                                                   scores_ + j, sld_);
    }
    for (; j < bk; ++j) {
      prefetch_rows(vb, vs, a_.dv, j, 1, bk);
      skinny_k_tile<V, M, 1>(0, a_.dk, qpack_, a_.dk, kb + j * ks, ks, scores_ + j, sld_);
    }
  }

  // direct_scores for more than kDirectOneCall rows: each J = 4 keys go to
  // the rows G at a time (G = 4 on AVX-512, 2 where skinny_acc_budget is 8),
  // so that K is read from memory once and from L1 by the other groups, and
  // each group's Q vectors are loaded once per step (the kernel is bound by
  // its arithmetic here, not by the stream). Requests ahead as in
  // direct_scores. With direct_pv_grouped's strips, against groups of 8
  // rows x 2 keys (Q loaded per use) and 8 rows x 2 vectors (AVX-512, 1
  // thread, d 128, 16 rows, 3 alternating runs of an ad-hoc harness):
  // +15-30 %.
  void direct_scores_grouped(std::int64_t bk, const float *kb, const float *vb, bool first) {
    constexpr int J = 4;
    constexpr int G0 = skinny_acc_budget<V>() / J;
    constexpr int G = G0 < 1 ? 1 : G0;
    const std::int64_t ks = a_.k_strides[2], vs = a_.v_strides[2], dk = a_.dk;
    const auto keys = [&](std::int64_t j, auto n) {
      for (std::int64_t r0 = 0; r0 < rows_; r0 += G)
        rows_dispatch<1, G>(min64(G, rows_ - r0), [&](auto m) {
          skinny_k_tile<V, decltype(m)::value, decltype(n)::value, false, true>(
              0, dk, qpack_ + r0 * dk, dk, kb + j * ks, ks, scores_ + r0 * sld_ + j, sld_);
        });
    };
    if (first) prefetch_rows(kb, ks, dk, 0, kKeysAhead, bk);
    std::int64_t j = 0;
    for (; j + J <= bk; j += J) {
      prefetch_rows(kb, ks, dk, j + kKeysAhead, J, bk);
      prefetch_rows(vb, vs, a_.dv, j, J, bk);
      keys(j, std::integral_constant<int, J>{});
    }
    for (; j < bk; ++j) {
      prefetch_rows(vb, vs, a_.dv, j, 1, bk);
      keys(j, std::integral_constant<int, 1>{});
    }
  }

  // Whether the P V pass's strips of nv vectors can carry the requests for
  // the next K rows: each strip, at each key, asks for the lines of that
  // key's next K row at its own columns, so K and V rows of one width are
  // covered strip by strip. Otherwise each run of kPvKeys keys requests its
  // next K rows at its start, a burst (128 prefetches at d 128) that holds
  // the core's miss buffers while the FMAs wait. 32 heads over 8, d 128, 1
  // thread, A/B in one process, decode GB/s, this and direct_scores's Q in
  // registers against neither: kv 8192 and 32768 +10-23 % (Q in registers
  // alone +0-11 %); groups of 8 +13-18 %, of 6 +5-16 %.
  bool next_k_spread(int nv) const {
    return a_.dk == a_.dv && a_.dv % (static_cast<std::int64_t>(nv) * W) == 0;
  }

  // direct_pv for more than kDirectOneCall rows: each run of kPvKeys V rows
  // goes to the rows 4 at a time (from L1 after the first group), in strips
  // of skinny_strip_vectors (AVX-512: 4 vectors, 8 loads per 16 FMAs,
  // against 10 for 8 rows x 2 vectors; 2 vectors where the budget is 8).
  void direct_pv_grouped(std::int64_t bk, const float *vb, const float *kn, std::int64_t next) {
    constexpr int G = 4;
    const std::int64_t vs = a_.v_strides[2], ks = a_.k_strides[2];
    // The first group's strips request the next K rows (see next_k_spread).
    const bool spread = next_k_spread(skinny_strip_vectors<V, G>());
    for (std::int64_t j = 0; j < bk; j += kPvKeys) {
      const std::int64_t je = min64(j + kPvKeys, bk);
      const bool spread_run = spread && je <= next;
      if (!spread_run) prefetch_rows(kn, ks, a_.dk, j, je - j, next);
      const float *vr = vb + j * vs;
      for (std::int64_t r0 = 0; r0 < rows_; r0 += G)
        rows_dispatch<1, G>(min64(G, rows_ - r0), [&](auto m) {
          constexpr int M = decltype(m)::value, NVd = skinny_strip_vectors<V, M>();
          const float *w = scores_ + r0 * sld_ + j;
          float *acc = st_.acc + r0 * p_.dv_pad;
          const bool pf = spread_run && r0 == 0;
          std::int64_t d = 0;
          for (; d + NVd * W <= a_.dv; d += NVd * W)
            skinny_n_tile<V, M, NVd>(0, je - j, w, sld_, vr + d, vs, acc + d, p_.dv_pad,
                                     pf ? kn + j * ks + d : nullptr, ks);
          for (; d < a_.dv; d += W)
            skinny_n_tile<V, M, 1>(0, je - j, w, sld_, vr + d, vs, acc + d, p_.dv_pad);
        });
    }
  }

  // acc_r += sum_j w_rj v_j over the block, in runs of kPvKeys keys and,
  // within a run, dv in strips of skinny_strip_vectors; the next block's K rows
  // (kn, `next` of them) are requested alongside.
  template <int M>
  void direct_pv(std::int64_t bk, const float *vb, const float *kn, std::int64_t next) {
    switch (in_order_vectors<M>()) {
    case 1:
      return direct_pv_in_order<M, 1>(bk, vb);
    case 2:
      return direct_pv_in_order<M, 2>(bk, vb);
    case 4:
      return direct_pv_in_order<M, 4>(bk, vb);
    case 8:
      return direct_pv_in_order<M, 8>(bk, vb);
    default:
      break;
    }
    constexpr int NVd = skinny_strip_vectors<V, M>();
    const std::int64_t vs = a_.v_strides[2], ks = a_.k_strides[2];
    const bool spread = next_k_spread(NVd);
    for (std::int64_t j = 0; j < bk; j += kPvKeys) {
      const std::int64_t je = min64(j + kPvKeys, bk);
      const bool spread_run = spread && je <= next;
      if (!spread_run) prefetch_rows(kn, ks, a_.dk, j, je - j, next);
      const float *w = scores_ + j, *vr = vb + j * vs;
      std::int64_t d = 0;
      for (; d + NVd * W <= a_.dv; d += NVd * W)
        skinny_n_tile<V, M, NVd>(0, je - j, w, sld_, vr + d, vs, st_.acc + d, p_.dv_pad,
                                 spread_run ? kn + j * ks + d : nullptr, ks);
      for (; d < a_.dv; d += W)
        skinny_n_tile<V, M, 1>(0, je - j, w, sld_, vr + d, vs, st_.acc + d, p_.dv_pad);
    }
  }

  // direct_pv for V rows of NV vectors, read in address order: each run of
  // kPvKeys keys goes to the rows in groups of G (1 or all), whole V rows at
  // a time (a second group reads the run's rows from L1). Each sum takes the
  // same terms in the same order as in direct_pv's strips.
  template <int M, int NV> void direct_pv_in_order(std::int64_t bk, const float *vb) {
    constexpr int G0 = skinny_acc_budget<V>() / NV;
    constexpr int G = G0 < 1 ? 1 : G0 > M ? M : G0;
    constexpr int kLast = M % G == 0 ? G : M % G; // rows of the last group
    const std::int64_t vs = a_.v_strides[2];
    for (std::int64_t j = 0; j < bk; j += kPvKeys) {
      const std::int64_t keys = min64(kPvKeys, bk - j);
      const float *vr = vb + j * vs;
      for (int r0 = 0; r0 < M; r0 += G) {
        const float *w = scores_ + r0 * sld_ + j;
        float *acc = st_.acc + r0 * p_.dv_pad;
        if (r0 + G <= M)
          skinny_n_tile<V, G, NV>(0, keys, w, sld_, vr, vs, acc, p_.dv_pad);
        else
          skinny_n_tile<V, kLast, NV>(0, keys, w, sld_, vr, vs, acc, p_.dv_pad);
      }
    }
  }

  // Masks row r's scores for keys [j0, j0 + bk), adds the bias, updates the
  // running max and sum, rescales the accumulator, and leaves the weights
  // exp(s - m) in the score row.
  void softmax_update(std::int64_t r, std::int64_t j0, std::int64_t bk) {
    const float ninf = -std::numeric_limits<float>::infinity();
    float *s = scores_ + r * sld_;
    const std::int64_t iq = r % nq_;
    const std::int64_t a = min64(max64(lo_[iq] - j0, 0), bk);
    const std::int64_t e = max64(min64(hi_[iq] - j0, bk), a);
    for (std::int64_t j = 0; j < a; ++j) s[j] = ninf;
    for (std::int64_t j = e; j < bk; ++j) s[j] = ninf;
    if (a_.bias) {
      const float *bias = a_.bias + b_ * a_.bias_strides[0] + head_of(r) * a_.bias_strides[1] +
                          query_of(r) * a_.bias_strides[2] + j0;
      // A -inf bias masks the key even where the score is NaN (poisoned K).
      for (std::int64_t j = a; j < e; ++j) s[j] = bias[j] == ninf ? ninf : s[j] + bias[j];
    }
    if (a_.probs) {
      float *pr = probs_row(r) + j0;
      for (std::int64_t j = a; j < e; ++j) pr[j] = s[j];
    }
    // Block max over the visible keys; a NaN anywhere makes the row NaN
    // (flagged per lane, as max alone may drop it).
    float m_blk = ninf;
    bool nan = false;
    {
      reg vmax = V::set1(ninf), probe = V::zero();
      const reg one = V::set1(1.0f);
      std::int64_t j = a;
      for (; j + W <= e; j += W) {
        const reg x = V::loadu(s + j);
        vmax = V::max(vmax, x);
        probe = V::nan_select(x, one, probe);
      }
      for (; j < e; ++j) {
        m_blk = s[j] > m_blk ? s[j] : m_blk;
        nan = nan || s[j] != s[j];
      }
      const float vm = V::reduce_max(vmax);
      m_blk = vm > m_blk ? vm : m_blk;
      nan = nan || vm != vm || V::any_lt(V::zero(), probe); // a lane that saw a NaN
    }
    const float m_old = st_.m[r];
    float m_new = m_blk > m_old ? m_blk : m_old;
    if (nan || m_old != m_old) m_new = std::numeric_limits<float>::quiet_NaN();
    // All masked so far: shift by 0 so that exp(-inf - shift) is 0, not NaN.
    const float shift = m_new == ninf ? 0.0f : m_new;
    const reg vshift = V::set1(shift);
    reg sum = V::zero();
    // Only the vectors that hold visible keys take exp; the others hold
    // -inf alone, whose weight is 0 (a causal diagonal block's rows see
    // half of it on average).
    // A block's last keys short of a vector take it whole: the row has room
    // up to a multiple of the width (sld_), and -inf there weighs 0. (One
    // std::exp per key took as long as the block's vectors: L 197, 69 keys
    // in its second block.)
    const std::int64_t bk_vec = (bk + W - 1) / W * W;
    for (std::int64_t j = bk; j < bk_vec; ++j) s[j] = ninf;
    const std::int64_t x0 = min64(a / W * W, bk_vec), x1 = min64((e + W - 1) / W * W, bk_vec);
    std::int64_t j = 0;
    for (; j < x0; j += W) V::storeu(s + j, V::zero());
    for (; j < x1; j += W) {
      const reg pj = vexp<V>(V::sub(V::loadu(s + j), vshift));
      V::storeu(s + j, pj);
      sum = V::add(sum, pj);
    }
    for (; j < bk_vec; j += W) V::storeu(s + j, V::zero());
    // A row's first keys (m_old = -inf, so far weight 0 everywhere): corr is
    // exp(-inf) = 0, and l and the accumulator hold zeros (+0: every weight
    // was exactly 0, and a non-finite v never entered, exact_pv), which a
    // factor of 0 leaves as they are. A NaN row still takes exp(NaN).
    const bool first = m_old == ninf && m_new == m_new;
    const float corr = m_old == m_new ? 1.0f : first ? 0.0f : std::exp(m_old - shift);
    st_.l[r] = st_.l[r] * corr + V::reduce_add(sum);
    st_.m[r] = m_new;
    if (corr != 1.0f && !first) {
      float *acc = st_.acc + r * p_.dv_pad;
      const reg vc = V::set1(corr);
      for (std::int64_t d = 0; d < p_.dv_pad; d += W)
        V::storeu(acc + d, V::mul(V::loadu(acc + d), vc));
    }
  }

  // acc_r += sum over weighed keys j of w_rj v_j, skipping zero weights.
  void exact_pv(std::int64_t j0, std::int64_t bk) {
    const float *vb = a_.v + b_ * a_.v_strides[0] + kvh_ * a_.v_strides[1];
    for (std::int64_t r = 0; r < rows_; ++r) {
      if (!direct_ && !tile_active(r / MR)) continue; // scores never formed
      const float *w = scores_ + r * sld_;
      float *acc = st_.acc + r * p_.dv_pad;
      for (std::int64_t j = 0; j < bk; ++j) {
        if (w[j] == 0.0f) continue;
        const float *vrow = vb + (j0 + j) * a_.v_strides[2];
        const reg vw = V::set1(w[j]);
        std::int64_t d = 0;
        for (; d + W <= a_.dv; d += W)
          V::storeu(acc + d, V::fmadd(vw, V::loadu(vrow + d), V::loadu(acc + d)));
        for (; d < a_.dv; ++d) acc[d] += w[j] * vrow[d];
      }
    }
  }

  void finish_rows() {
    for (std::int64_t r = 0; r < rows_; ++r) {
      float *out = a_.out + b_ * a_.o_strides[0] + head_of(r) * a_.o_strides[1] +
                   query_of(r) * a_.o_strides[2];
      bool finite;
      const float lse =
          finish_row(st_.m[r], st_.l[r], st_.acc + r * p_.dv_pad, a_.dv, out, &finite);
      if (std::isfinite(lse) && !finite)
        recompute_overflowed_entries(a_, b_, head_of(r), query_of(r), st_.m[r], out);
      if (a_.lse) a_.lse[(b_ * a_.heads + head_of(r)) * a_.q_len + query_of(r)] = lse;
      if (a_.probs) finish_probs(probs_row(r), a_.kv_len, lse, st_.l[r]);
    }
  }

  void write_partials(float *partial) const {
    const std::int64_t stride = a_.dv + 2;
    for (std::int64_t r = 0; r < rows_; ++r) {
      const std::int64_t row = (b_ * a_.heads + head_of(r)) * a_.q_len + query_of(r);
      float *dst = partial + (row * p_.n_chunks + chunk_) * stride;
      dst[0] = st_.m[r];
      dst[1] = st_.l[r];
      for (std::int64_t d = 0; d < a_.dv; ++d) dst[2 + d] = st_.acc[r * p_.dv_pad + d];
    }
  }

public:
  // out = acc / l; returns lse = m + log l (-inf and zeros when l == 0).
  // A +inf score makes l (and so out) NaN, but the log-sum-exp itself is
  // +inf, as in the float64 definition.
  // *finite: whether every entry of out is finite, judged on the quotients
  // in registers (q - q is 0 for a finite q, NaN for Inf and NaN) rather than
  // by reading out back right after the stores (with the first-keys shortcut
  // in softmax_update, +1-3 % at L 128 and 197; bench/README, session 33).
  static float finish_row(float m, float l, const float *acc, std::int64_t dv, float *out,
                          bool *finite) {
    *finite = true;
    if (l == 0.0f) {
      for (std::int64_t d = 0; d < dv; ++d) out[d] = 0.0f;
      return -std::numeric_limits<float>::infinity();
    }
    const reg vl = V::set1(l);
    reg probe = V::zero();
    std::int64_t d = 0;
    for (; d + W <= dv; d += W) {
      const reg q = V::div(V::loadu(acc + d), vl);
      V::storeu(out + d, q);
      probe = V::add(probe, V::sub(q, q));
    }
    bool tail_finite = true;
    for (; d < dv; ++d) {
      out[d] = acc[d] / l;
      tail_finite = tail_finite && std::isfinite(out[d]);
    }
    *finite = tail_finite && V::reduce_add(probe) == 0.0f;
    return m == std::numeric_limits<float>::infinity() ? m : m + std::log(l);
  }

  // probs hold the masked scores (-inf where not visible): turn them into
  // weights exp(s - lse).
  static void finish_probs(float *pr, std::int64_t kv_len, float lse, float l) {
    using R = typename V::reg;
    if (l == 0.0f) {
      for (std::int64_t j = 0; j < kv_len; ++j) pr[j] = 0.0f;
      return;
    }
    // A row with a +inf score is not a number: its weights are NaN, as in a
    // row with a NaN score (exp(s - inf) would give 0 to every finite key).
    if (lse == std::numeric_limits<float>::infinity())
      lse = std::numeric_limits<float>::quiet_NaN();
    const R vl = V::set1(lse);
    std::int64_t j = 0;
    for (; j + W <= kv_len; j += W) V::storeu(pr + j, vexp<V>(V::sub(V::loadu(pr + j), vl)));
    for (; j < kv_len; ++j) pr[j] = std::exp(pr[j] - lse);
  }

private:
  const AttentionArgs &a_;
  const Plan &p_;
  float *qpack_, *kpack_, *vpack_, *scores_;
  RowState st_;
  std::int64_t lo_[Plan::kMaxRows], hi_[Plan::kMaxRows];
  // Per MR-row tile, for the block in progress (mark_active_tiles).
  std::int64_t tile_lo_[Plan::kMaxRows], tile_hi_[Plan::kMaxRows];
  std::int64_t b_ = 0, kvh_ = 0, h0_ = 0, nh_ = 0, i0_ = 0, nq_ = 0, rows_ = 0, n_ = 0;
  std::int64_t chunk_ = 0, c0_ = 0, c1_ = 0, u_lo_ = 0, u_hi_ = 0;
  bool direct_ = false;
  const float *next_item_k_ = nullptr; // see run()
  std::int64_t next_item_keys_ = 0;
  const float *next_q_ = nullptr, *next_k_ = nullptr, *next_v_ = nullptr; // plan_next_item
  std::int64_t next_nq_ = 1, next_keys_ = 0, next_rows_ = 0, next_done_ = 0;
  std::int64_t sld_ = 0; // stride of the score rows
  std::int64_t dbk_ = 0; // keys per block of a direct item
};

// Merges the key chunks of every row in chunk order (log-sum-exp).
template <class V, class Cfg>
void merge_chunks(const AttentionArgs &a, const AttentionPlan<Cfg> &p, const float *partial,
                  float *acc, std::int64_t row) {
  const std::int64_t stride = a.dv + 2;
  const float *rowp = partial + row * p.n_chunks * stride;
  const float ninf = -std::numeric_limits<float>::infinity();
  float m = ninf;
  bool nan = false;
  for (std::int64_t c = 0; c < p.n_chunks; ++c) {
    const float mc = rowp[c * stride];
    nan = nan || mc != mc;
    m = mc > m ? mc : m;
  }
  if (nan) m = std::numeric_limits<float>::quiet_NaN();
  const float shift = m == ninf ? 0.0f : m;
  float l = 0.0f;
  for (std::int64_t d = 0; d < a.dv; ++d) acc[d] = 0.0f;
  for (std::int64_t c = 0; c < p.n_chunks; ++c) {
    const float *pc = rowp + c * stride;
    if (pc[1] == 0.0f && pc[0] == ninf) continue; // chunk saw no key
    const float w = std::exp(pc[0] - shift);
    l += pc[1] * w;
    for (std::int64_t d = 0; d < a.dv; ++d) acc[d] += pc[2 + d] * w;
  }
  const std::int64_t heads_q = a.heads * a.q_len;
  const std::int64_t b = row / heads_q, h = (row / a.q_len) % a.heads, i = row % a.q_len;
  float *out = a.out + b * a.o_strides[0] + h * a.o_strides[1] + i * a.o_strides[2];
  bool finite;
  const float lse = AttentionItem<V, Cfg>::finish_row(m, l, acc, a.dv, out, &finite);
  if (std::isfinite(lse) && !finite) recompute_overflowed_entries(a, b, h, i, m, out);
  if (a.lse) a.lse[row] = lse;
  if (a.probs) AttentionItem<V, Cfg>::finish_probs(a.probs + row * a.kv_len, a.kv_len, lse, l);
}

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
    // the balance when a core is slowed by something else. 2 threads, d 128,
    // against chunks dealt one by one, medians of A/B rounds: one head at kv
    // 262144 29.9 -> 29.7 and 25.8 -> 27.6 GB/s, 32 heads at kv 8192 28.1 ->
    // 28.7, over 8 kv heads 33.6 -> 35.8 (a plain static share: within
    // +-5 % of these).
    // Short packed items (kShortItemKeys keys at most: an encoder's) go out
    // in runs too (an eighth of a share) where they all do the same work (no
    // mask, window or kv_lens), so that a thread can request its next item's
    // rows (AttentionItem::plan_next_item): 2 threads, batch 8, 12 heads, d
    // 64, L 128 / 197 136-147 -> 149 / 132 -> 138 GFLOP/s. Longer items gain
    // less than the last run's imbalance costs (4 x 16 heads at L 384: 144-151
    // -> 137-152); with a causal mask the later items see more keys, and runs
    // cost the balance (L 2048 -9 to -12 %).
    constexpr std::int64_t kShortItemKeys = 256;
    const bool short_uniform = a.kv_len <= kShortItemKeys && a.mask == 0 && a.window_left < 0 &&
                               a.window_right < 0 && !a.kv_lens;
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
