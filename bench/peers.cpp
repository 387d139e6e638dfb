#include "peers.hpp"

#include <cblas.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace akb::peers {

// ------------------------------------------------------------ threads

void openblas_set_threads(int threads) { ::openblas_set_num_threads(threads); }
void omp_set_threads(int threads) { ::omp_set_num_threads(threads); }

// ------------------------------------------------------------- sgemm

bool openblas_sgemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                    const float *a, std::int64_t lda, const float *b, std::int64_t ldb, float *c,
                    std::int64_t ldc) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, static_cast<blasint>(m), static_cast<blasint>(n),
              static_cast<blasint>(k), 1.0f, a, static_cast<blasint>(lda), b,
              static_cast<blasint>(ldb), 0.0f, c, static_cast<blasint>(ldc));
  return true;
}

bool onednn_sgemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                  const float *a, std::int64_t lda, const float *b, std::int64_t ldb, float *c,
                  std::int64_t ldc) {
  // dnnl_sgemm is row-major (unlike the Fortran BLAS convention).
  return dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, 1.0f, a, lda, b, ldb, 0.0f,
                    c, ldc) == dnnl_success;
}

bool onednn_sgemm_alpha(bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
                        const float *a, std::int64_t lda, const float *b, std::int64_t ldb,
                        float *c, std::int64_t ldc) {
  return dnnl_sgemm('N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, 0.0f, c, ldc) ==
         dnnl_success;
}

// ----------------------------------------------------------- softmax

namespace {

const char *status_name(dnnl_status_t s) {
  switch (s) {
  case dnnl_success:
    return "success";
  case dnnl_out_of_memory:
    return "out_of_memory";
  case dnnl_invalid_arguments:
    return "invalid_arguments";
  case dnnl_unimplemented:
    return "unimplemented";
  case dnnl_iterator_ends:
    return "iterator_ends";
  case dnnl_runtime_error:
    return "runtime_error";
  case dnnl_not_required:
    return "not_required";
  }
  return "unknown";
}

// One CPU engine and one in-order stream for the whole process.
struct Runtime {
  dnnl_engine_t engine = nullptr;
  dnnl_stream_t stream = nullptr;
  dnnl_status_t status = dnnl_success;

  Runtime() {
    status = dnnl_engine_create(&engine, dnnl_cpu, 0);
    if (status == dnnl_success)
      status = dnnl_stream_create(&stream, engine, dnnl_stream_default_flags);
  }
  ~Runtime() {
    if (stream != nullptr) dnnl_stream_destroy(stream);
    if (engine != nullptr) dnnl_engine_destroy(engine);
  }
  Runtime(const Runtime &) = delete;
  Runtime &operator=(const Runtime &) = delete;

  static Runtime &get() {
    static Runtime rt;
    return rt;
  }
};

} // namespace

struct OnednnSoftmax::State {
  dnnl_primitive_desc_t pd = nullptr;
  dnnl_primitive_t prim = nullptr;
  dnnl_memory_t src = nullptr;
  dnnl_memory_t dst = nullptr;

  ~State() {
    if (dst != nullptr) dnnl_memory_destroy(dst);
    if (src != nullptr) dnnl_memory_destroy(src);
    if (prim != nullptr) dnnl_primitive_destroy(prim);
    if (pd != nullptr) dnnl_primitive_desc_destroy(pd);
  }
};

OnednnSoftmax::OnednnSoftmax(std::int64_t rows, std::int64_t cols, const float *x, float *y)
    : s_(new State) {
  init(rows, cols, x, y);
}

void OnednnSoftmax::init(std::int64_t rows, std::int64_t cols, const float *x, float *y) {
  Runtime &rt = Runtime::get();
  auto fail = [this](const char *what, dnnl_status_t st) {
    error_ = std::string("oneDNN softmax: ") + what + " failed (" + status_name(st) + ")";
  };
  if (rt.status != dnnl_success) return fail("engine/stream creation", rt.status);

  dnnl_memory_desc_t md;
  const dnnl_dims_t dims = {rows, cols};
  dnnl_status_t st = dnnl_memory_desc_init_by_tag(&md, 2, dims, dnnl_f32, dnnl_ab);
  if (st != dnnl_success) return fail("dnnl_memory_desc_init_by_tag", st);

  dnnl_softmax_v2_desc_t desc;
  st = dnnl_softmax_v2_forward_desc_init(&desc, dnnl_forward_inference, dnnl_softmax_accurate, &md,
                                         &md, 1);
  if (st != dnnl_success) return fail("dnnl_softmax_v2_forward_desc_init", st);
  st = dnnl_primitive_desc_create(&s_->pd, &desc, nullptr, rt.engine, nullptr);
  if (st != dnnl_success) return fail("dnnl_primitive_desc_create", st);
  const char *info = nullptr;
  if (dnnl_primitive_desc_query(s_->pd, dnnl_query_impl_info_str, 0, &info) == dnnl_success &&
      info != nullptr)
    impl_info_ = info;
  st = dnnl_primitive_create(&s_->prim, s_->pd);
  if (st != dnnl_success) return fail("dnnl_primitive_create", st);
  // The memory objects wrap the caller's buffers; nothing is copied.
  st = dnnl_memory_create(&s_->src, &md, rt.engine, const_cast<float *>(x));
  if (st != dnnl_success) return fail("dnnl_memory_create(src)", st);
  st = dnnl_memory_create(&s_->dst, &md, rt.engine, y);
  if (st != dnnl_success) return fail("dnnl_memory_create(dst)", st);
}

OnednnSoftmax::~OnednnSoftmax() = default;

bool OnednnSoftmax::run() {
  if (!ok()) return false;
  Runtime &rt = Runtime::get();
  const dnnl_exec_arg_t args[2] = {{DNNL_ARG_SRC, s_->src}, {DNNL_ARG_DST, s_->dst}};
  if (dnnl_primitive_execute(s_->prim, rt.stream, 2, args) != dnnl_success) return false;
  return dnnl_stream_wait(rt.stream) == dnnl_success;
}

namespace {
void scalar_softmax_row(const float *x, float *y, std::int64_t cols) {
  float mx = x[0];
  for (std::int64_t j = 1; j < cols; ++j) mx = std::max(mx, x[j]);
  float sum = 0.0f;
  for (std::int64_t j = 0; j < cols; ++j) {
    y[j] = std::exp(x[j] - mx);
    sum += y[j];
  }
  for (std::int64_t j = 0; j < cols; ++j) y[j] /= sum;
}
} // namespace

void scalar_softmax(std::int64_t rows, std::int64_t cols, const float *x, float *y, int threads) {
  if (cols <= 0) return;
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
  for (std::int64_t i = 0; i < rows; ++i) scalar_softmax_row(x + i * cols, y + i * cols, cols);
}

// ------------------------------------------------------------ context

std::string openblas_corename() {
  const char *s = ::openblas_get_corename();
  return s != nullptr ? s : "?";
}

std::string openblas_config() {
  const char *s = ::openblas_get_config();
  return s != nullptr ? s : "?";
}

std::string onednn_version() {
  const dnnl_version_t *v = dnnl_version();
  const char *runtime = v->cpu_runtime == DNNL_RUNTIME_OMP          ? "OpenMP"
                        : v->cpu_runtime == DNNL_RUNTIME_TBB        ? "TBB"
                        : v->cpu_runtime == DNNL_RUNTIME_SEQ        ? "sequential"
                        : v->cpu_runtime == DNNL_RUNTIME_THREADPOOL ? "threadpool"
                                                                    : "other";
  char buf[160];
  std::snprintf(buf, sizeof buf, "%d.%d.%d (hash %s, cpu runtime %s)", v->major, v->minor, v->patch,
                v->hash != nullptr ? v->hash : "?", runtime);
  return buf;
}

std::string onednn_effective_isa() {
  switch (dnnl_get_effective_cpu_isa()) {
  case dnnl_cpu_isa_all:
    return "all";
  case dnnl_cpu_isa_sse41:
    return "sse41";
  case dnnl_cpu_isa_avx:
    return "avx";
  case dnnl_cpu_isa_avx2:
    return "avx2";
  case dnnl_cpu_isa_avx512_mic:
    return "avx512_mic";
  case dnnl_cpu_isa_avx512_mic_4ops:
    return "avx512_mic_4ops";
  case dnnl_cpu_isa_avx512_core:
    return "avx512_core";
  case dnnl_cpu_isa_avx512_core_vnni:
    return "avx512_core_vnni";
  case dnnl_cpu_isa_avx512_core_bf16:
    return "avx512_core_bf16";
  case dnnl_cpu_isa_avx512_core_amx:
    return "avx512_core_amx";
  case dnnl_cpu_isa_avx2_vnni:
    return "avx2_vnni";
  }
  return "unknown";
}

} // namespace akb::peers
