/* What both languages must agree on for the ABI to hold: enum sizes and the
   size and every offset of ak_attention_desc. Shared by c_layout.c (C99) and
   header_cxx.cpp (C++17). */
#ifndef AK_TEST_LAYOUT_H
#define AK_TEST_LAYOUT_H

#include <stddef.h>

#define AK_TEST_LAYOUT_FIELDS 24

#define AK_TEST_LAYOUT(out)                                                                        \
  do {                                                                                             \
    (out)[0] = sizeof(ak_status);                                                                  \
    (out)[1] = sizeof(ak_trans);                                                                   \
    (out)[2] = sizeof(ak_mask);                                                                    \
    (out)[3] = sizeof(ak_attention_desc);                                                          \
    (out)[4] = offsetof(ak_attention_desc, struct_size);                                           \
    (out)[5] = offsetof(ak_attention_desc, batch);                                                 \
    (out)[6] = offsetof(ak_attention_desc, num_heads);                                             \
    (out)[7] = offsetof(ak_attention_desc, num_kv_heads);                                          \
    (out)[8] = offsetof(ak_attention_desc, q_len);                                                 \
    (out)[9] = offsetof(ak_attention_desc, kv_len);                                                \
    (out)[10] = offsetof(ak_attention_desc, head_dim);                                             \
    (out)[11] = offsetof(ak_attention_desc, head_dim_v);                                           \
    (out)[12] = offsetof(ak_attention_desc, scale);                                                \
    (out)[13] = offsetof(ak_attention_desc, mask);                                                 \
    (out)[14] = offsetof(ak_attention_desc, window_left);                                          \
    (out)[15] = offsetof(ak_attention_desc, window_right);                                         \
    (out)[16] = offsetof(ak_attention_desc, bias);                                                 \
    (out)[17] = offsetof(ak_attention_desc, bias_strides);                                         \
    (out)[18] = offsetof(ak_attention_desc, kv_lens);                                              \
    (out)[19] = offsetof(ak_attention_desc, q_strides);                                            \
    (out)[20] = offsetof(ak_attention_desc, k_strides);                                            \
    (out)[21] = offsetof(ak_attention_desc, v_strides);                                            \
    (out)[22] = offsetof(ak_attention_desc, o_strides);                                            \
    (out)[23] =                                                                                    \
        offsetof(ak_attention_desc, probs) + sizeof(float *) - offsetof(ak_attention_desc, lse);   \
  } while (0)

#ifdef __cplusplus
extern "C" {
#endif
void ak_test_c_layout(size_t out[AK_TEST_LAYOUT_FIELDS]);
#ifdef __cplusplus
}
#endif

#endif
