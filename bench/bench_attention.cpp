// Fused attention: ak_attention against an unfused oneDNN path, for prefill
// (q_len = kv_len = L) and decode (q_len = 1, GQA; and a few queries per
// step, as speculative decoding verifies drafted tokens, causal
// bottom-right), attnkern's causal sliding window alone, plus
// streaming-read and copy references for the memory bandwidth. Benchmarks
// are named
//   attention/<impl>/d<d>_L<L>_<causal|nomask>/threads:<t>
//   window/attnkern/d<d>_L<L>_w<W>/threads:<t>   (each query sees its W last keys)
//   encoder/<impl>/b<batch>_h<heads>_d<d>_L<L>/threads:<t>   (no mask)
//   decode/<impl>/h<heads>_kvh<kv heads>_d<d>[_q<q_len>]_kv<kv_len>/threads:<t>
//   membw/read/256MiB/threads:<t>
//   membw/copy/256MiB/threads:<t>
// with <impl> = attnkern | unfused_onednn.
//
// The unfused path, per batch entry and head (decode: per query head, with
// the softmax of all heads' score rows done by one primitive call):
//   S = scale * Q K^T            dnnl_sgemm('N', 'T') into a q_len x kv_len scratch
//   S[i][j] = -inf for j > i     causal only (part of the timed path; decode
//                                with q_len > 1: j > i + kv_len - q_len)
//   P = softmax(S) in place      oneDNN's softmax primitive (peers::OnednnSoftmax)
//   O = P V                      dnnl_sgemm('N', 'N')
// One scratch per score-matrix shape, shared by every head and by both head
// dims and masks of an L; one softmax primitive per (scratch, thread count),
// because oneDNN fixes a primitive's thread count when it is created.
#include "bench_attention.hpp"

#include "bench_common.hpp"
#include "peers.hpp"

#include <attnkern.h>
#include <benchmark/benchmark.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace akb {
namespace {

enum AttnImpl { kAttnkern = 0, kUnfused = 1 };
constexpr const char *kImplNames[] = {"attnkern", "unfused_onednn"};

struct AttnShape {
  // decode/ (q_len 1, no mask; or q_len 4-16, causal bottom-right),
  // attention/ (prefill, batch 1, 8 heads) or encoder/ (prefill of short
  // sequences over a batch and many heads, no mask).
  bool decode;
  std::int64_t batch, heads, kv_heads, q_len, kv_len, d, dv;
  bool causal; // AK_MASK_CAUSAL_TOP_LEFT, else bottom_right() or AK_MASK_NONE
  // Causal sliding window (window/): query i sees keys [i - window + 1, i];
  // 0 = none. attnkern only: the unfused path would form all L^2 scores.
  std::int64_t window = 0;
  bool encoder = false;

