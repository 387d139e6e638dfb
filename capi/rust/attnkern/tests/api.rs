//! `PKG_CONFIG_PATH=<prefix>/lib/pkgconfig cargo test --offline` (or ATTNKERN_LIB_DIR=<libdir>)
//! AK_LAYOUT_PROBE, when set, names the abi_layout program built from
//! capi/examples/c/abi_layout.c; the layout test then compares with the C
//! compiler's sizeof/offsetof instead of the LP64 values written here.
use attnkern::{sys, Attention, Mask, Status, Transpose};
use std::collections::HashMap;
use std::sync::Mutex;

/// The ISA and thread count are process-wide; cargo runs tests in parallel.
static GLOBAL_CONFIG: Mutex<()> = Mutex::new(());

/// Deterministic values in [-1, 1).
fn data(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

#[allow(clippy::too_many_arguments)]
fn naive_gemm(
    ta: bool,
    tb: bool,
    m: usize,
    n: usize,
    k: usize,
    a: &[f32],
    lda: usize,
    b: &[f32],
    ldb: usize,
) -> Vec<f64> {
    let mut c = vec![0.0f64; m * n];
    for i in 0..m {
        for j in 0..n {
            let mut s = 0.0f64;
            for p in 0..k {
                let x = if ta { a[p * lda + i] } else { a[i * lda + p] };
                let y = if tb { b[j * ldb + p] } else { b[p * ldb + j] };
                s += x as f64 * y as f64;
            }
            c[i * n + j] = s;
        }
    }
    c
}

fn check_gemm(m: usize, n: usize, k: usize, ta: bool, tb: bool) {
    let (ar, ac) = if ta { (k, m) } else { (m, k) };
    let (br, bc) = if tb { (n, k) } else { (k, n) };
    // Padded leading dimensions, to exercise them.
    let (lda, ldb, ldc) = (ac + 3, bc + 1, n + 2);
    let a = data(ar * lda, 1);
    let b = data(br * ldb, 2);
    let mut c = vec![f32::NAN; m * ldc]; // beta = 0 must ignore NaN
    let t = |x| if x { Transpose::Yes } else { Transpose::No };
    attnkern::sgemm(t(ta), t(tb), m, n, k, 1.0, &a, lda, &b, ldb, 0.0, &mut c, ldc).unwrap();
    let want = naive_gemm(ta, tb, m, n, k, &a, lda, &b, ldb);
    let tol = 1e-6 * (k.max(1) as f64).sqrt() * k.max(1) as f64; // |a|,|b| <= 1
    for i in 0..m {
        for j in 0..n {
            let got = c[i * ldc + j] as f64;
            assert!(
                (got - want[i * n + j]).abs() <= tol,
                "m={m} n={n} k={k} ta={ta} tb={tb} ({i},{j}): {got} vs {}",
                want[i * n + j]
            );
        }
        for j in n..ldc {
            assert!(c[i * ldc + j].is_nan(), "padding of c was written");
        }
    }
}

#[test]
fn version_and_abi() {
    assert_eq!(attnkern::abi_version(), sys::AK_ABI_VERSION);
    let v = attnkern::version();
    assert_eq!(v.split('.').filter(|p| p.parse::<u32>().is_ok()).count(), 3, "{v}");
}

#[test]
fn sgemm_matches_naive_loop() {
    for &(m, n, k) in &[(1, 1, 1), (3, 17, 5), (64, 65, 63), (33, 129, 70), (0, 3, 2), (2, 0, 3)] {
        for ta in [false, true] {
            for tb in [false, true] {
                check_gemm(m, n, k, ta, tb);
            }
        }
    }
}

#[test]
fn sgemm_k_zero_applies_beta() {
    let mut c = vec![2.0f32; 6];
    attnkern::sgemm(Transpose::No, Transpose::No, 2, 3, 0, 1.0, &[], 1, &[], 3, 0.5, &mut c, 3)
        .unwrap();
    assert_eq!(c, vec![1.0; 6]);
}

#[test]
fn softmax_rows_sum_to_one() {
    let (rows, cols, ld) = (9, 67, 70);
    let x: Vec<f32> = data(rows * ld, 3).iter().map(|v| v * 30.0).collect();
    let mut y = vec![0.0f32; rows * cols];
    attnkern::softmax(rows, cols, &x, ld, &mut y, cols).unwrap();
    for r in 0..rows {
        let row = &y[r * cols..(r + 1) * cols];
        let sum: f64 = row.iter().map(|&v| v as f64).sum();
        assert!((sum - 1.0).abs() < 1e-5, "row {r} sums to {sum}");
        assert!(row.iter().all(|&v| (0.0..=1.0).contains(&v)));
        // Against a float64 softmax.
        let xr = &x[r * ld..r * ld + cols];
        let mx = xr.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b)) as f64;
        let z: f64 = xr.iter().map(|&v| (v as f64 - mx).exp()).sum();
        for (j, &v) in row.iter().enumerate() {
            let want = (xr[j] as f64 - mx).exp() / z;
            assert!((v as f64 - want).abs() <= 2e-6 * want + 1e-7, "({r},{j}): {v} vs {want}");
        }
    }
    let mut z = x.clone();
    attnkern::softmax_in_place(rows, cols, &mut z, ld).unwrap();
    for r in 0..rows {
        assert_eq!(&z[r * ld..r * ld + cols], &y[r * cols..(r + 1) * cols]);
        assert_eq!(
            &z[r * ld + cols..(r + 1) * ld],
            &x[r * ld + cols..(r + 1) * ld],
            "past cols untouched"
        );
    }
    let mut l = vec![0.0f32; rows * cols];
    attnkern::log_softmax(rows, cols, &x, ld, &mut l, cols).unwrap();
    for (lv, yv) in l.iter().zip(&y) {
        assert!((lv.exp() - yv).abs() < 1e-6);
    }
}

