// The direct path of a work item (a query block's whole group of heads in
// at most kDirectRows rows: decode, GQA groups, a few queries per step): K
// and V read in place, each once per block of keys, by GEMV-like kernels
// (sgemm_skinny.hpp's tiles), with software requests for the rows of the
// pass ahead where the hardware prefetcher does not follow.
#pragma once

#include <cstdint>
#include <type_traits>

#include "../gemm/gemm_common.hpp"
#include "../gemm/sgemm_skinny.hpp"
#include "attention_item.hpp"
#include "row_state.hpp"

namespace attnkern {
namespace AK_ISA_NS {

// key_block for direct_ items: the same steps with K and V read in place,
// each once, in blocks of dbk_ keys. Memory runs a pass ahead of the
// arithmetic: the K pass requests the block's V rows, the P V pass the
// next block's K rows, except for items read in order (in_order_nv,
// kInOrderBk).
template <class V, class Cfg>
inline void AttentionItem<V, Cfg>::key_block_direct(std::int64_t j0, std::int64_t j1) {
  if (typed_) return key_block_typed(j0, j1);
  const std::int64_t bk = j1 - j0;
  // Staged K and V (kv_staging.hpp) are widened a run of kStagedRun keys
  // at a time, just before the kernels read the run: each pass below goes
  // over the block run by run. In place, a run is the whole block.
  const bool staged = a_.staged();
  const std::int64_t run = staged ? kStagedRun : bk;
  if (!staged) locate_k(j0, j1), locate_v(j0, j1);
  for (std::int64_t r = 0; r < rows_; ++r)
    for (std::int64_t j = 0; j < bk; ++j) scores_[r * sld_ + j] = 0.0f;
  for (std::int64_t s = 0; s < bk; s += run) {
    const std::int64_t n = min64(run, bk - s);
    if (staged) locate_k(j0 + s, j0 + s + n, s == 0);
    sbase_ = scores_ + s;
    const bool first = j0 == u_lo_ && s == 0;
    const float *vb = staged ? kblk_ : vblk_; // (staged: no requests for V here)
    if (rows_ <= kDirectOneCall)
      rows_dispatch<1>(rows_,
                       [&](auto m) { direct_scores<decltype(m)::value>(n, kblk_, vb, first); });
    else
      direct_scores_grouped(n, kblk_, vb, first);
  }
  sbase_ = scores_;
  for (std::int64_t r = 0; r < rows_; ++r) softmax_update(r, j0, bk);
  // Inf/NaN in V shows as Inf/NaN in the accumulator (a zero weight times
  // Inf is NaN): only then is the block redone from a copy of the
  // accumulator, weighing just the keys the rows see (exact_pv). A finite
  // V whose sum overflows takes that path too, to the same result; such a
  // row is recomputed when it is finished (recompute_overflowed_entries).
  float *const saved = vpack_; // unused by direct items
  const std::int64_t acc_floats = rows_ * p_.dv_pad;
  for (std::int64_t x = 0; x < acc_floats; ++x) saved[x] = st_.acc[x];
  // The next block's K rows, or after the last block the next item's
  // (staged: none, the staging requests its rows ahead).
  const float *kn = staged ? nullptr : kblk_ + bk * ks_;
  std::int64_t next = staged ? 0 : min64(u_hi_ - j1, dbk_);
  if (next == 0 && next_item_k_) kn = next_item_k_, next = min64(next_item_keys_, dbk_);
  const auto pv_runs = [&](auto &&pass) {
    for (std::int64_t s = 0; s < bk; s += run) {
      const std::int64_t n = min64(run, bk - s);
      if (staged) locate_v(j0 + s, j0 + s + n, s == 0);
      sbase_ = scores_ + s;
      pass(n);
    }
    sbase_ = scores_;
  };
  pv_runs([&](std::int64_t n) {
    if (rows_ <= kDirectOneCall)
      rows_dispatch<1>(rows_,
                       [&](auto m) { direct_pv<decltype(m)::value>(n, vblk_, vs_, kn, next); });
    else
      direct_pv_grouped(n, vblk_, kn, next);
  });
  if (has_non_finite<V>(st_.acc, acc_floats)) {
    for (std::int64_t x = 0; x < acc_floats; ++x) st_.acc[x] = saved[x];
    pv_runs([&](std::int64_t n) { exact_pv(n); });
  }
}

// f(std::integral_constant<int, rows>), for 1 <= rows <= Max.
template <class V, class Cfg>
template <int M, int Max, class F>
inline void AttentionItem<V, Cfg>::rows_dispatch(std::int64_t rows, F &&f) {
  if constexpr (M <= Max) {
    if (rows == M) return f(std::integral_constant<int, M>{});
    rows_dispatch<M + 1, Max>(rows, f);
  }
}

// Whether an M-row item reads K and V strictly in address order and
// leaves them to the hardware prefetcher: items of 1 or 2 rows (MHA
// decode, GQA groups of 2) whose V rows are 1, 2, 4 or 8 vectors (d 16 to
// 128 on AVX-512), so that the P V pass can take whole rows, and the K
// pass takes its rows one by one. There, for fp32 rows, the requests ahead
// (below) only cost bandwidth (the likely cause: each holds one of the
// core's few L1 miss buffers); they pay where a pass steps across rows, a
// pattern the hardware prefetcher does not follow, for 16-bit rows (the
// typed path, typed_ahead), or where a pass does more arithmetic per byte.
// Groups of 4 (4 FMAs per vector loaded) ran slower in order than with the
// requests. Returns the vectors per V row, or 0 for the requests ahead.
template <class V, class Cfg>
inline int AttentionItem<V, Cfg>::in_order_nv(std::int64_t rows) const {
  const std::int64_t nv = a_.dv / W;
  return rows <= 2 && (nv == 1 || nv == 2 || nv == 4 || nv == 8) ? static_cast<int>(nv) : 0;
}
template <class V, class Cfg>
template <int M>
inline int AttentionItem<V, Cfg>::in_order_vectors() const {
  return in_order_nv(M);
}

// scores_[r][j] += (scale q_r) . k_j for j < bk, J keys at a time.
// Unless in order, the block's K rows are also requested kKeysAhead rows
// ahead (the requests of the P V pass before do not all arrive in time),
// and its V rows alongside.
template <class V, class Cfg>
template <int M>
inline void AttentionItem<V, Cfg>::direct_scores(std::int64_t bk, const float *kb, const float *vb,
                                                 bool first) {
  constexpr int J0 = skinny_acc_budget<V>() / M;
  // At most 4 keys at once: 16 ran slower at M = 1.
  constexpr int J = J0 < 1 ? 1 : J0 > 4 ? 4 : J0;
  // From 4 rows on, a step loads its M Q vectors once into registers (4 Q
  // and 4 K loads per 16 FMAs at M = 4, against 20 with a load per use):
  // there the arithmetic, not K's stream, is the limit.
  constexpr bool kQInRegisters = M >= 4;
  const std::int64_t ks = ks_, vs = vs_;
  if (in_order_vectors<M>()) {
    std::int64_t j = 0;
    for (; j + J <= bk; j += J)
      skinny_k_tile<V, M, J, true>(0, a_.dk, qpack_, a_.dk, kb + j * ks, ks, sbase_ + j, sld_);
    for (; j < bk; ++j)
      skinny_k_tile<V, M, 1>(0, a_.dk, qpack_, a_.dk, kb + j * ks, ks, sbase_ + j, sld_);
    return;
  }
  const bool ahead = !a_.staged(); // staged rows lie in L1
  if (first && ahead) prefetch_rows(kb, ks, a_.dk, 0, kKeysAhead, bk);
  std::int64_t j = 0;
  for (; j + J <= bk; j += J) {
    if (ahead) {
      prefetch_rows(kb, ks, a_.dk, j + kKeysAhead, J, bk);
      prefetch_rows(vb, vs, a_.dv, j, J, bk);
    }
    skinny_k_tile<V, M, J, false, kQInRegisters>(0, a_.dk, qpack_, a_.dk, kb + j * ks, ks,
                                                 sbase_ + j, sld_);
  }
  for (; j < bk; ++j) {
    if (ahead) prefetch_rows(vb, vs, a_.dv, j, 1, bk);
    skinny_k_tile<V, M, 1>(0, a_.dk, qpack_, a_.dk, kb + j * ks, ks, sbase_ + j, sld_);
  }
}

// direct_scores for more than kDirectOneCall rows: each J = 4 keys go to
// the rows G at a time (G = 4 on AVX-512, 2 where skinny_acc_budget is 8),
// so that K is read from memory once and from L1 by the other groups, and
// each group's Q vectors are loaded once per step (the kernel is bound by
// its arithmetic here, not by the stream). Requests ahead as in
// direct_scores.
template <class V, class Cfg>
inline void AttentionItem<V, Cfg>::direct_scores_grouped(std::int64_t bk, const float *kb,
                                                         const float *vb, bool first) {
  constexpr int J = 4;
  constexpr int G0 = skinny_acc_budget<V>() / J;
  constexpr int G = G0 < 1 ? 1 : G0;
  const std::int64_t ks = ks_, vs = vs_, dk = a_.dk;
  const auto keys = [&](std::int64_t j, auto n) {
    for (std::int64_t r0 = 0; r0 < rows_; r0 += G)
      rows_dispatch<1, G>(min64(G, rows_ - r0), [&](auto m) {
        skinny_k_tile<V, decltype(m)::value, decltype(n)::value, false, true>(
            0, dk, qpack_ + r0 * dk, dk, kb + j * ks, ks, sbase_ + r0 * sld_ + j, sld_);
      });
  };
  const bool ahead = !a_.staged(); // staged rows lie in L1
  if (first && ahead) prefetch_rows(kb, ks, dk, 0, kKeysAhead, bk);
  std::int64_t j = 0;
  for (; j + J <= bk; j += J) {
    if (ahead) {
      prefetch_rows(kb, ks, dk, j + kKeysAhead, J, bk);
      prefetch_rows(vb, vs, a_.dv, j, J, bk);
    }
    keys(j, std::integral_constant<int, J>{});
  }
  for (; j < bk; ++j) {
    if (ahead) prefetch_rows(vb, vs, a_.dv, j, 1, bk);
    keys(j, std::integral_constant<int, 1>{});
  }
}

// Whether the P V pass's strips of nv vectors can carry the requests for
// the next K rows: each strip, at each key, asks for the lines of that
// key's next K row at its own columns, so K and V rows of one width are
// covered strip by strip. Otherwise each run of kPvKeys keys requests its
// next K rows at its start, a burst (128 prefetches at d 128) that holds
// the core's miss buffers while the FMAs wait.
template <class V, class Cfg> inline bool AttentionItem<V, Cfg>::next_k_spread(int nv) const {
  return a_.dk == a_.dv && a_.dv % (static_cast<std::int64_t>(nv) * W) == 0;
}

// direct_pv for more than kDirectOneCall rows: each run of kPvKeys V rows
// goes to the rows 4 at a time (from L1 after the first group), in strips
// of skinny_strip_vectors (AVX-512: 4 vectors, 8 loads per 16 FMAs,
// against 10 for 8 rows x 2 vectors; 2 vectors where the budget is 8).
template <class V, class Cfg>
inline void AttentionItem<V, Cfg>::direct_pv_grouped(std::int64_t bk, const float *vb,
                                                     const float *kn, std::int64_t next) {
  constexpr int G = 4;
  const std::int64_t vs = vs_, ks = a_.k_strides[2];
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
        const float *w = sbase_ + r0 * sld_ + j;
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
// (kn, `next` of them) are requested alongside, or on the typed path the V
// rows `ahead` (typed_ahead).
template <class V, class Cfg>
template <int M, class T>
inline void AttentionItem<V, Cfg>::direct_pv(std::int64_t bk, const T *vb, std::int64_t vs,
                                             const float *kn, std::int64_t next,
                                             const RowsAhead &ahead) {
  switch (in_order_vectors<M>()) {
  case 1:
    return direct_pv_in_order<M, 1>(bk, vb, vs, ahead);
  case 2:
    return direct_pv_in_order<M, 2>(bk, vb, vs, ahead);
  case 4:
    return direct_pv_in_order<M, 4>(bk, vb, vs, ahead);
  case 8:
    return direct_pv_in_order<M, 8>(bk, vb, vs, ahead);
  default:
    break;
  }
  constexpr int NVd = skinny_strip_vectors<V, M>();
  const std::int64_t ks = a_.k_strides[2];
  const bool spread = next_k_spread(NVd);
  for (std::int64_t j = 0; j < bk; j += kPvKeys) {
    const std::int64_t je = min64(j + kPvKeys, bk);
    const bool spread_run = spread && je <= next;
    if (!spread_run) prefetch_rows(kn, ks, a_.dk, j, je - j, next);
    // The strips' requests: V rows ahead (typed), else the next K rows.
    const T *pf = ahead.template at<T>(j, je - j);
    std::int64_t ldpf = vs;
    if constexpr (std::is_same_v<T, float>)
      if (!pf && spread_run) pf = kn + j * ks, ldpf = ks;
    const float *w = sbase_ + j;
    const T *vr = vb + j * vs;
    std::int64_t d = 0;
    for (; d + NVd * W <= a_.dv; d += NVd * W)
      skinny_n_tile<V, M, NVd>(0, je - j, w, sld_, vr + d, vs, st_.acc + d, p_.dv_pad,
                               pf ? pf + d : nullptr, ldpf);
    for (; d < a_.dv; d += W)
      skinny_n_tile<V, M, 1>(0, je - j, w, sld_, vr + d, vs, st_.acc + d, p_.dv_pad);
  }
}

// direct_pv for V rows of NV vectors, read in address order: each run of
// kPvKeys keys goes to the rows in groups of G (1 or all), whole V rows at
// a time (a second group reads the run's rows from L1). Each sum takes the
// same terms in the same order as in direct_pv's strips. T: the stored
// element type (the typed path reads half-precision rows through it, and
// requests the rows `ahead`: the first group's tiles, a line per line read).
template <class V, class Cfg>
template <int M, int NV, class T>
inline void AttentionItem<V, Cfg>::direct_pv_in_order(std::int64_t bk, const T *vb, std::int64_t vs,
                                                      const RowsAhead &ahead) {
  constexpr int G0 = skinny_acc_budget<V>() / NV;
  constexpr int G = G0 < 1 ? 1 : G0 > M ? M : G0;
  constexpr int kLast = M % G == 0 ? G : M % G; // rows of the last group
  for (std::int64_t j = 0; j < bk; j += kPvKeys) {
    const std::int64_t keys = min64(kPvKeys, bk - j);
    const T *vr = vb + j * vs;
    const T *pf = ahead.template at<T>(j, keys);
    for (int r0 = 0; r0 < M; r0 += G) {
      const float *w = sbase_ + r0 * sld_ + j;
      float *acc = st_.acc + r0 * p_.dv_pad;
      const T *pf_group = r0 == 0 ? pf : nullptr;
      if (r0 + G <= M)
        skinny_n_tile<V, G, NV>(0, keys, w, sld_, vr, vs, acc, p_.dv_pad, pf_group, vs);
      else
        skinny_n_tile<V, kLast, NV>(0, keys, w, sld_, vr, vs, acc, p_.dv_pad, pf_group, vs);
    }
  }
}

} // namespace AK_ISA_NS
} // namespace attnkern
