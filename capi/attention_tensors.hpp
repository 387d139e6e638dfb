// Checks of ak_attention's tensor arguments: the [batch, head, seq, dim]
// views of q, k, v and out, and where K and V are stored (type, pages).
#pragma once

#include <cstdint>

#include "../src/kernel_table.hpp"
#include "attnkern.h"
#include "validate.hpp"

namespace attnkern::capi {

// A [batch, heads, seq, dim] tensor with [batch, head, seq] strides and a
// contiguous dim axis.
struct TensorSpec {
  const char *name;         // the pointer argument, e.g. "out"
  const char *strides_name; // its descriptor field, e.g. "o_strides"
  std::int64_t extents[3];  // batch, heads, seq
  std::int64_t dim;
  std::int64_t strides[3];
};

// Resolves all-zero strides to the contiguous layout, checks the strides and
// returns the elements the tensor spans (0 if empty).
std::int64_t check_tensor(ArgCheck &ck, TensorSpec &t, bool is_output);

// The descriptor as this library reads it: `d` copied, and the fields its
// struct_size does not reach (an older release's descriptor) at their
// defaults. False, with the failure recorded, for an unknown struct_size.
bool read_descriptor(ArgCheck &ck, const ak_attention_desc *d, ak_attention_desc *out);

// Checks the descriptor's storage fields (k_type, v_type, softcap, the block
// table and the pools), then k and v (their tensors or pools), and fills
// `k_src` and `v_src`. `dv` is head_dim_v resolved; `total_k` the packed
// keys (cu_seqlens_k[batch]) where cu_seqlens_k is set.
void check_kv_storage(ArgCheck &ck, const ak_attention_desc &d, std::int64_t dv, const void *k,
                      const void *v, std::int64_t total_k, KvLayout *k_src, KvLayout *v_src);

// A packed batch's offsets `cu` ([batch + 1]; NULL: none): cu[0] = 0 and
// every sequence's length in [0, max_len]. Returns cu[batch] (0 for NULL
// or on failure).
std::int64_t check_seqlens(ArgCheck &ck, const char *name, const std::int32_t *cu,
                           std::int64_t batch, std::int64_t max_len, const char *max_name);

// Checks that every page a visible key needs lies in [0, num_pages) (the
// kernels read no other); call after every other check passed.
void check_needed_pages(ArgCheck &ck, const ak_attention_desc &d);

} // namespace attnkern::capi
