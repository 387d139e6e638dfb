package attnkern

/*
#include "attnkern.h"

// Referenced weakly, like ak_convert in kv.go: a library that predates these
// two still links and loads, and they report ErrUnsupported there.
#pragma weak ak_rope
#pragma weak ak_embedding

static int go_ak_has_rope(void) { return ak_rope != NULL; }
static int go_ak_has_embedding(void) { return ak_embedding != NULL; }
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// RopeStyle says which entries of a row Rope rotates together (ak_rope_style).
type RopeStyle int32

const (
	RopeNeox        RopeStyle = C.AK_ROPE_NEOX        // (i, i + rotaryDim/2): GPT-NeoX, Llama in HF layout
	RopeInterleaved RopeStyle = C.AK_ROPE_INTERLEAVED // (2i, 2i + 1): GPT-J, Meta's Llama layout
)

// RopeLayout is where x's [Batch, SeqLen, NumHeads, HeadDim] rows lie:
// Strides are the [batch, seq, head] distances in elements (nil: contiguous);
// the HeadDim axis is contiguous.
type RopeLayout struct {
	Batch, SeqLen, NumHeads, HeadDim int
	Strides                          *[3]int
}

// Rope rotates x in place (ak_rope): in each row the first rotaryDim entries
// (0: all of HeadDim), in pairs of style, by positions[b*SeqLen+s] *
// invFreq[i]. positions nil means s; invFreq nil means theta^(-2i/rotaryDim).
func Rope(x []float32, l RopeLayout, rotaryDim int, style RopeStyle, positions []int32,
	theta float32, invFreq []float32) error {
	const fn = "ak_rope"
	st := [3]int{l.SeqLen * l.NumHeads * l.HeadDim, l.NumHeads * l.HeadDim, l.HeadDim}
	if l.Strides != nil && *l.Strides != [3]int{} { // all zero: contiguous, as nil
		st = *l.Strides
	}
	if l.Batch > 0 && l.SeqLen > 0 && l.NumHeads > 0 && l.HeadDim > 0 &&
		st[0] >= 0 && st[1] >= 0 && st[2] >= 0 {
		need := (l.Batch-1)*st[0] + (l.SeqLen-1)*st[1] + (l.NumHeads-1)*st[2] + l.HeadDim
		if len(x) < need {
			return shapeError("%s: x has %d elements; %+v needs %d", fn, len(x), l, need)
		}
	}
	if positions != nil && len(positions) != l.Batch*l.SeqLen {
		return shapeError("%s: %d positions for %d x %d tokens", fn, len(positions), l.Batch, l.SeqLen)
	}
	if invFreq != nil {
		half := rotaryDim / 2
		if rotaryDim == 0 {
			half = l.HeadDim / 2
		}
		if len(invFreq) < half {
			return shapeError("%s: invFreq has %d entries; %d are needed", fn, len(invFreq), half)
		}
	}
	if C.go_ak_has_rope() == 0 {
		return &Error{Status: ErrUnsupported, Message: fn + ": the loaded libattnkern predates it"}
	}
	cst := [3]C.int64_t{C.int64_t(st[0]), C.int64_t(st[1]), C.int64_t(st[2])}
	var cpos *C.int32_t
	if len(positions) > 0 {
		cpos = (*C.int32_t)(unsafe.Pointer(&positions[0]))
	}
	return call(func() C.ak_status {
		return C.ak_rope(C.int64_t(l.Batch), C.int64_t(l.SeqLen), C.int64_t(l.NumHeads),
			C.int64_t(l.HeadDim), C.int64_t(rotaryDim), C.ak_rope_style(style), cpos,
			C.float(theta), ptr(invFreq), ptr(x), &cst[0])
	})
}

// Embedding sets out[t] = table[ids[t]] (ak_embedding): rows of dim from a
// [vocabSize, dim] table with leading dimension ldTable into out (leading
// dimension ldOut). A negative id gives a zero row; an id >= vocabSize is
// ErrBadArgument and nothing is written.
func Embedding(ids []int32, table []float32, vocabSize, dim, ldTable int, out []float32, ldOut int) error {
	const fn = "ak_embedding"
	if err := checkLen(fn, "table", len(table), vocabSize, dim, ldTable); err != nil {
		return err
	}
	if err := checkLen(fn, "out", len(out), len(ids), dim, ldOut); err != nil {
		return err
	}
	if overlaps(out, table) {
		return overlapError(fn, "out", "table")
	}
	if C.go_ak_has_embedding() == 0 {
		return &Error{Status: ErrUnsupported, Message: fmt.Sprintf("%s: the loaded libattnkern predates it", fn)}
	}
	var cids *C.int32_t
	if len(ids) > 0 {
		cids = (*C.int32_t)(unsafe.Pointer(&ids[0]))
	}
	return call(func() C.ak_status {
		return C.ak_embedding(C.int64_t(len(ids)), cids, C.int64_t(vocabSize), C.int64_t(dim),
			ptr(table), C.int64_t(ldTable), ptr(out), C.int64_t(ldOut))
	})
}

// hasRope and hasEmbedding tell the tests whether the library loaded has them.
func hasRope() bool      { return C.go_ak_has_rope() != 0 }
func hasEmbedding() bool { return C.go_ak_has_embedding() != 0 }
