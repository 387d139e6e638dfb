// ak_attention and ak_mha_self_attention against the float64 reference on
// every instruction set: a sampled grid over shapes, GQA, masks, windows, bias
// broadcasts, kv_lens and strided layouts; a 32768-key row; each rule of the
// header's definition on its own (fully masked rows, NaN locality, poisoned
// masked keys and values, GQA); identical bits for every thread count; the
// worked self-attention example.
//
// Tolerances (docs/design.md): on inputs ~ N(0, 1) with the default scale, out to
// 1e-5 absolute, lse to 1e-5 absolute (relative once |lse| > 1), probs to 1e-6
// absolute. Entries that the definition fixes exactly (a row with no visible
// key: out 0, lse -inf, probs 0; a masked key: probs 0) are compared exactly.
//
// Inputs are poisoned wherever the definition says the library must not look:
// the padding of strided q, k, v and bias holds NaN, and so do the keys and
// values that no query of their batch can see. The output's padding holds
// canaries that must survive.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "reference_attention.hpp"
#include "test_support.hpp"

namespace ak_test {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr double kOutTol = 1e-5;
constexpr double kLseTol = 1e-5;
constexpr double kProbsTol = 1e-6;
constexpr std::int64_t kTail = 7; // canaries past the end of lse and probs

std::size_t at(std::int64_t i) { return static_cast<std::size_t>(i); }

// ------------------------------------------------------------ problems

// How q, k, v and out are laid out: the all-zero strides (contiguous
// [b, h, s, d]), [b, s, h, d] through strides, and both with padding between
// rows, heads and batches.
enum class Layout { Contiguous, Bshd, PaddedBhsd, PaddedBshd };
const char *layout_name(Layout l) {
  switch (l) {
  case Layout::Contiguous:
    return "contiguous";
  case Layout::Bshd:
    return "bshd";
  case Layout::PaddedBhsd:
    return "padded_bhsd";
  case Layout::PaddedBshd:
    return "padded_bshd";
  }
  return "?";
}

// The desc's strides for a tensor of heads x len rows of dim floats.
Strides3 layout_strides(Layout l, std::int64_t heads, std::int64_t len, std::int64_t dim,
                        std::int64_t pad) {
  switch (l) {
  case Layout::Contiguous:
    return {0, 0, 0};
  case Layout::Bshd:
    return {len * heads * dim, dim, heads * dim};
  case Layout::PaddedBhsd: {
    const std::int64_t row = dim + pad, head = len * row + pad;
    return {heads * head + pad, head, row};
  }
  case Layout::PaddedBshd: {
    const std::int64_t head = dim + pad, row = heads * head + pad;
    return {len * row + pad, head, row};
  }
  }
  return {0, 0, 0};
}

// Additive bias patterns: a full [b, h, q, kv] tensor, one [q, kv] matrix for
// every batch and head (strides {0, 0, kv}), one row per head broadcast over
// the queries (strides {0, kv, 0}), one row for everything (all strides 0).
enum class BiasKind { None, Full, PerQueryKey, PerHead, OneRow };
const char *bias_name(BiasKind b) {
  switch (b) {
  case BiasKind::None:
    return "none";
  case BiasKind::Full:
    return "full";
  case BiasKind::PerQueryKey:
    return "per_q_kv";
  case BiasKind::PerHead:
    return "per_head";
  case BiasKind::OneRow:
    return "one_row";
  }
  return "?";
}

// Everything that defines one call.
struct Shape {
  std::int64_t batch = 1, heads = 1, kv_heads = 1, q_len = 1, kv_len = 1;
  std::int64_t head_dim = 8, head_dim_v = 0;
  float scale = 0.0f;
  int mask = AK_MASK_NONE;
  std::int64_t window_left = -1, window_right = -1;
  BiasKind bias = BiasKind::None;
  std::vector<std::int32_t> kv_lens; // empty: none
  Layout layout = Layout::Contiguous;
  std::int64_t pad = 0; // padding of the padded layouts and of a bias row
  bool lse = true, probs = true;
  std::uint32_t seed = 1;
};

std::string describe(const Shape &s) {
  std::ostringstream os;
  os << "batch=" << s.batch << " heads=" << s.heads << "/" << s.kv_heads << " q_len=" << s.q_len
     << " kv_len=" << s.kv_len << " head_dim=" << s.head_dim << " head_dim_v=" << s.head_dim_v
     << " scale=" << s.scale << " mask=" << s.mask << " window=" << s.window_left << ","
     << s.window_right << " bias=" << bias_name(s.bias) << " kv_lens={";
  for (std::int32_t n : s.kv_lens) os << n << ",";
  os << "} layout=" << layout_name(s.layout) << " pad=" << s.pad << " lse=" << s.lse
     << " probs=" << s.probs << " seed=" << s.seed;
  return os.str();
}

// One [b, h, s, dim] tensor stored through strides.
struct Tensor {
  Strides3 st{0, 0, 0};
  std::int64_t nb = 0, nh = 0, ns = 0, dim = 0;
  std::vector<float> data; // elements outside the tensor's rows are padding

  Tensor() = default;
  Tensor(Strides3 strides, std::int64_t b, std::int64_t h, std::int64_t s, std::int64_t d,
         float fill)
      : st(strides), nb(b), nh(h), ns(s), dim(d) {
    const std::int64_t span = b == 0 || h == 0 || s == 0 || d == 0
                                  ? 0
                                  : (b - 1) * st.b + (h - 1) * st.h + (s - 1) * st.s + d;
    data.assign(at(span), fill);
  }
  std::int64_t offset(std::int64_t b, std::int64_t h, std::int64_t s) const {
    return b * st.b + h * st.h + s * st.s;
  }
  float *row(std::int64_t b, std::int64_t h, std::int64_t s) { return &data[at(offset(b, h, s))]; }
  const float *row(std::int64_t b, std::int64_t h, std::int64_t s) const {
    return &data[at(offset(b, h, s))];
  }
  const float *ptr() const { return data.empty() ? nullptr : data.data(); }
  // Every row ~ N(0, 1); the padding keeps its fill.
  void fill_normal(std::uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    for (std::int64_t b = 0; b < nb; ++b)
      for (std::int64_t h = 0; h < nh; ++h)
        for (std::int64_t s = 0; s < ns; ++s)
          for (std::int64_t c = 0; c < dim; ++c) row(b, h, s)[c] = dist(rng);
  }
};

// A call's inputs and outputs. The desc's pointers are bound at call time
// (bound()), so a Problem may be copied freely.
struct Problem {
  ak_attention_desc desc;
  Tensor q, k, v, out;
  std::vector<float> bias;
  std::vector<std::int32_t> kv_lens;
  std::vector<float> lse, probs; // kTail canaries past the end
  bool want_lse = false, want_probs = false;

  std::int64_t dv() const { return out.dim; }
  std::int64_t group() const { return desc.num_heads / desc.num_kv_heads; }
  std::int64_t row_index(std::int64_t b, std::int64_t h, std::int64_t i) const {
    return (b * desc.num_heads + h) * desc.q_len + i;
  }
  ak_attention_desc bound() {
    ak_attention_desc d = desc;
    d.bias = bias.empty() ? nullptr : bias.data();
    d.kv_lens = kv_lens.empty() ? nullptr : kv_lens.data();
    d.lse = want_lse ? lse.data() : nullptr;
    d.probs = want_probs ? probs.data() : nullptr;
    return d;
  }
};

Problem make_problem(const Shape &s) {
  Problem p;
  ak_attention_desc &d = p.desc;
  ak_attention_desc_init(&d);
  d.batch = s.batch;
  d.num_heads = s.heads;
  d.num_kv_heads = s.kv_heads;
  d.q_len = s.q_len;
  d.kv_len = s.kv_len;
  d.head_dim = s.head_dim;
  d.head_dim_v = s.head_dim_v;
  d.scale = s.scale;
  d.mask = s.mask;
  d.window_left = s.window_left;
  d.window_right = s.window_right;
  const std::int64_t dv = s.head_dim_v ? s.head_dim_v : s.head_dim;
  auto set = [&](std::int64_t dst[3], std::int64_t heads, std::int64_t len, std::int64_t dim) {
    const Strides3 st = layout_strides(s.layout, heads, len, dim, s.pad);
    dst[0] = st.b;
    dst[1] = st.h;
    dst[2] = st.s;
  };
  set(d.q_strides, s.heads, s.q_len, s.head_dim);
  set(d.k_strides, s.kv_heads, s.kv_len, s.head_dim);
  set(d.v_strides, s.kv_heads, s.kv_len, dv);
  set(d.o_strides, s.heads, s.q_len, dv);
  const AttentionGeometry g = attention_geometry(d);
  p.q = Tensor(g.q, s.batch, s.heads, s.q_len, s.head_dim, kNaN);
  p.k = Tensor(g.k, s.batch, s.kv_heads, s.kv_len, s.head_dim, kNaN);
  p.v = Tensor(g.v, s.batch, s.kv_heads, s.kv_len, dv, kNaN);
  p.out = Tensor(g.o, s.batch, s.heads, s.q_len, dv, canary());
  p.q.fill_normal(s.seed);
  p.k.fill_normal(s.seed + 1);
  p.v.fill_normal(s.seed + 2);

  if (s.bias != BiasKind::None) {
    const std::int64_t row = s.kv_len + s.pad;
    std::int64_t *bs = d.bias_strides, rows = 1;
    switch (s.bias) {
    case BiasKind::Full:
      bs[0] = s.heads * s.q_len * row, bs[1] = s.q_len * row, bs[2] = row;
      rows = s.batch * s.heads * s.q_len;
      break;
    case BiasKind::PerQueryKey:
      bs[0] = 0, bs[1] = 0, bs[2] = row;
      rows = s.q_len;
      break;
    case BiasKind::PerHead:
      bs[0] = 0, bs[1] = row, bs[2] = 0;
      rows = s.heads;
      break;
    default:
      bs[0] = bs[1] = bs[2] = 0;
      break;
    }
    p.bias.assign(at(rows * row + 1), kNaN); // one more: never empty
    std::mt19937 rng(s.seed + 3);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t j = 0; j < s.kv_len; ++j) p.bias[at(r * row + j)] = dist(rng);
  }
  p.kv_lens = s.kv_lens;
  p.want_lse = s.lse;
  p.want_probs = s.probs;
  const std::int64_t rows = s.batch * s.heads * s.q_len;
  p.lse.assign(at(rows + kTail), canary());
  p.probs.assign(at(rows * s.kv_len + kTail), canary());
  return p;
}

