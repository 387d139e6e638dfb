// Attention over half-precision and paged K/V caches, against attnkern's own
// fp32 path on the same shapes, in the same process: decode (q_len 1, d 128,
// 32 query heads over 32 or 8 kv heads) and prefill (batch 1, 8 heads, q_len
// = kv_len = L). Named
//   kvdecode/<impl>/h<heads>_kvh<kv heads>_d<d>_kv<kv_len>/threads:<t>
//   kvprefill/<impl>/d<d>_L<L>_<causal|nomask>/threads:<t>
// with <impl> = attnkern_f32 | attnkern_<bf16|f16>[_paged<page size>].
// Caches hold the shape's kv heads (the first of the data's 32), as an
// engine's pool for that model does; paged pools take their pages in a
// shuffled order, so that no two consecutive pages of a sequence are
// adjacent in memory. `bytes` counts K and V at their stored size (2 bytes per element
// for half types); decode also reports read_adj, the streaming read
// measured around it. Every half-precision or paged row is timed in pairs
// with its baseline (fp32, or the contiguous cache of its type), and
// reports the median ratio of the pairs: vs_f32 or vs_contiguous.
#include "bench_kv_cache.hpp"

#include "bench_common.hpp"
#include "paired_timing.hpp"

#include <attnkern.h>
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

namespace akb {
namespace {

struct KvShape {
  bool decode;
  std::int64_t heads, kv_heads, L, d; // decode: L = kv_len, q_len 1
  bool causal;
  std::int64_t q_len() const { return decode ? 1 : L; }
  std::string kind() const { return decode ? "kvdecode" : "kvprefill"; }
  std::string label() const {
    if (decode)
      return "h" + std::to_string(heads) + "_kvh" + std::to_string(kv_heads) + "_d" +
             std::to_string(d) + "_kv" + std::to_string(L);
    return "d" + std::to_string(d) + "_L" + std::to_string(L) + (causal ? "_causal" : "_nomask");
  }
  // Data is allocated for `heads` kv heads; GQA shapes use the first kv_heads.
  std::string data_key() const {
    return kind() + "/h" + std::to_string(heads) + "_L" + std::to_string(L) + "_d" +
           std::to_string(d);
  }
  double flops() const {
    const double f = 4.0 * double(q_len()) * double(L) * double(d) * double(heads);
    return causal ? 0.5 * f : f;
  }
};

struct Storage {
  int type;      // ak_dtype
  int page_size; // 0: contiguous
  std::string name() const {
    if (type == AK_F32 && page_size == 0) return "attnkern_f32";
    std::string n = std::string("attnkern_") + (type == AK_BF16  ? "bf16"
                                                : type == AK_F16 ? "f16"
                                                                 : "f32");
    return page_size ? n + "_paged" + std::to_string(page_size) : n;
  }
  int bytes() const { return type == AK_F32 ? 4 : 2; }
};

// Bytes in a Buffer (bench_common.hpp: 64-byte aligned, and on huge pages
// from 4 MiB, as every other buffer of the benchmarks: on 4 KiB pages each
// 4 KiB of a shuffled pool is a TLB miss and a cold start of the hardware
// prefetcher, which a paged cache in an engine's huge-page pool does not
// see).
struct Bytes {
  Buffer buf;
  std::size_t n = 0;
  Bytes() = default;
  explicit Bytes(std::size_t bytes) : buf((bytes + 3) / 4), n(bytes) {}
  unsigned char *data() { return reinterpret_cast<unsigned char *>(buf.data()); }
  const unsigned char *data() const { return reinterpret_cast<const unsigned char *>(buf.data()); }
  std::size_t size() const { return n; }
};

// One storage of a data key's K and V: raw bytes, and the block table.
struct Stored {
  Bytes k, v;
  std::vector<std::int32_t> table;
  std::int64_t num_pages = 0;
};

struct KvData {
  Buffer q, k, v, o; // fp32 q and output; k and v as generated (fp32)
  std::map<std::tuple<int, int, std::int64_t>, Stored> stored; // type, page size, kv heads
};

KvData &data_for(const KvShape &s) {
  static std::map<std::string, KvData> cache;
  auto it = cache.find(s.data_key());
  if (it != cache.end()) return it->second;
  KvData w;
  const std::size_t kv = static_cast<std::size_t>(s.heads * s.L * s.d);
  w.q = Buffer(static_cast<std::size_t>(s.heads * s.q_len() * s.d));
  w.k = Buffer(kv);
  w.v = Buffer(kv);
  w.o = Buffer(static_cast<std::size_t>(s.heads * s.q_len() * s.d));
  fill_normal(w.q, seed_of(s.data_key() + "/Q"));
  fill_normal(w.k, seed_of(s.data_key() + "/K"));
  fill_normal(w.v, seed_of(s.data_key() + "/V"));
  return cache.emplace(s.data_key(), std::move(w)).first->second;
}

// The data key's K and V in `st` (converted with ak_convert, paged through a
// shuffled table), made on first use.
const Stored &stored_for(const KvShape &s, KvData &w, const Storage &st) {
  const auto key = std::make_tuple(st.type, st.page_size, s.kv_heads);
  auto it = w.stored.find(key);
  if (it != w.stored.end()) return it->second;
  Stored out;
  const std::int64_t heads = s.kv_heads, rows = heads * s.L, d = s.d;
  Bytes kc(static_cast<std::size_t>(rows * d * st.bytes()));
  Bytes vc(kc.size());
  ak_convert(static_cast<ak_dtype>(st.type), kc.data(), AK_F32, w.k.data(), rows * d);
  ak_convert(static_cast<ak_dtype>(st.type), vc.data(), AK_F32, w.v.data(), rows * d);
  if (st.page_size == 0) {
    out.k = std::move(kc), out.v = std::move(vc);
  } else {
    const std::int64_t ps = st.page_size, pages = (s.L + ps - 1) / ps;
    std::vector<std::int32_t> ids(static_cast<std::size_t>(pages));
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), std::mt19937(7));
    out.table = ids, out.num_pages = pages;
    const std::size_t row = static_cast<std::size_t>(d * st.bytes());
    out.k = Bytes(static_cast<std::size_t>(pages * heads * ps) * row);
    out.v = Bytes(out.k.size());
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t j = 0; j < s.L; ++j) {
        const std::size_t src = static_cast<std::size_t>(h * s.L + j) * row;
        const std::size_t dst =
            static_cast<std::size_t>((ids[j / ps] * heads + h) * ps + j % ps) * row;
        std::memcpy(out.k.data() + dst, kc.data() + src, row);
        std::memcpy(out.v.data() + dst, vc.data() + src, row);
      }
  }
  return w.stored.emplace(key, std::move(out)).first->second;
}

