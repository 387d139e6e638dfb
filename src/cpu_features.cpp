#include "cpu_features.hpp"

#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
#include <cpuid.h>
#include <cstdint>
#define AK_X86 1
#endif

namespace attnkern {
namespace {

#ifdef AK_X86
// XGETBV is issued through its opcode-free builtin form so this file needs no
// -mxsave flag; only called after CPUID reports OSXSAVE.
std::uint64_t read_xcr0() {
  std::uint32_t eax = 0, edx = 0;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<std::uint64_t>(edx) << 32) | eax;
}

CpuFeatures detect() {
  CpuFeatures f;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(0, &eax, &ebx, &ecx, &edx)) return f;
  const unsigned max_leaf = eax;
  f.intel = ebx == 0x756e6547u && edx == 0x49656e69u && ecx == 0x6c65746eu; // "Genu" "ineI" "ntel"
  __cpuid(1, eax, ebx, ecx, edx);
  f.sse2 = (edx >> 26) & 1u;
  const bool fma = (ecx >> 12) & 1u;
  const bool f16c = (ecx >> 29) & 1u; // vcvtph2ps: widening f16 K/V
  const bool osxsave = (ecx >> 27) & 1u;
  const bool avx = (ecx >> 28) & 1u;
  if (!osxsave || !avx || max_leaf < 7) return f;
  const std::uint64_t xcr0 = read_xcr0();
  const bool os_ymm = (xcr0 & 0x6) == 0x6;   // XMM and YMM state
  const bool os_zmm = (xcr0 & 0xe6) == 0xe6; // + opmask, ZMM_Hi256, Hi16_ZMM
  __cpuid_count(7, 0, eax, ebx, ecx, edx);
  const bool avx2 = (ebx >> 5) & 1u;
  const bool avx512f = (ebx >> 16) & 1u;
  const bool avx512dq = (ebx >> 17) & 1u;
  const bool avx512bw = (ebx >> 30) & 1u;
  const bool avx512vl = (ebx >> 31) & 1u;
  f.avx2_fma = os_ymm && avx2 && fma && f16c;
  f.avx512 = f.avx2_fma && os_zmm && avx512f && avx512dq && avx512bw && avx512vl;
  return f;
}
#else
CpuFeatures detect() {
  CpuFeatures f;
#if defined(__aarch64__) || defined(__ARM_NEON)
  f.neon = true; // Advanced SIMD is mandatory on AArch64
#endif
  return f;
}
#endif

} // namespace

const CpuFeatures &cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

} // namespace attnkern