// Resets the outputs to canaries and calls ak_attention.
ak_status run(Problem &p) {
  std::fill(p.out.data.begin(), p.out.data.end(), canary());
  std::fill(p.lse.begin(), p.lse.end(), canary());
  std::fill(p.probs.begin(), p.probs.end(), canary());
  const ak_attention_desc d = p.bound();
  return ak_attention(&d, p.q.ptr(), p.k.ptr(), p.v.ptr(),
                      p.out.data.empty() ? nullptr : p.out.data.data());
}

AttentionResult reference(Problem &p) {
  const ak_attention_desc d = p.bound();
  return ref_attention(d, p.q.ptr(), p.k.ptr(), p.v.ptr());
}

// Whether key j of kv head hk in batch b is visible to no query at all.
bool unreachable(Problem &p, std::int64_t b, std::int64_t hk, std::int64_t j) {
  const ak_attention_desc d = p.bound();
  for (std::int64_t h = hk * p.group(); h < (hk + 1) * p.group(); ++h)
    for (std::int64_t i = 0; i < d.q_len; ++i)
      if (key_visible(d, b, h, i, j)) return false;
  return true;
}

// Fills k[b, hk, j, :] (or v) with NaN, +inf and -inf by turns.
void poison_k(Problem &p, std::int64_t b, std::int64_t hk, std::int64_t j) {
  const float poison[] = {kNaN, kInf, -kInf};
  for (std::int64_t c = 0; c < p.k.dim; ++c) p.k.row(b, hk, j)[c] = poison[c % 3];
}
void poison_v(Problem &p, std::int64_t b, std::int64_t hk, std::int64_t j) {
  const float poison[] = {kInf, kNaN, -kInf};
  for (std::int64_t c = 0; c < p.v.dim; ++c) p.v.row(b, hk, j)[c] = poison[c % 3];
}

// Poisons the keys and values that no query of their batch sees.
void poison_unreachable_keys(Problem &p) {
  for (std::int64_t b = 0; b < p.desc.batch; ++b)
    for (std::int64_t hk = 0; hk < p.desc.num_kv_heads; ++hk)
      for (std::int64_t j = 0; j < p.desc.kv_len; ++j)
        if (unreachable(p, b, hk, j)) {
          poison_k(p, b, hk, j);
          poison_v(p, b, hk, j);
        }
}

// ------------------------------------------------------------ checking

struct Tolerance {
  double out = kOutTol, lse = kLseTol, probs = kProbsTol;
};

// Picks rows (b, h, i) to leave out of a comparison.
using RowFilter = std::function<bool(std::int64_t, std::int64_t, std::int64_t)>;

// The last call's outputs against the reference: values within tolerance, NaN
// where the reference has NaN, exact zeros and -inf where no key is visible,
// canaries in out's padding and past the end of lse and probs. skip_out
// leaves rows of out unchecked, skip_weights their lse and probs.
::testing::AssertionResult matches(const Problem &p, const AttentionResult &ref,
                                   const Tolerance &tol = {}, const RowFilter &skip_out = {},
                                   const RowFilter &skip_weights = {}) {
  const ak_attention_desc &d = p.desc;
  const std::int64_t dv = p.dv(), kv = d.kv_len;
  std::ostringstream errs;
  std::int64_t bad = 0;
  auto fail = [&](const std::string &what, double got, double want) {
    if (bad++ < 8) errs << "  " << what << ": got " << got << ", expected " << want << "\n";
  };
  auto where = [](const char *t, std::int64_t b, std::int64_t h, std::int64_t i) {
    return std::string(t) + "[" + std::to_string(b) + "," + std::to_string(h) + "," +
           std::to_string(i);
  };
  std::vector<char> written(p.out.data.size(), 0);
  for (std::int64_t b = 0; b < d.batch; ++b)
    for (std::int64_t h = 0; h < d.num_heads; ++h)
      for (std::int64_t i = 0; i < d.q_len; ++i) {
        const std::int64_t row = p.row_index(b, h, i);
        const double ref_lse = ref.lse[at(row)];
        const float *o = p.out.row(b, h, i);
        std::fill_n(written.begin() + p.out.offset(b, h, i), dv, 1);
        if (skip_out && skip_out(b, h, i)) continue;
        for (std::int64_t c = 0; c < dv; ++c) {
          const double want = ref.out[at(row * dv + c)], got = o[c];
          const bool ok = std::isnan(want)   ? std::isnan(got)
                          : ref_lse == -kInf ? got == 0.0
                                             : std::fabs(got - want) <= tol.out;
          if (!ok) fail(where("out", b, h, i) + "," + std::to_string(c) + "]", got, want);
        }
      }
  for (std::size_t e = 0; e < written.size(); ++e)
    if (!written[e] && !is_canary(p.out.data[e]))
      fail("out padding at " + std::to_string(e), p.out.data[e], NAN);

  const std::int64_t rows = d.batch * d.num_heads * d.q_len;
  auto skipped = [&](std::int64_t r) {
    return skip_weights &&
           skip_weights(r / (d.num_heads * d.q_len), (r / d.q_len) % d.num_heads, r % d.q_len);
  };
  if (p.want_lse)
    for (std::int64_t r = 0; r < rows; ++r) {
      if (skipped(r)) continue;
      const double want = ref.lse[at(r)], got = p.lse[at(r)];
      const bool ok = std::isnan(want) ? std::isnan(got)
                      : std::isinf(want)
                          ? got == want
                          : std::fabs(got - want) <= tol.lse * std::max(1.0, std::fabs(want));
      if (!ok) fail("lse[" + std::to_string(r) + "]", got, want);
    }
  if (p.want_probs)
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t j = 0; j < kv && !skipped(r); ++j) {
        const double want = ref.probs[at(r * kv + j)], got = p.probs[at(r * kv + j)];
        // A masked key has weight 0; in a row that is not a number (a NaN
        // or +inf score: lse NaN) the header does not say whether it stays
        // 0, so either is accepted there.
        const bool nan_row = std::isnan(ref.lse[at(r)]);
        const bool ok = std::isnan(want) ? std::isnan(got)
                        : want == 0.0    ? got == 0.0 || (nan_row && std::isnan(got))
                                         : std::fabs(got - want) <= tol.probs;
        if (!ok) fail("probs[" + std::to_string(r) + "," + std::to_string(j) + "]", got, want);
      }
  for (std::int64_t t = 0; t < kTail; ++t) {
    if (!is_canary(p.lse[at(rows + t)])) fail("lse past the end", p.lse[at(rows + t)], NAN);
    if (!is_canary(p.probs[at(rows * kv + t)]))
      fail("probs past the end", p.probs[at(rows * kv + t)], NAN);
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " mismatches, the first:\n" << errs.str();
}

// a[0, n) and b[0, n) hold the same bits; else names the first difference.
::testing::AssertionResult same_bits(const float *a, const float *b, std::int64_t n) {
  for (std::int64_t e = 0; e < n; ++e)
    if (std::memcmp(&a[e], &b[e], sizeof(float)) != 0)
      return ::testing::AssertionFailure()
             << "element " << e << " of " << n << ": " << a[e] << " vs " << b[e];
  return ::testing::AssertionSuccess();
}

// The outputs of two calls of the same shape are bit-identical.
::testing::AssertionResult identical(const Problem &a, const Problem &b) {
  struct Part {
    const char *name;
    const std::vector<float> &x, &y;
  };
  for (const Part &part : {Part{"out", a.out.data, b.out.data}, Part{"lse", a.lse, b.lse},
                           Part{"probs", a.probs, b.probs}}) {
    if (part.x.size() != part.y.size())
      return ::testing::AssertionFailure() << part.name << ": the sizes differ";
    const auto r =
        same_bits(part.x.data(), part.y.data(), static_cast<std::int64_t>(part.x.size()));
    if (!r) return ::testing::AssertionFailure() << part.name << " differs: " << r.message();
  }
  return ::testing::AssertionSuccess();
}

// Runs p, checks it against the reference (both on p's current data).
void run_and_check(Problem &p, const Tolerance &tol = {}) {
  ASSERT_EQ(run(p), AK_OK) << ak_last_error();
  EXPECT_TRUE(matches(p, reference(p), tol));
}

// (b, h, i) sees no key: out exactly 0, lse -inf, probs 0.
void expect_fully_masked_row(const Problem &p, std::int64_t b, std::int64_t h, std::int64_t i) {
  SCOPED_TRACE("row b=" + std::to_string(b) + " h=" + std::to_string(h) +
               " i=" + std::to_string(i));
  const float *o = p.out.row(b, h, i);
  for (std::int64_t c = 0; c < p.dv(); ++c) ASSERT_EQ(o[c], 0.0f) << "out column " << c;
  const std::int64_t row = p.row_index(b, h, i), kv = p.desc.kv_len;
  if (p.want_lse) {
    ASSERT_EQ(p.lse[at(row)], -kInf);
  }
  if (p.want_probs) {
    for (std::int64_t j = 0; j < kv; ++j) {
      ASSERT_EQ(p.probs[at(row * kv + j)], 0.0f) << "key " << j;
    }
  }
}

