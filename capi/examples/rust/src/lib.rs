//! Rust bindings for attnkern, fp32 attention kernels behind a flat C ABI.
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
//! Build: `ATTNKERN_LIB_DIR=/path/to/dir/with/libattnkern.so cargo build`.

pub mod sys;

use std::ffi::{CStr, CString};
use std::fmt;
use std::marker::PhantomData;
use std::os::raw::{c_char, c_int};

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

/// "MAJOR.MINOR.PATCH" of the library loaded.
pub fn version() -> String {
    unsafe { c_string(sys::ak_version()) }
}

/// `AK_ABI_VERSION` of the library loaded; this crate speaks [`sys::AK_ABI_VERSION`].
pub fn abi_version() -> i32 {
    unsafe { sys::ak_abi_version() }
}

/// Every instruction-set name the library knows, best first.
pub const ISAS: [&str; 5] = ["avx512", "avx2", "sse2", "neon", "scalar"];

/// The instruction set in use.
pub fn isa() -> String {
    unsafe { c_string(sys::ak_get_isa()) }
}

/// Forces an instruction set (process-wide); `None` picks the best one.
pub fn set_isa(name: Option<&str>) -> Result<()> {
    let name = match name {
        None => None,
        Some(n) => Some(CString::new(n).map_err(|_| {
            Error::new(Status::BadArgument, format!("set_isa: {:?} contains a NUL byte", n))
        })?),
    };
    check(unsafe { sys::ak_set_isa(name.as_ref().map_or(std::ptr::null(), |c| c.as_ptr())) })
}

/// Whether `set_isa(name)` would succeed on this machine; changes nothing.
/// A name with a NUL byte is not supported.
pub fn isa_supported(name: Option<&str>) -> bool {
    match name {
        None => unsafe { sys::ak_isa_supported(std::ptr::null()) == 1 },
        Some(n) => match CString::new(n) {
            Ok(c) => unsafe { sys::ak_isa_supported(c.as_ptr()) == 1 },
            Err(_) => false,
        },
    }
}

/// The names in [`ISAS`] this machine supports, best first. Changes
/// nothing: the instruction set in use stays as it is (also for threads
/// running kernels meanwhile). Never fails; a `Result` for compatibility.
pub fn available_isas() -> Result<Vec<&'static str>> {
    Ok(ISAS.iter().copied().filter(|n| isa_supported(Some(n))).collect())
}

/// Threads per call (process-wide); 0 = the OpenMP default.
pub fn set_num_threads(n: usize) -> Result<()> {
    let n = thread_count("set_num_threads", n)?;
    check(unsafe { sys::ak_set_num_threads(n) })
}

/// n as the C API's int, or BadArgument naming the setter.
fn thread_count(setter: &str, n: usize) -> Result<c_int> {
    c_int::try_from(n)
        .map_err(|_| Error::new(Status::BadArgument, format!("{}: {} is too many", setter, n)))
}

/// The thread count a call from this thread would use now.
pub fn num_threads() -> usize {
    unsafe { sys::ak_get_num_threads() }.max(0) as usize
}

/// Threads per call for calls made from the calling thread only, overriding
/// `set_num_threads` there; 0 = follow the process-wide count again. Worker
/// threads of an engine's own set 1 (no OpenMP pool per worker).
pub fn set_num_threads_local(n: usize) -> Result<()> {
    let n = thread_count("set_num_threads_local", n)?;
    check(unsafe { sys::ak_set_num_threads_local(n) })
}

/// The calling thread's own count (0 if it follows the process-wide one).
pub fn num_threads_local() -> usize {
    unsafe { sys::ak_get_num_threads_local() }.max(0) as usize
}

/// Sets the calling thread's own count (`set_num_threads_local`) until the
/// guard is dropped, which puts back the count the thread had before:
/// `let _threads = attnkern::threads_local(1)?;`. The guard stays on the
/// thread that made it (it is not `Send`).
pub fn threads_local(n: usize) -> Result<ThreadsLocalGuard> {
    let before = num_threads_local();
    set_num_threads_local(n)?;
    Ok(ThreadsLocalGuard { before, _same_thread: PhantomData })
}

/// Returned by `threads_local`; restores the thread's previous count on drop.
#[must_use = "the count reverts as soon as the guard is dropped"]
pub struct ThreadsLocalGuard {
    before: usize,
    _same_thread: PhantomData<*const ()>,
}

impl Drop for ThreadsLocalGuard {
    fn drop(&mut self) {
        // A count the library returned before: setting it again cannot fail.
        let _ = set_num_threads_local(self.before);
    }
}

