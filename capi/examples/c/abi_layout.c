/* Prints the C compiler's view of the ABI types, one "name value" per line,
 * for the Rust, Go and Python tests to compare their own declarations with:
 *
 *   sizeof.ak_attention_desc 368
 *   offsetof.ak_attention_desc.batch 8
 *   sizeof.ak_status 4
 *   value.AK_ATTENTION_DESC_SIZE_0_1 240
 *   ...                                                                      */
#include <stddef.h>
#include <stdio.h>

#include "attnkern.h"

#define ALIGNOF(T)                                                                                 \
  offsetof(                                                                                        \
      struct {                                                                                     \
        char c_;                                                                                   \
        T t_;                                                                                      \
      },                                                                                           \
      t_)
#define TYPE(T) printf("sizeof." #T " %zu\nalignof." #T " %zu\n", sizeof(T), (size_t)ALIGNOF(T))
#define FIELD(f) printf("offsetof.ak_attention_desc." #f " %zu\n", offsetof(ak_attention_desc, f))

int main(void) {
  TYPE(ak_status);
  TYPE(ak_trans);
  TYPE(ak_mask);
  TYPE(ak_dtype);
  TYPE(ak_rope_style);
  TYPE(ak_attention_desc);
  FIELD(struct_size);
  FIELD(batch);
  FIELD(num_heads);
  FIELD(num_kv_heads);
  FIELD(q_len);
  FIELD(kv_len);
  FIELD(head_dim);
  FIELD(head_dim_v);
  FIELD(scale);
  FIELD(mask);
  FIELD(window_left);
  FIELD(window_right);
  FIELD(bias);
  FIELD(bias_strides);
  FIELD(kv_lens);
  FIELD(q_strides);
  FIELD(k_strides);
  FIELD(v_strides);
  FIELD(o_strides);
  FIELD(lse);
  FIELD(probs);
  FIELD(k_type);
  FIELD(v_type);
  FIELD(softcap);
  FIELD(alibi_slopes);
  FIELD(sinks);
  FIELD(block_table);
  FIELD(block_table_stride);
  FIELD(page_size);
  FIELD(num_pages);
  FIELD(k_page_strides);
  FIELD(v_page_strides);
  FIELD(cu_seqlens_q);
  FIELD(cu_seqlens_k);
  /* The struct_size a 0.1 program passes: the bindings check it is where
     their k_type starts. */
  printf("value.AK_ATTENTION_DESC_SIZE_0_1 %u\n", (unsigned)AK_ATTENTION_DESC_SIZE_0_1);
  return 0;
}
