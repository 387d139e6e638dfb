//! Softcap, ALiBi slopes and sink logits against a float64 reference written
//! here, and packed variable-length batches against their sequences run one
//! by one.
use attnkern::{Attention, Elems, Extras, Mask, Paged, Status};

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

/// out and lse of `att` on contiguous [b, h, seq, d] tensors in float64, by
/// the header's text (every row has a visible key here).
fn reference(
    att: &Attention,
    ex: &Extras<'_>,
    q: &[f32],
    k: &[f32],
    v: &[f32],
) -> (Vec<f64>, Vec<f64>) {
    let (b, h, hk, ql, kl, d) =
        (att.batch, att.num_heads, att.num_kv_heads, att.q_len, att.kv_len, att.head_dim);
    let scale = 1.0 / (d as f64).sqrt();
    let (mut out, mut lse) = (vec![0.0; b * h * ql * d], vec![0.0; b * h * ql]);
    for bi in 0..b {
        for hi in 0..h {
            let kh = hi / (h / hk);
            for i in 0..ql {
                let row = (bi * h + hi) * ql + i;
                let diag = match att.mask {
                    Mask::CausalBottomRight => (i + kl - ql) as f64,
                    _ => i as f64,
                };
                let visible = match att.mask {
                    Mask::None => kl,
                    _ => diag as usize + 1,
                };
                let s: Vec<f64> = (0..visible)
                    .map(|j| {
                        let kj = &k[((bi * hk + kh) * kl + j) * d..][..d];
                        let qi = &q[row * d..][..d];
                        let mut x: f64 =
                            qi.iter().zip(kj).map(|(a, b)| *a as f64 * *b as f64).sum::<f64>()
                                * scale;
                        if att.softcap > 0.0 {
                            let cap = att.softcap as f64;
                            x = cap * (x / cap).tanh();
                        }
                        if let Some(slopes) = ex.alibi_slopes {
                            x += slopes[hi] as f64 * (j as f64 - diag);
                        }
                        x
                    })
                    .collect();
                let sink = ex.sinks.map_or(f64::NEG_INFINITY, |s| s[hi] as f64);
                let mx = s.iter().cloned().fold(sink, f64::max);
                let z: f64 = s.iter().map(|x| (x - mx).exp()).sum::<f64>() + (sink - mx).exp();
                lse[row] = mx + z.ln();
                for (j, x) in s.iter().enumerate() {
                    let w = (x - mx).exp() / z;
                    for c in 0..d {
                        out[row * d + c] += w * v[((bi * hk + kh) * kl + j) * d + c] as f64;
                    }
                }
            }
        }
    }
    (out, lse)
}

fn assert_close(what: &str, got: &[f32], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((*g as f64 - w).abs() <= tol, "{what}[{i}]: {g} vs {w}");
    }
}

const SLOPES: [f32; 4] = [0.5, 0.25, 0.125, 0.0625];
const SINKS: [f32; 4] = [0.3, -1.0, 2.0, 0.0];

/// Runs `att` with `ex` against the reference (b = 2, h = 4, hk = 2).
fn check_modifiers(mask: Mask, softcap: f32, ex: Extras<'_>) -> Vec<f32> {
    let (b, h, hk, ql, kl, d) = (2, 4, 2, 3, 7, 8);
    let mut att = Attention::new(b, h, ql, kl, d);
    att.num_kv_heads = hk;
    att.mask = mask;
    att.softcap = softcap;
    let (q, k, v) =
        (data(b * h * ql * d, 11), data(b * hk * kl * d, 12), data(b * hk * kl * d, 13));
    let (mut out, mut lse) = (vec![0.0f32; b * h * ql * d], vec![0.0f32; b * h * ql]);
    att.run_with(&q, Elems::F32(&k), Elems::F32(&v), None, &ex, &mut out, Some(&mut lse)).unwrap();
    let (want, want_lse) = reference(&att, &ex, &q, &k, &v);
    assert_close("out", &out, &want, 1e-5);
    assert_close("lse", &lse, &want_lse, 1e-5);
    out
}

