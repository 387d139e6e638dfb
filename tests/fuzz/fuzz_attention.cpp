// Coverage-guided differential fuzzing of ak_attention (libFuzzer).
//
// Each input picks a shape, a mask, windows, a bias and its broadcasting,
// per-batch kv_lens, the four tensors' layouts, the optional outputs, the
// instruction set and the thread count, and places a few special values (NaN,
// +inf, -inf) in q, k, v or the bias; the data are normals from a seed the
// input also picks (q and k scaled by d^-1/4, so that scores stay moderate).
// Last come the storage of K and V (0.2): f32, f16 or bf16 each, and
// optionally paged (page size, pool layout with gaps, shuffled page ids, -1
// for pages no visible key needs, junk past the pages of kv_len, and a few
// ids overwritten with ones out of range); an input that ends before them
// keeps fp32, unpaged K and V, as the committed inputs had. After them come
// the score modifiers (softcap, ALiBi slopes, sinks with -inf, +inf and NaN
// among them) and packed sequences: queries (cu_seqlens_q, q and out re-laid
// as one tensor, no probs) and, without pages or kv_lens, keys
// (cu_seqlens_k), with offsets now and then spoiled on purpose. The reference
// reads the stored (rounded) values. The call must then:
// - when the descriptor is one the generator made invalid on purpose (an
//   unknown mask, heads not a multiple of kv heads, a negative scale, a
//   kv_lens entry out of range, an out-of-range page id that a visible key
//   needs): return an error with a message, and write nothing (an
//   out-of-range id needed only by keys the bias hides may go either way);
// - otherwise: return AK_OK and agree with the float64 reference
//   (tests/reference_attention.cpp) within the suite's tolerances, with
//   NaN exactly where the reference has NaN, exact zeros and -inf where no
//   key is visible, out's padding and the memory past lse and probs
//   untouched; and give the same bits on the other thread count.
// A disagreement aborts, so that libFuzzer keeps the input.
// (The library runs small problems on one thread whatever the setting, so
// the thread-count comparison bites only on the larger inputs: about one
// in ten of the committed attention inputs, one in three of the softmax
// and sgemm ones.)
//
// Build and run: scripts/fuzz.sh (Clang, ASan and UBSan). The same file,
// built with AK_FUZZ_STANDALONE, replays the inputs named on its command
// line (tests/fuzz/corpus/attention.txt, run by ctest).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "../../src/convert/half.hpp"
#include "attnkern.h"
#include "fuzz/fuzz_attention_data.hpp"
#include "fuzz/fuzz_support.hpp"
#include "reference_attention.hpp"

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
using ak_fuzz::kCanary;
using ak_fuzz::same_bits;
using ak_fuzz::Special;
using ak_fuzz::Store;
using ak_fuzz::stored;
using ak_fuzz::Tensor;
constexpr double kOutTol = 1e-5, kLseTol = 1e-5, kProbsTol = 1e-6; // as tests/test_attention.cpp

