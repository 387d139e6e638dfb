"""The C declarations of attnkern.h for ctypes: enums, ak_attention_desc and
the function prototypes. attnkern.py re-exports everything public here."""

import ctypes
import enum

# The AK_ABI_VERSION this module was written against.
ABI_VERSION = 1


class Status(enum.IntEnum):
    OK = 0
    ERR_NULL_POINTER = 1
    ERR_BAD_SHAPE = 2
    ERR_BAD_STRIDE = 3
    ERR_BAD_ARGUMENT = 4
    ERR_OVERFLOW = 5
    ERR_OUT_OF_MEMORY = 6
    ERR_UNSUPPORTED = 7
    ERR_INTERNAL = 8


class Trans(enum.IntEnum):
    NO_TRANS = 0
    TRANS = 1


class Mask(enum.IntEnum):
    NONE = 0
    CAUSAL_TOP_LEFT = 1
    CAUSAL_BOTTOM_RIGHT = 2


class DType(enum.IntEnum):
    """ak_dtype: the storage type of K/V caches and of ak_convert's arrays.
    numpy carries F32 as float32, F16 as float16 and BF16 as uint16 bit
    patterns (numpy has no bfloat16)."""
    F32 = 0
    F16 = 1
    BF16 = 2


F32, F16, BF16 = DType.F32, DType.F16, DType.BF16


class RopeStyle(enum.IntEnum):
    """ak_rope_style: which entries of a row ak_rope rotates together."""
    NEOX = 0         # (i, i + rotary_dim/2): GPT-NeoX, Llama in HF layout
    INTERLEAVED = 1  # (2i, 2i + 1): GPT-J, Meta's Llama layout


class AttnkernError(RuntimeError):
    """A call returned a status other than AK_OK.

    ``status`` is the Status (or the raw int for a value this module does not
    know), ``detail`` the library's ak_last_error() text."""

    def __init__(self, function, status, status_text, detail):
        try:
            status = Status(status)
        except ValueError:
            pass
        self.function = function
        self.status = status
        self.detail = detail
        super().__init__(f"{function}: {status_text} ({detail})" if detail
                         else f"{function}: {status_text}")


_i64 = ctypes.c_int64
_f32 = ctypes.c_float
_fp = ctypes.POINTER(ctypes.c_float)
_i32p = ctypes.POINTER(ctypes.c_int32)
_i64p = ctypes.POINTER(ctypes.c_int64)
# C enums are passed as int (4 bytes on every platform attnkern targets).
_enum = ctypes.c_int


class AttentionDesc(ctypes.Structure):
    """ak_attention_desc; fill it after Library.attention_desc() initialised it.
    The fields after ``probs`` came in 0.2; ATTENTION_DESC_SIZE_0_1 is where
    they start (the struct_size of a 0.1 descriptor)."""
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("batch", _i64), ("num_heads", _i64), ("num_kv_heads", _i64),
        ("q_len", _i64), ("kv_len", _i64),
        ("head_dim", _i64), ("head_dim_v", _i64),
        ("scale", ctypes.c_float),
        ("mask", ctypes.c_int32),
        ("window_left", _i64), ("window_right", _i64),
        ("bias", _fp), ("bias_strides", _i64 * 3),
        ("kv_lens", _i32p),
        ("q_strides", _i64 * 3), ("k_strides", _i64 * 3),
        ("v_strides", _i64 * 3), ("o_strides", _i64 * 3),
        ("lse", _fp), ("probs", _fp),
        # ---- 0.2
        ("k_type", ctypes.c_int32), ("v_type", ctypes.c_int32),
        ("softcap", ctypes.c_float),
        ("alibi_slopes", _fp), ("sinks", _fp),
        ("block_table", _i32p),
        ("block_table_stride", _i64), ("page_size", _i64), ("num_pages", _i64),
        ("k_page_strides", _i64 * 3), ("v_page_strides", _i64 * 3),
        ("cu_seqlens_q", _i32p), ("cu_seqlens_k", _i32p),
    ]