bool call(const KvShape &s, KvData &w, const Storage &st, float *out) {
  const Stored &m = stored_for(s, w, st);
  ak_attention_desc desc;
  ak_attention_desc_init(&desc);
  desc.batch = 1, desc.num_heads = s.heads, desc.num_kv_heads = s.kv_heads;
  desc.q_len = s.q_len(), desc.kv_len = s.L, desc.head_dim = s.d;
  desc.mask = s.causal ? AK_MASK_CAUSAL_TOP_LEFT : AK_MASK_NONE;
  desc.k_type = st.type, desc.v_type = st.type;
  if (st.page_size) {
    desc.block_table = m.table.data();
    desc.block_table_stride = static_cast<std::int64_t>(m.table.size());
    desc.page_size = st.page_size, desc.num_pages = m.num_pages;
    const std::int64_t ps[3] = {s.kv_heads * st.page_size * s.d, st.page_size * s.d, s.d};
    std::memcpy(desc.k_page_strides, ps, sizeof ps);
    std::memcpy(desc.v_page_strides, ps, sizeof ps);
  }
  const auto *k = reinterpret_cast<const float *>(m.k.data());
  const auto *v = reinterpret_cast<const float *>(m.v.data());
  return ak_attention(&desc, w.q.data(), k, v, out) == AK_OK;
}

// Max |out - reference| over a few rows, the reference in double on the
// stored (widened) values: tells a wrong kernel from a slow one.
double check(const KvShape &s, KvData &w, const Storage &st, const float *out) {
  const Storage contiguous{st.type, 0};
  const Stored &m = stored_for(s, w, contiguous);
  std::vector<float> k(m.k.size() / st.bytes()), v(k.size());
  ak_convert(AK_F32, k.data(), static_cast<ak_dtype>(st.type), m.k.data(),
             static_cast<std::int64_t>(k.size()));
  ak_convert(AK_F32, v.data(), static_cast<ak_dtype>(st.type), m.v.data(),
             static_cast<std::int64_t>(v.size()));
  const std::int64_t group = s.heads / s.kv_heads, d = s.d, n = s.L;
  double worst = 0.0;
  std::vector<double> p(static_cast<std::size_t>(n));
  for (std::int64_t h : {std::int64_t{0}, s.heads - 1})
    for (std::int64_t i : {std::int64_t{0}, s.q_len() - 1}) {
      const float *q = w.q.data() + (h * s.q_len() + i) * d;
      const std::int64_t hk = h / group, end = s.causal ? i + 1 : n;
      double mx = -INFINITY, sum = 0.0;
      for (std::int64_t j = 0; j < end; ++j) {
        double dot = 0.0;
        for (std::int64_t c = 0; c < d; ++c) dot += double(q[c]) * k[(hk * n + j) * d + c];
        p[j] = dot / std::sqrt(double(d)), mx = std::max(mx, p[j]);
      }
      for (std::int64_t j = 0; j < end; ++j) sum += (p[j] = std::exp(p[j] - mx));
      for (std::int64_t c = 0; c < d; ++c) {
        double o = 0.0;
        for (std::int64_t j = 0; j < end; ++j) o += p[j] / sum * v[(hk * n + j) * d + c];
        const double e = std::fabs(o - out[(h * s.q_len() + i) * d + c]);
        worst = std::isnan(e) ? INFINITY : std::max(worst, e);
      }
    }
  return worst;
}