  const char *kind() const {
    return decode ? "decode" : window > 0 ? "window" : encoder ? "encoder" : "attention";
  }
  bool has_unfused() const { return window == 0; }
  // Decode of several queries: query i sees keys j <= i + kv_len - q_len.
  bool bottom_right() const { return decode && q_len > 1; }
  std::string label() const {
    if (decode)
      return "h" + std::to_string(heads) + "_kvh" + std::to_string(kv_heads) + "_d" +
             std::to_string(d) + (q_len > 1 ? "_q" + std::to_string(q_len) : "") + "_kv" +
             std::to_string(kv_len);
    if (window > 0)
      return "d" + std::to_string(d) + "_L" + std::to_string(q_len) + "_w" + std::to_string(window);
    if (encoder)
      return "b" + std::to_string(batch) + "_h" + std::to_string(heads) + "_d" + std::to_string(d) +
             "_L" + std::to_string(q_len);
    return "d" + std::to_string(d) + "_L" + std::to_string(q_len) +
           (causal ? "_causal" : "_nomask");
  }
  // One past the last key query i sees, and how many it sees (the last ones
  // before that end).
  std::int64_t key_end(std::int64_t i) const {
    if (causal) return std::min(i + 1, kv_len);
    if (bottom_right()) return std::max<std::int64_t>(0, std::min(i + 1 + kv_len - q_len, kv_len));
    return kv_len;
  }
  std::int64_t visible(std::int64_t i) const {
    const std::int64_t n = key_end(i);
    return window > 0 ? std::min(n, window) : n;
  }
  // Inputs are shared by the shapes that differ only in the mask (prefill) or
  // in the number of kv heads (decode: K and V are allocated for `heads` kv
  // heads; with batch 1 the first kv_heads of them are a contiguous
  // [1, kv_heads, kv_len, d] tensor).
  std::string data_key() const {
    return std::string(kind()) + "/b" + std::to_string(batch) + "_h" + std::to_string(heads) +
           "_q" + std::to_string(q_len) + "_kv" + std::to_string(kv_len) + "_d" +
           std::to_string(d) + "_dv" + std::to_string(dv);
  }
  float scale() const { return 1.0f / std::sqrt(static_cast<float>(d)); }
  std::size_t q_size() const { return static_cast<std::size_t>(batch * heads * q_len * d); }
  std::size_t kv_alloc(std::int64_t dim) const {
    return static_cast<std::size_t>(batch * heads * kv_len * dim);
  }
  std::size_t o_size() const { return static_cast<std::size_t>(batch * heads * q_len * dv); }
  // Score rows handled by one softmax call of the unfused path: one head's
  // q_len rows (prefill), or every head's row at once (decode).
  std::int64_t heads_per_softmax() const { return decode ? heads : 1; }
  std::int64_t score_rows() const { return heads_per_softmax() * q_len; }

