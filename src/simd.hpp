// A thin, fixed vocabulary of vector operations that every kernel is written
// in. One implementation wraps xsimd 8.1 batches for a given architecture; the
// other is plain scalar C++ (the "scalar" instruction set and the fallback for
// targets xsimd does not cover). Kernels are templates over one of these.
//
// Why not use xsimd directly everywhere: 8.1's reductions are few (and its
// AVX-512 haddp permutes lanes), its fma on AVX-512 may compile to a separate
// multiply and add, and the scalar path must exist without it.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(AK_ISA_HAS_XSIMD)
#include <xsimd/xsimd.hpp>
#if defined(__AVX512F__) || defined(__AVX2__) || defined(__SSE2__)
#include <immintrin.h>
#endif
#if defined(__ARM_NEON)
#include <arm_neon.h>
#endif
#endif

// For helpers that take a kernel's register arrays by reference: only once
// inlined do those arrays live in registers rather than on the stack.
#if defined(__GNUC__) || defined(__clang__)
#define AK_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define AK_ALWAYS_INLINE inline
#endif

namespace attnkern {
namespace AK_ISA_NS {

// ---------------------------------------------------------------- scalar
struct ScalarVec {
  using reg = float;
  static constexpr int width = 1;
  static reg loadu(const float *p) { return *p; }
  static void storeu(float *p, reg v) { *p = v; }
  // A store that bypasses the caches where the ISA has one (non-temporal),
  // to an address aligned to the vector's size; stream_fence() orders such
  // stores before what follows (before other threads read them).
  static void store_stream(float *p, reg v) { *p = v; }
  static void stream_fence() {}
  static reg set1(float x) { return x; }
  static reg zero() { return 0.0f; }
  static reg add(reg a, reg b) { return a + b; }
  static reg sub(reg a, reg b) { return a - b; }
  static reg mul(reg a, reg b) { return a * b; }
  static reg div(reg a, reg b) { return a / b; }
  static reg max(reg a, reg b) { return a > b ? a : b; }
  static reg min(reg a, reg b) { return a < b ? a : b; }
  // Not fused: without hardware FMA std::fma is a slow library call.
  static constexpr bool has_fma = false; // a * b + c rounds twice (no contraction)
  static reg fmadd(reg a, reg b, reg c) { return a * b + c; }
  static reg round(reg a) { return std::nearbyint(a); }
  static reg lt_select(reg a, reg b, reg t, reg f) { return a < b ? t : f; }
  static bool any_lt(reg a, reg b) { return a < b; }
  static reg nan_select(reg probe, reg if_nan, reg other) {
    return probe != probe ? if_nan : other;
  }
  // 2^n for an integral n in [-126, 127]; NaN for a NaN n (vexp lets NaN
  // flow through here; converting it to an integer would be undefined).
  // Outside that range a defined but meaningless result, as the vector
  // versions give: n is clamped first, since its conversion or the shift
  // would overflow an int (softmax_axis's guessing pass meets such n before
  // it throws the results away).
  static reg pow2i(reg n) {
    if (n != n) return n;
    const float clamped = n < -127.0f ? -127.0f : n > 128.0f ? 128.0f : n;
    const std::int32_t bits = (static_cast<std::int32_t>(clamped) + 127) * (1 << 23);
    float out;
    std::memcpy(&out, &bits, sizeof out);
    return out;
  }
  static float reduce_add(reg v) { return v; }
  static double reduce_add_double(reg v) { return v; }
  static double reduce_add_double_pair(reg a, reg b) { return double(a) + double(b); }
  static reg reduce_add_each(const reg *v) { return v[0]; }
  static float reduce_max(reg v) { return v; }
};

#if defined(AK_ISA_HAS_XSIMD)
// ---------------------------------------------------------------- xsimd
template <class Arch> struct XsimdVec {
  using reg = xsimd::batch<float, Arch>;
  using ireg = xsimd::batch<std::int32_t, Arch>;
  static constexpr int width = static_cast<int>(reg::size);

  static reg loadu(const float *p) { return reg::load_unaligned(p); }
  static void storeu(float *p, reg v) { v.store_unaligned(p); }
  static void store_stream(float *p, reg v) {
#if defined(__AVX512F__)
    if constexpr (width == 16) return _mm512_stream_ps(p, v);
#endif
#if defined(__AVX__)
    if constexpr (width == 8) return _mm256_stream_ps(p, v);
#endif
#if defined(__SSE2__)
    if constexpr (width == 4) return _mm_stream_ps(p, v);
#endif
    v.store_aligned(p); // NEON: no streaming store for vectors of floats
  }
  static void stream_fence() {
#if defined(__SSE2__)
    _mm_sfence();
#endif
  }
  static reg set1(float x) { return reg(x); }
  static reg zero() { return reg(0.0f); }
  static reg add(reg a, reg b) { return a + b; }
  static reg sub(reg a, reg b) { return a - b; }
  static reg mul(reg a, reg b) { return a * b; }
  // Correctly rounded. (xsimd 8.1 has no float division for neon64: it
  // falls back to 32-bit NEON's reciprocal estimate and two Newton steps,
  // ulps off, and of the wrong sign for a subnormal or infinite divisor.)
  static reg div(reg a, reg b) {
#if defined(__aarch64__)
    if constexpr (width == 4) return vdivq_f32(a, b);
#endif
    return a / b;
  }
  static reg max(reg a, reg b) { return xsimd::max(a, b); }
  static reg min(reg a, reg b) { return xsimd::min(a, b); }
  // Whether fmadd below rounds once (a fused instruction).
  static constexpr bool has_fma =
#if defined(__AVX512F__)
      width == 16 ||
#endif
#if defined(__FMA__)
      width == 8 ||
#endif
#if defined(__aarch64__)
      width == 4 ||
#endif
      false;
  // a * b + c with one rounding where the instruction set has FMA (the raw
  // intrinsic: xsimd 8.1 may split it on AVX-512).
  static reg fmadd(reg a, reg b, reg c) {
#if defined(__AVX512F__)
    if constexpr (width == 16) return _mm512_fmadd_ps(a, b, c);
#endif
#if defined(__FMA__)
    if constexpr (width == 8) return _mm256_fmadd_ps(a, b, c);
#endif
#if defined(__aarch64__)
    if constexpr (width == 4) return vfmaq_f32(c, a, b);
#endif
    return a * b + c;
  }
  static reg round(reg a) { return xsimd::nearbyint(a); }
  // The lanes of each pair swapped: [v1 v0 v3 v2 ...] (a shuffle within
  // 128-bit lanes everywhere). ScalarVec has no pairs, so no such op.
  static reg swap_pairs(reg v) {
#if defined(__AVX512F__)
    if constexpr (width == 16) return _mm512_permute_ps(v, 0xB1);
#endif
#if defined(__AVX__)
    if constexpr (width == 8) return _mm256_permute_ps(v, 0xB1);
#endif
#if defined(__SSE2__)
    if constexpr (width == 4) return _mm_shuffle_ps(v, v, 0xB1);
#endif
#if defined(__ARM_NEON)
    if constexpr (width == 4) return vrev64q_f32(v);
#endif
    alignas(64) float t[width], u[width];
    v.store_aligned(t);
    for (int i = 0; i < width; ++i) u[i] = t[i ^ 1];
    return reg::load_aligned(u);
  }
  static reg lt_select(reg a, reg b, reg t, reg f) { return xsimd::select(a < b, t, f); }
  static bool any_lt(reg a, reg b) { return xsimd::any(a < b); } // a lane with a < b
  // probe == probe is false exactly for NaN. (Not probe != probe: xsimd 8.1
  // compiles != to an ordered compare on AVX/AVX-512, false for NaN too.)
  static reg nan_select(reg probe, reg if_nan, reg other) {
    return xsimd::select(probe == probe, other, if_nan);
  }
  static reg pow2i(reg n) {
    const ireg bits = (xsimd::to_int(n) + ireg(127)) << 23;
    return xsimd::bitwise_cast<reg>(bits);
  }
  // xsimd's hadd: a fixed tree of shuffles and adds per architecture (its
  // pairing differs between ISAs and from reduce_add_each's), so results
  // depend on nothing but the ISA; far cheaper than a store and a serial
  // chain of width - 1 additions.
  static float reduce_add(reg v) { return xsimd::hadd(v); }
  // Lane i = the sum of v[i]'s lanes, for `width` vectors at once (a
  // transposing tree: far fewer shuffles than width separate reductions).
  static reg reduce_add_each(const reg *v) {
#if defined(__AVX512F__) && defined(__AVX512DQ__)
    if constexpr (width == 16) {
      // xsimd 8.1's AVX-512 haddp returns the sums in a permuted lane order;
      // fold each vector to 256 bits and use the AVX one, which is right.
      using half = xsimd::batch<float, xsimd::fma3<xsimd::avx2>>;
      half lo[8], hi[8];
      for (int i = 0; i < 8; ++i) {
        const __m512 a = v[i], b = v[i + 8];
        lo[i] = _mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1));
        hi[i] = _mm256_add_ps(_mm512_castps512_ps256(b), _mm512_extractf32x8_ps(b, 1));
      }
      const __m256 sl = xsimd::haddp(lo), sh = xsimd::haddp(hi);
      return _mm512_insertf32x8(_mm512_castps256_ps512(sl), sh, 1);
    }
#endif
    // Lane order checked for SSE2, AVX and NEON (identity); the sweeps in
    // tests/test_sgemm.cpp (skinny m * groups == width) would catch another.
    static_assert(width == 4 || width == 8 || width == 16, "haddp lane order unchecked");
    return xsimd::haddp(v);
  }
  // The lanes' sum in double, in a fixed order (deterministic).
  static double reduce_add_double(reg v) {
#if defined(__AVX512F__) && defined(__AVX512DQ__)
    if constexpr (width == 16) {
      const __m512d s = _mm512_add_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(v)),
                                      _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1)));
      const __m256d q = _mm256_add_pd(_mm512_castpd512_pd256(s), _mm512_extractf64x4_pd(s, 1));
      const __m128d h = _mm_add_pd(_mm256_castpd256_pd128(q), _mm256_extractf128_pd(q, 1));
      return _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
    }
