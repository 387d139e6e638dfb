// Coverage-guided differential fuzzing of ak_convert and ak_kv_cache_store
// (libFuzzer).
//
// Each input picks the function, then for ak_convert the two types, the
// length (around the vector widths, or long enough to be split over
// threads), in place or not, and the values (random bit patterns: every
// class of fp32 and half value, NaNs with payloads included); for
// ak_kv_cache_store the shape, the page size, the pool's layout (contiguous,
// with gaps, head-major), the source's strides, the slots (shuffled, some
// -1) and the storage type. Either may be made invalid on purpose (an
// unknown type, a negative size or stride, a slot out of range, two tokens
// on one slot). The call must then:
// - if invalid: return an error with a message, and write nothing;
// - otherwise: give each element's bits as tests/half_reference.hpp's
//   references round it (a NaN: a NaN of the same sign), leave every other
//   byte alone, and give the same bits on the other thread count.
// A disagreement aborts, so that libFuzzer keeps the input.
// Build and run: scripts/fuzz.sh kv_store; replayed by ctest from
// tests/fuzz/corpus/kv_store.txt.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "attnkern.h"
#include "fuzz/fuzz_support.hpp"
#include "half_reference.hpp"

namespace {

[[noreturn]] void fail(const char *what, long long a = 0, long long b = 0) {
  ak_fuzz::fail("fuzz_kv_store", what, a, b);
}

int size_of(int t) { return t == AK_F32 ? 4 : 2; }

// Any int as the C enum a C caller may pass (see tests/misuse_support.hpp's
// as_c_enum: made from its bits, with UBSan's enum check off here alone).
#if defined(__GNUC__) || defined(__clang__)
__attribute__((no_sanitize("enum")))
#endif
ak_dtype
as_dtype(int v) {
  ak_dtype t;
  std::memcpy(&t, &v, sizeof t);
  return t;
}

float as_float(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Whether the element `got` (bits in type dt) is the reference conversion
// of `src` (bits in type st).
bool converted_ok(int dt, std::uint32_t got, int st, std::uint32_t src) {
  if (dt == st) return got == src;
  double v; // the exact source value
  if (st == AK_F32) {
    v = as_float(src);
  } else {
    v = ak_test::ref_widen(static_cast<ak_dtype>(st), static_cast<std::uint16_t>(src));
  }
  const bool neg = st == AK_F32 ? (src >> 31) != 0 : (src >> 15) != 0;
  if (dt == AK_F32) {
    if (std::isnan(v)) return std::isnan(as_float(got)) && (got >> 31) == (neg ? 1u : 0u);
    float f = static_cast<float>(v);
    std::uint32_t want;
    std::memcpy(&want, &f, sizeof want);
    return got == want;
  }
  if (std::isnan(v) && st != AK_F32)
    return std::isnan(
               ak_test::ref_widen(static_cast<ak_dtype>(dt), static_cast<std::uint16_t>(got))) &&
           ((got >> 15) != 0) == neg;
  const float f = st == AK_F32 ? as_float(src) : static_cast<float>(v);
  return got == ak_test::ref_narrow(static_cast<ak_dtype>(dt), f);
}

std::uint32_t element(const std::vector<std::uint8_t> &buf, std::int64_t i, int t) {
  if (t == AK_F32) {
    std::uint32_t u;
    std::memcpy(&u, buf.data() + i * 4, 4);
    return u;
  }
  std::uint16_t h;
  std::memcpy(&h, buf.data() + i * 2, 2);
  return h;
}

void fill_bits(std::vector<std::uint8_t> &buf, std::mt19937 &rng) {
  for (auto &b : buf) b = static_cast<std::uint8_t>(rng());
}

template <class Call> void same_on_other_threads(int threads, const Call &call) {
  const std::vector<std::uint8_t> first = call(threads);
  if (call(3 - threads) != first) fail("differs across thread counts");
}

void fuzz_convert(ak_fuzz::Choices &in, int threads) {
  int dt = in.in<int>(0, 2), st = in.in<int>(0, 2);
  const bool large = in.in<int>(0, 7) == 0;
  std::int64_t n = large ? in.in(150000, 300000) : in.in(0, 100);
  const bool in_place = size_of(dt) == size_of(st) && in.flag();
  bool invalid = false;
  const int bad = in.in<int>(0, 31);
  if (bad == 0) dt = 3 + in.in<int>(0, 5), invalid = true;
  if (bad == 1) st = -1 - in.in<int>(0, 5), invalid = true;
  if (bad == 2) n = -1 - in.in(0, 3), invalid = true;
  std::mt19937 rng(in.u32());
  const std::int64_t len = invalid ? 64 : n, kTail = 8;
  std::vector<std::uint8_t> src(static_cast<std::size_t>(len * 4 + kTail));
  fill_bits(src, rng);
  const auto call = [&](int t) {
    std::vector<std::uint8_t> dst(src.size(), 0xa5);
    if (in_place) dst = src;
    ak_set_num_threads(t);
    const ak_status status =
        ak_convert(as_dtype(dt), dst.data(), as_dtype(st), in_place ? dst.data() : src.data(), n);
    if (invalid) {
      if (status == AK_OK) fail("an invalid call was accepted", dt, st);
      if (std::string(ak_last_error()).empty()) fail("an error without a message");
      for (std::size_t i = 0; i < dst.size(); ++i)
        if (dst[i] != (in_place ? src[i] : 0xa5))
          fail("written on error", static_cast<long long>(i));
      return dst;
    }
    if (status != AK_OK) fail("a valid conversion was refused", dt, st);
    for (std::int64_t i = 0; i < n; ++i)
      if (!converted_ok(dt, element(dst, i, dt), st, element(src, i, st)))
        fail("a wrong conversion", i, element(src, i, st));
    for (std::size_t i = static_cast<std::size_t>(n * size_of(dt)); i < dst.size(); ++i)
      if (dst[i] != (in_place ? src[i] : 0xa5)) fail("written past n", static_cast<long long>(i));
    return dst;
  };
  same_on_other_threads(threads, call);
}

void fuzz_store(ak_fuzz::Choices &in, int threads) {
  const std::int64_t heads = in.in(1, 4), head_dim = in.in(1, 40);
  const std::int64_t page_size = in.in(1, 17), num_pages = in.in(1, 6);
  const std::int64_t capacity = page_size * num_pages;
  const std::int64_t n_tokens = in.in(0, std::min<std::int64_t>(capacity, 24));
  int dt = in.in<int>(0, 2);
  const int layout = in.in<int>(0, 2);
  const std::int64_t pad_token = in.flag() ? in.in(0, 9) : 0, pad_head = in.in(0, 3);
  std::int64_t ss[2] = {heads * (head_dim + pad_head) + pad_token, head_dim + pad_head};
  std::int64_t ps[3] = {heads * page_size * head_dim, page_size * head_dim, head_dim};
  if (layout == 1) { // gaps everywhere
    ps[2] = head_dim + in.in(0, 4);
    ps[1] = page_size * ps[2] + in.in(0, 4);
    ps[0] = heads * ps[1] + in.in(0, 4);
  } else if (layout == 2) { // head-major: [heads, pages, slots, dim]
    ps[0] = page_size * head_dim;
    ps[1] = num_pages * ps[0];
  }
  const std::int64_t pool_elems =
      ps[0] * (num_pages - 1) + ps[1] * (heads - 1) + ps[2] * (page_size - 1) + head_dim + 4;
  const bool null_page_strides = layout == 0 && in.flag(); // contiguous either way
  std::mt19937 rng(in.u32());
  std::vector<std::int64_t> slots(static_cast<std::size_t>(capacity));
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), rng);
  slots.resize(static_cast<std::size_t>(n_tokens));
  for (auto &s : slots)
    if (rng() % 4 == 0) s = -1;
  bool invalid = false;
  const int bad = n_tokens > 1 ? in.in<int>(0, 31) : 99;
  if (bad == 0) slots[1] = slots[0] < 0 ? -2 : slots[0], invalid = true; // a duplicate, or -2
  if (bad == 1) slots[0] = capacity + in.in(0, 3), invalid = true;
  if (bad == 2) ss[1] = -1, invalid = true;
  if (bad == 3) dt = 3, invalid = true;
  if (bad == 4 && layout == 1 && page_size > 1) ps[2] = head_dim - 1, invalid = true; // overlap
  const int esize = size_of(dt > 2 ? 0 : dt);
  std::vector<std::uint8_t> src(static_cast<std::size_t>((n_tokens * ss[0] + 1) * 4));
  fill_bits(src, rng);
  std::vector<std::uint8_t> pool0(static_cast<std::size_t>(pool_elems * esize));
  fill_bits(pool0, rng);
  const bool contiguous_src = pad_token == 0 && pad_head == 0 && !invalid && in.flag();
  const auto call = [&](int t) {
    std::vector<std::uint8_t> pool = pool0;
    ak_set_num_threads(t);
    const ak_status status =
        ak_kv_cache_store(n_tokens, heads, head_dim, reinterpret_cast<const float *>(src.data()),
                          contiguous_src ? nullptr : ss, slots.data(), as_dtype(dt), pool.data(),
                          num_pages, page_size, null_page_strides ? nullptr : ps);
    if (invalid) {
      if (status == AK_OK) fail("an invalid store was accepted", bad);
      if (std::string(ak_last_error()).empty()) fail("an error without a message");
      if (pool != pool0) fail("written on error", bad);
      return pool;
    }
    if (status != AK_OK) fail("a valid store was refused", status);
    std::vector<bool> stored(static_cast<std::size_t>(pool_elems), false);
    for (std::int64_t tok = 0; tok < n_tokens; ++tok) {
      const std::int64_t s = slots[static_cast<std::size_t>(tok)];
      if (s < 0) continue;
      for (std::int64_t h = 0; h < heads; ++h)
        for (std::int64_t d = 0; d < head_dim; ++d) {
          const std::int64_t e = (s / page_size) * ps[0] + h * ps[1] + (s % page_size) * ps[2] + d;
          stored[static_cast<std::size_t>(e)] = true;
          const std::uint32_t x = element(src, tok * ss[0] + h * ss[1] + d, AK_F32);
          if (!converted_ok(dt, element(pool, e, dt), AK_F32, x)) fail("a wrong store", tok, d);
        }
    }
    for (std::int64_t e = 0; e < pool_elems; ++e)
      if (!stored[static_cast<std::size_t>(e)] && element(pool, e, dt) != element(pool0, e, dt))
        fail("a byte outside the stored rows changed", e);
    return pool;
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
    fuzz_store(in, threads);
  else
    fuzz_convert(in, threads);
  return 0;
}
