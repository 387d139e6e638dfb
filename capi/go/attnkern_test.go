package attnkern

// PKG_CONFIG_PATH=<prefix>/lib/pkgconfig LD_LIBRARY_PATH=<prefix>/lib go test ./...
// AK_LAYOUT_PROBE, when set, names the abi_layout program built from
// capi/examples/c/abi_layout.c; the layout test compares with its output.

import (
	"errors"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// data returns n deterministic values in [-1, 1).
func data(n int, seed uint64) []float32 {
	s := seed*6364136223846793005 + 1442695040888963407
	out := make([]float32, n)
	for i := range out {
		s = s*6364136223846793005 + 1442695040888963407
		out[i] = float32(s>>40)/float32(1<<24)*2 - 1
	}
	return out
}

func checkGemm(t *testing.T, m, n, k int, ta, tb Transpose) {
	t.Helper()
	ar, ac, br, bc := m, k, k, n
	if ta == Trans {
		ar, ac = k, m
	}
	if tb == Trans {
		br, bc = n, k
	}
	lda, ldb, ldc := ac+3, bc+1, n+2 // padded, to exercise the leading dimensions
	a, b := data(ar*lda, 1), data(br*ldb, 2)
	c := make([]float32, m*ldc)
	for i := range c {
		c[i] = float32(math.NaN()) // beta = 0 ignores C's contents
	}
	if err := Sgemm(ta, tb, m, n, k, 1, a, lda, b, ldb, 0, c, ldc); err != nil {
		t.Fatalf("Sgemm(%d, %d, %d): %v", m, n, k, err)
	}
	tol := 1e-6 * math.Sqrt(float64(k+1)) * float64(k+1)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			want := 0.0
			for p := 0; p < k; p++ {
				ai, bi := i*lda+p, p*ldb+j
				if ta == Trans {
					ai = p*lda + i
				}
				if tb == Trans {
					bi = j*ldb + p
				}
				x, y := a[ai], b[bi]
				want += float64(x) * float64(y)
			}
			if got := float64(c[i*ldc+j]); math.Abs(got-want) > tol {
				t.Fatalf("m=%d n=%d k=%d ta=%d tb=%d (%d,%d): %g, want %g", m, n, k, ta, tb, i, j, got, want)
			}
		}
		for j := n; j < ldc; j++ {
			if !math.IsNaN(float64(c[i*ldc+j])) {
				t.Fatalf("padding of c written at (%d,%d)", i, j)
			}
		}
	}
}

func TestVersion(t *testing.T) {
	if LibraryABIVersion() != ABIVersion {
		t.Fatalf("library ABI %d, package ABI %d", LibraryABIVersion(), ABIVersion)
	}
	if parts := strings.Split(Version(), "."); len(parts) != 3 {
		t.Fatalf("version %q", Version())
	}
}

func TestSgemmMatchesNaiveLoop(t *testing.T) {
	for _, s := range [][3]int{{1, 1, 1}, {3, 17, 5}, {64, 65, 63}, {33, 129, 70}, {0, 3, 2}, {2, 0, 3}} {
		for _, ta := range []Transpose{NoTrans, Trans} {
			for _, tb := range []Transpose{NoTrans, Trans} {
				checkGemm(t, s[0], s[1], s[2], ta, tb)
			}
		}
	}
}