#endif
#if defined(__AVX2__)
    if constexpr (width == 8) {
      const __m256d s = _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(v)),
                                      _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
      const __m128d h = _mm_add_pd(_mm256_castpd256_pd128(s), _mm256_extractf128_pd(s, 1));
      return _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
    }
#endif
    alignas(64) float t[width];
    v.store_aligned(t);
    double s = 0.0;
    for (int i = 0; i < width; ++i) s += t[i];
    return s;
  }
  // The sum of both vectors' lanes in double: each lane pair added in
  // double first (exact for a float and its compensation), then the lanes
  // in a fixed order (deterministic).
  static double reduce_add_double_pair(reg a, reg b) {
#if defined(__AVX512F__) && defined(__AVX512DQ__)
    if constexpr (width == 16) {
      const __m512d lo = _mm512_add_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(a)),
                                       _mm512_cvtps_pd(_mm512_castps512_ps256(b)));
      const __m512d hi = _mm512_add_pd(_mm512_cvtps_pd(_mm512_extractf32x8_ps(a, 1)),
                                       _mm512_cvtps_pd(_mm512_extractf32x8_ps(b, 1)));
      const __m512d s = _mm512_add_pd(lo, hi);
      const __m256d q = _mm256_add_pd(_mm512_castpd512_pd256(s), _mm512_extractf64x4_pd(s, 1));
      const __m128d h = _mm_add_pd(_mm256_castpd256_pd128(q), _mm256_extractf128_pd(q, 1));
      return _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
    }
#endif
    return reduce_add_double(a) + reduce_add_double(b);
  }
  // The largest lane, by a branch-free tree. A NaN lane may or may not come
  // out (like max itself): callers that must see NaN test for it apart.
  static float reduce_max(reg v) {
#if defined(__AVX512F__)
    if constexpr (width == 16) return _mm512_reduce_max_ps(v);
#endif
#if defined(__AVX__)
    if constexpr (width == 8) {
      const __m128 h = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
      return max4(h);
    }
#endif
#if defined(__SSE2__)
    if constexpr (width == 4) return max4(v);
#endif
#if defined(__aarch64__)
    if constexpr (width == 4) return vmaxnmvq_f32(v);
#endif
    alignas(64) float t[width];
    v.store_aligned(t);
    float m = t[0];
    for (int i = 1; i < width; ++i) m = t[i] > m ? t[i] : m;
    return m;
  }

private:
#if defined(__SSE2__)
  static float max4(__m128 a) {
    a = _mm_max_ps(a, _mm_movehl_ps(a, a));
    return _mm_cvtss_f32(_mm_max_ss(a, _mm_shuffle_ps(a, a, 1)));
  }
#endif
};
#endif

} // namespace AK_ISA_NS
} // namespace attnkern
