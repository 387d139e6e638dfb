// ak_convert and ak_kv_cache_store: validation, then the kernels.
#include <algorithm>
#include <cstdint>
#include <new>
#include <vector>

#include "../src/convert/half.hpp"
#include "../src/dispatch.hpp"
#include "../src/scratch.hpp"
#include "../src/threading.hpp"
#include "attnkern.h"
#include "errors.hpp"
#include "validate.hpp"

namespace attnkern::capi {
namespace {

bool valid_dtype(int v) { return v == AK_F32 || v == AK_F16 || v == AK_BF16; }

// How a NULL-pointer message counts an array's elements.
const char *dtype_unit(int v) {
  return v == AK_F32 ? "f32 values" : v == AK_F16 ? "f16 values" : "bf16 values";
}

ArgCheck &check_dtype(ArgCheck &ck, const char *name, int v) {
  if (!valid_dtype(v))
    ck.fail(AK_ERR_BAD_ARGUMENT, "%s = %d is not an ak_dtype (AK_F32, AK_F16 or AK_BF16)", name, v);
  return ck;
}

// Element counts and offsets into an array of `esize`-byte elements: any of
// them must keep its size in bytes within int64, so the bound on elements is
// twice as high for the 16-bit types as for fp32. Each records OVERFLOW
// (and returns 0) past it.
class ElementMath {
public:
  ElementMath(ArgCheck &ck, const char *name, int esize)
      : ck_(ck), name_(name), max_(INT64_MAX / esize) {}
  std::int64_t mul(std::int64_t a, std::int64_t b) {
    std::int64_t r = 0;
    if (__builtin_mul_overflow(a, b, &r) || r > max_) return overflow();
    return r;
  }
  std::int64_t add(std::int64_t a, std::int64_t b) {
    std::int64_t r = 0;
    if (__builtin_add_overflow(a, b, &r) || r > max_) return overflow();
    return r;
  }

private:
  std::int64_t overflow() {
    ck_.fail(AK_ERR_OVERFLOW, "%s spans more elements than a byte count can hold (at most %lld)",
             name_, static_cast<long long>(max_));
    return 0;
  }
  ArgCheck &ck_;
  const char *name_;
  std::int64_t max_;
};

ak_status convert_api(int dst_type, void *dst, int src_type, const void *src, std::int64_t n) {
  ArgCheck ck("ak_convert");
  check_dtype(ck, "dst_type", dst_type);
  check_dtype(ck, "src_type", src_type);
  ck.size("n", n);
  if (!ck.ok()) return ck.result();
  const DType dt = static_cast<DType>(dst_type), st = static_cast<DType>(src_type);
  const int dsize = dtype_size(dt), ssize = dtype_size(st);
  if (n > INT64_MAX / std::max(dsize, ssize))
    ck.fail(AK_ERR_OVERFLOW, "n = %lld elements of %d bytes overflow a byte count",
            static_cast<long long>(n), std::max(dsize, ssize));
  ck.pointer("dst", dst, n, dtype_unit(dst_type)).pointer("src", src, n, dtype_unit(src_type));
  if (ck.ok() && n > 0 && dst == src && dsize != ssize)
    ck.fail(AK_ERR_BAD_ARGUMENT,
            "dst == src (in place) needs types of one size (dst_type %d: %d bytes, src_type %d: "
            "%d bytes)",
            dst_type, dsize, src_type, ssize);
  if (!ck.ok()) return ck.result();
  if (n == 0) return AK_OK;
  active_kernels().convert(dt, dst, st, src, n, threads_for_call());
  return AK_OK;
}

// The pool's [page, head, slot] strides (all 0: contiguous), checked so that
// distinct rows never overlap (the pool is an output); returns the elements
// the pool spans (0 if empty).
std::int64_t check_pool(ArgCheck &ck, const KvStoreArgs &a, std::int64_t num_pages,
                        const std::int64_t *given, std::int64_t *strides) {
  ElementMath m(ck, "pool", dtype_size(a.dst_type));
  const bool contiguous = !given || (given[0] == 0 && given[1] == 0 && given[2] == 0);
  if (contiguous) {
    strides[2] = a.head_dim;
    strides[1] = m.mul(a.page_size, a.head_dim);
    strides[0] = m.mul(a.num_kv_heads, strides[1]);
  } else {
    for (int i = 0; i < 3; ++i) {
      strides[i] = given[i];
      if (given[i] < 0)
        ck.fail(AK_ERR_BAD_STRIDE, "page_strides[%d] = %lld is negative", i,
                static_cast<long long>(given[i]));
    }
  }
  const std::int64_t extents[3] = {num_pages, a.num_kv_heads, a.page_size};
  if (!ck.ok() || extents[0] == 0 || extents[1] == 0 || extents[2] == 0 || a.head_dim == 0)
    return 0;
  // Taking the axes by increasing stride, each stride must clear the span
  // of everything below it.
  int order[3] = {0, 1, 2};
  std::sort(order, order + 3, [&](int x, int y) { return strides[x] < strides[y]; });
  std::int64_t span = a.head_dim;
  for (int axis : order) {
    if (extents[axis] <= 1) continue;
    if (strides[axis] < span) {
      ck.fail(AK_ERR_BAD_STRIDE, "page_strides[%d] = %lld makes pool rows overlap (needs >= %lld)",
              axis, static_cast<long long>(strides[axis]), static_cast<long long>(span));
      return 0;
    }
    span = m.add(span, m.mul(extents[axis] - 1, strides[axis]));
  }
  return ck.ok() ? span : 0;
}

// Reports the first token (in order) whose slot an earlier token named.
void fail_duplicate(ArgCheck &ck, const std::int64_t *slots, std::int64_t first,
                    std::int64_t second) {
  ck.fail(AK_ERR_BAD_ARGUMENT, "slots[%lld] and slots[%lld] both name slot %lld",
          static_cast<long long>(first), static_cast<long long>(second),
          static_cast<long long>(slots[second]));
}

// Every slot in [-1, capacity), and no slot named by two tokens. The
// duplicates are found with one bit per slot of the pool where that map is
// no larger than the tokens' own list (a decode step's few tokens in a big
// pool are not), else by sorting the tokens by slot: O(n log n).
void check_slots(ArgCheck &ck, const std::int64_t *slots, std::int64_t n_tokens,
                 std::int64_t capacity) {
  std::int64_t named = 0;
  for (std::int64_t t = 0; t < n_tokens; ++t) {
    if (slots[t] < -1 || slots[t] >= capacity) {
      ck.fail(AK_ERR_BAD_ARGUMENT,
              "slots[%lld] = %lld is outside [-1, %lld) (-1, or a slot of the num_pages * "
              "page_size in the pool)",
              static_cast<long long>(t), static_cast<long long>(slots[t]),
              static_cast<long long>(capacity));
      return;
    }
    named += slots[t] >= 0;
  }
  if (injected_allocation_failure()) throw std::bad_alloc();
  if (capacity / 64 <= named) { // bad_alloc: OUT_OF_MEMORY, before any store
    std::vector<std::uint64_t> seen(static_cast<std::size_t>(capacity / 64 + 1));
    for (std::int64_t t = 0; t < n_tokens; ++t) {
      if (slots[t] < 0) continue;
      std::uint64_t &word = seen[static_cast<std::size_t>(slots[t] / 64)];
      const std::uint64_t bit = std::uint64_t{1} << (slots[t] % 64);
      if (word & bit) {
        std::int64_t earlier = 0;
        while (slots[earlier] != slots[t]) ++earlier;
        return fail_duplicate(ck, slots, earlier, t);
      }
      word |= bit;
    }
    return;
  }
  std::vector<std::int64_t> tokens; // bad_alloc: OUT_OF_MEMORY, before any store
  tokens.reserve(static_cast<std::size_t>(named));
  for (std::int64_t t = 0; t < n_tokens; ++t)
    if (slots[t] >= 0) tokens.push_back(t);
  std::sort(tokens.begin(), tokens.end(), [&](std::int64_t x, std::int64_t y) {
    return slots[x] != slots[y] ? slots[x] < slots[y] : x < y;
  });
  for (std::size_t i = 1; i < tokens.size(); ++i)
    if (slots[tokens[i]] == slots[tokens[i - 1]])
      return fail_duplicate(ck, slots, tokens[i - 1], tokens[i]);
}

ak_status kv_cache_store_api(std::int64_t n_tokens, std::int64_t num_kv_heads,
                             std::int64_t head_dim, const float *src,
                             const std::int64_t *src_strides, const std::int64_t *slots,
                             int dst_type, void *pool, std::int64_t num_pages,
                             std::int64_t page_size, const std::int64_t *page_strides) {
  ArgCheck ck("ak_kv_cache_store");
  ck.size("n_tokens", n_tokens).size("num_kv_heads", num_kv_heads).size("head_dim", head_dim);
  ck.size("num_pages", num_pages).size("page_size", page_size);
  check_dtype(ck, "dst_type", dst_type);
  if (!ck.ok()) return ck.result();
  if (page_size == 0 && num_pages > 0)
    ck.fail(AK_ERR_BAD_ARGUMENT, "page_size = 0 with num_pages = %lld (a page needs a slot)",
            static_cast<long long>(num_pages));

  KvStoreArgs a{};
  a.n_tokens = n_tokens;
  a.num_kv_heads = num_kv_heads;
  a.head_dim = head_dim;
  a.src = src;
  a.slots = slots;
  a.dst_type = static_cast<DType>(dst_type);
  a.pool = pool;
  a.page_size = page_size;

  // src: only read, so its rows may overlap; the strides must be
  // non-negative and the span representable.
  ElementMath sm(ck, "src", 4);
  if (!src_strides || (src_strides[0] == 0 && src_strides[1] == 0)) {
    a.src_strides[1] = head_dim;
    a.src_strides[0] = sm.mul(num_kv_heads, head_dim);
  } else {
    for (int i = 0; i < 2; ++i) {
      a.src_strides[i] = src_strides[i];
      if (src_strides[i] < 0)
        ck.fail(AK_ERR_BAD_STRIDE, "src_strides[%d] = %lld is negative", i,
                static_cast<long long>(src_strides[i]));
    }
  }
  const bool empty = n_tokens == 0 || num_kv_heads == 0 || head_dim == 0;
  std::int64_t src_extent = 0;
  if (ck.ok() && !empty)
    src_extent = sm.add(sm.add(head_dim, sm.mul(n_tokens - 1, a.src_strides[0])),
                        sm.mul(num_kv_heads - 1, a.src_strides[1]));
  const std::int64_t pool_extent =
      ck.ok() ? check_pool(ck, a, num_pages, page_strides, a.page_strides) : 0;
  ck.pointer("src", src, src_extent).pointer("pool", pool, pool_extent, dtype_unit(dst_type));
  ck.pointer("slots", slots, n_tokens, "slot indices");
  if (!ck.ok()) return ck.result();
  std::int64_t capacity = 0;
  if (__builtin_mul_overflow(num_pages, page_size, &capacity)) capacity = INT64_MAX;
  check_slots(ck, slots, n_tokens, capacity);
  if (!ck.ok()) return ck.result();
  if (empty) return AK_OK;
  active_kernels().kv_cache_store(a, threads_for_call());
  return AK_OK;
}

} // namespace
} // namespace attnkern::capi

extern "C" {

ak_status ak_convert(ak_dtype dst_type, void *dst, ak_dtype src_type, const void *src, int64_t n) {
  using namespace attnkern::capi;
  return guarded("ak_convert",
                 [&] { return convert_api(raw_enum(dst_type), dst, raw_enum(src_type), src, n); });
}

ak_status ak_kv_cache_store(int64_t n_tokens, int64_t num_kv_heads, int64_t head_dim,
                            const float *src, const int64_t src_strides[2], const int64_t *slots,
                            ak_dtype dst_type, void *pool, int64_t num_pages, int64_t page_size,
                            const int64_t page_strides[3]) {
  using namespace attnkern::capi;
  return guarded("ak_kv_cache_store", [&] {
    return kv_cache_store_api(n_tokens, num_kv_heads, head_dim, src, src_strides, slots,
                              raw_enum(dst_type), pool, num_pages, page_size, page_strides);
  });
}

} // extern "C"
