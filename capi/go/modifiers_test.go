package attnkern

// Softcap, ALiBi slopes and sink logits against a float64 reference written
// here, and packed variable-length batches against their sequences run one by
// one.

import (
	"errors"
	"math"
	"testing"
)

// reference is a's out and lse on contiguous [b, h, seq, d] tensors in
// float64, by the header's text (every row has a visible key here).
func reference(a *Attention, q, k, v []float32) (out, lse []float64) {
	b, h, hk, ql, kl, d := a.Batch, a.NumHeads, a.kvHeads(), a.QLen, a.KVLen, a.HeadDim
	scale := 1 / math.Sqrt(float64(d))
	out, lse = make([]float64, b*h*ql*d), make([]float64, b*h*ql)
	for bi := 0; bi < b; bi++ {
		for hi := 0; hi < h; hi++ {
			kh := hi / (h / hk)
			for i := 0; i < ql; i++ {
				row := (bi*h+hi)*ql + i
				diag := i
				if a.Mask == MaskCausalBottomRight {
					diag = i + kl - ql
				}
				visible := kl
				if a.Mask != MaskNone {
					visible = diag + 1
				}
				s := make([]float64, visible)
				sink := math.Inf(-1)
				if a.Sinks != nil {
					sink = float64(a.Sinks[hi])
				}
				mx := sink
				for j := range s {
					for c := 0; c < d; c++ {
						s[j] += float64(q[row*d+c]) * float64(k[((bi*hk+kh)*kl+j)*d+c])
					}
					s[j] *= scale
					if a.Softcap > 0 {
						cp := float64(a.Softcap)
						s[j] = cp * math.Tanh(s[j]/cp)
					}
					if a.AlibiSlopes != nil {
						s[j] += float64(a.AlibiSlopes[hi]) * float64(j-diag)
					}
					mx = math.Max(mx, s[j])
				}
				z := math.Exp(sink - mx)
				for _, x := range s {
					z += math.Exp(x - mx)
				}
				lse[row] = mx + math.Log(z)
				for j, x := range s {
					w := math.Exp(x-mx) / z
					for c := 0; c < d; c++ {
						out[row*d+c] += w * float64(v[((bi*hk+kh)*kl+j)*d+c])
					}
				}
			}
		}
	}
	return out, lse
}

func assertClose(t *testing.T, what string, got []float32, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range want {
		if !(math.Abs(float64(got[i])-want[i]) <= tol) { // NaN fails too
			t.Fatalf("%s[%d] = %g, want %g", what, i, got[i], want[i])
		}
	}
}

var (
	testSlopes = []float32{0.5, 0.25, 0.125, 0.0625}
	testSinks  = []float32{0.3, -1, 2, 0}
)

// checkModifiers runs a (b = 2, h = 4, hk = 2) against the reference.
func checkModifiers(t *testing.T, a Attention) []float32 {
	t.Helper()
	a.Batch, a.NumHeads, a.NumKVHeads, a.QLen, a.KVLen, a.HeadDim = 2, 4, 2, 3, 7, 8
	q, k, v := data(2*4*3*8, 11), data(2*2*7*8, 12), data(2*2*7*8, 13)
	for i := range q {
		q[i] *= 4 // scores past the softcap's linear range
	}
	out, lse := make([]float32, 2*4*3*8), make([]float32, 2*4*3)
	if err := a.Run(q, k, v, out, lse); err != nil {
		t.Fatal(err)
	}
	want, wantLSE := reference(&a, q, k, v)
	assertClose(t, "out", out, want, 1e-5)
	assertClose(t, "lse", lse, wantLSE, 1e-5)
	return out
}

func TestSoftcapMatchesReference(t *testing.T) {
	capped := checkModifiers(t, Attention{Mask: MaskCausalTopLeft, Softcap: 1.5})
	plain := checkModifiers(t, Attention{Mask: MaskCausalTopLeft})
	diff := 0.0
	for i := range capped {
		diff = math.Max(diff, math.Abs(float64(capped[i]-plain[i])))
	}
	if diff < 1e-3 {
		t.Fatalf("softcap changed nothing (%g)", diff)
	}
}

func TestAlibiMatchesReference(t *testing.T) {
	checkModifiers(t, Attention{AlibiSlopes: testSlopes})
	checkModifiers(t, Attention{Mask: MaskCausalBottomRight, AlibiSlopes: testSlopes})
}

func TestSinksMatchReference(t *testing.T) {
	checkModifiers(t, Attention{Sinks: testSinks})
	checkModifiers(t, Attention{Mask: MaskCausalBottomRight, Softcap: 3, Sinks: testSinks,
		AlibiSlopes: []float32{0.1, 0.1, 0.1, 0.1}})
}

const pkH, pkHK, pkD = 4, 2, 8

var pkQLens, pkKVLens = []int{3, 1, 4}, []int{5, 2, 4}

func offsets(lens []int) []int32 {
	cu := []int32{0}
	for _, n := range lens {
		cu = append(cu, cu[len(cu)-1]+int32(n))
	}
	return cu
}

