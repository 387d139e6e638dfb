// vexp for neon (see exp_probe.hpp); same vector type and flags as src/isa/neon.cpp.
#define AK_ISA_NS neon
#define AK_ISA_HAS_XSIMD 1
#include "../../src/simd.hpp"

namespace attnkern::neon {
using V = XsimdVec<xsimd::neon64>;
} // namespace attnkern::neon

#include "exp_probe_body.inc"
