// ak_attention and ak_mha_self_attention: validation of every descriptor
// field, resolution of the defaults, then the kernel table.
#include <cmath>
#include <cstring>

#include "../src/dispatch.hpp"
#include "../src/scratch.hpp"
#include "../src/threading.hpp"
#include "attention_tensors.hpp"
#include "attnkern.h"
#include "errors.hpp"
#include "validate.hpp"

namespace attnkern::capi {
namespace {

ak_status attention_api(const ak_attention_desc *desc, const float *q, const void *k, const void *v,
                        float *out) {
  ArgCheck ck("ak_attention");
  if (!desc) return ck.fail(AK_ERR_NULL_POINTER, "the descriptor d is NULL").result();
  ak_attention_desc full;
  if (!read_descriptor(ck, desc, &full)) return ck.result();
  const ak_attention_desc *const d = &full;
  ck.size("batch", d->batch).size("num_heads", d->num_heads).size("num_kv_heads", d->num_kv_heads);
  ck.size("q_len", d->q_len).size("kv_len", d->kv_len);
  ck.size("head_dim", d->head_dim).size("head_dim_v", d->head_dim_v);
  ck.sum("q_len + kv_len", d->q_len, d->kv_len); // (the kernels' diagonal arithmetic)
  if (!ck.ok()) return ck.result();
  if (d->num_heads > 0 && (d->num_kv_heads == 0 || d->num_heads % d->num_kv_heads != 0))
    ck.fail(AK_ERR_BAD_SHAPE, "num_heads = %lld is not a multiple of num_kv_heads = %lld",
            static_cast<long long>(d->num_heads), static_cast<long long>(d->num_kv_heads));
  const std::int64_t rows =
      ck.product("batch * num_heads * q_len",
                 ck.product("batch * num_heads", d->batch, d->num_heads), d->q_len);
  if (rows > 0 && d->head_dim == 0)
    ck.fail(AK_ERR_BAD_SHAPE, "head_dim = 0: queries need at least one dimension");
  if (!(std::isfinite(d->scale) && d->scale >= 0.0f))
    ck.fail(AK_ERR_BAD_ARGUMENT, "scale = %g must be finite and >= 0 (0 = 1/sqrt(head_dim))",
            static_cast<double>(d->scale));
  if (d->mask < AK_MASK_NONE || d->mask > AK_MASK_CAUSAL_BOTTOM_RIGHT)
    ck.fail(AK_ERR_BAD_ARGUMENT, "mask = %d is not an ak_mask value (0, 1 or 2)", d->mask);
  if (d->window_left < -1 || d->window_right < -1)
    ck.fail(AK_ERR_BAD_ARGUMENT,
            "window_left = %lld, window_right = %lld: a window is >= 0, or -1 for none",
            static_cast<long long>(d->window_left), static_cast<long long>(d->window_right));
  if (!ck.ok()) return ck.result();

  const std::int64_t dv = d->head_dim_v ? d->head_dim_v : d->head_dim;
  // Packed variable-length sequences: q and out (cu_seqlens_q), k and v
  // (cu_seqlens_k) are one [1, heads, total rows] tensor each.
  const std::int64_t total_q =
      check_seqlens(ck, "cu_seqlens_q", d->cu_seqlens_q, d->batch, d->q_len, "q_len");
  const std::int64_t total_k =
      check_seqlens(ck, "cu_seqlens_k", d->cu_seqlens_k, d->batch, d->kv_len, "kv_len");
  const bool packed_q = d->cu_seqlens_q != nullptr;
  if (packed_q) {
    if (d->q_strides[0] != 0 || d->o_strides[0] != 0)
      ck.fail(AK_ERR_BAD_STRIDE,
              "q_strides[0] = %lld, o_strides[0] = %lld with cu_seqlens_q: packed sequences "
              "share one tensor (both must be 0)",
              static_cast<long long>(d->q_strides[0]), static_cast<long long>(d->o_strides[0]));
    if (d->probs)
      ck.fail(AK_ERR_BAD_ARGUMENT, "probs must be NULL with cu_seqlens_q (lse is supported)");
  }
  if (!ck.ok()) return ck.result();
  const std::int64_t q_batch = packed_q ? 1 : d->batch, q_rows = packed_q ? total_q : d->q_len;
  TensorSpec tq{"q", "q_strides", {q_batch, d->num_heads, q_rows}, d->head_dim, {}};
  TensorSpec to{"out", "o_strides", {q_batch, d->num_heads, q_rows}, dv, {}};
  std::memcpy(tq.strides, d->q_strides, sizeof tq.strides);
  std::memcpy(to.strides, d->o_strides, sizeof to.strides);
  const std::int64_t ext_q = check_tensor(ck, tq, false);
  KvLayout k_src{}, v_src{};
  check_kv_storage(ck, *d, dv, k, v, total_k, &k_src, &v_src);
  const std::int64_t ext_o = check_tensor(ck, to, true);
  if (packed_q) tq.strides[0] = to.strides[0] = 0;
  // The optional buffers have no size argument to check against; their
  // sizes must still be representable.
  if (d->bias) {
    for (int i = 0; i < 3; ++i) {
      if (d->bias_strides[i] < 0)
        ck.fail(AK_ERR_BAD_STRIDE, "bias_strides[%d] = %lld is negative", i,
                static_cast<long long>(d->bias_strides[i]));
    }
    const std::int64_t extents[3] = {d->batch, d->num_heads, d->q_len};
    std::int64_t span = d->kv_len;
    for (int i = 0; i < 3 && ck.ok(); ++i)
      if (extents[i] > 0)
        span =
            ck.sum("bias span", span, ck.product("bias span", extents[i] - 1, d->bias_strides[i]));
  }
  ck.product("probs (batch * num_heads * q_len * kv_len)", rows, d->kv_len);
  ck.pointer("q", q, ext_q).pointer("out", out, ext_o);
  if (!ck.ok()) return ck.result();
  if (d->kv_lens && d->batch > 0) {
    for (std::int64_t b = 0; b < d->batch; ++b)
      if (d->kv_lens[b] < 0 || d->kv_lens[b] > d->kv_len) {
        ck.fail(AK_ERR_BAD_ARGUMENT, "kv_lens[%lld] = %d is outside [0, kv_len = %lld]",
                static_cast<long long>(b), d->kv_lens[b], static_cast<long long>(d->kv_len));
        break;
      }
  }
  if (!ck.ok()) return ck.result();
  if (rows == 0 || (packed_q && total_q == 0)) return AK_OK;
  check_needed_pages(ck, *d);
  if (!ck.ok()) return ck.result();

  AttentionArgs args{};
  args.batch = d->batch, args.heads = d->num_heads, args.kv_heads = d->num_kv_heads;
  args.q_len = d->q_len, args.kv_len = d->kv_len, args.dk = d->head_dim, args.dv = dv;
  args.scale = d->scale != 0.0f
                   ? d->scale
                   : static_cast<float>(1.0 / std::sqrt(static_cast<double>(d->head_dim)));
  args.mask = d->mask;
  // A window wider than both sequences is no window; clamping keeps the
  // kernel's index arithmetic far from overflow.
  const std::int64_t widest = d->q_len + d->kv_len;
  args.window_left = d->window_left > widest ? widest : d->window_left;
  args.window_right = d->window_right > widest ? widest : d->window_right;
  args.q = q, args.out = out;
  args.k_src = k_src, args.v_src = v_src;
  if (!args.staged()) { // fp32 tensors, read in place
    args.k = static_cast<const float *>(k), args.v = static_cast<const float *>(v);
    std::memcpy(args.k_strides, k_src.strides, sizeof args.k_strides);
    std::memcpy(args.v_strides, v_src.strides, sizeof args.v_strides);
  }
  std::memcpy(args.q_strides, tq.strides, sizeof args.q_strides);
  std::memcpy(args.o_strides, to.strides, sizeof args.o_strides);
  args.bias = d->bias;
  std::memcpy(args.bias_strides, d->bias_strides, sizeof args.bias_strides);
  args.kv_lens = d->kv_lens, args.lse = d->lse, args.probs = d->probs;
  args.softcap = d->softcap;
  args.alibi_slopes = d->alibi_slopes, args.sinks = d->sinks;
  args.cu_q = d->cu_seqlens_q, args.cu_k = d->cu_seqlens_k, args.total_q = total_q;
  if (active_kernels().attention(args, threads_for_call()) != KernelStatus::ok)
    return fail(AK_ERR_OUT_OF_MEMORY, "ak_attention: out of memory for scratch buffers");
  return AK_OK;
}

ak_status mha_api(std::int64_t n_tokens, std::int64_t d_model, std::int64_t num_heads,
                  std::int64_t d_k, std::int64_t d_v, const float *x, const float *w_q,
                  const float *w_k, const float *w_v, int mask, float *out) {
  ArgCheck ck("ak_mha_self_attention");
  ck.size("n_tokens", n_tokens).size("d_model", d_model).size("num_heads", num_heads);
  ck.size("d_k", d_k).size("d_v", d_v);
  if (mask < AK_MASK_NONE || mask > AK_MASK_CAUSAL_BOTTOM_RIGHT)
    ck.fail(AK_ERR_BAD_ARGUMENT, "mask = %d is not an ak_mask value (0, 1 or 2)", mask);
  if (!ck.ok()) return ck.result();
  const std::int64_t rows = ck.product("num_heads * n_tokens", num_heads, n_tokens);
  if (rows > 0 && d_k == 0)
    ck.fail(AK_ERR_BAD_SHAPE, "d_k = 0: queries need at least one dimension");
  const std::int64_t ext_x = ck.product("x (n_tokens * d_model)", n_tokens, d_model);
  const std::int64_t ext_wk =
      ck.product("w_q (num_heads * d_model * d_k)",
                 ck.product("num_heads * d_model", num_heads, d_model), d_k);
  const std::int64_t ext_wv =
      ck.product("w_v (num_heads * d_model * d_v)",
                 ck.product("num_heads * d_model", num_heads, d_model), d_v);
  const std::int64_t ext_qk = ck.product("num_heads * n_tokens * d_k", rows, d_k);
  const std::int64_t ext_out = ck.product("out (num_heads * n_tokens * d_v)", rows, d_v);
  ck.pointer("x", x, ext_x).pointer("w_q", w_q, ext_wk).pointer("w_k", w_k, ext_wk);
  ck.pointer("w_v", w_v, ext_wv).pointer("out", out, ext_out);
  if (!ck.ok()) return ck.result();
  if (ext_out == 0) return AK_OK;

  Scratch buf(static_cast<std::size_t>(2 * ext_qk + ext_out));
  if (!buf.data()) return fail(AK_ERR_OUT_OF_MEMORY, "ak_mha_self_attention: out of memory");
  float *qh = buf.data(), *kh = qh + ext_qk, *vh = kh + ext_qk;
  const KernelTable &kt = active_kernels();
  const int threads = threads_for_call();
  // Per head: [n_tokens, d_model] x [d_model, d] -> [n_tokens, d]; x is shared.
  auto project = [&](const float *w, std::int64_t d, float *dst) {
    const GemmArgs g{
        false, false,         n_tokens, d,   d_model,      1.0f, x, d_model > 0 ? d_model : 1,
        w,     d > 0 ? d : 1, 0.0f,     dst, d > 0 ? d : 1};
    return kt.sgemm(g, GemmBatch{num_heads, 0, d_model * d, n_tokens * d}, threads);
  };
  if (project(w_q, d_k, qh) != KernelStatus::ok || project(w_k, d_k, kh) != KernelStatus::ok ||
      project(w_v, d_v, vh) != KernelStatus::ok)
    return fail(AK_ERR_OUT_OF_MEMORY, "ak_mha_self_attention: out of memory");

  AttentionArgs args{};
  args.batch = 1, args.heads = num_heads, args.kv_heads = num_heads;
  args.q_len = n_tokens, args.kv_len = n_tokens, args.dk = d_k, args.dv = d_v;
  args.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d_k)));
  args.mask = mask;
  args.window_left = -1, args.window_right = -1;
  args.q = qh, args.k = kh, args.v = vh, args.out = out;
  const std::int64_t qk_strides[3] = {num_heads * n_tokens * d_k, n_tokens * d_k, d_k};
  const std::int64_t v_strides[3] = {num_heads * n_tokens * d_v, n_tokens * d_v, d_v};
  std::memcpy(args.q_strides, qk_strides, sizeof qk_strides);
  std::memcpy(args.k_strides, qk_strides, sizeof qk_strides);
  std::memcpy(args.v_strides, v_strides, sizeof v_strides);
  std::memcpy(args.o_strides, v_strides, sizeof v_strides);
  args.k_src = KvLayout{kh, 0, {qk_strides[0], qk_strides[1], qk_strides[2]}, nullptr, 0, 0};
  args.v_src = KvLayout{vh, 0, {v_strides[0], v_strides[1], v_strides[2]}, nullptr, 0, 0};
  if (kt.attention(args, threads) != KernelStatus::ok)
    return fail(AK_ERR_OUT_OF_MEMORY, "ak_mha_self_attention: out of memory");
  return AK_OK;
}

} // namespace
} // namespace attnkern::capi

