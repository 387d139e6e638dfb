// The per-instruction-set kernel table: the only thing the C API layer knows
// about the kernels. Every entry receives arguments the C API layer has
// already validated; the only failure a kernel can report is running out of
// memory for its scratch buffers.
#pragma once

#include <cstdint>

namespace ak {

struct GemmArgs {
  bool trans_a, trans_b;
  std::int64_t m, n, k;
  float alpha;
  const float *a;
  std::int64_t lda;
  const float *b;
  std::int64_t ldb;
  float beta;
  float *c;
  std::int64_t ldc;
};

struct GemmBatch {
  std::int64_t count;                      // >= 1
  std::int64_t stride_a, stride_b, stride_c; // elements between products
};

enum class KernelStatus { ok, out_of_memory };

struct KernelTable {
  const char *name; // as ak_get_isa() reports it
  KernelStatus (*sgemm)(const GemmArgs &args, const GemmBatch &batch,
                        int threads);
  // Row-wise softmax (log_softmax when `log`) of a rows x cols matrix.
  void (*softmax_rows)(std::int64_t rows, std::int64_t cols, const float *x,
                       std::int64_t ldx, float *y, std::int64_t ldy, bool log,
                       int threads);
  // Softmax along the middle axis of a contiguous [outer, axis, inner] tensor.
  void (*softmax_axis)(std::int64_t outer, std::int64_t axis_len,
                       std::int64_t inner, const float *x, float *y,
                       int threads);
};

// One accessor per instruction-set translation unit that the build compiled.
namespace avx512 { const KernelTable &kernel_table(); }
namespace avx2 { const KernelTable &kernel_table(); }
namespace sse2 { const KernelTable &kernel_table(); }
namespace neon { const KernelTable &kernel_table(); }
namespace scalar { const KernelTable &kernel_table(); }

} // namespace ak
