package attnkern

/*
#include "attnkern.h"

// ak_attention with the Go-memory pointers (lse, block_table, the per-head
// arrays, the sequence offsets) passed separately: cgo forbids passing C a Go
// struct that holds Go pointers, so the descriptor travels without them and
// they are filled in on the C side, in a C copy. k and v are void: their type
// is d->k_type / d->v_type.
static ak_status go_ak_attention(const ak_attention_desc *d, const float *q,
                                 const void *k, const void *v, float *out,
                                 float *lse, const int32_t *block_table,
                                 const float *alibi_slopes, const float *sinks,
                                 const int32_t *cu_seqlens_q,
                                 const int32_t *cu_seqlens_k) {
  ak_attention_desc c = *d;
  c.lse = lse;
  c.block_table = block_table;
  c.alibi_slopes = alibi_slopes;
  c.sinks = sinks;
  c.cu_seqlens_q = cu_seqlens_q;
  c.cu_seqlens_k = cu_seqlens_k;
  return ak_attention(&c, q, (const float *)k, (const float *)v, out);
}
*/
import "C"

import "unsafe"

// Mask says which keys a query may see.
type Mask int32

const (
	MaskNone              Mask = C.AK_MASK_NONE
	MaskCausalTopLeft     Mask = C.AK_MASK_CAUSAL_TOP_LEFT     // key j visible to query i iff j <= i
	MaskCausalBottomRight Mask = C.AK_MASK_CAUSAL_BOTTOM_RIGHT // iff j <= i + (kv_len - q_len)
)

// Attention is scaled dot-product attention over contiguous
// [batch, heads, seq, dim] tensors: out = softmax(scale * q k^T, masked) v.
// The zero values of the fields from Softcap on leave them out.
type Attention struct {
	Batch, NumHeads, NumKVHeads int // NumKVHeads divides NumHeads; 0 = NumHeads
	QLen, KVLen                 int
	HeadDim, HeadDimV           int     // HeadDimV 0 = HeadDim
	Scale                       float32 // 0 = 1/sqrt(HeadDim)
	Mask                        Mask

	// Softcap > 0 maps each scaled score s to Softcap*tanh(s/Softcap).
	Softcap float32
	// AlibiSlopes, [NumHeads], adds AlibiSlopes[h]*(j - d(i)) to each score,
	// d(i) the query's aligned diagonal (shifted by n - QLen for
	// MaskCausalBottomRight).
	AlibiSlopes []float32
	// Sinks, [NumHeads], are logits that join each row's softmax normalizer
	// with no value: a row's weights sum to less than 1, and a row with no
	// visible key gets out 0 and lse Sinks[h].
	Sinks []float32
	// CuSeqlensQ packs a variable-length batch: [Batch+1] row offsets,
	// CuSeqlensQ[0] = 0, non-decreasing. Sequence b's queries are rows
	// CuSeqlensQ[b] .. CuSeqlensQ[b+1]-1 of q and out, in the layout
	// TokenMajor says; QLen is the longest sequence (an upper bound) and lse
	// is [heads, total rows].
	CuSeqlensQ []int32
	// CuSeqlensK packs the keys and values likewise (KVLen the longest);
	// not with a paged cache.
	CuSeqlensK []int32
	// TokenMajor lays packed tensors out as [total, heads, dim], as most
	// engines keep them; false is [heads, total, dim].
	TokenMajor bool
}

func (a *Attention) kvHeads() int {
	if a.NumKVHeads == 0 {
		return a.NumHeads
	}
	return a.NumKVHeads
}

func (a *Attention) dimV() int {
	if a.HeadDimV == 0 {
		return a.HeadDim
	}
	return a.HeadDimV
}