// No NaN anywhere in out's rows, lse or probs.
void expect_no_nan(const Problem &p) {
  for (std::int64_t b = 0; b < p.desc.batch; ++b)
    for (std::int64_t h = 0; h < p.desc.num_heads; ++h)
      for (std::int64_t i = 0; i < p.desc.q_len; ++i)
        for (std::int64_t c = 0; c < p.dv(); ++c)
          ASSERT_FALSE(std::isnan(p.out.row(b, h, i)[c])) << b << "," << h << "," << i << "," << c;
  const std::int64_t rows = p.desc.batch * p.desc.num_heads * p.desc.q_len;
  for (std::int64_t r = 0; p.want_lse && r < rows; ++r) {
    ASSERT_FALSE(std::isnan(p.lse[at(r)])) << r;
  }
  for (std::int64_t e = 0; p.want_probs && e < rows * p.desc.kv_len; ++e) {
    ASSERT_FALSE(std::isnan(p.probs[at(e)])) << e;
  }
}

// ------------------------------------------------------------ the grid

const std::int64_t kGridBatches[] = {1, 2, 3};
const std::pair<std::int64_t, std::int64_t> kGridHeads[] = {{1, 1}, {4, 4}, {8, 2}, {6, 1}};
const std::int64_t kGridLens[] = {1, 2, 17, 64, 65, 130, 1000};
const std::int64_t kGridDims[] = {1, 8, 24, 63, 64, 80, 128, 256};
const int kGridMasks[] = {AK_MASK_NONE, AK_MASK_CAUSAL_TOP_LEFT, AK_MASK_CAUSAL_BOTTOM_RIGHT};
const std::int64_t kGridWindowSizes[] = {0, 1, 2, 5, 16, 64, 300};
const Layout kGridLayouts[] = {Layout::Contiguous, Layout::Bshd, Layout::PaddedBhsd,
                               Layout::PaddedBshd};
const BiasKind kGridBiases[] = {BiasKind::None, BiasKind::Full, BiasKind::PerQueryKey,
                                BiasKind::PerHead};
// Work of one case: q_len * kv_len * (d + dv) * heads * batch, kept small so
// that the float64 reference stays fast.
constexpr double kGridMaxWork = 2e7;
constexpr int kGridRandomCases = 240;

// A soak run draws other and more cases: AK_TEST_GRID_SEED=<n> (any
// unsigned number; the default is the CI's sample) and
// AK_TEST_GRID_RANDOM=<count> (random cases after the forced ones).
unsigned grid_seed() {
  const char *v = std::getenv("AK_TEST_GRID_SEED");
  return v ? static_cast<unsigned>(std::strtoul(v, nullptr, 10)) : 20240607u;
}
int grid_random_cases() {
  const char *v = std::getenv("AK_TEST_GRID_RANDOM");
  return v ? std::atoi(v) : kGridRandomCases;
}

enum class WindowKind { None, Left, Right, Both, Zero };
constexpr int kWindowKinds = 5;
enum class DvKind { Default, Same, Different }; // head_dim_v 0, = head_dim, != head_dim
enum class KvLensKind { None, FirstZero, FirstFull, FirstPartial }; // value of kv_lens[0]

// The sampled choices of one case; realize() turns them into a Shape.
struct GridChoice {
  std::int64_t batch, heads, kv_heads, q_len, kv_len, head_dim;
  DvKind dv;
  int mask;
  WindowKind window;
  BiasKind bias;
  KvLensKind kv_lens;
  Layout layout;
  bool lse, probs, explicit_scale;
};

struct GridCase {
  GridChoice choice;
  Shape shape;
};

template <class T, std::size_t N> const T &pick(std::mt19937 &rng, const T (&a)[N]) {
  return a[rng() % N];
}

GridChoice random_choice(std::mt19937 &rng) {
  GridChoice c;
  c.batch = pick(rng, kGridBatches);
  std::tie(c.heads, c.kv_heads) = pick(rng, kGridHeads);
  c.q_len = pick(rng, kGridLens);
  c.kv_len = pick(rng, kGridLens);
  c.head_dim = pick(rng, kGridDims);
  c.dv = static_cast<DvKind>(rng() % 3);
  c.mask = pick(rng, kGridMasks);
  c.window = static_cast<WindowKind>(rng() % kWindowKinds);
  c.bias = pick(rng, kGridBiases);
  c.kv_lens = static_cast<KvLensKind>(rng() % 4);
  c.layout = pick(rng, kGridLayouts);
  c.lse = rng() % 2;
  c.probs = rng() % 2;
  c.explicit_scale = rng() % 4 == 0;
  return c;
}

Shape realize(const GridChoice &c, std::mt19937 &rng, std::uint32_t seed) {
  Shape s;
  s.batch = c.batch;
  s.heads = c.heads;
  s.kv_heads = c.kv_heads;
  s.q_len = c.q_len;
  s.kv_len = c.kv_len;
  s.head_dim = c.head_dim;
  if (c.dv == DvKind::Same) s.head_dim_v = c.head_dim;
  while (c.dv == DvKind::Different && (s.head_dim_v == 0 || s.head_dim_v == c.head_dim))
    s.head_dim_v = pick(rng, kGridDims);
  if (c.explicit_scale) // unit-scale logits still: 0.5 to 1.5 times the default
    s.scale = static_cast<float>((0.5 + (rng() % 1000) / 1000.0) /
                                 std::sqrt(static_cast<double>(c.head_dim)));
  s.mask = c.mask;
  if (c.window == WindowKind::Left || c.window == WindowKind::Both)
    s.window_left = pick(rng, kGridWindowSizes);
  if (c.window == WindowKind::Right || c.window == WindowKind::Both)
    s.window_right = pick(rng, kGridWindowSizes);
  if (c.window == WindowKind::Zero) s.window_left = s.window_right = 0;
  s.bias = c.bias;
  if (c.kv_lens != KvLensKind::None) {
    const auto kv = static_cast<std::int32_t>(c.kv_len);
    auto partial = [&] { return static_cast<std::int32_t>(1 + rng() % kv); };
    for (std::int64_t b = 0; b < c.batch; ++b) {
      const unsigned kind = b == 0 ? static_cast<unsigned>(c.kv_lens) - 1 : rng() % 3;
      s.kv_lens.push_back(kind == 0 ? 0 : kind == 1 ? kv : partial());
    }
  }
  s.layout = c.layout;
  const std::int64_t pads[] = {1, 3, 16};
  s.pad = c.layout == Layout::PaddedBhsd || c.layout == Layout::PaddedBshd ? pick(rng, pads) : 0;
  s.lse = c.lse;
  s.probs = c.probs;
  s.seed = seed;
  return s;
}

double work(const Shape &s) {
  const std::int64_t dv = s.head_dim_v ? s.head_dim_v : s.head_dim;
  return static_cast<double>(s.q_len) * static_cast<double>(s.kv_len) *
         static_cast<double>(s.head_dim + dv) * static_cast<double>(s.heads * s.batch);
}

// A few hundred cases: first one for every value of every dimension and
// every mask x window kind (that value forced, the rest random), then random
// ones; every case within kGridMaxWork.
const std::vector<GridCase> &grid_cases() {
  static const std::vector<GridCase> cases = [] {
    using Force = std::function<void(GridChoice &)>;
    using Accept = std::function<bool(const GridChoice &)>;
    std::vector<std::pair<Force, Accept>> wanted;
    auto force = [&](Force f) { wanted.emplace_back(std::move(f), nullptr); };
    for (std::int64_t v : kGridBatches) force([v](GridChoice &c) { c.batch = v; });
    for (auto hv : kGridHeads) force([hv](GridChoice &c) { std::tie(c.heads, c.kv_heads) = hv; });
    for (std::int64_t v : kGridLens) {
      force([v](GridChoice &c) { c.q_len = v; });
      force([v](GridChoice &c) { c.kv_len = v; });
    }
    for (std::int64_t v : kGridDims) force([v](GridChoice &c) { c.head_dim = v; });
    for (int v = 0; v < 3; ++v) force([v](GridChoice &c) { c.dv = static_cast<DvKind>(v); });
    for (int m : kGridMasks)
      for (int w = 0; w < kWindowKinds; ++w)
        force([m, w](GridChoice &c) {
          c.mask = m;
          c.window = static_cast<WindowKind>(w);
        });
    for (BiasKind v : kGridBiases) force([v](GridChoice &c) { c.bias = v; });
    for (int v = 0; v < 4; ++v)
      force([v](GridChoice &c) { c.kv_lens = static_cast<KvLensKind>(v); });
    for (Layout v : kGridLayouts) force([v](GridChoice &c) { c.layout = v; });
    for (int v = 0; v < 4; ++v)
      force([v](GridChoice &c) {
        c.lse = v & 1;
        c.probs = v & 2;
      });
    wanted.emplace_back(nullptr, [](const GridChoice &c) { return c.q_len < c.kv_len; });
    wanted.emplace_back(nullptr, [](const GridChoice &c) { return c.q_len > c.kv_len; });
    wanted.emplace_back(nullptr, [](const GridChoice &c) { return c.q_len == c.kv_len; });
    for (int r = 0; r < grid_random_cases(); ++r) wanted.emplace_back(nullptr, nullptr);

    std::mt19937 rng(grid_seed());
    std::vector<GridCase> out;
    for (const auto &[f, accept] : wanted) {
      for (;;) { // redraw the free choices until the case is cheap enough
        GridChoice c = random_choice(rng);
        if (f) f(c);
        if (accept && !accept(c)) continue;
        const Shape s = realize(c, rng,
                                (grid_seed() - 20240607u) + 1000u +
                                    16u * static_cast<std::uint32_t>(out.size()));
        if (work(s) > kGridMaxWork) continue;
        out.push_back({c, s});
        break;
      }
    }
    return out;
  }();
  return cases;
}