class SgemmBlocking(ctypes.Structure):
    """ak_sgemm_blocking: the register tile and cache blocks of the
    instruction set in use (Library.sgemm_blocking() returns it as a dict)."""
    _fields_ = [(name, _i64) for name in
                ("mr", "nr", "mc", "kc", "nc", "skinny_m", "kc_narrow", "narrow_n")]


AttentionDesc._fields_names = frozenset(name for name, _ in AttentionDesc._fields_)
# AK_ATTENTION_DESC_SIZE_0_1: a descriptor of this struct_size is read as 0.1
# wrote it, every later field at its default.
ATTENTION_DESC_SIZE_0_1 = AttentionDesc.k_type.offset

# name: (restype, argtypes). Every argument type is spelled out: without
# argtypes ctypes would pass Python floats as double and ints as C int.
PROTOTYPES = {
    "ak_status_string": (ctypes.c_char_p, [_enum]),
    "ak_last_error": (ctypes.c_char_p, []),
    "ak_version": (ctypes.c_char_p, []),
    "ak_abi_version": (ctypes.c_int, []),
    "ak_get_isa": (ctypes.c_char_p, []),
    "ak_isa_supported": (ctypes.c_int, [ctypes.c_char_p]),
    "ak_set_isa": (_enum, [ctypes.c_char_p]),
    "ak_set_num_threads": (_enum, [ctypes.c_int]),
    "ak_get_num_threads": (ctypes.c_int, []),
    "ak_set_num_threads_local": (_enum, [ctypes.c_int]),
    "ak_get_num_threads_local": (ctypes.c_int, []),
    "ak_release_scratch": (None, []),
    "ak_sgemm": (_enum, [_enum, _enum, _i64, _i64, _i64, _f32, _fp, _i64,
                         _fp, _i64, _f32, _fp, _i64]),
    "ak_sgemm_strided_batched": (_enum, [_enum, _enum, _i64, _i64, _i64, _f32,
                                         _fp, _i64, _i64, _fp, _i64, _i64,
                                         _f32, _fp, _i64, _i64, _i64]),
    "ak_sgemm_get_blocking": (_enum, [ctypes.POINTER(SgemmBlocking)]),
    "ak_softmax": (_enum, [_i64, _i64, _fp, _i64, _fp, _i64]),
    "ak_log_softmax": (_enum, [_i64, _i64, _fp, _i64, _fp, _i64]),
    "ak_softmax_axis": (_enum, [_i64, _i64, _i64, _fp, _fp]),
    "ak_attention_desc_init_sized": (None, [ctypes.POINTER(AttentionDesc), ctypes.c_uint32]),
    # The function behind the header's macro, for programs built against the
    # 0.1 header: it initializes the first ATTENTION_DESC_SIZE_0_1 bytes.
    "ak_attention_desc_init": (None, [ctypes.POINTER(AttentionDesc)]),
    "ak_attention": (_enum, [ctypes.POINTER(AttentionDesc), _fp, _fp, _fp, _fp]),
    "ak_position_encoding": (_enum, [_i64, _i64, _f32, _fp]),
    "ak_mha_self_attention": (_enum, [_i64, _i64, _i64, _i64, _i64, _fp, _fp,
                                      _fp, _fp, _enum, _fp]),
}

# Functions added in 0.2. ABI version 1 covers 0.1 libraries too, which lack
# them: Library loads without them and its wrappers say what is missing.
OPTIONAL_PROTOTYPES = {
    "ak_convert": (_enum, [_enum, ctypes.c_void_p, _enum, ctypes.c_void_p, _i64]),
    "ak_kv_cache_store": (_enum, [_i64, _i64, _i64, _fp, _i64p, _i64p, _enum,
                                  ctypes.c_void_p, _i64, _i64, _i64p]),
    "ak_rope": (_enum, [_i64, _i64, _i64, _i64, _i64, _enum, _i32p, _f32, _fp, _fp, _i64p]),
    "ak_embedding": (_enum, [_i64, _i32p, _i64, _i64, _fp, _i64, _fp, _i64]),
}
