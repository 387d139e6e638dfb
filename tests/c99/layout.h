/* What both languages must agree on for the ABI to hold: enum sizes and the
   size and every offset of ak_attention_desc. Shared by c_layout.c (C99),
   header_cxx.cpp (C++17) and c99_consumer.c, which also compare it with the
   LP64 values below: programs built against an earlier header carry those
   offsets, so any change to them is an ABI break. */
#ifndef AK_TEST_LAYOUT_H
#define AK_TEST_LAYOUT_H

#include <stddef.h>

#define AK_TEST_LAYOUT_FIELDS 39

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
    (out)[24] = sizeof(ak_dtype);                                                                  \
    (out)[25] = AK_ATTENTION_DESC_SIZE_0_1;                                                        \
    (out)[26] = offsetof(ak_attention_desc, k_type);                                               \
    (out)[27] = offsetof(ak_attention_desc, v_type);                                               \
    (out)[28] = offsetof(ak_attention_desc, softcap);                                              \
    (out)[29] = offsetof(ak_attention_desc, alibi_slopes);                                         \
    (out)[30] = offsetof(ak_attention_desc, sinks);                                                \
    (out)[31] = offsetof(ak_attention_desc, block_table);                                          \
    (out)[32] = offsetof(ak_attention_desc, block_table_stride);                                   \
    (out)[33] = offsetof(ak_attention_desc, page_size);                                            \
    (out)[34] = offsetof(ak_attention_desc, num_pages);                                            \
    (out)[35] = offsetof(ak_attention_desc, k_page_strides);                                       \
    (out)[36] = offsetof(ak_attention_desc, v_page_strides);                                       \
    (out)[37] = offsetof(ak_attention_desc, cu_seqlens_q);                                         \
    (out)[38] = offsetof(ak_attention_desc, cu_seqlens_k);                                         \
  } while (0)

/* AK_TEST_LAYOUT on LP64 (x86-64, aarch64 Linux and macOS): entry 23 is the
   span lse..probs, 25 is AK_ATTENTION_DESC_SIZE_0_1 (the 0.1 sizeof), 26 on
   the fields added in 0.2. */
#define AK_TEST_LAYOUT_LP64                                                                        \
  {                                                                                                \
    4, 4, 4, 368, 0, 8, 16, 24, 32, 40, 48, 56, 64, 68, 72, 80, 88, 96, 120, 128, 152, 176, 200,   \
        16, 4, 240, 240, 244, 248, 256, 264, 272, 280, 288, 296, 304, 328, 352, 360                \
  }

/* Whether this compiler targets LP64, where AK_TEST_LAYOUT_LP64 applies. */
#define AK_TEST_IS_LP64 (sizeof(void *) == 8 && sizeof(long) == 8)

#ifdef __cplusplus
extern "C" {
#endif
void ak_test_c_layout(size_t out[AK_TEST_LAYOUT_FIELDS]);
#ifdef __cplusplus
}
#endif

#endif
