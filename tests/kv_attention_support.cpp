#include "kv_attention_support.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>

#include "../src/convert/half.hpp"
#include "test_support.hpp"

namespace ak_test {
namespace kv {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr double kInfD = std::numeric_limits<double>::infinity();
constexpr double kOutTol = 1e-5, kLseTol = 1e-5, kProbsTol = 1e-6; // as test_attention.cpp
constexpr std::int64_t kTail = 7; // canaries past the end of lse and probs

std::size_t at(std::int64_t i) { return static_cast<std::size_t>(i); }

attnkern::DType internal(ak_dtype t) { return static_cast<attnkern::DType>(static_cast<int>(t)); }

// Resolved [b, h, s] strides of a layout; `explicit_strides` says whether
// the descriptor spells them out (else all 0).
struct Placement {
  Strides3 st;
  bool explicit_strides;
};

Placement place(KvLayout l, std::int64_t heads, std::int64_t len, std::int64_t dim,
                std::int64_t pad) {
  switch (l) {
  case KvLayout::Contiguous:
    return {{heads * len * dim, len * dim, dim}, false};
  case KvLayout::PaddedBhsd: {
    const std::int64_t row = dim + pad, head = len * row + pad;
    return {{heads * head + pad, head, row}, true};
  }
  case KvLayout::Bshd: {
    const std::int64_t head = dim + pad, row = heads * head + pad;
    return {{len * row + pad, head, row}, true};
  }
  }
  return {{0, 0, 0}, false};
}

std::int64_t span(const Strides3 &s, std::int64_t nb, std::int64_t nh, std::int64_t ns,
                  std::int64_t dim) {
  if (nb == 0 || nh == 0 || ns == 0 || dim == 0) return 0;
  return (nb - 1) * s.b + (nh - 1) * s.h + (ns - 1) * s.s + dim;
}

// [page, head, slot] strides of a pool whose rows hold dim elements.
Strides3 pool_strides(const KvCase &c, std::int64_t dim) {
  const std::int64_t ps = c.page_size, g = c.gap;
  switch (c.pool) {
  case PoolLayout::Contiguous:
    return {c.kv_heads * ps * dim, ps * dim, dim};
  case PoolLayout::HeadMajorGaps: {
    const std::int64_t slot = dim + g, head = ps * slot + g;
    return {c.kv_heads * head + g, head, slot};
  }
  case PoolLayout::SlotMajorGaps: {
    const std::int64_t head = dim + g, slot = c.kv_heads * head + g;
    return {ps * slot + g, head, slot};
  }
  }
  return {0, 0, 0};
}

// Unit-variance noise, cheaper than std::normal_distribution (which took
// most of these suites' time): a sum of four uniforms from splitmix64,
// scaled. Bell-shaped and bounded by 2 sqrt(3): logits stay moderate.
class Noise {
public:
  explicit Noise(std::uint64_t seed) : state_(seed * 0x9e3779b97f4a7c15u + 1) {}
  float operator()() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    z ^= z >> 31;
    float sum = 0.0f;
    for (int i = 0; i < 4; ++i, z >>= 16) sum += static_cast<float>(z & 0xffffu);
    return (sum / 65535.0f - 2.0f) * 1.7320508f; // Irwin-Hall(4): variance 1/3
  }

private:
  std::uint64_t state_;
};

// The fp32 suite's tolerances hold for logits of moderate size. A logit
// of magnitude M is formed in fp32 to within about M * 2^-24, and a weight
// exp(s - lse) inherits that relative error from both s and lse: ALiBi over
// long distances and large sinks give logits in the tens to hundreds.
// Below |lse| = 16 these are the fp32 suite's values.
double out_tolerance(const KvProblem &p, double lse) {
  const double m = std::isfinite(lse) ? std::fabs(lse) : 0.0;
  return kOutTol * p.c.v_scale * std::max(1.0, m / 16.0);
}
double probs_tolerance(double lse, double want) {
  if (!std::isfinite(lse)) return kProbsTol;
  const double s = std::fabs(lse + std::log(want)); // the key's logit
  return kProbsTol + want * 4.0 * 0x1p-24 * (std::fabs(lse) + s);
}

std::int64_t pages_per_seq(const KvCase &c) {
  return c.kv_len == 0 ? 0 : (c.kv_len + c.page_size - 1) / c.page_size;
}
std::int64_t num_pages(const KvCase &c) { return c.batch * pages_per_seq(c) + c.extra_pages; }

void set3(std::int64_t dst[3], const Strides3 &s) {
  dst[0] = s.b;
  dst[1] = s.h;
  dst[2] = s.s;
}

} // namespace

