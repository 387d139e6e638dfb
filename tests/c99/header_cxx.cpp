// The public header compiled as strict C++17 (it comes first, so it must be
// self-contained), and its types laid out exactly as the C compiler lays them.
#include <attnkern.h>

#include <cstddef>
#include <cstdio>

#include "layout.h"

static_assert(sizeof(ak_status) == sizeof(int), "ak_status must stay int-sized");
static_assert(AK_OK == 0, "AK_OK is 0");

int main() {
  std::size_t cxx[AK_TEST_LAYOUT_FIELDS];
  std::size_t c[AK_TEST_LAYOUT_FIELDS];
  AK_TEST_LAYOUT(cxx);
  ak_test_c_layout(c);
  int failures = 0;
  for (int i = 0; i < AK_TEST_LAYOUT_FIELDS; ++i) {
    if (c[i] != cxx[i]) {
      std::fprintf(stderr, "layout entry %d: C says %zu, C++ says %zu\n", i, c[i], cxx[i]);
      ++failures;
    }
  }
  if (failures == 0) std::printf("C and C++ agree on the layout of attnkern.h\n");
  return failures == 0 ? 0 : 1;
}
