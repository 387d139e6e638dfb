#include "errors.hpp"

#include "validate.hpp"

#include <cstdarg>
#include <cstdio>

namespace attnkern::capi {
namespace {
thread_local char t_last_error[512] = "";
}

ak_status fail(ak_status status, const char *fmt, ...) {
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(t_last_error, sizeof t_last_error, fmt, args);
  va_end(args);
  return status;
}

} // namespace attnkern::capi

extern "C" {

const char *ak_last_error(void) { return attnkern::capi::t_last_error; }

const char *ak_status_string(ak_status s) {
  switch (attnkern::capi::raw_enum(s)) { // (a value outside the enum is not UB this way)
  case AK_OK:
    return "AK_OK: success";
  case AK_ERR_NULL_POINTER:
    return "AK_ERR_NULL_POINTER: a required pointer is NULL";
  case AK_ERR_BAD_SHAPE:
    return "AK_ERR_BAD_SHAPE: a size is negative or inconsistent";
  case AK_ERR_BAD_STRIDE:
    return "AK_ERR_BAD_STRIDE: a leading dimension or stride is too small";
  case AK_ERR_BAD_ARGUMENT:
    return "AK_ERR_BAD_ARGUMENT: an argument has an invalid value";
  case AK_ERR_OVERFLOW:
    return "AK_ERR_OVERFLOW: a size product overflows";
  case AK_ERR_OUT_OF_MEMORY:
    return "AK_ERR_OUT_OF_MEMORY: scratch memory could not be allocated";
  case AK_ERR_UNSUPPORTED:
    return "AK_ERR_UNSUPPORTED: not supported by this CPU or build";
  case AK_ERR_INTERNAL:
    return "AK_ERR_INTERNAL: internal error";
  }
  return "unknown ak_status value";
}

} // extern "C"
