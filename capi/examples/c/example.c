/* attnkern from C: C = A * B with ak_sgemm, then a row-wise softmax of C.
 *
 *   cc example.c -I<prefix>/include -L<prefix>/lib -lattnkern -o example
 *
 * Every call returns an ak_status; on failure nothing was written and
 * ak_last_error() says which argument was wrong and why. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "attnkern.h"

/* Print the status and the library's detail, then leave. */
#define AK_CHECK(call)                                                                             \
  do {                                                                                             \
    ak_status st_ = (call);                                                                        \
    if (st_ != AK_OK) {                                                                            \
      fprintf(stderr, "%s failed: %s\n  %s\n", #call, ak_status_string(st_), ak_last_error());     \
      return EXIT_FAILURE;                                                                         \
    }                                                                                              \
  } while (0)

int main(void) {
  /* The header we compiled against must match the library we loaded. */
  if (ak_abi_version() != AK_ABI_VERSION) {
    fprintf(stderr, "attnkern ABI %d, this program expects %d\n", ak_abi_version(), AK_ABI_VERSION);
    return EXIT_FAILURE;
  }
  printf("attnkern %s, instruction set %s\n", ak_version(), ak_get_isa());

  /* Row-major: A is 2 x 3, B is 3 x 2, C = A * B is 2 x 2. */
  const float a[2 * 3] = {1, 2, 3, 4, 5, 6};
  const float b[3 * 2] = {1, 0, 0, 1, 1, 1};
  float c[2 * 2];
  /* C = 1 * A * B + 0 * C; leading dimensions are row lengths in elements. */
  AK_CHECK(ak_sgemm(AK_NO_TRANS, AK_NO_TRANS, 2, 2, 3, 1.0f, a, 3, b, 2, 0.0f, c, 2));
  printf("C = [[%g, %g], [%g, %g]]\n", c[0], c[1], c[2], c[3]);

  /* Softmax of each row of C, in place (y == x, ldy == ldx). */
  AK_CHECK(ak_softmax(2, 2, c, 2, c, 2));
  printf("softmax(C) = [[%.6f, %.6f], [%.6f, %.6f]]\n", c[0], c[1], c[2], c[3]);

  /* C was [[4, 5], [10, 11]]: each row is softmax([0, 1]) shifted. */
  const float want = 1.0f / (1.0f + expf(1.0f)); /* 0.268941 */
  for (int r = 0; r < 2; ++r) {
    if (fabsf(c[2 * r] - want) > 1e-6f || fabsf(c[2 * r + 1] - (1 - want)) > 1e-6f) {
      fprintf(stderr, "unexpected result in row %d\n", r);
      return EXIT_FAILURE;
    }
  }

  /* A mistake, on purpose: lda = 2 is too small for a 2 x 3 A. The call is
     rejected before anything is written, and says why. */
  ak_status st = ak_sgemm(AK_NO_TRANS, AK_NO_TRANS, 2, 2, 3, 1.0f, a, 2, b, 2, 0.0f, c, 2);
  printf("lda = 2: %s\n  %s\n", ak_status_string(st), ak_last_error());
  return st == AK_ERR_BAD_STRIDE ? EXIT_SUCCESS : EXIT_FAILURE;
}