#[test]
fn error_carries_status_and_message() {
    let (a, b) = (vec![1.0f32; 6], vec![1.0f32; 6]);
    let mut c = vec![-7.0f32; 4];
    // lda = 2 < k = 3: rejected by the library, nothing written.
    let e =
        attnkern::sgemm(Transpose::No, Transpose::No, 2, 2, 3, 1.0, &a, 2, &b, 2, 0.0, &mut c, 2)
            .unwrap_err();
    assert_eq!(e.status(), Status::BadStride);
    assert!(e.message().contains("lda"), "{}", e.message());
    assert!(e.to_string().contains("AK_ERR_BAD_STRIDE"), "{e}");
    assert_eq!(c, vec![-7.0; 4]);

    // A slice too short is caught here, before the call.
    let e = attnkern::softmax(2, 3, &a[..5], 3, &mut c[..], 3).unwrap_err();
    assert_eq!(e.status(), Status::BadShape);
    assert!(e.message().contains("x has 5 elements"), "{}", e.message());

    // Raw layer: NULL with a non-empty extent.
    let st = unsafe { sys::ak_softmax(2, 3, std::ptr::null(), 3, std::ptr::null_mut(), 3) };
    assert_eq!(st, sys::ak_status::AK_ERR_NULL_POINTER);

    let _g = GLOBAL_CONFIG.lock().unwrap_or_else(|p| p.into_inner());
    let e = attnkern::set_isa(Some("mmx")).unwrap_err();
    assert_eq!(e.status(), Status::BadArgument);
    let e = attnkern::set_isa(Some("a\0b")).unwrap_err();
    assert_eq!(e.status(), Status::BadArgument);
}

#[test]
fn listing_isas_changes_nothing() {
    let _g = GLOBAL_CONFIG.lock().unwrap_or_else(|p| p.into_inner());
    attnkern::set_isa(Some("scalar")).unwrap();
    let isas = attnkern::available_isas().unwrap();
    let now = attnkern::isa();
    attnkern::set_isa(None).unwrap();
    assert_eq!(now, "scalar", "available_isas changed the instruction set");
    assert!(isas.contains(&"scalar"));
    assert!(attnkern::isa_supported(Some("scalar")));
    assert!(!attnkern::isa_supported(Some("mmx")));
    assert!(!attnkern::isa_supported(Some("avx\0")));
}