// The sample holds every listed value of every dimension.
TEST(AttentionGridCoverage, EveryListedValueAppears) {
  const auto &cases = grid_cases();
  EXPECT_GE(cases.size(), 200u);
  auto any = [&](const std::function<bool(const GridCase &)> &pred) {
    return std::any_of(cases.begin(), cases.end(), pred);
  };
  for (std::int64_t v : kGridBatches)
    EXPECT_TRUE(any([v](const GridCase &c) { return c.shape.batch == v; })) << v;
  for (auto hv : kGridHeads)
    EXPECT_TRUE(any([hv](const GridCase &c) {
      return c.shape.heads == hv.first && c.shape.kv_heads == hv.second;
    }));
  for (std::int64_t v : kGridLens) {
    EXPECT_TRUE(any([v](const GridCase &c) { return c.shape.q_len == v; })) << v;
    EXPECT_TRUE(any([v](const GridCase &c) { return c.shape.kv_len == v; })) << v;
  }
  // Items of 9 to 32 rows (q_len x group) read K and V in place in groups
  // of rows; fewer in one call; more are packed.
  const auto item_rows = [](const GridCase &c) {
    return c.shape.q_len * c.shape.heads / c.shape.kv_heads;
  };
  EXPECT_TRUE(any([&](const GridCase &c) { return item_rows(c) <= 8; }));
  EXPECT_TRUE(any([&](const GridCase &c) { return item_rows(c) > 8 && item_rows(c) <= 32; }));
  EXPECT_TRUE(any([&](const GridCase &c) { return item_rows(c) > 32; }));
  EXPECT_TRUE(any([](const GridCase &c) { return c.shape.q_len < c.shape.kv_len; }));
  EXPECT_TRUE(any([](const GridCase &c) { return c.shape.q_len > c.shape.kv_len; }));
  for (std::int64_t v : kGridDims)
    EXPECT_TRUE(any([v](const GridCase &c) { return c.shape.head_dim == v; })) << v;
  EXPECT_TRUE(any([](const GridCase &c) {
    return c.shape.head_dim_v != 0 && c.shape.head_dim_v != c.shape.head_dim;
  }));
  EXPECT_TRUE(any([](const GridCase &c) { return c.shape.head_dim_v == 0; }));
  for (int m : kGridMasks)
    for (int w = 0; w < kWindowKinds; ++w)
      EXPECT_TRUE(any([m, w](const GridCase &c) {
        return c.shape.mask == m && c.choice.window == static_cast<WindowKind>(w);
      })) << "mask "
          << m << " window kind " << w;
  for (BiasKind v : kGridBiases)
    EXPECT_TRUE(any([v](const GridCase &c) { return c.shape.bias == v; })) << bias_name(v);
  for (Layout v : kGridLayouts)
    EXPECT_TRUE(any([v](const GridCase &c) { return c.shape.layout == v; })) << layout_name(v);
  auto has_len = [](const GridCase &c, bool (*pred)(std::int32_t, std::int64_t)) {
    for (std::int32_t n : c.shape.kv_lens)
      if (pred(n, c.shape.kv_len)) return true;
    return false;
  };
  EXPECT_TRUE(any([&](const GridCase &c) {
    return has_len(c, [](std::int32_t n, std::int64_t) { return n == 0; });
  }));
  EXPECT_TRUE(any([&](const GridCase &c) {
    return has_len(c, [](std::int32_t n, std::int64_t kv) { return n == kv && kv > 1; });
  }));
  EXPECT_TRUE(any([&](const GridCase &c) {
    return has_len(c, [](std::int32_t n, std::int64_t kv) { return 0 < n && n < kv; });
  }));
  EXPECT_TRUE(any([](const GridCase &c) { return c.shape.kv_lens.empty(); }));
  for (int v = 0; v < 4; ++v)
    EXPECT_TRUE(any([v](const GridCase &c) {
      return c.shape.lse == bool(v & 1) && c.shape.probs == bool(v & 2);
    }));
  for (const GridCase &c : cases) EXPECT_LE(work(c.shape), kGridMaxWork) << describe(c.shape);
}

class AttentionGrid : public PerIsa {};

TEST_P(AttentionGrid, SampledShapesMatchReference) {
  int failed = 0;
  for (const GridCase &gc : grid_cases()) {
    SCOPED_TRACE(describe(gc.shape));
    Problem p = make_problem(gc.shape);
    poison_unreachable_keys(p);
    ASSERT_EQ(run(p), AK_OK) << ak_last_error();
    const auto result = matches(p, reference(p));
    EXPECT_TRUE(result);
    if (!result && ++failed == 10) FAIL() << "stopping after 10 failing cases";
  }
}

AK_INSTANTIATE_PER_ISA(AttentionGrid);

// ------------------------------------------------------------ long rows

class AttentionLongKv : public PerIsa {};

// 32768 keys (docs/design.md's accuracy limit) for a few queries.
TEST_P(AttentionLongKv, KvLen32768WithinTolerance) {
  for (int mask : {AK_MASK_NONE, AK_MASK_CAUSAL_BOTTOM_RIGHT}) {
    Shape s;
    s.q_len = 4;
    s.kv_len = 32768;
    s.head_dim = 64;
    s.mask = mask;
    s.seed = 77;
    SCOPED_TRACE(describe(s));
    Problem p = make_problem(s);
    run_and_check(p);
  }
}

AK_INSTANTIATE_PER_ISA(AttentionLongKv);

// ------------------------------------------------------------ semantics

class AttentionSemantics : public PerIsa {};

// kv_lens[b] = 0: every query of that batch sees nothing.
TEST_P(AttentionSemantics, FullyMaskedRowsViaKvLensZero) {
  for (int mask : kGridMasks) {
    Shape s;
    s.batch = 3;
    s.heads = 4;
    s.kv_heads = 2;
    s.q_len = 7;
    s.kv_len = 20;
    s.head_dim = 16;
    s.mask = mask;
    s.kv_lens = {5, 0, 20};
    SCOPED_TRACE(describe(s));
    Problem p = make_problem(s);
    poison_unreachable_keys(p);
    run_and_check(p);
    expect_no_nan(p);
    for (std::int64_t h = 0; h < s.heads; ++h)
      for (std::int64_t i = 0; i < s.q_len; ++i) expect_fully_masked_row(p, 1, h, i);
  }
}

// The window leaves the last queries without a key when q_len > kv_len (the
// diagonal of top-left alignment runs past the last key).
TEST_P(AttentionSemantics, FullyMaskedRowsViaWindow) {
  struct Case {
    int mask;
    std::int64_t q_len, kv_len, left, right;
  };
  for (const Case c : {Case{AK_MASK_NONE, 10, 4, 1, -1}, Case{AK_MASK_NONE, 9, 5, 0, 0},
                       Case{AK_MASK_CAUSAL_TOP_LEFT, 12, 6, 2, -1}}) {
    Shape s;
    s.batch = 2;
    s.heads = 2;
    s.kv_heads = 1;
    s.q_len = c.q_len;
    s.kv_len = c.kv_len;
    s.head_dim = 24;
    s.mask = c.mask;
    s.window_left = c.left;
    s.window_right = c.right;
    SCOPED_TRACE(describe(s));
    Problem p = make_problem(s);
    poison_unreachable_keys(p);
    run_and_check(p);
    expect_no_nan(p);
    const ak_attention_desc d = p.bound();
    int masked_rows = 0;
    for (std::int64_t b = 0; b < s.batch; ++b)
      for (std::int64_t i = 0; i < s.q_len; ++i) {
        const KeyRange r = visible_key_range(d, b, i);
        if (r.begin < r.end) continue;
        ++masked_rows;
        for (std::int64_t h = 0; h < s.heads; ++h) expect_fully_masked_row(p, b, h, i);
      }
    EXPECT_GT(masked_rows, 0) << "the case should leave some rows without a key";
  }
}

// A bias row that is -inf everywhere hides every key from that query.
TEST_P(AttentionSemantics, FullyMaskedRowsViaNegativeInfinityBias) {
  for (BiasKind kind : {BiasKind::Full, BiasKind::PerQueryKey}) {
    Shape s;
    s.batch = 2;
    s.heads = 4;
    s.kv_heads = 2;
    s.q_len = 9;
    s.kv_len = 33;
    s.head_dim = 32;
    s.bias = kind;
    s.pad = 2;
    SCOPED_TRACE(describe(s));
    Problem p = make_problem(s);
    const std::int64_t row = s.kv_len + s.pad;
    // Full: query 2 of head 1, batch 0. Per [q, kv]: query 3 of every head and batch.
    const std::int64_t masked_q = kind == BiasKind::Full ? 2 : 3;
    const std::int64_t first = kind == BiasKind::Full ? (0 * s.heads + 1) * s.q_len + 2 : 3;
    std::fill_n(p.bias.begin() + first * row, s.kv_len, -kInf);
    run_and_check(p);
    expect_no_nan(p);
    for (std::int64_t b = 0; b < s.batch; ++b)
      for (std::int64_t h = 0; h < s.heads; ++h)
        if (kind == BiasKind::PerQueryKey || (b == 0 && h == 1))
          expect_fully_masked_row(p, b, h, masked_q);
  }
}

// kv_len = 0: no query has a key; k and v may be NULL.
TEST_P(AttentionSemantics, KvLenZeroGivesZeroRows) {
  Shape s;
  s.batch = 2;
  s.heads = 3;
  s.kv_heads = 3;
  s.q_len = 5;
  s.kv_len = 0;
  s.head_dim = 8;
  s.head_dim_v = 12;
  Problem p = make_problem(s);
  ASSERT_TRUE(p.k.data.empty() && p.v.data.empty());
  run_and_check(p);
  for (std::int64_t b = 0; b < s.batch; ++b)
    for (std::int64_t h = 0; h < s.heads; ++h)
      for (std::int64_t i = 0; i < s.q_len; ++i) expect_fully_masked_row(p, b, h, i);
}

// The shapes the NaN tests use, each with a key that some of its queries see
// and others do not: causal with every key in range, and bottom-right
// alignment with a left window. 40 keys: more than a vector of every ISA, so
// that the vector paths (not only the scalar tails) meet the NaN.
struct NanCase {
  Shape shape;
  std::int64_t key;
};
std::vector<NanCase> nan_cases() {
  Shape a;
  a.batch = 2;
  a.heads = 4;
  a.kv_heads = 2;
  a.q_len = 20;
  a.kv_len = 40;
  a.head_dim = 16;
  a.head_dim_v = 10;
  a.mask = AK_MASK_CAUSAL_TOP_LEFT;
  Shape b = a;
  b.q_len = 5;
  b.mask = AK_MASK_CAUSAL_BOTTOM_RIGHT;
  b.window_left = 3;
  b.layout = Layout::PaddedBshd;
  b.pad = 3;
  return {{a, 7}, {b, 36}}; // queries 7.. of a; queries 1..4 of b
}

