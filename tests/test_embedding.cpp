// ak_embedding on every instruction set: rows copied bit for bit from a
// padded table into a padded output, zero rows for unknown tokens (< 0),
// padding untouched, the same bits on 1, 2 and 3 threads, and a refused
// call (an id past the vocabulary) that writes nothing.
#include <gtest/gtest.h>

#include <attnkern.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "rope_reference.hpp"
#include "test_support.hpp"

namespace ak_test {
namespace {

class Embedding : public PerIsa {};

// out from ak_embedding and from the reference (same padding canaries).
void check_lookup(std::int64_t n_tokens, std::int64_t vocab, std::int64_t dim,
                  std::int64_t pad_table, std::int64_t pad_out, std::uint32_t seed) {
  SCOPED_TRACE("tokens " + std::to_string(n_tokens) + " vocab " + std::to_string(vocab) + " dim " +
               std::to_string(dim) + " pads " + std::to_string(pad_table) + "/" +
               std::to_string(pad_out));
  std::mt19937 rng(seed);
  const std::int64_t ld_table = dim + pad_table, ld_out = dim + pad_out;
  const std::vector<float> table = random_normal(static_cast<std::size_t>(vocab * ld_table), seed);
  std::vector<std::int32_t> ids(static_cast<std::size_t>(n_tokens));
  for (auto &id : ids) {
    const std::uint32_t u = rng() % 8;
    id = u == 0   ? -1
         : u == 1 ? std::numeric_limits<std::int32_t>::min()
                  : static_cast<std::int32_t>(rng() % vocab);
  }
  std::vector<float> want(static_cast<std::size_t>(n_tokens * ld_out), canary());
  embedding_reference(n_tokens, ids.data(), dim, table.data(), ld_table, want.data(), ld_out);
  std::vector<float> first;
  for (int threads : {1, 2, 3}) {
    ASSERT_EQ(ak_set_num_threads(threads), AK_OK);
    std::vector<float> out(want.size(), canary());
    ASSERT_EQ(
        ak_embedding(n_tokens, ids.data(), vocab, dim, table.data(), ld_table, out.data(), ld_out),
        AK_OK)
        << ak_last_error();
    ASSERT_EQ(std::memcmp(out.data(), want.data(), out.size() * sizeof(float)), 0)
        << threads << " threads";
  }
}

TEST_P(Embedding, CopiesRowsAndZeroesUnknownTokens) {
  for (std::int64_t dim : {1, 3, 4, 7, 8, 15, 16, 17, 31, 33, 64, 65, 100})
    check_lookup(9, 50, dim, dim % 3, (dim + 1) % 4, static_cast<std::uint32_t>(dim));
}

// Large enough to be split over threads (the split must not change a bit).
TEST_P(Embedding, ManyTokensAcrossThreads) { check_lookup(600, 1000, 200, 5, 0, 11); }

TEST_P(Embedding, IdPastVocabularyWritesNothing) {
  const std::vector<float> table = random_normal(4 * 8, 2);
  const std::int32_t ids[] = {1, -1, 3, 4, 0};
  std::vector<float> out(5 * 8, canary());
  EXPECT_EQ(ak_embedding(5, ids, 4, 8, table.data(), 8, out.data(), 8), AK_ERR_BAD_ARGUMENT);
  EXPECT_NE(std::string(ak_last_error()).find("ids[3] = 4"), std::string::npos) << ak_last_error();
  for (float v : out) ASSERT_TRUE(is_canary(v));
}

AK_INSTANTIATE_PER_ISA(Embedding);

} // namespace
} // namespace ak_test
