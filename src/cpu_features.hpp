// CPU feature detection, done by hand (CPUID + XGETBV) because xsimd 8.1's
// detection misreports some AVX-512 CPUs (see docs/design.md).
#pragma once

namespace attnkern {

struct CpuFeatures {
  bool sse2 = false;
  bool avx2_fma = false; // AVX2 + FMA3, with the OS saving YMM state
  bool avx512 = false;   // F + BW + DQ + VL, with the OS saving ZMM state
  bool neon = false;
  // CPUID vendor "GenuineIntel". For tuning choices measured to differ
  // between vendors (the configuration tables in src/isa/); never for results.
  bool intel = false;
};

// Detected once; cheap to call afterwards.
const CpuFeatures &cpu_features();

} // namespace attnkern
