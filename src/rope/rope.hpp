// The kernel behind ak_rope: for each token, the sin/cos tables of a block
// of frequencies (sincos.hpp), then every head's pairs rotated with them.
//
// Every rotation is x_a c - x_b s and x_a s + x_b c with separate multiplies
// and adds, in the vector body and the scalar tail alike, and the tables
// are the same bits on every instruction set: results are identical across
// instruction sets and thread counts (a token's result depends on nothing
// but that token).
#pragma once

#include <algorithm>
#include <cstdint>

#include "../kernel_table.hpp"
#include "../threading.hpp"
#include "sincos.hpp"

namespace attnkern {
namespace AK_ISA_NS {

// Rotated elements per thread below which ak_rope stays on one thread:
// about what starting a team costs.
constexpr std::int64_t kRopeMinPerThread = std::int64_t{1} << 15;

// NeoX pairs: a[i] with b[i], i < n.
template <class V>
void rotate_halves(float *a, float *b, const float *cos_t, const float *sin_t, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + V::width <= n; i += V::width) {
    const auto xa = V::loadu(a + i), xb = V::loadu(b + i);
    const auto c = V::loadu(cos_t + i), s = V::loadu(sin_t + i);
    V::storeu(a + i, V::sub(V::mul(xa, c), V::mul(xb, s)));
    V::storeu(b + i, V::add(V::mul(xa, s), V::mul(xb, c)));
  }
  for (; i < n; ++i) {
    const float xa = a[i], xb = b[i];
    a[i] = xa * cos_t[i] - xb * sin_t[i];
    b[i] = xa * sin_t[i] + xb * cos_t[i];
  }
}

// Interleaved pairs: x[2j] with x[2j + 1], 2j < n2. cos2 holds each cosine
// twice, sin2 each sine as (-s, s), so that a vector of pairs is
// x cos2 + swap_pairs(x) sin2: lane 2j gets x_a c + x_b (-s), lane 2j + 1
// x_b c + x_a s, the same bits as the scalar formulas (negation is exact,
// and x + (-y) is x - y).
template <class V>
void rotate_pairs(float *x, const float *cos2, const float *sin2, std::int64_t n2) {
  std::int64_t i = 0;
  if constexpr (V::width > 1) {
    for (; i + V::width <= n2; i += V::width) {
      const auto v = V::loadu(x + i);
      V::storeu(x + i, V::add(V::mul(v, V::loadu(cos2 + i)),
                              V::mul(V::swap_pairs(v), V::loadu(sin2 + i))));
    }
  }
  for (; i < n2; i += 2) {
    const float xa = x[i], xb = x[i + 1], c = cos2[i], s = sin2[i + 1];
    x[i] = xa * c - xb * s;
    x[i + 1] = xa * s + xb * c;
  }
}

// Every head of one token (token = b * seq_len + s).
template <class V> void rope_token(const RopeArgs &a, std::int64_t token) {
  const std::int64_t b = token / a.seq_len, s = token % a.seq_len;
  const double position =
      a.positions ? static_cast<double>(a.positions[token]) : static_cast<double>(s);
  float *const row0 = a.x + b * a.strides[0] + s * a.strides[1];
  const std::int64_t half = a.rotary_dim / 2;
  alignas(64) float cos_t[kRopeBlock], sin_t[kRopeBlock];
  alignas(64) float cos2[2 * kRopeBlock], sin2[2 * kRopeBlock];
  for (std::int64_t i0 = 0; i0 < half; i0 += kRopeBlock) {
    const std::int64_t n = std::min(kRopeBlock, half - i0);
    sincos_block<V>(position, a.inv_freq + i0, n, cos_t, sin_t);
    if (!a.interleaved) {
      for (std::int64_t h = 0; h < a.heads; ++h) {
        float *row = row0 + h * a.strides[2];
        rotate_halves<V>(row + i0, row + half + i0, cos_t, sin_t, n);
      }
      continue;
    }
    for (std::int64_t j = 0; j < n; ++j) {
      cos2[2 * j] = cos2[2 * j + 1] = cos_t[j];
      sin2[2 * j] = -sin_t[j];
      sin2[2 * j + 1] = sin_t[j];
    }
    for (std::int64_t h = 0; h < a.heads; ++h)
      rotate_pairs<V>(row0 + h * a.strides[2] + 2 * i0, cos2, sin2, 2 * n);
  }
}

template <class V> void rope(const RopeArgs &a, int threads) {
  const std::int64_t tokens = a.batch * a.seq_len;
  const double work = static_cast<double>(tokens) * static_cast<double>(a.heads) *
                      static_cast<double>(a.rotary_dim);
  threads = threads_for_work(threads, work, static_cast<double>(kRopeMinPerThread));
  parallel_for_static(threads, tokens, [&](std::int64_t t) { rope_token<V>(a, t); });
}

} // namespace AK_ISA_NS
} // namespace attnkern
