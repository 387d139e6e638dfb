// ak_sgemm and ak_sgemm_strided_batched: validation, then the kernel table.
#include "../src/dispatch.hpp"
#include "../src/threading.hpp"
#include "attnkern.h"
#include "errors.hpp"
#include "validate.hpp"

namespace attnkern::capi {
namespace {

struct GemmExtents {
  std::int64_t a, b, c; // floats spanned by one product's A, B and C
};

// Checks everything one product's arguments must satisfy.
// ta, tb: the raw values; on success both are AK_NO_TRANS or AK_TRANS.
GemmExtents check_gemm(ArgCheck &ck, int ta_raw, int tb_raw, std::int64_t m, std::int64_t n,
                       std::int64_t k, std::int64_t lda, std::int64_t ldb, std::int64_t ldc) {
  if (ta_raw != AK_NO_TRANS && ta_raw != AK_TRANS)
    ck.fail(AK_ERR_BAD_ARGUMENT, "ta = %d is neither AK_NO_TRANS (0) nor AK_TRANS (1)", ta_raw);
  if (tb_raw != AK_NO_TRANS && tb_raw != AK_TRANS)
    ck.fail(AK_ERR_BAD_ARGUMENT, "tb = %d is neither AK_NO_TRANS (0) nor AK_TRANS (1)", tb_raw);
  ck.size("m", m).size("n", n).size("k", k);
  if (!ck.ok()) return {};
  const ak_trans ta = static_cast<ak_trans>(ta_raw), tb = static_cast<ak_trans>(tb_raw);
  // A is stored m x k (or k x m when transposed), B k x n (or n x k), C m x n.
  const std::int64_t a_rows = ta == AK_TRANS ? k : m, a_cols = ta == AK_TRANS ? m : k;
  const std::int64_t b_rows = tb == AK_TRANS ? n : k, b_cols = tb == AK_TRANS ? k : n;
  ck.leading_dim("lda", lda, a_cols,
                 ta == AK_TRANS ? "m: A is stored k x m for AK_TRANS" : "k: A is stored m x k");
  ck.leading_dim("ldb", ldb, b_cols,
                 tb == AK_TRANS ? "k: B is stored n x k for AK_TRANS" : "n: B is stored k x n");
  ck.leading_dim("ldc", ldc, n, "n: C is m x n");
  if (!ck.ok()) return {};
  GemmExtents e;
  e.a = ck.matrix_extent("A", a_rows, a_cols, lda);
  e.b = ck.matrix_extent("B", b_rows, b_cols, ldb);
  e.c = ck.matrix_extent("C", m, n, ldc);
  return e;
}

// Floats spanned by `count` matrices of `extent` floats placed `stride` apart.
std::int64_t batch_extent(ArgCheck &ck, const char *name, std::int64_t count, std::int64_t stride,
                          std::int64_t extent) {
  if (count <= 0 || extent == 0) return 0;
  const std::int64_t span = ck.product(name, count - 1, stride);
  if (!ck.ok()) return 0;
  // Bounded like every other extent (kMaxElements), not only against
  // wrap-around: the kernel forms pointers up to the last product's matrix.
  std::int64_t total = 0;
  if (__builtin_add_overflow(span, extent, &total) || total > kMaxElements) {
    ck.fail(AK_ERR_OVERFLOW, "the batch of %s spans more than 2^61 floats", name);
    return 0;
  }
  return total;
}

ak_status run_gemm(const char *fn, const GemmArgs &g, const GemmBatch &batch) {
  if (active_kernels().sgemm(g, batch, threads_for_call()) != KernelStatus::ok)
    return fail(AK_ERR_OUT_OF_MEMORY, "%s: out of memory for packing buffers", fn);
  return AK_OK;
}

} // namespace
} // namespace attnkern::capi

using attnkern::capi::ArgCheck;