// A NaN in one visible q entry makes that query's row NaN and no other.
TEST_P(AttentionSemantics, NanInQueryStaysInItsRow) {
  for (const NanCase &nan_case : nan_cases()) {
    const Shape &s = nan_case.shape;
    SCOPED_TRACE(describe(s));
    Problem p = make_problem(s);
    const std::int64_t nb = 1, nh = 2, ni = s.q_len - 2;
    p.q.row(nb, nh, ni)[3] = kNaN;
    ASSERT_EQ(run(p), AK_OK) << ak_last_error();
    const AttentionResult ref = reference(p);
    EXPECT_TRUE(matches(p, ref));
    for (std::int64_t b = 0; b < s.batch; ++b)
      for (std::int64_t h = 0; h < s.heads; ++h)
        for (std::int64_t i = 0; i < s.q_len; ++i) {
          const bool hit = b == nb && h == nh && i == ni;
          ASSERT_EQ(std::isnan(ref.lse[at(p.row_index(b, h, i))]), hit); // the test's premise
          for (std::int64_t c = 0; c < p.dv(); ++c)
            EXPECT_EQ(std::isnan(p.out.row(b, h, i)[c]), hit) << b << "," << h << "," << i;
          EXPECT_EQ(std::isnan(p.lse[at(p.row_index(b, h, i))]), hit) << b << "," << h << "," << i;
        }
  }
}

// A +inf in a visible q entry gives its row +inf and -inf scores: if one is
// +inf the row is NaN, lse included (as for a NaN score: which of the two an
// overflowing sum gives depends on the instruction set); if all are -inf
// the row has no weight (out 0, lse -inf). Other rows keep
// their values. Besides the NaN tests' shapes (packed items), two with few
// queries whose keys are split into chunks and merged: d_v 64 (K and V read
// in place) and 10 (packed).
TEST_P(AttentionSemantics, InfiniteQueryEntryStaysInItsRow) {
  std::vector<Shape> shapes;
  for (const NanCase &nan_case : nan_cases()) shapes.push_back(nan_case.shape);
  Shape split;
  split.batch = 2;
  split.heads = 4;
  split.kv_heads = 2;
  split.q_len = 2;
  split.kv_len = 2500;
  split.head_dim = 64;
  split.head_dim_v = 64;
  split.mask = AK_MASK_CAUSAL_BOTTOM_RIGHT;
  shapes.push_back(split);
  split.head_dim_v = 10;
  shapes.push_back(split);
  for (const Shape &s : shapes) {
    SCOPED_TRACE(describe(s));
    for (const float k_sign : {1.0f, -1.0f}) { // the sign of k[:, 3]
      Problem p = make_problem(s);
      const std::int64_t nb = 1, nh = 2, ni = s.q_len - 2;
      p.q.row(nb, nh, ni)[3] = kInf;
      for (std::int64_t j = 0; j < s.kv_len; ++j) {
        float &kj = p.k.row(nb, nh / p.group(), j)[3];
        kj = k_sign * (std::fabs(kj) + 0.125f);
      }
      ASSERT_EQ(run(p), AK_OK) << ak_last_error();
      const AttentionResult ref = reference(p);
      EXPECT_TRUE(matches(p, ref));
      // The test's premise: the planted row's kind.
      const double want_lse = ref.lse[at(p.row_index(nb, nh, ni))];
      if (k_sign > 0) {
        ASSERT_TRUE(std::isnan(want_lse));
      } else {
        ASSERT_EQ(want_lse, -kInf);
      }
      for (std::int64_t b = 0; b < s.batch; ++b)
        for (std::int64_t h = 0; h < s.heads; ++h)
          for (std::int64_t i = 0; i < s.q_len; ++i) {
            const bool hit = b == nb && h == nh && i == ni;
            const float lse = p.lse[at(p.row_index(b, h, i))];
            if (hit && k_sign > 0) {
              EXPECT_TRUE(std::isnan(lse));
            }
            if (hit && k_sign < 0) {
              EXPECT_EQ(lse, -kInf);
            }
            EXPECT_EQ(std::isfinite(lse), !hit) << b << "," << h << "," << i;
            for (std::int64_t c = 0; c < p.dv(); ++c)
              EXPECT_EQ(std::isnan(p.out.row(b, h, i)[c]), hit && k_sign > 0)
                  << b << "," << h << "," << i;
          }
    }
  }
}

// A NaN in k at key j makes exactly the rows that see j NaN (both query heads
// of its kv head, the queries whose window holds j).
TEST_P(AttentionSemantics, NanInKeyReachesExactlyTheRowsThatSeeIt) {
  for (const NanCase &nan_case : nan_cases()) {
    const Shape &s = nan_case.shape;
    const std::int64_t nj = nan_case.key;
    SCOPED_TRACE(describe(s));
    Problem p = make_problem(s);
    const std::int64_t nb = 0, nhk = 1;
    p.k.row(nb, nhk, nj)[5] = kNaN;
    ASSERT_EQ(run(p), AK_OK) << ak_last_error();
    EXPECT_TRUE(matches(p, reference(p)));
    const ak_attention_desc d = p.bound();
    int hit_rows = 0;
    for (std::int64_t b = 0; b < s.batch; ++b)
      for (std::int64_t h = 0; h < s.heads; ++h)
        for (std::int64_t i = 0; i < s.q_len; ++i) {
          const bool hit = b == nb && h / p.group() == nhk && key_visible(d, b, h, i, nj);
          hit_rows += hit;
          for (std::int64_t c = 0; c < p.dv(); ++c)
            EXPECT_EQ(std::isnan(p.out.row(b, h, i)[c]), hit) << b << "," << h << "," << i;
          EXPECT_EQ(std::isnan(p.lse[at(p.row_index(b, h, i))]), hit) << b << "," << h << "," << i;
          if (hit) {
            EXPECT_TRUE(std::isnan(p.probs[at(p.row_index(b, h, i) * s.kv_len + nj)]));
          }
        }
    EXPECT_GT(hit_rows, 0);
    EXPECT_LT(hit_rows, s.batch * s.heads * s.q_len);
  }
}

// A NaN in v[j, c] makes out[:, c] NaN in exactly the rows that see j; the
// weights (lse, probs) do not depend on v and stay finite. Whether the other
// columns of those rows turn NaN too is left open (the header says "row").
TEST_P(AttentionSemantics, NanInValueReachesExactlyTheRowsThatSeeIt) {
  for (const NanCase &nan_case : nan_cases()) {
    const Shape &s = nan_case.shape;
    const std::int64_t nj = nan_case.key;
    SCOPED_TRACE(describe(s));
    Problem p = make_problem(s);
    const std::int64_t nb = 1, nhk = 0, nc = 2;
    p.v.row(nb, nhk, nj)[nc] = kNaN;
    ASSERT_EQ(run(p), AK_OK) << ak_last_error();
    const ak_attention_desc d = p.bound();
    auto hit = [&](std::int64_t b, std::int64_t h, std::int64_t i) {
      return b == nb && h / p.group() == nhk && key_visible(d, b, h, i, nj);
    };
    EXPECT_TRUE(matches(p, reference(p), {}, hit));
    int hit_rows = 0;
    for (std::int64_t b = 0; b < s.batch; ++b)
      for (std::int64_t h = 0; h < s.heads; ++h)
        for (std::int64_t i = 0; i < s.q_len; ++i) {
          if (!hit(b, h, i)) continue;
          ++hit_rows;
          EXPECT_TRUE(std::isnan(p.out.row(b, h, i)[nc])) << b << "," << h << "," << i;
        }
    EXPECT_GT(hit_rows, 0);
  }
}

// Outputs are weighted means of v's rows: with v near FLT_MAX they stay
// finite (the fp32 accumulator would pass FLT_MAX: four equal keys of 1e38
// gave +inf). Prefill (packed), causal with a bias, and a GQA decode whose
// keys are split into chunks; v's columns alternate in sign, so an
// overflowed sum would show as +inf, -inf or NaN.
TEST_P(AttentionSemantics, HugeFiniteValuesStayFinite) {
  Shape prefill;
  prefill.heads = 2;
  prefill.kv_heads = 2;
  prefill.q_len = 40;
  prefill.kv_len = 64;
  prefill.head_dim = 16;
  Shape causal = prefill;
  causal.mask = AK_MASK_CAUSAL_TOP_LEFT;
  causal.bias = BiasKind::PerQueryKey;
  Shape decode;
  decode.heads = 8;
  decode.kv_heads = 2;
  decode.q_len = 1;
  decode.kv_len = 3000;
  decode.head_dim = 32;
  for (const Shape &s : {prefill, causal, decode}) {
    SCOPED_TRACE(describe(s));
    Problem p = make_problem(s);
    for (std::int64_t hk = 0; hk < s.kv_heads; ++hk)
      for (std::int64_t j = 0; j < s.kv_len; ++j)
        for (std::int64_t c = 0; c < p.dv(); ++c)
          p.v.row(0, hk, j)[c] = (c % 2 ? -1.0f : 1.0f) * 1e38f *
                                 (1.0f - 0.01f * static_cast<float>((j * 7 + c) % 40));
    run_and_check(p, {kOutTol * 1e38, kLseTol, kProbsTol});
    for (std::int64_t h = 0; h < s.heads; ++h)
      for (std::int64_t i = 0; i < s.q_len; ++i)
        for (std::int64_t c = 0; c < p.dv(); ++c)
          ASSERT_TRUE(std::isfinite(p.out.row(0, h, i)[c])) << h << "," << i << "," << c;
  }
}

