// vexp for avx2 (see exp_probe.hpp); same vector type and flags as src/isa/avx2.cpp.
#define AK_ISA_NS avx2
#define AK_ISA_HAS_XSIMD 1
#include "../../src/simd.hpp"

namespace attnkern::avx2 {
using V = XsimdVec<xsimd::fma3<xsimd::avx2>>;
} // namespace attnkern::avx2

#include "exp_probe_body.inc"
