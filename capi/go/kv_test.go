package attnkern

// Storage types, cache stores and paged attention against references written
// here. The ak_convert and ak_kv_cache_store tests skip, saying so, where the
// library lacks them (0.1); the f16/bf16 and paged attention tests need a
// library whose ak_attention reads k_type, v_type and block_table.

import (
	"errors"
	"math"
	"testing"
)

// bf16 is x rounded to bf16, ties to even (finite x).
func bf16(x float32) uint16 {
	b := math.Float32bits(x)
	return uint16((b + 0x7FFF + (b>>16)&1) >> 16)
}

func bf16Value(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// f16 is x rounded to f16, ties to even (|x| < 65504); subnormals kept.
func f16(x float32) uint16 {
	var sign uint16
	if math.Signbit(float64(x)) {
		sign = 0x8000
	}
	a := math.Abs(float64(x))
	if a == 0 {
		return sign
	}
	e := int(math.Floor(math.Log2(a)))
	if e < -14 {
		e = -14
	}
	m := math.RoundToEven(a / math.Ldexp(1, e-10))
	if m >= 2048 {
		e, m = e+1, m/2
	}
	if m < 1024 {
		return sign | uint16(m)
	}
	return sign | uint16(e+15)<<10 | (uint16(m) - 1024)
}

func f16Value(h uint16) float32 {
	e, m := int(h>>10&0x1F), float64(h&0x3FF)
	a := math.Ldexp(1024+m, e-25)
	if e == 0 {
		a = math.Ldexp(m, -24)
	}
	if h&0x8000 != 0 {
		a = -a
	}
	return float32(a)
}

// padded returns bits in the first half of an allocation twice their size: a
// library that ignored k_type would read 4-byte floats, and must not run past
// the allocation while the test reports the mismatch.
func padded(bits []uint16) []uint16 {
	buf := make([]uint16, 2*len(bits))
	copy(buf, bits)
	return buf[:len(bits)]
}

func TestConvertRoundsToNearestEven(t *testing.T) {
	if !hasConvert() {
		t.Skip("the library has no ak_convert (older than 0.2)")
	}
	x := data(300, 1)
	for i := range x {
		x[i] *= 100
	}
	x = append(x, 0, float32(math.Copysign(0, -1)), 1e-6, -3e-7, 65504, 1+1.0/256, 1+3.0/256)
	b, h := make([]uint16, len(x)), make([]uint16, len(x))
	if err := Convert(HalfElems(BF16, b), F32Elems(x)); err != nil {
		t.Fatal(err)
	}
	if err := Convert(HalfElems(F16, h), F32Elems(x)); err != nil {
		t.Fatal(err)
	}
	back := make([]float32, len(x))
	if err := Convert(F32Elems(back), HalfElems(F16, h)); err != nil {
		t.Fatal(err)
	}
	for i, v := range x {
		if b[i] != bf16(v) || h[i] != f16(v) || back[i] != f16Value(h[i]) {
			t.Fatalf("x[%d] = %g: bf16 %#x want %#x, f16 %#x want %#x, widened %g", i, v, b[i],
				bf16(v), h[i], f16(v), back[i])
		}
	}
	same := append([]uint16(nil), h...)
	if err := Convert(HalfElems(BF16, same), HalfElems(F16, same)); err != nil {
		t.Fatalf("f16 -> bf16 in place: %v", err)
	}
	for i := range same {
		if same[i] != bf16(f16Value(h[i])) {
			t.Fatalf("in place [%d]: %#x, want %#x", i, same[i], bf16(f16Value(h[i])))
		}
	}
}

func TestConvertChecksBeforeCalling(t *testing.T) {
	x := make([]float32, 8)
	if err := Convert(HalfElems(F16, make([]uint16, 3)), F32Elems(x)); !errors.Is(err, ErrBadShape) {
		t.Errorf("lengths differ: %v", err)
	}
	if err := Convert(F32Elems(x[2:6]), F32Elems(x[:4])); !errors.Is(err, ErrBadArgument) {
		t.Errorf("partial overlap: %v", err)
	}
	if err := Convert(Elems{Type: F32, Bits: make([]uint16, 4)}, F32Elems(x[:4])); !errors.Is(err, ErrBadArgument) {
		t.Errorf("F32 values in Bits: %v", err)
	}
	if !hasConvert() {
		if err := Convert(HalfElems(BF16, make([]uint16, 4)), F32Elems(x[:4])); !errors.Is(err, ErrUnsupported) {
			t.Errorf("without ak_convert: %v", err)
		}
	}
}

func TestKVCacheStoreIntoPages(t *testing.T) {
	if !hasKVCacheStore() {
		t.Skip("the library has no ak_kv_cache_store (older than 0.2)")
	}
	n, hk, d, pages, ps := 6, 2, 8, 5, 4
	qkv := data(n*3*hk*d, 2) // keys are the middle third of a fused [n, 3, hk, d] projection
	slots := []int64{13, 2, -1, 19, 4, 8}
	layout := PoolLayout{NumPages: pages, NumKVHeads: hk, PageSize: ps, HeadDim: d}
	pool := make([]uint16, pages*hk*ps*d)
	for i := range pool {
		pool[i] = 0x7FC0
	}
	want := append([]uint16(nil), pool...)
	strides := [2]int{3 * hk * d, d}
	if err := KVCacheStore(qkv[hk*d:], &strides, slots, HalfElems(BF16, pool), layout); err != nil {
		t.Fatal(err)
	}
	for tok, slot := range slots {
		if slot < 0 {
			continue
		}
		page, off := int(slot)/ps, int(slot)%ps
		for h := 0; h < hk; h++ {
			for c := 0; c < d; c++ {
				want[((page*hk+h)*ps+off)*d+c] = bf16(qkv[((tok*3+1)*hk+h)*d+c])
			}
		}
	}
	for i := range pool {
		if pool[i] != want[i] {
			t.Fatalf("pool[%d] = %#x, want %#x", i, pool[i], want[i])
		}
	}
	f32Pool := make([]float32, pages*hk*ps*d)
	dup := []int64{13, 2, -1, 19, 4, 13}
	if err := KVCacheStore(qkv[hk*d:], &strides, dup, F32Elems(f32Pool), layout); !errors.Is(err, ErrBadArgument) {
		t.Fatalf("a slot named twice: %v", err)
	}
	for _, v := range f32Pool {
		if v != 0 {
			t.Fatal("a refused store wrote the pool")
		}
	}
}

func TestKVCacheStoreChecksSizesFirst(t *testing.T) {
	layout := PoolLayout{NumPages: 2, NumKVHeads: 2, PageSize: 4, HeadDim: 8}
	src := make([]float32, 3*2*8)
	if err := KVCacheStore(src, nil, []int64{0, 1, 2}, HalfElems(F16, make([]uint16, 63)), layout); !errors.Is(err, ErrBadShape) {
		t.Errorf("short pool: %v", err)
	}
	if err := KVCacheStore(src[1:], nil, []int64{0, 1, 2}, HalfElems(F16, make([]uint16, 64)), layout); !errors.Is(err, ErrBadShape) {
		t.Errorf("short src: %v", err)
	}
}

const kvB, kvH, kvHK, kvQL, kvKL, kvD = 2, 4, 2, 3, 13, 8

func kvAttention() Attention {
	return Attention{Batch: kvB, NumHeads: kvH, NumKVHeads: kvHK, QLen: kvQL, KVLen: kvKL,
		HeadDim: kvD, Mask: MaskCausalBottomRight}
}

func fp32Attention(t *testing.T, q, k, v []float32) []float32 {
	t.Helper()
	out := make([]float32, kvB*kvH*kvQL*kvD)
	att := kvAttention()
	if err := att.Run(q, k, v, out, nil); err != nil {
		t.Fatal(err)
	}
	return out
}

func assertSame(t *testing.T, got, want []float32) {
	t.Helper()
	for i := range want {
		if !(math.Abs(float64(got[i]-want[i])) <= 1e-5) { // NaN fails too
			t.Fatalf("out[%d] = %g, want %g", i, got[i], want[i])
		}
	}
}

func TestHalfKVEqualsFP32OnTheStoredValues(t *testing.T) {
	q, k, v := data(kvB*kvH*kvQL*kvD, 3), data(kvB*kvHK*kvKL*kvD, 4), data(kvB*kvHK*kvKL*kvD, 5)
	for _, c := range []struct {
		t     DType
		round func(float32) uint16
		widen func(uint16) float32
	}{{BF16, bf16, bf16Value}, {F16, f16, f16Value}} {
		kh, vh := make([]uint16, len(k)), make([]uint16, len(v))
		kw, vw := make([]float32, len(k)), make([]float32, len(v))
		for i := range k {
			kh[i], vh[i] = c.round(k[i]), c.round(v[i])
			kw[i], vw[i] = c.widen(kh[i]), c.widen(vh[i])
		}
		out := make([]float32, kvB*kvH*kvQL*kvD)
		att := kvAttention()
		if err := att.RunKV(q, HalfElems(c.t, padded(kh)), HalfElems(c.t, padded(vh)), nil, out, nil); err != nil {
			t.Fatalf("type %d: %v", c.t, err)
		}
		assertSame(t, out, fp32Attention(t, q, kw, vw))
	}
}

func TestPagedEqualsContiguous(t *testing.T) {
	q, k, v := data(kvB*kvH*kvQL*kvD, 6), data(kvB*kvHK*kvKL*kvD, 7), data(kvB*kvHK*kvKL*kvD, 8)
	ps := 4
	perSeq := (kvKL + ps - 1) / ps
	pages := kvB*perSeq + 3 // 3 spare pages, NaN: never read
	stride := perSeq + 1    // -1 past the end
	pageElems := kvHK * ps * kvD
	table := make([]int32, kvB*stride)
	kp, vp := make([]float32, pages*pageElems), make([]float32, pages*pageElems)
	for i := range kp {
		kp[i], vp[i] = float32(math.NaN()), float32(math.NaN())
	}
	for b := 0; b < kvB; b++ {
		for p := 0; p < stride; p++ {
			table[b*stride+p] = -1
			if p < perSeq {
				table[b*stride+p] = int32(((b*perSeq+p)*7 + 3) % pages) // shuffled page ids
			}
		}
		for h := 0; h < kvHK; h++ {
			for j := 0; j < kvKL; j++ {
				dst := int(table[b*stride+j/ps])*pageElems + (h*ps+j%ps)*kvD
				src := ((b*kvHK+h)*kvKL + j) * kvD
				copy(kp[dst:dst+kvD], k[src:src+kvD])
				copy(vp[dst:dst+kvD], v[src:src+kvD])
			}
		}
	}
	paged := Paged{BlockTable: table, BlockTableStride: stride, PageSize: ps, NumPages: pages,
		VPageStrides: [3]int{pageElems, ps * kvD, kvD}} // the same layout, spelled out
	att := kvAttention()
	out := make([]float32, kvB*kvH*kvQL*kvD)
	short := paged
	short.BlockTable = table[1:]
	if err := att.RunKV(q, F32Elems(kp), F32Elems(vp), &short, out, nil); !errors.Is(err, ErrBadShape) {
		t.Fatalf("short block table: %v", err)
	}
	if err := att.RunKV(q, F32Elems(kp), F32Elems(vp), &paged, out, nil); err != nil {
		t.Fatal(err)
	}
	assertSame(t, out, fp32Attention(t, q, k, v))
}
