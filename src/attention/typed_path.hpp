// The typed path of direct items: items of at most kDirectOneCall rows
// (decode: MHA, GQA groups up to 8) over half-precision or paged K/V, on
// instruction sets that widen in registers (widens_in_registers). The
// direct path's kernels read each stored row where it lies and widen it as
// they load it: half the bytes of fp32 from memory and no staging. Rows are
// taken run by run, a run being the keys of a block that lie in one page,
// and each pass requests the rows kTypedAheadBytes ahead of those it reads,
// through the block table where there is one. The kernels, blocks and order
// of the sums are the fp32 direct path's, so the results are its bits on
// the widened values (also where pages cut the blocks: typed_scores_paged).
#pragma once

#include <cstdint>

#include "../convert/widen.hpp"
#include "../gemm/gemm_common.hpp"
#include "../gemm/sgemm_skinny.hpp"
#include "attention_item.hpp"
#include "row_state.hpp"

namespace attnkern {
namespace AK_ISA_NS {

// Keys per step of typed_scores (at most).
static constexpr int kTypedKeys = 4;
// How far ahead of its reads each pass of the typed path requests rows, in
// stored bytes (32 keys of bf16 at d 128). With half the bytes per value,
// the hardware prefetcher alone left the stream at about 80 % of the read
// bandwidth, and it starts each page of a pool cold; a line requested per
// line read, this far on, keeps it at the read bandwidth.
static constexpr std::int64_t kTypedAheadBytes = 8192;

// f(T{}) for the element type T of storage type `type`.
template <class F> inline void with_elem_type(int type, F &&f) {
  if (type == 1)
    f(F16{});
  else if (type == 2)
    f(Bf16{});
  else
    f(float{});
}

template <class V, class Cfg>
inline void AttentionItem<V, Cfg>::key_block_typed(std::int64_t j0, std::int64_t j1) {
  const std::int64_t bk = j1 - j0;
  for (std::int64_t r = 0; r < rows_; ++r)
    for (std::int64_t j = 0; j < bk; ++j) scores_[r * sld_ + j] = 0.0f;
  // f(first key, first stored row, key count) for each run of keys in one page.
  const auto runs = [&](const KvLayout &t, auto &&f) {
    for (std::int64_t s = 0; s < bk;) {
      const std::int64_t j = j0 + s;
      const std::int64_t n = t.block_table ? min64(bk - s, t.page_size - j % t.page_size) : bk - s;
      sbase_ = scores_ + s;
      f(j, t.row(b_, kvh_, j), n);
      s += n;
    }
    sbase_ = scores_;
  };
  with_elem_type(a_.k_src.type, [&](auto tag) {
    using T = decltype(tag);
    rows_dispatch<1>(rows_, [&](auto m) {
      constexpr int M = decltype(m)::value;
      if (a_.k_src.block_table) return typed_scores_paged<M, T>(j0, bk);
      typed_scores<M>(bk, reinterpret_cast<const T *>(a_.k_src.row(b_, kvh_, j0)),
                      a_.k_src.strides[2], typed_ahead(a_.k_src, j0, a_.dk));
    });
  });
  for (std::int64_t r = 0; r < rows_; ++r) softmax_update(r, j0, bk);
  // Inf/NaN in V, or a sum past FLT_MAX: as in key_block_direct, the block
  // is redone from a copy of the accumulator, staged, by exact_pv.
  float *const saved = vpack_;
  const std::int64_t acc_floats = rows_ * p_.dv_pad;
  for (std::int64_t x = 0; x < acc_floats; ++x) saved[x] = st_.acc[x];
  // direct_pv's kernels, requesting V rows ahead rather than the next K rows.
  with_elem_type(a_.v_src.type, [&](auto tag) {
    using T = decltype(tag);
    runs(a_.v_src, [&](std::int64_t j, const unsigned char *p, std::int64_t n) {
      const T *vb = reinterpret_cast<const T *>(p);
      const RowsAhead ahead = typed_ahead(a_.v_src, j, a_.dv);
      rows_dispatch<1>(rows_, [&](auto m) {
        direct_pv<decltype(m)::value>(n, vb, a_.v_src.strides[2], nullptr, 0, ahead);
      });
    });
  });
  if (has_non_finite<V>(st_.acc, acc_floats)) {
    for (std::int64_t x = 0; x < acc_floats; ++x) st_.acc[x] = saved[x];
    for (std::int64_t s = 0; s < bk; s += kStagedRun) {
      const std::int64_t n = min64(kStagedRun, bk - s);
      locate_v(j0 + s, j0 + s + n);
      sbase_ = scores_ + s;
      exact_pv(n);
    }
    sbase_ = scores_;
  }
}

// direct_scores' kernels on stored rows of type T, Q in registers from 4
// rows, each tile requesting the rows `ahead` (typed_ahead) at its own
// offsets, a line per line read. The J keys of a step go side by side
// (not row by row, as fp32's in-order items take them): each key's sum is a
// chain of dependent FMAs, and with twice the values per byte the chains,
// not the stream, would set the pace. Each sum keeps its order, so the bits
// are the same.
template <class V, class Cfg>
template <int M, class T>
inline void AttentionItem<V, Cfg>::typed_scores(std::int64_t n, const T *kb, std::int64_t ks,
                                                const RowsAhead &ahead) {
  constexpr int J0 = skinny_acc_budget<V>() / M;
  constexpr int J = J0 < 1 ? 1 : J0 > kTypedKeys ? kTypedKeys : J0;
  constexpr bool kQInRegisters = M >= 4;
  std::int64_t j = 0;
  for (; j + J <= n; j += J)
    skinny_k_tile<V, M, J, false, kQInRegisters>(0, a_.dk, qpack_, a_.dk, kb + j * ks, ks,
                                                 sbase_ + j, sld_, ahead.template at<T>(j, J));
  for (; j < n; ++j)
    skinny_k_tile<V, M, 1>(0, a_.dk, qpack_, a_.dk, kb + j * ks, ks, sbase_ + j, sld_);
}

// typed_scores over a block of paged keys: the key tiles lie on the grid
// of the block's first key, as in place, so that a page's end changes no
// bit; a tile that spans two pages is staged (widened exactly) and taken
// from there.
template <class V, class Cfg>
template <int M, class T>
inline void AttentionItem<V, Cfg>::typed_scores_paged(std::int64_t j0, std::int64_t bk) {
  constexpr int J0 = skinny_acc_budget<V>() / M;
  constexpr int J = J0 < 1 ? 1 : J0 > kTypedKeys ? kTypedKeys : J0;
  constexpr bool kQInRegisters = M >= 4;
  const KvLayout &t = a_.k_src;
  const std::int64_t ps = t.page_size, ks = t.strides[2], dk = a_.dk;
  const RowsAhead ahead = typed_ahead(t, j0, dk);
  std::int64_t j = 0;
  while (j + J <= bk) {
    const std::int64_t key = j0 + j, in_page = ps - key % ps;
    if (in_page >= J) { // the whole tiles left in this page, from one row pointer
      const std::int64_t tiles = min64(in_page, bk - j) / J;
      const T *kb = reinterpret_cast<const T *>(t.row(b_, kvh_, key));
      for (std::int64_t x = 0; x < tiles; ++x, j += J)
        skinny_k_tile<V, M, J, false, kQInRegisters>(0, dk, qpack_, dk, kb + x * J * ks, ks,
                                                     scores_ + j, sld_, ahead.template at<T>(j, J));
    } else { // a tile across two pages
      stage_rows<V>(t, b_, kvh_, key, key + J, hull_lo_, hull_hi_, dk, kst_, dk, false);
      skinny_k_tile<V, M, J, false, kQInRegisters>(0, dk, qpack_, dk, kst_, dk, scores_ + j, sld_);
      j += J;
    }
  }
  for (; j < bk; ++j)
    skinny_k_tile<V, M, 1>(0, dk, qpack_, dk, reinterpret_cast<const T *>(t.row(b_, kvh_, j0 + j)),
                           ks, scores_ + j, sld_);
}

// The rows kTypedAheadBytes ahead of a pass over rows of `len` values of
// t from key `first`, up to the item's last key.
template <class V, class Cfg>
inline typename AttentionItem<V, Cfg>::RowsAhead
AttentionItem<V, Cfg>::typed_ahead(const KvLayout &t, std::int64_t first, std::int64_t len) const {
  const std::int64_t ahead = max64(kTypedKeys, kTypedAheadBytes / max64(1, len * t.elem_bytes()));
  return RowsAhead{&t, b_, kvh_, first, ahead, u_hi_};
}

} // namespace AK_ISA_NS
} // namespace attnkern
