//! Softmax along a middle axis, batched products, the SGEMM blocking and the
//! worked examples' building blocks (position encoding, multi-head
//! self-attention with per-head weights).

use crate::{check, check_len, product, sys, to_i64, Error, Mask, Result, Status, Transpose};

/// The register tile and cache blocks of the instruction set in use (see
/// `ak_sgemm_get_blocking` in the header for what each one bounds).
pub type SgemmBlocking = sys::ak_sgemm_blocking;

/// Checks that `len` elements hold `batch` matrices rows x cols (leading
/// dimension ld) that start `stride` elements apart.
#[allow(clippy::too_many_arguments)]
fn check_batched_len(
    func: &str,
    name: &str,
    len: usize,
    rows: usize,
    cols: usize,
    ld: usize,
    stride: usize,
    batch: usize,
) -> Result<()> {
    if batch == 0 || rows == 0 || cols == 0 {
        return Ok(());
    }
    let last = (batch - 1).checked_mul(stride).ok_or_else(|| {
        Error::new(Status::Overflow, format!("{}: the extent of {} overflows usize", func, name))
    })?;
    check_len(func, name, len.saturating_sub(last), rows, cols, ld)?;
    if last >= len {
        return Err(Error::new(
            Status::BadShape,
            format!(
                "{}: {} has {} elements; matrix {} starts at {}",
                func,
                name,
                len,
                batch - 1,
                last
            ),
        ));
    }
    Ok(())
}

/// Softmax along the middle axis of a contiguous [outer, axis_len, inner]
/// tensor x into y (axis 0 of a rows x cols matrix: outer 1, inner cols).
pub fn softmax_axis(
    outer: usize,
    axis_len: usize,
    inner: usize,
    x: &[f32],
    y: &mut [f32],
) -> Result<()> {
    const F: &str = "ak_softmax_axis";
    let n = product(F, "x", &[outer, axis_len, inner])?;
    if x.len() < n || y.len() < n {
        return Err(Error::new(
            Status::BadShape,
            format!("{}: x has {} and y {} elements, {} needed", F, x.len(), y.len(), n),
        ));
    }
    let (o, a, i) =
        (to_i64(F, "outer", outer)?, to_i64(F, "axis_len", axis_len)?, to_i64(F, "inner", inner)?);
    check(unsafe { sys::ak_softmax_axis(o, a, i, x.as_ptr(), y.as_mut_ptr()) })
}

/// [`softmax_axis`] in place.
pub fn softmax_axis_in_place(
    outer: usize,
    axis_len: usize,
    inner: usize,
    x: &mut [f32],
) -> Result<()> {
    const F: &str = "ak_softmax_axis";
    let n = product(F, "x", &[outer, axis_len, inner])?;
    if x.len() < n {
        return Err(Error::new(
            Status::BadShape,
            format!("{}: x has {} elements, {} needed", F, x.len(), n),
        ));
    }
    let (o, a, i) =
        (to_i64(F, "outer", outer)?, to_i64(F, "axis_len", axis_len)?, to_i64(F, "inner", inner)?);
    let p = x.as_mut_ptr();
    check(unsafe { sys::ak_softmax_axis(o, a, i, p, p) })
}

/// How [`sgemm_strided_batched`]'s matrices follow each other: matrix i of
/// a starts at `i * stride_a` (0 reuses one matrix for every product), and
/// so on; C's matrices must not overlap.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StridedBatch {
    pub batch: usize,
    pub stride_a: usize,
    pub stride_b: usize,
    pub stride_c: usize,
}

