// vexp for sse2 (see exp_probe.hpp); same vector type and flags as src/isa/sse2.cpp.
#define AK_ISA_NS sse2
#define AK_ISA_HAS_XSIMD 1
#include "../../src/simd.hpp"

namespace attnkern::sse2 {
using V = XsimdVec<xsimd::sse2>;
} // namespace attnkern::sse2

#include "exp_probe_body.inc"
