//! Rust bindings for attnkern, attention kernels behind a flat C ABI.
//!
//! [`sys`] declares the C header one to one; the functions here are a thin
//! safe layer over it: slices instead of pointers (their lengths checked
//! before the library is called), `usize` sizes, and a [`Result`] whose
//! [`Error`] carries the [`Status`] and the library's `ak_last_error()` text.
//!
//! Matrices are row-major; a leading dimension is the distance in elements
//! between the starts of two rows and must be at least `max(1, columns)`.
//!
//! ```
//! use attnkern::{sgemm, softmax_in_place, Transpose};
//! let a = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]; // 2 x 3
//! let b = [1.0, 0.0, 0.0, 1.0, 1.0, 1.0]; // 3 x 2
//! let mut c = [0.0f32; 4]; // 2 x 2
//! sgemm(Transpose::No, Transpose::No, 2, 2, 3, 1.0, &a, 3, &b, 2, 0.0, &mut c, 2)?;
//! assert_eq!(c, [4.0, 5.0, 10.0, 11.0]);
//! softmax_in_place(2, 2, &mut c, 2)?;
//! assert!((c[0] + c[1] - 1.0).abs() < 1e-6);
//! # Ok::<(), attnkern::Error>(())
//! ```
//!
//! K/V caches may be stored in f16 or bf16 ([`DType`]; the bits travel as
//! `u16` slices in [`Elems`]), paged or not: [`convert`], [`kv_cache_store`]
//! and [`Attention::run_kv`] with a [`Paged`] block table.
//!
//! [`Attention::run_with`] adds ALiBi slopes, sink logits and packed
//! variable-length batches ([`Extras`]); [`Attention::softcap`] caps scores.
//!
//! [`rope`] rotates q or k in place (rotary position embeddings) and
//! [`embedding`] looks tokens up in an embedding table.
//!
//! The raw declarations are the `attnkern-sys` crate, re-exported as
//! [`sys`]; it finds libattnkern through pkg-config (`PKG_CONFIG_PATH=
//! <prefix>/lib/pkgconfig` for an install prefix pkg-config does not search),
//! else `ATTNKERN_LIB_DIR`.

pub use attnkern_sys as sys;

use std::ffi::CStr;
use std::fmt;
use std::os::raw::c_char;

/// Why a call failed: the library's `ak_status` (never `AK_OK`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    NullPointer,
    BadShape,
    BadStride,
    BadArgument,
    Overflow,
    OutOfMemory,
    Unsupported,
    Internal,
    /// A status this crate does not know (from a newer library).
    Other(i32),
}

impl Status {
    fn from_raw(s: sys::ak_status) -> Option<Status> {
        use sys::ak_status as S;
        Some(match s {
            S::AK_OK => return None,
            S::AK_ERR_NULL_POINTER => Status::NullPointer,
            S::AK_ERR_BAD_SHAPE => Status::BadShape,
            S::AK_ERR_BAD_STRIDE => Status::BadStride,
            S::AK_ERR_BAD_ARGUMENT => Status::BadArgument,
            S::AK_ERR_OVERFLOW => Status::Overflow,
            S::AK_ERR_OUT_OF_MEMORY => Status::OutOfMemory,
            S::AK_ERR_UNSUPPORTED => Status::Unsupported,
            S::AK_ERR_INTERNAL => Status::Internal,
            sys::ak_status(other) => Status::Other(other),
        })
    }

    /// The C `ak_status` value.
    pub fn raw(self) -> i32 {
        match self {
            Status::NullPointer => 1,
            Status::BadShape => 2,
            Status::BadStride => 3,
            Status::BadArgument => 4,
            Status::Overflow => 5,
            Status::OutOfMemory => 6,
            Status::Unsupported => 7,
            Status::Internal => 8,
            Status::Other(v) => v,
        }
    }

    /// The library's name and description, e.g. "AK_ERR_BAD_SHAPE: ...".
    pub fn description(self) -> String {
        unsafe { c_string(sys::ak_status_string(sys::ak_status(self.raw()))) }
    }
}

/// A failed call: its status and the library's explanation (or, for a
/// slice too short for the sizes given, this crate's).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    status: Status,
    message: String,
}

impl Error {
    pub fn status(&self) -> Status {
        self.status
    }
    /// `ak_last_error()` of the failed call: which argument, and why.
    pub fn message(&self) -> &str {
        &self.message
    }
    fn new(status: Status, message: String) -> Error {
        Error { status, message }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, self.status.description())
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

unsafe fn c_string(p: *const c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        CStr::from_ptr(p).to_string_lossy().into_owned()
    }
}

/// Turns a status into a Result, reading ak_last_error() on this thread
/// right away (its text lasts only until the next attnkern call).
fn check(st: sys::ak_status) -> Result<()> {
    match Status::from_raw(st) {
        None => Ok(()),
        Some(status) => Err(Error::new(status, unsafe { c_string(sys::ak_last_error()) })),
    }
}

fn to_i64(func: &str, name: &str, v: usize) -> Result<i64> {
    i64::try_from(v).map_err(|_| {
        Error::new(Status::Overflow, format!("{}: {} = {} exceeds i64", func, name, v))
    })
}

/// Checks that a slice of `len` elements holds a rows x cols matrix with
/// leading dimension ld. (Whether ld itself is valid is the library's call.)
fn check_len(
    func: &str,
    name: &str,
    len: usize,
    rows: usize,
    cols: usize,
    ld: usize,
) -> Result<()> {
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    let need = (rows - 1).checked_mul(ld).and_then(|x| x.checked_add(cols)).ok_or_else(|| {
        Error::new(
            Status::Overflow,
            format!("{}: {} ({} x {}, ld {}) overflows usize", func, name, rows, cols, ld),
        )
    })?;
    if len < need {
        return Err(Error::new(
            Status::BadShape,
            format!(
                "{}: {} has {} elements; a {} x {} matrix with leading dimension {} needs {}",
                func, name, len, rows, cols, ld, need
            ),
        ));
    }
    Ok(())
}

