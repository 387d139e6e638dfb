//! Storage types of K/V caches: conversions and stores into (paged) pools.

use crate::{check, product, sys, to_i64, Error, Result, Status};
use std::os::raw::c_void;

/// The storage type of a K/V cache (`ak_dtype`). q, out and every
/// accumulation stay fp32.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    F32,
    /// IEEE binary16, as `u16` bit patterns.
    F16,
    /// bfloat16 (the top half of an fp32), as `u16` bit patterns.
    BF16,
}

impl DType {
    /// The C `ak_dtype` value.
    pub fn raw(self) -> sys::ak_dtype {
        match self {
            DType::F32 => sys::ak_dtype::AK_F32,
            DType::F16 => sys::ak_dtype::AK_F16,
            DType::BF16 => sys::ak_dtype::AK_BF16,
        }
    }
}

/// Values in one storage type, read-only. f16 and bf16 share `u16`, so the
/// variant says which bits a slice holds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Elems<'a> {
    F32(&'a [f32]),
    F16(&'a [u16]),
    BF16(&'a [u16]),
}

/// Values in one storage type, to be written.
#[derive(Debug, PartialEq)]
pub enum ElemsMut<'a> {
    F32(&'a mut [f32]),
    F16(&'a mut [u16]),
    BF16(&'a mut [u16]),
}

fn not_half(what: &str) -> Error {
    Error::new(Status::BadArgument, format!("{}: F32 values are f32, not u16 bits", what))
}

impl<'a> Elems<'a> {
    /// `bits` as f16 or bf16 values; `DType::F32` is refused (use `Elems::F32`).
    pub fn half(dtype: DType, bits: &'a [u16]) -> Result<Self> {
        match dtype {
            DType::F16 => Ok(Elems::F16(bits)),
            DType::BF16 => Ok(Elems::BF16(bits)),
            DType::F32 => Err(not_half("Elems::half")),
        }
    }
    pub fn dtype(&self) -> DType {
        match self {
            Elems::F32(_) => DType::F32,
            Elems::F16(_) => DType::F16,
            Elems::BF16(_) => DType::BF16,
        }
    }
    pub fn len(&self) -> usize {
        match self {
            Elems::F32(x) => x.len(),
            Elems::F16(x) | Elems::BF16(x) => x.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub(crate) fn ptr(&self) -> *const c_void {
        match self {
            Elems::F32(x) => x.as_ptr() as *const c_void,
            Elems::F16(x) | Elems::BF16(x) => x.as_ptr() as *const c_void,
        }
    }
}

impl<'a> From<&'a [f32]> for Elems<'a> {
    fn from(x: &'a [f32]) -> Self {
        Elems::F32(x)
    }
}

impl<'a> ElemsMut<'a> {
    /// `bits` as f16 or bf16 values to be written; `DType::F32` is refused.
    pub fn half(dtype: DType, bits: &'a mut [u16]) -> Result<Self> {
        match dtype {
            DType::F16 => Ok(ElemsMut::F16(bits)),
            DType::BF16 => Ok(ElemsMut::BF16(bits)),
            DType::F32 => Err(not_half("ElemsMut::half")),
        }
    }
    pub fn dtype(&self) -> DType {
        match self {
            ElemsMut::F32(_) => DType::F32,
            ElemsMut::F16(_) => DType::F16,
            ElemsMut::BF16(_) => DType::BF16,
        }
    }
    pub fn len(&self) -> usize {
        match self {
            ElemsMut::F32(x) => x.len(),
            ElemsMut::F16(x) | ElemsMut::BF16(x) => x.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    fn ptr(&mut self) -> *mut c_void {
        match self {
            ElemsMut::F32(x) => x.as_mut_ptr() as *mut c_void,
            ElemsMut::F16(x) | ElemsMut::BF16(x) => x.as_mut_ptr() as *mut c_void,
        }
    }
}

impl<'a> From<&'a mut [f32]> for ElemsMut<'a> {
    fn from(x: &'a mut [f32]) -> Self {
        ElemsMut::F32(x)
    }
}

/// A 0.1 library has neither ak_convert nor ak_kv_cache_store.
fn missing(name: &str) -> Error {
    Error::new(Status::Unsupported, format!("{}: the loaded libattnkern predates 0.2", name))
}

/// `dst[i] = src[i]` converted (`ak_convert`): narrowing rounds to nearest,
/// ties to even, widening is exact. The slices must have equal lengths.
pub fn convert(mut dst: ElemsMut<'_>, src: Elems<'_>) -> Result<()> {
    const F: &str = "ak_convert";
    if dst.len() != src.len() {
        let msg = format!("{}: dst has {} elements, src {}", F, dst.len(), src.len());
        return Err(Error::new(Status::BadShape, msg));
    }
    let f = sys::ak_convert().ok_or_else(|| missing(F))?;
    let n = to_i64(F, "n", src.len())?;
    check(unsafe { f(dst.dtype().raw(), dst.ptr(), src.dtype().raw(), src.ptr(), n) })
}

/// Converts f16 bits to bf16 or back in place (the one overlap `ak_convert`
/// allows: both types 2 bytes wide).
pub fn convert_in_place(bits: &mut [u16], from: DType, to: DType) -> Result<()> {
    const F: &str = "ak_convert";
    if from == DType::F32 || to == DType::F32 {
        return Err(not_half("convert_in_place"));
    }
    let f = sys::ak_convert().ok_or_else(|| missing(F))?;
    let n = to_i64(F, "n", bits.len())?;
    let p = bits.as_mut_ptr() as *mut c_void;
    check(unsafe { f(to.raw(), p, from.raw(), p, n) })
}

/// The layout of a K/V pool: `num_pages` pages of [num_kv_heads, page_size,
/// head_dim] with [page, head, slot] strides in elements (all 0 =
/// contiguous). A contiguous [num_kv_heads, max_len, head_dim] cache is one
/// page of page_size max_len.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PoolLayout {
    pub num_pages: usize,
    pub num_kv_heads: usize,
    pub page_size: usize,
    pub head_dim: usize,
    pub page_strides: [usize; 3],
}

impl PoolLayout {
    /// Pages stored one after another, without gaps.
    pub fn contiguous(
        num_pages: usize,
        num_kv_heads: usize,
        page_size: usize,
        head_dim: usize,
    ) -> Self {
        PoolLayout { num_pages, num_kv_heads, page_size, head_dim, page_strides: [0; 3] }
    }

    /// The elements a slice needs to hold the pool.
    pub(crate) fn elements(&self, func: &str) -> Result<usize> {
        let (hk, ps, d) = (self.num_kv_heads, self.page_size, self.head_dim);
        if self.page_strides == [0; 3] {
            return product(func, "the pool", &[self.num_pages, hk, ps, d]);
        }
        let extents = [self.num_pages, hk, ps];
        if extents.contains(&0) || d == 0 {
            return Ok(0);
        }
        let overflow =
            || Error::new(Status::Overflow, format!("{}: the pool overflows usize", func));
        extents.iter().zip(self.page_strides).try_fold(d, |acc, (&e, s)| {
            (e - 1).checked_mul(s).and_then(|x| x.checked_add(acc)).ok_or_else(overflow)
        })
    }

    fn strides_i64(&self, func: &str) -> Result<[i64; 3]> {
        let s = self.page_strides;
        Ok([
            to_i64(func, "page_strides", s[0])?,
            to_i64(func, "page_strides", s[1])?,
            to_i64(func, "page_strides", s[2])?,
        ])
    }
}

/// Writes new keys (or values) into a pool (`ak_kv_cache_store`): token t
/// of src [slots.len(), num_kv_heads, head_dim] (fp32; [token, head]
/// strides, `None` = contiguous) goes to slot `slots[t] = page * page_size
/// + offset` of `pool`, rounded to its type, or nowhere for -1. A slot out
/// of range or named twice is BadArgument, and nothing is written.
pub fn kv_cache_store(
    src: &[f32],
    src_strides: Option<[usize; 2]>,
    slots: &[i64],
    mut pool: ElemsMut<'_>,
    layout: &PoolLayout,
) -> Result<()> {
    const F: &str = "ak_kv_cache_store";
    let (n, hk, d) = (slots.len(), layout.num_kv_heads, layout.head_dim);
    let st = src_strides.unwrap_or([hk * d, d]);
    let need = if n == 0 || hk == 0 || d == 0 {
        0
    } else {
        (n - 1)
            .checked_mul(st[0])
            .and_then(|x| x.checked_add((hk - 1).checked_mul(st[1])?))
            .and_then(|x| x.checked_add(d))
            .ok_or_else(|| Error::new(Status::Overflow, format!("{}: src overflows usize", F)))?
    };
    if src.len() < need {
        let msg = format!("{}: src has {} elements; {} tokens need {}", F, src.len(), n, need);
        return Err(Error::new(Status::BadShape, msg));
    }
    let need = layout.elements(F)?;
    if pool.len() < need {
        let msg = format!("{}: pool has {} elements; {:?} needs {}", F, pool.len(), layout, need);
        return Err(Error::new(Status::BadShape, msg));
    }
    let f = sys::ak_kv_cache_store().ok_or_else(|| missing(F))?;
    let src_strides = [to_i64(F, "src_strides", st[0])?, to_i64(F, "src_strides", st[1])?];
    let page_strides = layout.strides_i64(F)?;
    check(unsafe {
        f(
            to_i64(F, "n_tokens", n)?,
            to_i64(F, "num_kv_heads", hk)?,
            to_i64(F, "head_dim", d)?,
            src.as_ptr(),
            src_strides.as_ptr(),
            slots.as_ptr(),
            pool.dtype().raw(),
            pool.ptr(),
            to_i64(F, "num_pages", layout.num_pages)?,
            to_i64(F, "page_size", layout.page_size)?,
            page_strides.as_ptr(),
        )
    })
}
