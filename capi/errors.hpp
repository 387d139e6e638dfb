// Thread-local error detail and the exception barrier of the C boundary.
#pragma once

#include <new>

#include "attnkern.h"

namespace attnkern::capi {

// Records the detail for ak_last_error() (printf-style) and returns `status`.
ak_status fail(ak_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

// Runs `body` (returning ak_status) so that no exception escapes into C.
template <class F> ak_status guarded(const char *fn, F &&body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc &) {
    return fail(AK_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
  } catch (...) {
    return fail(AK_ERR_INTERNAL, "%s: internal error (unexpected exception)", fn);
  }
}

} // namespace attnkern::capi
