//! Storage types, cache stores and paged attention against references
//! written here. Tests of ak_convert and ak_kv_cache_store skip, saying so,
//! where the library lacks them (0.1); the f16/bf16 and paged attention tests
//! need a library whose ak_attention reads k_type, v_type and block_table.
use attnkern::{sys, Attention, DType, Elems, ElemsMut, Mask, Paged, PoolLayout, Status};

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

/// x rounded to bf16, ties to even (finite x).
fn bf16(x: f32) -> u16 {
    let b = x.to_bits();
    ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) as u16
}

fn bf16_value(h: u16) -> f32 {
    f32::from_bits((h as u32) << 16)
}

fn round_half_even(v: f64) -> f64 {
    if (v - v.trunc()).abs() == 0.5 {
        2.0 * (v / 2.0).round()
    } else {
        v.round()
    }
}

/// x rounded to f16, ties to even (|x| < 65504); subnormals kept.
fn f16(x: f32) -> u16 {
    let sign = if x.is_sign_negative() { 0x8000u16 } else { 0 };
    let a = x.abs() as f64;
    if a == 0.0 {
        return sign;
    }
    let e = (a.log2().floor() as i32).max(-14);
    let m = round_half_even(a / 2f64.powi(e - 10));
    let (e, m) = if m >= 2048.0 { (e + 1, m / 2.0) } else { (e, m) };
    if m < 1024.0 {
        sign | m as u16
    } else {
        sign | (((e + 15) as u16) << 10) | (m as u16 - 1024)
    }
}

fn f16_value(h: u16) -> f32 {
    let (e, m) = (((h >> 10) & 0x1F) as i32, (h & 0x3FF) as f64);
    let a = if e == 0 { m * 2f64.powi(-24) } else { (1024.0 + m) * 2f64.powi(e - 25) };
    (if h & 0x8000 != 0 { -a } else { a }) as f32
}

/// bits in the first half of an allocation twice their size: a library that
/// ignored k_type would read 4-byte floats, and must not run past the
/// allocation while the test reports the mismatch.
fn padded(bits: Vec<u16>) -> Vec<u16> {
    let n = bits.len();
    let mut v = bits;
    v.resize(2 * n, 0);
    v
}

fn skip_without(name: &str, present: bool) -> bool {
    if !present {
        eprintln!("skipping: the library has no {name} (older than 0.2)");
    }
    !present
}

#[test]
fn convert_rounds_to_nearest_even() {
    if skip_without("ak_convert", sys::ak_convert().is_some()) {
        return;
    }
    let mut x = data(300, 1).iter().map(|v| v * 50.0).collect::<Vec<_>>();
    x.extend([0.0, -0.0, 1e-6, -3e-7, 65504.0, 1.0 + 1.0 / 256.0, 1.0 + 3.0 / 256.0]);
    let mut b = vec![0u16; x.len()];
    attnkern::convert(ElemsMut::BF16(&mut b), Elems::F32(&x)).unwrap();
    assert_eq!(b, x.iter().map(|&v| bf16(v)).collect::<Vec<_>>());
    let mut h = vec![0u16; x.len()];
    attnkern::convert(ElemsMut::F16(&mut h), Elems::F32(&x)).unwrap();
    assert_eq!(h, x.iter().map(|&v| f16(v)).collect::<Vec<_>>());
    // Widening is exact.
    let mut back = vec![0f32; x.len()];
    attnkern::convert(ElemsMut::F32(&mut back), Elems::half(DType::F16, &h).unwrap()).unwrap();
    assert_eq!(back, h.iter().map(|&v| f16_value(v)).collect::<Vec<_>>());
    // f16 -> bf16 in place: every f16 is a bf16 after rounding its mantissa.
    let mut same = h.clone();
    attnkern::convert_in_place(&mut same, DType::F16, DType::BF16).unwrap();
    assert_eq!(same, h.iter().map(|&v| bf16(f16_value(v))).collect::<Vec<_>>());
}

#[test]
fn convert_checks_before_calling() {
    let (x, mut h) = (vec![1.0f32; 4], vec![0u16; 3]);
    let e = attnkern::convert(ElemsMut::F16(&mut h), Elems::F32(&x)).unwrap_err();
    assert_eq!(e.status(), Status::BadShape);
    assert_eq!(Elems::half(DType::F32, &h[..]).unwrap_err().status(), Status::BadArgument);
    let e = attnkern::convert_in_place(&mut h, DType::F32, DType::BF16).unwrap_err();
    assert_eq!(e.status(), Status::BadArgument);
}

#[test]
fn kv_cache_store_into_pages() {
    if skip_without("ak_kv_cache_store", sys::ak_kv_cache_store().is_some()) {
        return;
    }
    let (n, hk, d, pages, ps) = (6, 2, 8, 5, 4);
    // Keys as the middle third of a fused [n, 3, hk, d] projection.
    let qkv = data(n * 3 * hk * d, 2);
    let slots = [13i64, 2, -1, 19, 4, 8];
    let layout = PoolLayout::contiguous(pages, hk, ps, d);
    let mut pool = vec![0x7FC0u16; pages * hk * ps * d];
    let src = &qkv[hk * d..];
    let strides = Some([3 * hk * d, d]);
    attnkern::kv_cache_store(src, strides, &slots, ElemsMut::BF16(&mut pool), &layout).unwrap();
    let mut want = vec![0x7FC0u16; pool.len()];
    for (t, &slot) in slots.iter().enumerate().filter(|p| *p.1 >= 0) {
        let (page, off) = (slot as usize / ps, slot as usize % ps);
        for h in 0..hk {
            for c in 0..d {
                want[((page * hk + h) * ps + off) * d + c] =
                    bf16(qkv[((t * 3 + 1) * hk + h) * d + c]);
            }
        }
    }
    assert_eq!(pool, want);

    // A slot named twice: refused, nothing written.
    let mut f32_pool = vec![0.0f32; pages * hk * ps * d];
    let dup = [13i64, 2, -1, 19, 4, 13];
    let e = attnkern::kv_cache_store(src, strides, &dup, ElemsMut::F32(&mut f32_pool), &layout)
        .unwrap_err();
    assert_eq!(e.status(), Status::BadArgument);
    assert!(f32_pool.iter().all(|&v| v == 0.0));
}