func TestSoftmaxRowsSumToOne(t *testing.T) {
	rows, cols, ld := 9, 67, 70
	x := data(rows*ld, 3)
	for i := range x {
		x[i] *= 30
	}
	y := make([]float32, rows*cols)
	if err := Softmax(rows, cols, x, ld, y, cols); err != nil {
		t.Fatal(err)
	}
	for r := 0; r < rows; r++ {
		xr, yr := x[r*ld:r*ld+cols], y[r*cols:(r+1)*cols]
		mx := math.Inf(-1)
		for _, v := range xr {
			mx = math.Max(mx, float64(v))
		}
		z, sum := 0.0, 0.0
		for _, v := range xr {
			z += math.Exp(float64(v) - mx)
		}
		for j, v := range yr {
			sum += float64(v)
			want := math.Exp(float64(xr[j])-mx) / z
			if math.Abs(float64(v)-want) > 2e-6*want+1e-7 {
				t.Fatalf("(%d,%d): %g, want %g", r, j, v, want)
			}
		}
		if math.Abs(sum-1) > 1e-5 {
			t.Fatalf("row %d sums to %g", r, sum)
		}
	}
	// In place, and log-softmax.
	z := append([]float32(nil), x...)
	if err := Softmax(rows, cols, z, ld, z, ld); err != nil {
		t.Fatal(err)
	}
	l := make([]float32, rows*cols)
	if err := LogSoftmax(rows, cols, x, ld, l, cols); err != nil {
		t.Fatal(err)
	}
	for r := 0; r < rows; r++ {
		for j := 0; j < cols; j++ {
			if z[r*ld+j] != y[r*cols+j] || math.Abs(math.Exp(float64(l[r*cols+j]))-float64(y[r*cols+j])) > 1e-6 {
				t.Fatalf("(%d,%d): in place %g / log %g vs %g", r, j, z[r*ld+j], l[r*cols+j], y[r*cols+j])
			}
		}
		for j := cols; j < ld; j++ {
			if z[r*ld+j] != x[r*ld+j] {
				t.Fatalf("entry (%d,%d) past cols was written", r, j)
			}
		}
	}
}

func TestErrors(t *testing.T) {
	a, b := data(6, 1), data(6, 2)
	c := []float32{-7, -7, -7, -7}
	// lda = 2 < k = 3: the library rejects it and writes nothing.
	err := Sgemm(NoTrans, NoTrans, 2, 2, 3, 1, a, 2, b, 2, 0, c, 2)
	var e *Error
	if !errors.As(err, &e) || e.Status != ErrBadStride || !strings.Contains(e.Message, "lda") {
		t.Fatalf("got %v", err)
	}
	if !errors.Is(err, ErrBadStride) || !strings.Contains(err.Error(), "AK_ERR_BAD_STRIDE") {
		t.Fatalf("got %v", err)
	}
	for _, v := range c {
		if v != -7 {
			t.Fatal("a failed call wrote its output")
		}
	}
	// A slice too short is caught before the call.
	if err := Softmax(2, 3, a[:5], 3, c, 3); !errors.Is(err, ErrBadShape) {
		t.Fatalf("short slice: %v", err)
	}
	if err := rawSoftmaxNull(2, 3); !errors.Is(err, ErrNullPointer) {
		t.Fatalf("NULL: %v", err)
	}
	if err := rawSoftmaxNull(0, 3); err != nil {
		t.Fatalf("empty is not an error: %v", err)
	}
	if err := SetISA("mmx"); !errors.Is(err, ErrBadArgument) || !strings.Contains(err.Error(), "mmx") {
		t.Fatalf("SetISA(mmx): %v", err)
	}
	if err := SetNumThreads(-1); !errors.Is(err, ErrBadArgument) {
		t.Fatalf("SetNumThreads(-1): %v", err)
	}
}

func TestOverlappingOutputIsRefused(t *testing.T) {
	a := make([]float32, 64)
	for i := range a {
		a[i] = float32(i%7) - 3
	}
	b := append(append([]float32(nil), a...), a...)
	if err := Sgemm(NoTrans, NoTrans, 8, 8, 8, 1, a, 8, b, 8, 0, a, 8); !errors.Is(err, ErrBadArgument) {
		t.Errorf("Sgemm with c == a: %v", err)
	}
	if err := Sgemm(NoTrans, NoTrans, 8, 8, 8, 1, a, 8, b[:64], 8, 0, b[60:], 8); !errors.Is(err, ErrBadArgument) {
		t.Errorf("Sgemm with c inside b: %v", err)
	}
	buf := make([]float32, 72)
	if err := Softmax(8, 8, buf[:64], 8, buf[8:], 8); !errors.Is(err, ErrBadArgument) {
		t.Errorf("Softmax with y one row past x: %v", err)
	}
	if err := Softmax(8, 8, buf[:64], 8, buf[:64], 8); err != nil {
		t.Errorf("Softmax in place: %v", err)
	}
	att := Attention{Batch: 1, NumHeads: 1, QLen: 4, KVLen: 4, HeadDim: 8}
	q, k, v := make([]float32, 32), make([]float32, 32), make([]float32, 32)
	if err := att.Run(q, k, v, q, nil); !errors.Is(err, ErrBadArgument) {
		t.Errorf("Attention with out == q: %v", err)
	}
	if err := att.Run(q, k, v, make([]float32, 32), v[:4]); !errors.Is(err, ErrBadArgument) {
		t.Errorf("Attention with lse inside v: %v", err)
	}
}

