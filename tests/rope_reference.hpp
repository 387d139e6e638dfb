// Float64 references for ak_rope and ak_embedding, written from the
// header's contract alone (no blocking, no tables): every angle formed and
// evaluated in double by the C library.
#pragma once

#include <attnkern.h>

#include <cmath>
#include <cstdint>
#include <vector>

namespace ak_test {

// ak_rope's default frequencies: theta^(-2i/rotary_dim), rounded to float.
inline std::vector<float> rope_default_inv_freq(std::int64_t rotary_dim, float theta) {
  std::vector<float> f(static_cast<std::size_t>(rotary_dim / 2));
  for (std::size_t i = 0; i < f.size(); ++i)
    f[i] = static_cast<float>(
        std::pow(static_cast<double>(theta),
                 -2.0 * static_cast<double>(i) / static_cast<double>(rotary_dim)));
  return f;
}

// A rope call as the tests describe it; strides resolved (never all 0).
struct RopeShape {
  std::int64_t batch, seq_len, heads, head_dim, rotary_dim; // rotary_dim resolved (> 0)
  ak_rope_style style;
  std::int64_t strides[3]; // [batch, seq, head]
};

// Offset of pair i's two entries in a row.
inline void rope_pair(const RopeShape &r, std::int64_t i, std::int64_t *ia, std::int64_t *ib) {
  if (r.style == AK_ROPE_INTERLEAVED) {
    *ia = 2 * i;
    *ib = 2 * i + 1;
  } else {
    *ia = i;
    *ib = i + r.rotary_dim / 2;
  }
}

// x (the whole buffer) after the rotation, in double: entries of no row's
// rotary part keep their input value.
inline std::vector<double> rope_reference(const RopeShape &r, const std::int32_t *positions,
                                          const float *inv_freq, const std::vector<float> &x) {
  std::vector<double> out(x.begin(), x.end());
  for (std::int64_t b = 0; b < r.batch; ++b)
    for (std::int64_t s = 0; s < r.seq_len; ++s) {
      const double p = positions ? positions[b * r.seq_len + s] : static_cast<double>(s);
      for (std::int64_t h = 0; h < r.heads; ++h) {
        const std::int64_t row = b * r.strides[0] + s * r.strides[1] + h * r.strides[2];
        for (std::int64_t i = 0; i < r.rotary_dim / 2; ++i) {
          const double angle = p * static_cast<double>(inv_freq[i]);
          const double c = std::cos(angle), sn = std::sin(angle);
          std::int64_t ia, ib;
          rope_pair(r, i, &ia, &ib);
          const double xa = x[static_cast<std::size_t>(row + ia)];
          const double xb = x[static_cast<std::size_t>(row + ib)];
          out[static_cast<std::size_t>(row + ia)] = xa * c - xb * sn;
          out[static_cast<std::size_t>(row + ib)] = xa * sn + xb * c;
        }
      }
    }
  return out;
}

// Whether element e of the buffer is some row's rotated entry.
inline std::vector<bool> rope_touched(const RopeShape &r, std::size_t buffer_len) {
  std::vector<bool> touched(buffer_len, false);
  for (std::int64_t b = 0; b < r.batch; ++b)
    for (std::int64_t s = 0; s < r.seq_len; ++s)
      for (std::int64_t h = 0; h < r.heads; ++h)
        for (std::int64_t d = 0; d < r.rotary_dim; ++d)
          touched[static_cast<std::size_t>(b * r.strides[0] + s * r.strides[1] + h * r.strides[2] +
                                           d)] = true;
  return touched;
}

// The error bound of ak_rope's contract for one rotated entry: 2e-6 of the
// pair's magnitude (float inputs of any scale).
inline double rope_tolerance(double xa, double xb) {
  return 2e-6 * (std::fabs(xa) + std::fabs(xb));
}

// The first rotated entry of `got` (a view like `in`) farther from `want`
// than rope_tolerance allows, or -1.
inline std::int64_t rope_first_off(const RopeShape &r, const std::vector<float> &in,
                                   const std::vector<double> &want, const float *got) {
  for (std::int64_t b = 0; b < r.batch; ++b)
    for (std::int64_t s = 0; s < r.seq_len; ++s)
      for (std::int64_t h = 0; h < r.heads; ++h) {
        const std::int64_t row = b * r.strides[0] + s * r.strides[1] + h * r.strides[2];
        for (std::int64_t i = 0; i < r.rotary_dim / 2; ++i) {
          std::int64_t ia, ib;
          rope_pair(r, i, &ia, &ib);
          const auto a = static_cast<std::size_t>(row + ia),
                     bb = static_cast<std::size_t>(row + ib);
          const double tol = rope_tolerance(in[a], in[bb]);
          if (!(std::fabs(got[a] - want[a]) <= tol)) return static_cast<std::int64_t>(a);
          if (!(std::fabs(got[bb] - want[bb]) <= tol)) return static_cast<std::int64_t>(bb);
        }
      }
  return -1;
}

// out[t, :] = table[ids[t], :], or zeros for ids[t] < 0; every other entry
// of out (padding) keeps its value.
inline void embedding_reference(std::int64_t n_tokens, const std::int32_t *ids, std::int64_t dim,
                                const float *table, std::int64_t ld_table, float *out,
                                std::int64_t ld_out) {
  for (std::int64_t t = 0; t < n_tokens; ++t)
    for (std::int64_t d = 0; d < dim; ++d)
      out[t * ld_out + d] = ids[t] < 0 ? 0.0f : table[ids[t] * ld_table + d];
}

} // namespace ak_test