  // Useful FLOPs: 2 q_len kv_len (d + dv) per head (Q K^T and P V), halved for
  // causal; the same count for both implementations. A window counts the
  // keys each query sees: 2 (d + dv) per (query, visible key) pair.
  double flops() const {
    if (window > 0) {
      const double w = double(std::min(window, q_len));
      const double pairs = w * (w + 1.0) / 2.0 + double(q_len - std::int64_t(w)) * w;
      return 2.0 * pairs * double(d + dv) * double(batch * heads);
    }
    if (bottom_right()) {
      double pairs = 0.0;
      for (std::int64_t i = 0; i < q_len; ++i) pairs += double(visible(i));
      return 2.0 * pairs * double(d + dv) * double(batch * heads);
    }
    const double f = 2.0 * double(q_len) * double(kv_len) * double(d + dv) * double(batch * heads);
    return causal ? 0.5 * f : f;
  }
  // Prefill: Q, K, V read once and O written once. Decode: K and V read once
  // (what dominates; Q and O are 32 rows per query).
  double bytes() const {
    const double kv = 4.0 * double(batch * kv_heads * kv_len) * double(d + dv);
    if (decode) return kv;
    return kv + 4.0 * double(batch * heads * q_len) * double(d + dv);
  }
};

std::vector<AttnShape> attention_shapes() {
  std::vector<AttnShape> shapes;
  for (std::int64_t d : {64, 128})
    for (std::int64_t L : {512, 1024, 2048, 4096})
      for (bool causal : {false, true}) shapes.push_back({false, 1, 8, 8, L, L, d, d, causal});
  return shapes;
}

// The cost of a window should follow L * W, not L^2: the same W at L up to
// 16384 (useful GFLOP/s flat across L), and at the L of the causal rows.
std::vector<AttnShape> window_shapes() {
  std::vector<AttnShape> shapes;
  for (std::int64_t L : {1024, 4096, 16384}) {
    AttnShape s{false, 1, 8, 8, L, L, 128, 128, true};
    s.window = 512;
    shapes.push_back(s);
  }
  return shapes;
}

// Encoders: many short sequences at once (BERT-base at 128 tokens, ViT-B/16
// at 224 px: 196 patches and a class token, BERT-large at 384 tokens as in
// SQuAD). Each head's Q, K and V are 32-96 KiB: items are short, and the
// per-item costs (packing, the first touch of each head's data) weigh more
// than at L >= 1024.
std::vector<AttnShape> encoder_shapes() {
  std::vector<AttnShape> shapes;
  for (const auto &[batch, heads, L] :
       {std::array<std::int64_t, 3>{8, 12, 128}, std::array<std::int64_t, 3>{8, 12, 197},
        std::array<std::int64_t, 3>{4, 16, 384}}) {
    AttnShape s{false, batch, heads, heads, L, L, 64, 64, false};
    s.encoder = true;
    shapes.push_back(s);
  }
  return shapes;
}

std::vector<AttnShape> decode_shapes() {
  std::vector<AttnShape> shapes;
  for (std::int64_t kvh : {32, 8})
    for (std::int64_t n : {1024, 8192, 32768})
      shapes.push_back({true, 1, 32, kvh, 1, n, 128, 128, false});
  // One head: only the split of the keys into chunks can use a second thread.
  shapes.push_back({true, 1, 1, 1, 1, 262144, 128, 128, false});
  // Groups of 16 query heads over 2 kv heads.
  shapes.push_back({true, 1, 32, 2, 1, 8192, 128, 128, false});
  // A few queries per step over a 4096-key cache, GQA 4: 16, 32 and 64 rows
  // share each K and V head (speculative decoding's verification).
  for (std::int64_t q : {4, 8, 16}) shapes.push_back({true, 1, 32, 8, q, 4096, 128, 128, false});
  return shapes;
}

// Standard normal entries, generated in blocks of 2^20 with a seed per block
// on all CPUs: the same values whatever the thread count, and a 512 MiB
// decode tensor in a second or two instead of several.
void fill_normal_blocked(Buffer &buf, std::uint64_t seed) {
  constexpr std::size_t kBlock = std::size_t{1} << 20;
  float *p = buf.data();
  const std::size_t n = buf.size();
  const std::int64_t blocks = static_cast<std::int64_t>((n + kBlock - 1) / kBlock);
#pragma omp parallel for schedule(dynamic) num_threads(omp_get_num_procs())
  for (std::int64_t blk = 0; blk < blocks; ++blk) {
    std::mt19937_64 gen(seed ^ (0x9e3779b97f4a7c15ull * std::uint64_t(blk + 1)));
    std::normal_distribution<float> dist(0.0f, 1.0f);
    const std::size_t lo = std::size_t(blk) * kBlock, hi = std::min(n, lo + kBlock);
    for (std::size_t i = lo; i < hi; ++i) p[i] = dist(gen);
  }
}

// Q, K, V and the timed output of one data key, generated on first use and
// kept for the run (≈1.2 GB, most of it the kv_len = 32768 decode K and V).
struct Data {
  Buffer q, k, v, o;
};

Data &data_for(const AttnShape &s) {
  static std::map<std::string, Data> cache;
  const std::string key = s.data_key();
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  Data w;
  w.q = Buffer(s.q_size());
  w.k = Buffer(s.kv_alloc(s.d));
  w.v = Buffer(s.kv_alloc(s.dv));
  w.o = Buffer(s.o_size());
  fill_normal_blocked(w.q, seed_of(key + "/Q"));
  fill_normal_blocked(w.k, seed_of(key + "/K"));
  fill_normal_blocked(w.v, seed_of(key + "/V"));
  return cache.emplace(key, std::move(w)).first->second;
}

// The unfused path's score matrix and its softmax primitives.
struct Scratch {
  Buffer s;
  std::map<int, std::unique_ptr<peers::OnednnSoftmax>> softmax; // by thread count
};

Scratch &scratch_for(std::int64_t rows, std::int64_t cols) {
  static std::map<std::pair<std::int64_t, std::int64_t>, Scratch> cache;
  Scratch &sc = cache[{rows, cols}];
  if (sc.s.size() == 0) sc.s = Buffer(static_cast<std::size_t>(rows * cols));
  return sc;
}

// Call after set_threads(threads): the primitive is made at that count.
peers::OnednnSoftmax &softmax_for(const AttnShape &s, int threads) {
  Scratch &sc = scratch_for(s.score_rows(), s.kv_len);
  auto &p = sc.softmax[threads];
  if (!p)
    p = std::make_unique<peers::OnednnSoftmax>(s.score_rows(), s.kv_len, sc.s.data(), sc.s.data());
  return *p;
}

bool call_attnkern(const AttnShape &s, const Data &w, float *out) {
  ak_attention_desc desc;
  ak_attention_desc_init(&desc);
  desc.batch = s.batch;
  desc.num_heads = s.heads;
  desc.num_kv_heads = s.kv_heads;
  desc.q_len = s.q_len;
  desc.kv_len = s.kv_len;
  desc.head_dim = s.d;
  desc.head_dim_v = s.dv;
  desc.scale = s.scale();
  desc.mask = s.causal           ? AK_MASK_CAUSAL_TOP_LEFT
              : s.bottom_right() ? AK_MASK_CAUSAL_BOTTOM_RIGHT
                                 : AK_MASK_NONE;
  if (s.window > 0) desc.window_left = s.window - 1;
  return ak_attention(&desc, w.q.data(), w.k.data(), w.v.data(), out) == AK_OK;
}

bool call_unfused(const AttnShape &s, const Data &w, float *out, int threads) {
  Scratch &sc = scratch_for(s.score_rows(), s.kv_len);
  peers::OnednnSoftmax &sm = softmax_for(s, threads);
  const std::int64_t group = s.heads / s.kv_heads, hps = s.heads_per_softmax();
  const std::int64_t q_len = s.q_len, kv_len = s.kv_len, d = s.d, dv = s.dv;
  const float scale = s.scale();
  float *S = sc.s.data();
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  for (std::int64_t b = 0; b < s.batch; ++b) {
    for (std::int64_t h0 = 0; h0 < s.heads; h0 += hps) {
      for (std::int64_t h = h0; h < h0 + hps; ++h) {
        const std::int64_t hk = h / group;
        const float *q = w.q.data() + (b * s.heads + h) * q_len * d;
        const float *k = w.k.data() + (b * s.kv_heads + hk) * kv_len * d;
        float *Sh = S + (h - h0) * q_len * kv_len;
        if (!peers::onednn_sgemm_alpha(true, q_len, kv_len, d, scale, q, d, k, d, Sh, kv_len))
          return false;
        if (s.causal || s.bottom_right()) { // keys from key_end(i) on are masked
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1 && s.causal)
          for (std::int64_t i = 0; i < q_len; ++i)
            std::fill(Sh + i * kv_len + s.key_end(i), Sh + (i + 1) * kv_len, kNegInf);
        }
      }
      if (!sm.run()) return false;
      for (std::int64_t h = h0; h < h0 + hps; ++h) {
        const std::int64_t hk = h / group;
        const float *v = w.v.data() + (b * s.kv_heads + hk) * kv_len * dv;
        float *o = out + (b * s.heads + h) * q_len * dv;
        if (!peers::onednn_sgemm(false, false, q_len, dv, kv_len, S + (h - h0) * q_len * kv_len,
                                 kv_len, v, dv, o, dv))
          return false;
      }
    }
  }
  return true;
}

