// ak_kv_cache_store on every instruction set: contiguous and paged pools,
// odd page sizes, pool strides with gaps and in another axis order, strided
// sources, skipped tokens, each storage type. The stored rows must be bit
// for bit ak_convert's of the same source rows (ak_convert is checked
// against the references in test_convert.cpp), and every other byte of the
// pool must keep its value.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace ak_test {
namespace {

struct StoreCase {
  std::int64_t n_tokens = 5, heads = 2, head_dim = 13;
  std::int64_t num_pages = 4, page_size = 7;
  std::int64_t src_pad_token = 0, src_pad_head = 0; // extra floats between rows (0: contiguous)
  enum Pool { contiguous, gaps, head_major } pool = contiguous;
  int skip_every = 3; // token t skipped (slot -1) when t % skip_every == 1; 0: none
  std::uint32_t seed = 1;
};

std::string describe(const StoreCase &c) {
  return "tokens " + std::to_string(c.n_tokens) + ", heads " + std::to_string(c.heads) +
         ", head_dim " + std::to_string(c.head_dim) + ", pages " + std::to_string(c.num_pages) +
         " x " + std::to_string(c.page_size) + ", pool layout " + std::to_string(c.pool) +
         ", src padding " + std::to_string(c.src_pad_token) + "/" + std::to_string(c.src_pad_head);
}

// Runs one case in type t and checks the pool byte for byte.
void check_store(const StoreCase &c, ak_dtype t) {
  SCOPED_TRACE(describe(c) + ", type " + std::to_string(t));
  const std::int64_t esize = t == AK_F32 ? 4 : 2;
  std::mt19937 rng(c.seed);

  // The source, with padding between rows when the case asks for strides.
  const std::int64_t head_stride = c.head_dim + c.src_pad_head;
  const std::int64_t token_stride = c.heads * head_stride + c.src_pad_token;
  const bool src_contiguous = c.src_pad_head == 0 && c.src_pad_token == 0;
  const std::int64_t src_strides[2] = {token_stride, head_stride};
  std::vector<float> src =
      random_normal(static_cast<std::size_t>(c.n_tokens * token_stride + 1), c.seed, 30.0f);
  // A few specials, so that the rounding's edges pass through here too.
  const float specials[] = {0.0f, -0.0f, 65520.0f, -1e30f, 1e-6f, INFINITY, -NAN};
  for (std::size_t i = 0; i < src.size(); i += 11) src[i] = specials[(i / 11) % 7];

  // The pool's strides in elements.
  std::int64_t ps[3] = {0, 0, 0}; // [page, head, slot]
  std::int64_t pool_elems = c.num_pages * c.heads * c.page_size * c.head_dim;
  if (c.pool == StoreCase::gaps) {
    ps[2] = c.head_dim + 3;
    ps[1] = c.page_size * ps[2] + 5;
    ps[0] = c.heads * ps[1] + 1;
    pool_elems = c.num_pages * ps[0];
  } else if (c.pool == StoreCase::head_major) { // [heads, pages, slots, dim]
    ps[2] = c.head_dim;
    ps[0] = c.page_size * c.head_dim;
    ps[1] = c.num_pages * ps[0];
  }
  const std::int64_t eff[3] = {c.pool == StoreCase::contiguous ? c.heads * c.page_size * c.head_dim
                                                               : ps[0],
                               c.pool == StoreCase::contiguous ? c.page_size * c.head_dim : ps[1],
                               c.pool == StoreCase::contiguous ? c.head_dim : ps[2]};

  // Distinct slots in random order; some tokens skipped.
  std::vector<std::int64_t> all(static_cast<std::size_t>(c.num_pages * c.page_size));
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), rng);
  ASSERT_LE(c.n_tokens, static_cast<std::int64_t>(all.size()));
  std::vector<std::int64_t> slots(all.begin(), all.begin() + c.n_tokens);
  if (c.skip_every > 0)
    for (std::int64_t tok = 0; tok < c.n_tokens; ++tok)
      if (tok % c.skip_every == 1) slots[static_cast<std::size_t>(tok)] = -1;

  std::vector<std::uint8_t> pool(static_cast<std::size_t>(pool_elems * esize));
  for (auto &b : pool) b = static_cast<std::uint8_t>(rng());
  std::vector<std::uint8_t> want = pool;
  for (std::int64_t tok = 0; tok < c.n_tokens; ++tok) {
    const std::int64_t s = slots[static_cast<std::size_t>(tok)];
    if (s < 0) continue;
    for (std::int64_t h = 0; h < c.heads; ++h) {
      const std::int64_t off = (s / c.page_size) * eff[0] + h * eff[1] + (s % c.page_size) * eff[2];
      ASSERT_EQ(ak_convert(t, want.data() + off * esize, AK_F32,
                           src.data() + tok * token_stride + h * head_stride, c.head_dim),
                AK_OK);
    }
  }
  const ak_status st =
      ak_kv_cache_store(c.n_tokens, c.heads, c.head_dim, src.data(),
                        src_contiguous ? nullptr : src_strides, slots.data(), t, pool.data(),
                        c.num_pages, c.page_size, c.pool == StoreCase::contiguous ? nullptr : ps);
  ASSERT_EQ(st, AK_OK) << ak_last_error();
  for (std::size_t i = 0; i < pool.size(); ++i)
    ASSERT_EQ(pool[i], want[i]) << "pool byte " << i << " (element " << i / esize << ")";
}