#[test]
fn every_available_isa() {
    let _g = GLOBAL_CONFIG.lock().unwrap_or_else(|p| p.into_inner());
    let isas = attnkern::available_isas().unwrap();
    assert!(!isas.is_empty());
    assert!(isas.contains(&attnkern::isa().as_str()), "auto picked {}", attnkern::isa());
    for name in &isas {
        attnkern::set_isa(Some(name)).unwrap();
        assert_eq!(attnkern::isa(), *name);
        check_gemm(37, 21, 45, false, true);
        let x = data(5 * 33, 9);
        let mut y = vec![0.0; 5 * 33];
        attnkern::softmax(5, 33, &x, 33, &mut y, 33).unwrap();
        for r in y.chunks(33) {
            assert!((r.iter().sum::<f32>() - 1.0).abs() < 1e-5);
        }
    }
    for name in attnkern::ISAS.iter().filter(|n| !isas.contains(n)) {
        assert_eq!(attnkern::set_isa(Some(name)).unwrap_err().status(), Status::Unsupported);
    }
    attnkern::set_isa(None).unwrap();

    attnkern::set_num_threads(3).unwrap();
    assert_eq!(attnkern::num_threads(), 3);
    attnkern::set_num_threads_local(1).unwrap();
    assert_eq!((attnkern::num_threads(), attnkern::num_threads_local()), (1, 1));
    let other = std::thread::spawn(|| (attnkern::num_threads(), attnkern::num_threads_local()));
    assert_eq!(other.join().unwrap(), (3, 0), "another thread keeps the process-wide count");
    attnkern::set_num_threads_local(0).unwrap();
    assert_eq!(attnkern::num_threads(), 3);
    attnkern::release_scratch();
    attnkern::set_num_threads(0).unwrap();
}

#[test]
fn threads_local_guard_restores_the_previous_count() {
    attnkern::set_num_threads_local(3).unwrap();
    {
        let _one = attnkern::threads_local(1).unwrap();
        assert_eq!((attnkern::num_threads(), attnkern::num_threads_local()), (1, 1));
        {
            let _follow = attnkern::threads_local(0).unwrap();
            assert_eq!(attnkern::num_threads_local(), 0);
        }
        assert_eq!(attnkern::num_threads_local(), 1);
    }
    assert_eq!(attnkern::num_threads_local(), 3);
    assert!(attnkern::threads_local(usize::MAX).is_err());
    assert_eq!(attnkern::num_threads_local(), 3, "a refused count changes nothing");
    attnkern::set_num_threads_local(0).unwrap();
}

fn field_offsets(d: &sys::ak_attention_desc) -> Vec<(&'static str, usize)> {
    let base = d as *const _ as usize;
    macro_rules! offsets {
        ($($f:ident),*) => { vec![$((stringify!($f), std::ptr::addr_of!(d.$f) as usize - base)),*] };
    }
    offsets!(
        struct_size,
        batch,
        num_heads,
        num_kv_heads,
        q_len,
        kv_len,
        head_dim,
        head_dim_v,
        scale,
        mask,
        window_left,
        window_right,
        bias,
        bias_strides,
        kv_lens,
        q_strides,
        k_strides,
        v_strides,
        o_strides,
        lse,
        probs,
        k_type,
        v_type,
        softcap,
        alibi_slopes,
        sinks,
        block_table,
        block_table_stride,
        page_size,
        num_pages,
        k_page_strides,
        v_page_strides,
        cu_seqlens_q,
        cu_seqlens_k
    )
}