// Every v entry FLT_MAX and every weight equal: the mean is FLT_MAX itself,
// not a sum rounded past it. And a row whose one column weighs an Inf in v
// keeps that column non-finite while its other, overflowing columns are
// recomputed.
TEST_P(AttentionSemantics, ValuesAtFltMaxAndAnInfiniteColumn) {
  Shape s;
  s.q_len = 3;
  s.kv_len = 1500; // two key chunks in decode-like rows
  s.head_dim = 4;
  s.head_dim_v = 8;
  // An Inf in column 0 at key 0, which every row weighs (all scores 0), or
  // which weighs exactly 0 (its score 200 below the others'): then it feeds
  // nothing, and the column is the mean of FLT_MAX like the others.
  enum Case { kAllMax, kInfWeighed, kInfUnweighed };
  for (const Case kase : {kAllMax, kInfWeighed, kInfUnweighed}) {
    SCOPED_TRACE(kase == kAllMax       ? "all FLT_MAX"
                 : kase == kInfWeighed ? "an Inf in column 0"
                                       : "an Inf in column 0 at a key of weight 0");
    Problem p = make_problem(s);
    std::fill(p.q.data.begin(), p.q.data.end(), 1.0f);
    std::fill(p.k.data.begin(), p.k.data.end(), 0.0f); // all scores 0, all weights 1
    for (std::int64_t j = 0; j < s.kv_len; ++j)
      for (std::int64_t c = 0; c < p.dv(); ++c)
        p.v.row(0, 0, j)[c] = std::numeric_limits<float>::max();
    if (kase != kAllMax) p.v.row(0, 0, 0)[0] = std::numeric_limits<float>::infinity();
    if (kase == kInfUnweighed) // score (1 / sqrt(4)) * 4 * -100 = -200
      std::fill(p.k.row(0, 0, 0), p.k.row(0, 0, 0) + s.head_dim, -100.0f);
    ASSERT_EQ(run(p), AK_OK) << ak_last_error();
    for (std::int64_t i = 0; i < s.q_len; ++i)
      for (std::int64_t c = 0; c < p.dv(); ++c) {
        const float o = p.out.row(0, 0, i)[c];
        if (kase == kInfWeighed && c == 0)
          EXPECT_FALSE(std::isfinite(o)) << i << ": the Inf it weighs must show";
        else
          EXPECT_EQ(o, std::numeric_limits<float>::max()) << i << "," << c;
      }
  }
}

// An Inf in v at a key whose weight against the row's final largest score is
// 0 in fp32 feeds nothing (ak_attention's contract), also where it was the
// largest of its block or key chunk, weighed 1 there, and the row's running
// sums then scaled by a factor that underflows to 0 (Inf * 0). Keys before
// 1100 score 0 (past the first key block or chunk of every path), the
// others 200; v is 1 but for v[0][0] = Inf: every output is 1 (the mean of
// the 1s the later keys carry). Packed prefill rows, rows read in place, and
// a decode row over three key chunks.
TEST_P(AttentionSemantics, InfAtAKeyLeftFarBelowTheRowsMaxFeedsNothing) {
  for (const auto &[q_len, kv_len] :
       {std::pair<std::int64_t, std::int64_t>{40, 1300}, {3, 1300}, {1, 3000}}) {
    SCOPED_TRACE("q_len " + std::to_string(q_len) + ", kv_len " + std::to_string(kv_len));
    Shape s;
    s.q_len = q_len;
    s.kv_len = kv_len;
    s.head_dim = 4;
    s.head_dim_v = 16;
    Problem p = make_problem(s);
    std::fill(p.q.data.begin(), p.q.data.end(), 1.0f);
    std::fill(p.v.data.begin(), p.v.data.end(), 1.0f);
    for (std::int64_t j = 0; j < kv_len; ++j) // scores (1 / sqrt(4)) * 4 * k
      std::fill(p.k.row(0, 0, j), p.k.row(0, 0, j) + s.head_dim, j < 1100 ? 0.0f : 100.0f);
    p.v.row(0, 0, 0)[0] = std::numeric_limits<float>::infinity();
    ASSERT_EQ(run(p), AK_OK) << ak_last_error();
    for (std::int64_t i = 0; i < q_len; ++i)
      for (std::int64_t c = 0; c < p.dv(); ++c)
        EXPECT_NEAR(p.out.row(0, 0, i)[c], 1.0f, 1e-6f) << i << "," << c;
  }
}

// Scores whose dot products cancel (q . k = 800 + 1e10 - 1e10) come out of
// the kernel's fp32 sums and of the overflow recompute's double ones up to
// ~25000 apart; v at FLT_MAX overflows the kernel's sums, and the recompute
// must still give FLT_MAX, not 0/0 (every weight underflowing against the
// kernel's maximum) or Inf (one overflowing). Each order of the three terms,
// decode and prefill rows.
TEST_P(AttentionSemantics, CancellingScoresWithValuesAtFltMaxStayFinite) {
  const float terms[2][3] = {{800.0f, 1e10f, -1e10f}, {-40000.0f, 1e12f, -1e12f}};
  for (const auto &t : terms)
    for (int rot = 0; rot < 3; ++rot)
      for (const std::int64_t q_len : {1, 40}) {
        SCOPED_TRACE("terms " + std::to_string(t[0]) + ", rotation " + std::to_string(rot) +
                     ", q_len " + std::to_string(q_len));
        Shape s;
        s.q_len = q_len;
        s.kv_len = 8;
        s.head_dim = 3;
        s.head_dim_v = 4;
        s.scale = 1.0f;
        Problem p = make_problem(s);
        std::fill(p.q.data.begin(), p.q.data.end(), 1.0f);
        std::fill(p.v.data.begin(), p.v.data.end(), std::numeric_limits<float>::max());
        for (std::int64_t j = 0; j < s.kv_len; ++j)
          for (int d = 0; d < 3; ++d) p.k.row(0, 0, j)[d] = t[(d + rot) % 3];
        ASSERT_EQ(run(p), AK_OK) << ak_last_error();
        for (std::int64_t i = 0; i < q_len; ++i)
          for (std::int64_t c = 0; c < p.dv(); ++c)
            EXPECT_EQ(p.out.row(0, 0, i)[c], std::numeric_limits<float>::max()) << i << "," << c;
      }
}

// A key position poisoned for the test.
struct KeyPos {
  std::int64_t b, hk, j;
};

// Poisons `keys` and checks the queries that see none of them: with poison
// in k only, they get the same bits as with the clean data (the scores of
// masked keys are replaced, never used); with poison in k and v, they match
// the reference of the clean data (a kernel may take another, exact path for a
// block of v that holds Inf or NaN, so rounding may differ from the clean
// run). The reference itself never reads the poisoned entries. With
// all_masked, no query may see a poisoned key.
void expect_poison_harmless(Problem p, const std::vector<KeyPos> &keys, bool all_masked) {
  run_and_check(p);
  const Problem clean = p;
  const AttentionResult clean_ref = reference(p);
  const ak_attention_desc d = p.bound();
  const std::int64_t kv = d.kv_len, dv = p.dv();
  auto sees_poison = [&](std::int64_t b, std::int64_t h, std::int64_t i) {
    return std::any_of(keys.begin(), keys.end(), [&](const KeyPos &kp) {
      return kp.b == b && kp.hk == h / p.group() && key_visible(d, b, h, i, kp.j);
    });
  };
  std::int64_t checked = 0, seen = 0;
  for (std::int64_t b = 0; b < d.batch; ++b)
    for (std::int64_t h = 0; h < d.num_heads; ++h)
      for (std::int64_t i = 0; i < d.q_len; ++i) ++(sees_poison(b, h, i) ? seen : checked);
  EXPECT_GT(checked, 0);
  if (all_masked) {
    EXPECT_EQ(seen, 0) << "the test meant every poisoned key to be masked";
  }

  for (const KeyPos &kp : keys) poison_k(p, kp.b, kp.hk, kp.j);
  ASSERT_EQ(run(p), AK_OK) << ak_last_error();
  for (std::int64_t b = 0; b < d.batch; ++b)
    for (std::int64_t h = 0; h < d.num_heads; ++h)
      for (std::int64_t i = 0; i < d.q_len; ++i) {
        if (sees_poison(b, h, i)) continue;
        SCOPED_TRACE("poison in k only, row " + std::to_string(b) + "," + std::to_string(h) + "," +
                     std::to_string(i));
        const std::int64_t r = p.row_index(b, h, i);
        EXPECT_TRUE(same_bits(p.out.row(b, h, i), clean.out.row(b, h, i), dv)) << "out";
        EXPECT_TRUE(same_bits(&p.lse[at(r)], &clean.lse[at(r)], 1)) << "lse";
        EXPECT_TRUE(same_bits(&p.probs[at(r * kv)], &clean.probs[at(r * kv)], kv)) << "probs";
      }

  for (const KeyPos &kp : keys) poison_v(p, kp.b, kp.hk, kp.j);
  ASSERT_EQ(run(p), AK_OK) << ak_last_error();
  EXPECT_TRUE(matches(p, clean_ref, {}, sees_poison, sees_poison)) << "poison in k and v";
  const AttentionResult ref = reference(p);
  for (std::int64_t b = 0; b < d.batch; ++b)
    for (std::int64_t h = 0; h < d.num_heads; ++h)
      for (std::int64_t i = 0; i < d.q_len; ++i) {
        if (sees_poison(b, h, i)) continue;
        const std::int64_t r = p.row_index(b, h, i);
        ASSERT_EQ(0, std::memcmp(&ref.out[at(r * dv)], &clean_ref.out[at(r * dv)],
                                 at(dv) * sizeof(double)))
            << "the reference read a poisoned entry";
      }
}