class KvCacheStore : public PerIsa {};

TEST_P(KvCacheStore, ContiguousPool) {
  for (ak_dtype t : {AK_F32, AK_F16, AK_BF16}) {
    StoreCase c;
    check_store(c, t);
    c.skip_every = 0;
    c.head_dim = 64;
    check_store(c, t);
  }
}

TEST_P(KvCacheStore, OnePageIsAContiguousCache) {
  StoreCase c;
  c.num_pages = 1;
  c.page_size = 40;
  c.n_tokens = 17;
  for (ak_dtype t : {AK_F32, AK_F16, AK_BF16}) check_store(c, t);
}

TEST_P(KvCacheStore, PageSizesAndLayouts) {
  for (std::int64_t page_size : {1, 7, 16}) {
    for (auto layout : {StoreCase::contiguous, StoreCase::gaps, StoreCase::head_major}) {
      for (ak_dtype t : {AK_F32, AK_F16, AK_BF16}) {
        StoreCase c;
        c.page_size = page_size;
        c.num_pages = 48 / page_size + 1;
        c.n_tokens = 11;
        c.heads = 3;
        c.head_dim = page_size == 16 ? 33 : 8;
        c.pool = layout;
        c.seed = static_cast<std::uint32_t>(page_size * 10 + layout);
        check_store(c, t);
      }
    }
  }
}

TEST_P(KvCacheStore, StridedSource) {
  StoreCase c;
  c.src_pad_head = 5;
  c.src_pad_token = 3;
  c.pool = StoreCase::gaps;
  for (ak_dtype t : {AK_F32, AK_F16, AK_BF16}) check_store(c, t);
  c.src_pad_token = 0; // only the head stride given
  for (ak_dtype t : {AK_F32, AK_F16, AK_BF16}) check_store(c, t);
}

TEST_P(KvCacheStore, AllSkippedWritesNothing) {
  StoreCase c;
  std::vector<std::int64_t> slots(static_cast<std::size_t>(c.n_tokens), -1);
  std::vector<float> src(static_cast<std::size_t>(c.n_tokens * c.heads * c.head_dim), 1.0f);
  std::vector<std::uint16_t> pool(
      static_cast<std::size_t>(c.num_pages * c.heads * c.page_size * c.head_dim), 0x5a5a);
  ASSERT_EQ(ak_kv_cache_store(c.n_tokens, c.heads, c.head_dim, src.data(), nullptr, slots.data(),
                              AK_BF16, pool.data(), c.num_pages, c.page_size, nullptr),
            AK_OK);
  for (std::uint16_t v : pool) ASSERT_EQ(v, 0x5a5a);
}

// Enough work to be split over two threads: the same bytes as on one.
TEST_P(KvCacheStore, LargeOnTwoThreads) {
  StoreCase c;
  c.n_tokens = 300;
  c.heads = 4;
  c.head_dim = 128;
  c.num_pages = 20;
  c.page_size = 16;
  c.skip_every = 7;
  c.pool = StoreCase::gaps;
  ASSERT_EQ(ak_set_num_threads(2), AK_OK);
  for (ak_dtype t : {AK_F16, AK_BF16}) check_store(c, t);
}

// 16 MiB of output and more go out with streaming stores, from each row's
// first 64-byte boundary (the gaps layout puts the rows anywhere): the same
// bytes as ak_convert's of each row, on one thread and on two.
TEST_P(KvCacheStore, LargeStoresStreamTheSameBytes) {
  StoreCase c;
  c.n_tokens = 9000; // 17.6 MiB of bf16 output, some of it skipped
  c.heads = 8;
  c.head_dim = 128;
  c.page_size = 16;
  c.num_pages = c.n_tokens / c.page_size + 2;
  c.skip_every = 5;
  for (auto layout : {StoreCase::contiguous, StoreCase::gaps}) {
    c.pool = layout;
    // (Under the sanitizers two threads only: each runs the one-thread code
    // on its share.)
    for (int threads : {1, 2}) {
      if (kSanitized && threads == 1) continue;
      ASSERT_EQ(ak_set_num_threads(threads), AK_OK);
      for (ak_dtype t : {AK_F16, AK_BF16}) check_store(c, t);
    }
  }
}

AK_INSTANTIATE_PER_ISA(KvCacheStore);

} // namespace
} // namespace ak_test
