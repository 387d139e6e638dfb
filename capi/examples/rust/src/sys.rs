//! Raw declarations of include/attnkern.h, one to one. Everything here is
//! `unsafe` to call; the safe layer is the crate root.
#![allow(non_camel_case_types)]

use std::os::raw::{c_char, c_int};

/// `ak_status`. A newtype over the C enum's `int`, not a Rust enum: a status
/// that a newer library adds must not be undefined behaviour here.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ak_status(pub c_int);

impl ak_status {
    pub const AK_OK: Self = Self(0);
    pub const AK_ERR_NULL_POINTER: Self = Self(1);
    pub const AK_ERR_BAD_SHAPE: Self = Self(2);
    pub const AK_ERR_BAD_STRIDE: Self = Self(3);
    pub const AK_ERR_BAD_ARGUMENT: Self = Self(4);
    pub const AK_ERR_OVERFLOW: Self = Self(5);
    pub const AK_ERR_OUT_OF_MEMORY: Self = Self(6);
    pub const AK_ERR_UNSUPPORTED: Self = Self(7);
    pub const AK_ERR_INTERNAL: Self = Self(8);
}

/// `ak_trans`; only ever passed *to* the library, so a Rust enum is sound.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ak_trans {
    AK_NO_TRANS = 0,
    AK_TRANS = 1,
}

/// `ak_mask`. Note that `ak_attention_desc::mask` is an `int32_t`, not an
/// `ak_mask`: store `ak_mask::X as i32` there.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ak_mask {
    AK_MASK_NONE = 0,
    AK_MASK_CAUSAL_TOP_LEFT = 1,
    AK_MASK_CAUSAL_BOTTOM_RIGHT = 2,
}

/// `ak_attention_desc`, field for field (the 4 bytes of padding after
/// `struct_size` come from `repr(C)` exactly as from the C compiler).
/// Initialise with [`ak_attention_desc_init`], then set fields.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ak_attention_desc {
    pub struct_size: u32,
    pub batch: i64,
    pub num_heads: i64,
    pub num_kv_heads: i64,
    pub q_len: i64,
    pub kv_len: i64,
    pub head_dim: i64,
    pub head_dim_v: i64,
    pub scale: f32,
    pub mask: i32,
    pub window_left: i64,
    pub window_right: i64,
    pub bias: *const f32,
    pub bias_strides: [i64; 3],
    pub kv_lens: *const i32,
    pub q_strides: [i64; 3],
    pub k_strides: [i64; 3],
    pub v_strides: [i64; 3],
    pub o_strides: [i64; 3],
    pub lse: *mut f32,
    pub probs: *mut f32,
}

pub const AK_ABI_VERSION: c_int = 1;

extern "C" {
    pub fn ak_status_string(s: ak_status) -> *const c_char;
    pub fn ak_last_error() -> *const c_char;
    pub fn ak_version() -> *const c_char;
    pub fn ak_abi_version() -> c_int;

    pub fn ak_get_isa() -> *const c_char;
    pub fn ak_isa_supported(name: *const c_char) -> c_int;
    pub fn ak_set_isa(name: *const c_char) -> ak_status;
    pub fn ak_set_num_threads(n: c_int) -> ak_status;
    pub fn ak_get_num_threads() -> c_int;
    pub fn ak_set_num_threads_local(n: c_int) -> ak_status;
    pub fn ak_get_num_threads_local() -> c_int;
    pub fn ak_release_scratch();

    pub fn ak_sgemm(
        ta: ak_trans,
        tb: ak_trans,
        m: i64,
        n: i64,
        k: i64,
        alpha: f32,
        a: *const f32,
        lda: i64,
        b: *const f32,
        ldb: i64,
        beta: f32,
        c: *mut f32,
        ldc: i64,
    ) -> ak_status;
    pub fn ak_sgemm_strided_batched(
        ta: ak_trans,
        tb: ak_trans,
        m: i64,
        n: i64,
        k: i64,
        alpha: f32,
        a: *const f32,
        lda: i64,
        stride_a: i64,
        b: *const f32,
        ldb: i64,
        stride_b: i64,
        beta: f32,
        c: *mut f32,
        ldc: i64,
        stride_c: i64,
        batch: i64,
    ) -> ak_status;

    pub fn ak_softmax(
        rows: i64,
        cols: i64,
        x: *const f32,
        ldx: i64,
        y: *mut f32,
        ldy: i64,
    ) -> ak_status;
    pub fn ak_log_softmax(
        rows: i64,
        cols: i64,
        x: *const f32,
        ldx: i64,
        y: *mut f32,
        ldy: i64,
    ) -> ak_status;
    pub fn ak_softmax_axis(
        outer: i64,
        axis_len: i64,
        inner: i64,
        x: *const f32,
        y: *mut f32,
    ) -> ak_status;

    pub fn ak_attention_desc_init(d: *mut ak_attention_desc);
    pub fn ak_attention(
        d: *const ak_attention_desc,
        q: *const f32,
        k: *const f32,
        v: *const f32,
        out: *mut f32,
    ) -> ak_status;

    pub fn ak_position_encoding(max_len: i64, dim: i64, base: f32, out: *mut f32) -> ak_status;
    pub fn ak_mha_self_attention(
        n_tokens: i64,
        d_model: i64,
        num_heads: i64,
        d_k: i64,
        d_v: i64,
        x: *const f32,
        w_q: *const f32,
        w_k: *const f32,
        w_v: *const f32,
        mask: ak_mask,
        out: *mut f32,
    ) -> ak_status;
}
