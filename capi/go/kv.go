package attnkern

/*
#include "attnkern.h"

// ak_convert and ak_kv_cache_store came in 0.2 under ABI version 1, which a
// 0.1 library speaks too. Referenced weakly, they resolve to NULL there
// instead of failing the link (or the load): the rest of the package keeps
// working, and these two report ErrUnsupported.
#pragma weak ak_convert
#pragma weak ak_kv_cache_store

static int go_ak_has_convert(void) { return ak_convert != NULL; }
static int go_ak_has_kv_cache_store(void) { return ak_kv_cache_store != NULL; }
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// DType is the storage type of a K/V cache (ak_dtype). q, out and every
// accumulation stay fp32.
type DType int32

const (
	F32  DType = C.AK_F32
	F16  DType = C.AK_F16  // IEEE binary16, as uint16 bit patterns
	BF16 DType = C.AK_BF16 // bfloat16 (the top half of an fp32), as uint16 bit patterns
)

// Elems is values in one storage type: F32 values in F32s, F16 and BF16 bit
// patterns in Bits (the two share uint16, so Type says which).
type Elems struct {
	Type DType
	F32s []float32
	Bits []uint16
}

// F32Elems is x as F32 values.
func F32Elems(x []float32) Elems { return Elems{Type: F32, F32s: x} }

// HalfElems is bits as F16 or BF16 values.
func HalfElems(t DType, bits []uint16) Elems { return Elems{Type: t, Bits: bits} }

// Len is the number of values.
func (e Elems) Len() int {
	if e.Type == F32 {
		return len(e.F32s)
	}
	return len(e.Bits)
}

func (e Elems) check(fn, name string) error {
	ok := (e.Type == F32 && e.Bits == nil) || ((e.Type == F16 || e.Type == BF16) && e.F32s == nil)
	if !ok {
		return &Error{Status: ErrBadArgument, Message: fmt.Sprintf(
			"%s: %s has type %d with F32s %d and Bits %d long: F32 values go in F32s, F16 and BF16 bits in Bits",
			fn, name, e.Type, len(e.F32s), len(e.Bits))}
	}
	return nil
}

func (e Elems) ptr() unsafe.Pointer {
	if e.Len() == 0 {
		return nil
	}
	if e.Type == F32 {
		return unsafe.Pointer(&e.F32s[0])
	}
	return unsafe.Pointer(&e.Bits[0])
}

// bytes is the address range e occupies.
func (e Elems) bytes() (uintptr, uintptr) {
	size := uintptr(2)
	if e.Type == F32 {
		size = 4
	}
	p := uintptr(e.ptr())
	return p, p + uintptr(e.Len())*size
}

// overlaps reports whether a and b share a byte. The C API does not detect an
// output that overlaps an input, and would compute garbage.
func (e Elems) overlaps(o Elems) bool {
	if e.Len() == 0 || o.Len() == 0 {
		return false
	}
	a0, a1 := e.bytes()
	b0, b1 := o.bytes()
	return a0 < b1 && b0 < a1
}

func missing(fn string) error {
	return &Error{Status: ErrUnsupported, Message: fn + ": the loaded libattnkern predates 0.2"}
}

// Convert sets dst[i] = src[i] converted (ak_convert): narrowing rounds to
// nearest, ties to even, widening is exact. The lengths must be equal. dst
// may be src itself when both types have the same size (f16 <-> bf16 in
// place); any other overlap is refused.
func Convert(dst, src Elems) error {
	const fn = "ak_convert"
	if err := dst.check(fn, "dst"); err != nil {
		return err
	}
	if err := src.check(fn, "src"); err != nil {
		return err
	}
	if dst.Len() != src.Len() {
		return shapeError("%s: dst has %d elements, src %d", fn, dst.Len(), src.Len())
	}
	sameSize := (dst.Type == F32) == (src.Type == F32)
	if dst.overlaps(src) && !(sameSize && dst.ptr() == src.ptr()) {
		return overlapError(fn, "dst", "src")
	}
	if C.go_ak_has_convert() == 0 {
		return missing(fn)
	}
	return call(func() C.ak_status {
		return C.ak_convert(C.ak_dtype(dst.Type), dst.ptr(), C.ak_dtype(src.Type), src.ptr(),
			C.int64_t(src.Len()))
	})
}

// PoolLayout is the layout of a K/V pool: NumPages pages of [NumKVHeads,
// PageSize, HeadDim] with [page, head, slot] strides in elements (all 0 =
// contiguous). A contiguous [NumKVHeads, max_len, HeadDim] cache is one page
// of PageSize max_len.
type PoolLayout struct {
	NumPages, NumKVHeads, PageSize, HeadDim int
	PageStrides                             [3]int
}

// elements is how many values a slice needs to hold the pool.
func (l PoolLayout) elements(fn string) (int, error) {
	ext := [3]int{l.NumPages, l.NumKVHeads, l.PageSize}
	for _, n := range append(ext[:], l.HeadDim) {
		if n <= 0 {
			return 0, nil // nothing to hold; negative sizes are the library's to report
		}
	}
	strides := l.PageStrides
	if strides == [3]int{} {
		strides = [3]int{l.NumKVHeads * l.PageSize * l.HeadDim, l.PageSize * l.HeadDim, l.HeadDim}
	}
	need := l.HeadDim
	for i, n := range ext {
		if strides[i] < 0 {
			return 0, nil
		}
		step := (n - 1) * strides[i]
		if strides[i] != 0 && step/strides[i] != n-1 || need+step < need {
			return 0, &Error{Status: ErrOverflow, Message: fmt.Sprintf("%s: the pool %+v overflows int", fn, l)}
		}
		need += step
	}
	return need, nil
}

// KVCacheStore writes new keys (or values) into a pool (ak_kv_cache_store):
// token t of src [len(slots), NumKVHeads, HeadDim] (fp32; [token, head]
// strides, nil = contiguous) goes to slot slots[t] = page*PageSize + offset
// of pool, rounded to its type, or nowhere for -1. A slot out of range or
// named twice is ErrBadArgument, and nothing is written.
func KVCacheStore(src []float32, srcStrides *[2]int, slots []int64, pool Elems, layout PoolLayout) error {
	const fn = "ak_kv_cache_store"
	if err := pool.check(fn, "pool"); err != nil {
		return err
	}
	n, hk, d := len(slots), layout.NumKVHeads, layout.HeadDim
	st := [2]int{hk * d, d}
	if srcStrides != nil {
		st = *srcStrides
	}
	if n > 0 && hk > 0 && d > 0 && st[0] >= 0 && st[1] >= 0 {
		if need := (n-1)*st[0] + (hk-1)*st[1] + d; len(src) < need {
			return shapeError("%s: src has %d elements; %d tokens need %d", fn, len(src), n, need)
		}
	}
	need, err := layout.elements(fn)
	if err != nil {
		return err
	}
	if pool.Len() < need {
		return shapeError("%s: pool has %d elements; %+v needs %d", fn, pool.Len(), layout, need)
	}
	if pool.overlaps(F32Elems(src)) {
		return overlapError(fn, "pool", "src")
	}
	if C.go_ak_has_kv_cache_store() == 0 {
		return missing(fn)
	}
	cst := [2]C.int64_t{C.int64_t(st[0]), C.int64_t(st[1])}
	var cps [3]C.int64_t
	for i, s := range layout.PageStrides {
		cps[i] = C.int64_t(s)
	}
	var cslots *C.int64_t
	if n > 0 {
		cslots = (*C.int64_t)(unsafe.Pointer(&slots[0]))
	}
	return call(func() C.ak_status {
		return C.ak_kv_cache_store(C.int64_t(n), C.int64_t(hk), C.int64_t(d), ptr(src), &cst[0],
			cslots, C.ak_dtype(pool.Type), pool.ptr(), C.int64_t(layout.NumPages),
			C.int64_t(layout.PageSize), &cps[0])
	})
}

// hasConvert and hasKVCacheStore tell the tests whether the library loaded
// has the 0.2 functions.
func hasConvert() bool      { return C.go_ak_has_convert() != 0 }
func hasKVCacheStore() bool { return C.go_ak_has_kv_cache_store() != 0 }
