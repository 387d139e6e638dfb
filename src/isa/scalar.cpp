// Portable scalar kernels: every target has them, and ak_set_isa("scalar")
// selects them anywhere (a reference path for tests and odd CPUs).
#define AK_ISA_NS scalar
#include "../simd.hpp"

namespace attnkern::scalar {
using V = ScalarVec;
} // namespace attnkern::scalar

#include "config_scalar.hpp"

#include "isa_table.inc"