/// Frees the scratch buffers every thread keeps between calls (calls running
/// meanwhile keep theirs; the next call allocates anew).
pub fn release_scratch() {
    unsafe { sys::ak_release_scratch() }
}

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

/// Which keys a query may see.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mask {
    None,
    /// Key j is visible to query i iff j <= i.
    CausalTopLeft,
    /// Key j is visible to query i iff j <= i + (kv_len - q_len).
    CausalBottomRight,
}

/// Scaled dot-product attention over contiguous [batch, heads, seq, dim]
/// tensors: `out = softmax(scale * q k^T, masked) v` per (batch, head).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Attention {
    pub batch: usize,
    pub num_heads: usize,
    /// Heads of k and v; divides num_heads (grouped-query attention).
    pub num_kv_heads: usize,
    pub q_len: usize,
    pub kv_len: usize,
    pub head_dim: usize,
    pub head_dim_v: usize,
    /// 0 = 1 / sqrt(head_dim).
    pub scale: f32,
    pub mask: Mask,
}

impl Attention {
    /// Multi-head attention with as many kv heads as query heads and d_v = d_k.
    pub fn new(
        batch: usize,
        num_heads: usize,
        q_len: usize,
        kv_len: usize,
        head_dim: usize,
    ) -> Self {
        Attention {
            batch,
            num_heads,
            num_kv_heads: num_heads,
            q_len,
            kv_len,
            head_dim,
            head_dim_v: head_dim,
            scale: 0.0,
            mask: Mask::None,
        }
    }

    /// The C descriptor for these sizes (no optional inputs or outputs).
    pub fn desc(&self) -> Result<sys::ak_attention_desc> {
        const F: &str = "ak_attention";
        let mut d = std::mem::MaybeUninit::<sys::ak_attention_desc>::uninit();
        let mut d = unsafe {
            sys::ak_attention_desc_init(d.as_mut_ptr());
            d.assume_init()
        };
        d.batch = to_i64(F, "batch", self.batch)?;
        d.num_heads = to_i64(F, "num_heads", self.num_heads)?;
        d.num_kv_heads = to_i64(F, "num_kv_heads", self.num_kv_heads)?;
        d.q_len = to_i64(F, "q_len", self.q_len)?;
        d.kv_len = to_i64(F, "kv_len", self.kv_len)?;
        d.head_dim = to_i64(F, "head_dim", self.head_dim)?;
        d.head_dim_v = to_i64(F, "head_dim_v", self.head_dim_v)?;
        d.scale = self.scale;
        d.mask = match self.mask {
            Mask::None => sys::ak_mask::AK_MASK_NONE,
            Mask::CausalTopLeft => sys::ak_mask::AK_MASK_CAUSAL_TOP_LEFT,
            Mask::CausalBottomRight => sys::ak_mask::AK_MASK_CAUSAL_BOTTOM_RIGHT,
        } as i32;
        Ok(d)
    }

    /// Runs it; `lse`, when given, receives [batch, heads, q_len] log-sum-exps.
    pub fn run(
        &self,
        q: &[f32],
        k: &[f32],
        v: &[f32],
        out: &mut [f32],
        lse: Option<&mut [f32]>,
    ) -> Result<()> {
        const F: &str = "ak_attention";
        let dv = if self.head_dim_v == 0 { self.head_dim } else { self.head_dim_v };
        let (b, h, hk) = (self.batch, self.num_heads, self.num_kv_heads);
        let sizes: [(&str, usize, [usize; 4]); 4] = [
            ("q", q.len(), [b, h, self.q_len, self.head_dim]),
            ("k", k.len(), [b, hk, self.kv_len, self.head_dim]),
            ("v", v.len(), [b, hk, self.kv_len, dv]),
            ("out", out.len(), [b, h, self.q_len, dv]),
        ];
        for (name, len, dims) in sizes {
            let need = product(F, name, &dims)?;
            if len < need {
                return Err(Error::new(
                    Status::BadShape,
                    format!("{}: {} has {} elements; {:?} needs {}", F, name, len, dims, need),
                ));
            }
        }
        let mut d = self.desc()?;
        if let Some(lse) = lse {
            let need = product(F, "lse", &[b, h, self.q_len])?;
            if lse.len() < need {
                return Err(Error::new(
                    Status::BadShape,
                    format!("{}: lse has {} elements; needs {}", F, lse.len(), need),
                ));
            }
            d.lse = lse.as_mut_ptr();
        }
        check(unsafe {
            sys::ak_attention(&d, q.as_ptr(), k.as_ptr(), v.as_ptr(), out.as_mut_ptr())
        })
    }
}
