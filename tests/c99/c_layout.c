/* The layout of the public types as a C99 compiler sees it, for
   header_cxx.cpp to compare with the C++ view of the same header. */
#include <attnkern.h>

#include <stddef.h>

#include "layout.h"

void ak_test_c_layout(size_t out[AK_TEST_LAYOUT_FIELDS]) { AK_TEST_LAYOUT(out); }
