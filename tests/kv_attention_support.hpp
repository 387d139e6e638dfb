// Shared by the suites of ak_attention over half-precision and paged K/V
// caches (test_attention_kv_types.cpp, test_attention_paged.cpp): one case
// description, the storage the library reads (f32, f16 or bf16; strided or
// paged through a block table), the float64 reference on the *stored*
// values, and the comparison with the fp32 suite's tolerances.
//
// The reference sees K and V as contiguous fp32 tensors holding exactly the
// values the library reads (rounded to the type, widened back), so the only
// difference left is the library's fp32 arithmetic: the tolerances of
// test_attention.cpp apply unchanged.
//
// Keys no query of their batch can see are poisoned (NaN, +-inf) in both the
// storage and the reference's copy; pages that hold no visible key may be -1
// in the block table; everything between rows, heads, slots and pages is NaN.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "attnkern.h"
#include "reference_attention.hpp"

namespace ak_test {
namespace kv {

// x rounded to the storage type (nearest even) and widened back exactly.
float stored(ak_dtype t, float x);
const char *dtype_name(ak_dtype t);

// q and out: contiguous (all-zero strides), or [b, s, h, d] with padding.
enum class QoLayout { Contiguous, PaddedBshd };
// K and V without paging: all-zero strides, [b, h, s, d] with padding
// between rows, heads and batches, or [b, s, h, d] (a fused projection).
enum class KvLayout { Contiguous, PaddedBhsd, Bshd };
// A pool's [page, kv_head, slot] strides: all 0; [page, head, slot, dim]
// spelled out with gaps between slots, heads and pages; or [page, slot,
// head, dim] (vLLM's layout) with gaps.
enum class PoolLayout { Contiguous, HeadMajorGaps, SlotMajorGaps };
enum class BiasKind { None, Full, PerHead }; // [b,h,q,kv] padded; {0, kv, 0}

struct KvCase {
  std::int64_t batch = 1, heads = 1, kv_heads = 1, q_len = 1, kv_len = 1;
  std::int64_t head_dim = 8, head_dim_v = 0;
  float scale = 0.0f;
  int mask = AK_MASK_NONE;
  std::int64_t window_left = -1, window_right = -1;
  BiasKind bias = BiasKind::None;
  std::vector<std::int32_t> kv_lens; // empty: none
  ak_dtype k_type = AK_F32, v_type = AK_F32;
  QoLayout qo_layout = QoLayout::Contiguous;
  KvLayout kv_layout = KvLayout::Contiguous; // without paging
  std::int64_t pad = 0;                      // of the padded layouts
  // Paging: page_size 0 means none.
  std::int64_t page_size = 0;
  PoolLayout pool = PoolLayout::Contiguous;
  std::int64_t gap = 0;         // of the pool layouts with gaps
  bool shuffle_pages = true;    // page ids a random permutation (else in order)
  bool unneeded_minus1 = true;  // -1 for pages no visible key needs
  std::int64_t extra_pages = 0; // pool pages no entry names (NaN throughout)
  std::int64_t extra_cols = 0;  // block table columns past ceil(kv_len / page_size)
  bool lse = true, probs = true;
  float v_scale = 1.0f; // v ~ N(0, v_scale^2); out's tolerance scales with it
  // Score modifiers: softcap (0: off), ALiBi (slopes 2^(-8 (h + 1) / heads),
  // BLOOM's), sink logits per head (empty: none).
  float softcap = 0.0f;
  bool alibi = false;
  std::vector<float> sinks;
  // Packed sequences: each entry's queries (cu_seqlens_q; empty: none; each
  // <= q_len, then probs must be off) and keys (cu_seqlens_k; empty: none;
  // each <= kv_len, not with paging or kv_lens).
  std::vector<std::int32_t> q_lens, k_lens;
  std::uint32_t seed = 1;
};

std::string describe(const KvCase &c);
// Multiply-adds of the reference, to keep cases cheap.
double work(const KvCase &c);
// Elements of the pools (or K/V tensors) the case allocates.
std::int64_t storage_elements(const KvCase &c);

// Elements of one storage type; ptr() is what ak_attention's k or v gets.
class TypedArray {
public:
  TypedArray() = default;
  TypedArray(ak_dtype t, std::int64_t n); // NaN throughout
  void set(std::int64_t i, float x);      // x rounded to the type
  float get(std::int64_t i) const;        // widened exactly
  const float *ptr() const;               // nullptr when empty
  std::int64_t size() const;

private:
  ak_dtype type_ = AK_F32;
  std::vector<float> f32_;
  std::vector<std::uint16_t> half_;
};

struct KvProblem {
  KvCase c;
  ak_attention_desc desc; // pointers bound by bound()
  std::vector<float> q, out, bias, lse, probs;
  Strides3 qs{0, 0, 0}, os{0, 0, 0};
  std::vector<std::int32_t> kv_lens, block_table;
  std::vector<float> alibi_slopes, sinks;
  std::vector<std::int32_t> cu_q, cu_k; // packed sequences' offsets (empty: none)
  std::int64_t total_q = 0;             // rows of q and out when packed
  TypedArray k, v;                      // what the library reads
  std::vector<float> k_ref, v_ref;      // contiguous [b, hk, kv_len, d] stored values
  std::vector<char> needed;             // [b, page]: the page holds a key some query sees

  std::int64_t dv() const { return desc.head_dim_v ? desc.head_dim_v : desc.head_dim; }
  std::int64_t rows() const { return desc.batch * desc.num_heads * desc.q_len; }
  // Entry b's queries, and the row of q and out where they start.
  std::int64_t queries(std::int64_t b) const { return cu_q.empty() ? desc.q_len : c.q_lens[b]; }
  std::int64_t first_row(std::int64_t b) const { return cu_q.empty() ? 0 : cu_q[b]; }
  // lse's entries: [b, h, q_len], or [h, total_q] when packed.
  std::int64_t lse_rows() const { return cu_q.empty() ? rows() : desc.num_heads * total_q; }
  std::int64_t lse_index(std::int64_t b, std::int64_t h, std::int64_t i) const {
    return cu_q.empty() ? (b * desc.num_heads + h) * desc.q_len + i : h * total_q + cu_q[b] + i;
  }
  ak_attention_desc bound() const;
  // The same call as the reference sees it: contiguous fp32 K and V.
  ak_attention_desc reference_desc() const;
};

KvProblem make_problem(const KvCase &c);
// Fills the outputs with canaries and calls ak_attention.
ak_status run(KvProblem &p);
AttentionResult reference(const KvProblem &p);
// The last call's outputs against the reference (fp32 suite tolerances),
// canaries intact in out's padding and past lse and probs.
::testing::AssertionResult matches(const KvProblem &p, const AttentionResult &ref);
// run(), then matches().
::testing::AssertionResult run_and_check(KvProblem &p);
// out, lse and probs of two calls hold the same bits.
::testing::AssertionResult identical(const KvProblem &a, const KvProblem &b);
// run_and_check() on every case (traced by describe()), stopping after 10
// failures: the sampled grids of the KV, paged and modifier suites.
void expect_cases_match(const std::vector<KvCase> &cases);
// Runs p with 1, 2 and 3 threads (restoring 0 after): the same bits.
::testing::AssertionResult same_bits_for_thread_counts(KvProblem &p);

} // namespace kv
} // namespace ak_test
