// SSE2 kernels: the x86-64 baseline, no extra compiler flags.
#define AK_ISA_NS sse2
#define AK_ISA_HAS_XSIMD 1
#include "../simd.hpp"

namespace attnkern::sse2 {
using V = XsimdVec<xsimd::sse2>;
} // namespace attnkern::sse2

#include "config_sse2.hpp"

#include "isa_table.inc"
