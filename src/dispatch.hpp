// Runtime choice of the instruction set: the best one the CPU supports, the
// AK_ISA environment variable at first use, or ak_set_isa().
#pragma once

#include "kernel_table.hpp"

namespace attnkern {

enum class IsaChoice { ok, unknown_name, unsupported };

// The table in use now (never null).
const KernelTable &active_kernels();
// True if `name` ("auto" included) is a set this build has and the CPU runs.
bool isa_available(const char *name);
// name: "auto" (or nullptr) or one of avx512, avx2, sse2, neon, scalar.
IsaChoice select_isa(const char *name);

} // namespace attnkern
