// AVX2 + FMA kernels. Compiled with -mavx2 -mfma; only called when the CPU
// and OS support them.
#define AK_ISA_NS avx2
#define AK_ISA_HAS_XSIMD 1
#include "../simd.hpp"

namespace attnkern::avx2 {
using V = XsimdVec<xsimd::fma3<xsimd::avx2>>;
} // namespace attnkern::avx2

#include "config_avx2.hpp"

#include "isa_table.inc"
