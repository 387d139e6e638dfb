// The guard-page harness: buffers of exactly the size attnkern.h requires,
// placed so that the byte past their end (or the byte before their start)
// lies in a PROT_NONE page, and a runner that calls each case once with
// ordinary heap buffers and once per guarded placement, then compares the
// outputs. An access outside a buffer faults (SIGSEGV names the case); a
// result that differs from the ordinary buffers' run, or an output element
// the call should have written but did not, is a failure.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "attnkern.h"

namespace guard {

enum class Placement { Plain, GuardAfter, GuardBefore };

// A quiet NaN that no kernel produces from finite inputs: an output element
// that still holds it was never written.
constexpr std::uint32_t kCanary32 = 0x7FC0CAFEu;
// A NaN in both f16 and bf16.
constexpr std::uint16_t kCanary16 = 0x7FDAu;

inline std::int64_t esize(ak_dtype t) { return t == AK_F32 ? 4 : 2; }

// What a case keeps of one output buffer after its call.
struct Snapshot {
  std::string name;
  ak_dtype type;
  std::vector<std::uint32_t> bits; // one entry per element (16-bit values widened)
  std::int64_t written;            // elements the call must write (-1: not counted)
  bool finite;                     // every written element must be finite
};

// Owns the buffers of one run of a case. Contents are a function of the
// order of the calls alone, so every placement sees the same data.
class Arena {
public:
  explicit Arena(Placement p) : placement_(p) {}
  ~Arena();
  Arena(const Arena &) = delete;
  Arena &operator=(const Arena &) = delete;

  Placement placement() const { return placement_; }
  bool plain() const { return placement_ == Placement::Plain; }

  // n elements of `size` bytes, uninitialized.
  void *bytes(std::int64_t n, std::int64_t size);
  // Uniform in [-scale, scale].
  float *in(std::int64_t n, float scale = 1.0f);
  // Canary-filled.
  float *out(std::int64_t n);
  // n values of type t (random fp32 in [-scale, scale], rounded to t).
  void *in_typed(ak_dtype t, std::int64_t n, float scale = 1.0f);
  void *out_typed(ak_dtype t, std::int64_t n);
  template <class T> T *copy(const std::vector<T> &v) {
    T *p = static_cast<T *>(bytes(static_cast<std::int64_t>(v.size()), sizeof(T)));
    for (std::size_t i = 0; i < v.size(); ++i) p[i] = v[i];
    return p;
  }

  // Records an output for the comparison between placements.
  void keep(const char *name, const void *p, ak_dtype t, std::int64_t n, std::int64_t written,
            bool finite = true);
  void keep(const char *name, const float *p, std::int64_t n, std::int64_t written,
            bool finite = true) {
    keep(name, p, AK_F32, n, written, finite);
  }
  // Records a failure unless s is AK_OK.
  void expect_ok(ak_status s, const char *call);
  void check(bool ok, const std::string &what);

  const std::vector<Snapshot> &snapshots() const { return kept_; }
  std::uint64_t next_seed() { return ++seed_; }

private:
  struct Block {
    void *map;
    std::size_t map_bytes;
    void *heap;
  };
  Placement placement_;
  std::vector<Block> blocks_;
  std::vector<Snapshot> kept_;
  std::uint64_t seed_ = 0;
};

// Runs `body` with ordinary buffers, then with each guarded placement, on
// the current instruction set and thread count, and compares.
void run_case(const std::string &name, const std::function<void(Arena &)> &body);

// Failures so far (each printed as it is found), and cases run.
void fail(const std::string &message);
int failures();
int cases_run();
// The instruction set and thread count that failure messages name.
void set_config(const char *isa, int threads);
// Prints the current case if the process faults (an access outside a
// buffer), then lets the fault kill it.
void install_fault_report();

// Random fp32 in [-scale, scale] from a seed (splitmix64).
void fill_uniform(float *p, std::int64_t n, std::uint64_t seed, float scale);

// Elements of a rows x cols matrix with leading dimension ld, as the header
// counts them: (rows - 1) * ld + cols, 0 if empty.
inline std::int64_t matrix_extent(std::int64_t rows, std::int64_t cols, std::int64_t ld) {
  return rows == 0 || cols == 0 ? 0 : (rows - 1) * ld + cols;
}
// Elements of a [e0, e1, e2, dim] tensor with strides s (dim contiguous).
inline std::int64_t tensor_extent(const std::int64_t e[3], const std::int64_t s[3],
                                  std::int64_t dim) {
  if (e[0] == 0 || e[1] == 0 || e[2] == 0 || dim == 0) return 0;
  return (e[0] - 1) * s[0] + (e[1] - 1) * s[1] + (e[2] - 1) * s[2] + dim;
}

// The suites (one file each).
void gemm_softmax_cases();
void storage_cases();
void attention_cases();
void paged_cases();
void bad_id_cases();

} // namespace guard