bool call(int impl, const AttnShape &s, const Data &w, float *out, int threads) {
  return impl == kAttnkern ? call_attnkern(s, w, out) : call_unfused(s, w, out, threads);
}

// Max |out - ref| over a few rows computed in double: (first, middle, last
// query) x (first, second, last head). Tells which implementation is wrong
// when the two disagree.
double diff_to_reference(const AttnShape &s, const Data &w, const float *out) {
  const std::int64_t group = s.heads / s.kv_heads;
  double worst = 0.0;
  std::vector<double> p(static_cast<std::size_t>(s.kv_len)), o(static_cast<std::size_t>(s.dv));
  for (std::int64_t h : {std::int64_t{0}, std::min<std::int64_t>(1, s.heads - 1), s.heads - 1}) {
    for (std::int64_t i : {std::int64_t{0}, s.q_len / 2, s.q_len - 1}) {
      const std::int64_t hk = h / group;
      const float *q = w.q.data() + (h * s.q_len + i) * s.d;
      const float *k = w.k.data() + hk * s.kv_len * s.d;
      const float *v = w.v.data() + hk * s.kv_len * s.dv;
      // Keys [j0, n): the last visible(i) before key_end(i).
      const std::int64_t n = s.key_end(i);
      const std::int64_t j0 = n - s.visible(i);
      double mx = -std::numeric_limits<double>::infinity(), sum = 0.0;
      for (std::int64_t j = j0; j < n; ++j) {
        double dot = 0.0;
        for (std::int64_t c = 0; c < s.d; ++c) dot += double(q[c]) * double(k[j * s.d + c]);
        p[j] = dot * double(s.scale());
        mx = std::max(mx, p[j]);
      }
      for (std::int64_t j = j0; j < n; ++j) sum += (p[j] = std::exp(p[j] - mx));
      std::fill(o.begin(), o.end(), 0.0);
      for (std::int64_t j = j0; j < n; ++j)
        for (std::int64_t c = 0; c < s.dv; ++c) o[c] += p[j] / sum * double(v[j * s.dv + c]);
      const float *got = out + (h * s.q_len + i) * s.dv;
      for (std::int64_t c = 0; c < s.dv; ++c) {
        const double e = std::fabs(double(got[c]) - o[c]);
        if (!(e <= worst)) worst = std::isnan(e) ? std::numeric_limits<double>::infinity() : e;
      }
    }
  }
  return worst;
}

