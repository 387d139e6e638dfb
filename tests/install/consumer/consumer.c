/* Minimal downstream program: one softmax, checked. */
#include <math.h>
#include <stdio.h>

#include <attnkern.h>

int main(void) {
  const float x[3] = {1.0f, 2.0f, 3.0f};
  float y[3];
  if (ak_abi_version() != AK_ABI_VERSION) return 1;
  if (ak_softmax(1, 3, x, 3, y, 3) != AK_OK) {
    fprintf(stderr, "%s\n", ak_last_error());
    return 1;
  }
  if (fabsf(y[0] + y[1] + y[2] - 1.0f) > 1e-6f || !(y[2] > y[1] && y[1] > y[0])) return 1;
  printf("attnkern %s on %s: ok\n", ak_version(), ak_get_isa());
  return 0;
}
