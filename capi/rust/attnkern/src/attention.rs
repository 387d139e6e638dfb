//! Scaled dot-product attention: fp32, f16 or bf16 K/V, contiguous or paged.

use crate::kv::{Elems, PoolLayout};
use crate::{check, product, sys, to_i64, Error, Result, Status};

/// Which keys a query may see.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mask {
    None,
    /// Key j is visible to query i iff j <= i.
    CausalTopLeft,
    /// Key j is visible to query i iff j <= i + (kv_len - q_len).
    CausalBottomRight,
}

impl Mask {
    pub(crate) fn raw(self) -> sys::ak_mask {
        match self {
            Mask::None => sys::ak_mask::AK_MASK_NONE,
            Mask::CausalTopLeft => sys::ak_mask::AK_MASK_CAUSAL_TOP_LEFT,
            Mask::CausalBottomRight => sys::ak_mask::AK_MASK_CAUSAL_BOTTOM_RIGHT,
        }
    }
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
    /// When > 0, each scaled score s becomes `softcap * tanh(s / softcap)`; 0 = off.
    pub softcap: f32,
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
            softcap: 0.0,
        }
    }

    /// The C descriptor for these sizes (no optional inputs or outputs).
    pub fn desc(&self) -> Result<sys::ak_attention_desc> {
        const F: &str = "ak_attention";
        let mut d = std::mem::MaybeUninit::<sys::ak_attention_desc>::uninit();
        let mut d = unsafe {
            sys::ak_attention_desc_init_sized(
                d.as_mut_ptr(),
                std::mem::size_of::<sys::ak_attention_desc>() as u32,
            );
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
        d.mask = self.mask.raw() as i32;
        d.softcap = self.softcap;
        Ok(d)
    }

    /// Runs it on fp32 k and v; `lse`, when given, receives [batch, heads,
    /// q_len] log-sum-exps.
    pub fn run(
        &self,
        q: &[f32],
        k: &[f32],
        v: &[f32],
        out: &mut [f32],
        lse: Option<&mut [f32]>,
    ) -> Result<()> {
        self.run_kv(q, Elems::F32(k), Elems::F32(v), None, out, lse)
    }

    /// Runs it on k and v in their storage types (f16 and bf16 are widened
    /// exactly as they are read: the result is the fp32 computation on the
    /// stored values). With `paged`, k and v are pools of pages (see
    /// [`Paged`]); else contiguous [batch, kv_heads, kv_len, dim] tensors.
    pub fn run_kv(
        &self,
        q: &[f32],
        k: Elems<'_>,
        v: Elems<'_>,
        paged: Option<&Paged<'_>>,
        out: &mut [f32],
        lse: Option<&mut [f32]>,
    ) -> Result<()> {
        self.run_with(q, k, v, paged, &Extras::default(), out, lse)
    }

    /// [`Attention::run_kv`] with ALiBi slopes, sink logits or a packed
    /// variable-length batch (see [`Extras`]). With `cu_seqlens_q`, q and
    /// out hold `cu_seqlens_q[batch]` rows in the layout `token_major` says
    /// and `lse` is [heads, total rows]; likewise k and v with
    /// `cu_seqlens_k`.
    #[allow(clippy::too_many_arguments)]
    pub fn run_with(
        &self,
        q: &[f32],
        k: Elems<'_>,
        v: Elems<'_>,
        paged: Option<&Paged<'_>>,
        extras: &Extras<'_>,
        out: &mut [f32],
        lse: Option<&mut [f32]>,
    ) -> Result<()> {
        const F: &str = "ak_attention";
        let dv = if self.head_dim_v == 0 { self.head_dim } else { self.head_dim_v };
        let (b, h, hk) = (self.batch, self.num_heads, self.num_kv_heads);
        let short = |name: &str, len: usize, what: String, need: usize| {
            Error::new(
                Status::BadShape,
                format!("{}: {} has {} elements; {} needs {}", F, name, len, what, need),
            )
        };
        // The rows of a packed tensor: cu_seqlens[batch] (a negative or
        // decreasing one is the library's to report).
        let total = |name: &str, cu: Option<&[i32]>| -> Result<Option<usize>> {
            match cu {
                None => Ok(None),
                Some(cu) if cu.len() != b + 1 => Err(Error::new(
                    Status::BadShape,
                    format!(
                        "{}: {} has {} entries for a batch of {} (needs batch + 1)",
                        F,
                        name,
                        cu.len(),
                        b
                    ),
                )),
                Some(cu) => Ok(Some(usize::try_from(cu[b]).unwrap_or(0))),
            }
        };
        let total_q = total("cu_seqlens_q", extras.cu_seqlens_q)?;
        let total_k = total("cu_seqlens_k", extras.cu_seqlens_k)?;
        let mut sizes: Vec<(&str, usize, Vec<usize>)> = match total_q {
            Some(t) => {
                vec![("q", q.len(), vec![t, h, self.head_dim]), ("out", out.len(), vec![t, h, dv])]
            }
            None => vec![
                ("q", q.len(), vec![b, h, self.q_len, self.head_dim]),
                ("out", out.len(), vec![b, h, self.q_len, dv]),
            ],
        };
        match (paged, total_k) {
            (Some(_), _) => {}
            (None, Some(t)) => {
                sizes.push(("k", k.len(), vec![t, hk, self.head_dim]));
                sizes.push(("v", v.len(), vec![t, hk, dv]));
            }
            (None, None) => {
                sizes.push(("k", k.len(), vec![b, hk, self.kv_len, self.head_dim]));
                sizes.push(("v", v.len(), vec![b, hk, self.kv_len, dv]));
            }
        }
        for (name, x) in [("alibi_slopes", extras.alibi_slopes), ("sinks", extras.sinks)] {
            if let Some(x) = x {
                sizes.push((name, x.len(), vec![h]));
            }
        }
        for (name, len, dims) in sizes {
            let need = product(F, name, &dims)?;
            if len < need {
                return Err(short(name, len, format!("{:?}", dims), need));
            }
        }
        let mut d = self.desc()?;
        d.k_type = k.dtype().raw() as i32;
        d.v_type = v.dtype().raw() as i32;
        if let Some(x) = extras.alibi_slopes {
            d.alibi_slopes = x.as_ptr();
        }
        if let Some(x) = extras.sinks {
            d.sinks = x.as_ptr();
        }
        // Token-major [total, heads, dim]: [0, dim, heads * dim]; all 0 is
        // the contiguous [heads, total, dim].
        let packed_strides = |heads: usize, dim: usize| -> Result<[i64; 3]> {
            Ok(if extras.token_major {
                [0, to_i64(F, "dim", dim)?, to_i64(F, "heads * dim", heads.saturating_mul(dim))?]
            } else {
                [0; 3]
            })
        };
        if let Some(cu) = extras.cu_seqlens_q {
            d.cu_seqlens_q = cu.as_ptr();
            d.q_strides = packed_strides(h, self.head_dim)?;
            d.o_strides = packed_strides(h, dv)?;
        }
        if let Some(cu) = extras.cu_seqlens_k {
            d.cu_seqlens_k = cu.as_ptr();
            if paged.is_none() {
                d.k_strides = packed_strides(hk, self.head_dim)?;
                d.v_strides = packed_strides(hk, dv)?;
            }
        }
        if let Some(p) = paged {
            for (name, len, dim, strides) in [
                ("k", k.len(), self.head_dim, p.k_page_strides),
                ("v", v.len(), dv, p.v_page_strides),
            ] {
                let pool = PoolLayout {
                    num_pages: p.num_pages,
                    num_kv_heads: hk,
                    page_size: p.page_size,
                    head_dim: dim,
                    page_strides: strides,
                };
                let need = pool.elements(F)?;
                if len < need {
                    return Err(short(name, len, format!("its pool {:?}", pool), need));
                }
            }
            let need = product(F, "block_table", &[b, p.block_table_stride])?;
            if p.block_table.len() < need {
                let what = format!("{} rows of {}", b, p.block_table_stride);
                return Err(short("block_table", p.block_table.len(), what, need));
            }
            d.block_table = p.block_table.as_ptr();
            d.block_table_stride = to_i64(F, "block_table_stride", p.block_table_stride)?;
            d.page_size = to_i64(F, "page_size", p.page_size)?;
            d.num_pages = to_i64(F, "num_pages", p.num_pages)?;
            for i in 0..3 {
                d.k_page_strides[i] = to_i64(F, "k_page_strides", p.k_page_strides[i])?;
                d.v_page_strides[i] = to_i64(F, "v_page_strides", p.v_page_strides[i])?;
            }
        }
        if let Some(lse) = lse {
            let dims = match total_q {
                Some(t) => vec![h, t],
                None => vec![b, h, self.q_len],
            };
            let need = product(F, "lse", &dims)?;
            if lse.len() < need {
                return Err(short("lse", lse.len(), format!("{:?}", dims), need));
            }
            d.lse = lse.as_mut_ptr();
        }
        check(unsafe {
            sys::ak_attention(
                &d,
                q.as_ptr(),
                k.ptr() as *const f32,
                v.ptr() as *const f32,
                out.as_mut_ptr(),
            )
        })
    }
}