double max_abs_diff(const float *x, const float *y, std::size_t n) {
  double diff = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    const double a = x[i], b = y[i];
    if (!std::isfinite(a) || !std::isfinite(b)) return std::numeric_limits<double>::infinity();
    diff = std::max(diff, std::fabs(a - b));
  }
  return diff;
}

struct Verdict {
  double maxdiff = 0.0;       // max |attnkern - unfused|
  double refdiff[2] = {0, 0}; // per implementation: max |x - double reference| on sampled rows
  std::string error[2];
};

// Once per (shape, threads), outside the timed loops: both implementations
// on the benchmark's own inputs must agree to agree_tolerance() (1e-4) in max
// absolute difference (inputs and outputs are of unit scale), and each must
// match sampled rows computed in double to the same tolerance.
const Verdict &verdict_for(const AttnShape &s, int threads) {
  static std::map<std::pair<std::string, int>, Verdict> cache;
  const auto key = std::make_pair(std::string(s.kind()) + "/" + s.label(), threads);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;

  Data &w = data_for(s);
  set_threads(threads);
  Verdict v;
  const int impls = s.has_unfused() ? 2 : 1;
  Buffer out[2] = {Buffer(s.o_size()), Buffer(impls > 1 ? s.o_size() : 0)};
  bool ran[2] = {false, false};
  for (int i = 0; i < impls; ++i) ran[i] = call(i, s, w, out[i].data(), threads);
  const double tol = agree_tolerance();
  if (ran[0] && ran[1]) v.maxdiff = max_abs_diff(out[0].data(), out[1].data(), s.o_size());
  for (int i = 0; i < impls; ++i) {
    char msg[400];
    if (!ran[i]) {
      std::string why =
          i == kAttnkern ? std::string(ak_last_error()) : softmax_for(s, threads).error();
      if (why.empty())
        why = i == kAttnkern ? "ak_attention returned an error"
                             : "dnnl_sgemm or the softmax returned an error";
      std::snprintf(msg, sizeof msg, "%s %s %s failed: %s", kImplNames[i], s.kind(),
                    s.label().c_str(), why.c_str());
      v.error[i] = msg;
      std::fprintf(stderr, "ak_bench: %s\n", msg);
      continue;
    }
    v.refdiff[i] = diff_to_reference(s, w, out[i].data());
    if (!(v.refdiff[i] <= tol) || (ran[1 - i] && !(v.maxdiff <= tol))) {
      std::snprintf(msg, sizeof msg,
                    "%s %s %s threads:%d disagrees: max abs diff attnkern vs unfused %.3g, "
                    "vs double reference rows %.3g (tolerance %.1g)",
                    kImplNames[i], s.kind(), s.label().c_str(), threads, v.maxdiff, v.refdiff[i],
                    tol);
      v.error[i] = msg;
      std::fprintf(stderr, "ak_bench: %s\n", msg);
    }
  }
  return cache.emplace(key, std::move(v)).first->second;
}

