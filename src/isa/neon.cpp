// NEON (AArch64 Advanced SIMD) kernels.
#define AK_ISA_NS neon
#define AK_ISA_HAS_XSIMD 1
#include "../simd.hpp"

namespace attnkern::neon {
using V = XsimdVec<xsimd::neon64>;
} // namespace attnkern::neon

#include "config_neon.hpp"

#include "isa_table.inc"