float stored(ak_dtype t, float x) {
  if (t == AK_F32) return x;
  return attnkern::half_to_float(internal(t), attnkern::float_to_half(internal(t), x));
}

const char *dtype_name(ak_dtype t) {
  return t == AK_F32 ? "f32" : t == AK_F16 ? "f16" : t == AK_BF16 ? "bf16" : "?";
}

std::string describe(const KvCase &c) {
  std::ostringstream os;
  os << "batch=" << c.batch << " heads=" << c.heads << "/" << c.kv_heads << " q_len=" << c.q_len
     << " kv_len=" << c.kv_len << " head_dim=" << c.head_dim << " head_dim_v=" << c.head_dim_v
     << " scale=" << c.scale << " mask=" << c.mask << " window=" << c.window_left << ","
     << c.window_right << " bias=" << static_cast<int>(c.bias) << " kv_lens={";
  for (std::int32_t n : c.kv_lens) os << n << ",";
  os << "} k=" << dtype_name(c.k_type) << " v=" << dtype_name(c.v_type)
     << " qo_layout=" << static_cast<int>(c.qo_layout)
     << " kv_layout=" << static_cast<int>(c.kv_layout) << " pad=" << c.pad
     << " page_size=" << c.page_size << " pool=" << static_cast<int>(c.pool) << " gap=" << c.gap
     << " shuffle=" << c.shuffle_pages << " minus1=" << c.unneeded_minus1
     << " extra_pages=" << c.extra_pages << " extra_cols=" << c.extra_cols << " lse=" << c.lse
     << " probs=" << c.probs << " v_scale=" << c.v_scale << " softcap=" << c.softcap
     << " alibi=" << c.alibi << " sinks={";
  for (float s : c.sinks) os << s << ",";
  os << "} q_lens={";
  for (std::int32_t n : c.q_lens) os << n << ",";
  os << "} k_lens={";
  for (std::int32_t n : c.k_lens) os << n << ",";
  os << "} seed=" << c.seed;
  return os.str();
}

double work(const KvCase &c) {
  const std::int64_t dv = c.head_dim_v ? c.head_dim_v : c.head_dim;
  return static_cast<double>(c.q_len) * static_cast<double>(c.kv_len) *
         static_cast<double>(c.head_dim + dv) * static_cast<double>(c.heads * c.batch);
}

std::int64_t storage_elements(const KvCase &c) {
  const std::int64_t dims = c.head_dim + (c.head_dim_v ? c.head_dim_v : c.head_dim);
  const std::int64_t slots = c.page_size ? num_pages(c) * c.page_size : c.batch * c.kv_len;
  return slots * c.kv_heads * dims;
}

TypedArray::TypedArray(ak_dtype t, std::int64_t n) : type_(t) {
  if (t == AK_F32)
    f32_.assign(at(n), kNaN);
  else
    half_.assign(at(n), attnkern::float_to_half(internal(t), kNaN));
}
void TypedArray::set(std::int64_t i, float x) {
  if (type_ == AK_F32)
    f32_[at(i)] = x;
  else
    half_[at(i)] = attnkern::float_to_half(internal(type_), x);
}
float TypedArray::get(std::int64_t i) const {
  return type_ == AK_F32 ? f32_[at(i)] : attnkern::half_to_float(internal(type_), half_[at(i)]);
}
// ak_attention takes const float *; with a 16-bit type it reads uint16_t
// elements from that address (the vector's storage is aligned for float).
const float *TypedArray::ptr() const {
  if (type_ == AK_F32) return f32_.empty() ? nullptr : f32_.data();
  return half_.empty() ? nullptr : reinterpret_cast<const float *>(half_.data());
}
std::int64_t TypedArray::size() const {
  return static_cast<std::int64_t>(type_ == AK_F32 ? f32_.size() : half_.size());
}