#[test]
fn kv_cache_store_checks_sizes_first() {
    let layout = PoolLayout::contiguous(2, 2, 4, 8);
    let mut pool = vec![0u16; 2 * 2 * 4 * 8 - 1];
    let src = vec![0.0f32; 3 * 2 * 8];
    let e = attnkern::kv_cache_store(&src, None, &[0, 1, 2], ElemsMut::F16(&mut pool), &layout)
        .unwrap_err();
    assert_eq!(e.status(), Status::BadShape);
    let e =
        attnkern::kv_cache_store(&src[1..], None, &[0, 1, 2], ElemsMut::F16(&mut pool), &layout)
            .unwrap_err();
    assert!(e.message().contains("src"), "{}", e.message());
}

const B: usize = 2;
const H: usize = 4;
const HK: usize = 2;
const QL: usize = 3;
const KL: usize = 13;
const D: usize = 8;

fn attention() -> Attention {
    let mut att = Attention::new(B, H, QL, KL, D);
    att.num_kv_heads = HK;
    att.mask = Mask::CausalBottomRight;
    att
}

fn fp32(q: &[f32], k: &[f32], v: &[f32]) -> Vec<f32> {
    let mut out = vec![0.0f32; B * H * QL * D];
    attention().run(q, k, v, &mut out, None).unwrap();
    out
}

fn assert_same(got: &[f32], want: &[f32]) {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= 1e-5, "out[{i}]: {g} vs {w}");
    }
}

#[test]
fn half_kv_equals_fp32_on_the_stored_values() {
    let (q, k, v) = (data(B * H * QL * D, 3), data(B * HK * KL * D, 4), data(B * HK * KL * D, 5));
    let n = k.len();
    for (dtype, round, widen) in [
        (DType::BF16, bf16 as fn(f32) -> u16, bf16_value as fn(u16) -> f32),
        (DType::F16, f16, f16_value),
    ] {
        let kh = padded(k.iter().map(|&x| round(x)).collect());
        let vh = padded(v.iter().map(|&x| round(x)).collect());
        let mut out = vec![0.0f32; B * H * QL * D];
        let (ke, ve) =
            (Elems::half(dtype, &kh[..n]).unwrap(), Elems::half(dtype, &vh[..n]).unwrap());
        attention().run_kv(&q, ke, ve, None, &mut out, None).unwrap();
        let kw: Vec<f32> = kh[..n].iter().map(|&x| widen(x)).collect();
        let vw: Vec<f32> = vh[..n].iter().map(|&x| widen(x)).collect();
        assert_same(&out, &fp32(&q, &kw, &vw));
    }
}

#[test]
fn paged_equals_contiguous() {
    let (q, k, v) = (data(B * H * QL * D, 6), data(B * HK * KL * D, 7), data(B * HK * KL * D, 8));
    let ps = 4;
    let per_seq = (KL + ps - 1) / ps;
    let pages = B * per_seq + 3; // 3 spare pages, NaN: never read
                                 // Page ids shuffled (a fixed permutation of 0..pages), -1 past the end.
    let ids: Vec<usize> = (0..pages).map(|i| (i * 7 + 3) % pages).collect();
    let stride = per_seq + 1;
    let mut table = vec![-1i32; B * stride];
    let page_elems = HK * ps * D;
    let (mut kp, mut vp) = (vec![f32::NAN; pages * page_elems], vec![f32::NAN; pages * page_elems]);
    for b in 0..B {
        for p in 0..per_seq {
            table[b * stride + p] = ids[b * per_seq + p] as i32;
        }
        for h in 0..HK {
            for j in 0..KL {
                let page = ids[b * per_seq + j / ps];
                let dst = page * page_elems + (h * ps + j % ps) * D;
                let src = ((b * HK + h) * KL + j) * D;
                kp[dst..dst + D].copy_from_slice(&k[src..src + D]);
                vp[dst..dst + D].copy_from_slice(&v[src..src + D]);
            }
        }
    }
    let paged = Paged {
        block_table: &table,
        block_table_stride: stride,
        page_size: ps,
        num_pages: pages,
        k_page_strides: [0; 3],
        v_page_strides: [page_elems, ps * D, D], // the same layout, spelled out
    };
    let mut out = vec![0.0f32; B * H * QL * D];
    let att = attention();
    // Too short a block table never reaches the library.
    let short = Paged { block_table: &table[1..], ..paged };
    let e = att.run_kv(&q, Elems::F32(&kp), Elems::F32(&vp), Some(&short), &mut out, None);
    assert_eq!(e.unwrap_err().status(), Status::BadShape);
    att.run_kv(&q, Elems::F32(&kp), Elems::F32(&vp), Some(&paged), &mut out, None).unwrap();
    assert_same(&out, &fp32(&q, &k, &v));
}
