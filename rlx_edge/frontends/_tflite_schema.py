"""Constants shared by the TFLite reader and writer: type, padding and activation codes.

The numeric codes come from the ``tflite`` package's generated schema classes so
that both directions agree with the schema the files were written against.
"""

from __future__ import annotations

import importlib
from types import ModuleType

import numpy as np
from tflite.ActivationFunctionType import ActivationFunctionType
from tflite.BuiltinOperator import BuiltinOperator
from tflite.Padding import Padding
from tflite.TensorType import TensorType as TflType

from rlx_edge.ir.dtype import DType

FILE_IDENTIFIER = b"TFL3"
SCHEMA_VERSION = 3

# TFLite element type <-> IR dtype (only the ones an embedded graph can hold).
TFL_TO_DTYPE: dict[int, DType] = {
    TflType.FLOAT32: DType.f32,
    TflType.FLOAT16: DType.f16,
    TflType.FLOAT64: DType.f64,
    TflType.INT64: DType.i64,
    TflType.INT32: DType.i32,
    TflType.INT16: DType.i16,
    TflType.INT8: DType.i8,
    TflType.UINT8: DType.u8,
    TflType.BOOL: DType.bool,
    TflType.INT4: DType.i4,  # packed in buffers (pack_int4 / unpack_int4); one value per int8 in the IR
}
DTYPE_TO_TFL: dict[DType, int] = {v: k for k, v in TFL_TO_DTYPE.items()}
TFL_TYPE_NAMES: dict[int, str] = {v: k for k, v in vars(TflType).items() if not k.startswith("_")}

PADDING_TO_IR = {Padding.SAME: "same", Padding.VALID: "valid"}
PADDING_TO_TFL = {v: k for k, v in PADDING_TO_IR.items()}

# Fused activations our ops can carry as their ``activation`` attribute.
ACT_TO_IR = {
    ActivationFunctionType.NONE: "none",
    ActivationFunctionType.RELU: "relu",
    ActivationFunctionType.RELU6: "relu6",
    ActivationFunctionType.RELU_N1_TO_1: "relu_n1_to_1",
}
ACT_TO_TFL = {v: k for k, v in ACT_TO_IR.items()}
ACT_NAMES: dict[int, str] = {v: k for k, v in vars(ActivationFunctionType).items() if not k.startswith("_")}

OP_CODES: dict[str, int] = {k: v for k, v in vars(BuiltinOperator).items() if not k.startswith("_")}
OP_NAMES: dict[int, str] = {v: k for k, v in OP_CODES.items()}


def pack_int4(values: np.ndarray) -> bytes:
    """int4 values (one per int8, in [-8, 7]) as a TFLite INT4 buffer: the flattened tensor two
    values per byte, element 2i in the low nibble of byte i, an odd count's last high nibble 0
    (how TFLite Micro's UnpackDenseInt4IntoInt8 reads it)."""
    flat = np.asarray(values, np.int8).reshape(-1)
    if flat.size and (flat.min() < -8 or flat.max() > 7):
        raise ValueError(f"int4 values must be in [-8, 7], got [{flat.min()}, {flat.max()}]")
    nib = np.zeros(flat.size + flat.size % 2, np.uint8)
    nib[: flat.size] = flat.view(np.uint8) & 0x0F
    return (nib[0::2] | (nib[1::2] << 4)).astype(np.uint8).tobytes()


def unpack_int4(data: bytes, count: int) -> np.ndarray:
    """The ``count`` int4 values of a packed INT4 buffer (``pack_int4``'s inverse), one per int8."""
    b = np.frombuffer(data, np.uint8, count=(count + 1) // 2)
    lo = (b << 4).view(np.int8) >> 4  # the sign bit of the low nibble moved to bit 7, shifted back
    hi = b.view(np.int8) >> 4
    return np.stack([lo, hi], axis=1).reshape(-1)[:count].astype(np.int8)


def schema_module(table: str) -> ModuleType:
    """The generated module of one schema table (``"Conv2DOptions"``).

    ``tflite/__init__`` star-imports every module, so the package attribute of
    that name is the class, not the module with the builder functions.
    """
    return importlib.import_module(f"tflite.{table}")