ak_attention_desc KvProblem::bound() const {
  ak_attention_desc d = desc;
  d.bias = bias.empty() ? nullptr : bias.data();
  d.kv_lens = kv_lens.empty() ? nullptr : kv_lens.data();
  d.lse = c.lse ? const_cast<float *>(lse.data()) : nullptr;
  d.probs = c.probs ? const_cast<float *>(probs.data()) : nullptr;
  d.block_table = c.page_size ? block_table.data() : nullptr;
  d.alibi_slopes = alibi_slopes.empty() ? nullptr : alibi_slopes.data();
  d.sinks = sinks.empty() ? nullptr : sinks.data();
  d.cu_seqlens_q = cu_q.empty() ? nullptr : cu_q.data();
  d.cu_seqlens_k = cu_k.empty() ? nullptr : cu_k.data();
  return d;
}

ak_attention_desc KvProblem::reference_desc() const {
  ak_attention_desc d = bound();
  d.k_type = d.v_type = AK_F32;
  d.block_table = nullptr;
  d.block_table_stride = d.page_size = d.num_pages = 0;
  for (int i = 0; i < 3; ++i)
    d.k_strides[i] = d.v_strides[i] = d.k_page_strides[i] = d.v_page_strides[i] = 0;
  // Packed keys are k_ref's first keys of each entry.
  if (!c.k_lens.empty()) d.cu_seqlens_k = nullptr, d.kv_lens = c.k_lens.data();
  return d;
}

