//! Raw declarations of attnkern's C header (include/attnkern.h), one to one,
//! linking libattnkern (see build.rs for how it is found). Everything here is
//! `unsafe` to call; the `attnkern` crate is the safe layer over it.
#![allow(non_camel_case_types)]

use std::os::raw::{c_char, c_int, c_void};

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

/// `ak_dtype`, the storage type of K/V caches and of `ak_convert`'s arrays;
/// only ever passed *to* the library. `ak_attention_desc::k_type` and
/// `v_type` are `int32_t`: store `ak_dtype::X as i32` there.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ak_dtype {
    AK_F32 = 0,
    AK_F16 = 1,
    AK_BF16 = 2,
}

/// `ak_rope_style`: which entries of a row `ak_rope` rotates together; only
/// ever passed *to* the library.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ak_rope_style {
    AK_ROPE_NEOX = 0,
    AK_ROPE_INTERLEAVED = 1,
}

/// `ak_attention_desc`, field for field (the 4 bytes of padding after
/// `struct_size` come from `repr(C)` exactly as from the C compiler).
/// Initialise with [`ak_attention_desc_init_sized`], then set fields.
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
    // ---- added in 0.2; AK_ATTENTION_DESC_SIZE_0_1 is where they start.
    pub k_type: i32,
    pub v_type: i32,
    pub softcap: f32,
    pub alibi_slopes: *const f32,
    pub sinks: *const f32,
    pub block_table: *const i32,
    pub block_table_stride: i64,
    pub page_size: i64,
    pub num_pages: i64,
    pub k_page_strides: [i64; 3],
    pub v_page_strides: [i64; 3],
    pub cu_seqlens_q: *const i32,
    pub cu_seqlens_k: *const i32,
}

/// `ak_sgemm_blocking`: the SGEMM register tile and cache blocks of the
/// instruction set in use, as `ak_sgemm_get_blocking` reports them.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ak_sgemm_blocking {
    pub mr: i64,
    pub nr: i64,
    pub mc: i64,
    pub kc: i64,
    pub nc: i64,
    pub skinny_m: i64,
    pub kc_narrow: i64,
    pub narrow_n: i64,
}

/// `AK_ATTENTION_DESC_SIZE_0_1`: the `struct_size` of a 0.1 descriptor, the
/// offset of `k_type` (240 on LP64); `ak_attention` gives every field past
/// it its default. A function: `offset_of!` is newer than this crate's
/// rust-version.
pub fn ak_attention_desc_size_0_1() -> u32 {
    let d = std::mem::MaybeUninit::<ak_attention_desc>::uninit();
    let base = d.as_ptr();
    // SAFETY: addr_of! takes the field's address without reading it.
    let k_type = unsafe { std::ptr::addr_of!((*base).k_type) };
    (k_type as usize - base as usize) as u32
}

pub const AK_ABI_VERSION: c_int = 1;

/// `ak_convert`.
pub type ak_convert_fn = unsafe extern "C" fn(
    dst_type: ak_dtype,
    dst: *mut c_void,
    src_type: ak_dtype,
    src: *const c_void,
    n: i64,
) -> ak_status;

/// `ak_kv_cache_store`.
pub type ak_kv_cache_store_fn = unsafe extern "C" fn(
    n_tokens: i64,
    num_kv_heads: i64,
    head_dim: i64,
    src: *const f32,
    src_strides: *const i64,
    slots: *const i64,
    dst_type: ak_dtype,
    pool: *mut c_void,
    num_pages: i64,
    page_size: i64,
    page_strides: *const i64,
) -> ak_status;

/// `ak_rope`.
pub type ak_rope_fn = unsafe extern "C" fn(
    batch: i64,
    seq_len: i64,
    num_heads: i64,
    head_dim: i64,
    rotary_dim: i64,
    style: ak_rope_style,
    positions: *const i32,
    theta: f32,
    inv_freq: *const f32,
    x: *mut f32,
    strides: *const i64,
) -> ak_status;

/// `ak_embedding`.
pub type ak_embedding_fn = unsafe extern "C" fn(
    n_tokens: i64,
    ids: *const i32,
    vocab_size: i64,
    dim: i64,
    table: *const f32,
    ld_table: i64,
    out: *mut f32,
    ld_out: i64,
) -> ak_status;

