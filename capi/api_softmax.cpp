// ak_softmax, ak_log_softmax, ak_softmax_axis: validation, then the kernels.
#include "../src/dispatch.hpp"
#include "../src/threading.hpp"
#include "attnkern.h"
#include "errors.hpp"
#include "validate.hpp"

namespace attnkern::capi {
namespace {

ak_status softmax_rows_api(const char *fn, bool log, std::int64_t rows, std::int64_t cols,
                           const float *x, std::int64_t ldx, float *y, std::int64_t ldy) {
  return guarded(fn, [&] {
    ArgCheck ck(fn);
    ck.size("rows", rows).size("cols", cols);
    if (!ck.ok()) return ck.result();
    ck.leading_dim("ldx", ldx, cols, "cols").leading_dim("ldy", ldy, cols, "cols");
    if (ck.ok() && x == y && x != nullptr && ldx != ldy)
      ck.fail(AK_ERR_BAD_ARGUMENT,
              "y == x (in place) needs ldy == ldx (got ldx = %lld, ldy = %lld)",
              static_cast<long long>(ldx), static_cast<long long>(ldy));
    const std::int64_t ext_x = ck.matrix_extent("x", rows, cols, ldx);
    const std::int64_t ext_y = ck.matrix_extent("y", rows, cols, ldy);
    ck.pointer("x", x, ext_x).pointer("y", y, ext_y);
    if (!ck.ok()) return ck.result();
    if (rows == 0 || cols == 0) return AK_OK;
    active_kernels().softmax_rows(rows, cols, x, ldx, y, ldy, log, threads_for_call());
    return AK_OK;
  });
}

} // namespace
} // namespace attnkern::capi

extern "C" {

ak_status ak_softmax(int64_t rows, int64_t cols, const float *x, int64_t ldx, float *y,
                     int64_t ldy) {
  return attnkern::capi::softmax_rows_api("ak_softmax", false, rows, cols, x, ldx, y, ldy);
}

ak_status ak_log_softmax(int64_t rows, int64_t cols, const float *x, int64_t ldx, float *y,
                         int64_t ldy) {
  return attnkern::capi::softmax_rows_api("ak_log_softmax", true, rows, cols, x, ldx, y, ldy);
}

ak_status ak_softmax_axis(int64_t outer, int64_t axis_len, int64_t inner, const float *x,
                          float *y) {
  return attnkern::capi::guarded("ak_softmax_axis", [&] {
    attnkern::capi::ArgCheck ck("ak_softmax_axis");
    ck.size("outer", outer).size("axis_len", axis_len).size("inner", inner);
    // Empty (a size of 0) is a no-op whatever the other two sizes' product.
    const bool empty = outer == 0 || axis_len == 0 || inner == 0;
    const std::int64_t plane = empty ? 0 : ck.product("axis_len * inner", axis_len, inner);
    const std::int64_t total = empty ? 0 : ck.product("outer * axis_len * inner", outer, plane);
    ck.pointer("x", x, total).pointer("y", y, total);
    if (!ck.ok()) return ck.result();
    if (total == 0) return AK_OK;
    if (attnkern::active_kernels().softmax_axis(outer, axis_len, inner, x, y,
                                                attnkern::threads_for_call()) !=
        attnkern::KernelStatus::ok)
      return attnkern::capi::fail(AK_ERR_OUT_OF_MEMORY,
                                  "ak_softmax_axis: out of memory for the columns' state");
    return AK_OK;
  });
}

} // extern "C"
