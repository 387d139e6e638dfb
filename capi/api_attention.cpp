// Attention entry points. The fused kernel is not in this release yet: the
// declarations are part of the ABI from the start, and the calls say so.
#include <cstring>

#include "attnkern.h"
#include "errors.hpp"

extern "C" {

void ak_attention_desc_init(ak_attention_desc *d) {
  if (!d) return;
  std::memset(d, 0, sizeof *d);
  d->struct_size = sizeof *d;
  d->window_left = -1;
  d->window_right = -1;
}

ak_status ak_attention(const ak_attention_desc *, const float *, const float *, const float *,
                       float *) {
  return ak::capi::fail(AK_ERR_UNSUPPORTED,
                        "ak_attention: the fused attention kernel is not implemented in "
                        "attnkern %d.%d.%d yet; nothing was written",
                        AK_VERSION_MAJOR, AK_VERSION_MINOR, AK_VERSION_PATCH);
}

ak_status ak_mha_self_attention(int64_t, int64_t, int64_t, int64_t, int64_t, const float *,
                                const float *, const float *, const float *, ak_mask, float *) {
  return ak::capi::fail(AK_ERR_UNSUPPORTED,
                        "ak_mha_self_attention: needs the fused attention kernel, which is "
                        "not implemented in attnkern %d.%d.%d yet; nothing was written",
                        AK_VERSION_MAJOR, AK_VERSION_MINOR, AK_VERSION_PATCH);
}

} // extern "C"