/// Paged K/V for [`Attention::run_kv`]: k and v are then pools of
/// `num_pages` pages of [num_kv_heads, page_size, dim], and key j of batch
/// entry b is slot `j % page_size` of page
/// `block_table[b * block_table_stride + j / page_size]`. Page ids that no
/// visible key needs (say -1 past a sequence's end) are never read; the
/// library checks the others against `num_pages`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Paged<'a> {
    pub block_table: &'a [i32],
    /// Entries per batch row of block_table, at least ceil(kv_len / page_size).
    pub block_table_stride: usize,
    pub page_size: usize,
    pub num_pages: usize,
    /// [page, kv_head, slot] strides in elements of k's type; all 0 = contiguous.
    pub k_page_strides: [usize; 3],
    pub v_page_strides: [usize; 3],
}

/// Optional inputs of [`Attention::run_with`]; `Extras::default()` is none
/// of them.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Extras<'a> {
    /// [num_heads] ALiBi slopes: adds `slopes[h] * (j - d(i))` to each score,
    /// d(i) the query's aligned diagonal (shifted by `n - q_len` for
    /// [`Mask::CausalBottomRight`]).
    pub alibi_slopes: Option<&'a [f32]>,
    /// [num_heads] sink logits: each joins its head's softmax normalizer with
    /// no value, so a row's weights sum to less than 1 (a row with no
    /// visible key gets out 0 and lse `sinks[h]`).
    pub sinks: Option<&'a [f32]>,
    /// A packed variable-length batch: [batch + 1] row offsets,
    /// `cu_seqlens_q[0] = 0`, non-decreasing. Sequence b's queries are rows
    /// `cu_seqlens_q[b] .. cu_seqlens_q[b + 1]` of q and out, and
    /// [`Attention::q_len`] is the longest sequence (an upper bound).
    pub cu_seqlens_q: Option<&'a [i32]>,
    /// Packed keys and values likewise (`kv_len` the longest); not with a
    /// block table.
    pub cu_seqlens_k: Option<&'a [i32]>,
    /// Layout of packed tensors: `true` = token-major [total, heads, dim], as
    /// most engines keep them; `false` = [heads, total, dim].
    pub token_major: bool,
}
