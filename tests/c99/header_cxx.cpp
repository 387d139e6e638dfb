// The public header compiled as strict C++17 (it comes first, so it must be
// self-contained), and its types laid out exactly as the C compiler lays them.
#include <attnkern.h>

#include <cstddef>
#include <cstdio>

#include "layout.h"

static_assert(sizeof(ak_status) == sizeof(int), "ak_status must stay int-sized");
static_assert(AK_OK == 0, "AK_OK is 0");
static_assert(AK_F32 == 0 && AK_F16 == 1 && AK_BF16 == 2, "ak_dtype values are fixed");
// A 0.1 program's descriptor ends where k_type starts: the library tells the
// two releases apart by struct_size alone.
static_assert(AK_ATTENTION_DESC_SIZE_0_1 == offsetof(ak_attention_desc, k_type),
              "AK_ATTENTION_DESC_SIZE_0_1 is the 0.1 sizeof");
static_assert(!(sizeof(void *) == 8 && sizeof(long) == 8) ||
                  (AK_ATTENTION_DESC_SIZE_0_1 == 240 && sizeof(ak_attention_desc) == 368),
              "LP64 descriptor sizes: 240 (0.1) and 368 (0.2)");

int main() {
  std::size_t cxx[AK_TEST_LAYOUT_FIELDS];
  std::size_t c[AK_TEST_LAYOUT_FIELDS];
  const std::size_t lp64[AK_TEST_LAYOUT_FIELDS] = AK_TEST_LAYOUT_LP64;
  AK_TEST_LAYOUT(cxx);
  ak_test_c_layout(c);
  int failures = 0;
  for (int i = 0; i < AK_TEST_LAYOUT_FIELDS; ++i) {
    if (c[i] != cxx[i]) {
      std::fprintf(stderr, "layout entry %d: C says %zu, C++ says %zu\n", i, c[i], cxx[i]);
      ++failures;
    }
    if (AK_TEST_IS_LP64 && cxx[i] != lp64[i]) {
      std::fprintf(stderr, "layout entry %d: %zu, the LP64 ABI has %zu\n", i, cxx[i], lp64[i]);
      ++failures;
    }
  }
  if (failures == 0) std::printf("C and C++ agree on the layout of attnkern.h\n");
  return failures == 0 ? 0 : 1;
}
