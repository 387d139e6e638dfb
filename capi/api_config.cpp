// Version, instruction-set, thread-count and scratch entry points.
#include <cstring>

#include "../src/dispatch.hpp"
#include "../src/scratch.hpp"
#include "../src/threading.hpp"
#include "attnkern.h"
#include "errors.hpp"

#define AK_STR_(x) #x
#define AK_STR(x) AK_STR_(x)

extern "C" {

const char *ak_version(void) {
  return AK_STR(AK_VERSION_MAJOR) "." AK_STR(AK_VERSION_MINOR) "." AK_STR(AK_VERSION_PATCH);
}

int ak_abi_version(void) { return AK_ABI_VERSION; }

const char *ak_get_isa(void) { return attnkern::active_kernels().name; }

int ak_isa_supported(const char *name) {
  return name == nullptr || attnkern::isa_available(name) ? 1 : 0; // NULL means auto
}

ak_status ak_set_isa(const char *name) {
  return attnkern::capi::guarded("ak_set_isa", [&] {
    switch (attnkern::select_isa(name)) {
    case attnkern::IsaChoice::ok:
      return AK_OK;
    case attnkern::IsaChoice::unknown_name:
      return attnkern::capi::fail(
          AK_ERR_BAD_ARGUMENT,
          "ak_set_isa: unknown instruction set \"%.64s\" (expected auto, avx512, "
          "avx2, sse2, neon or scalar)",
          name);
    case attnkern::IsaChoice::unsupported:
      return attnkern::capi::fail(
          AK_ERR_UNSUPPORTED,
          "ak_set_isa: this CPU (or this build) does not support \"%.64s\"; "
          "the instruction set in use stays \"%s\"",
          name, attnkern::active_kernels().name);
    }
    return AK_OK;
  });
}

ak_status ak_set_num_threads(int n) {
  if (n < 0)
    return attnkern::capi::fail(
        AK_ERR_BAD_ARGUMENT, "ak_set_num_threads: n = %d is negative (0 means the OpenMP default)",
        n);
  attnkern::set_thread_setting(n);
  return AK_OK;
}

int ak_get_num_threads(void) { return attnkern::threads_setting_now(); }

ak_status ak_set_num_threads_local(int n) {
  if (n < 0)
    return attnkern::capi::fail(
        AK_ERR_BAD_ARGUMENT,
        "ak_set_num_threads_local: n = %d is negative (0 means follow ak_set_num_threads)", n);
  attnkern::set_thread_local_setting(n);
  return AK_OK;
}

int ak_get_num_threads_local(void) { return attnkern::thread_local_setting(); }

void ak_release_scratch(void) {
  try {
    attnkern::release_cached_scratch();
  } catch (...) { // a mutex that cannot lock: nothing freed, nothing thrown
  }
}

} // extern "C"
