//! softmax_axis, sgemm_strided_batched, sgemm_blocking, position_encoding and
//! mha_self_attention against float64 references.
use attnkern::{Mask, Status, StridedBatch, Transpose};

fn data(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

#[test]
fn softmax_axis_down_the_columns() {
    let (rows, cols) = (4, 3);
    let x = data(rows * cols, 1);
    let mut y = vec![0.0f32; rows * cols];
    attnkern::softmax_axis(1, rows, cols, &x, &mut y).unwrap();
    for c in 0..cols {
        let m = (0..rows).map(|r| x[r * cols + c] as f64).fold(f64::MIN, f64::max);
        let sum: f64 = (0..rows).map(|r| (x[r * cols + c] as f64 - m).exp()).sum();
        for r in 0..rows {
            let want = (x[r * cols + c] as f64 - m).exp() / sum;
            assert!((y[r * cols + c] as f64 - want).abs() < 1e-6);
        }
    }
    let mut z = x.clone();
    attnkern::softmax_axis_in_place(1, rows, cols, &mut z).unwrap();
    assert_eq!(y, z);
    let e = attnkern::softmax_axis(2, rows, cols, &x, &mut y).unwrap_err();
    assert_eq!(e.status(), Status::BadShape);
}

#[test]
fn strided_batched_matches_each_product() {
    let (m, n, k, batch) = (3, 5, 4, 3);
    let a = data(batch * m * k, 2);
    let b = data(k * n, 3); // one b for every product: stride 0
    let mut c = vec![0.0f32; batch * m * n];
    let strides = StridedBatch { batch, stride_a: m * k, stride_b: 0, stride_c: m * n };
    attnkern::sgemm_strided_batched(
        Transpose::No,
        Transpose::No,
        m,
        n,
        k,
        1.0,
        &a,
        k,
        &b,
        n,
        0.0,
        &mut c,
        n,
        strides,
    )
    .unwrap();
    for i in 0..batch {
        for r in 0..m {
            for j in 0..n {
                let want: f64 =
                    (0..k).map(|p| a[i * m * k + r * k + p] as f64 * b[p * n + j] as f64).sum();
                assert!((c[i * m * n + r * n + j] as f64 - want).abs() < 1e-5);
            }
        }
    }
    let short = StridedBatch { batch: batch + 1, ..strides };
    let e = attnkern::sgemm_strided_batched(
        Transpose::No,
        Transpose::No,
        m,
        n,
        k,
        1.0,
        &a,
        k,
        &b,
        n,
        0.0,
        &mut c,
        n,
        short,
    )
    .unwrap_err();
    assert_eq!(e.status(), Status::BadShape);
}

#[test]
fn blocking_is_reported() {
    let blk = attnkern::sgemm_blocking().unwrap();
    assert!(blk.mr > 0 && blk.nr > 0 && blk.mc > 0 && blk.kc > 0 && blk.nc > 0, "{:?}", blk);
}

#[test]
fn position_encoding_matches_the_formula() {
    let (len, dim, base) = (6, 5, 100.0f32);
    let mut pe = vec![1.0f32; len * dim];
    attnkern::position_encoding(len, dim, base, &mut pe).unwrap();
    for p in 0..len {
        for i in 0..dim / 2 {
            let angle = p as f64 / (base as f64).powf(2.0 * i as f64 / dim as f64);
            assert!((pe[p * dim + 2 * i] as f64 - angle.sin()).abs() < 1e-6);
            assert!((pe[p * dim + 2 * i + 1] as f64 - angle.cos()).abs() < 1e-6);
        }
        assert_eq!(pe[p * dim + dim - 1], 0.0, "an odd dim leaves the last column 0");
    }
    let e = attnkern::position_encoding(len, dim, f32::NAN, &mut pe).unwrap_err();
    assert_eq!(e.status(), Status::BadArgument);
}

#[test]
fn mha_self_attention_per_head() {
    let (n, d_model, heads, d_k, d_v) = (5, 6, 2, 3, 4);
    let x = data(n * d_model, 4);
    let (w_q, w_k) = (data(heads * d_model * d_k, 5), data(heads * d_model * d_k, 6));
    let w_v = data(heads * d_model * d_v, 7);
    let mut out = vec![0.0f32; heads * n * d_v];
    attnkern::mha_self_attention(
        n,
        d_model,
        heads,
        d_k,
        d_v,
        &x,
        &w_q,
        &w_k,
        &w_v,
        Mask::CausalTopLeft,
        &mut out,
    )
    .unwrap();
    let proj = |w: &[f32], h: usize, d: usize| -> Vec<f64> {
        let mut p = vec![0.0f64; n * d];
        for t in 0..n {
            for j in 0..d {
                p[t * d + j] = (0..d_model)
                    .map(|c| x[t * d_model + c] as f64 * w[h * d_model * d + c * d + j] as f64)
                    .sum();
            }
        }
        p
    };
    for h in 0..heads {
        let (q, k, v) = (proj(&w_q, h, d_k), proj(&w_k, h, d_k), proj(&w_v, h, d_v));
        for i in 0..n {
            let s: Vec<f64> = (0..=i)
                .map(|j| (0..d_k).map(|c| q[i * d_k + c] * k[j * d_k + c]).sum::<f64>())
                .map(|s| s / (d_k as f64).sqrt())
                .collect();
            let m = s.iter().cloned().fold(f64::MIN, f64::max);
            let sum: f64 = s.iter().map(|x| (x - m).exp()).sum();
            for c in 0..d_v {
                let want: f64 =
                    (0..=i).map(|j| (s[j] - m).exp() / sum * v[j * d_v + c]).sum::<f64>();
                assert!((out[h * n * d_v + i * d_v + c] as f64 - want).abs() < 1e-5);
            }
        }
    }
    let e = attnkern::mha_self_attention(
        n,
        d_model,
        heads,
        d_k,
        d_v,
        &x[..n],
        &w_q,
        &w_k,
        &w_v,
        Mask::None,
        &mut out,
    )
    .unwrap_err();
    assert_eq!(e.status(), Status::BadShape);
}