#[test]
fn softcap_matches_reference() {
    let capped = check_modifiers(Mask::CausalTopLeft, 1.5, Extras::default());
    let plain = check_modifiers(Mask::CausalTopLeft, 0.0, Extras::default());
    let diff = capped.iter().zip(&plain).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
    assert!(diff > 1e-3, "softcap changed nothing");
}

#[test]
fn alibi_matches_reference() {
    let ex = Extras { alibi_slopes: Some(&SLOPES), ..Extras::default() };
    check_modifiers(Mask::None, 0.0, ex);
    check_modifiers(Mask::CausalBottomRight, 0.0, ex);
}

#[test]
fn sinks_match_reference() {
    let ex = Extras { sinks: Some(&SINKS), ..Extras::default() };
    check_modifiers(Mask::None, 0.0, ex);
    let all = Extras { alibi_slopes: Some(&[0.1; 4]), ..ex };
    check_modifiers(Mask::CausalBottomRight, 3.0, all);
}

#[test]
fn short_per_head_arrays_never_reach_the_library() {
    let mut att = Attention::new(1, 4, 2, 2, 8);
    att.num_kv_heads = 4;
    let (q, k, v) = (data(64, 1), data(64, 2), data(64, 3));
    let mut out = vec![0.0f32; 64];
    let ex = Extras { sinks: Some(&SINKS[1..]), ..Extras::default() };
    let e = att.run_with(&q, Elems::F32(&k), Elems::F32(&v), None, &ex, &mut out, None);
    assert_eq!(e.unwrap_err().status(), Status::BadShape);
}

const H: usize = 4;
const HK: usize = 2;
const D: usize = 8;
const Q_LENS: [usize; 3] = [3, 1, 4];
const KV_LENS: [usize; 3] = [5, 2, 4];

fn offsets(lens: &[usize]) -> Vec<i32> {
    let mut cu = vec![0i32];
    for n in lens {
        cu.push(cu.last().unwrap() + *n as i32);
    }
    cu
}

/// Rows cu[s] .. cu[s + 1] of a token-major [total, heads, d] tensor as a
/// contiguous [1, heads, len, d] one.
fn one(x: &[f32], cu: &[i32], s: usize, heads: usize) -> Vec<f32> {
    let (start, n) = (cu[s] as usize, (cu[s + 1] - cu[s]) as usize);
    let mut y = Vec::with_capacity(n * heads * D);
    for hi in 0..heads {
        for i in 0..n {
            y.extend_from_slice(&x[((start + i) * heads + hi) * D..][..D]);
        }
    }
    y
}

/// [total, heads, d] -> [heads, total, d].
fn head_major(x: &[f32], heads: usize) -> Vec<f32> {
    let total = x.len() / (heads * D);
    one(x, &[0, total as i32], 0, heads)
}

fn packed_attention() -> Attention {
    let mut att = Attention::new(Q_LENS.len(), H, 4, 5, D); // the longest sequences
    att.num_kv_heads = HK;
    att.mask = Mask::CausalBottomRight;
    att.softcap = 4.0;
    att
}