void BM_attention(benchmark::State &state, int impl, const AttnShape &s, int threads) {
  const Verdict &v = verdict_for(s, threads);
  if (!v.error[impl].empty()) {
    state.SkipWithError(v.error[impl].c_str());
    return;
  }
  Data &w = data_for(s);
  set_threads(threads);
  const double read_before = s.decode ? read_gbps_now(threads) : 0.0; // see read_gbps_now
  settle(impl == kAttnkern ? Impl::attnkern : Impl::onednn, threads); // both OpenMP
  float *out = w.o.data();
  for (auto _ : state) {
    if (!call(impl, s, w, out, threads)) {
      state.SkipWithError("attention call failed inside the timed loop");
      break;
    }
    benchmark::ClobberMemory();
  }
  if (s.decode) state.counters["read_adj"] = (read_before + read_gbps_now(threads)) / 2;
  state.counters["flops"] = benchmark::Counter(
      s.flops(), benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
  state.counters["bytes"] = benchmark::Counter(
      s.bytes(), benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
  if (s.has_unfused()) state.counters["maxdiff"] = v.maxdiff;
  state.counters["refdiff"] = v.refdiff[impl];
  if (s.window > 0) {
    state.SetLabel("ak_attention, causal top-left, window_left " + std::to_string(s.window - 1));
  } else if (impl == kAttnkern) {
    state.SetLabel(s.causal           ? "ak_attention, causal top-left"
                   : s.bottom_right() ? "ak_attention, causal bottom-right"
                                      : "ak_attention");
  } else {
    state.SetLabel(std::string("dnnl_sgemm") +
                   (s.causal || s.bottom_right() ? " + -inf mask" : "") + " + softmax " +
                   softmax_for(s, threads).impl_info() + " + dnnl_sgemm");
  }
}

// ------------------------------------------------------------ membw

// The streaming read (stream_sum over membw_read_buffer, bench_common).
void BM_membw(benchmark::State &state, int threads) {
  const Buffer &buf = membw_read_buffer();
  set_threads(threads);
  settle(Impl::scalar, threads); // an OpenMP loop
  double sum = 0.0;
  for (auto _ : state) {
    sum = stream_sum(buf.data(), buf.size(), threads);
    benchmark::DoNotOptimize(sum);
  }
  // All ones: each float lane sums at most 2^21 of them, exactly.
  if (sum != static_cast<double>(buf.size())) {
    state.SkipWithError("membw: wrong sum");
    return;
  }
  state.counters["bytes"] =
      benchmark::Counter(4.0 * double(buf.size()), benchmark::Counter::kIsIterationInvariantRate,
                         benchmark::Counter::kIs1000);
  state.SetLabel("sum of a 256 MiB float array, 32 accumulators per thread");
}

// Copy of a 128 MiB float array into another (256 MiB touched per call):
// std::memcpy of each thread's contiguous share (split at 64-byte
// boundaries). Counted: 128 MiB read + 128 MiB written, as the softmax GB/s
// counts x and y. glibc switches memcpy to non-temporal stores only above
// its x86_non_temporal_threshold (hundreds of MiB, see
// `ld.so --list-tunables`), so a 64-128 MiB share is copied with ordinary
// stores, like a softmax writes y: the destination is also read for
// ownership, as it is there.
constexpr std::size_t kCopyFloats = std::size_t{32} << 20; // 128 MiB per buffer

__attribute__((noinline)) void stream_copy(const float *src, float *dst, std::size_t n,
                                           int threads) {
  constexpr std::size_t kLine = 16; // floats per 64-byte line
  const std::size_t lines = n / kLine;
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    const std::size_t t = static_cast<std::size_t>(omp_get_thread_num());
    const std::size_t nt = static_cast<std::size_t>(omp_get_num_threads());
    const std::size_t lo = lines * t / nt * kLine;
    const std::size_t hi = t + 1 == nt ? n : lines * (t + 1) / nt * kLine;
    std::memcpy(dst + lo, src + lo, (hi - lo) * sizeof(float));
  }
}

void BM_membw_copy(benchmark::State &state, int threads) {
  static Buffer src = [] {
    Buffer b(kCopyFloats);
    for (std::size_t i = 0; i < b.size(); ++i) b.data()[i] = static_cast<float>(i % 1000003);
    return b;
  }();
  static Buffer dst(kCopyFloats);
  std::fill(dst.data(), dst.data() + dst.size(), -1.0f);
  set_threads(threads);
  settle(Impl::scalar, threads); // an OpenMP region
  for (auto _ : state) {
    stream_copy(src.data(), dst.data(), src.size(), threads);
    benchmark::ClobberMemory();
  }
  if (std::memcmp(src.data(), dst.data(), src.size() * sizeof(float)) != 0) {
    state.SkipWithError("membw: the copy differs from its source");
    return;
  }
  // Bytes read + bytes written, as the softmax GB/s counts x read and y written.
  state.counters["bytes"] = benchmark::Counter(2.0 * 4.0 * double(src.size()),
                                               benchmark::Counter::kIsIterationInvariantRate,
                                               benchmark::Counter::kIs1000);
  state.SetLabel("memcpy of a 128 MiB float array into another, split over the threads; "
                 "bytes read + written");
}

} // namespace

