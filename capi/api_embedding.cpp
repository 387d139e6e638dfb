// ak_embedding: validation (every id first), then the kernel.
#include <cstdint>

#include "../src/dispatch.hpp"
#include "../src/threading.hpp"
#include "attnkern.h"
#include "errors.hpp"
#include "validate.hpp"

namespace attnkern::capi {
namespace {

ak_status embedding_api(std::int64_t n_tokens, const std::int32_t *ids, std::int64_t vocab_size,
                        std::int64_t dim, const float *table, std::int64_t ld_table, float *out,
                        std::int64_t ld_out) {
  ArgCheck ck("ak_embedding");
  ck.size("n_tokens", n_tokens).size("vocab_size", vocab_size).size("dim", dim);
  if (!ck.ok()) return ck.result();
  ck.leading_dim("ld_table", ld_table, dim, "dim");
  ck.leading_dim("ld_out", ld_out, dim, "dim: out's rows must not overlap");
  const std::int64_t table_extent = ck.matrix_extent("table", vocab_size, dim, ld_table);
  const std::int64_t out_extent = ck.matrix_extent("out", n_tokens, dim, ld_out);
  ck.pointer("ids", ids, n_tokens, "token ids");
  ck.pointer("table", table, table_extent).pointer("out", out, out_extent);
  if (!ck.ok()) return ck.result();
  // Every id before any row is written: one out of range refuses the call.
  for (std::int64_t t = 0; t < n_tokens; ++t) {
    if (ids[t] >= vocab_size) {
      ck.fail(AK_ERR_BAD_ARGUMENT, "ids[%lld] = %d is not below vocab_size = %lld",
              static_cast<long long>(t), static_cast<int>(ids[t]),
              static_cast<long long>(vocab_size));
      return ck.result();
    }
  }
  if (out_extent == 0) return AK_OK;
  EmbeddingArgs a{n_tokens, dim, ids, table, ld_table, out, ld_out};
  active_kernels().embedding(a, threads_for_call());
  return AK_OK;
}

} // namespace
} // namespace attnkern::capi

extern "C" {

ak_status ak_embedding(int64_t n_tokens, const int32_t *ids, int64_t vocab_size, int64_t dim,
                       const float *table, int64_t ld_table, float *out, int64_t ld_out) {
  return attnkern::capi::guarded("ak_embedding", [&] {
    return attnkern::capi::embedding_api(n_tokens, ids, vocab_size, dim, table, ld_table, out,
                                         ld_out);
  });
}

} // extern "C"
