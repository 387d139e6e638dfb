/* A shared object of the user's own (a plugin) that embeds libattnkern.a
   and keeps the library's ak_* symbols to itself. */
#include <math.h>

#include <attnkern.h>

__attribute__((visibility("default"))) int plugin_softmax_ok(void) {
  const float x[4] = {0.5f, -1.0f, 2.0f, 0.0f};
  float y[4];
  if (ak_softmax(1, 4, x, 4, y, 4) != AK_OK) return 0;
  return fabsf(y[0] + y[1] + y[2] + y[3] - 1.0f) < 1e-6f && y[2] > y[0];
}