func (a *Attention) desc() C.ak_attention_desc {
	var d C.ak_attention_desc
	C.ak_attention_desc_init_sized(&d, C.uint32_t(unsafe.Sizeof(d)))
	d.batch = C.int64_t(a.Batch)
	d.num_heads = C.int64_t(a.NumHeads)
	d.num_kv_heads = C.int64_t(a.kvHeads())
	d.q_len = C.int64_t(a.QLen)
	d.kv_len = C.int64_t(a.KVLen)
	d.head_dim = C.int64_t(a.HeadDim)
	d.head_dim_v = C.int64_t(a.HeadDimV)
	d.scale = C.float(a.Scale)
	d.mask = C.int32_t(a.Mask)
	d.softcap = C.float(a.Softcap)
	return d
}

// packedRows is the row count of a tensor packed by cu (its last entry), or
// -1 where cu is nil; cu must have batch + 1 entries. A negative or
// decreasing cu is the library's to report.
func packedRows(fn, name string, cu []int32, batch int) (int, error) {
	if cu == nil {
		return -1, nil
	}
	if len(cu) != batch+1 {
		return 0, shapeError("%s: %s has %d entries for a batch of %d (needs batch + 1)", fn, name,
			len(cu), batch)
	}
	if cu[batch] < 0 {
		return 0, nil
	}
	return int(cu[batch]), nil
}

// packedStrides are the C strides of a packed [total, heads, dim] tensor
// (token-major) or [heads, total, dim] (all 0: contiguous).
func (a *Attention) packedStrides(heads, dim int) [3]C.int64_t {
	if !a.TokenMajor {
		return [3]C.int64_t{}
	}
	return [3]C.int64_t{0, C.int64_t(dim), C.int64_t(heads * dim)}
}

func ptr32(s []int32) *C.int32_t {
	if len(s) == 0 {
		return nil
	}
	return (*C.int32_t)(unsafe.Pointer(&s[0]))
}

// Run computes out [batch, heads, q_len, d_v] from fp32 k and v; lse, if not
// nil, receives the [batch, heads, q_len] log-sum-exps of the scaled scores.
// With CuSeqlensQ, q and out are [total, heads, dim] (or [heads, total, dim])
// and lse [heads, total].
func (a *Attention) Run(q, k, v, out, lse []float32) error {
	return a.RunKV(q, F32Elems(k), F32Elems(v), nil, out, lse)
}

