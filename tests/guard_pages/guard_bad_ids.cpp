// Ids that index another buffer, out of range, are refused before anything
// is written: the header promises AK_ERR_BAD_ARGUMENT, a message naming the
// argument, and outputs as they were (canaries). A block table with a bad
// page id (< 0 or >= num_pages) in an entry that a visible key needs
// (ak_attention), a token id >= vocab_size (ak_embedding), a slot < -1 or
// >= num_pages * page_size (ak_kv_cache_store). Tables, pools and vocabularies
// are exactly as long as the header says, so a library that used a bad id
// would access a guard and fault.
#include <climits>
#include <cstring>
#include <string>
#include <vector>

#include "guard_attention_case.hpp"

namespace guard {
namespace {

AttnSpec base(const char *label, std::int64_t page_size, std::int64_t batch, std::int64_t q_len,
              std::int64_t kv_len) {
  AttnSpec s;
  s.label = label;
  s.page_size = page_size, s.batch = batch, s.heads = 4, s.kv_heads = 2;
  s.q_len = q_len, s.kv_len = kv_len, s.dk = 16, s.dv = 16;
  s.lse = true;
  return s;
}

std::vector<AttnSpec> specs() {
  std::vector<AttnSpec> v;
  v.push_back(base("decode", 16, 2, 1, 70));
  {
    AttnSpec s = base("split decode, kv_lens, window", 16, 2, 1, 3000);
    s.kv_lens = {3000, 1234}, s.mask = AK_MASK_CAUSAL_BOTTOM_RIGHT, s.window_left = 500;
    s.k_type = AK_F16, s.v_type = AK_BF16;
    v.push_back(s);
  }
  {
    AttnSpec s = base("prefill, probs", 7, 2, 9, 40);
    s.mask = AK_MASK_CAUSAL_TOP_LEFT, s.probs = true, s.kv_lens = {40, 13};
    v.push_back(s);
  }
  {
    AttnSpec s = base("chunked prefill", 5, 3, 4, 23);
    s.cu_q = {0, 4, 5, 8}, s.kv_lens = {23, 6, 17}, s.mask = AK_MASK_CAUSAL_BOTTOM_RIGHT;
    s.k_type = AK_BF16, s.pool = AttnSpec::slot_major_gaps, s.extra_cols = 1;
    v.push_back(s);
  }
  {
    AttnSpec s = base("one key per page", 1, 1, 2, 9);
    s.k_type = s.v_type = AK_F16;
    v.push_back(s);
  }
  return v;
}

// Runs `s` with table entry `entry` (one a visible key needs) set to `id`.
void refused_case(const AttnSpec &s, std::int64_t entry, std::int32_t id) {
  const std::string name =
      describe(s) + " block_table[" + std::to_string(entry) + "] = " + std::to_string(id);
  run_case(name, [&](Arena &ar) {
    PageTable t = make_page_table(s);
    t.ids[static_cast<std::size_t>(entry)] = id;
    const AttnCall c = build_call(ar, s, t);
    const ak_status st = ak_attention(&c.d, c.q, static_cast<const float *>(c.k),
                                      static_cast<const float *>(c.v), c.out);
    ar.check(st == AK_ERR_BAD_ARGUMENT,
             std::string("status ") + ak_status_string(st) + ", want AK_ERR_BAD_ARGUMENT");
    ar.check(std::strstr(ak_last_error(), "block_table") != nullptr,
             std::string("ak_last_error() does not name the block table: \"") + ak_last_error() +
                 "\"");
    // Nothing written.
    ar.keep("out", c.out, c.out_n, 0);
    if (c.d.lse) ar.keep("lse", c.d.lse, c.lse_n, 0);
    if (c.d.probs) ar.keep("probs", c.d.probs, c.probs_n, 0);
  });
}

void embedding_refused(std::int32_t bad, std::int64_t at) {
  run_case("ak_embedding ids[" + std::to_string(at) + "] = " + std::to_string(bad), [&](Arena &ar) {
    const std::int64_t vocab = 7, dim = 9, tokens = 5;
    const float *table = ar.in(vocab * dim);
    std::vector<std::int32_t> ids = {0, 6, -1, 3, 2};
    ids[static_cast<std::size_t>(at)] = bad;
    float *out = ar.out(tokens * dim);
    const ak_status st = ak_embedding(tokens, ar.copy(ids), vocab, dim, table, dim, out, dim);
    ar.check(st == AK_ERR_BAD_ARGUMENT,
             std::string("status ") + ak_status_string(st) + ", want AK_ERR_BAD_ARGUMENT");
    ar.check(std::strstr(ak_last_error(), "ids") != nullptr,
             std::string("ak_last_error() does not name ids: \"") + ak_last_error() + "\"");
    ar.keep("out", out, tokens * dim, 0);
  });
}

void store_refused(std::int64_t bad, std::int64_t at, ak_dtype t) {
  run_case(
      "ak_kv_cache_store slots[" + std::to_string(at) + "] = " + std::to_string(bad) + " type " +
          std::to_string(t),
      [&](Arena &ar) {
        const std::int64_t tokens = 4, heads = 2, dim = 5, pages = 3, page_size = 7;
        const float *src = ar.in(tokens * heads * dim);
        std::vector<std::int64_t> slots = {20, 0, -1, 13};
        slots[static_cast<std::size_t>(at)] = bad;
        const std::int64_t n = pages * heads * page_size * dim;
        void *pool = ar.out_typed(t, n);
        const ak_status st = ak_kv_cache_store(tokens, heads, dim, src, nullptr, ar.copy(slots), t,
                                               pool, pages, page_size, nullptr);
        ar.check(st == AK_ERR_BAD_ARGUMENT,
                 std::string("status ") + ak_status_string(st) + ", want AK_ERR_BAD_ARGUMENT");
        ar.check(std::strstr(ak_last_error(), "slots") != nullptr,
                 std::string("ak_last_error() does not name slots: \"") + ak_last_error() + "\"");
        ar.keep("pool", pool, t, n, 0);
      });
}

} // namespace

void bad_id_cases() {
  for (std::int32_t bad : {7, 8, INT_MAX})
    for (std::int64_t at : {0, 4}) embedding_refused(bad, at);
  for (ak_dtype t : {AK_F32, AK_F16, AK_BF16})
    for (std::int64_t bad : {std::int64_t{-2}, std::int64_t{21}, std::int64_t{22}, std::int64_t{0}})
      for (std::int64_t at : {0, 3})
        store_refused(bad, at, t); // (0: a slot that slots[1] names too)

  for (const AttnSpec &s : specs()) {
    const PageTable t = make_page_table(s);
    if (t.needed.empty()) {
      fail(describe(s) + ": the case needs no page");
      continue;
    }
    // The first and the last entry a visible key needs (the ends of the
    // visible keys of the first and the last batch entry), and one between.
    const std::int64_t picks[] = {t.needed.front(), t.needed[t.needed.size() / 2], t.needed.back()};
    const std::int32_t np = static_cast<std::int32_t>(t.num_pages);
    const std::int32_t bad[] = {-1, np, INT_MIN, INT_MAX, -2, np + 1};
    for (std::int64_t e : picks)
      for (std::int32_t id : bad) refused_case(s, e, id);
    // The same call with the good table runs (the refusals left no state).
    attention_case(s);
  }
}

} // namespace guard