extern "C" {

ak_status ak_sgemm(ak_trans ta, ak_trans tb, int64_t m, int64_t n, int64_t k, float alpha,
                   const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
                   int64_t ldc) {
  return attnkern::capi::guarded("ak_sgemm", [&] {
    ArgCheck ck("ak_sgemm");
    const int ta_raw = attnkern::capi::raw_enum(ta), tb_raw = attnkern::capi::raw_enum(tb);
    const auto e = attnkern::capi::check_gemm(ck, ta_raw, tb_raw, m, n, k, lda, ldb, ldc);
    ck.pointer("a", a, e.a).pointer("b", b, e.b).pointer("c", c, e.c);
    if (!ck.ok()) return ck.result();
    const attnkern::GemmArgs g{
        ta_raw == AK_TRANS, tb_raw == AK_TRANS, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc};
    return attnkern::capi::run_gemm("ak_sgemm", g, attnkern::GemmBatch{1, 0, 0, 0});
  });
}

ak_status ak_sgemm_strided_batched(ak_trans ta, ak_trans tb, int64_t m, int64_t n, int64_t k,
                                   float alpha, const float *a, int64_t lda, int64_t stride_a,
                                   const float *b, int64_t ldb, int64_t stride_b, float beta,
                                   float *c, int64_t ldc, int64_t stride_c, int64_t batch) {
  return attnkern::capi::guarded("ak_sgemm_strided_batched", [&] {
    ArgCheck ck("ak_sgemm_strided_batched");
    const int ta_raw = attnkern::capi::raw_enum(ta), tb_raw = attnkern::capi::raw_enum(tb);
    const auto e = attnkern::capi::check_gemm(ck, ta_raw, tb_raw, m, n, k, lda, ldb, ldc);
    ck.size("batch", batch);
    if (stride_a < 0 || stride_b < 0 || stride_c < 0)
      ck.fail(AK_ERR_BAD_STRIDE,
              "stride_a, stride_b and stride_c must be >= 0 (got %lld, %lld, %lld)",
              static_cast<long long>(stride_a), static_cast<long long>(stride_b),
              static_cast<long long>(stride_c));
    // Distinct products must write distinct C matrices: one after another
    // (stride_c at least one matrix), or with their rows interleaved, as in
    // a [m, batch, n] tensor (each row's n floats, one product after
    // another, within one row of ldc).
    if (ck.ok() && batch > 1 && e.c > 0 && stride_c < e.c &&
        !(stride_c >= n && stride_c <= (ldc - n) / (batch - 1)))
      ck.fail(AK_ERR_BAD_STRIDE,
              "stride_c = %lld: the products' C matrices would overlap (they take stride_c >= "
              "one C matrix, %lld floats, or rows interleaved: n <= stride_c and (batch - 1) * "
              "stride_c + n <= ldc = %lld)",
              static_cast<long long>(stride_c), static_cast<long long>(e.c),
              static_cast<long long>(ldc));
    const std::int64_t ta_ext = attnkern::capi::batch_extent(ck, "A", batch, stride_a, e.a);
    const std::int64_t tb_ext = attnkern::capi::batch_extent(ck, "B", batch, stride_b, e.b);
    const std::int64_t tc_ext = attnkern::capi::batch_extent(ck, "C", batch, stride_c, e.c);
    ck.pointer("a", a, ta_ext).pointer("b", b, tb_ext).pointer("c", c, tc_ext);
    if (!ck.ok()) return ck.result();
    if (batch == 0) return AK_OK;
    const attnkern::GemmArgs g{
        ta_raw == AK_TRANS, tb_raw == AK_TRANS, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc};
    return attnkern::capi::run_gemm("ak_sgemm_strided_batched", g,
                                    attnkern::GemmBatch{batch, stride_a, stride_b, stride_c});
  });
}

ak_status ak_sgemm_get_blocking(ak_sgemm_blocking *out) {
  return attnkern::capi::guarded("ak_sgemm_get_blocking", [&] {
    if (out == nullptr)
      return attnkern::capi::fail(AK_ERR_NULL_POINTER, "ak_sgemm_get_blocking: out is NULL");
    const attnkern::GemmBlocking &b = attnkern::active_kernels().gemm_blocking;
    *out = ak_sgemm_blocking{b.mr, b.nr, b.mc, b.kc, b.nc, b.skinny_m, b.kc_narrow, b.narrow_n};
    return AK_OK;
  });
}

} // extern "C"