fn product(func: &str, what: &str, dims: &[usize]) -> Result<usize> {
    dims.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d)).ok_or_else(|| {
        Error::new(Status::Overflow, format!("{}: the size of {} overflows usize", func, what))
    })
}

// ------------------------------------------------------------ configuration

mod config;

pub use config::{
    abi_version, available_isas, isa, isa_supported, num_threads, num_threads_local,
    release_scratch, set_isa, set_num_threads, set_num_threads_local, threads_local, version,
    ThreadsLocalGuard, ISAS,
};

// -------------------------------------------------------------------- sgemm

/// Whether sgemm uses a matrix as stored or its transpose.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Transpose {
    No,
    Yes,
}

impl Transpose {
    fn raw(self) -> sys::ak_trans {
        match self {
            Transpose::No => sys::ak_trans::AK_NO_TRANS,
            Transpose::Yes => sys::ak_trans::AK_TRANS,
        }
    }
}

/// `c = alpha * op(a) * op(b) + beta * c`, op(a) m x k, op(b) k x n, c m x n.
/// `a` is stored m x k (k x m when `ta` is `Yes`), `b` k x n (n x k).
#[allow(clippy::too_many_arguments)]
pub fn sgemm(
    ta: Transpose,
    tb: Transpose,
    m: usize,
    n: usize,
    k: usize,
    alpha: f32,
    a: &[f32],
    lda: usize,
    b: &[f32],
    ldb: usize,
    beta: f32,
    c: &mut [f32],
    ldc: usize,
) -> Result<()> {
    const F: &str = "ak_sgemm";
    let (ar, ac) = if ta == Transpose::Yes { (k, m) } else { (m, k) };
    let (br, bc) = if tb == Transpose::Yes { (n, k) } else { (k, n) };
    // Like the library, read nothing of A and B when alpha == 0 or k == 0.
    if alpha != 0.0 && k != 0 {
        check_len(F, "a", a.len(), ar, ac, lda)?;
        check_len(F, "b", b.len(), br, bc, ldb)?;
    }
    check_len(F, "c", c.len(), m, n, ldc)?;
    check(unsafe {
        sys::ak_sgemm(
            ta.raw(),
            tb.raw(),
            to_i64(F, "m", m)?,
            to_i64(F, "n", n)?,
            to_i64(F, "k", k)?,
            alpha,
            a.as_ptr(),
            to_i64(F, "lda", lda)?,
            b.as_ptr(),
            to_i64(F, "ldb", ldb)?,
            beta,
            c.as_mut_ptr(),
            to_i64(F, "ldc", ldc)?,
        )
    })
}

// ------------------------------------------------------------------ softmax

type RowFn = unsafe extern "C" fn(i64, i64, *const f32, i64, *mut f32, i64) -> sys::ak_status;

#[allow(clippy::too_many_arguments)]
fn rowwise(
    f: RowFn,
    name: &str,
    rows: usize,
    cols: usize,
    x: *const f32,
    x_len: usize,
    ldx: usize,
    y: *mut f32,
    y_len: usize,
    ldy: usize,
) -> Result<()> {
    check_len(name, "x", x_len, rows, cols, ldx)?;
    check_len(name, "y", y_len, rows, cols, ldy)?;
    let (r, c) = (to_i64(name, "rows", rows)?, to_i64(name, "cols", cols)?);
    let (lx, ly) = (to_i64(name, "ldx", ldx)?, to_i64(name, "ldy", ldy)?);
    check(unsafe { f(r, c, x, lx, y, ly) })
}

/// Row-wise softmax of the rows x cols matrix x into y.
pub fn softmax(
    rows: usize,
    cols: usize,
    x: &[f32],
    ldx: usize,
    y: &mut [f32],
    ldy: usize,
) -> Result<()> {
    rowwise(
        sys::ak_softmax,
        "ak_softmax",
        rows,
        cols,
        x.as_ptr(),
        x.len(),
        ldx,
        y.as_mut_ptr(),
        y.len(),
        ldy,
    )
}

/// Row-wise softmax, in place.
pub fn softmax_in_place(rows: usize, cols: usize, x: &mut [f32], ld: usize) -> Result<()> {
    let (p, len) = (x.as_mut_ptr(), x.len());
    rowwise(sys::ak_softmax, "ak_softmax", rows, cols, p, len, ld, p, len, ld)
}

/// Row-wise log(softmax(x)) into y.
pub fn log_softmax(
    rows: usize,
    cols: usize,
    x: &[f32],
    ldx: usize,
    y: &mut [f32],
    ldy: usize,
) -> Result<()> {
    rowwise(
        sys::ak_log_softmax,
        "ak_log_softmax",
        rows,
        cols,
        x.as_ptr(),
        x.len(),
        ldx,
        y.as_mut_ptr(),
        y.len(),
        ldy,
    )
}

// ---------------------------------------------------------------- attention

mod attention;
mod blocks;
mod kv;
mod rope;

pub use attention::{Attention, Extras, Mask, Paged};
pub use blocks::{
    mha_self_attention, position_encoding, sgemm_blocking, sgemm_strided_batched, softmax_axis,
    softmax_axis_in_place, SgemmBlocking, StridedBatch,
};
pub use kv::{convert, convert_in_place, kv_cache_store, DType, Elems, ElemsMut, PoolLayout};
pub use rope::{embedding, rope, Frequencies, RopeLayout, RopeStyle};
