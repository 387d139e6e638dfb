// The data of fuzz_attention: [batch, heads, len, dim] tensors in the
// layouts the target picks, and K and V as stored (f32, f16 or bf16).
#pragma once

#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "../../src/convert/half.hpp"
#include "attnkern.h"
#include "fuzz/fuzz_support.hpp"

namespace ak_fuzz {

// A [batch, heads, len, dim] tensor in one of three layouts: all-zero
// strides (contiguous), head-major with each row padded, or sequence-major
// ([batch, len, heads, dim], the layout of a fused QKV projection).
struct Tensor {
  std::int64_t strides[3] = {0, 0, 0};
  std::int64_t sb = 0, sh = 0, ss = 0; // resolved
  std::vector<float> data;

  void shape(int layout, std::int64_t batch, std::int64_t heads, std::int64_t len, std::int64_t dim,
             std::int64_t pad) {
    switch (layout) {
    case 0:
      sb = heads * len * dim, sh = len * dim, ss = dim;
      break;
    case 1:
      ss = dim + pad, sh = len * ss, sb = heads * sh + pad;
      break;
    default:
      sh = dim + pad, ss = heads * sh, sb = len * ss + pad;
      break;
    }
    if (layout != 0) strides[0] = sb, strides[1] = sh, strides[2] = ss;
    const std::int64_t n = batch * sb + 1; // +1: never empty
    data.assign(static_cast<std::size_t>(n), kCanary);
  }
  float *at(std::int64_t b, std::int64_t h, std::int64_t s) {
    return &data[b * sb + h * sh + s * ss];
  }
};

struct Special {
  int tensor; // 0 q, 1 k, 2 v, 3 bias
  std::uint32_t where;
  float value;
};

attnkern::DType internal(ak_dtype t) { return static_cast<attnkern::DType>(static_cast<int>(t)); }

// x rounded to the storage type and widened back: what the library reads.
float stored(ak_dtype t, float x) {
  if (t == AK_F32) return x;
  return attnkern::half_to_float(internal(t), attnkern::float_to_half(internal(t), x));
}

// K or V as the library reads them: n elements of one storage type.
struct Store {
  ak_dtype type = AK_F32;
  std::vector<float> f32;
  std::vector<std::uint16_t> half;

  Store(ak_dtype t, std::size_t n) : type(t) {
    if (t == AK_F32)
      f32.assign(n, std::numeric_limits<float>::quiet_NaN());
    else
      half.assign(n, attnkern::float_to_half(internal(t), std::numeric_limits<float>::quiet_NaN()));
  }
  void set(std::size_t i, float x) {
    if (type == AK_F32)
      f32[i] = x;
    else
      half[i] = attnkern::float_to_half(internal(type), x);
  }
  // ak_attention takes const float * whatever the type.
  const float *ptr() const {
    if (type == AK_F32) return f32.empty() ? nullptr : f32.data();
    return half.empty() ? nullptr : reinterpret_cast<const float *>(half.data());
  }
};

// A packed variable-length batch: each entry's length (at most max_len),
// read from the input, its offsets cu, and the tensors re-laid as one
// [1, heads, total] tensor (batch stride 0). One input in 32 then spoils
// cu (a first offset not 0, a decrease, an entry past max_len): the call
// must refuse it.
struct Packed {
  std::vector<std::int32_t> cu;
  std::vector<std::int64_t> lens;
  std::int64_t total = 0;
  bool invalid = false;

  void pack(Choices &in, std::int64_t batch, std::int64_t max_len) {
    cu.assign(1, 0);
    for (std::int64_t b = 0; b < batch; ++b) {
      lens.push_back(in.in(0, max_len));
      cu.push_back(static_cast<std::int32_t>(cu.back() + lens.back()));
    }
    total = cu.back();
    if (in.in<int>(0, 31) == 0 && batch > 0) {
      const int kind = in.in<int>(0, 2);
      if (kind == 0) cu[0] = 1;
      if (kind == 1) cu[1] = -1;
      if (kind == 2) cu.back() = static_cast<std::int32_t>(cu[cu.size() - 2] + max_len + 1);
      invalid = true;
    }
  }
  // t's rows i < lens[b] of each entry b, packed in entry order.
  void repack(Tensor &t, int layout, std::int64_t heads, std::int64_t dim, std::int64_t pad) {
    Tensor p;
    p.shape(layout, 1, heads, total, dim, pad);
    p.strides[0] = 0, p.sb = 0;
    std::int64_t row = 0;
    for (std::size_t b = 0; b < lens.size(); row += lens[b], ++b)
      for (std::int64_t h = 0; h < heads; ++h)
        for (std::int64_t i = 0; i < lens[b]; ++i)
          for (std::int64_t c = 0; c < dim; ++c)
            p.at(0, h, row + i)[c] = t.at(static_cast<std::int64_t>(b), h, i)[c];
    t = std::move(p);
  }
};

} // namespace ak_fuzz