#[test]
fn attention_desc_layout_matches_c() {
    let d = Attention::new(1, 1, 1, 1, 1).desc().unwrap();
    let size = std::mem::size_of::<sys::ak_attention_desc>();
    assert_eq!(d.struct_size as usize, size, "ak_attention_desc_init's sizeof differs from Rust's");
    assert_eq!((d.window_left, d.window_right), (-1, -1));
    // The 0.2 fields start at their defaults: fp32, unpaged, no modifiers.
    assert_eq!((d.k_type, d.v_type, d.softcap), (0, 0, 0.0));
    assert_eq!((d.block_table_stride, d.page_size, d.num_pages), (0, 0, 0));
    assert_eq!((d.k_page_strides, d.v_page_strides), ([0; 3], [0; 3]));
    assert!(d.alibi_slopes.is_null() && d.sinks.is_null() && d.block_table.is_null());
    assert!(d.cu_seqlens_q.is_null() && d.cu_seqlens_k.is_null());
    let ours = field_offsets(&d);

    // What the C compiler says, from abi_layout (the CMake test always sets it).
    if let Some(probe) = std::env::var_os("AK_LAYOUT_PROBE") {
        let out = std::process::Command::new(&probe).output().expect("run AK_LAYOUT_PROBE");
        assert!(out.status.success());
        let c: HashMap<String, usize> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(k, v)| (k.to_string(), v.parse().unwrap()))
            .collect();
        assert_eq!(size, c["sizeof.ak_attention_desc"]);
        assert_eq!(std::mem::align_of::<sys::ak_attention_desc>(), c["alignof.ak_attention_desc"]);
        for (name, off) in &ours {
            assert_eq!(*off, c[&format!("offsetof.ak_attention_desc.{name}")], "field {name}");
        }
        assert_eq!(
            sys::ak_attention_desc_size_0_1() as usize,
            c["value.AK_ATTENTION_DESC_SIZE_0_1"],
            "AK_ATTENTION_DESC_SIZE_0_1"
        );
        for e in ["ak_status", "ak_trans", "ak_mask", "ak_dtype", "ak_rope_style"] {
            assert_eq!(c[&format!("sizeof.{e}")], std::mem::size_of::<sys::ak_status>(), "{e}");
        }
        assert_eq!(std::mem::size_of::<sys::ak_trans>(), c["sizeof.ak_trans"]);
        assert_eq!(std::mem::size_of::<sys::ak_mask>(), c["sizeof.ak_mask"]);
    } else {
        eprintln!("AK_LAYOUT_PROBE not set: checking the LP64 layout written here");
    }
    // LP64 (x86-64, aarch64), which the probe confirms where it runs.
    #[cfg(target_pointer_width = "64")]
    {
        assert_eq!((size, sys::ak_attention_desc_size_0_1()), (368, 240));
        let want = [
            0, 8, 16, 24, 32, 40, 48, 56, 64, 68, 72, 80, 88, 96, 120, 128, 152, 176, 200, 224,
            232, 240, 244, 248, 256, 264, 272, 280, 288, 296, 304, 328, 352, 360,
        ];
        assert_eq!(ours.iter().map(|p| p.1).collect::<Vec<_>>(), want);
    }
}

#[test]
fn attention_if_implemented() {
    let mut att = Attention::new(2, 4, 5, 7, 8);
    att.num_kv_heads = 2;
    att.mask = Mask::CausalBottomRight;
    let (b, h, hk, ql, kl, d) = (2, 4, 2, 5, 7, 8);
    let (q, k, v) = (data(b * h * ql * d, 4), data(b * hk * kl * d, 5), data(b * hk * kl * d, 6));
    let mut out = vec![0.0f32; b * h * ql * d];
    // Too-short buffers never reach the library.
    assert_eq!(att.run(&q[1..], &k, &v, &mut out, None).unwrap_err().status(), Status::BadShape);
    match att.run(&q, &k, &v, &mut out, None) {
        Err(e) if e.status() == Status::Unsupported => {
            eprintln!("skipping the attention comparison: {}", e.message());
            return;
        }
        r => r.unwrap(),
    }
    let scale = 1.0 / (d as f64).sqrt();
    for bi in 0..b {
        for hi in 0..h {
            let kh = hi / (h / hk);
            for i in 0..ql {
                let qi = &q[((bi * h + hi) * ql + i) * d..][..d];
                let visible = (i + kl - ql + 1).min(kl);
                let s: Vec<f64> = (0..visible)
                    .map(|j| {
                        let kj = &k[((bi * hk + kh) * kl + j) * d..][..d];
                        qi.iter().zip(kj).map(|(x, y)| *x as f64 * *y as f64).sum::<f64>() * scale
                    })
                    .collect();
                let mx = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let z: f64 = s.iter().map(|x| (x - mx).exp()).sum();
                for c in 0..d {
                    let want: f64 = (0..visible)
                        .map(|j| {
                            (s[j] - mx).exp() / z * v[((bi * hk + kh) * kl + j) * d + c] as f64
                        })
                        .sum();
                    let got = out[((bi * h + hi) * ql + i) * d + c] as f64;
                    assert!((got - want).abs() < 1e-5, "({bi},{hi},{i},{c}): {got} vs {want}");
                }
            }
        }
    }
}
