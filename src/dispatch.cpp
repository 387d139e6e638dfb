#include "dispatch.hpp"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "cpu_features.hpp"

namespace attnkern {
namespace {

// Returns the table for `name` if this build has it and the CPU can run it.
const KernelTable *table_for(const char *name, bool *known) {
  const CpuFeatures &cpu = cpu_features();
  *known = true;
#if defined(AK_HAVE_AVX512)
  if (std::strcmp(name, "avx512") == 0) return cpu.avx512 ? &avx512::kernel_table() : nullptr;
#endif
#if defined(AK_HAVE_AVX2)
  if (std::strcmp(name, "avx2") == 0) return cpu.avx2_fma ? &avx2::kernel_table() : nullptr;
#endif
#if defined(AK_HAVE_SSE2)
  if (std::strcmp(name, "sse2") == 0) return cpu.sse2 ? &sse2::kernel_table() : nullptr;
#endif
#if defined(AK_HAVE_NEON)
  if (std::strcmp(name, "neon") == 0) return cpu.neon ? &neon::kernel_table() : nullptr;
#endif
  if (std::strcmp(name, "scalar") == 0) return &scalar::kernel_table();
  static const char *const all[] = {"avx512", "avx2", "sse2", "neon"};
  *known = false;
  for (const char *n : all)
    if (std::strcmp(name, n) == 0) *known = true; // a set this build lacks
  return nullptr;
}

const KernelTable *best_table() {
  static const char *const order[] = {"avx512", "avx2", "sse2", "neon", "scalar"};
  bool known = false;
  for (const char *name : order)
    if (const KernelTable *t = table_for(name, &known)) return t;
  return &scalar::kernel_table();
}

// AK_ISA is honoured when it names a usable set; otherwise the best one wins
// (an environment variable has no way to report an error).
const KernelTable *initial_table() {
  const char *env = std::getenv("AK_ISA");
  if (env && *env && std::strcmp(env, "auto") != 0) {
    bool known = false;
    if (const KernelTable *t = table_for(env, &known)) return t;
  }
  return best_table();
}

std::atomic<const KernelTable *> &current() {
  static std::atomic<const KernelTable *> table{initial_table()};
  return table;
}

} // namespace

const KernelTable &active_kernels() { return *current().load(std::memory_order_acquire); }

bool isa_available(const char *name) {
  if (std::strcmp(name, "auto") == 0) return true;
  bool known = false;
  return table_for(name, &known) != nullptr;
}

IsaChoice select_isa(const char *name) {
  const KernelTable *t = nullptr;
  if (name == nullptr || std::strcmp(name, "auto") == 0) {
    t = best_table();
  } else {
    bool known = false;
    t = table_for(name, &known);
    if (!known) return IsaChoice::unknown_name;
    if (!t) return IsaChoice::unsupported;
  }
  current().store(t, std::memory_order_release);
  return IsaChoice::ok;
}

} // namespace attnkern
