// The table of compiled exp probes.
#include "exp_probe.hpp"

#include <cstddef>

#define AK_DECLARE_PROBE(isa)                                                                      \
  namespace attnkern::isa {                                                                        \
  void probe_exp(const float *x, float *y, std::size_t n);                                         \
  void probe_exp_diff(const float *a, const float *b, float *y, std::size_t n);                    \
  void probe_exp_shifted(const float *a, const float *b, float *y, std::size_t n);                 \
  void probe_exp_unshifted(const float *x, float *y, std::size_t n);                               \
  double probe_softmax_exp_ulp();                                                                  \
  double probe_exp_ulp();                                                                          \
  void probe_softcap(float *s, std::size_t n, float cap);                                          \
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
    {"avx512", attnkern::avx512::probe_exp, attnkern::avx512::probe_exp_diff,
     attnkern::avx512::probe_exp_shifted, attnkern::avx512::probe_exp_unshifted,
     attnkern::avx512::probe_softmax_exp_ulp(), attnkern::avx512::probe_exp_ulp(),
     attnkern::avx512::probe_softcap},
    {"avx2", attnkern::avx2::probe_exp, attnkern::avx2::probe_exp_diff,
     attnkern::avx2::probe_exp_shifted, attnkern::avx2::probe_exp_unshifted,
     attnkern::avx2::probe_softmax_exp_ulp(), attnkern::avx2::probe_exp_ulp(),
     attnkern::avx2::probe_softcap},
    {"sse2", attnkern::sse2::probe_exp, attnkern::sse2::probe_exp_diff,
     attnkern::sse2::probe_exp_shifted, attnkern::sse2::probe_exp_unshifted,
     attnkern::sse2::probe_softmax_exp_ulp(), attnkern::sse2::probe_exp_ulp(),
     attnkern::sse2::probe_softcap},
#endif
#if defined(AK_HAVE_NEON)
    {"neon", attnkern::neon::probe_exp, attnkern::neon::probe_exp_diff,
     attnkern::neon::probe_exp_shifted, attnkern::neon::probe_exp_unshifted,
     attnkern::neon::probe_softmax_exp_ulp(), attnkern::neon::probe_exp_ulp(),
     attnkern::neon::probe_softcap},
#endif
    {"scalar", attnkern::scalar::probe_exp, attnkern::scalar::probe_exp_diff,
     attnkern::scalar::probe_exp_shifted, attnkern::scalar::probe_exp_unshifted,
     attnkern::scalar::probe_softmax_exp_ulp(), attnkern::scalar::probe_exp_ulp(),
     attnkern::scalar::probe_softcap},
  };
  return probes;
}

} // namespace akt
