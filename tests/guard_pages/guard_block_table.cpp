// A block table with a bad page id (< 0 or >= num_pages) in an entry that a
// visible key needs is refused before anything is written: the header
// promises AK_ERR_BAD_ARGUMENT and a message, and out, lse and probs keep
// their canaries. The tables are exactly batch x block_table_stride long and
// the pools exactly num_pages long, so a library that used the bad id would
// read inside a guard and fault.
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

} // namespace

void block_table_cases() {
  for (const AttnSpec &s : specs()) {
    const PageTable t = make_page_table(s);
    if (t.needed.empty()) {
      fail(describe(s) + ": the case needs no page");
      continue;
    }
    // The first and last page a visible key needs, and one in the middle:
    // for kv_lens and windows these are the pages at the visible hull's ends.
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
