// ak_convert (every type pair, in place where allowed), ak_kv_cache_store
// (paged and contiguous pools, pool and source strides, skipped tokens,
// every slot of a pool), ak_rope (both styles, partial rotary_dim, strided
// views), ak_embedding (unknown ids, the table's first and last rows) and
// ak_position_encoding with guarded buffers.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "guard_harness.hpp"

namespace guard {
namespace {

const ak_dtype kTypes[] = {AK_F32, AK_F16, AK_BF16};

std::string n_str(std::int64_t v) { return std::to_string(v); }

void convert_cases() {
  // Around every vector width and its tails, and enough for a team of two.
  const std::int64_t sizes[] = {0,  1,  3,  7,  8,   9,   15,   16,    17,
                                31, 33, 63, 65, 127, 129, 1000, 140001};
  for (ak_dtype dst : kTypes)
    for (ak_dtype src : kTypes)
      for (std::int64_t n : sizes) {
        run_case("ak_convert " + n_str(src) + "->" + n_str(dst) + " n " + n_str(n), [&](Arena &ar) {
          const void *s = ar.in_typed(src, n, 4.0f);
          void *d = ar.out_typed(dst, n);
          ar.expect_ok(ak_convert(dst, d, src, s, n), "ak_convert");
          ar.keep("dst", d, dst, n, n);
        });
        if (esize(dst) != esize(src) || n > 1000) continue;
        run_case("ak_convert in place " + n_str(src) + "->" + n_str(dst) + " n " + n_str(n),
                 [&](Arena &ar) {
                   void *p = ar.in_typed(src, n, 4.0f);
                   ar.expect_ok(ak_convert(dst, p, src, p, n), "ak_convert");
                   ar.keep("dst", p, dst, n, -1);
                 });
      }
}

struct Store {
  std::int64_t tokens, heads, dim, page_size, pages;
  bool pool_gaps, src_gaps, slot_major;
};

void store_case(const Store &c, ak_dtype t) {
  const std::string name = "ak_kv_cache_store tokens " + n_str(c.tokens) + " heads " +
                           n_str(c.heads) + " dim " + n_str(c.dim) + " pages " + n_str(c.pages) +
                           "x" + n_str(c.page_size) + " type " + n_str(t) +
                           (c.pool_gaps ? (c.slot_major ? " slot-major gaps" : " pool gaps") : "") +
                           (c.src_gaps ? " src gaps" : "");
  run_case(name, [&](Arena &ar) {
    // Source: [tokens, heads, dim], with gaps between heads and tokens.
    const std::int64_t hs = c.dim + (c.src_gaps ? 3 : 0);
    const std::int64_t ts = c.heads * hs + (c.src_gaps ? 5 : 0);
    const std::int64_t src_strides[2] = {ts, hs};
    const std::int64_t src_ext =
        c.tokens == 0 ? 0 : (c.tokens - 1) * ts + (c.heads - 1) * hs + c.dim;
    const float *src = ar.in(src_ext);
    // Pool: [pages, heads, page_size, dim], or slot-major [pages, page_size, heads, dim].
    std::int64_t ps[3] = {0, 0, 0};
    std::int64_t row = c.dim;
    if (c.pool_gaps) {
      row = c.dim + 2;
      if (c.slot_major)
        ps[1] = row, ps[2] = c.heads * row + 1, ps[0] = c.page_size * ps[2] + 3;
      else
        ps[2] = row, ps[1] = c.page_size * row + 1, ps[0] = c.heads * ps[1] + 3;
    } else {
      ps[2] = c.dim, ps[1] = c.page_size * c.dim, ps[0] = c.heads * ps[1];
    }
    const std::int64_t e[3] = {c.pages, c.heads, c.page_size};
    const std::int64_t pool_ext = tensor_extent(e, ps, c.dim);
    void *pool = ar.out_typed(t, pool_ext);
    // Every slot of the pool in a shuffled order, some tokens skipped.
    std::vector<std::int64_t> slots(static_cast<std::size_t>(c.pages * c.page_size));
    std::iota(slots.begin(), slots.end(), 0);
    std::mt19937 rng(static_cast<std::uint32_t>(c.tokens * 131 + c.dim));
    std::shuffle(slots.begin(), slots.end(), rng);
    slots.resize(static_cast<std::size_t>(c.tokens));
    std::int64_t stored = 0;
    for (std::size_t i = 0; i < slots.size(); ++i) {
      if (i % 5 == 3) slots[i] = -1;
      stored += slots[i] >= 0;
    }
    const std::int64_t *sl = ar.copy(slots);
    ar.expect_ok(ak_kv_cache_store(c.tokens, c.heads, c.dim, src,
                                   c.src_gaps ? src_strides : nullptr, sl, t, pool, c.pages,
                                   c.page_size, c.pool_gaps ? ps : nullptr),
                 "ak_kv_cache_store");
    ar.keep("pool", pool, t, pool_ext, stored * c.heads * c.dim);
  });
}

void store_cases() {
  const Store cases[] = {
      {1, 1, 1, 1, 1, false, false, false},       {5, 2, 3, 7, 1, false, false, false},
      {13, 3, 17, 4, 4, true, false, false},      {16, 2, 16, 16, 1, false, true, false},
      {29, 2, 64, 7, 5, true, true, true},        {33, 4, 33, 16, 3, false, true, false},
      {20, 1, 129, 20, 1, true, false, false}, // contiguous cache: one page of max_len
      {300, 8, 128, 16, 20, false, false, false}, {0, 2, 8, 4, 2, false, false, false}};
  for (const Store &c : cases)
    for (ak_dtype t : kTypes) store_case(c, t);
}

struct Rope {
  std::int64_t batch, seq, heads, dim, rotary;
  bool positions, inv_freq, strided;
};

void rope_case(const Rope &c, ak_rope_style style) {
  const std::string name = "ak_rope " + n_str(c.batch) + "x" + n_str(c.seq) + "x" + n_str(c.heads) +
                           "x" + n_str(c.dim) + " rotary " + n_str(c.rotary) + " style " +
                           n_str(style) + (c.positions ? " positions" : "") +
                           (c.inv_freq ? " inv_freq" : "") + (c.strided ? " strided" : "");
  run_case(name, [&](Arena &ar) {
    // Strided: the q part of a fused [batch, seq, 3 * heads, dim + 1]
    // projection, cut where the last head of the last token ends.
    std::int64_t s[3] = {c.seq * c.heads * c.dim, c.heads * c.dim, c.dim};
    if (c.strided) s[2] = c.dim + 1, s[1] = 3 * c.heads * s[2], s[0] = c.seq * s[1];
    const std::int64_t e[3] = {c.batch, c.seq, c.heads};
    const std::int64_t n = tensor_extent(e, s, c.dim);
    float *x = ar.in(n, 2.0f);
    const std::vector<float> x0(x, x + n);
    std::vector<std::int32_t> pos(static_cast<std::size_t>(c.batch * c.seq));
    for (std::size_t i = 0; i < pos.size(); ++i) pos[i] = static_cast<std::int32_t>(i * 7 % 1000);
    const std::int32_t *p = c.positions ? ar.copy(pos) : nullptr;
    const std::int64_t rot = c.rotary ? c.rotary : c.dim;
    const float *f = c.inv_freq ? ar.in(rot / 2) : nullptr;
    ar.expect_ok(ak_rope(c.batch, c.seq, c.heads, c.dim, c.rotary, style, p, 10000.0f, f, x,
                         c.strided ? s : nullptr),
                 "ak_rope");
    ar.keep("x", x, n, -1);
    // Entries past rotary_dim and the gaps between rows keep their bits.
    std::vector<char> rotated(static_cast<std::size_t>(n), 0);
    for (std::int64_t b = 0; b < c.batch; ++b)
      for (std::int64_t t = 0; t < c.seq; ++t)
        for (std::int64_t h = 0; h < c.heads; ++h)
          for (std::int64_t d = 0; d < rot; ++d) rotated[b * s[0] + t * s[1] + h * s[2] + d] = 1;
    for (std::int64_t i = 0; i < n; ++i)
      if (!rotated[i] && std::memcmp(&x[i], &x0[i], sizeof(float)) != 0) {
        ar.check(false, "x[" + n_str(i) + "] (not rotated) was written");
        return;
      }
  });
}

void rope_cases() {
  const Rope cases[] = {
      {1, 1, 1, 2, 0, false, false, false},    {2, 3, 2, 6, 4, true, false, false},
      {1, 5, 3, 17, 16, false, true, true},    {2, 7, 4, 64, 0, true, true, false},
      {1, 9, 2, 130, 128, false, false, true}, {3, 33, 8, 128, 64, true, false, false},
      {2, 40, 4, 128, 0, false, false, true},  {1, 2, 1, 33, 2, true, true, true}};
  for (const Rope &c : cases)
    for (ak_rope_style st : {AK_ROPE_NEOX, AK_ROPE_INTERLEAVED}) rope_case(c, st);
}

void embedding_cases() {
  const std::int64_t dims[] = {1, 3, 7, 8, 9, 15, 16, 17, 33, 64, 65, 129};
  const std::int64_t vocabs[] = {1, 5, 100};
  for (std::int64_t dim : dims)
    for (std::int64_t vocab : vocabs)
      for (std::int64_t pad : {0, 3}) {
        const std::int64_t tokens = dim == 129 && vocab == 100 ? 300 : 11;
        run_case("ak_embedding dim " + n_str(dim) + " vocab " + n_str(vocab) + " pad " +
                     n_str(pad) + " tokens " + n_str(tokens),
                 [&](Arena &ar) {
                   const std::int64_t ldt = dim + pad, ldo = dim + 2 * pad;
                   const std::int64_t te = matrix_extent(vocab, dim, ldt);
                   const std::int64_t oe = matrix_extent(tokens, dim, ldo);
                   const float *table = ar.in(te);
                   // The first and the last row of the table, and unknown tokens.
                   std::vector<std::int32_t> ids(static_cast<std::size_t>(tokens));
                   for (std::int64_t t = 0; t < tokens; ++t)
                     ids[t] = static_cast<std::int32_t>(t % 4 == 2 ? -1 : (t * 37) % vocab);
                   ids[0] = static_cast<std::int32_t>(vocab - 1);
                   float *out = ar.out(oe);
                   const std::int32_t *id = ar.copy(ids);
                   ar.expect_ok(ak_embedding(tokens, id, vocab, dim, table, ldt, out, ldo),
                                "ak_embedding");
                   ar.keep("out", out, oe, tokens * dim);
                   for (std::int64_t t = 0; t < tokens; ++t)
                     for (std::int64_t d = 0; d < dim; ++d) {
                       const float want = ids[t] < 0 ? 0.0f : table[ids[t] * ldt + d];
                       if (std::memcmp(&out[t * ldo + d], &want, sizeof want) != 0) {
                         ar.check(false, "out[" + n_str(t) + "][" + n_str(d) + "] is not the row");
                         return;
                       }
                     }
                 });
      }
}

void position_encoding_cases() {
  const std::int64_t shapes[][2] = {{1, 1},  {3, 2},  {5, 3},    {7, 15},
                                    {2, 16}, {9, 17}, {100, 65}, {0, 4}};
  for (const auto &s : shapes)
    run_case("ak_position_encoding " + n_str(s[0]) + "x" + n_str(s[1]), [&](Arena &ar) {
      float *out = ar.out(s[0] * s[1]);
      ar.expect_ok(ak_position_encoding(s[0], s[1], 10000.0f, out), "ak_position_encoding");
      ar.keep("out", out, s[0] * s[1], s[0] * s[1]);
    });
}

} // namespace

void storage_cases() {
  convert_cases();
  store_cases();
  rope_cases();
  embedding_cases();
  position_encoding_cases();
}

} // namespace guard