KvProblem make_problem(const KvCase &c) {
  KvProblem p;
  p.c = c;
  ak_attention_desc &d = p.desc;
  ak_attention_desc_init(&d);
  d.batch = c.batch, d.num_heads = c.heads, d.num_kv_heads = c.kv_heads;
  d.q_len = c.q_len, d.kv_len = c.kv_len;
  d.head_dim = c.head_dim, d.head_dim_v = c.head_dim_v;
  d.scale = c.scale, d.mask = c.mask;
  d.window_left = c.window_left, d.window_right = c.window_right;
  d.k_type = c.k_type, d.v_type = c.v_type;
  const std::int64_t dk = c.head_dim, dv = p.dv(), kv = c.kv_len;
  d.softcap = c.softcap;
  std::mt19937 rng(c.seed);
  Noise normal(c.seed);
  const auto offsets = [](const std::vector<std::int32_t> &lens) {
    std::vector<std::int32_t> cu(1, 0);
    for (std::int32_t n : lens) cu.push_back(cu.back() + n);
    return cu;
  };
  if (!c.q_lens.empty()) p.cu_q = offsets(c.q_lens), p.total_q = p.cu_q.back();
  if (!c.k_lens.empty()) p.cu_k = offsets(c.k_lens);
  if (c.alibi)
    for (std::int64_t h = 0; h < c.heads; ++h)
      p.alibi_slopes.push_back(std::exp2(-8.0f * static_cast<float>(h + 1) / c.heads));
  p.sinks = c.sinks;

  // q (NaN between rows) and out (canaries between rows); packed sequences
  // are one [1, heads, total_q] tensor.
  const bool packed_q = !p.cu_q.empty();
  const std::int64_t q_batch = packed_q ? 1 : c.batch, q_rows = packed_q ? p.total_q : c.q_len;
  const KvLayout qo = c.qo_layout == QoLayout::Contiguous ? KvLayout::Contiguous : KvLayout::Bshd;
  Placement pq = place(qo, c.heads, q_rows, dk, c.pad);
  Placement po = place(qo, c.heads, q_rows, dv, c.pad);
  if (packed_q) pq.st.b = po.st.b = 0;
  p.qs = pq.st, p.os = po.st;
  if (pq.explicit_strides) set3(d.q_strides, pq.st), set3(d.o_strides, po.st);
  p.q.assign(at(span(pq.st, q_batch, c.heads, q_rows, dk)), kNaN);
  p.out.assign(at(span(po.st, q_batch, c.heads, q_rows, dv)), canary());
  for (std::int64_t b = 0; b < c.batch; ++b)
    for (std::int64_t h = 0; h < c.heads; ++h)
      for (std::int64_t i = 0; i < p.queries(b); ++i)
        for (std::int64_t e = 0; e < dk; ++e)
          p.q[at(b * pq.st.b + h * pq.st.h + (p.first_row(b) + i) * pq.st.s + e)] = normal();

  // The values K and V hold once stored.
  p.k_ref.resize(at(c.batch * c.kv_heads * kv * dk));
  p.v_ref.resize(at(c.batch * c.kv_heads * kv * dv));
  for (float &x : p.k_ref) x = stored(c.k_type, normal());
  for (float &x : p.v_ref) x = stored(c.v_type, c.v_scale * normal());

  if (c.bias != BiasKind::None) {
    const std::int64_t row = kv + c.pad;
    const bool full = c.bias == BiasKind::Full;
    const std::int64_t rows = full ? c.batch * c.heads * c.q_len : c.heads;
    set3(d.bias_strides,
         full ? Strides3{c.heads * c.q_len * row, c.q_len * row, row} : Strides3{0, row, 0});
    p.bias.assign(at(rows * row + 1), kNaN);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t j = 0; j < kv; ++j) p.bias[at(r * row + j)] = normal();
  }
  p.kv_lens = c.kv_lens;
  p.lse.assign(at(p.lse_rows() + kTail), canary());
  p.probs.assign(at(p.rows() * kv + kTail), canary());

  // Keys some query of their batch sees by position (the bias hides none:
  // its entries are finite); the others are poisoned.
  std::vector<char> seen(at(c.batch * kv), 0);
  {
    const ak_attention_desc bd = p.bound();
    for (std::int64_t b = 0; b < c.batch; ++b)
      for (std::int64_t i = 0; i < p.queries(b); ++i) {
        const KeyRange r = visible_key_range(bd, b, i);
        for (std::int64_t j = r.begin; j < r.end; ++j) seen[at(b * kv + j)] = 1;
      }
  }
  const float k_poison[] = {kNaN, kInf, -kInf}, v_poison[] = {kInf, kNaN, -kInf};
  for (std::int64_t b = 0; b < c.batch; ++b)
    for (std::int64_t hk = 0; hk < c.kv_heads; ++hk)
      for (std::int64_t j = 0; j < kv; ++j) {
        if (seen[at(b * kv + j)]) continue;
        const std::int64_t key = (b * c.kv_heads + hk) * kv + j;
        for (std::int64_t e = 0; e < dk; ++e) p.k_ref[at(key * dk + e)] = k_poison[e % 3];
        for (std::int64_t e = 0; e < dv; ++e) p.v_ref[at(key * dv + e)] = v_poison[e % 3];
      }

  // Where key j of (b, hk) lives in k's and v's storage; -1: nowhere.
  std::function<std::int64_t(std::int64_t, std::int64_t, std::int64_t, const Strides3 &)> where;
  Strides3 ks, vs;
  std::int64_t k_len, v_len;
  if (c.page_size == 0 && !p.cu_k.empty()) { // packed keys: [1, kv_heads, total]
    const std::int64_t total = p.cu_k.back();
    Placement pk = place(c.kv_layout, c.kv_heads, total, dk, c.pad);
    Placement pv = place(c.kv_layout, c.kv_heads, total, dv, c.pad);
    pk.st.b = pv.st.b = 0;
    if (pk.explicit_strides) set3(d.k_strides, pk.st), set3(d.v_strides, pv.st);
    ks = pk.st, vs = pv.st;
    k_len = span(ks, 1, c.kv_heads, total, dk);
    v_len = span(vs, 1, c.kv_heads, total, dv);
    const std::vector<std::int32_t> &cu = p.cu_k;
    where = [&cu](std::int64_t b, std::int64_t hk, std::int64_t j, const Strides3 &s) {
      return j < cu[at(b + 1)] - cu[at(b)] ? hk * s.h + (cu[at(b)] + j) * s.s : -1;
    };
  } else if (c.page_size == 0) {
    const Placement pk = place(c.kv_layout, c.kv_heads, kv, dk, c.pad);
    const Placement pv = place(c.kv_layout, c.kv_heads, kv, dv, c.pad);
    if (pk.explicit_strides) set3(d.k_strides, pk.st), set3(d.v_strides, pv.st);
    ks = pk.st, vs = pv.st;
    k_len = span(ks, c.batch, c.kv_heads, kv, dk);
    v_len = span(vs, c.batch, c.kv_heads, kv, dv);
    where = [](std::int64_t b, std::int64_t hk, std::int64_t j, const Strides3 &s) {
      return b * s.b + hk * s.h + j * s.s;
    };
  } else {
    const std::int64_t pps = pages_per_seq(c), n_pages = num_pages(c), ps = c.page_size;
    const std::int64_t stride = pps + c.extra_cols;
    d.page_size = ps, d.num_pages = n_pages, d.block_table_stride = stride;
    ks = pool_strides(c, dk), vs = pool_strides(c, dv);
    if (c.pool != PoolLayout::Contiguous) set3(d.k_page_strides, ks), set3(d.v_page_strides, vs);
    std::vector<std::int32_t> perm(at(n_pages));
    std::iota(perm.begin(), perm.end(), 0);
    if (c.shuffle_pages) std::shuffle(perm.begin(), perm.end(), rng);
    p.needed.assign(at(c.batch * pps), 0);
    for (std::int64_t b = 0; b < c.batch; ++b)
      for (std::int64_t j = 0; j < kv; ++j)
        if (seen[at(b * kv + j)]) p.needed[at(b * pps + j / ps)] = 1;
    // Columns past the pages of kv_len hold ids nothing may read.
    const std::int32_t junk[] = {-1, static_cast<std::int32_t>(n_pages),
                                 std::numeric_limits<std::int32_t>::min(),
                                 std::numeric_limits<std::int32_t>::max()};
    p.block_table.assign(at(c.batch * stride + 1), junk[0]); // one more: never empty
    for (std::int64_t b = 0; b < c.batch; ++b)
      for (std::int64_t col = 0; col < stride; ++col) {
        std::int32_t &id = p.block_table[at(b * stride + col)];
        if (col >= pps)
          id = junk[(b + col) % 4];
        else
          id = p.needed[at(b * pps + col)] || !c.unneeded_minus1 ? perm[at(b * pps + col)] : -1;
      }
    auto pool_len = [&](const Strides3 &s, std::int64_t dim) {
      return n_pages == 0 ? 0 : (n_pages - 1) * s.b + (c.kv_heads - 1) * s.h + (ps - 1) * s.s + dim;
    };
    k_len = pool_len(ks, dk), v_len = pool_len(vs, dv);
    const std::vector<std::int32_t> &bt = p.block_table;
    where = [&bt, stride, ps](std::int64_t b, std::int64_t hk, std::int64_t j, const Strides3 &s) {
      const std::int32_t page = bt[at(b * stride + j / ps)];
      return page < 0 ? -1 : page * s.b + hk * s.h + (j % ps) * s.s;
    };
  }
  p.k = TypedArray(c.k_type, k_len);
  p.v = TypedArray(c.v_type, v_len);
  for (std::int64_t b = 0; b < c.batch; ++b)
    for (std::int64_t hk = 0; hk < c.kv_heads; ++hk)
      for (std::int64_t j = 0; j < kv; ++j) {
        const std::int64_t key = (b * c.kv_heads + hk) * kv + j;
        const std::int64_t ko = where(b, hk, j, ks), vo = where(b, hk, j, vs);
        if (ko < 0) continue;
        for (std::int64_t e = 0; e < dk; ++e) p.k.set(ko + e, p.k_ref[at(key * dk + e)]);
        for (std::int64_t e = 0; e < dv; ++e) p.v.set(vo + e, p.v_ref[at(key * dv + e)]);
      }
  return p;
}