// RunKV is Run with k and v in their storage types (f16 and bf16 are widened
// exactly as they are read: the result is the fp32 computation on the stored
// values). With paged, k and v are pools of pages (see Paged); else
// contiguous [batch, kv_heads, kv_len, dim] tensors.
func (a *Attention) RunKV(q []float32, k, v Elems, paged *Paged, out, lse []float32) error {
	const fn = "ak_attention"
	b, h, hk, dv := a.Batch, a.NumHeads, a.kvHeads(), a.dimV()
	if err := k.check(fn, "k"); err != nil {
		return err
	}
	if err := v.check(fn, "v"); err != nil {
		return err
	}
	type sized struct {
		name string
		n    int
		dims []int
	}
	totalQ, err := packedRows(fn, "CuSeqlensQ", a.CuSeqlensQ, b)
	if err != nil {
		return err
	}
	totalK, err := packedRows(fn, "CuSeqlensK", a.CuSeqlensK, b)
	if err != nil {
		return err
	}
	sizes := []sized{
		{"q", len(q), []int{b, h, a.QLen, a.HeadDim}},
		{"out", len(out), []int{b, h, a.QLen, dv}},
	}
	if totalQ >= 0 {
		sizes = []sized{{"q", len(q), []int{totalQ, h, a.HeadDim}}, {"out", len(out), []int{totalQ, h, dv}}}
	}
	if lse != nil {
		if totalQ >= 0 {
			sizes = append(sizes, sized{"lse", len(lse), []int{h, totalQ}})
		} else {
			sizes = append(sizes, sized{"lse", len(lse), []int{b, h, a.QLen}})
		}
	}
	for _, x := range []struct {
		name string
		s    []float32
	}{{"AlibiSlopes", a.AlibiSlopes}, {"Sinks", a.Sinks}} {
		if x.s != nil {
			sizes = append(sizes, sized{x.name, len(x.s), []int{h}})
		}
	}
	if paged == nil && totalK >= 0 {
		sizes = append(sizes, sized{"k", k.Len(), []int{totalK, hk, a.HeadDim}},
			sized{"v", v.Len(), []int{totalK, hk, dv}})
	} else if paged == nil {
		sizes = append(sizes, sized{"k", k.Len(), []int{b, hk, a.KVLen, a.HeadDim}},
			sized{"v", v.Len(), []int{b, hk, a.KVLen, dv}})
	} else {
		sizes = append(sizes, sized{"block_table", len(paged.BlockTable), []int{b, paged.BlockTableStride}})
		for _, pool := range []struct {
			name    string
			e       Elems
			dim     int
			strides [3]int
		}{{"k", k, a.HeadDim, paged.KPageStrides}, {"v", v, dv, paged.VPageStrides}} {
			l := PoolLayout{paged.NumPages, hk, paged.PageSize, pool.dim, pool.strides}
			need, err := l.elements(fn)
			if err != nil {
				return err
			}
			if pool.e.Len() < need {
				return shapeError("%s: %s has %d elements; its pool %+v needs %d", fn, pool.name,
					pool.e.Len(), l, need)
			}
		}
	}
	for _, t := range sizes {
		need := 1
		for _, d := range t.dims {
			if d < 0 {
				need = 0 // the library reports negative sizes
				break
			}
			need *= d
		}
		if t.n < need {
			return shapeError("%s: %s has %d elements; %v needs %d", fn, t.name, t.n, t.dims, need)
		}
	}
	for _, in := range []struct {
		name string
		e    Elems
	}{{"q", F32Elems(q)}, {"k", k}, {"v", v}} {
		if in.e.overlaps(F32Elems(out)) {
			return overlapError(fn, "out", in.name)
		}
		if in.e.overlaps(F32Elems(lse)) {
			return overlapError(fn, "lse", in.name)
		}
	}
	if overlaps(out, lse) {
		return overlapError(fn, "lse", "out")
	}
	d := a.desc()
	d.k_type, d.v_type = C.int32_t(k.Type), C.int32_t(v.Type)
	if a.CuSeqlensQ != nil {
		d.q_strides, d.o_strides = a.packedStrides(h, a.HeadDim), a.packedStrides(h, dv)
	}
	if a.CuSeqlensK != nil && paged == nil {
		d.k_strides, d.v_strides = a.packedStrides(hk, a.HeadDim), a.packedStrides(hk, dv)
	}
	var table *C.int32_t
	if paged != nil {
		if len(paged.BlockTable) > 0 {
			table = (*C.int32_t)(unsafe.Pointer(&paged.BlockTable[0]))
		}
		d.block_table_stride = C.int64_t(paged.BlockTableStride)
		d.page_size = C.int64_t(paged.PageSize)
		d.num_pages = C.int64_t(paged.NumPages)
		for i := 0; i < 3; i++ {
			d.k_page_strides[i] = C.int64_t(paged.KPageStrides[i])
			d.v_page_strides[i] = C.int64_t(paged.VPageStrides[i])
		}
		if table == nil { // the library tells "paged" from a non-NULL table
			return shapeError("%s: a paged call needs a block table", fn)
		}
	}
	return call(func() C.ak_status {
		return C.go_ak_attention(&d, ptr(q), k.ptr(), v.ptr(), ptr(out), ptr(lse), table,
			ptr(a.AlibiSlopes), ptr(a.Sinks), ptr32(a.CuSeqlensQ), ptr32(a.CuSeqlensK))
	})
}

// Paged describes paged K/V for RunKV: k and v are then pools of NumPages
// pages of [num_kv_heads, PageSize, dim], and key j of batch entry b is slot
// j % PageSize of page BlockTable[b*BlockTableStride + j/PageSize]. Page ids
// that no visible key needs (say -1 past a sequence's end) are never read;
// the library checks the others against NumPages.
type Paged struct {
	BlockTable       []int32
	BlockTableStride int // entries per batch row, at least ceil(kv_len / PageSize)
	PageSize         int
	NumPages         int
	// [page, kv_head, slot] strides in elements of the pool's type; all 0 = contiguous.
	KPageStrides, VPageStrides [3]int
}

