import stub_math


def scaled_dot_product_attention(q, k, v, attn_mask=None, is_causal=False, enable_gqa=False):
    from torch import Tensor
    mask = None if attn_mask is None else attn_mask.array
    return Tensor(stub_math.attention(q.array, k.array, v.array, is_causal, mask))