func TestListingISAsChangesNothing(t *testing.T) {
	if err := SetISA("scalar"); err != nil {
		t.Fatal(err)
	}
	defer SetISA("")
	isas, err := AvailableISAs()
	if err != nil || len(isas) == 0 {
		t.Fatalf("AvailableISAs: %v, %v", isas, err)
	}
	if ISA() != "scalar" {
		t.Fatalf("AvailableISAs changed the instruction set to %q", ISA())
	}
	if !ISASupported("scalar") || ISASupported("mmx") {
		t.Fatalf("ISASupported: scalar %v, mmx %v", ISASupported("scalar"), ISASupported("mmx"))
	}
}

func TestEveryAvailableISA(t *testing.T) {
	isas, err := AvailableISAs()
	if err != nil || len(isas) == 0 {
		t.Fatalf("AvailableISAs: %v, %v", isas, err)
	}
	defer SetISA("")
	if auto := ISA(); !strings.Contains(" "+strings.Join(isas, " ")+" ", " "+auto+" ") {
		t.Errorf("auto picked %q, which is not among %v", auto, isas)
	}
	for _, name := range isas {
		if err := SetISA(name); err != nil {
			t.Fatal(err)
		}
		if ISA() != name {
			t.Fatalf("SetISA(%q) then ISA() = %q", name, ISA())
		}
		checkGemm(t, 37, 21, 45, NoTrans, Trans)
	}
	have := " " + strings.Join(isas, " ") + " "
	for _, name := range ISAs {
		if !strings.Contains(have, " "+name+" ") {
			if err := SetISA(name); !errors.Is(err, ErrUnsupported) {
				t.Fatalf("SetISA(%q) on a CPU without it: %v", name, err)
			}
		}
	}
	if err := SetNumThreads(3); err != nil || NumThreads() != 3 {
		t.Fatalf("SetNumThreads(3): %v, NumThreads() = %d", err, NumThreads())
	}
	inside := -1
	if err := WithThreadsLocal(1, func() { inside = NumThreads() }); err != nil || inside != 1 {
		t.Fatalf("WithThreadsLocal(1): %v, NumThreads() inside = %d", err, inside)
	}
	ReleaseScratch()
	if NumThreads() != 3 {
		t.Fatalf("after WithThreadsLocal(1): NumThreads() = %d, want 3 again", NumThreads())
	}
	if err := WithThreadsLocal(-1, func() { t.Fatal("f ran after a bad count") }); !errors.Is(err, ErrBadArgument) {
		t.Fatalf("WithThreadsLocal(-1): %v", err)
	}
	SetNumThreads(0)
}

func TestDescLayoutMatchesC(t *testing.T) {
	size, offsets, initSize := descLayout()
	if uintptr(initSize) != size {
		t.Fatalf("ak_attention_desc_init set struct_size %d; cgo's sizeof is %d", initSize, size)
	}
	probe := os.Getenv("AK_LAYOUT_PROBE")
	if probe == "" {
		t.Skip("AK_LAYOUT_PROBE (the abi_layout program) is not set")
	}
	out, err := exec.Command(probe).Output()
	if err != nil {
		t.Fatal(err)
	}
	c := map[string]uintptr{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		v, _ := strconv.Atoi(f[1])
		c[f[0]] = uintptr(v)
	}
	if size != c["sizeof.ak_attention_desc"] {
		t.Errorf("sizeof: cgo %d, C %d", size, c["sizeof.ak_attention_desc"])
	}
	for name, off := range offsets {
		if want, ok := c["offsetof.ak_attention_desc."+name]; !ok || off != want {
			t.Errorf("%s at %d; C has it at %d", name, off, want)
		}
	}
	if statusSize() != c["sizeof.ak_status"] || c["sizeof.ak_dtype"] != 4 || c["sizeof.ak_rope_style"] != 4 {
		t.Errorf("sizeof(ak_status): cgo %d, C %d; sizeof(ak_dtype) %d, sizeof(ak_rope_style) %d",
			statusSize(), c["sizeof.ak_status"], c["sizeof.ak_dtype"], c["sizeof.ak_rope_style"])
	}
	if descSize01() != c["value.AK_ATTENTION_DESC_SIZE_0_1"] || descSize01() != offsets["k_type"] {
		t.Errorf("AK_ATTENTION_DESC_SIZE_0_1: cgo %d, C %d, k_type at %d", descSize01(),
			c["value.AK_ATTENTION_DESC_SIZE_0_1"], offsets["k_type"])
	}
}