void register_attention_benchmarks() {
  std::vector<AttnShape> shapes = attention_shapes();
  for (const AttnShape &s : window_shapes()) shapes.push_back(s);
  for (const AttnShape &s : encoder_shapes()) shapes.push_back(s);
  for (const AttnShape &s : decode_shapes()) shapes.push_back(s);
  for (const AttnShape &s : shapes) {
    for (int threads : bench_thread_counts()) {
      for (int impl : {kAttnkern, kUnfused}) {
        if (impl == kUnfused && !s.has_unfused()) continue;
        const std::string name = std::string(s.kind()) + "/" + kImplNames[impl] + "/" + s.label() +
                                 "/threads:" + std::to_string(threads);
        // The largest calls (L = 4096, d = 128: 69 GFLOP unfused) take up to
        // ~1 s and run once per repetition whatever this says.
        benchmark::RegisterBenchmark(name.c_str(), BM_attention, impl, s, threads)
            ->Unit(benchmark::kMillisecond)
            ->MinTime(0.2)
            ->UseRealTime();
      }
    }
  }
  for (int threads : bench_thread_counts()) {
    const std::string t = "/256MiB/threads:" + std::to_string(threads);
    benchmark::RegisterBenchmark(("membw/read" + t).c_str(), BM_membw, threads)
        ->Unit(benchmark::kMillisecond)
        ->MinTime(0.25)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("membw/copy" + t).c_str(), BM_membw_copy, threads)
        ->Unit(benchmark::kMillisecond)
        ->MinTime(0.25)
        ->UseRealTime();
  }
}

} // namespace akb
