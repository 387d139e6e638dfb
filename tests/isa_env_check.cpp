// Run with AK_ISA set: exits 0 iff the library started on the expected set.
// argv[1]: the set expected, or "best" for the automatic choice.
#include <cstdio>
#include <cstring>

#include "attnkern.h"

int main(int argc, char **argv) {
  if (argc != 2) return 2;
  const char *start = ak_get_isa(); // first use: reads AK_ISA
  char first[32];
  std::snprintf(first, sizeof first, "%s", start);
  ak_set_isa("auto");
  const char *expected = std::strcmp(argv[1], "best") == 0 ? ak_get_isa() : argv[1];
  if (std::strcmp(first, expected) != 0) {
    std::fprintf(stderr, "started on %s, expected %s\n", first, expected);
    return 1;
  }
  std::printf("started on %s as expected\n", first);
  return 0;
}
