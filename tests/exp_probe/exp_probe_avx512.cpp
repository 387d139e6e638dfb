// vexp for avx512 (see exp_probe.hpp); same vector type and flags as src/isa/avx512.cpp.
#define AK_ISA_NS avx512
#define AK_ISA_HAS_XSIMD 1
#include "../../src/simd.hpp"

namespace attnkern::avx512 {
using V = XsimdVec<xsimd::avx512f>;
} // namespace attnkern::avx512

#include "exp_probe_body.inc"
