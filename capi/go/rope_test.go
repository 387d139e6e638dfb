package attnkern

// Rotary and token embeddings against references written here (float64).
// They skip, saying so, where the library lacks ak_rope or ak_embedding.

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// rotateRow is one head row rotated in float64 at position by invFreq.
func rotateRow(row []float32, position int32, invFreq []float32, style RopeStyle) []float64 {
	out := make([]float64, len(row))
	for i, v := range row {
		out[i] = float64(v)
	}
	half := len(invFreq)
	for i, f := range invFreq {
		a, b := i, i+half
		if style == RopeInterleaved {
			a, b = 2*i, 2*i+1
		}
		angle := float64(position) * float64(f)
		xa, xb := float64(row[a]), float64(row[b])
		out[a] = xa*math.Cos(angle) - xb*math.Sin(angle)
		out[b] = xa*math.Sin(angle) + xb*math.Cos(angle)
	}
	return out
}

func TestRopeFusedQKV(t *testing.T) {
	if !hasRope() {
		t.Skip("the library has no ak_rope")
	}
	batch, seq, heads, d := 2, 3, 2, 8
	row := 3 * heads * d // [q | k | v] per token
	before := make([]float32, batch*seq*row)
	for i := range before {
		before[i] = float32(math.Sin(float64(i)*0.37)) * 2
	}
	positions := []int32{0, 5, 1 << 20, -4, 7, 100}
	invFreq := make([]float32, d/2)
	for i := range invFreq {
		invFreq[i] = float32(math.Pow(10000, -2*float64(i)/float64(d)))
	}
	for _, style := range []RopeStyle{RopeNeox, RopeInterleaved} {
		qkv := append([]float32(nil), before...)
		l := RopeLayout{Batch: batch, SeqLen: seq, NumHeads: heads, HeadDim: d,
			Strides: &[3]int{seq * row, row, d}}
		for part := 0; part < 2; part++ {
			if err := Rope(qkv[part*heads*d:], l, 0, style, positions, 10000, nil); err != nil {
				t.Fatal(err)
			}
		}
		for tok := 0; tok < batch*seq; tok++ {
			for h := 0; h < 2*heads; h++ {
				at := tok*row + h*d
				want := rotateRow(before[at:at+d], positions[tok], invFreq, style)
				for e := 0; e < d; e++ {
					if math.Abs(float64(qkv[at+e])-want[e]) > 1e-5 {
						t.Fatalf("style %d token %d head %d entry %d: %g, want %g", style, tok, h, e, qkv[at+e], want[e])
					}
				}
			}
			for e := 2 * heads * d; e < row; e++ {
				if qkv[tok*row+e] != before[tok*row+e] {
					t.Fatalf("v changed at token %d entry %d", tok, e)
				}
			}
		}
	}
	x := make([]float32, 8)
	err := Rope(x, RopeLayout{Batch: 1, SeqLen: 1, NumHeads: 1, HeadDim: 8}, 3, RopeNeox, nil, 1e4, nil)
	if !errors.Is(err, ErrBadShape) || !strings.Contains(err.Error(), "rotary_dim = 3") {
		t.Fatalf("odd rotary_dim: %v", err)
	}
}

func TestEmbedding(t *testing.T) {
	if !hasEmbedding() {
		t.Skip("the library has no ak_embedding")
	}
	vocab, dim, ldOut := 5, 6, 8
	table := make([]float32, vocab*dim)
	for i := range table {
		table[i] = float32(i) + 0.5
	}
	ids := []int32{4, -1, 0}
	out := make([]float32, len(ids)*ldOut)
	for i := range out {
		out[i] = 9
	}
	if err := Embedding(ids, table, vocab, dim, dim, out, ldOut); err != nil {
		t.Fatal(err)
	}
	for tok, id := range ids {
		for e := 0; e < ldOut; e++ {
			want := float32(9)
			if e < dim && id < 0 {
				want = 0
			} else if e < dim {
				want = table[int(id)*dim+e]
			}
			if out[tok*ldOut+e] != want {
				t.Fatalf("token %d entry %d: %g, want %g", tok, e, out[tok*ldOut+e], want)
			}
		}
	}
	untouched := []float32{9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9}
	err := Embedding([]int32{1, 5}, table, vocab, dim, dim, untouched, dim)
	if !errors.Is(err, ErrBadArgument) || !strings.Contains(err.Error(), "ids[1] = 5") {
		t.Fatalf("id past the vocabulary: %v", err)
	}
	for _, v := range untouched {
		if v != 9 {
			t.Fatal("a refused lookup wrote")
		}
	}
}