/// `c[i] = alpha * op(a[i]) * op(b[i]) + beta * c[i]` for every i of
/// `batch.batch`, shapes as in [`crate::sgemm`].
#[allow(clippy::too_many_arguments)]
pub fn sgemm_strided_batched(
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
    batch: StridedBatch,
) -> Result<()> {
    const F: &str = "ak_sgemm_strided_batched";
    let (ar, ac) = if ta == Transpose::Yes { (k, m) } else { (m, k) };
    let (br, bc) = if tb == Transpose::Yes { (n, k) } else { (k, n) };
    let nb = batch.batch;
    if alpha != 0.0 && k != 0 {
        check_batched_len(F, "a", a.len(), ar, ac, lda, batch.stride_a, nb)?;
        check_batched_len(F, "b", b.len(), br, bc, ldb, batch.stride_b, nb)?;
    }
    check_batched_len(F, "c", c.len(), m, n, ldc, batch.stride_c, nb)?;
    check(unsafe {
        sys::ak_sgemm_strided_batched(
            ta.raw(),
            tb.raw(),
            to_i64(F, "m", m)?,
            to_i64(F, "n", n)?,
            to_i64(F, "k", k)?,
            alpha,
            a.as_ptr(),
            to_i64(F, "lda", lda)?,
            to_i64(F, "stride_a", batch.stride_a)?,
            b.as_ptr(),
            to_i64(F, "ldb", ldb)?,
            to_i64(F, "stride_b", batch.stride_b)?,
            beta,
            c.as_mut_ptr(),
            to_i64(F, "ldc", ldc)?,
            to_i64(F, "stride_c", batch.stride_c)?,
            to_i64(F, "batch", nb)?,
        )
    })
}

/// The SGEMM blocking of the instruction set in use.
pub fn sgemm_blocking() -> Result<SgemmBlocking> {
    let mut out = SgemmBlocking::default();
    check(unsafe { sys::ak_sgemm_get_blocking(&mut out) })?;
    Ok(out)
}

/// The sinusoidal position encoding into out [max_len, dim]:
/// `out[p][2i] = sin(p / base^(2i/dim))`, `out[p][2i+1] = cos(...)`.
pub fn position_encoding(max_len: usize, dim: usize, base: f32, out: &mut [f32]) -> Result<()> {
    const F: &str = "ak_position_encoding";
    check_len(F, "out", out.len(), max_len, dim, dim.max(1))?;
    check(unsafe {
        sys::ak_position_encoding(
            to_i64(F, "max_len", max_len)?,
            to_i64(F, "dim", dim)?,
            base,
            out.as_mut_ptr(),
        )
    })
}

/// Multi-head self-attention with per-head projections: x [n_tokens,
/// d_model], w_q and w_k [num_heads, d_model, d_k], w_v [num_heads, d_model,
/// d_v] into out [num_heads, n_tokens, d_v].
#[allow(clippy::too_many_arguments)]
pub fn mha_self_attention(
    n_tokens: usize,
    d_model: usize,
    num_heads: usize,
    d_k: usize,
    d_v: usize,
    x: &[f32],
    w_q: &[f32],
    w_k: &[f32],
    w_v: &[f32],
    mask: Mask,
    out: &mut [f32],
) -> Result<()> {
    const F: &str = "ak_mha_self_attention";
    for (name, len, dims) in [
        ("x", x.len(), [1, n_tokens, d_model]),
        ("w_q", w_q.len(), [num_heads, d_model, d_k]),
        ("w_k", w_k.len(), [num_heads, d_model, d_k]),
        ("w_v", w_v.len(), [num_heads, d_model, d_v]),
        ("out", out.len(), [num_heads, n_tokens, d_v]),
    ] {
        let need = product(F, name, &dims)?;
        if len < need {
            return Err(Error::new(
                Status::BadShape,
                format!("{}: {} has {} elements, {} needed", F, name, len, need),
            ));
        }
    }
    check(unsafe {
        sys::ak_mha_self_attention(
            to_i64(F, "n_tokens", n_tokens)?,
            to_i64(F, "d_model", d_model)?,
            to_i64(F, "num_heads", num_heads)?,
            to_i64(F, "d_k", d_k)?,
            to_i64(F, "d_v", d_v)?,
            x.as_ptr(),
            w_q.as_ptr(),
            w_k.as_ptr(),
            w_v.as_ptr(),
            mask.raw(),
            out.as_mut_ptr(),
        )
    })
}
