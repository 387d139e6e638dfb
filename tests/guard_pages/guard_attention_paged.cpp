// ak_attention over paged K/V: page sizes 1, 5, 7, 16, 33, 64 and 4096;
// shuffled page ids; -1 and num_pages in every entry no visible key needs
// (past kv_lens, left of a window, the columns past the pages of kv_len,
// the entries of empty sequences); pools contiguous, with gaps, slot-major;
// fp32, f16, bf16 and mixed; decode (split over up to 3000 keys), prefill,
// GQA, chunked prefill (cu_seqlens_q with kv_lens), no keys, no entries;
// NaN in the slots no query sees, V near FLT_MAX.
#include <vector>

#include "guard_attention_case.hpp"

namespace guard {
namespace {

AttnSpec paged(const char *label, std::int64_t page_size, std::int64_t batch, std::int64_t heads,
               std::int64_t kv_heads, std::int64_t q_len, std::int64_t kv_len, std::int64_t dk,
               std::int64_t dv = 0) {
  AttnSpec s = spec(label, batch, heads, kv_heads, q_len, kv_len, dk, dv);
  s.page_size = page_size;
  return s;
}

std::vector<AttnSpec> paged_specs() {
  std::vector<AttnSpec> v;
  {
    AttnSpec s = paged("one key per page, kv_lens", 1, 2, 2, 1, 1, 37, 8);
    s.kv_lens = {37, 20}, s.lse = true;
    v.push_back(s);
  }
  {
    AttnSpec s = paged("split decode, window", 16, 2, 4, 1, 1, 3000, 64);
    s.k_type = s.v_type = AK_F16, s.kv_lens = {3000, 1500};
    s.mask = AK_MASK_CAUSAL_BOTTOM_RIGHT, s.window_left = 700, s.lse = true;
    v.push_back(s);
  }
  {
    AttnSpec s = paged("split decode fp32, slot-major", 16, 1, 4, 2, 1, 3000, 32);
    s.pool = AttnSpec::slot_major_gaps, s.extra_cols = 2;
    v.push_back(s);
  }
  {
    AttnSpec s = paged("prefill, GQA, odd pages", 7, 1, 8, 2, 17, 100, 17);
    s.k_type = s.v_type = AK_BF16, s.mask = AK_MASK_CAUSAL_BOTTOM_RIGHT;
    s.lse = true, s.probs = true, s.extra_cols = 1;
    v.push_back(s);
  }
  {
    AttnSpec s = paged("mixed types, head-major gaps", 7, 2, 2, 1, 3, 50, 9, 5);
    s.k_type = AK_F16, s.v_type = AK_F32, s.pool = AttnSpec::head_major_gaps;
    s.kv_lens = {50, 8}, s.mask = AK_MASK_CAUSAL_TOP_LEFT;
    v.push_back(s);
  }
  for (const ak_dtype t : {AK_F32, AK_F16, AK_BF16}) {
    // Typed path (direct items of a few rows): MHA decode, d_v a vector multiple.
    AttnSpec s = paged("typed decode, slot-major", 16, 1, 4, 4, 1, 300, 32, 32);
    s.k_type = s.v_type = t, s.pool = AttnSpec::slot_major_gaps;
    v.push_back(s);
    // Several queries per step (speculative decoding), pages of 7 cut the tiles.
    AttnSpec g = paged("GQA direct, pages cut tiles", 7, 2, 8, 2, 3, 130, 16, 16);
    g.k_type = t, g.v_type = t == AK_F32 ? AK_BF16 : AK_F32;
    g.mask = AK_MASK_CAUSAL_BOTTOM_RIGHT, g.kv_lens = {130, 61}, g.window_left = 40;
    v.push_back(g);
  }
  {
    AttnSpec s = paged("chunked prefill", 16, 2, 4, 2, 9, 80, 32);
    s.k_type = s.v_type = AK_F16, s.cu_q = {0, 9, 13}, s.kv_lens = {80, 35};
    s.mask = AK_MASK_CAUSAL_BOTTOM_RIGHT, s.lse = true, s.strided = true;
    v.push_back(s);
  }
  {
    AttnSpec s = paged("packed path fp32, team of two", 33, 1, 4, 4, 65, 300, 32);
    s.mask = AK_MASK_CAUSAL_BOTTOM_RIGHT, s.bias = AttnSpec::one_row_bias;
    v.push_back(s);
  }
  {
    AttnSpec s = paged("one page per sequence, sinks, ALiBi", 64, 3, 2, 2, 2, 64, 8);
    s.k_type = AK_BF16, s.v_type = AK_F16, s.sinks = true, s.alibi = true, s.lse = true;
    s.kv_lens = {64, 0, 1}, s.mask = AK_MASK_CAUSAL_BOTTOM_RIGHT;
    v.push_back(s);
  }
  {
    AttnSpec s = paged("window right, softcap", 5, 1, 2, 1, 12, 40, 12);
    s.window_left = 3, s.window_right = 2, s.softcap = 10.0f, s.k_type = AK_F16;
    v.push_back(s);
  }
  {
    // An empty sequence and an entry with no keys: none of their pages exist.
    AttnSpec s = paged("split decode, empty sequence, probs", 16, 4, 4, 2, 1, 3000, 32);
    s.cu_q = {0, 1, 1, 2, 3}, s.kv_lens = {3000, 2000, 1500, 0}, s.lse = true;
    s.k_type = AK_F16, s.sinks = true, s.alibi = true, s.mask = AK_MASK_CAUSAL_BOTTOM_RIGHT;
    v.push_back(s);
    AttnSpec p = paged("split decode, probs, kv_lens 0", 16, 2, 2, 2, 1, 2000, 16);
    p.kv_lens = {0, 1999}, p.probs = true, p.v_type = AK_BF16;
    v.push_back(p);
  }
  {
    AttnSpec s = paged("no keys", 16, 2, 2, 1, 2, 0, 8);
    s.lse = true, s.k_type = AK_F16;
    v.push_back(s);
    AttnSpec e = paged("no batch entries", 7, 0, 2, 2, 1, 30, 8);
    v.push_back(e);
  }
  {
    AttnSpec s = paged("one large partial page per sequence", 4096, 2, 2, 1, 1, 3000, 16);
    s.k_type = AK_BF16, s.kv_lens = {3000, 17};
    v.push_back(s);
  }
  {
    AttnSpec s = paged("NaN past kv_lens and left of the window", 7, 2, 4, 2, 5, 120, 16);
    s.k_type = AK_BF16, s.mask = AK_MASK_CAUSAL_BOTTOM_RIGHT, s.window_left = 30;
    s.kv_lens = {120, 50}, s.poison_hidden = true;
    v.push_back(s);
  }
  {
    AttnSpec s = paged("huge V, split decode fp32", 16, 1, 4, 1, 1, 3000, 32);
    s.huge_v = true, s.lse = true;
    v.push_back(s);
  }
  {
    AttnSpec s = paged("huge V, chunked prefill, bias", 16, 2, 4, 2, 9, 80, 32);
    s.v_type = AK_BF16, s.cu_q = {0, 9, 13}, s.kv_lens = {80, 35}, s.bias = AttnSpec::full_bias;
    s.mask = AK_MASK_CAUSAL_BOTTOM_RIGHT, s.huge_v = true, s.pool = AttnSpec::head_major_gaps;
    v.push_back(s);
  }
  return v;
}

} // namespace

void paged_cases() {
  for (const AttnSpec &s : paged_specs()) attention_case(s);
}

} // namespace guard
