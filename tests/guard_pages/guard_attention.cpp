// ak_attention over contiguous and strided K/V (fp32, f16, bf16, mixed),
// decode and prefill, split-KV decode, the direct and packed paths, GQA,
// masks, windows, kv_lens, bias, ALiBi, sinks, softcap, lse and probs,
// packed variable-length batches, no keys, no entries, no queries, NaN in
// the K/V rows no query sees and V near FLT_MAX (the exact and repair
// paths); and ak_mha_self_attention.
#include <string>
#include <vector>

#include "guard_attention_case.hpp"

namespace guard {
namespace {

std::vector<AttnSpec> contiguous_specs() {
  std::vector<AttnSpec> v;
  v.push_back(spec("smallest", 1, 1, 1, 1, 1, 1));
  {
    AttnSpec s = spec("causal top-left", 1, 2, 1, 3, 5, 3);
    s.mask = AK_MASK_CAUSAL_TOP_LEFT;
    v.push_back(s);
  }
  {
    AttnSpec s = spec("GQA prefill, lse, probs", 1, 8, 2, 17, 33, 17, 15);
    s.mask = AK_MASK_CAUSAL_BOTTOM_RIGHT, s.lse = true, s.probs = true;
    v.push_back(s);
  }
  {
    AttnSpec s = spec("packed path, full bias", 1, 4, 4, 65, 129, 33);
    s.bias = AttnSpec::full_bias;
    v.push_back(s);
  }
  {
    AttnSpec s = spec("split decode, kv_lens, lse, probs", 2, 4, 1, 1, 3000, 64);
    s.kv_lens = {3000, 1777}, s.mask = AK_MASK_CAUSAL_BOTTOM_RIGHT, s.lse = true, s.probs = true;
    v.push_back(s);
  }
  {
    AttnSpec s = spec("split, 4 queries, sinks, softcap", 1, 2, 2, 4, 2049, 16, 32);
    s.sinks = true, s.softcap = 5.0f, s.lse = true;
    v.push_back(s);
  }
  {
    AttnSpec s = spec("windows, ALiBi", 1, 3, 3, 33, 33, 9);
    s.window_left = 5, s.window_right = 3, s.alibi = true, s.lse = true;
    v.push_back(s);
  }
  {
    AttnSpec s = spec("strided tensors", 2, 6, 3, 7, 19, 9, 5);
    s.strided = true, s.mask = AK_MASK_CAUSAL_TOP_LEFT, s.lse = true;
    v.push_back(s);
  }
  {
    AttnSpec s = spec("one bias row, probs", 1, 2, 2, 5, 40, 8);
    s.bias = AttnSpec::one_row_bias, s.mask = AK_MASK_CAUSAL_BOTTOM_RIGHT, s.probs = true;
    v.push_back(s);
  }
  {
    AttnSpec s = spec("head-broadcast bias, kv_lens with 0", 3, 2, 1, 3, 20, 7);
    s.bias = AttnSpec::head_broadcast_bias, s.kv_lens = {20, 0, 11}, s.lse = true;
    v.push_back(s);
  }
  for (std::int64_t dv : {16, 32, 64}) { // the direct path (d_v a vector multiple)
    AttnSpec s = spec("direct path, GQA", 1, 8, 2, 2, 300, 31, dv);
    s.mask = AK_MASK_CAUSAL_BOTTOM_RIGHT, s.lse = true;
    v.push_back(s);
    AttnSpec one = spec("direct path, in order", 2, 4, 4, 1, 1100, 64, dv);
    one.kv_lens = {1100, 513};
    v.push_back(one);
  }
  const ak_dtype types[][2] = {
      {AK_F16, AK_F16}, {AK_BF16, AK_BF16}, {AK_F16, AK_BF16}, {AK_BF16, AK_F32}, {AK_F32, AK_F16}};
  for (const auto &t : types) {
    AttnSpec dec = spec("typed decode", 1, 4, 4, 1, 300, 32);
    dec.k_type = t[0], dec.v_type = t[1];
    v.push_back(dec);
    AttnSpec pre = spec("typed prefill, strided", 1, 4, 2, 17, 40, 17, 9);
    pre.k_type = t[0], pre.v_type = t[1], pre.strided = true, pre.mask = AK_MASK_CAUSAL_TOP_LEFT;
    v.push_back(pre);
  }
  {
    AttnSpec s = spec("typed split decode", 2, 4, 2, 1, 3000, 64);
    s.k_type = AK_BF16, s.v_type = AK_F16, s.kv_lens = {2999, 1500}, s.lse = true;
    v.push_back(s);
  }
  {
    AttnSpec s = spec("varlen q and k", 3, 4, 2, 7, 12, 16);
    s.cu_q = {0, 3, 3, 10}, s.cu_k = {0, 5, 17, 29};
    s.mask = AK_MASK_CAUSAL_BOTTOM_RIGHT, s.lse = true, s.strided = true;
    v.push_back(s);
  }
  {
    AttnSpec s = spec("varlen q, kv_lens, bias", 2, 2, 2, 9, 30, 5);
    s.cu_q = {0, 9, 13}, s.kv_lens = {30, 17}, s.bias = AttnSpec::full_bias, s.lse = true;
    s.mask = AK_MASK_CAUSAL_BOTTOM_RIGHT;
    v.push_back(s);
  }
  {
    AttnSpec s = spec("varlen q, half K/V, window", 2, 4, 1, 17, 64, 32);
    s.cu_q = {0, 1, 18}, s.cu_k = {0, 64, 100}, s.k_type = AK_F16, s.v_type = AK_BF16;
    s.mask = AK_MASK_CAUSAL_BOTTOM_RIGHT, s.window_left = 20;
    v.push_back(s);
  }
  {
    AttnSpec s = spec("split decode, strided, GQA, ALiBi", 2, 6, 2, 2, 1500, 24, 40);
    s.strided = true, s.alibi = true, s.mask = AK_MASK_CAUSAL_BOTTOM_RIGHT,
    s.kv_lens = {1500, 1025};
    v.push_back(s);
  }
  {
    AttnSpec s = spec("wide heads", 1, 2, 1, 9, 40, 129, 257);
    s.mask = AK_MASK_CAUSAL_TOP_LEFT, s.lse = true;
    v.push_back(s);
    AttnSpec t = spec("wide heads, typed decode", 1, 2, 2, 1, 100, 256);
    t.k_type = t.v_type = AK_BF16;
    v.push_back(t);
  }
  { // Empty: no keys (out 0, lse -inf), no batch entries.
    AttnSpec s = spec("no keys", 2, 2, 1, 3, 0, 8);
    s.lse = true, s.probs = true, s.sinks = true;
    v.push_back(s);
    v.push_back(spec("no batch entries", 0, 2, 2, 3, 5, 8));
    v.push_back(spec("no queries", 2, 2, 2, 0, 5, 8));
  }
  // The exact paths: NaN where no query looks, values near FLT_MAX where
  // the fp32 sums overflow.
  {
    AttnSpec s = spec("NaN left of the window, packed path", 1, 4, 2, 17, 300, 32);
    s.mask = AK_MASK_CAUSAL_BOTTOM_RIGHT, s.window_left = 40, s.poison_hidden = true;
    s.lse = true;
    v.push_back(s);
  }
  {
    AttnSpec s = spec("NaN outside the window, split direct", 2, 4, 4, 1, 1100, 64);
    s.mask = AK_MASK_CAUSAL_BOTTOM_RIGHT, s.window_left = 300, s.kv_lens = {1100, 700};
    s.poison_hidden = true;
    v.push_back(s);
  }
  {
    AttnSpec s = spec("NaN past kv_lens, half K/V", 2, 2, 1, 3, 200, 16);
    s.k_type = AK_BF16, s.v_type = AK_F16, s.kv_lens = {200, 77};
    s.mask = AK_MASK_CAUSAL_TOP_LEFT, s.poison_hidden = true;
    v.push_back(s);
  }
  {
    AttnSpec s = spec("huge V, packed path", 1, 4, 4, 65, 129, 32);
    s.huge_v = true, s.lse = true, s.probs = true;
    v.push_back(s);
  }
  {
    AttnSpec s = spec("huge V, split decode, sinks", 2, 8, 2, 1, 3000, 64);
    s.huge_v = true, s.sinks = true;
    v.push_back(s);
  }
  {
    AttnSpec s = spec("huge V, typed decode", 1, 4, 4, 1, 300, 32);
    s.k_type = AK_F16, s.v_type = AK_BF16, s.huge_v = true;
    v.push_back(s);
  }
  {
    AttnSpec s = spec("huge V, varlen, bias, ALiBi", 2, 2, 2, 9, 30, 5);
    s.cu_q = {0, 9, 13}, s.kv_lens = {30, 17}, s.bias = AttnSpec::full_bias, s.alibi = true;
    s.mask = AK_MASK_CAUSAL_BOTTOM_RIGHT, s.huge_v = true, s.strided = true;
    v.push_back(s);
  }
  return v;
}

void mha_cases() {
  struct Mha {
    std::int64_t n, d_model, heads, dk, dv;
    ak_mask mask;
  };
  const Mha cases[] = {{1, 1, 1, 1, 1, AK_MASK_NONE},
                       {3, 5, 2, 3, 7, AK_MASK_CAUSAL_TOP_LEFT},
                       {17, 16, 3, 8, 17, AK_MASK_CAUSAL_BOTTOM_RIGHT},
                       {33, 31, 4, 16, 16, AK_MASK_CAUSAL_TOP_LEFT},
                       {65, 64, 2, 65, 33, AK_MASK_NONE}};
  for (const Mha &c : cases)
    run_case("ak_mha_self_attention n " + std::to_string(c.n) + " d_model " +
                 std::to_string(c.d_model) + " heads " + std::to_string(c.heads) + " d " +
                 std::to_string(c.dk) + "/" + std::to_string(c.dv),
             [&](Arena &ar) {
               const float *x = ar.in(c.n * c.d_model);
               const float *wq = ar.in(c.heads * c.d_model * c.dk, 0.5f);
               const float *wk = ar.in(c.heads * c.d_model * c.dk, 0.5f);
               const float *wv = ar.in(c.heads * c.d_model * c.dv);
               const std::int64_t n_out = c.heads * c.n * c.dv;
               float *out = ar.out(n_out);
               ar.expect_ok(ak_mha_self_attention(c.n, c.d_model, c.heads, c.dk, c.dv, x, wq, wk,
                                                  wv, c.mask, out),
                            "ak_mha_self_attention");
               ar.keep("out", out, n_out, n_out);
             });
}

} // namespace

void attention_cases() {
  for (const AttnSpec &s : contiguous_specs()) attention_case(s);
  mha_cases();
}

} // namespace guard
