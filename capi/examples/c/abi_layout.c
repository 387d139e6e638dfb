/* Prints the C compiler's view of the ABI types, one "name value" per line,
 * for the Rust, Go and Python tests to compare their own declarations with:
 *
 *   sizeof.ak_attention_desc 240
 *   offsetof.ak_attention_desc.batch 8
 *   sizeof.ak_status 4
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
  return 0;
}