extern "C" {

void ak_attention_desc_init_sized(ak_attention_desc *d, uint32_t size) {
  if (!d) return;
  // Only the caller's bytes: a 0.1 struct is 240 bytes.
  const std::size_t known = size < sizeof *d ? size : sizeof *d;
  if (known <
      AK_ATTENTION_DESC_SIZE_0_1) { // no released descriptor: left for ak_attention to refuse
    if (known >= sizeof d->struct_size) std::memcpy(&d->struct_size, &size, sizeof size);
    return;
  }
  std::memset(static_cast<void *>(d), 0, known);
  d->struct_size = size;
  d->window_left = -1;
  d->window_right = -1;
}

// 0.1's entry point (the header's macro of the same name calls the sized one).
#undef ak_attention_desc_init
void ak_attention_desc_init(ak_attention_desc *d) {
  ak_attention_desc_init_sized(d, AK_ATTENTION_DESC_SIZE_0_1);
}

ak_status ak_attention(const ak_attention_desc *d, const float *q, const float *k, const float *v,
                       float *out) {
  // k and v point at data of d->k_type / d->v_type (float in 0.1's
  // signature, kept for the ABI).
  return attnkern::capi::guarded("ak_attention",
                                 [&] { return attnkern::capi::attention_api(d, q, k, v, out); });
}

ak_status ak_mha_self_attention(int64_t n_tokens, int64_t d_model, int64_t num_heads, int64_t d_k,
                                int64_t d_v, const float *x, const float *w_q, const float *w_k,
                                const float *w_v, ak_mask mask, float *out) {
  return attnkern::capi::guarded("ak_mha_self_attention", [&] {
    return attnkern::capi::mha_api(n_tokens, d_model, num_heads, d_k, d_v, x, w_q, w_k, w_v,
                                   attnkern::capi::raw_enum(mask), out);
  });
}

} // extern "C"
