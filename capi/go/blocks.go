package attnkern

// Softmax along a middle axis, batched products, the SGEMM blocking and the
// worked examples' building blocks (position encoding, multi-head
// self-attention with per-head weights).

/*
#include "attnkern.h"
*/
import "C"

import "fmt"

// needElems checks that n elements hold the product of dims.
func needElems(fn, name string, n int, dims ...int) error {
	need := 1
	for _, d := range dims {
		if d < 0 {
			return nil // negative sizes: the library says which and why
		}
		if d != 0 && need > int(^uint(0)>>1)/d {
			return &Error{Status: ErrOverflow, Message: fmt.Sprintf("%s: the size of %s overflows int", fn, name)}
		}
		need *= d
	}
	if n < need {
		return shapeError("%s: %s has %d elements, %d needed", fn, name, n, need)
	}
	return nil
}

// SoftmaxAxis writes the softmax along the middle axis of the contiguous
// [outer, axisLen, inner] tensor x into y (axis 0 of a rows x cols matrix:
// outer 1, inner cols). y may be x (in place), not overlap it otherwise.
func SoftmaxAxis(outer, axisLen, inner int, x, y []float32) error {
	const fn = "ak_softmax_axis"
	if err := needElems(fn, "x", len(x), outer, axisLen, inner); err != nil {
		return err
	}
	if err := needElems(fn, "y", len(y), outer, axisLen, inner); err != nil {
		return err
	}
	if len(x) != 0 && len(y) != 0 && overlaps(x, y) && &x[0] != &y[0] {
		return overlapError(fn, "y", "x")
	}
	return call(func() C.ak_status {
		return C.ak_softmax_axis(C.int64_t(outer), C.int64_t(axisLen), C.int64_t(inner), ptr(x), ptr(y))
	})
}

// StridedBatch says how SgemmStridedBatched's matrices follow each other:
// matrix i of a starts at i*StrideA (0 reuses one matrix for every product),
// and so on; c's matrices must not overlap.
type StridedBatch struct {
	Batch, StrideA, StrideB, StrideC int
}

func checkBatchedLen(fn, name string, n, rows, cols, ld, stride, batch int) error {
	if batch <= 0 || rows <= 0 || cols <= 0 || stride < 0 {
		return nil
	}
	last := (batch - 1) * stride
	if stride != 0 && last/stride != batch-1 {
		return &Error{Status: ErrOverflow, Message: fmt.Sprintf("%s: the extent of %s overflows int", fn, name)}
	}
	if last >= n {
		return shapeError("%s: %s has %d elements; matrix %d starts at %d", fn, name, n, batch-1, last)
	}
	return checkLen(fn, name, n-last, rows, cols, ld)
}

// SgemmStridedBatched computes c[i] = alpha*op(a[i])*op(b[i]) + beta*c[i]
// for every i < s.Batch, shapes as in Sgemm.
func SgemmStridedBatched(ta, tb Transpose, m, n, k int, alpha float32, a []float32, lda int,
	b []float32, ldb int, beta float32, c []float32, ldc int, s StridedBatch) error {
	const fn = "ak_sgemm_strided_batched"
	ar, ac := m, k
	if ta == Trans {
		ar, ac = k, m
	}
	br, bc := k, n
	if tb == Trans {
		br, bc = n, k
	}
	if alpha != 0 && k != 0 {
		if err := checkBatchedLen(fn, "a", len(a), ar, ac, lda, s.StrideA, s.Batch); err != nil {
			return err
		}
		if err := checkBatchedLen(fn, "b", len(b), br, bc, ldb, s.StrideB, s.Batch); err != nil {
			return err
		}
		if overlaps(c, a) {
			return overlapError(fn, "c", "a")
		}
		if overlaps(c, b) {
			return overlapError(fn, "c", "b")
		}
	}
	if err := checkBatchedLen(fn, "c", len(c), m, n, ldc, s.StrideC, s.Batch); err != nil {
		return err
	}
	return call(func() C.ak_status {
		return C.ak_sgemm_strided_batched(C.ak_trans(ta), C.ak_trans(tb), C.int64_t(m),
			C.int64_t(n), C.int64_t(k), C.float(alpha), ptr(a), C.int64_t(lda),
			C.int64_t(s.StrideA), ptr(b), C.int64_t(ldb), C.int64_t(s.StrideB), C.float(beta),
			ptr(c), C.int64_t(ldc), C.int64_t(s.StrideC), C.int64_t(s.Batch))
	})
}

// SgemmBlocking is the SGEMM register tile (MR x NR) and cache blocks of the
// instruction set in use; see ak_sgemm_get_blocking in the header.
type SgemmBlocking struct {
	MR, NR, MC, KC, NC, SkinnyM, KCNarrow, NarrowN int64
}

// GetSgemmBlocking reports the blocking of the instruction set in use.
func GetSgemmBlocking() (SgemmBlocking, error) {
	var b C.ak_sgemm_blocking
	if err := call(func() C.ak_status { return C.ak_sgemm_get_blocking(&b) }); err != nil {
		return SgemmBlocking{}, err
	}
	return SgemmBlocking{int64(b.mr), int64(b.nr), int64(b.mc), int64(b.kc), int64(b.nc),
		int64(b.skinny_m), int64(b.kc_narrow), int64(b.narrow_n)}, nil
}

// PositionEncoding writes the sinusoidal position encoding into out
// [maxLen, dim]: out[p][2i] = sin(p / base^(2i/dim)), out[p][2i+1] = cos(...).
func PositionEncoding(maxLen, dim int, base float32, out []float32) error {
	const fn = "ak_position_encoding"
	if err := needElems(fn, "out", len(out), maxLen, dim); err != nil {
		return err
	}
	return call(func() C.ak_status {
		return C.ak_position_encoding(C.int64_t(maxLen), C.int64_t(dim), C.float(base), ptr(out))
	})
}

// MHASelfAttention is multi-head self-attention with per-head projections:
// x [nTokens, dModel], wQ and wK [numHeads, dModel, dK], wV [numHeads,
// dModel, dV] into out [numHeads, nTokens, dV].
func MHASelfAttention(nTokens, dModel, numHeads, dK, dV int, x, wQ, wK, wV []float32,
	mask Mask, out []float32) error {
	const fn = "ak_mha_self_attention"
	for _, arg := range []struct {
		name string
		s    []float32
		dims []int
	}{
		{"x", x, []int{nTokens, dModel}},
		{"w_q", wQ, []int{numHeads, dModel, dK}},
		{"w_k", wK, []int{numHeads, dModel, dK}},
		{"w_v", wV, []int{numHeads, dModel, dV}},
		{"out", out, []int{numHeads, nTokens, dV}},
	} {
		if err := needElems(fn, arg.name, len(arg.s), arg.dims...); err != nil {
			return err
		}
		if arg.name != "out" && overlaps(out, arg.s) {
			return overlapError(fn, "out", arg.name)
		}
	}
	return call(func() C.ak_status {
		return C.ak_mha_self_attention(C.int64_t(nTokens), C.int64_t(dModel), C.int64_t(numHeads),
			C.int64_t(dK), C.int64_t(dV), ptr(x), ptr(wQ), ptr(wK), ptr(wV), C.ak_mask(mask), ptr(out))
	})
}
