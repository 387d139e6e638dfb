// ak_position_encoding: the sinusoidal table of "Attention Is All You Need".
#include <cmath>

#include "attnkern.h"
#include "errors.hpp"
#include "validate.hpp"

extern "C" {

ak_status ak_position_encoding(int64_t max_len, int64_t dim, float base, float *out) {
  return attnkern::capi::guarded("ak_position_encoding", [&] {
    attnkern::capi::ArgCheck ck("ak_position_encoding");
    ck.size("max_len", max_len).size("dim", dim);
    if (!(std::isfinite(base) && base > 0.0f))
      ck.fail(AK_ERR_BAD_ARGUMENT, "base = %g must be finite and > 0", static_cast<double>(base));
    const std::int64_t total = ck.product("max_len * dim", max_len, dim);
    ck.pointer("out", out, total);
    if (!ck.ok()) return ck.result();
    // Angles in double: p / base^(2i/dim) reaches p ~ 1e5 where float angles
    // would already be off by more than the 1e-7 the table is checked to.
    const std::int64_t pairs = dim / 2;
    for (std::int64_t p = 0; p < max_len; ++p) {
      float *row = out + p * dim;
      for (std::int64_t i = 0; i < pairs; ++i) {
        const double angle = static_cast<double>(p) * std::pow(static_cast<double>(base),
                                                               -2.0 * i / static_cast<double>(dim));
        row[2 * i] = static_cast<float>(std::sin(angle));
        row[2 * i + 1] = static_cast<float>(std::cos(angle));
      }
      if (dim % 2 == 1) row[dim - 1] = 0.0f;
    }
    return AK_OK;
  });
}

} // extern "C"