/// `ak_convert` of the library loaded, or `None` from a 0.1 library. The
/// functions added in 0.2 are looked up at run time rather than linked: ABI
/// version 1 covers 0.1 libraries too, and this crate must link and run
/// against one (everything but these two works there).
pub fn ak_convert() -> Option<ak_convert_fn> {
    // SAFETY: the symbol, where the library has it, has this type.
    optional::lookup(&optional::CONVERT, b"ak_convert\0")
        .map(|f| unsafe { std::mem::transmute::<*mut c_void, ak_convert_fn>(f) })
}

/// `ak_kv_cache_store` of the library loaded, or `None` from a 0.1 library.
pub fn ak_kv_cache_store() -> Option<ak_kv_cache_store_fn> {
    optional::lookup(&optional::KV_CACHE_STORE, b"ak_kv_cache_store\0")
        .map(|f| unsafe { std::mem::transmute::<*mut c_void, ak_kv_cache_store_fn>(f) })
}

/// `ak_rope` of the library loaded, or `None` from a library that predates it.
pub fn ak_rope() -> Option<ak_rope_fn> {
    optional::lookup(&optional::ROPE, b"ak_rope\0")
        .map(|f| unsafe { std::mem::transmute::<*mut c_void, ak_rope_fn>(f) })
}

/// `ak_embedding` of the library loaded, or `None` from a library that
/// predates it.
pub fn ak_embedding() -> Option<ak_embedding_fn> {
    optional::lookup(&optional::EMBEDDING, b"ak_embedding\0")
        .map(|f| unsafe { std::mem::transmute::<*mut c_void, ak_embedding_fn>(f) })
}

#[cfg(unix)]
mod optional {
    use std::os::raw::{c_char, c_void};
    use std::sync::atomic::{AtomicUsize, Ordering};

    extern "C" {
        fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
    }

    // dlfcn.h's RTLD_DEFAULT: every object loaded, libattnkern among them.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    const RTLD_DEFAULT: *mut c_void = std::ptr::null_mut();
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    const RTLD_DEFAULT: *mut c_void = -2isize as *mut c_void;

    /// 0: not looked up yet; 1: missing; else the address.
    pub static CONVERT: AtomicUsize = AtomicUsize::new(0);
    pub static KV_CACHE_STORE: AtomicUsize = AtomicUsize::new(0);
    pub static ROPE: AtomicUsize = AtomicUsize::new(0);
    pub static EMBEDDING: AtomicUsize = AtomicUsize::new(0);

    pub fn lookup(cache: &AtomicUsize, name: &[u8]) -> Option<*mut c_void> {
        let mut addr = cache.load(Ordering::Relaxed);
        if addr == 0 {
            // SAFETY: name is NUL-terminated; dlsym only reads it.
            let found = unsafe { dlsym(RTLD_DEFAULT, name.as_ptr() as *const c_char) };
            addr = if found.is_null() { 1 } else { found as usize };
            cache.store(addr, Ordering::Relaxed);
        }
        (addr != 1).then(|| addr as *mut c_void)
    }
}

// Without dlsym these are linked like every other function.
#[cfg(not(unix))]
mod optional {
    use std::os::raw::c_void;
    pub static CONVERT: () = ();
    pub static KV_CACHE_STORE: () = ();
    pub static ROPE: () = ();
    pub static EMBEDDING: () = ();
    extern "C" {
        fn ak_convert();
        fn ak_kv_cache_store();
        fn ak_rope();
        fn ak_embedding();
    }
    pub fn lookup(_: &(), name: &[u8]) -> Option<*mut c_void> {
        let f: unsafe extern "C" fn() = match name {
            b"ak_convert\0" => ak_convert,
            b"ak_kv_cache_store\0" => ak_kv_cache_store,
            b"ak_rope\0" => ak_rope,
            _ => ak_embedding,
        };
        Some(f as *mut c_void)
    }
}

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
    pub fn ak_sgemm_get_blocking(out: *mut ak_sgemm_blocking) -> ak_status;
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

    /// (The header's ak_attention_desc_init macro: this, with the struct's size.)
    pub fn ak_attention_desc_init_sized(d: *mut ak_attention_desc, size: u32);
    /// The exported function behind the macro, for programs built against the
    /// 0.1 header: it initializes only `ak_attention_desc_size_0_1()` bytes.
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