ak_status run(KvProblem &p) {
  std::fill(p.out.begin(), p.out.end(), canary());
  std::fill(p.lse.begin(), p.lse.end(), canary());
  std::fill(p.probs.begin(), p.probs.end(), canary());
  const ak_attention_desc d = p.bound();
  return ak_attention(&d, p.q.empty() ? nullptr : p.q.data(), p.k.ptr(), p.v.ptr(),
                      p.out.empty() ? nullptr : p.out.data());
}

AttentionResult reference(const KvProblem &p) {
  const ak_attention_desc d = p.reference_desc();
  return ref_attention(d, p.q.data(), p.k_ref.data(), p.v_ref.data());
}

::testing::AssertionResult matches(const KvProblem &p, const AttentionResult &ref) {
  const ak_attention_desc &d = p.desc;
  const std::int64_t dv = p.dv(), kv = d.kv_len, rows = p.rows();
  std::ostringstream errs;
  std::int64_t bad = 0;
  auto fail = [&](const std::string &what, std::int64_t r, std::int64_t e, double got,
                  double want) {
    if (bad++ < 8)
      errs << "  " << what << "[row " << r << ", " << e << "]: got " << got << ", expected " << want
           << "\n";
  };
  std::vector<char> written(p.out.size(), 0);
  for (std::int64_t b = 0; b < d.batch; ++b)
    for (std::int64_t h = 0; h < d.num_heads; ++h)
      for (std::int64_t i = 0; i < p.queries(b); ++i) {
        const std::int64_t row = (b * d.num_heads + h) * d.q_len + i;
        const std::int64_t o = b * p.os.b + h * p.os.h + (p.first_row(b) + i) * p.os.s;
        if (p.c.lse) {
          const double want = ref.lse[at(row)], got = p.lse[at(p.lse_index(b, h, i))];
          const bool ok = std::isnan(want) ? std::isnan(got)
                          : std::isinf(want)
                              ? got == want
                              : std::fabs(got - want) <= kLseTol * std::max(1.0, std::fabs(want));
          if (!ok) fail("lse", row, 0, got, want);
        }
        for (std::int64_t e = 0; e < dv; ++e) {
          written[at(o + e)] = 1;
          const double want = ref.out[at(row * dv + e)], got = p.out[at(o + e)];
          const bool ok = std::isnan(want) ? std::isnan(got)
                          : ref.lse[at(row)] == -kInfD || want == 0.0
                              ? got == 0.0
                              : std::fabs(got - want) <= out_tolerance(p, ref.lse[at(row)]);
          if (!ok) fail("out", row, e, got, want);
        }
      }
  for (std::size_t e = 0; e < written.size(); ++e)
    if (!written[e] && !is_canary(p.out[e]))
      fail("out padding", -1, static_cast<std::int64_t>(e), p.out[e], NAN);
  for (std::int64_t r = 0; p.c.probs && r < rows; ++r)
    for (std::int64_t j = 0; j < kv; ++j) {
      const double want = ref.probs[at(r * kv + j)], got = p.probs[at(r * kv + j)];
      const bool ok = std::isnan(want) ? std::isnan(got)
                      : want == 0.0
                          ? got == 0.0
                          : std::fabs(got - want) <= probs_tolerance(ref.lse[at(r)], want);
      if (!ok) fail("probs", r, j, got, want);
    }
  for (std::int64_t t = 0; t < kTail; ++t) {
    if (!is_canary(p.lse[at(p.lse_rows() + t)]))
      fail("lse past the end", p.lse_rows() + t, 0, p.lse[at(p.lse_rows() + t)], NAN);
    if (!is_canary(p.probs[at(rows * kv + t)]))
      fail("probs past the end", rows, t, p.probs[at(rows * kv + t)], NAN);
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " mismatches, the first:\n" << errs.str();
}

::testing::AssertionResult run_and_check(KvProblem &p) {
  const ak_status st = run(p);
  if (st != AK_OK)
    return ::testing::AssertionFailure()
           << "status " << ak_status_string(st) << ": " << ak_last_error();
  return matches(p, reference(p));
}

void expect_cases_match(const std::vector<KvCase> &cases) {
  int failed = 0;
  for (const KvCase &c : cases) {
    SCOPED_TRACE(describe(c));
    KvProblem p = make_problem(c);
    const auto result = run_and_check(p);
    EXPECT_TRUE(result);
    if (!result && ++failed == 10) FAIL() << "stopping after 10 failing cases";
  }
}

::testing::AssertionResult identical(const KvProblem &a, const KvProblem &b) {
  const std::pair<const std::vector<float> *, const std::vector<float> *> parts[] = {
      {&a.out, &b.out}, {&a.lse, &b.lse}, {&a.probs, &b.probs}};
  const char *names[] = {"out", "lse", "probs"};
  for (int n = 0; n < 3; ++n) {
    const auto &x = *parts[n].first, &y = *parts[n].second;
    if (x.size() != y.size()) return ::testing::AssertionFailure() << names[n] << ": sizes differ";
    for (std::size_t e = 0; e < x.size(); ++e)
      if (std::memcmp(&x[e], &y[e], sizeof(float)) != 0)
        return ::testing::AssertionFailure()
               << names[n] << "[" << e << "] differs: " << x[e] << " vs " << y[e];
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult same_bits_for_thread_counts(KvProblem &p) {
  KvProblem first = p;
  ::testing::AssertionResult result = ::testing::AssertionSuccess();
  for (int threads : {1, 2, 3}) {
    ak_set_num_threads(threads);
    const ak_status st = run(threads == 1 ? first : p);
    if (st != AK_OK) {
      result = ::testing::AssertionFailure() << "threads = " << threads << ": " << ak_last_error();
      break;
    }
    if (threads == 1) continue;
    const auto same = identical(first, p);
    if (!same) {
      result = ::testing::AssertionFailure()
               << "threads = " << threads << " differs from 1: " << same.message();
      break;
    }
  }
  ak_set_num_threads(0);
  return result;
}

} // namespace kv
} // namespace ak_test
