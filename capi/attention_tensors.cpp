// Checks of ak_attention's tensors and of where K and V are stored.
#include "attention_tensors.hpp"

#include <cmath>
#include <cstddef>
#include <cstring>
#include <utility>

namespace attnkern::capi {

// Resolves all-zero strides to the contiguous layout, checks the strides and
// returns the floats the tensor spans (0 if empty).
std::int64_t check_tensor(ArgCheck &ck, TensorSpec &t, bool is_output) {
  const bool all_zero = t.strides[0] == 0 && t.strides[1] == 0 && t.strides[2] == 0;
  if (all_zero) {
    t.strides[2] = t.dim;
    t.strides[1] = ck.product(t.name, t.extents[2], t.dim);
    t.strides[0] = ck.product(t.name, t.extents[1], t.strides[1]);
  }
  for (int i = 0; i < 3; ++i)
    if (t.strides[i] < 0)
      ck.fail(AK_ERR_BAD_STRIDE, "%s[%d] = %lld is negative", t.strides_name, i,
              static_cast<long long>(t.strides[i]));
  if (!ck.ok()) return 0;
  if (t.extents[2] > 1 && t.strides[2] < t.dim)
    ck.fail(AK_ERR_BAD_STRIDE, "%s[2] (seq) = %lld is smaller than the row length %lld",
            t.strides_name, static_cast<long long>(t.strides[2]), static_cast<long long>(t.dim));
  // Empty: no rows to overlap, nothing to span (the default strides of an
  // empty tensor are 0, and so are a [b, h, s, d] tensor's with s = 0).
  if (t.extents[0] == 0 || t.extents[1] == 0 || t.extents[2] == 0 || t.dim == 0) return 0;
  if (is_output && ck.ok()) {
    // Distinct (batch, head, seq) rows must not overlap: taking the axes by
    // increasing stride, each stride must clear everything below it.
    int order[3] = {0, 1, 2};
    for (int i = 0; i < 3; ++i)
      for (int j = i + 1; j < 3; ++j)
        if (t.strides[order[j]] < t.strides[order[i]]) std::swap(order[i], order[j]);
    std::int64_t span = t.dim;
    for (int axis : order) {
      if (t.extents[axis] <= 1) continue;
      if (t.strides[axis] < span) {
        ck.fail(AK_ERR_BAD_STRIDE, "%s[%d] = %lld makes output rows overlap (needs >= %lld)",
                t.strides_name, axis, static_cast<long long>(t.strides[axis]),
                static_cast<long long>(span));
        return 0;
      }
      span = ck.product(t.name, t.extents[axis] - 1, t.strides[axis]) + span;
    }
  }
  std::int64_t span = ck.sum(t.name, t.dim, 0); // also a row too long to address
  for (int i = 0; i < 3 && ck.ok(); ++i)
    span = ck.sum(t.name, span, ck.product(t.name, t.extents[i] - 1, t.strides[i]));
  return ck.ok() ? span : 0;
}

bool read_descriptor(ArgCheck &ck, const ak_attention_desc *d, ak_attention_desc *out) {
  // Descriptor sizes of the releases: 0.1's ends at probs. (On an ABI that
  // pads the struct past probs, the padded size is 0.1's sizeof.)
  constexpr std::size_t kSize01 = offsetof(ak_attention_desc, k_type);
  constexpr std::size_t kAlign = alignof(ak_attention_desc);
  constexpr std::size_t kSize01Padded = (kSize01 + kAlign - 1) / kAlign * kAlign;
  const std::uint32_t size = d->struct_size;
  if (size == sizeof(ak_attention_desc)) {
    std::memcpy(out, d, sizeof *out);
    return true;
  }
  if (size == kSize01 || size == kSize01Padded) {
    ak_attention_desc_init(out);
    std::memcpy(out, d, kSize01);
    out->struct_size = sizeof *out;
    return true;
  }
  ck.fail(AK_ERR_BAD_ARGUMENT,
          "struct_size = %u is not a descriptor size this library knows (%u, or 0.1's %u); start "
          "from ak_attention_desc_init()",
          size, static_cast<unsigned>(sizeof(ak_attention_desc)), static_cast<unsigned>(kSize01));
  return false;
}

namespace {

bool all_zero(const std::int64_t s[3]) { return s[0] == 0 && s[1] == 0 && s[2] == 0; }

// The K or V tensor (no block table) or pool (with one): its strides
// checked and resolved into `out`.
void check_kv(ArgCheck &ck, const ak_attention_desc &d, bool is_k, std::int64_t dim, const void *p,
              std::int64_t total_k, KvLayout *out) {
  const char *name = is_k ? "k" : "v";
  const std::int64_t *strides = is_k ? d.k_strides : d.v_strides;
  const std::int64_t *page_strides = is_k ? d.k_page_strides : d.v_page_strides;
  const int type = is_k ? d.k_type : d.v_type;
  std::int64_t extent;
  if (d.block_table) {
    if (!all_zero(strides))
      ck.fail(AK_ERR_BAD_STRIDE,
              "%s = {%lld, %lld, %lld} with a block table: the pool's layout is "
              "%s (the tensor strides must be 0)",
              is_k ? "k_strides" : "v_strides", static_cast<long long>(strides[0]),
              static_cast<long long>(strides[1]), static_cast<long long>(strides[2]),
              is_k ? "k_page_strides" : "v_page_strides");
    TensorSpec t{name,
                 is_k ? "k_page_strides" : "v_page_strides",
                 {d.num_pages, d.num_kv_heads, d.page_size},
                 dim,
                 {}};
    std::memcpy(t.strides, page_strides, sizeof t.strides);
    extent = check_tensor(ck, t, false);
    std::memcpy(out->strides, t.strides, sizeof t.strides);
  } else {
    // Packed keys: one [1, kv_heads, total keys] tensor that every entry
    // indexes from its cu_seqlens_k offset.
    const bool packed = d.cu_seqlens_k != nullptr;
    if (packed && strides[0] != 0)
      ck.fail(AK_ERR_BAD_STRIDE,
              "%s[0] = %lld with cu_seqlens_k: packed sequences share one tensor (it must be 0)",
              is_k ? "k_strides" : "v_strides", static_cast<long long>(strides[0]));
    TensorSpec t{name,
                 is_k ? "k_strides" : "v_strides",
                 {packed ? 1 : d.batch, d.num_kv_heads, packed ? total_k : d.kv_len},
                 dim,
                 {}};
    std::memcpy(t.strides, strides, sizeof t.strides);
    extent = check_tensor(ck, t, false);
    if (packed) t.strides[0] = 0;
    std::memcpy(out->strides, t.strides, sizeof t.strides);
    out->cu_seqlens = d.cu_seqlens_k;
  }
  ck.pointer(name, p, extent, type == AK_F32 ? "floats" : "16-bit values");
  out->data = p;
  out->type = type;
  out->block_table = d.block_table;
  out->table_stride = d.block_table_stride;
  out->page_size = d.page_size;
}

} // namespace

void check_kv_storage(ArgCheck &ck, const ak_attention_desc &d, std::int64_t dv, const void *k,
                      const void *v, std::int64_t total_k, KvLayout *k_src, KvLayout *v_src) {
  if (d.k_type < AK_F32 || d.k_type > AK_BF16)
    ck.fail(AK_ERR_BAD_ARGUMENT, "k_type = %d is not an ak_dtype value (0, 1 or 2)", d.k_type);
  if (d.v_type < AK_F32 || d.v_type > AK_BF16)
    ck.fail(AK_ERR_BAD_ARGUMENT, "v_type = %d is not an ak_dtype value (0, 1 or 2)", d.v_type);
  if (!(std::isfinite(d.softcap) && d.softcap >= 0.0f))
    ck.fail(AK_ERR_BAD_ARGUMENT, "softcap = %g must be finite and >= 0 (0 = off)",
            static_cast<double>(d.softcap));
  if (!ck.ok()) return;
  if (d.cu_seqlens_k && d.block_table)
    ck.fail(AK_ERR_BAD_ARGUMENT, "cu_seqlens_k and block_table are both set: with a block table, "
                                 "kv_lens gives each entry's keys");
  if (d.cu_seqlens_k && d.kv_lens)
    ck.fail(AK_ERR_BAD_ARGUMENT,
            "cu_seqlens_k and kv_lens are both set: give each entry's keys once");
  if (!ck.ok()) return;
  if (!d.block_table) {
    const char *set = d.page_size                   ? "page_size"
                      : d.num_pages                 ? "num_pages"
                      : d.block_table_stride        ? "block_table_stride"
                      : !all_zero(d.k_page_strides) ? "k_page_strides"
                      : !all_zero(d.v_page_strides) ? "v_page_strides"
                                                    : nullptr;
    if (set) ck.fail(AK_ERR_BAD_ARGUMENT, "%s is set but block_table is NULL", set);
  } else {
    if (d.page_size < 1)
      ck.fail(AK_ERR_BAD_ARGUMENT, "page_size = %lld: a page holds at least one key",
              static_cast<long long>(d.page_size));
    ck.size("num_pages", d.num_pages);
    if (ck.ok()) {
      const std::int64_t pages = d.kv_len / d.page_size + (d.kv_len % d.page_size != 0);
      // Rows of the table the kernels index must be addressable.
      ck.sum("block_table (batch * block_table_stride)",
             ck.product("block_table (batch * block_table_stride)", d.batch > 0 ? d.batch - 1 : 0,
                        d.block_table_stride),
             pages);
      if (ck.ok() && d.block_table_stride < pages)
        ck.fail(AK_ERR_BAD_STRIDE,
                "block_table_stride = %lld is smaller than the %lld pages kv_len = %lld needs",
                static_cast<long long>(d.block_table_stride), static_cast<long long>(pages),
                static_cast<long long>(d.kv_len));
    }
  }
  if (!ck.ok()) return;
  check_kv(ck, d, true, d.head_dim, k, total_k, k_src);
  check_kv(ck, d, false, dv, v, total_k, v_src);
}

std::int64_t check_seqlens(ArgCheck &ck, const char *name, const std::int32_t *cu,
                           std::int64_t batch, std::int64_t max_len, const char *max_name) {
  if (!cu || !ck.ok()) return 0;
  if (cu[0] != 0) {
    ck.fail(AK_ERR_BAD_ARGUMENT, "%s[0] = %d: the first sequence starts at row 0", name, cu[0]);
    return 0;
  }
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::int64_t len = static_cast<std::int64_t>(cu[b + 1]) - cu[b];
    if (len < 0 || len > max_len) {
      ck.fail(AK_ERR_BAD_ARGUMENT,
              "%s[%lld] = %d, %s[%lld] = %d: sequence %lld has %lld rows, outside [0, %s = %lld]",
              name, static_cast<long long>(b), cu[b], name, static_cast<long long>(b + 1),
              cu[b + 1], static_cast<long long>(b), static_cast<long long>(len), max_name,
              static_cast<long long>(max_len));
      return 0;
    }
  }
  return cu[batch];
}