TEST_P(AttentionSemantics, PoisonedKeysBeyondKvLens) {
  for (int mask : kGridMasks) {
    Shape s;
    s.batch = 3;
    s.heads = 4;
    s.kv_heads = 2;
    s.q_len = 9;
    s.kv_len = 40;
    s.head_dim = 20;
    s.mask = mask;
    s.kv_lens = {0, 17, 40};
    SCOPED_TRACE(describe(s));
    Problem p = make_problem(s);
    std::vector<KeyPos> keys;
    for (std::int64_t b = 0; b < s.batch; ++b)
      for (std::int64_t hk = 0; hk < s.kv_heads; ++hk)
        for (std::int64_t j = s.kv_lens[at(b)]; j < s.kv_len; ++j) keys.push_back({b, hk, j});
    expect_poison_harmless(p, keys, true);
  }
}

TEST_P(AttentionSemantics, PoisonedKeysInTheCausalFuture) {
  { // top-left, q_len < kv_len: keys >= q_len are in every query's future
    Shape s;
    s.heads = 2;
    s.q_len = 16;
    s.kv_len = 64;
    s.head_dim = 32;
    s.mask = AK_MASK_CAUSAL_TOP_LEFT;
    SCOPED_TRACE(describe(s));
    std::vector<KeyPos> all, some;
    for (std::int64_t j = 16; j < 64; ++j) all.push_back({0, 0, j});
    expect_poison_harmless(make_problem(s), all, true);
    some = all;
    some.push_back({0, 0, 10}); // in the future of queries 0..9 only
    expect_poison_harmless(make_problem(s), some, false);
  }
  { // bottom-right, square: keys >= 30 are in the future of queries < 30
    Shape s;
    s.batch = 2;
    s.heads = 4;
    s.kv_heads = 1;
    s.q_len = 48;
    s.kv_len = 48;
    s.head_dim = 64;
    s.mask = AK_MASK_CAUSAL_BOTTOM_RIGHT;
    SCOPED_TRACE(describe(s));
    std::vector<KeyPos> keys;
    for (std::int64_t j = 30; j < 48; ++j) keys.push_back({1, 0, j});
    expect_poison_harmless(make_problem(s), keys, false);
  }
}

TEST_P(AttentionSemantics, PoisonedKeysOutsideTheWindow) {
  { // no query reaches keys >= 22; key 0 only the first three
    Shape s;
    s.heads = 3;
    s.kv_heads = 3;
    s.q_len = 20;
    s.kv_len = 64;
    s.head_dim = 16;
    s.window_left = 2;
    s.window_right = 2;
    SCOPED_TRACE(describe(s));
    std::vector<KeyPos> keys;
    for (std::int64_t hk = 0; hk < 3; ++hk)
      for (std::int64_t j = 22; j < 64; ++j) keys.push_back({0, hk, j});
    expect_poison_harmless(make_problem(s), keys, true);
    keys.push_back({0, 1, 0});
    expect_poison_harmless(make_problem(s), keys, false);
  }
  { // a band around the diagonal: the ends of the key axis are outside it for most queries
    Shape s;
    s.q_len = 64;
    s.kv_len = 64;
    s.head_dim = 40;
    s.head_dim_v = 8;
    s.mask = AK_MASK_CAUSAL_BOTTOM_RIGHT;
    s.window_left = 4;
    s.window_right = 2; // no effect under a causal mask
    SCOPED_TRACE(describe(s));
    std::vector<KeyPos> keys;
    for (std::int64_t j = 0; j < 10; ++j) keys.push_back({0, 0, j});
    for (std::int64_t j = 40; j < 64; ++j) keys.push_back({0, 0, j});
    expect_poison_harmless(make_problem(s), keys, false);
  }
}

TEST_P(AttentionSemantics, PoisonedKeysUnderNegativeInfinityBias) {
  { // the same keys hidden from every query by a [q, kv] bias
    Shape s;
    s.batch = 2;
    s.heads = 4;
    s.kv_heads = 2;
    s.q_len = 11;
    s.kv_len = 37;
    s.head_dim = 24;
    s.bias = BiasKind::PerQueryKey;
    SCOPED_TRACE(describe(s));
    Problem p = make_problem(s);
    const std::int64_t hidden[] = {0, 5, 6, 31, 36};
    std::vector<KeyPos> keys;
    for (std::int64_t j : hidden) {
      for (std::int64_t i = 0; i < s.q_len; ++i) p.bias[at(i * s.kv_len + j)] = -kInf;
      for (std::int64_t b = 0; b < s.batch; ++b)
        for (std::int64_t hk = 0; hk < s.kv_heads; ++hk) keys.push_back({b, hk, j});
    }
    expect_poison_harmless(p, keys, true);
  }
  { // key 3 hidden from query head 0 only; head 1 shares its kv head and sees it
    Shape s;
    s.heads = 4;
    s.kv_heads = 2;
    s.q_len = 6;
    s.kv_len = 19;
    s.head_dim = 8;
    s.bias = BiasKind::PerHead;
    s.pad = 1;
    SCOPED_TRACE(describe(s));
    Problem p = make_problem(s);
    p.bias[at(0 * (s.kv_len + s.pad) + 3)] = -kInf;
    expect_poison_harmless(p, {{0, 0, 3}}, false);
  }
  // Decode-sized items (at most 8 rows, head_dim a multiple of every vector
  // width): the path that reads K and V in place, a block of keys at a time.
  { // keys hidden from every query, inside blocks that other keys fill
    Shape s;
    s.heads = 4;
    s.kv_heads = 2;
    s.q_len = 1;
    s.kv_len = 300;
    s.head_dim = 64;
    s.bias = BiasKind::PerQueryKey;
    SCOPED_TRACE(describe(s));
    Problem p = make_problem(s);
    std::vector<KeyPos> keys;
    for (std::int64_t j : {0, 130, 131, 299}) {
      p.bias[at(j)] = -kInf;
      for (std::int64_t hk = 0; hk < s.kv_heads; ++hk) keys.push_back({0, hk, j});
    }
    expect_poison_harmless(p, keys, true);
  }
  { // key 200 hidden from query head 0 only; head 1 shares its kv head
    Shape s;
    s.heads = 4;
    s.kv_heads = 2;
    s.q_len = 2;
    s.kv_len = 260;
    s.head_dim = 64;
    s.bias = BiasKind::PerHead;
    SCOPED_TRACE(describe(s));
    Problem p = make_problem(s);
    p.bias[at(200)] = -kInf;
    expect_poison_harmless(p, {{0, 0, 200}}, false);
  }
}

// bias_strides all 0: one [kv] row for every batch, head and query ("0
// broadcasts" per stride; unlike q/k/v/o there is no all-zero = contiguous).
TEST_P(AttentionSemantics, BiasWithAllZeroStridesIsOneRow) {
  Shape s;
  s.batch = 2;
  s.heads = 2;
  s.kv_heads = 2;
  s.q_len = 5;
  s.kv_len = 23;
  s.head_dim = 8;
  s.bias = BiasKind::OneRow;
  Problem p = make_problem(s);
  ASSERT_EQ(p.bias.size(), at(s.kv_len + 1));
  run_and_check(p);
}

// An explicit scale replaces 1/sqrt(head_dim), including one far from it.
TEST_P(AttentionSemantics, ExplicitScale) {
  for (float scale : {0.01f, 0.125f, 1.0f}) {
    Shape s;
    s.batch = 2;
    s.heads = 2;
    s.kv_heads = 1;
    s.q_len = 13;
    s.kv_len = 29;
    s.head_dim = 64;
    s.scale = scale;
    s.mask = AK_MASK_CAUSAL_BOTTOM_RIGHT;
    SCOPED_TRACE(describe(s));
    Problem p = make_problem(s);
    // scale 1 on d = 64 gives logits ~ N(0, 64): scale the tolerance with them.
    run_and_check(p, {kOutTol * std::max(1.0f, scale * 8), kLseTol * std::max(1.0f, scale * 8),
                      kProbsTol * std::max(1.0f, scale * 8)});
  }
}

// GQA: 8 query heads on 2 kv heads equals 8 kv heads holding the copies.
TEST_P(AttentionSemantics, GqaEqualsExplicitlyRepeatedKvHeads) {
  for (int mask : kGridMasks) {
    Shape s;
    s.batch = 2;
    s.heads = 8;
    s.kv_heads = 2;
    s.q_len = 33;
    s.kv_len = 70;
    s.head_dim = 40;
    s.head_dim_v = 24;
    s.mask = mask;
    s.bias = BiasKind::PerHead;
    s.kv_lens = {70, 51};
    SCOPED_TRACE(describe(s));
    Problem gqa = make_problem(s);
    Shape s8 = s;
    s8.kv_heads = 8;
    Problem mha = make_problem(s8);
    mha.q = gqa.q;
    mha.bias = gqa.bias;
    for (std::int64_t b = 0; b < s.batch; ++b)
      for (std::int64_t h = 0; h < s.heads; ++h)
        for (std::int64_t j = 0; j < s.kv_len; ++j) {
          std::copy_n(gqa.k.row(b, h / 4, j), s.head_dim, mha.k.row(b, h, j));
          std::copy_n(gqa.v.row(b, h / 4, j), s.head_dim_v, mha.v.row(b, h, j));
        }
    run_and_check(gqa);
    ASSERT_EQ(run(mha), AK_OK) << ak_last_error();
    EXPECT_TRUE(identical(gqa, mha));
  }
}

// Decode-sized items of 1, 2, 4, 8, 13, 16, 26 and 32 rows for value widths
// of 8 to 128: where a V row is 1, 2, 4 or 8 vectors and an item has at
// most 2 rows, K and V are read in address order (the P V pass in whole
// rows, a GQA group of 2 in one or two groups of rows); elsewhere in
// strips, with requests ahead, and past 8 rows in groups of rows (13 and
// 26 leave a short last group). Keys span two blocks of 256 and a tail;
// one layout is strided.
TEST_P(AttentionSemantics, DecodeEveryValueWidth) {
  const std::pair<std::int64_t, std::int64_t> heads[] = {{2, 2}, {4, 2},  {8, 2},
                                                         {8, 1}, {13, 1}, {16, 1}};
  for (const auto &[h, kvh] : heads)
    for (std::int64_t q_len : {1, 2})
      for (std::int64_t dv : {8, 16, 32, 48, 64, 128}) {
        Shape s;
        s.heads = h;
        s.kv_heads = kvh;
        s.q_len = q_len;
        s.kv_len = 600;
        s.head_dim = 40;
        s.head_dim_v = dv;
        s.mask = AK_MASK_CAUSAL_BOTTOM_RIGHT;
        s.layout = dv == 64 ? Layout::PaddedBshd : Layout::Contiguous;
        s.pad = 3;
        s.probs = false;
        SCOPED_TRACE(describe(s));
        Problem p = make_problem(s);
        run_and_check(p);
      }
}