[[noreturn]] void fail(const char *what, long long a = 0, long long b = 0, double got = 0,
                       double want = 0) {
  ak_fuzz::fail("fuzz_attention", what, a, b, got, want);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *bytes, std::size_t size) {
  ak_fuzz::Choices in(bytes, size);
  const char *isa = in.isa();
  const int threads = in.threads();

  ak_attention_desc d;
  ak_attention_desc_init(&d);
  bool invalid = false;
  d.batch = in.in(1, 3);
  d.num_kv_heads = in.in(1, 3);
  d.num_heads = d.num_kv_heads * in.in(1, 4);
  if (in.in<int>(0, 31) == 0 && d.num_kv_heads > 1)
    d.num_heads += 1, invalid = true; // not a multiple of the kv heads
  const bool long_kv = in.in<int>(0, 7) == 0;
  d.q_len = in.in(0, long_kv ? 4 : 40);
  d.kv_len = in.in(0, long_kv ? 1100 : 80);
  d.head_dim = in.in(1, long_kv ? 40 : 72);
  d.head_dim_v = in.in(0, long_kv ? 40 : 72);
  switch (in.in<int>(0, 3)) {
  case 0:
    d.scale = 0.0f;
    break;
  case 1:
    d.scale = in.real(0.01f, 1.0f);
    break;
  case 2: // (a negative scale is refused)
    d.scale = in.flag() ? -in.real(0.01f, 1.0f) : in.real(1.0f, 3.0f);
    invalid = invalid || d.scale < 0.0f;
    break;
  default:
    d.scale = 1.0f;
    break;
  }
  d.mask = in.in<std::int32_t>(0, 2);
  if (in.in<int>(0, 63) == 0) d.mask = 3, invalid = true;
  auto window = [&]() -> std::int64_t {
    const int kind = in.in<int>(0, 3);
    if (kind <= 1) return -1;
    if (kind == 2) return in.in(0, 4);
    return in.in(0, d.kv_len + 3);
  };
  d.window_left = window();
  d.window_right = window();
  const std::int64_t dv = d.head_dim_v == 0 ? d.head_dim : d.head_dim_v;

  std::vector<std::int32_t> kv_lens;
  if (in.flag()) {
    for (std::int64_t b = 0; b < d.batch; ++b)
      kv_lens.push_back(in.in<std::int32_t>(0, static_cast<std::int32_t>(d.kv_len)));
    if (in.in<int>(0, 31) == 0) {
      kv_lens.back() = in.flag() ? -1 : static_cast<std::int32_t>(d.kv_len + 1);
      invalid = true;
    }
    d.kv_lens = kv_lens.data();
  }

  Tensor q, k, v, o;
  const auto pad = [&] { return in.in(0, 5); };
  q.shape(in.in<int>(0, 2), d.batch, d.num_heads, d.q_len, d.head_dim, pad());
  k.shape(in.in<int>(0, 2), d.batch, d.num_kv_heads, d.kv_len, d.head_dim, pad());
  v.shape(in.in<int>(0, 2), d.batch, d.num_kv_heads, d.kv_len, dv, pad());
  o.shape(in.in<int>(0, 2), d.batch, d.num_heads, d.q_len, dv, pad());
  std::memcpy(d.q_strides, q.strides, sizeof q.strides);
  std::memcpy(d.k_strides, k.strides, sizeof k.strides);
  std::memcpy(d.v_strides, v.strides, sizeof v.strides);
  std::memcpy(d.o_strides, o.strides, sizeof o.strides);

  // The bias: each of its [b, h, q] axes either strided or broadcast (0).
  std::vector<float> bias;
  if (in.flag()) {
    const std::int64_t sq = d.kv_len, sh = d.q_len * sq, sb = d.num_heads * sh;
    d.bias_strides[0] = in.flag() ? sb : 0;
    d.bias_strides[1] = in.flag() ? sh : 0;
    d.bias_strides[2] = in.flag() ? sq : 0;
    bias.assign(static_cast<std::size_t>(d.batch * sb + 1), 0.0f);
    d.bias = bias.data();
  }

  // Unit normals (scaled so that scores stay moderate), then the specials.
  std::mt19937 rng(in.u32());
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const float qk_scale = 1.0f / std::sqrt(std::sqrt(static_cast<float>(d.head_dim)));
  auto fill = [&](Tensor &t, std::int64_t heads, std::int64_t len, std::int64_t dim, float s) {
    for (std::int64_t b = 0; b < d.batch; ++b)
      for (std::int64_t h = 0; h < heads; ++h)
        for (std::int64_t i = 0; i < len; ++i)
          for (std::int64_t c = 0; c < dim; ++c) *(t.at(b, h, i) + c) = s * normal(rng);
  };
  fill(q, d.num_heads, d.q_len, d.head_dim, qk_scale);
  fill(k, d.num_kv_heads, d.kv_len, d.head_dim, qk_scale);
  fill(v, d.num_kv_heads, d.kv_len, dv, 1.0f);
  const bool bias_masks = in.flag();
  for (float &x : bias) {
    x = normal(rng);
    if (bias_masks && (rng() & 7) == 0) x = -kInf;
  }
  // Special values go either into q, k and the bias or into v, not both:
  // the reference weighs a key of weight 0 (a -inf score) times an Inf in v
  // as NaN, where the header says such a key feeds nothing.
  const int n_special = in.in<int>(0, 3);
  const bool specials_in_v = in.flag();
  for (int s = 0; s < n_special; ++s) {
    static const float kValues[] = {kNaN, kInf, -kInf};
    const float value = kValues[in.in<int>(0, 2)];
    const std::uint32_t where = in.u32();
    std::vector<float> *t = specials_in_v ? &v.data : nullptr;
    if (!specials_in_v) {
      const int which = in.in<int>(0, 2);
      t = which == 0 ? &q.data : which == 1 ? &k.data : &bias;
    }
    // Only over real entries: a canary slot (padding) stays as it is.
    if (t->size() > 1) {
      float &x = (*t)[where % (t->size() - 1)];
      if (x != kCanary) x = value;
    }
  }

  const bool want_lse = in.flag();
  bool want_probs = in.flag();
  const std::int64_t rows = d.batch * d.num_heads * d.q_len, kTail = 4;
  std::vector<float> lse(static_cast<std::size_t>(rows + kTail), kCanary);
  std::vector<float> probs(static_cast<std::size_t>(rows * d.kv_len + kTail), kCanary);
  if (want_lse) d.lse = lse.data();
  if (want_probs) d.probs = probs.data();

  // The storage types: k and v now hold the stored values (their padding
  // keeps its canaries), which the reference reads through ref_d.
  d.k_type = in.in<int>(0, 2);
  d.v_type = in.in<int>(0, 2);
  for (float &x : k.data)
    if (x != kCanary) x = stored(static_cast<ak_dtype>(d.k_type), x);
  for (float &x : v.data)
    if (x != kCanary) x = stored(static_cast<ak_dtype>(d.v_type), x);
  ak_attention_desc ref_d = d;
  ref_d.k_type = ref_d.v_type = AK_F32;
  Store ks(static_cast<ak_dtype>(d.k_type), 0), vs(static_cast<ak_dtype>(d.v_type), 0);
  std::vector<std::int32_t> table;
  bool either = false; // an out-of-range id only bias-hidden keys need
  bool page_invalid = false; // one a visible key needs
  if (!in.flag()) {
    ks = Store(ks.type, k.data.size()), vs = Store(vs.type, v.data.size());
    for (std::size_t e = 0; e < k.data.size(); ++e) ks.set(e, k.data[e]);
    for (std::size_t e = 0; e < v.data.size(); ++e) vs.set(e, v.data[e]);
  } else {
    const int size_kind = in.in<int>(0, 3);
    const std::int64_t ps = size_kind == 0   ? in.in(1, 8)
                            : size_kind == 1 ? 16
                            : size_kind == 2 ? in.in(1, 70)
                                             : 4096;
    const int layout = in.in<int>(0, 2); // contiguous; head-major, slot-major with gaps
    const std::int64_t gap = in.in(1, 4);
    const std::int64_t pps = (d.kv_len + ps - 1) / ps, stride = pps + in.in(0, 2);
    const std::int64_t n_pages = d.batch * pps + in.in(0, 2);
    const bool minus1 = in.flag();
    const int n_bad = in.in<int>(0, 3);
    d.page_size = ps, d.num_pages = n_pages, d.block_table_stride = stride;
    for (int i = 0; i < 3; ++i) d.k_strides[i] = d.v_strides[i] = 0;
    // [page, head, slot] strides of a pool of rows of dim elements, and its length.
    auto pool = [&](std::int64_t dim, std::int64_t desc_strides[3], std::int64_t s[3]) {
      if (layout == 0)
        s[2] = dim, s[1] = ps * dim, s[0] = d.num_kv_heads * ps * dim;
      else if (layout == 1)
        s[2] = dim + gap, s[1] = ps * s[2] + gap, s[0] = d.num_kv_heads * s[1] + gap;
      else
        s[1] = dim + gap, s[2] = d.num_kv_heads * s[1] + gap, s[0] = ps * s[2] + gap;
      if (layout != 0) std::memcpy(desc_strides, s, 3 * sizeof *s);
      return n_pages == 0
                 ? 0
                 : (n_pages - 1) * s[0] + (d.num_kv_heads - 1) * s[1] + (ps - 1) * s[2] + dim;
    };
    std::int64_t kps[3], vps[3];
    ks = Store(ks.type, static_cast<std::size_t>(pool(d.head_dim, d.k_page_strides, kps)));
    vs = Store(vs.type, static_cast<std::size_t>(pool(dv, d.v_page_strides, vps)));
    // Pages some query needs by position, and by position and bias.
    std::vector<char> by_pos(static_cast<std::size_t>(d.batch * pps), 0), by_all(by_pos);
    for (std::int64_t b = 0; b < d.batch && !invalid; ++b)
      for (std::int64_t i = 0; i < d.q_len; ++i) {
        const ak_test::KeyRange r = ak_test::visible_key_range(d, b, i);
        for (std::int64_t j = r.begin; j < r.end; ++j) {
          by_pos[b * pps + j / ps] = 1;
          for (std::int64_t h = 0; h < d.num_heads; ++h)
            if (ak_test::key_visible(d, b, h, i, j)) by_all[b * pps + j / ps] = 1;
        }
      }
    std::vector<std::int32_t> perm(static_cast<std::size_t>(n_pages));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    table.assign(static_cast<std::size_t>(d.batch * stride + 1), -1); // one more: never empty
    for (std::int64_t b = 0; b < d.batch; ++b)
      for (std::int64_t col = 0; col < stride; ++col)
        table[b * stride + col] = col >= pps ? static_cast<std::int32_t>(n_pages + col)
                                  : minus1 && !by_pos[b * pps + col] ? -1
                                                                     : perm[b * pps + col];
    for (std::int64_t b = 0; b < d.batch; ++b)
      for (std::int64_t hk = 0; hk < d.num_kv_heads; ++hk)
        for (std::int64_t j = 0; j < d.kv_len; ++j) {
          const std::int64_t page = table[b * stride + j / ps];
          if (page < 0) continue;
          const std::int64_t ko = page * kps[0] + hk * kps[1] + (j % ps) * kps[2];
          const std::int64_t vo = page * vps[0] + hk * vps[1] + (j % ps) * vps[2];
          for (std::int64_t c = 0; c < d.head_dim; ++c) ks.set(ko + c, k.at(b, hk, j)[c]);
          for (std::int64_t c = 0; c < dv; ++c) vs.set(vo + c, v.at(b, hk, j)[c]);
        }
    for (int n = 0; n < n_bad && d.batch * stride > 0; ++n) {
      const std::int64_t entry = in.u32() % (d.batch * stride), col = entry % stride;
      const std::int32_t bad[] = {-1, static_cast<std::int32_t>(n_pages),
                                  std::numeric_limits<std::int32_t>::min(),
                                  static_cast<std::int32_t>(n_pages + 7)};
      table[entry] = bad[in.in<int>(0, 3)];
      if (col < pps && by_all[entry / stride * pps + col])
        page_invalid = true;
      else if (col < pps && by_pos[entry / stride * pps + col])
        either = true;
    }
    d.block_table = table.data();
  }

  // The score modifiers and packed sequences (also 0.2), last: an input
  // that ends before them has none.
  std::vector<float> slopes, sinks;
  if (in.flag()) ref_d.softcap = d.softcap = in.real(0.5f, 50.0f);
  if (in.flag()) {
    for (std::int64_t h = 0; h < d.num_heads; ++h) slopes.push_back(in.real(0.0f, 0.25f));
    ref_d.alibi_slopes = d.alibi_slopes = slopes.data();
  }
  if (in.flag()) {
    for (std::int64_t h = 0; h < d.num_heads; ++h) {
      const int kind = in.in<int>(0, 15);
      sinks.push_back(kind == 0 ? -kInf : kind == 1 ? kInf : kind == 2 ? kNaN : in.real(-6, 6));
    }
    ref_d.sinks = d.sinks = sinks.data();
  }
  ak_fuzz::Packed packed_q, packed_k;
  if (in.flag()) { // queries packed: q and out one [1, heads, total] tensor each
    packed_q.pack(in, d.batch, d.q_len);
    invalid = invalid || packed_q.invalid;
    packed_q.repack(q, in.in<int>(0, 2), d.num_heads, d.head_dim, pad());
    packed_q.repack(o, in.in<int>(0, 2), d.num_heads, dv, pad());
    std::memcpy(d.q_strides, q.strides, sizeof q.strides);
    std::memcpy(d.o_strides, o.strides, sizeof o.strides);
    std::memcpy(ref_d.q_strides, q.strides, sizeof q.strides);
    ref_d.cu_seqlens_q = d.cu_seqlens_q = packed_q.cu.data();
    d.probs = ref_d.probs = nullptr, want_probs = false;
    lse.assign(static_cast<std::size_t>(d.num_heads * packed_q.total + kTail), kCanary);
    if (want_lse) d.lse = lse.data();
  }
  if (!d.block_table && kv_lens.empty() && in.flag()) { // keys packed too
    packed_k.pack(in, d.batch, d.kv_len);
    invalid = invalid || packed_k.invalid;
    const int layout = in.in<int>(0, 2);
    const std::int64_t kpad = pad();
    packed_k.repack(k, layout, d.num_kv_heads, d.head_dim, kpad);
    packed_k.repack(v, layout, d.num_kv_heads, dv, kpad);
    ks = Store(ks.type, k.data.size()), vs = Store(vs.type, v.data.size());
    for (std::size_t e = 0; e < k.data.size(); ++e) ks.set(e, k.data[e]);
    for (std::size_t e = 0; e < v.data.size(); ++e) vs.set(e, v.data[e]);
    std::memcpy(d.k_strides, k.strides, sizeof k.strides);
    std::memcpy(d.v_strides, v.strides, sizeof v.strides);
    std::memcpy(ref_d.k_strides, k.strides, sizeof k.strides);
    std::memcpy(ref_d.v_strides, v.strides, sizeof v.strides);
    ref_d.cu_seqlens_k = d.cu_seqlens_k = packed_k.cu.data();
  }
  // Pages are needed for q_len queries; packed ones (q_len_b <= q_len) may
  // need fewer (the hull of their keys lies inside), so a bad id may be
  // needed by none of them.
  if (packed_q.cu.empty())
    invalid = invalid || page_invalid;
  else
    either = either || page_invalid;
  const std::int64_t lse_rows = packed_q.cu.empty() ? rows : d.num_heads * packed_q.total;
  // Entry b's queries, where they lie in q and out, and where their lse goes.
  const auto queries = [&](std::int64_t b) {
    return packed_q.cu.empty() ? d.q_len : packed_q.cu[b + 1] - packed_q.cu[b];
  };
  const auto q_row = [&](std::int64_t b, std::int64_t i) {
    return packed_q.cu.empty() ? i : packed_q.cu[b] + i;
  };
  const auto lse_at = [&](std::int64_t b, std::int64_t h, std::int64_t i) {
    return packed_q.cu.empty() ? (b * d.num_heads + h) * d.q_len + i
                               : h * packed_q.total + packed_q.cu[b] + i;
  };

  if (ak_set_isa(isa) != AK_OK) fail("ak_set_isa");
  ak_set_num_threads(threads);
  const ak_status st = ak_attention(&d, q.data.data(), ks.ptr(), vs.ptr(), o.data.data());
  if (invalid || (either && st != AK_OK)) {
    if (st == AK_OK) fail("an invalid descriptor was accepted");
    if (std::strlen(ak_last_error()) == 0) fail("an error without a message");
    for (float x : o.data)
      if (x != kCanary) fail("out written on error");
    for (float x : lse)
      if (x != kCanary) fail("lse written on error");
    for (float x : probs)
      if (x != kCanary) fail("probs written on error");
    return 0;
  }
  if (st != AK_OK) {
    std::fprintf(stderr, "%s\n", ak_last_error());
    fail("a valid descriptor was refused", st);
  }

  const ak_test::AttentionResult ref =
      ak_test::ref_attention(ref_d, q.data.data(), k.data.data(), v.data.data());
  std::vector<char> written(o.data.size(), 0);
  for (std::int64_t b = 0; b < d.batch; ++b)
    for (std::int64_t h = 0; h < d.num_heads; ++h)
      for (std::int64_t i = 0; i < queries(b); ++i) {
        const std::int64_t row = (b * d.num_heads + h) * d.q_len + i;
        const double ref_lse = ref.lse[row];
        const float *out = o.at(packed_q.cu.empty() ? b : 0, h, q_row(b, i));
        // Logits of magnitude M are formed to within M * 2^-24 in fp32
        // (ALiBi, sinks): the suite's tolerances scale past |lse| = 16.
        const double big = std::isfinite(ref_lse) ? std::fmax(1.0, std::fabs(ref_lse) / 16) : 1;
        for (std::int64_t c = 0; c < dv; ++c) {
          written[out - o.data.data() + c] = 1;
          const double want = ref.out[row * dv + c], got = out[c];
          const bool ok = std::isnan(want)   ? std::isnan(got)
                          : ref_lse == -kInf ? got == 0.0
                          : std::isinf(want) ? got == want // an Inf in v
                                             : std::fabs(got - want) <= kOutTol * big;
          if (!ok) fail("out", row, c, got, want);
        }
        if (want_lse) {
          const double want = ref_lse, got = lse[lse_at(b, h, i)];
          const bool ok = std::isnan(want) ? std::isnan(got)
                          : std::isinf(want)
                              ? got == want
                              : std::fabs(got - want) <= kLseTol * std::fmax(1.0, std::fabs(want));
          if (!ok) fail("lse", row, 0, got, want);
        }
      }
  for (std::size_t e = 0; e < o.data.size(); ++e)
    if (!written[e] && o.data[e] != kCanary) fail("out padding written", static_cast<long long>(e));
  if (want_probs)
    for (std::int64_t r = 0; r < rows; ++r) {
      const bool nan_row = std::isnan(ref.lse[r]) || ref.lse[r] == kInf;
      for (std::int64_t j = 0; j < d.kv_len; ++j) {
        const double want = ref.probs[r * d.kv_len + j], got = probs[r * d.kv_len + j];
        const bool ok =
            std::isnan(want) ? std::isnan(got)
            : want == 0.0
                ? got == 0.0 || (nan_row && std::isnan(got))
                : std::fabs(got - want) <=
                      kProbsTol + want * 4 * 0x1p-24 * (2 * std::fabs(ref.lse[r]) - std::log(want));
        if (!ok) fail("probs", r, j, got, want);
      }
    }
  for (std::int64_t t = 0; t < kTail; ++t) {
    if (lse[lse_rows + t] != kCanary) fail("lse past the end");
    if (probs[rows * d.kv_len + t] != kCanary) fail("probs past the end");
  }

  // The same bits on the other thread count.
  Tensor o2 = o;
  std::vector<float> lse2(lse.size(), kCanary), probs2(probs.size(), kCanary);
  std::fill(o2.data.begin(), o2.data.end(), kCanary);
  if (want_lse) d.lse = lse2.data();
  if (want_probs) d.probs = probs2.data();
  ak_set_num_threads(3 - threads);
  if (ak_attention(&d, q.data.data(), ks.ptr(), vs.ptr(), o2.data.data()) != AK_OK)
    fail("the second call was refused");
  for (std::size_t e = 0; e < o.data.size(); ++e)
    if (!same_bits(o.data[e], o2.data[e]))
      fail("out differs across thread counts", static_cast<long long>(e), 0, o2.data[e], o.data[e]);
  for (std::size_t e = 0; e < lse.size(); ++e)
    if (!same_bits(lse[e], lse2[e]))
      fail("lse differs across thread counts", static_cast<long long>(e));
  for (std::size_t e = 0; e < probs.size(); ++e)
    if (!same_bits(probs[e], probs2[e]))
      fail("probs differ across thread counts", static_cast<long long>(e));
  return 0;
}
