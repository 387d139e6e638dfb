// The implementations attnkern is measured against: OpenBLAS, oneDNN and a
// plain scalar softmax. Only this file's .cpp includes cblas.h and dnnl.h.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace akb::peers {

// ------------------------------------------------------------ threads
void openblas_set_threads(int threads);
void omp_set_threads(int threads);

// ------------------------------------------------------------- sgemm
// C = op(A) * op(B) (alpha 1, beta 0), row-major; op(A) = A^T when trans_a
// (A stored k x m), op(B) = B^T when trans_b (B stored n x k). Return false on
// failure.
bool openblas_sgemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                    const float *a, std::int64_t lda, const float *b, std::int64_t ldb, float *c,
                    std::int64_t ldc);
bool onednn_sgemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                  const float *a, std::int64_t lda, const float *b, std::int64_t ldb, float *c,
                  std::int64_t ldc);
// dnnl_sgemm with any alpha (beta 0): C = alpha * A * op(B). The unfused
// attention path uses it for scale * Q K^T.
bool onednn_sgemm_alpha(bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
                        const float *a, std::int64_t lda, const float *b, std::int64_t ldb,
                        float *c, std::int64_t ldc);

// ----------------------------------------------------------- softmax
// oneDNN softmax (v2 API, accurate) over axis 1 of a dense rows x cols f32
// matrix in plain row-major layout, y = softmax(x). The engine and stream are
// created once per process; the primitive once per object. x may equal y
// (in place; the unfused attention path softmaxes its score matrix in place).
class OnednnSoftmax {
public:
  OnednnSoftmax(std::int64_t rows, std::int64_t cols, const float *x, float *y);
  ~OnednnSoftmax();
  OnednnSoftmax(const OnednnSoftmax &) = delete;
  OnednnSoftmax &operator=(const OnednnSoftmax &) = delete;

  bool ok() const { return error_.empty(); }
  const std::string &error() const { return error_; }
  const std::string &impl_info() const { return impl_info_; } // e.g. "jit:avx512_core"
  bool run();                                                 // executes and waits for the stream

private:
  void init(std::int64_t rows, std::int64_t cols, const float *x, float *y);
  struct State;
  std::unique_ptr<State> s_;
  std::string error_;
  std::string impl_info_;
};

// Plain loop with std::exp per row (max-subtract, exp, sum, divide); rows are
// split across `threads` OpenMP threads (schedule static). Compiled for the
// baseline ISA of the build (no -march), without -ffast-math.
void scalar_softmax(std::int64_t rows, std::int64_t cols, const float *x, float *y, int threads);

// ------------------------------------------------------------ context
std::string openblas_corename();
std::string openblas_config();
std::string onednn_version();       // "2.6.3 (hash ..., cpu runtime OpenMP)"
std::string onednn_effective_isa(); // "avx512_core_bf16", ...

} // namespace akb::peers
