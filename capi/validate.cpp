#include "validate.hpp"

#include <cstdarg>
#include <cstdio>

#include "errors.hpp"

namespace attnkern::capi {
namespace {
thread_local char t_pending[512];
} // namespace

ArgCheck &ArgCheck::fail(ak_status status, const char *fmt, ...) {
  if (status_ != AK_OK) return *this;
  status_ = status;
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(t_pending, sizeof t_pending, fmt, args);
  va_end(args);
  return *this;
}

ak_status ArgCheck::result() const {
  if (status_ == AK_OK) return AK_OK;
  return capi::fail(status_, "%s: %s", fn_, t_pending);
}

ArgCheck &ArgCheck::size(const char *name, std::int64_t v) {
  if (v < 0) fail(AK_ERR_BAD_SHAPE, "%s = %lld is negative", name, static_cast<long long>(v));
  return *this;
}

ArgCheck &ArgCheck::pointer(const char *name, const void *p, std::int64_t extent,
                            const char *unit) {
  if (p == nullptr && extent > 0)
    fail(AK_ERR_NULL_POINTER, "%s is NULL but must hold %lld %s", name,
         static_cast<long long>(extent), unit);
  return *this;
}

ArgCheck &ArgCheck::leading_dim(const char *name, std::int64_t ld, std::int64_t min_ld,
                                const char *what) {
  const std::int64_t need = min_ld > 1 ? min_ld : 1;
  if (ld < need)
    fail(AK_ERR_BAD_STRIDE, "%s = %lld is smaller than %lld (%s)", name, static_cast<long long>(ld),
         static_cast<long long>(need), what);
  return *this;
}

std::int64_t ArgCheck::product(const char *what, std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (a < 0 || b < 0) return 0; // reported by size()
  if (__builtin_mul_overflow(a, b, &r) || r > kMaxElements) {
    fail(AK_ERR_OVERFLOW, "%s overflows (%lld x %lld)", what, static_cast<long long>(a),
         static_cast<long long>(b));
    return 0;
  }
  return r;
}

std::int64_t ArgCheck::sum(const char *what, std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r) || r > kMaxElements) {
    fail(AK_ERR_OVERFLOW, "%s overflows (%lld + %lld)", what, static_cast<long long>(a),
         static_cast<long long>(b));
    return 0;
  }
  return r;
}

std::int64_t ArgCheck::matrix_extent(const char *name, std::int64_t rows, std::int64_t cols,
                                     std::int64_t ld) {
  if (rows <= 0 || cols <= 0 || ld <= 0) return 0;
  std::int64_t span = 0;
  if (__builtin_mul_overflow(rows - 1, ld, &span) || __builtin_add_overflow(span, cols, &span) ||
      span > kMaxElements) {
    fail(AK_ERR_OVERFLOW, "%s spans more than 2^61 floats (%lld rows, leading dimension %lld)",
         name, static_cast<long long>(rows), static_cast<long long>(ld));
    return 0;
  }
  return span;
}

} // namespace attnkern::capi
