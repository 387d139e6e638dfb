// Argument checks shared by the entry points. Each check records the first
// failure (status and message); the entry point calls the kernel only when
// every check passed, so bad input never reaches a store.
#pragma once

#include <cstdint>
#include <cstring>

#include "attnkern.h"

namespace attnkern::capi {

// Largest element count whose byte size (and any pointer offset) still fits
// int64: 2^61 - 1 floats. Every extent a call may touch is bounded by it.
constexpr std::int64_t kMaxElements = INT64_MAX / static_cast<std::int64_t>(sizeof(float));

// The raw value a C caller passed for an enum parameter. Reading a C++ enum
// object that holds a value outside its enumerators is undefined behaviour
// (UBSan's -fsanitize=enum aborts on it), so the bits are copied out first.
template <class E> int raw_enum(const E &e) {
  static_assert(sizeof(E) == sizeof(int), "C enums are int-sized on supported ABIs");
  int v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

class ArgCheck {
public:
  explicit ArgCheck(const char *fn) : fn_(fn) {}
  bool ok() const { return status_ == AK_OK; }
  // Records `status` with "fn: message" unless a failure is already recorded.
  ArgCheck &fail(ak_status status, const char *fmt, ...)
#if defined(__GNUC__)
      __attribute__((format(printf, 3, 4)))
#endif
      ;
  // Returns the recorded status (AK_OK if none), publishing its message.
  ak_status result() const;

  ArgCheck &size(const char *name, std::int64_t v); // >= 0, else BAD_SHAPE
  // NULL_POINTER if p is NULL but must hold `extent` elements (`unit`
  // names them in the message).
  ArgCheck &pointer(const char *name, const void *p, std::int64_t extent,
                    const char *unit = "floats");
  // ld >= max(1, min_ld), else BAD_STRIDE; `what` explains min_ld.
  ArgCheck &leading_dim(const char *name, std::int64_t ld, std::int64_t min_ld, const char *what);
  // Elements spanned by a rows x cols row-major matrix with leading dimension
  // ld (0 if empty); OVERFLOW if it, or its size in bytes, does not fit.
  std::int64_t matrix_extent(const char *name, std::int64_t rows, std::int64_t cols,
                             std::int64_t ld);
  // a + b for two spans (elements) already checked, or OVERFLOW (returns 0
  // then) past the largest span whose byte size fits.
  std::int64_t sum(const char *what, std::int64_t a, std::int64_t b);
  // a * b, or OVERFLOW (returns 0 then).
  std::int64_t product(const char *what, std::int64_t a, std::int64_t b);

private:
  const char *fn_;
  ak_status status_ = AK_OK;
};

} // namespace attnkern::capi
