//! Rotary and token embeddings against references written here (float64).
//! They skip, saying so, where the library lacks ak_rope or ak_embedding.
use attnkern::{embedding, rope, sys, Frequencies, RopeLayout, RopeStyle, Status};

/// Deterministic values in [-2, 2).
fn data(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 4.0 - 2.0
        })
        .collect()
}

/// One head row rotated in float64 at `position` by `inv_freq`.
fn rotate_row(row: &[f32], position: i32, inv_freq: &[f32], style: RopeStyle) -> Vec<f64> {
    let mut out: Vec<f64> = row.iter().map(|&v| v as f64).collect();
    let half = inv_freq.len();
    for (i, &f) in inv_freq.iter().enumerate() {
        let (a, b) = match style {
            RopeStyle::Neox => (i, i + half),
            RopeStyle::Interleaved => (2 * i, 2 * i + 1),
        };
        let angle = position as f64 * f as f64;
        let (xa, xb) = (row[a] as f64, row[b] as f64);
        out[a] = xa * angle.cos() - xb * angle.sin();
        out[b] = xa * angle.sin() + xb * angle.cos();
    }
    out
}

#[test]
fn rope_on_q_and_k_of_a_fused_projection() {
    if sys::ak_rope().is_none() {
        eprintln!("skipped: the library has no ak_rope");
        return;
    }
    let (batch, seq, heads, d) = (2usize, 3usize, 2usize, 8usize);
    let row = 3 * heads * d; // [q | k | v] per token
    let before = data(batch * seq * row, 3);
    let positions = [0, 5, 1 << 20, -4, 7, 100];
    let inv_freq: Vec<f32> =
        (0..d / 2).map(|i| (10000f64.powf(-2.0 * i as f64 / d as f64)) as f32).collect();
    for style in [RopeStyle::Neox, RopeStyle::Interleaved] {
        let mut qkv = before.clone();
        let layout = RopeLayout {
            batch,
            seq_len: seq,
            num_heads: heads,
            head_dim: d,
            strides: Some([seq * row, row, d]),
        };
        for part in 0..2 {
            let x = &mut qkv[part * heads * d..];
            rope(x, &layout, 0, style, Some(&positions), Frequencies::Theta(10000.0)).unwrap();
        }
        for t in 0..batch * seq {
            for h in 0..2 * heads {
                let at = t * row + h * d;
                let want = rotate_row(&before[at..at + d], positions[t], &inv_freq, style);
                for e in 0..d {
                    assert!(
                        (qkv[at + e] as f64 - want[e]).abs() < 1e-5,
                        "{style:?} token {t} {h} {e}"
                    );
                }
            }
            let v = t * row + 2 * heads * d;
            assert_eq!(qkv[v..v + heads * d], before[v..v + heads * d], "v changed");
        }
    }
}

#[test]
fn rope_partial_rotary_dim_with_a_table() {
    if sys::ak_rope().is_none() {
        eprintln!("skipped: the library has no ak_rope");
        return;
    }
    let d = 10;
    let before = data(3 * d, 4);
    let mut x = before.clone();
    let layout = RopeLayout { batch: 1, seq_len: 3, num_heads: 1, head_dim: d, strides: None };
    let table = [1.0f32, 0.125];
    rope(&mut x, &layout, 4, RopeStyle::Interleaved, None, Frequencies::Table(&table)).unwrap();
    for s in 0..3 {
        let want = rotate_row(&before[s * d..s * d + 4], s as i32, &table, RopeStyle::Interleaved);
        for e in 0..4 {
            assert!((x[s * d + e] as f64 - want[e]).abs() < 1e-5);
        }
        assert_eq!(x[s * d + 4..s * d + d], before[s * d + 4..s * d + d]);
    }
    let err = rope(&mut x, &layout, 3, RopeStyle::Neox, None, Frequencies::Theta(1e4)).unwrap_err();
    assert_eq!(err.status(), Status::BadShape);
    assert!(err.message().contains("rotary_dim = 3"), "{}", err.message());
}

#[test]
fn embedding_rows_zero_rows_and_refusal() {
    if sys::ak_embedding().is_none() {
        eprintln!("skipped: the library has no ak_embedding");
        return;
    }
    let (vocab, dim, ld_out) = (5usize, 6usize, 8usize);
    let table = data(vocab * dim, 5);
    let ids = [4, -1, 0];
    let mut out = vec![9.0f32; ids.len() * ld_out];
    embedding(&ids, &table, vocab, dim, dim, &mut out, ld_out).unwrap();
    for (t, &id) in ids.iter().enumerate() {
        for e in 0..dim {
            let want = if id < 0 { 0.0 } else { table[id as usize * dim + e] };
            assert_eq!(out[t * ld_out + e], want);
        }
        assert_eq!(out[t * ld_out + dim..(t + 1) * ld_out], [9.0, 9.0]);
    }
    let mut untouched = vec![9.0f32; 2 * dim];
    let err = embedding(&[1, 5], &table, vocab, dim, dim, &mut untouched, dim).unwrap_err();
    assert_eq!(err.status(), Status::BadArgument);
    assert!(err.message().contains("ids[1] = 5"), "{}", err.message());
    assert!(untouched.iter().all(|&v| v == 9.0));
}
