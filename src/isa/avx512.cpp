// AVX-512 (F, BW, DQ, VL) kernels. Compiled with -mavx512f -mavx512bw
// -mavx512dq -mavx512vl -mavx2 -mfma; only called when the CPU and OS
// support them.
#define AK_ISA_NS avx512
#define AK_ISA_HAS_XSIMD 1
#include "../simd.hpp"

namespace attnkern::avx512 {
using V = XsimdVec<xsimd::avx512f>;
} // namespace attnkern::avx512

#include "config_avx512.hpp"

#include "isa_table.inc"
