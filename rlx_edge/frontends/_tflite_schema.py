"""Constants shared by the TFLite reader and writer: type, padding and activation codes.

The numeric codes come from the ``tflite`` package's generated schema classes so
that both directions agree with the schema the files were written against.
"""

from __future__ import annotations

import importlib
from types import ModuleType

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


def schema_module(table: str) -> ModuleType:
    """The generated module of one schema table (``"Conv2DOptions"``).

    ``tflite/__init__`` star-imports every module, so the package attribute of
    that name is the class, not the module with the builder functions.
    """
    return importlib.import_module(f"tflite.{table}")
