// The table of compiled exp probes.
#include "exp_probe.hpp"

#include <cstddef>

#define AK_DECLARE_PROBE(isa)                                                                      \
  namespace ak::isa {                                                                              \
  void probe_exp(const float *x, float *y, std::size_t n);                                         \
  void probe_exp_diff(const float *a, const float *b, float *y, std::size_t n);                    \
  void probe_exp_shifted(const float *a, const float *b, float *y, std::size_t n);                 \
  void probe_exp_unshifted(const float *x, float *y, std::size_t n);                               \
  double probe_softmax_exp_ulp();                                                                  \
  double probe_exp_ulp();                                                                          \
  }

AK_DECLARE_PROBE(scalar)
#if defined(AK_HAVE_AVX512)
AK_DECLARE_PROBE(avx512)
AK_DECLARE_PROBE(avx2)
AK_DECLARE_PROBE(sse2)
#endif
#if defined(AK_HAVE_NEON)
AK_DECLARE_PROBE(neon)
#endif

namespace akt {

const std::vector<ExpProbe> &exp_probes() {
  static const std::vector<ExpProbe> probes = {
#if defined(AK_HAVE_AVX512)
    {"avx512", ak::avx512::probe_exp, ak::avx512::probe_exp_diff, ak::avx512::probe_exp_shifted,
     ak::avx512::probe_exp_unshifted, ak::avx512::probe_softmax_exp_ulp(),
     ak::avx512::probe_exp_ulp()},
    {"avx2", ak::avx2::probe_exp, ak::avx2::probe_exp_diff, ak::avx2::probe_exp_shifted,
     ak::avx2::probe_exp_unshifted, ak::avx2::probe_softmax_exp_ulp(), ak::avx2::probe_exp_ulp()},
    {"sse2", ak::sse2::probe_exp, ak::sse2::probe_exp_diff, ak::sse2::probe_exp_shifted,
     ak::sse2::probe_exp_unshifted, ak::sse2::probe_softmax_exp_ulp(), ak::sse2::probe_exp_ulp()},
#endif
#if defined(AK_HAVE_NEON)
    {"neon", ak::neon::probe_exp, ak::neon::probe_exp_diff, ak::neon::probe_exp_shifted,
     ak::neon::probe_exp_unshifted, ak::neon::probe_softmax_exp_ulp(), ak::neon::probe_exp_ulp()},
#endif
    {"scalar", ak::scalar::probe_exp, ak::scalar::probe_exp_diff, ak::scalar::probe_exp_shifted,
     ak::scalar::probe_exp_unshifted, ak::scalar::probe_softmax_exp_ulp(),
     ak::scalar::probe_exp_ulp()},
  };
  return probes;
}

} // namespace akt
