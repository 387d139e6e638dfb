//! Rotary position embeddings (`ak_rope`) and token embedding lookup
//! (`ak_embedding`).

use crate::{check, check_len, sys, to_i64, Error, Result, Status};

/// Which entries of a row are rotated together (`ak_rope_style`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RopeStyle {
    /// `(i, i + rotary_dim/2)`: GPT-NeoX, Llama in the HF layout.
    Neox,
    /// `(2i, 2i + 1)`: GPT-J, Meta's Llama layout.
    Interleaved,
}

impl RopeStyle {
    /// The C `ak_rope_style` value.
    pub fn raw(self) -> sys::ak_rope_style {
        match self {
            RopeStyle::Neox => sys::ak_rope_style::AK_ROPE_NEOX,
            RopeStyle::Interleaved => sys::ak_rope_style::AK_ROPE_INTERLEAVED,
        }
    }
}

/// The rotation frequencies: `theta^(-2i/rotary_dim)`, or a table of
/// `rotary_dim / 2` (linear, NTK, YaRN or llama3 scaling make one).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Frequencies<'a> {
    Theta(f32),
    Table(&'a [f32]),
}

/// Where x's `[batch, seq_len, num_heads, head_dim]` rows lie: `strides`
/// are the `[batch, seq, head]` distances in elements (`None`: contiguous),
/// the head_dim axis contiguous.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RopeLayout {
    pub batch: usize,
    pub seq_len: usize,
    pub num_heads: usize,
    pub head_dim: usize,
    pub strides: Option<[usize; 3]>,
}

fn missing(name: &str) -> Error {
    Error::new(Status::Unsupported, format!("{}: the loaded libattnkern predates it", name))
}

/// Rotates x in place (`ak_rope`): for each row, the first `rotary_dim`
/// entries (0: all of head_dim) in pairs of `style`, by
/// `positions[b * seq_len + s] * inv_freq[i]` (`positions` `None`: s).
pub fn rope(
    x: &mut [f32],
    layout: &RopeLayout,
    rotary_dim: usize,
    style: RopeStyle,
    positions: Option<&[i32]>,
    freq: Frequencies<'_>,
) -> Result<()> {
    const F: &str = "ak_rope";
    let l = layout;
    // All-zero strides mean contiguous to the library, as None does here.
    let st = match l.strides {
        Some(s) if s != [0, 0, 0] => s,
        _ => [l.seq_len * l.num_heads * l.head_dim, l.num_heads * l.head_dim, l.head_dim],
    };
    if l.batch > 0 && l.seq_len > 0 && l.num_heads > 0 && l.head_dim > 0 {
        let need = [(l.batch, st[0]), (l.seq_len, st[1]), (l.num_heads, st[2])]
            .iter()
            .try_fold(l.head_dim, |acc, &(n, s)| acc.checked_add((n - 1).checked_mul(s)?))
            .ok_or_else(|| Error::new(Status::Overflow, format!("{}: x overflows usize", F)))?;
        if x.len() < need {
            let msg = format!("{}: x has {} elements; {:?} needs {}", F, x.len(), l, need);
            return Err(Error::new(Status::BadShape, msg));
        }
    }
    if let Some(p) = positions {
        if p.len() != l.batch * l.seq_len {
            let msg =
                format!("{}: {} positions for {} x {} tokens", F, p.len(), l.batch, l.seq_len);
            return Err(Error::new(Status::BadShape, msg));
        }
    }
    let (theta, table) = match freq {
        Frequencies::Theta(t) => (t, std::ptr::null()),
        Frequencies::Table(t) => {
            let half = if rotary_dim == 0 { l.head_dim } else { rotary_dim } / 2;
            if t.len() < half {
                let msg = format!("{}: inv_freq has {} entries; {} are needed", F, t.len(), half);
                return Err(Error::new(Status::BadShape, msg));
            }
            (0.0, t.as_ptr())
        }
    };
    let f = sys::ak_rope().ok_or_else(|| missing(F))?;
    let strides =
        [to_i64(F, "strides", st[0])?, to_i64(F, "strides", st[1])?, to_i64(F, "strides", st[2])?];
    check(unsafe {
        f(
            to_i64(F, "batch", l.batch)?,
            to_i64(F, "seq_len", l.seq_len)?,
            to_i64(F, "num_heads", l.num_heads)?,
            to_i64(F, "head_dim", l.head_dim)?,
            to_i64(F, "rotary_dim", rotary_dim)?,
            style.raw(),
            positions.map_or(std::ptr::null(), |p| p.as_ptr()),
            theta,
            table,
            x.as_mut_ptr(),
            strides.as_ptr(),
        )
    })
}

/// `out[t] = table[ids[t]]` (`ak_embedding`): rows of `dim` from a
/// `[vocab_size, dim]` table with leading dimension `ld_table` into `out`
/// (leading dimension `ld_out`); a negative id gives a zero row, an id past
/// the vocabulary fails with nothing written.
pub fn embedding(
    ids: &[i32],
    table: &[f32],
    vocab_size: usize,
    dim: usize,
    ld_table: usize,
    out: &mut [f32],
    ld_out: usize,
) -> Result<()> {
    const F: &str = "ak_embedding";
    check_len(F, "table", table.len(), vocab_size, dim, ld_table)?;
    check_len(F, "out", out.len(), ids.len(), dim, ld_out)?;
    let f = sys::ak_embedding().ok_or_else(|| missing(F))?;
    check(unsafe {
        f(
            to_i64(F, "n_tokens", ids.len())?,
            ids.as_ptr(),
            to_i64(F, "vocab_size", vocab_size)?,
            to_i64(F, "dim", dim)?,
            table.as_ptr(),
            to_i64(F, "ld_table", ld_table)?,
            out.as_mut_ptr(),
            to_i64(F, "ld_out", ld_out)?,
        )
    })
}
