package attnkern

import (
	"errors"
	"math"
	"testing"
)

func TestSoftmaxAxis(t *testing.T) {
	rows, cols := 4, 3
	x := data(rows*cols, 1)
	y := make([]float32, rows*cols)
	if err := SoftmaxAxis(1, rows, cols, x, y); err != nil {
		t.Fatal(err)
	}
	for c := 0; c < cols; c++ {
		m := math.Inf(-1)
		for r := 0; r < rows; r++ {
			m = math.Max(m, float64(x[r*cols+c]))
		}
		sum := 0.0
		for r := 0; r < rows; r++ {
			sum += math.Exp(float64(x[r*cols+c]) - m)
		}
		for r := 0; r < rows; r++ {
			want := math.Exp(float64(x[r*cols+c])-m) / sum
			if math.Abs(float64(y[r*cols+c])-want) > 1e-6 {
				t.Fatalf("[%d,%d] = %v, want %v", r, c, y[r*cols+c], want)
			}
		}
	}
	z := append([]float32(nil), x...)
	if err := SoftmaxAxis(1, rows, cols, z, z); err != nil {
		t.Fatal(err)
	}
	for i := range z {
		if z[i] != y[i] {
			t.Fatalf("in place differs at %d", i)
		}
	}
	if err := SoftmaxAxis(2, rows, cols, x, y); !errors.Is(err, ErrBadShape) {
		t.Fatalf("short x: %v", err)
	}
	if err := SoftmaxAxis(1, rows, cols-1, x[1:], x[:len(x)-3]); !errors.Is(err, ErrBadArgument) {
		t.Fatalf("overlap: %v", err)
	}
}

func TestSgemmStridedBatched(t *testing.T) {
	m, n, k, batch := 3, 5, 4, 3
	a, b := data(batch*m*k, 2), data(k*n, 3) // one b for every product
	c := make([]float32, batch*m*n)
	s := StridedBatch{Batch: batch, StrideA: m * k, StrideB: 0, StrideC: m * n}
	if err := SgemmStridedBatched(NoTrans, NoTrans, m, n, k, 1, a, k, b, n, 0, c, n, s); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < batch; i++ {
		for r := 0; r < m; r++ {
			for j := 0; j < n; j++ {
				want := 0.0
				for p := 0; p < k; p++ {
					want += float64(a[i*m*k+r*k+p]) * float64(b[p*n+j])
				}
				if math.Abs(float64(c[i*m*n+r*n+j])-want) > 1e-5 {
					t.Fatalf("c[%d][%d,%d] = %v, want %v", i, r, j, c[i*m*n+r*n+j], want)
				}
			}
		}
	}
	s.Batch++
	if err := SgemmStridedBatched(NoTrans, NoTrans, m, n, k, 1, a, k, b, n, 0, c, n, s); !errors.Is(err, ErrBadShape) {
		t.Fatalf("one batch too many: %v", err)
	}
}

func TestGetSgemmBlocking(t *testing.T) {
	b, err := GetSgemmBlocking()
	if err != nil {
		t.Fatal(err)
	}
	if b.MR <= 0 || b.NR <= 0 || b.MC <= 0 || b.KC <= 0 || b.NC <= 0 {
		t.Fatalf("%+v", b)
	}
}

func TestPositionEncoding(t *testing.T) {
	maxLen, dim, base := 6, 5, float32(100)
	pe := make([]float32, maxLen*dim)
	if err := PositionEncoding(maxLen, dim, base, pe); err != nil {
		t.Fatal(err)
	}
	for p := 0; p < maxLen; p++ {
		for i := 0; i < dim/2; i++ {
			angle := float64(p) / math.Pow(float64(base), float64(2*i)/float64(dim))
			if math.Abs(float64(pe[p*dim+2*i])-math.Sin(angle)) > 1e-6 ||
				math.Abs(float64(pe[p*dim+2*i+1])-math.Cos(angle)) > 1e-6 {
				t.Fatalf("row %d pair %d: %v %v", p, i, pe[p*dim+2*i], pe[p*dim+2*i+1])
			}
		}
		if pe[p*dim+dim-1] != 0 {
			t.Fatalf("an odd dim leaves the last column 0, got %v", pe[p*dim+dim-1])
		}
	}
	if err := PositionEncoding(maxLen, dim, float32(math.NaN()), pe); !errors.Is(err, ErrBadArgument) {
		t.Fatalf("NaN base: %v", err)
	}
}

func TestMHASelfAttention(t *testing.T) {
	n, dModel, heads, dK, dV := 5, 6, 2, 3, 4
	x := data(n*dModel, 4)
	wQ, wK, wV := data(heads*dModel*dK, 5), data(heads*dModel*dK, 6), data(heads*dModel*dV, 7)
	out := make([]float32, heads*n*dV)
	if err := MHASelfAttention(n, dModel, heads, dK, dV, x, wQ, wK, wV, MaskCausalTopLeft, out); err != nil {
		t.Fatal(err)
	}
	proj := func(w []float32, h, d int) []float64 {
		p := make([]float64, n*d)
		for tok := 0; tok < n; tok++ {
			for j := 0; j < d; j++ {
				for c := 0; c < dModel; c++ {
					p[tok*d+j] += float64(x[tok*dModel+c]) * float64(w[h*dModel*d+c*d+j])
				}
			}
		}
		return p
	}
	for h := 0; h < heads; h++ {
		q, k, v := proj(wQ, h, dK), proj(wK, h, dK), proj(wV, h, dV)
		for i := 0; i < n; i++ {
			s := make([]float64, i+1)
			m := math.Inf(-1)
			for j := 0; j <= i; j++ {
				for c := 0; c < dK; c++ {
					s[j] += q[i*dK+c] * k[j*dK+c]
				}
				s[j] /= math.Sqrt(float64(dK))
				m = math.Max(m, s[j])
			}
			sum := 0.0
			for j := range s {
				sum += math.Exp(s[j] - m)
			}
			for c := 0; c < dV; c++ {
				want := 0.0
				for j := range s {
					want += math.Exp(s[j]-m) / sum * v[j*dV+c]
				}
				if got := float64(out[h*n*dV+i*dV+c]); math.Abs(got-want) > 1e-5 {
					t.Fatalf("head %d [%d,%d] = %v, want %v", h, i, c, got, want)
				}
			}
		}
	}
	err := MHASelfAttention(n, dModel, heads, dK, dV, x[:n], wQ, wK, wV, MaskNone, out)
	if !errors.Is(err, ErrBadShape) {
		t.Fatalf("short x: %v", err)
	}
}