void check_needed_pages(ArgCheck &ck, const ak_attention_desc &d) {
  if (!d.block_table) return;
  const std::int64_t widest = d.q_len + d.kv_len; // windows past it are none (as in the kernel)
  const std::int64_t wl = d.window_left > widest ? widest : d.window_left;
  const std::int64_t wr = d.window_right > widest ? widest : d.window_right;
  for (std::int64_t b = 0; b < d.batch; ++b) {
    const std::int64_t n = d.kv_lens ? d.kv_lens[b] : d.kv_len;
    const std::int64_t qn =
        d.cu_seqlens_q ? std::int64_t{d.cu_seqlens_q[b + 1]} - d.cu_seqlens_q[b] : d.q_len;
    // The hull of the keys the queries see (visible_keys in the kernel):
    // both ends only grow with i.
    std::int64_t lo = n, hi = 0;
    for (std::int64_t i = 0; i < qn; ++i) {
      const std::int64_t diag = d.mask == AK_MASK_CAUSAL_BOTTOM_RIGHT ? i + (n - qn) : i;
      std::int64_t h = n;
      if (d.mask != AK_MASK_NONE && diag + 1 < h) h = diag + 1;
      if (wr >= 0 && diag + wr + 1 < h) h = diag + wr + 1;
      std::int64_t l = wl >= 0 ? diag - wl : 0;
      l = l < 0 ? 0 : l > n ? n : l;
      if (h > l) lo = l < lo ? l : lo, hi = h > hi ? h : hi;
    }
    if (hi <= lo) continue;
    for (std::int64_t p = lo / d.page_size; p <= (hi - 1) / d.page_size; ++p) {
      const std::int32_t id = d.block_table[b * d.block_table_stride + p];
      if (id < 0 || id >= d.num_pages) {
        ck.fail(AK_ERR_BAD_ARGUMENT,
                "block_table[%lld][%lld] = %d is not a page in [0, num_pages = %lld), and "
                "keys %lld.. of batch entry %lld are visible",
                static_cast<long long>(b), static_cast<long long>(p), id,
                static_cast<long long>(d.num_pages), static_cast<long long>(p * d.page_size),
                static_cast<long long>(b));
        return;
      }
    }
  }
}

} // namespace attnkern::capi