// descLayout is cgo's (so the C compiler's) view of ak_attention_desc, for
// the tests, which cannot use cgo themselves.
func descLayout() (size uintptr, offsets map[string]uintptr, initSize uint32) {
	var d C.ak_attention_desc
	C.ak_attention_desc_init_sized(&d, C.uint32_t(unsafe.Sizeof(d)))
	return unsafe.Sizeof(d), map[string]uintptr{
		"struct_size": unsafe.Offsetof(d.struct_size), "batch": unsafe.Offsetof(d.batch),
		"num_heads": unsafe.Offsetof(d.num_heads), "num_kv_heads": unsafe.Offsetof(d.num_kv_heads),
		"q_len": unsafe.Offsetof(d.q_len), "kv_len": unsafe.Offsetof(d.kv_len),
		"head_dim": unsafe.Offsetof(d.head_dim), "head_dim_v": unsafe.Offsetof(d.head_dim_v),
		"scale": unsafe.Offsetof(d.scale), "mask": unsafe.Offsetof(d.mask),
		"window_left": unsafe.Offsetof(d.window_left), "window_right": unsafe.Offsetof(d.window_right),
		"bias": unsafe.Offsetof(d.bias), "bias_strides": unsafe.Offsetof(d.bias_strides),
		"kv_lens": unsafe.Offsetof(d.kv_lens), "q_strides": unsafe.Offsetof(d.q_strides),
		"k_strides": unsafe.Offsetof(d.k_strides), "v_strides": unsafe.Offsetof(d.v_strides),
		"o_strides": unsafe.Offsetof(d.o_strides), "lse": unsafe.Offsetof(d.lse),
		"probs":  unsafe.Offsetof(d.probs),
		"k_type": unsafe.Offsetof(d.k_type), "v_type": unsafe.Offsetof(d.v_type),
		"softcap": unsafe.Offsetof(d.softcap), "alibi_slopes": unsafe.Offsetof(d.alibi_slopes),
		"sinks": unsafe.Offsetof(d.sinks), "block_table": unsafe.Offsetof(d.block_table),
		"block_table_stride": unsafe.Offsetof(d.block_table_stride),
		"page_size":          unsafe.Offsetof(d.page_size), "num_pages": unsafe.Offsetof(d.num_pages),
		"k_page_strides": unsafe.Offsetof(d.k_page_strides),
		"v_page_strides": unsafe.Offsetof(d.v_page_strides),
		"cu_seqlens_q":   unsafe.Offsetof(d.cu_seqlens_q), "cu_seqlens_k": unsafe.Offsetof(d.cu_seqlens_k),
	}, uint32(d.struct_size)
}

// descSize01 is AK_ATTENTION_DESC_SIZE_0_1 and descDefaults the 0.2 fields
// of a fresh descriptor (all must be zero), for the tests.
func descSize01() uintptr { return uintptr(C.AK_ATTENTION_DESC_SIZE_0_1) }

func descDefaults() []int64 {
	var d C.ak_attention_desc
	C.ak_attention_desc_init_sized(&d, C.uint32_t(unsafe.Sizeof(d)))
	nonNull := 0
	for _, p := range []unsafe.Pointer{unsafe.Pointer(d.alibi_slopes), unsafe.Pointer(d.sinks),
		unsafe.Pointer(d.block_table), unsafe.Pointer(d.cu_seqlens_q), unsafe.Pointer(d.cu_seqlens_k)} {
		if p != nil {
			nonNull++
		}
	}
	return []int64{int64(d.k_type), int64(d.v_type), int64(d.softcap), int64(nonNull),
		int64(d.block_table_stride), int64(d.page_size), int64(d.num_pages),
		int64(d.k_page_strides[0]), int64(d.k_page_strides[1]), int64(d.k_page_strides[2]),
		int64(d.v_page_strides[0]), int64(d.v_page_strides[1]), int64(d.v_page_strides[2])}
}
