// Coverage-guided differential fuzzing of ak_rope and ak_embedding
// (libFuzzer).
//
// Each input picks the function, then for ak_rope the shape (odd head_dims
// and partial rotary_dims included), the style, the layout of x (contiguous
// with or without strides, padded, a view into a fused qkv output,
// head-major), the positions (none, small, any int32) and the frequencies
// (the default table of some theta, or the caller's); for ak_embedding the
// shape, the paddings and the ids (unknown ones included). Either may be
// made invalid on purpose (an odd rotary_dim, an unknown style, a negative
// or overlapping stride, a bad theta; an id past the vocabulary, a short
// ld_out). Buffers are exactly as large as the call may touch. The call
// must then:
// - if invalid: return an error with a message, and write nothing;
// - otherwise: match tests/rope_reference.hpp (rope: within the contract's
//   2e-6 of the pair's magnitude; embedding: bit for bit), leave every other
//   entry alone, and give the same bits on the other thread count.
// A disagreement aborts, so that libFuzzer keeps the input.
// Build and run: scripts/fuzz.sh rope; replayed by ctest from
// tests/fuzz/corpus/rope.txt.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "attnkern.h"
#include "fuzz/fuzz_support.hpp"
#include "rope_reference.hpp"

namespace {

[[noreturn]] void fail(const char *what, long long a = 0, long long b = 0, double got = 0,
                       double want = 0) {
  ak_fuzz::fail("fuzz_rope", what, a, b, got, want);
}

#if defined(__GNUC__) || defined(__clang__)
__attribute__((no_sanitize("enum")))
#endif
ak_rope_style
as_style(int v) {
  ak_rope_style s;
  std::memcpy(&s, &v, sizeof s);
  return s;
}

bool same_bits(const std::vector<float> &a, const std::vector<float> &b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

template <class Call> void same_on_other_threads(int threads, const Call &call) {
  if (!same_bits(call(3 - threads), call(threads))) fail("differs across thread counts");
}

void fuzz_rope(ak_fuzz::Choices &in, int threads) {
  // One input in 8 is large enough (past 2^16 rotated entries) that the
  // library runs it on 2 threads, so that the thread-count check bites.
  const bool large = in.in<int>(0, 7) == 0;
  const std::int64_t batch = in.in(0, 3), seq = in.in(0, large ? 700 : 6), heads = in.in(1, 4);
  const std::int64_t head_dim = in.in(0, 40);
  std::int64_t rotary_dim = in.flag() ? 0 : 2 * in.in(0, head_dim / 2);
  bool invalid = false;
  if (rotary_dim == 0 && head_dim % 2 == 1) { // all of an odd row: not pairs
    if (head_dim > 1)
      rotary_dim = head_dim - 1;
    else
      invalid = true;
  }
  const std::int64_t rd = rotary_dim == 0 ? head_dim : rotary_dim;
  int style = in.in<int>(0, 1);
  const int layout = in.in<int>(0, 4);
  std::int64_t st[3] = {seq * heads * head_dim, heads * head_dim, head_dim}; // [b, s, h]
  std::int64_t offset = 0;
  if (layout == 2) { // padded
    st[2] = head_dim + in.in(0, 3);
    st[1] = heads * st[2] + in.in(0, 3);
    st[0] = seq * st[1] + in.in(0, 3);
  } else if (layout == 3) { // k inside [b, s, 3, h, d]
    st[1] = 3 * heads * head_dim;
    st[0] = seq * st[1];
    offset = heads * head_dim;
  } else if (layout == 4) { // head-major [b, h, s, d]
    st[1] = head_dim;
    st[2] = (seq > 0 ? seq : 1) * head_dim;
    st[0] = heads * st[2];
  }
  const bool pass_strides = layout != 0 || in.flag();
  const int positions_kind = in.in<int>(0, 2);
  float theta = in.flag() ? 10000.0f : in.real(1.5f, 1e6f);
  const bool user_freq = in.flag();
  const int bad = in.in<int>(0, 23);
  if (bad == 0 && rd >= 2) rotary_dim = rd - 1, invalid = true;
  if (bad == 1) style = 2 + in.in<int>(0, 3), invalid = true;
  if (bad == 2 && pass_strides) st[in.in<int>(0, 2)] = -1, invalid = true;
  if (bad == 3 && pass_strides && head_dim > 0) st[2] = head_dim - 1, invalid = true;
  if (bad == 4 && !user_freq) theta = -theta, invalid = true;
  if (bad == 5 && pass_strides && batch > 1 && seq > 0 && head_dim > 0) st[0] = 0, invalid = true;

  std::mt19937 rng(in.u32());
  // Exactly the span of x (its last row's end), past the view's offset.
  std::int64_t span = 0;
  if (!invalid && batch > 0 && seq > 0 && head_dim > 0)
    span = head_dim + (batch - 1) * st[0] + (seq - 1) * st[1] + (heads - 1) * st[2];
  if (invalid) span = 4096; // a refused call writes nothing: room to spare
  std::vector<float> x0(static_cast<std::size_t>(offset + span));
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (auto &v : x0) v = normal(rng);
  std::vector<std::int32_t> positions;
  if (positions_kind > 0) {
    positions.resize(static_cast<std::size_t>(batch * seq));
    for (auto &p : positions)
      p = positions_kind == 1 ? static_cast<std::int32_t>(rng() % 9000) - 1000
                              : static_cast<std::int32_t>(rng());
  }
  std::vector<float> freq;
  if (user_freq) {
    freq.resize(static_cast<std::size_t>(rd / 2 + 1));
    std::uniform_real_distribution<float> u(0.0f, 1.0f);
    for (auto &f : freq) f = u(rng);
  }
  const std::vector<float> used = user_freq ? freq : ak_test::rope_default_inv_freq(rd, theta);
  const auto call = [&](int t) {
    std::vector<float> x = x0;
    ak_set_num_threads(t);
    const ak_status status =
        ak_rope(batch, seq, heads, head_dim, rotary_dim, as_style(style),
                positions.empty() ? nullptr : positions.data(), theta,
                user_freq ? freq.data() : nullptr, x.data() + offset, pass_strides ? st : nullptr);
    if (invalid) {
      if (status == AK_OK) fail("an invalid rope was accepted", bad);
      if (std::string(ak_last_error()).empty()) fail("an error without a message");
      if (!same_bits(x, x0)) fail("written on error", bad);
      return x;
    }
    if (status != AK_OK) fail("a valid rope was refused", status, bad);
    if (span == 0) {
      if (!same_bits(x, x0)) fail("an empty rope wrote");
      return x;
    }
    const ak_test::RopeShape shape{
        batch, seq, heads, head_dim, rd, as_style(style), {st[0], st[1], st[2]}};
    const std::vector<float> view(x0.begin() + offset, x0.end());
    const std::vector<double> want = ak_test::rope_reference(
        shape, positions.empty() ? nullptr : positions.data(), used.data(), view);
    const std::vector<bool> touched = ak_test::rope_touched(shape, view.size());
    for (std::size_t e = 0; e < x.size(); ++e) {
      const bool rotated = e >= static_cast<std::size_t>(offset) && touched[e - offset];
      if (!rotated && std::memcmp(&x[e], &x0[e], sizeof(float)) != 0)
        fail("an entry outside the rotated parts changed", static_cast<long long>(e));
    }
    // inv_freq <= 1 here, so the contract's 2e-6 holds at every int32
    // position (the reference forms the same double angles).
    const std::int64_t off = ak_test::rope_first_off(shape, view, want, x.data() + offset);
    if (off >= 0)
      fail("a rotated entry is off", off, bad, x[static_cast<std::size_t>(off + offset)],
           want[static_cast<std::size_t>(off)]);
    return x;
  };
  same_on_other_threads(threads, call);
}

void fuzz_embedding(ak_fuzz::Choices &in, int threads) {
  const bool large = in.in<int>(0, 7) == 0; // 2 threads' worth, as in fuzz_rope
  const std::int64_t n_tokens = in.in(0, large ? 2000 : 20), vocab = in.in(0, 12),
                     dim = in.in(0, 40);
  const std::int64_t ld_table = dim + in.in(0, 3) + (dim == 0);
  std::int64_t ld_out = dim + in.in(0, 3) + (dim == 0);
  std::mt19937 rng(in.u32());
  std::vector<std::int32_t> ids(static_cast<std::size_t>(n_tokens));
  for (auto &id : ids)
    id = vocab == 0 || rng() % 4 == 0 ? -1 - static_cast<std::int32_t>(rng() % 3)
                                      : static_cast<std::int32_t>(rng() % vocab);
  bool invalid = false;
  const int bad = n_tokens > 0 ? in.in<int>(0, 15) : 99;
  if (bad == 0)
    ids[static_cast<std::size_t>(in.in(0, n_tokens - 1))] =
        static_cast<std::int32_t>(vocab + in.in(0, 2)),
                                                     invalid = true;
  if (bad == 1 && dim > 0) ld_out = dim - 1, invalid = true;
  const std::int64_t table_len = vocab > 0 && dim > 0 ? (vocab - 1) * ld_table + dim : 0;
  const std::int64_t out_len = invalid                   ? 1024
                               : n_tokens > 0 && dim > 0 ? (n_tokens - 1) * ld_out + dim
                                                         : 0;
  std::vector<float> table(static_cast<std::size_t>(table_len));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (auto &v : table) v = normal(rng);
  const std::vector<float> out0(static_cast<std::size_t>(out_len), ak_fuzz::kCanary);
  const auto call = [&](int t) {
    std::vector<float> out = out0;
    ak_set_num_threads(t);
    const ak_status status =
        ak_embedding(n_tokens, ids.data(), vocab, dim, table.data(), ld_table, out.data(), ld_out);
    if (invalid) {
      if (status == AK_OK) fail("an invalid lookup was accepted", bad);
      if (std::string(ak_last_error()).empty()) fail("an error without a message");
      if (!same_bits(out, out0)) fail("written on error", bad);
      return out;
    }
    if (status != AK_OK) fail("a valid lookup was refused", status);
    std::vector<float> want = out0;
    ak_test::embedding_reference(n_tokens, ids.data(), dim, table.data(), ld_table, want.data(),
                                 ld_out);
    if (!same_bits(out, want)) fail("a wrong lookup", n_tokens, dim);
    return out;
  };
  same_on_other_threads(threads, call);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *bytes, std::size_t size) {
  ak_fuzz::Choices in(bytes, size);
  const char *isa = in.isa();
  const int threads = in.threads();
  if (ak_set_isa(isa) != AK_OK) fail("ak_set_isa");
  if (in.flag())
    fuzz_embedding(in, threads);
  else
    fuzz_rope(in, threads);
  return 0;
}