// one is rows cu[s] .. cu[s+1]-1 of a token-major [total, heads, d] tensor as
// a contiguous [1, heads, len, d] one.
func one(x []float32, cu []int32, s, heads int) []float32 {
	start, n := int(cu[s]), int(cu[s+1]-cu[s])
	y := make([]float32, 0, n*heads*pkD)
	for hi := 0; hi < heads; hi++ {
		for i := 0; i < n; i++ {
			y = append(y, x[((start+i)*heads+hi)*pkD:][:pkD]...)
		}
	}
	return y
}

// headMajor is [total, heads, d] as [heads, total, d].
func headMajor(x []float32, heads int) []float32 {
	return one(x, []int32{0, int32(len(x) / (heads * pkD))}, 0, heads)
}

func packedAttention(cuQ, cuK []int32) Attention {
	return Attention{Batch: len(pkQLens), NumHeads: pkH, NumKVHeads: pkHK, QLen: 4, KVLen: 5,
		HeadDim: pkD, Mask: MaskCausalBottomRight, Softcap: 4, AlibiSlopes: testSlopes,
		Sinks: testSinks, CuSeqlensQ: cuQ, CuSeqlensK: cuK, TokenMajor: true}
}

func TestPackedBatchMatchesEachSequence(t *testing.T) {
	cuQ, cuK := offsets(pkQLens), offsets(pkKVLens)
	tq, tk := int(cuQ[3]), int(cuK[3])
	q, k, v := data(tq*pkH*pkD, 21), data(tk*pkHK*pkD, 22), data(tk*pkHK*pkD, 23)
	att := packedAttention(cuQ, cuK)
	out, lse := make([]float32, tq*pkH*pkD), make([]float32, pkH*tq)
	if err := att.Run(q, k, v, out, lse); err != nil {
		t.Fatal(err)
	}
	for s := range pkQLens {
		n, m := pkQLens[s], pkKVLens[s]
		a := att
		a.Batch, a.QLen, a.KVLen, a.CuSeqlensQ, a.CuSeqlensK = 1, n, m, nil, nil
		o, l := make([]float32, pkH*n*pkD), make([]float32, pkH*n)
		if err := a.Run(one(q, cuQ, s, pkH), one(k, cuK, s, pkHK), one(v, cuK, s, pkHK), o, l); err != nil {
			t.Fatal(err)
		}
		for hi := 0; hi < pkH; hi++ {
			for i := 0; i < n; i++ {
				row := int(cuQ[s]) + i
				if g, w := lse[hi*tq+row], l[hi*n+i]; math.Abs(float64(g-w)) > 1e-6 {
					t.Fatalf("lse seq %d head %d row %d: %g, want %g", s, hi, i, g, w)
				}
				for c := 0; c < pkD; c++ {
					if g, w := out[(row*pkH+hi)*pkD+c], o[(hi*n+i)*pkD+c]; math.Abs(float64(g-w)) > 1e-6 {
						t.Fatalf("seq %d head %d row %d [%d]: %g, want %g", s, hi, i, c, g, w)
					}
				}
			}
		}
	}
	// The same batch head-major, [heads, total, d].
	hm := att
	hm.TokenMajor = false
	outH, lseH := make([]float32, tq*pkH*pkD), make([]float32, pkH*tq)
	if err := hm.Run(headMajor(q, pkH), headMajor(k, pkHK), headMajor(v, pkHK), outH, lseH); err != nil {
		t.Fatal(err)
	}
	want := make([]float64, len(out))
	for i, x := range headMajor(out, pkH) {
		want[i] = float64(x)
	}
	assertClose(t, "head-major out", outH, want, 1e-6)
	wantLSE := make([]float64, len(lse))
	for i, x := range lse {
		wantLSE[i] = float64(x)
	}
	assertClose(t, "head-major lse", lseH, wantLSE, 1e-6)
}

func TestPackedBatchErrors(t *testing.T) {
	cuQ, cuK := offsets(pkQLens), offsets(pkKVLens)
	tq, tk := int(cuQ[3]), int(cuK[3])
	q, k, v := data(tq*pkH*pkD, 31), data(tk*pkHK*pkD, 32), data(tk*pkHK*pkD, 33)
	out := make([]float32, tq*pkH*pkD)
	for _, c := range []struct {
		name  string
		att   Attention
		out   []float32
		paged *Paged
		want  error
	}{
		// Offsets for another batch size, or too short an out: refused here.
		{"short offsets", packedAttention(cuQ[:3], cuK), out, nil, ErrBadShape},
		{"short out", packedAttention(cuQ, cuK), out[1:], nil, ErrBadShape},
		{"short sinks", func() Attention { a := packedAttention(cuQ, cuK); a.Sinks = testSinks[1:]; return a }(),
			out, nil, ErrBadShape},
		// Decreasing offsets, packed keys from a block table: the library's call.
		{"decreasing offsets", packedAttention([]int32{0, 4, 3, int32(tq)}, cuK), out, nil, ErrBadArgument},
		{"packed keys with a block table", packedAttention(cuQ, cuK), out,
			&Paged{BlockTable: []int32{0, 0, 0}, BlockTableStride: 1, PageSize: 8, NumPages: 1}, ErrBadArgument},
	} {
		err := c.att.RunKV(q, F32Elems(k), F32Elems(v), c.paged, c.out, nil)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}
