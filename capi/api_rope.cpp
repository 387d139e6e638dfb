// ak_rope: validation, the default frequency table, then the kernel.
#include <cmath>
#include <cstdint>
#include <new>
#include <vector>

#include "../src/dispatch.hpp"
#include "../src/scratch.hpp"
#include "../src/threading.hpp"
#include "attention_tensors.hpp"
#include "attnkern.h"
#include "errors.hpp"
#include "validate.hpp"

namespace attnkern::capi {
namespace {

// rotary_dim resolved (0 = head_dim) and checked against head_dim; 0 on
// failure.
std::int64_t check_rotary_dim(ArgCheck &ck, std::int64_t head_dim, std::int64_t rotary_dim) {
  if (rotary_dim > head_dim) {
    ck.fail(AK_ERR_BAD_SHAPE, "rotary_dim = %lld is larger than head_dim = %lld",
            static_cast<long long>(rotary_dim), static_cast<long long>(head_dim));
    return 0;
  }
  if (rotary_dim == 0) {
    if (head_dim % 2 != 0)
      ck.fail(AK_ERR_BAD_SHAPE, "rotary_dim = 0 (all of head_dim) needs an even head_dim, not %lld",
              static_cast<long long>(head_dim));
    return head_dim;
  }
  if (rotary_dim % 2 != 0)
    ck.fail(AK_ERR_BAD_SHAPE, "rotary_dim = %lld is odd (it rotates pairs)",
            static_cast<long long>(rotary_dim));
  return rotary_dim;
}

// x's [batch, seq, head] strides: all 0 (or NULL) is contiguous; else
// non-negative, the head stride at least a row, and distinct rows apart
// (x is written). Returns the floats x spans (0 if empty).
std::int64_t check_x(ArgCheck &ck, RopeArgs &a, const std::int64_t *given) {
  TensorSpec t{"x", "strides", {a.batch, a.seq_len, a.heads}, a.head_dim, {0, 0, 0}};
  if (given) {
    for (int i = 0; i < 3; ++i) {
      t.strides[i] = given[i];
      if (given[i] < 0)
        ck.fail(AK_ERR_BAD_STRIDE, "strides[%d] = %lld is negative", i,
                static_cast<long long>(given[i]));
    }
    const bool all_zero = given[0] == 0 && given[1] == 0 && given[2] == 0;
    if (!all_zero && given[2] < a.head_dim)
      ck.fail(AK_ERR_BAD_STRIDE, "strides[2] (head) = %lld is smaller than head_dim = %lld",
              static_cast<long long>(given[2]), static_cast<long long>(a.head_dim));
  }
  if (!ck.ok()) return 0;
  const std::int64_t extent = check_tensor(ck, t, /*is_output=*/true);
  for (int i = 0; i < 3; ++i) a.strides[i] = t.strides[i];
  return extent;
}

ak_status rope_api(std::int64_t batch, std::int64_t seq_len, std::int64_t num_heads,
                   std::int64_t head_dim, std::int64_t rotary_dim, int style,
                   const std::int32_t *positions, float theta, const float *inv_freq, float *x,
                   const std::int64_t *strides) {
  ArgCheck ck("ak_rope");
  ck.size("batch", batch).size("seq_len", seq_len).size("num_heads", num_heads);
  ck.size("head_dim", head_dim).size("rotary_dim", rotary_dim);
  if (!ck.ok()) return ck.result();
  if (style != AK_ROPE_NEOX && style != AK_ROPE_INTERLEAVED)
    ck.fail(AK_ERR_BAD_ARGUMENT,
            "style = %d is not an ak_rope_style (AK_ROPE_NEOX or AK_ROPE_INTERLEAVED)", style);
  RopeArgs a{};
  a.batch = batch;
  a.seq_len = seq_len;
  a.heads = num_heads;
  a.head_dim = head_dim;
  a.rotary_dim = check_rotary_dim(ck, head_dim, rotary_dim);
  a.interleaved = style == AK_ROPE_INTERLEAVED;
  a.positions = positions;
  a.x = x;
  if (!inv_freq && !(std::isfinite(theta) && theta > 0.0f))
    ck.fail(AK_ERR_BAD_ARGUMENT, "theta = %g must be finite and > 0 (inv_freq is NULL)",
            static_cast<double>(theta));
  ck.product("batch * seq_len", batch, seq_len); // the tokens the kernel counts
  const std::int64_t x_extent = ck.ok() ? check_x(ck, a, strides) : 0;
  ck.pointer("x", x, x_extent);
  if (!ck.ok()) return ck.result();
  if (x_extent == 0 || a.rotary_dim == 0) return AK_OK; // nothing to rotate
  const std::int64_t half = a.rotary_dim / 2;
  // The default table as engines build theirs (theta^(-2i/d) in float), from
  // double so that it is the correctly rounded value.
  // Decode calls this once per layer and token: head dims up to 1024 keep
  // the table on the stack, larger ones allocate (bad_alloc: OUT_OF_MEMORY,
  // before any store).
  constexpr std::int64_t kStackFreqs = 512;
  float stack_freq[kStackFreqs];
  std::vector<float> heap_freq;
  if (!inv_freq) {
    float *f = stack_freq;
    if (half > kStackFreqs && injected_allocation_failure()) throw std::bad_alloc();
    if (half > kStackFreqs) heap_freq.resize(static_cast<std::size_t>(half)), f = heap_freq.data();
    for (std::int64_t i = 0; i < half; ++i)
      f[i] = static_cast<float>(
          std::pow(static_cast<double>(theta),
                   -2.0 * static_cast<double>(i) / static_cast<double>(a.rotary_dim)));
    inv_freq = f;
  }
  a.inv_freq = inv_freq;
  active_kernels().rope(a, threads_for_call());
  return AK_OK;
}

} // namespace
} // namespace attnkern::capi

extern "C" {

ak_status ak_rope(int64_t batch, int64_t seq_len, int64_t num_heads, int64_t head_dim,
                  int64_t rotary_dim, ak_rope_style style, const int32_t *positions, float theta,
                  const float *inv_freq, float *x, const int64_t strides[3]) {
  using namespace attnkern::capi;
  return guarded("ak_rope", [&] {
    return rope_api(batch, seq_len, num_heads, head_dim, rotary_dim, raw_enum(style), positions,
                    theta, inv_freq, x, strides);
  });
}

} // extern "C"
