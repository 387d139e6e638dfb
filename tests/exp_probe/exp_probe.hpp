// The library's vectorized exp (src/vexp.hpp), compiled into the test binary
// once per instruction set with that set's flags, so it can be checked
// element by element. (The shared library exports only the C API.)
#pragma once

#include <cstddef>
#include <vector>

namespace akt {

struct ExpProbe {
  const char *isa; // the ak_isa_supported name; run only where that says 1
  // y[i] = exp(x[i]) by vexp; n need not be a multiple of the vector width.
  void (*exp)(const float *x, float *y, std::size_t n);
  // y[i] = exp(a[i] - b[i]) by vexp_diff, as softmax and attention call it.
  void (*exp_diff)(const float *a, const float *b, float *y, std::size_t n);
  // y[i] = exp(a[i] - b[i]) by vexp_shifted (softmax rows), for a <= b and
  // |b| <= 65536.
  void (*exp_shifted)(const float *a, const float *b, float *y, std::size_t n);
  // y[i] = exp(x[i]) by vexp_unshifted (softmax rows whose maximum is in
  // [0, 64]), with its floor at -176 (kShiftedExpFloor).
  void (*exp_unshifted)(const float *x, float *y, std::size_t n);
  // The bound, in ulp, that the three exps above keep: 2, or half an ulp
  // and a hair where they run in double (SSE2, scalar: see src/vexp.hpp).
  double softmax_exp_ulp;
  // The bound, in ulp, that exp keeps: 2, or half an ulp and a hair on
  // scalar, which computes it in double too.
  double exp_ulp;
  // s[i] = cap * tanh(s[i] / cap) by softcap_scores (ak_attention's softcap).
  void (*softcap)(float *s, std::size_t n, float cap);
};

// Every instruction set this build compiled.
const std::vector<ExpProbe> &exp_probes();

} // namespace akt
