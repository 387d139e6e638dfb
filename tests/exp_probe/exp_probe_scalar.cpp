// vexp for scalar (see exp_probe.hpp); same vector type and flags as src/isa/scalar.cpp.
#define AK_ISA_NS scalar
#include "../../src/simd.hpp"

namespace attnkern::scalar {
using V = ScalarVec;
} // namespace attnkern::scalar

#include "exp_probe_body.inc"