func TestDescLayoutLP64(t *testing.T) {
	size, offsets, _ := descLayout()
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("not LP64")
	}
	if size != 368 || descSize01() != 240 {
		t.Errorf("sizeof %d and AK_ATTENTION_DESC_SIZE_0_1 %d; LP64 has 368 and 240", size, descSize01())
	}
	want := map[string]uintptr{"probs": 232, "k_type": 240, "v_type": 244, "softcap": 248,
		"alibi_slopes": 256, "sinks": 264, "block_table": 272, "block_table_stride": 280,
		"page_size": 288, "num_pages": 296, "k_page_strides": 304, "v_page_strides": 328,
		"cu_seqlens_q": 352, "cu_seqlens_k": 360}
	for name, off := range want {
		if offsets[name] != off {
			t.Errorf("%s at %d; the LP64 ABI has it at %d", name, offsets[name], off)
		}
	}
	// A fresh descriptor's 0.2 fields: fp32, no modifiers, not paged.
	for i, v := range descDefaults() {
		if v != 0 {
			t.Errorf("0.2 default %d is %d, want 0", i, v)
		}
	}
}

func TestAttentionIfImplemented(t *testing.T) {
	att := Attention{Batch: 2, NumHeads: 4, NumKVHeads: 2, QLen: 5, KVLen: 7, HeadDim: 8,
		Mask: MaskCausalBottomRight}
	b, h, hk, ql, kl, d := 2, 4, 2, 5, 7, 8
	q, k, v := data(b*h*ql*d, 4), data(b*hk*kl*d, 5), data(b*hk*kl*d, 6)
	out, lse := make([]float32, b*h*ql*d), make([]float32, b*h*ql)
	if err := att.Run(q[1:], k, v, out, nil); !errors.Is(err, ErrBadShape) {
		t.Fatalf("short q: %v", err)
	}
	if err := att.Run(q, k, v, out, lse); errors.Is(err, ErrUnsupported) {
		t.Skipf("ak_attention: %v", err)
	} else if err != nil {
		t.Fatal(err)
	}
	scale := 1 / math.Sqrt(float64(d))
	for bi := 0; bi < b; bi++ {
		for hi := 0; hi < h; hi++ {
			kh := hi / (h / hk)
			for i := 0; i < ql; i++ {
				visible := i + kl - ql + 1
				s := make([]float64, visible)
				mx := math.Inf(-1)
				for j := range s {
					for c := 0; c < d; c++ {
						s[j] += float64(q[((bi*h+hi)*ql+i)*d+c]) * float64(k[((bi*hk+kh)*kl+j)*d+c])
					}
					s[j] *= scale
					mx = math.Max(mx, s[j])
				}
				z := 0.0
				for _, x := range s {
					z += math.Exp(x - mx)
				}
				if got := float64(lse[(bi*h+hi)*ql+i]); math.Abs(got-(mx+math.Log(z))) > 1e-5 {
					t.Fatalf("lse (%d,%d,%d): %g, want %g", bi, hi, i, got, mx+math.Log(z))
				}
				for c := 0; c < d; c++ {
					want := 0.0
					for j, x := range s {
						want += math.Exp(x-mx) / z * float64(v[((bi*hk+kh)*kl+j)*d+c])
					}
					if got := float64(out[((bi*h+hi)*ql+i)*d+c]); math.Abs(got-want) > 1e-5 {
						t.Fatalf("(%d,%d,%d,%d): %g, want %g", bi, hi, i, c, got, want)
					}
				}
			}
		}
	}
}