// Items of 16 and 32 rows (GQA 16 and 32, one and two queries) read K and
// V in place in groups of rows, with the keys split into chunks of 1024
// (kv_len 2600: three, the last short) and merged; one batch entry sees
// only 1500 keys.
TEST_P(AttentionSemantics, SplitKeysWithGroupedRows) {
  const std::pair<std::int64_t, std::int64_t> heads[] = {{16, 1}, {32, 2}};
  for (const auto &[h, kvh] : heads)
    for (std::int64_t q_len : {1, 2}) {
      Shape s;
      s.batch = 2;
      s.heads = h;
      s.kv_heads = kvh;
      s.q_len = q_len;
      s.kv_len = 2600;
      s.head_dim = 64;
      s.mask = AK_MASK_CAUSAL_BOTTOM_RIGHT;
      s.kv_lens = {2600, 1500};
      s.probs = false;
      SCOPED_TRACE(describe(s));
      Problem p = make_problem(s);
      run_and_check(p);
    }
}

AK_INSTANTIATE_PER_ISA(AttentionSemantics);

// ------------------------------------------------------------ threads

class AttentionDeterminism : public PerIsa {
protected:
  // 1, 2, 3, 4 and 8 threads give the same bits in out, lse and probs.
  void expect_same_bits_for_thread_counts(const Shape &s) {
    SCOPED_TRACE(describe(s));
    Problem first = make_problem(s);
    ASSERT_EQ(ak_set_num_threads(1), AK_OK);
    run_and_check(first);
    for (int threads : {2, 3, 4, 8}) {
      ASSERT_EQ(ak_set_num_threads(threads), AK_OK);
      Problem p = first;
      ASSERT_EQ(run(p), AK_OK) << ak_last_error();
      EXPECT_TRUE(identical(first, p)) << "threads = " << threads << " differs from 1";
    }
  }
};

TEST_P(AttentionDeterminism, Prefill) {
  Shape s;
  s.batch = 2;
  s.heads = 4;
  s.kv_heads = 2;
  s.q_len = 130;
  s.kv_len = 200;
  s.head_dim = 64;
  s.mask = AK_MASK_CAUSAL_BOTTOM_RIGHT;
  s.bias = BiasKind::PerQueryKey;
  s.kv_lens = {200, 157};
  expect_same_bits_for_thread_counts(s);
}

// One query against 5000 keys: long enough to be split into key chunks.
TEST_P(AttentionDeterminism, Decode) {
  Shape s;
  s.q_len = 1;
  s.kv_len = 5000;
  s.head_dim = 64;
  s.mask = AK_MASK_CAUSAL_BOTTOM_RIGHT;
  expect_same_bits_for_thread_counts(s);
}

// A group of 196 (212) query heads over one kv head, q_len 1: 1 thread
// holds all the rows in one item, 2 threads split them into items of 192
// and 4 (20) rows. Whether an item reads K and V in place (a few rows) or
// packed must not follow that split: it once did, and the 4 rows differed
// in their last bits (with the limit at 32 rows, so would the 20).
TEST_P(AttentionDeterminism, WideGroupSplitIntoItems) {
  for (std::int64_t heads : {196, 212}) {
    Shape s;
    s.heads = heads;
    s.kv_heads = 1;
    s.q_len = 1;
    s.kv_len = 300;
    s.head_dim = 64;
    s.mask = AK_MASK_CAUSAL_BOTTOM_RIGHT;
    expect_same_bits_for_thread_counts(s);
  }
}

// Few heads and q_len over 192: a team halves the rows per item, so the
// items' query blocks differ from 1 thread's. The key blocks must not
// follow them: they once started at an item's first visible key, so a
// left window or a bottom-right mask moved the blocks (and with them the
// online softmax's rescaling and exp's vector/scalar split) and the bits.
// In the third, the first 259 queries of batch entry 1 see no key (kv_lens
// 100, bottom-right): on a team a whole item of them, whose blocks must not
// start at all.
TEST_P(AttentionDeterminism, PrefillItemsSplitOnATeam) {
  Shape a;
  a.heads = 2;
  a.kv_heads = 2;
  a.q_len = 300;
  a.kv_len = 300;
  a.head_dim = 64;
  a.mask = AK_MASK_CAUSAL_TOP_LEFT;
  a.window_left = 50;
  Shape b = a;
  b.q_len = 230;
  b.kv_len = 856;
  b.window_left = -1;
  b.mask = AK_MASK_CAUSAL_BOTTOM_RIGHT;
  Shape c = b;
  c.batch = 2;
  c.kv_heads = 1;
  c.q_len = 359;
  c.kv_len = 501;
  c.kv_lens = {501, 100};
  for (const Shape &s : {a, b, c}) expect_same_bits_for_thread_counts(s);
}

// Batched decode with GQA and ragged kv_lens around chunk-sized boundaries.
TEST_P(AttentionDeterminism, DecodeBatchedRagged) {
  Shape s;
  s.batch = 3;
  s.heads = 8;
  s.kv_heads = 2;
  s.q_len = 1;
  s.kv_len = 5000;
  s.head_dim = 64;
  s.mask = AK_MASK_CAUSAL_BOTTOM_RIGHT;
  s.kv_lens = {5000, 4097, 1};
  expect_same_bits_for_thread_counts(s);
}

AK_INSTANTIATE_PER_ISA(AttentionDeterminism);

// ------------------------------------------------------------ ak_mha_self_attention

class AttentionMha : public PerIsa {};

// One head, d_k = d_v = 3: softmax((x W_Q)(x W_K)^T / sqrt(3)) (x W_V).
TEST_P(AttentionMha, WorkedExample) {
  const float x[4][3] = {{1, 0, 0}, {0, 1, 0}, {1, 1, 0}, {0, 0, 1}};
  const float w_q[3][3] = {{2, 0, 2}, {2, 0, 0}, {2, 1, 2}};
  const float w_k[3][3] = {{2, 2, 2}, {0, 2, 1}, {0, 1, 1}};
  const float w_v[3][3] = {{1, 1, 0}, {0, 1, 1}, {0, 0, 0}};
  const double want[4][3] = {{0.98522025, 1.74174051, 0.75652026},
                             {0.90965265, 1.40965265, 0.5},
                             {0.99851226, 1.75849334, 0.75998108},
                             {0.99560386, 1.90407309, 0.90846923}};
  float out[4][3];
  ASSERT_EQ(ak_mha_self_attention(4, 3, 1, 3, 3, &x[0][0], &w_q[0][0], &w_k[0][0], &w_v[0][0],
                                  AK_MASK_NONE, &out[0][0]),
            AK_OK)
      << ak_last_error();
  for (int i = 0; i < 4; ++i)
    for (int c = 0; c < 3; ++c) EXPECT_NEAR(out[i][c], want[i][c], 1e-6) << i << "," << c;
}

// Random sizes, several heads, d_k != d_v, each mask; weights scaled by
// 1/sqrt(d_model) so that the projections are of unit scale.
TEST_P(AttentionMha, MatchesReference) {
  struct Case {
    std::int64_t n_tokens, d_model, heads, d_k, d_v;
  };
  std::uint32_t seed = 300;
  for (const Case c : {Case{1, 3, 1, 3, 3}, Case{5, 16, 2, 8, 4}, Case{33, 40, 3, 16, 24},
                       Case{100, 64, 4, 16, 8}, Case{17, 7, 2, 5, 11}})
    for (int mask : kGridMasks) {
      SCOPED_TRACE("n_tokens=" + std::to_string(c.n_tokens) +
                   " d_model=" + std::to_string(c.d_model) + " heads=" + std::to_string(c.heads) +
                   " d_k=" + std::to_string(c.d_k) + " d_v=" + std::to_string(c.d_v) +
                   " mask=" + std::to_string(mask));
      const float w_scale = 1.0f / std::sqrt(static_cast<float>(c.d_model));
      const auto x = random_normal(at(c.n_tokens * c.d_model), seed++);
      const auto w_q = random_normal(at(c.heads * c.d_model * c.d_k), seed++, w_scale);
      const auto w_k = random_normal(at(c.heads * c.d_model * c.d_k), seed++, w_scale);
      const auto w_v = random_normal(at(c.heads * c.d_model * c.d_v), seed++, w_scale);
      const std::int64_t n_out = c.heads * c.n_tokens * c.d_v;
      std::vector<float> out(at(n_out + kTail), canary());
      const ak_mask m = static_cast<ak_mask>(mask);
      ASSERT_EQ(ak_mha_self_attention(c.n_tokens, c.d_model, c.heads, c.d_k, c.d_v, x.data(),
                                      w_q.data(), w_k.data(), w_v.data(), m, out.data()),
                AK_OK)
          << ak_last_error();
      const std::vector<double> ref =
          ref_mha_self_attention(c.n_tokens, c.d_model, c.heads, c.d_k, c.d_v, x.data(), w_q.data(),
                                 w_k.data(), w_v.data(), m);
      for (std::int64_t e = 0; e < n_out; ++e)
        ASSERT_NEAR(out[at(e)], ref[at(e)], kOutTol) << "element " << e;
      for (std::int64_t t = 0; t < kTail; ++t) ASSERT_TRUE(is_canary(out[at(n_out + t)]));
    }
}

AK_INSTANTIATE_PER_ISA(AttentionMha);

} // namespace
} // namespace ak_test
