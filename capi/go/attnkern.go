// Package attnkern binds attnkern, attention kernels behind a flat C ABI,
// through cgo. attention.go holds Attention, kv.go the storage types (f16,
// bf16) and paged K/V caches, rope.go rotary and token embeddings, blocks.go
// the batched products and the worked examples' building blocks.
//
// cgo asks pkg-config for the header and library (attnkern.pc, installed by
// `cmake --install`); for a prefix pkg-config does not search:
//
//	PKG_CONFIG_PATH=/prefix/lib/pkgconfig go build
//
// The program then finds libattnkern.so.1 where the loader looks
// (LD_LIBRARY_PATH=/prefix/lib for such a prefix).
//
// Matrices are row-major []float32; a leading dimension is the distance in
// elements between the starts of two rows and must be at least
// max(1, columns). A failed call returns an *Error carrying the Status and
// the library's explanation; errors.Is(err, attnkern.ErrBadStride) works.
package attnkern

/*
#cgo pkg-config: attnkern
#include <stdlib.h>
#include "attnkern.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"unsafe"
)

// ABIVersion is the AK_ABI_VERSION this package was written against.
const ABIVersion = 1

// Status is an ak_status other than AK_OK; each value is also an error, so
// that errors.Is(err, ErrBadShape) tells what went wrong.
type Status int

// The ak_status values.
const (
	OK             Status = 0
	ErrNullPointer Status = 1
	ErrBadShape    Status = 2
	ErrBadStride   Status = 3
	ErrBadArgument Status = 4
	ErrOverflow    Status = 5
	ErrOutOfMemory Status = 6
	ErrUnsupported Status = 7
	ErrInternal    Status = 8
)

// String is the library's name and description, e.g. "AK_ERR_BAD_SHAPE: ...".
func (s Status) String() string { return C.GoString(C.ak_status_string(C.ak_status(s))) }

func (s Status) Error() string { return s.String() }

// Error is a failed call: its Status and the library's ak_last_error() text
// (or, for a slice too short for the sizes given, this package's).
type Error struct {
	Status  Status
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("%s (%s)", e.Message, e.Status) }

// Unwrap makes errors.Is(err, ErrBadStride) and friends work.
func (e *Error) Unwrap() error { return e.Status }

// call runs f and turns its status into an error. ak_last_error() is per OS
// thread and a goroutine can move to another thread between two cgo calls, so
// the goroutine stays on its thread until the message has been read.
func call(f func() C.ak_status) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	st := f()
	if st == C.AK_OK {
		return nil
	}
	return &Error{Status: Status(st), Message: C.GoString(C.ak_last_error())}
}

func shapeError(format string, args ...interface{}) error {
	return &Error{Status: ErrBadShape, Message: fmt.Sprintf(format, args...)}
}

// ptr is the address of s's first element, or nil for an empty slice.
func ptr(s []float32) *C.float {
	if len(s) == 0 {
		return nil
	}
	return (*C.float)(unsafe.Pointer(&s[0]))
}

// overlaps reports whether two slices share an element. The C API does not
// detect an output that overlaps an input, and would compute garbage.
func overlaps(a, b []float32) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	const size = unsafe.Sizeof(a[0])
	a0, b0 := uintptr(unsafe.Pointer(&a[0])), uintptr(unsafe.Pointer(&b[0]))
	return a0 < b0+uintptr(len(b))*size && b0 < a0+uintptr(len(a))*size
}

func overlapError(fn, out, in string) error {
	return &Error{Status: ErrBadArgument, Message: fmt.Sprintf("%s: %s overlaps %s", fn, out, in)}
}

// checkLen checks that n elements hold a rows x cols matrix with leading
// dimension ld. (Whether ld itself is valid is the library's call.)
func checkLen(fn, name string, n, rows, cols, ld int) error {
	if rows < 0 || cols < 0 || ld < 0 {
		return nil // negative sizes: the library says which and why
	}
	if rows == 0 || cols == 0 {
		return nil
	}
	need := (rows-1)*ld + cols
	if ld != 0 && (need-cols)/ld != rows-1 || need < 0 {
		return &Error{Status: ErrOverflow, Message: fmt.Sprintf(
			"%s: %s (%d x %d, ld %d) overflows int", fn, name, rows, cols, ld)}
	}
	if n < need {
		return shapeError("%s: %s has %d elements; a %d x %d matrix with leading dimension %d needs %d",
			fn, name, n, rows, cols, ld, need)
	}
	return nil
}

// ------------------------------------------------------------ configuration

// Version is "MAJOR.MINOR.PATCH" of the library loaded.
func Version() string { return C.GoString(C.ak_version()) }

// LibraryABIVersion is AK_ABI_VERSION of the library loaded.
func LibraryABIVersion() int { return int(C.ak_abi_version()) }

// ISAs lists every instruction-set name the library knows, best first.
var ISAs = []string{"avx512", "avx2", "sse2", "neon", "scalar"}

// ISA is the instruction set in use.
func ISA() string { return C.GoString(C.ak_get_isa()) }

// SetISA forces an instruction set, process-wide; "" or "auto" picks the best.
func SetISA(name string) error {
	if name == "" {
		return call(func() C.ak_status { return C.ak_set_isa(nil) })
	}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	return call(func() C.ak_status { return C.ak_set_isa(cname) })
}

// ISASupported reports whether SetISA(name) would succeed on this machine;
// it changes nothing ("" means "auto").
func ISASupported(name string) bool {
	if name == "" {
		return C.ak_isa_supported(nil) == 1
	}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	return C.ak_isa_supported(cname) == 1
}

// AvailableISAs returns the names in ISAs this machine supports, best first.
// It changes nothing: the instruction set in use stays as it is (also for
// goroutines running kernels meanwhile). The error is always nil.
func AvailableISAs() ([]string, error) {
	var found []string
	for _, name := range ISAs {
		if ISASupported(name) {
			found = append(found, name)
		}
	}
	return found, nil
}

// SetNumThreads sets the threads each call uses, process-wide; 0 = OpenMP's default.
func SetNumThreads(n int) error {
	if n != int(C.int(n)) {
		return &Error{Status: ErrBadArgument, Message: fmt.Sprintf("SetNumThreads: %d is too many", n)}
	}
	return call(func() C.ak_status { return C.ak_set_num_threads(C.int(n)) })
}

// NumThreads is the thread count a call from this OS thread would use now.
func NumThreads() int {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return int(C.ak_get_num_threads())
}

// ReleaseScratch frees the scratch buffers every thread keeps between calls
// (calls running meanwhile keep theirs; the next call allocates anew).
func ReleaseScratch() { C.ak_release_scratch() }

// WithThreadsLocal runs f with the calling OS thread's own thread count set
// to n (ak_set_num_threads_local; 0 = the process-wide count), then restores
// the previous one. The goroutine stays on its OS thread meanwhile, so the
// calls f makes on this goroutine use n threads while other goroutines keep
// the process-wide count: a server calling from many goroutines passes 1 and
// starts no OpenMP pool per OS thread.
func WithThreadsLocal(n int, f func()) error {
	if n != int(C.int(n)) {
		return &Error{Status: ErrBadArgument, Message: fmt.Sprintf("WithThreadsLocal: %d is too many", n)}
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	previous := C.ak_get_num_threads_local()
	if err := call(func() C.ak_status { return C.ak_set_num_threads_local(C.int(n)) }); err != nil {
		return err
	}
	defer C.ak_set_num_threads_local(previous)
	f()
	return nil
}

// -------------------------------------------------------------------- sgemm

// Transpose says whether Sgemm uses a matrix as stored or its transpose.
type Transpose int

const (
	NoTrans Transpose = C.AK_NO_TRANS
	Trans   Transpose = C.AK_TRANS
)

// Sgemm computes c = alpha*op(a)*op(b) + beta*c with op(a) m x k, op(b) k x n
// and c m x n; a is stored m x k (k x m for Trans), b k x n (n x k for Trans).
func Sgemm(ta, tb Transpose, m, n, k int, alpha float32, a []float32, lda int,
	b []float32, ldb int, beta float32, c []float32, ldc int) error {
	const fn = "ak_sgemm"
	ar, ac := m, k
	if ta == Trans {
		ar, ac = k, m
	}
	br, bc := k, n
	if tb == Trans {
		br, bc = n, k
	}
	if alpha != 0 && k != 0 { // otherwise a and b are never read
		if err := checkLen(fn, "a", len(a), ar, ac, lda); err != nil {
			return err
		}
		if err := checkLen(fn, "b", len(b), br, bc, ldb); err != nil {
			return err
		}
	}
	if err := checkLen(fn, "c", len(c), m, n, ldc); err != nil {
		return err
	}
	if alpha != 0 && k != 0 && m != 0 && n != 0 {
		if overlaps(c, a) {
			return overlapError(fn, "c", "a")
		}
		if overlaps(c, b) {
			return overlapError(fn, "c", "b")
		}
	}
	return call(func() C.ak_status {
		return C.ak_sgemm(C.ak_trans(ta), C.ak_trans(tb), C.int64_t(m), C.int64_t(n),
			C.int64_t(k), C.float(alpha), ptr(a), C.int64_t(lda), ptr(b), C.int64_t(ldb),
			C.float(beta), ptr(c), C.int64_t(ldc))
	})
}

// ------------------------------------------------------------------ softmax

func rowwise(fn string, rows, cols int, x []float32, ldx int, y []float32, ldy int) error {
	if err := checkLen(fn, "x", len(x), rows, cols, ldx); err != nil {
		return err
	}
	if err := checkLen(fn, "y", len(y), rows, cols, ldy); err != nil {
		return err
	}
	// In place (y starting where x does) is fine; a partial overlap is not.
	if rows != 0 && cols != 0 && overlaps(x, y) && &x[0] != &y[0] {
		return overlapError(fn, "y", "x")
	}
	return call(func() C.ak_status {
		r, c, lx, ly := C.int64_t(rows), C.int64_t(cols), C.int64_t(ldx), C.int64_t(ldy)
		if fn == "ak_softmax" {
			return C.ak_softmax(r, c, ptr(x), lx, ptr(y), ly)
		}
		return C.ak_log_softmax(r, c, ptr(x), lx, ptr(y), ly)
	})
}

// Softmax writes the row-wise softmax of the rows x cols matrix x into y.
// y may be x (in place) when ldy == ldx.
func Softmax(rows, cols int, x []float32, ldx int, y []float32, ldy int) error {
	return rowwise("ak_softmax", rows, cols, x, ldx, y, ldy)
}

// LogSoftmax writes the row-wise log(softmax(x)) into y; y may be x.
func LogSoftmax(rows, cols int, x []float32, ldx int, y []float32, ldy int) error {
	return rowwise("ak_log_softmax", rows, cols, x, ldx, y, ldy)
}

// statusSize is sizeof(ak_status) as cgo sees it, for the tests.
func statusSize() uintptr { var s C.ak_status; return unsafe.Sizeof(s) }

// rawSoftmaxNull calls ak_softmax with NULL pointers, for the tests.
func rawSoftmaxNull(rows, cols int) error {
	return call(func() C.ak_status {
		return C.ak_softmax(C.int64_t(rows), C.int64_t(cols), nil, C.int64_t(cols), nil, C.int64_t(cols))
	})
}
