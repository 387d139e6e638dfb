// The arithmetic peak of this machine per instruction set, measured:
// register-only loops of independent multiply-adds, no memory traffic.
// Benchmarks are named peak/fma/<isa>/threads:<t> with <isa> one of
//   avx512  24 zmm accumulators, vfmadd231ps (16 lanes x 2 FLOP per instruction)
//   avx2    12 ymm accumulators, vfmadd231ps (8 lanes x 2 FLOP; 16 ymm registers)
//   sse2    no FMA: 7 independent mulps chains and 7 independent addps chains
//           (4 lanes x 1 FLOP per instruction, i.e. 2 FLOP per lane per mul + add pair)
// each registered only when attnkern could run that instruction set here
// (ak_isa_supported) and only on x86-64. The loops are inline assembly, so the
// compiler can neither spill an accumulator nor shorten a chain; every
// accumulator chain is independent of the others, and there are enough of them
// to cover the latency of the FMA (or mul/add) units at full throughput (about
// 4 cycles x 2 pipes on current x86 cores). At 2 threads, each thread of an
// OpenMP parallel region runs the whole loop and the FLOPs of both count.
#include "bench_peak.hpp"

#include "bench_common.hpp"

#include <attnkern.h>
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>

namespace akb {
namespace {

// Loop trips per kernel call: 1-3 ms per call on a ~2.5 GHz core.
constexpr std::int64_t kTrips = std::int64_t{1} << 18;

#if defined(__x86_64__)

// The multiplicands: acc = acc + 1 * 2^-20 (FMA) or acc * 1 and acc + 2^-20
// (SSE2). The values stay between 1 and 1.25 for the whole call: no
// overflow, no denormals.
alignas(64) const float kOne = 1.0f;
alignas(64) const float kTiny = 0x1p-20f;

#define AKB_FMA512(n) "vfmadd231ps %%zmm25, %%zmm24, %%zmm" #n "\n\t"
#define AKB_COPY512(n) "vmovaps %%zmm24, %%zmm" #n "\n\t"

__attribute__((target("avx512f"), noinline)) void fma_loop_avx512(std::int64_t trips) {
  asm volatile("vbroadcastss %[one], %%zmm24\n\t"
               "vbroadcastss %[tiny], %%zmm25\n\t" //
               AKB_COPY512(0) AKB_COPY512(1) AKB_COPY512(2) AKB_COPY512(3) AKB_COPY512(4)
                   AKB_COPY512(5) AKB_COPY512(6) AKB_COPY512(7) AKB_COPY512(8) AKB_COPY512(9)
                       AKB_COPY512(10) AKB_COPY512(11) AKB_COPY512(12) AKB_COPY512(13)
                           AKB_COPY512(14) AKB_COPY512(15) AKB_COPY512(16) AKB_COPY512(17)
                               AKB_COPY512(18) AKB_COPY512(19) AKB_COPY512(20) AKB_COPY512(21)
                                   AKB_COPY512(22) AKB_COPY512(23) //
               "1:\n\t"                                            //
               AKB_FMA512(0) AKB_FMA512(1) AKB_FMA512(2) AKB_FMA512(3) AKB_FMA512(4) AKB_FMA512(5)
                   AKB_FMA512(6) AKB_FMA512(7) AKB_FMA512(8) AKB_FMA512(9) AKB_FMA512(10)
                       AKB_FMA512(11) AKB_FMA512(12) AKB_FMA512(13) AKB_FMA512(14) AKB_FMA512(15)
                           AKB_FMA512(16) AKB_FMA512(17) AKB_FMA512(18) AKB_FMA512(19)
                               AKB_FMA512(20) AKB_FMA512(21) AKB_FMA512(22) AKB_FMA512(23) //
               "dec %[n]\n\t"
               "jnz 1b\n\t"
               "vzeroupper\n\t"
               : [n] "+r"(trips)
               : [one] "m"(kOne), [tiny] "m"(kTiny)
               : "cc", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8",
                 "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17",
                 "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm24", "xmm25");
}

#define AKB_FMA256(n) "vfmadd231ps %%ymm13, %%ymm12, %%ymm" #n "\n\t"
#define AKB_COPY256(n) "vmovaps %%ymm12, %%ymm" #n "\n\t"

__attribute__((target("avx2,fma"), noinline)) void fma_loop_avx2(std::int64_t trips) {
  asm volatile("vbroadcastss %[one], %%ymm12\n\t"
               "vbroadcastss %[tiny], %%ymm13\n\t" //
               AKB_COPY256(0) AKB_COPY256(1) AKB_COPY256(2) AKB_COPY256(3) AKB_COPY256(4)
                   AKB_COPY256(5) AKB_COPY256(6) AKB_COPY256(7) AKB_COPY256(8) AKB_COPY256(9)
                       AKB_COPY256(10) AKB_COPY256(11) //
               "1:\n\t"                                //
               AKB_FMA256(0) AKB_FMA256(1) AKB_FMA256(2) AKB_FMA256(3) AKB_FMA256(4) AKB_FMA256(5)
                   AKB_FMA256(6) AKB_FMA256(7) AKB_FMA256(8) AKB_FMA256(9) AKB_FMA256(10)
                       AKB_FMA256(11) //
               "dec %[n]\n\t"
               "jnz 1b\n\t"
               "vzeroupper\n\t"
               : [n] "+r"(trips)
               : [one] "m"(kOne), [tiny] "m"(kTiny)
               : "cc", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8",
                 "xmm9", "xmm10", "xmm11", "xmm12", "xmm13");
}

// xmm0-6: acc *= 1 (mulps chains); xmm7-13: acc += 2^-20 (addps chains).
#define AKB_MUL128(n) "mulps %%xmm14, %%xmm" #n "\n\t"
#define AKB_ADD128(n) "addps %%xmm15, %%xmm" #n "\n\t"
#define AKB_COPY128(n) "movaps %%xmm14, %%xmm" #n "\n\t"

__attribute__((noinline)) void mul_add_loop_sse2(std::int64_t trips) {
  asm volatile("movss %[one], %%xmm14\n\t"
               "shufps $0, %%xmm14, %%xmm14\n\t"
               "movss %[tiny], %%xmm15\n\t"
               "shufps $0, %%xmm15, %%xmm15\n\t" //
               AKB_COPY128(0) AKB_COPY128(1) AKB_COPY128(2) AKB_COPY128(3) AKB_COPY128(4)
                   AKB_COPY128(5) AKB_COPY128(6) AKB_COPY128(7) AKB_COPY128(8) AKB_COPY128(9)
                       AKB_COPY128(10) AKB_COPY128(11) AKB_COPY128(12) AKB_COPY128(13) //
               "1:\n\t"                                                                //
               AKB_MUL128(0) AKB_ADD128(7) AKB_MUL128(1) AKB_ADD128(8) AKB_MUL128(2) AKB_ADD128(9)
                   AKB_MUL128(3) AKB_ADD128(10) AKB_MUL128(4) AKB_ADD128(11) AKB_MUL128(5)
                       AKB_ADD128(12) AKB_MUL128(6) AKB_ADD128(13) //
               "dec %[n]\n\t"
               "jnz 1b\n\t"
               : [n] "+r"(trips)
               : [one] "m"(kOne), [tiny] "m"(kTiny)
               : "cc", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8",
                 "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
}

struct PeakKernel {
  const char *isa;            // the ak_isa_supported name, and the benchmark's
  void (*loop)(std::int64_t); // runs `trips` trips
  double flops_per_trip;      // FLOPs of one trip of the loop
  const char *what;           // the label
};

constexpr PeakKernel kKernels[] = {
    {"avx512", fma_loop_avx512, 24 * 16 * 2.0,
     "24 zmm accumulators x vfmadd231ps: 768 FLOP per trip"},
    {"avx2", fma_loop_avx2, 12 * 8 * 2.0, "12 ymm accumulators x vfmadd231ps: 192 FLOP per trip"},
    {"sse2", mul_add_loop_sse2, 14 * 4 * 1.0,
     "7 mulps + 7 addps chains (no FMA): 56 FLOP per trip"},
};

void BM_peak(benchmark::State &state, const PeakKernel &kernel, int threads) {
  set_threads(threads);
  settle(Impl::scalar, threads); // an OpenMP region, like the scalar softmax
  for (auto _ : state) {
#pragma omp parallel num_threads(threads) if (threads > 1)
    kernel.loop(kTrips);
  }
  state.counters["flops"] = benchmark::Counter(kernel.flops_per_trip * double(kTrips) * threads,
                                               benchmark::Counter::kIsIterationInvariantRate,
                                               benchmark::Counter::kIs1000);
  state.SetLabel(kernel.what);
}

#endif // __x86_64__

} // namespace

void register_peak_benchmarks() {
#if defined(__x86_64__)
  for (const PeakKernel &kernel : kKernels) {
    if (!ak_isa_supported(kernel.isa)) continue;
    for (int threads : bench_thread_counts()) {
      const std::string name =
          std::string("peak/fma/") + kernel.isa + "/threads:" + std::to_string(threads);
      benchmark::RegisterBenchmark(name.c_str(), BM_peak, kernel, threads)
          ->Unit(benchmark::kMillisecond)
          ->MinTime(0.2)
          ->UseRealTime();
    }
  }
#endif
}

} // namespace akb
