#include "guard_attention_case.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

namespace guard {
namespace {

constexpr std::int64_t kGap = 3; // floats between the heads of a strided tensor

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

bool packed_q(const AttnSpec &s) { return !s.cu_q.empty(); }
bool packed_k(const AttnSpec &s) { return !s.cu_k.empty(); }

std::int64_t dv_of(const AttnSpec &s) { return s.dv ? s.dv : s.dk; }

// A [batch, heads, seq, dim] tensor: all-zero strides (contiguous) or
// token-major with gaps; packed tensors are one batch entry with stride 0.
struct Layout {
  std::int64_t strides[3];  // as passed
  std::int64_t resolved[3]; // as the library resolves all-zero strides
  std::int64_t extent;
};
Layout tensor_layout(bool strided, bool packed, std::int64_t batch, std::int64_t heads,
                     std::int64_t seq, std::int64_t dim) {
  Layout l{{0, 0, 0}, {0, 0, 0}, 0};
  const std::int64_t e[3] = {packed ? 1 : batch, heads, seq};
  std::int64_t s[3] = {heads * seq * dim, seq * dim, dim};
  if (strided) {
    s[1] = dim + kGap, s[2] = heads * s[1], s[0] = packed ? 0 : seq * s[2];
    for (int i = 0; i < 3; ++i) l.strides[i] = s[i];
  }
  if (packed) s[0] = 0;
  for (int i = 0; i < 3; ++i) l.resolved[i] = s[i];
  l.extent = tensor_extent(e, s, dim);
  return l;
}

// The pool's [page, kv_head, slot] strides (all 0: contiguous) and extent.
Layout pool_layout(const AttnSpec &s, std::int64_t pages, std::int64_t dim) {
  Layout l{{0, 0, 0}, {0, 0, 0}, 0};
  const std::int64_t ps = s.page_size, row = dim + 2;
  std::int64_t st[3] = {s.kv_heads * ps * dim, ps * dim, dim};
  if (s.pool == AttnSpec::head_major_gaps)
    st[2] = row, st[1] = ps * row + 1, st[0] = s.kv_heads * st[1] + 3;
  else if (s.pool == AttnSpec::slot_major_gaps)
    st[1] = row, st[2] = s.kv_heads * row, st[0] = ps * st[2] + 3;
  if (s.pool != AttnSpec::contiguous_pool)
    for (int i = 0; i < 3; ++i) l.strides[i] = st[i];
  for (int i = 0; i < 3; ++i) l.resolved[i] = st[i];
  const std::int64_t e[3] = {pages, s.kv_heads, ps};
  l.extent = tensor_extent(e, st, dim);
  return l;
}

// Sets `count` values of type t from element `at` on to `value`.
void set_values(void *p, ak_dtype t, std::int64_t at, std::int64_t count, float value) {
  if (t == AK_F32) {
    for (std::int64_t i = 0; i < count; ++i) static_cast<float *>(p)[at + i] = value;
    return;
  }
  std::uint16_t h; // NaN, or bf16's nearest to a finite value (f16 only takes NaN here)
  if (std::isnan(value)) {
    h = t == AK_F16 ? 0x7E00u : 0x7FC0u;
  } else {
    std::uint32_t u;
    std::memcpy(&u, &value, sizeof u);
    h = static_cast<std::uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
  }
  for (std::int64_t i = 0; i < count; ++i) static_cast<std::uint16_t *>(p)[at + i] = h;
}

// Applies poison_hidden and huge_v to K and V (layouts lk, lv; paged
// through `table`).
void special_values(const AttnSpec &s, const PageTable &table, const Layout &lk, const Layout &lv,
                    void *k, void *v) {
  const std::int64_t dv = dv_of(s);
  for (std::int64_t b = 0; b < s.batch; ++b) {
    std::int64_t lo, hi;
    visible_hull(s, b, &lo, &hi);
    const std::int64_t rows = packed_k(s) ? s.cu_k[b + 1] - s.cu_k[b] : s.kv_len;
    for (std::int64_t j = 0; j < rows; ++j) {
      std::int64_t base = b, slot = j; // the row's [batch or page, slot] coordinates
      if (s.page_size) {
        base = table.ids[static_cast<std::size_t>(b * table.stride + j / s.page_size)];
        slot = j % s.page_size;
        if (base < 0 || base >= table.num_pages) continue; // no page: nothing stored
      } else if (packed_k(s)) {
        base = 0, slot = s.cu_k[b] + j;
      }
      for (std::int64_t h = 0; h < s.kv_heads; ++h) {
        const std::int64_t ko = base * lk.resolved[0] + h * lk.resolved[1] + slot * lk.resolved[2];
        const std::int64_t vo = base * lv.resolved[0] + h * lv.resolved[1] + slot * lv.resolved[2];
        if (s.poison_hidden && (j < lo || j >= hi)) {
          set_values(k, s.k_type, ko, s.dk, NAN);
          set_values(v, s.v_type, vo, dv, NAN);
        } else if (s.huge_v) {
          set_values(v, s.v_type, vo, 1, 3.0e38f);
        }
      }
    }
  }
}

} // namespace

std::string describe(const AttnSpec &s) {
  std::string r = "ak_attention " + s.label + " (b " + std::to_string(s.batch) + ", h " +
                  std::to_string(s.heads) + "/" + std::to_string(s.kv_heads) + ", q " +
                  std::to_string(s.q_len) + ", kv " + std::to_string(s.kv_len) + ", d " +
                  std::to_string(s.dk) + "/" + std::to_string(dv_of(s)) + ", types " +
                  std::to_string(s.k_type) + "/" + std::to_string(s.v_type);
  if (s.page_size) r += ", pages of " + std::to_string(s.page_size);
  return r + ")";
}

void visible_hull(const AttnSpec &s, std::int64_t b, std::int64_t *lo, std::int64_t *hi) {
  const std::int64_t n = packed_k(s)         ? s.cu_k[b + 1] - s.cu_k[b]
                         : s.kv_lens.empty() ? s.kv_len
                                             : s.kv_lens[static_cast<std::size_t>(b)];
  const std::int64_t qn = packed_q(s) ? s.cu_q[b + 1] - s.cu_q[b] : s.q_len;
  *lo = n, *hi = 0;
  for (std::int64_t i = 0; i < qn; ++i) {
    const std::int64_t diag = s.mask == AK_MASK_CAUSAL_BOTTOM_RIGHT ? i + (n - qn) : i;
    std::int64_t h = n;
    if (s.mask != AK_MASK_NONE) h = std::min(h, diag + 1);
    if (s.window_right >= 0) h = std::min(h, diag + s.window_right + 1);
    std::int64_t l = s.window_left >= 0 ? diag - s.window_left : 0;
    l = std::min(std::max<std::int64_t>(l, 0), n);
    if (h > l) *lo = std::min(*lo, l), *hi = std::max(*hi, h);
  }
  if (*hi <= *lo) *lo = *hi = 0;
}

PageTable make_page_table(const AttnSpec &s) {
  PageTable t;
  if (s.page_size == 0) return t;
  const std::int64_t cols = ceil_div(s.kv_len, s.page_size);
  t.stride = cols + s.extra_cols;
  t.ids.assign(static_cast<std::size_t>(s.batch * t.stride), 0);
  for (std::int64_t b = 0; b < s.batch; ++b) {
    std::int64_t lo, hi;
    visible_hull(s, b, &lo, &hi);
    for (std::int64_t c = 0; c < cols; ++c)
      if (hi > lo && c >= lo / s.page_size && c <= (hi - 1) / s.page_size)
        t.needed.push_back(b * t.stride + c);
  }
  t.num_pages = static_cast<std::int64_t>(t.needed.size());
  std::vector<std::int32_t> perm(t.needed.size());
  std::iota(perm.begin(), perm.end(), 0);
  std::mt19937 rng(static_cast<std::uint32_t>(s.kv_len * 7 + s.page_size));
  std::shuffle(perm.begin(), perm.end(), rng);
  // Entries no visible key needs: a page before or past the pool.
  for (std::size_t i = 0; i < t.ids.size(); ++i)
    t.ids[i] = i % 2 ? -1 : static_cast<std::int32_t>(t.num_pages);
  for (std::size_t i = 0; i < t.needed.size(); ++i)
    t.ids[static_cast<std::size_t>(t.needed[i])] = perm[i];
  return t;
}

AttnCall build_call(Arena &ar, const AttnSpec &s, const PageTable &table) {
  AttnCall c{};
  ak_attention_desc &d = c.d;
  ak_attention_desc_init(&d);
  const std::int64_t dv = dv_of(s);
  d.batch = s.batch, d.num_heads = s.heads, d.num_kv_heads = s.kv_heads;
  d.q_len = s.q_len, d.kv_len = s.kv_len, d.head_dim = s.dk, d.head_dim_v = s.dv;
  d.mask = s.mask, d.window_left = s.window_left, d.window_right = s.window_right;
  d.k_type = s.k_type, d.v_type = s.v_type, d.softcap = s.softcap;

  const std::int64_t total_q = packed_q(s) ? s.cu_q.back() : s.q_len;
  const std::int64_t total_k = packed_k(s) ? s.cu_k.back() : s.kv_len;
  const Layout lq = tensor_layout(s.strided, packed_q(s), s.batch, s.heads, total_q, s.dk);
  const Layout lo = tensor_layout(s.strided, packed_q(s), s.batch, s.heads, total_q, dv);
  for (int i = 0; i < 3; ++i) d.q_strides[i] = lq.strides[i], d.o_strides[i] = lo.strides[i];
  c.q = ar.in(lq.extent);
  if (s.page_size) {
    d.page_size = s.page_size, d.num_pages = table.num_pages;
    d.block_table_stride = table.stride;
    const Layout pk = pool_layout(s, table.num_pages, s.dk);
    const Layout pv = pool_layout(s, table.num_pages, dv);
    for (int i = 0; i < 3; ++i)
      d.k_page_strides[i] = pk.strides[i], d.v_page_strides[i] = pv.strides[i];
    void *k = ar.in_typed(s.k_type, pk.extent), *v = ar.in_typed(s.v_type, pv.extent);
    special_values(s, table, pk, pv, k, v);
    c.k = k, c.v = v;
    d.block_table = ar.copy(table.ids);
  } else {
    const Layout lk = tensor_layout(s.strided, packed_k(s), s.batch, s.kv_heads, total_k, s.dk);
    const Layout lv = tensor_layout(s.strided, packed_k(s), s.batch, s.kv_heads, total_k, dv);
    for (int i = 0; i < 3; ++i) d.k_strides[i] = lk.strides[i], d.v_strides[i] = lv.strides[i];
    void *k = ar.in_typed(s.k_type, lk.extent), *v = ar.in_typed(s.v_type, lv.extent);
    special_values(s, table, lk, lv, k, v);
    c.k = k, c.v = v;
  }
  if (packed_q(s)) d.cu_seqlens_q = ar.copy(s.cu_q);
  if (packed_k(s)) d.cu_seqlens_k = ar.copy(s.cu_k);
  if (!s.kv_lens.empty()) d.kv_lens = ar.copy(s.kv_lens);
  if (s.bias != AttnSpec::no_bias) {
    const std::int64_t q = s.q_len, kv = s.kv_len;
    std::int64_t st[3] = {s.heads * q * kv, q * kv, kv}; // full
    if (s.bias == AttnSpec::head_broadcast_bias) st[0] = q * kv, st[1] = 0;
    if (s.bias == AttnSpec::one_row_bias) st[0] = st[1] = st[2] = 0;
    for (int i = 0; i < 3; ++i) d.bias_strides[i] = st[i];
    const std::int64_t e[3] = {s.batch, s.heads, q};
    d.bias = ar.in(tensor_extent(e, st, kv));
  }
  if (s.alibi) d.alibi_slopes = ar.in(s.heads, 0.25f);
  if (s.sinks) d.sinks = ar.in(s.heads, 2.0f);
  const std::int64_t rows = packed_q(s) ? s.heads * total_q : s.batch * s.heads * s.q_len;
  c.out_n = lo.extent, c.out_written = rows * dv;
  c.out = ar.out(c.out_n);
  c.lse_n = s.lse ? rows : 0;
  if (s.lse) d.lse = ar.out(c.lse_n);
  c.probs_n = s.probs ? rows * s.kv_len : 0;
  if (s.probs) d.probs = ar.out(c.probs_n);
  return c;
}

void attention_case(const AttnSpec &s) {
  run_case(describe(s), [&](Arena &ar) {
    const PageTable table = make_page_table(s);
    const AttnCall c = build_call(ar, s, table);
    ar.expect_ok(ak_attention(&c.d, c.q, static_cast<const float *>(c.k),
                              static_cast<const float *>(c.v), c.out),
                 "ak_attention");
    ar.keep("out", c.out, c.out_n, c.out_written);
    // A row with no visible key has lse -inf.
    if (c.d.lse) ar.keep("lse", c.d.lse, c.lse_n, c.lse_n, /*finite=*/false);
    if (c.d.probs) ar.keep("probs", c.d.probs, c.probs_n, c.probs_n);
  });
}

} // namespace guard