#[test]
fn packed_batch_matches_each_sequence() {
    let (cu_q, cu_k) = (offsets(&Q_LENS), offsets(&KV_LENS));
    let (tq, tk) = (cu_q[3] as usize, cu_k[3] as usize);
    let (q, k, v) = (data(tq * H * D, 21), data(tk * HK * D, 22), data(tk * HK * D, 23));
    let att = packed_attention();
    let heads = Extras { alibi_slopes: Some(&SLOPES), sinks: Some(&SINKS), ..Extras::default() };
    let ex =
        Extras { cu_seqlens_q: Some(&cu_q), cu_seqlens_k: Some(&cu_k), token_major: true, ..heads };
    let (mut out, mut lse) = (vec![0.0f32; tq * H * D], vec![0.0f32; H * tq]);
    att.run_with(&q, Elems::F32(&k), Elems::F32(&v), None, &ex, &mut out, Some(&mut lse)).unwrap();
    for s in 0..Q_LENS.len() {
        let (n, m) = (Q_LENS[s], KV_LENS[s]);
        let one_att = Attention { batch: 1, q_len: n, kv_len: m, ..att };
        let (qs, ks, vs) = (one(&q, &cu_q, s, H), one(&k, &cu_k, s, HK), one(&v, &cu_k, s, HK));
        let (mut o, mut l) = (vec![0.0f32; H * n * D], vec![0.0f32; H * n]);
        one_att
            .run_with(&qs, Elems::F32(&ks), Elems::F32(&vs), None, &heads, &mut o, Some(&mut l))
            .unwrap();
        for hi in 0..H {
            for i in 0..n {
                let row = cu_q[s] as usize + i;
                let (g, w) = (lse[hi * tq + row], l[hi * n + i]);
                assert!((g - w).abs() <= 1e-6, "lse seq {s} head {hi} row {i}: {g} vs {w}");
                for c in 0..D {
                    let (g, w) = (out[(row * H + hi) * D + c], o[(hi * n + i) * D + c]);
                    assert!((g - w).abs() <= 1e-6, "seq {s} head {hi} row {i} [{c}]: {g} vs {w}");
                }
            }
        }
    }
    // The same batch head-major, [heads, total, d].
    let (qh, kh, vh) = (head_major(&q, H), head_major(&k, HK), head_major(&v, HK));
    let ex_h = Extras { token_major: false, ..ex };
    let (mut out_h, mut lse_h) = (vec![0.0f32; tq * H * D], vec![0.0f32; H * tq]);
    att.run_with(&qh, Elems::F32(&kh), Elems::F32(&vh), None, &ex_h, &mut out_h, Some(&mut lse_h))
        .unwrap();
    let want: Vec<f64> = head_major(&out, H).iter().map(|&x| x as f64).collect();
    assert_close("head-major out", &out_h, &want, 1e-6);
    let want: Vec<f64> = lse.iter().map(|&x| x as f64).collect();
    assert_close("head-major lse", &lse_h, &want, 1e-6);
}

#[test]
fn packed_batch_errors() {
    let (cu_q, cu_k) = (offsets(&Q_LENS), offsets(&KV_LENS));
    let (tq, tk) = (cu_q[3] as usize, cu_k[3] as usize);
    let (q, k, v) = (data(tq * H * D, 31), data(tk * HK * D, 32), data(tk * HK * D, 33));
    let att = packed_attention();
    let mut out = vec![0.0f32; tq * H * D];
    let ex = Extras {
        cu_seqlens_q: Some(&cu_q),
        cu_seqlens_k: Some(&cu_k),
        token_major: true,
        ..Extras::default()
    };
    let run = |ex: &Extras<'_>, paged: Option<&Paged<'_>>, out: &mut [f32]| {
        att.run_with(&q, Elems::F32(&k), Elems::F32(&v), paged, ex, out, None).unwrap_err().status()
    };
    // Offsets for another batch size, or too short a q: refused here.
    let short = Extras { cu_seqlens_q: Some(&cu_q[..3]), ..ex };
    assert_eq!(run(&short, None, &mut out), Status::BadShape);
    assert_eq!(run(&ex, None, &mut out[1..]), Status::BadShape);
    // Decreasing offsets: the library's call.
    let bad = [0, 4, 3, tq as i32];
    assert_eq!(
        run(&Extras { cu_seqlens_q: Some(&bad), ..ex }, None, &mut out),
        Status::BadArgument
    );
    // Packed keys with a block table.
    let table = [0i32; 3];
    let paged = Paged {
        block_table: &table,
        block_table_stride: 1,
        page_size: 8,
        num_pages: 1,
        k_page_strides: [0; 3],
        v_page_strides: [0; 3],
    };
    assert_eq!(run(&ex, Some(&paged), &mut out), Status::BadArgument);
}