void BM_kv(benchmark::State &state, KvShape s, Storage st, int threads) {
  KvData &w = data_for(s);
  set_threads(threads);
  if (!call(s, w, st, w.o.data())) {
    state.SkipWithError(ak_last_error());
    return;
  }
  const double diff = check(s, w, st, w.o.data());
  if (!(diff <= agree_tolerance())) {
    state.SkipWithError(("differs from the double reference by " + std::to_string(diff)).c_str());
    return;
  }
  const double read_before = s.decode ? read_gbps_now(threads) : 0.0;
  settle(Impl::attnkern, threads);
  if (st.type == AK_F32 && st.page_size == 0) {
    for (auto _ : state) {
      call(s, w, st, w.o.data());
      benchmark::ClobberMemory();
    }
  } else {
    // Each call paired with its baseline's (paired_timing.hpp): a half
    // cache with fp32's, a paged one with the contiguous cache of its type.
    // vs_f32 / vs_contiguous: baseline time over this time (> 1: faster).
    const Storage base = st.page_size ? Storage{st.type, 0} : Storage{AK_F32, 0};
    call(s, w, base, w.o.data()); // its data made before anything is timed
    const double r = paired_ratio(
        state, [&] { call(s, w, st, w.o.data()); }, [&] { call(s, w, base, w.o.data()); });
    state.counters[st.page_size ? "vs_contiguous" : "vs_f32"] = 1.0 / r;
  }
  if (s.decode) state.counters["read_adj"] = (read_before + read_gbps_now(threads)) / 2;
  const double bytes = 2.0 * double(s.kv_heads * s.L * s.d) * st.bytes();
  state.counters["bytes"] = benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate,
                                               benchmark::Counter::kIs1000);
  state.counters["flops"] = benchmark::Counter(
      s.flops(), benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
  state.counters["refdiff"] = diff;
  state.SetLabel(std::string("ak_attention, K/V ") +
                 (st.type == AK_BF16  ? "bf16"
                  : st.type == AK_F16 ? "f16"
                                      : "fp32") +
                 (st.page_size ? ", pages of " + std::to_string(st.page_size) + " (shuffled)"
                               : ", contiguous"));
}

} // namespace

void register_kv_cache_benchmarks() {
  std::vector<std::pair<KvShape, std::vector<Storage>>> plan;
  const std::vector<Storage> decode_storages = {{AK_F32, 0},   {AK_BF16, 0},   {AK_F16, 0},
                                                {AK_BF16, 16}, {AK_BF16, 128}, {AK_F16, 16},
                                                {AK_F16, 128}};
  for (std::int64_t kvh : {32, 8})
    for (std::int64_t n : {8192, 32768})
      plan.push_back({{true, 32, kvh, n, 128, false}, decode_storages});
  const std::vector<Storage> prefill_storages = {
      {AK_F32, 0}, {AK_BF16, 0}, {AK_F16, 0}, {AK_BF16, 16}};
  for (std::int64_t d : {64, 128})
    for (std::int64_t L : {1024, 4096})
      for (bool causal : {false, true})
        plan.push_back({{false, 8, 8, L, d, causal}, prefill_storages});
  for (const auto &[s, storages] : plan)
    for (int threads : bench_thread_counts())
      for (const Storage &st : storages) {
        const std::string name =
            s.kind() + "/" + st.name() + "/" + s.label() + "/threads:" + std::to_string(threads);
        // Paired rows time long enough for a median of several pairs (a
        // prefill call takes up to 0.1 s; one or two pairs left the ratio
        // to the machine's drift), and run their baseline besides, untimed.
        const bool paired = st.type != AK_F32 || st.page_size != 0;
        benchmark::RegisterBenchmark(name.c_str(), BM_kv, s, st, threads)
            ->Unit(benchmark::kMillisecond)
            ->MinTime(paired ? 0.5 : 0.2)
            ->UseRealTime();
      }
}

} // namespace akb
