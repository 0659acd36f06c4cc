"""The TFLite builtin operators rlx-edge reads and writes, each declared once.

A declaration says: builtin ``X`` <-> IR op(s) ``Y``, ``X``'s options table,
and which scalar option fields carry which IR attributes (with how values
convert). Both directions read it:

- the importer (``tflite.py``) accepts exactly the declared builtins; a
  builtin without a converter of its own becomes its IR op, with its inputs
  and the attributes :meth:`Builtin.attrs` reads from the declared fields;
- the exporter (``_tflite_export.py``) finds an IR op's builtin through
  :func:`exported_as`, the inverse of these declarations, and writes the
  fields with :meth:`Builtin.option_fields`.

So a plain op (say a unary activation) is one :func:`_declare` line here,
and neither direction keeps a mapping of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlx_edge.frontends._tflite_schema import ACT_TO_IR, ACT_TO_TFL, OP_CODES, PADDING_TO_IR, PADDING_TO_TFL
from rlx_edge.ir.ops import get_op
from rlx_edge.ir.rules import RuleTable


@dataclass(frozen=True)
class OptionField:
    """One scalar field of an options table and the IR attribute it carries.

    ``attr`` is ``None`` for a field the op's import and export rules compute
    themselves (FULLY_CONNECTED's ``KeepNumDims`` follows the input rank);
    declaring it still fixes its place in the written table.
    """

    name: str  # the schema's CamelCase field name, e.g. "StrideH"
    attr: str | None = None
    index: int | None = None  # element of a tuple attribute: StrideH is strides[0]
    default: Any = 0  # its value when the file has no options table
    to_ir: Callable[[Any], Any] | None = None
    to_tfl: Callable[[Any], Any] | None = None


@dataclass(frozen=True)
class Builtin:
    """One TFLite builtin operator and the IR op(s) it is."""

    name: str
    ir_ops: tuple[str, ...]  # the first is what the importer makes when no converter says otherwise
    options: str | None = None  # its options table, e.g. "Conv2DOptions"
    fields: tuple[OptionField, ...] = ()
    # TFLite Micro runs these with zeroed parameters (stride 0) when the options are
    # missing, so a file without them is refused rather than given our defaults.
    options_required: bool = False
    write_options: bool = True  # False: exported without its table (it has no fields)
    # Shape-only: the importer folds its output to a constant (it has no IR op, and the
    # exporter never writes it).
    folded: bool = False
    int8_version: int = 1  # op versions for quantized kernels (TFLite's op_version rules)
    int16_version: int | None = None  # None: the int8 version

    def field(self, name: str) -> OptionField:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(f"{self.name} declares no option field {name!r}")

    def attrs(self, read: Callable[[OptionField], Any]) -> dict[str, Any]:
        """The IR attributes the declared fields carry; ``read(field)`` gives a field's stored value."""
        out: dict[str, Any] = {}
        parts: dict[str, dict[int, Any]] = {}
        for f in self.fields:
            if f.attr is None:
                continue
            value = read(f)
            value = f.to_ir(value) if f.to_ir else value
            if f.index is None:
                out[f.attr] = value
            else:
                parts.setdefault(f.attr, {})[f.index] = value
        for attr, by_index in parts.items():
            out[attr] = tuple(by_index[i] for i in sorted(by_index))
        return out

    def option_fields(self, attrs: Mapping[str, Any], **computed: Any) -> dict[str, Any]:
        """Stored field values, in declared order, from IR ``attrs``; ``computed`` gives the others."""
        unknown = set(computed) - {f.name for f in self.fields}
        if unknown:
            raise KeyError(f"{self.name} declares no option field {', '.join(sorted(unknown))}")
        out: dict[str, Any] = {}
        for f in self.fields:
            if f.name in computed:
                out[f.name] = computed[f.name]
            elif f.attr is not None:
                value = attrs[f.attr] if f.index is None else attrs[f.attr][f.index]
                out[f.name] = f.to_tfl(value) if f.to_tfl else value
        return out

    def version(self, int16: bool) -> int:
        if int16 and self.int16_version is not None:
            return self.int16_version
        return self.int8_version


BUILTINS: RuleTable[Builtin] = RuleTable("tflite builtins", keys=OP_CODES, what="builtin operator")


def _declare(name: str, *ir_ops: str, **how: Any) -> None:
    for op in ir_ops:
        get_op(op)  # a declaration for an op nobody declared is a programming error
    BUILTINS.add(name, Builtin(name, ir_ops, **how))


# field groups ---------------------------------------------------------------------------------
def _f32(v: Any) -> float:
    return float(np.float32(v))


_ACT = OptionField("FusedActivationFunction", "activation", to_ir=ACT_TO_IR.__getitem__, to_tfl=ACT_TO_TFL.__getitem__)
_WINDOW = (
    OptionField("Padding", "padding", to_ir=PADDING_TO_IR.__getitem__, to_tfl=PADDING_TO_TFL.__getitem__),
    OptionField("StrideH", "strides", 0),
    OptionField("StrideW", "strides", 1),
)
_CONV = (*_WINDOW, OptionField("DilationHFactor", "dilations", 0), OptionField("DilationWFactor", "dilations", 1), _ACT)
_POOL = (*_WINDOW, OptionField("FilterHeight", "kernel", 0), OptionField("FilterWidth", "kernel", 1), _ACT)

# declarations ---------------------------------------------------------------------------------
_declare(
    "CONV_2D", "conv2d", options="Conv2DOptions", fields=_CONV, options_required=True, int8_version=3, int16_version=4
)
_declare(
    "DEPTHWISE_CONV_2D",
    "depthwise_conv2d",
    options="DepthwiseConv2DOptions",
    fields=(*_CONV, OptionField("DepthMultiplier", "depth_multiplier")),
    options_required=True,
    int8_version=3,
    int16_version=5,
)
_declare(
    "FULLY_CONNECTED",
    "fully_connected",
    options="FullyConnectedOptions",
    fields=(_ACT, OptionField("KeepNumDims", default=False), OptionField("WeightsFormat")),
    int8_version=4,
    int16_version=7,
)
_declare(
    "AVERAGE_POOL_2D",
    "avg_pool2d",
    options="Pool2DOptions",
    fields=_POOL,
    options_required=True,
    int8_version=2,
    int16_version=3,
)
_declare(
    "MAX_POOL_2D",
    "max_pool2d",
    options="Pool2DOptions",
    fields=_POOL,
    options_required=True,
    int8_version=2,
    int16_version=3,
)
_declare("L2_POOL_2D", "l2_pool2d", options="Pool2DOptions", fields=_POOL, options_required=True)  # float only
_declare("ADD", "add", options="AddOptions", fields=(_ACT,), int8_version=2, int16_version=3)
_declare("SUB", "sub", options="SubOptions", fields=(_ACT,), int8_version=2, int16_version=3)
_declare("MUL", "mul", options="MulOptions", fields=(_ACT,), int8_version=2, int16_version=4)
_declare("DIV", "div", options="DivOptions", fields=(_ACT,), int8_version=2)  # int8 and float (TFLite Micro's)
# the adjoint flags become transposes at import (tflite.py); matmul is written without them.
# AsymmetricQuantizeInputs concerns hybrid kernels only.
_declare(
    "BATCH_MATMUL",
    "matmul",
    options="BatchMatMulOptions",
    fields=(
        OptionField("AdjX", default=False),
        OptionField("AdjY", default=False),
        OptionField("AsymmetricQuantizeInputs", default=False),
    ),
    int8_version=2,
    int16_version=3,
)
_declare("MAXIMUM", "maximum", options="MaximumMinimumOptions", int8_version=2, int16_version=4)
_declare("MINIMUM", "minimum", options="MaximumMinimumOptions", int8_version=2, int16_version=4)
_declare("LOGISTIC", "sigmoid", int8_version=2, int16_version=3)
_declare("TANH", "tanh", int8_version=2, int16_version=3)
_declare("RELU", "relu", int8_version=2, int16_version=3)
_declare("RELU6", "relu6", int8_version=2)
# TFLite's HardSwishOptions table is empty; files may carry it, we write none.
_declare("HARD_SWISH", "hard_swish", options="HardSwishOptions", write_options=False)
_declare("PRELU", "prelu")
_declare(
    "LEAKY_RELU",
    "leaky_relu",
    options="LeakyReluOptions",
    fields=(OptionField("Alpha", "alpha", to_ir=_f32),),
    int16_version=2,
)
_declare("ELU", "elu")
# TFLite's GELU (its int8 kernel is a table; TFLite Micro has no GELU kernel)
_declare(
    "GELU",
    "gelu",
    options="GeluOptions",
    fields=(
        OptionField(
            "Approximate",
            "approximate",
            default=False,
            to_ir=lambda v: "tanh" if v else "none",
            to_tfl=lambda a: a == "tanh",
        ),
    ),
    int8_version=2,
)
# Unary math. TFLite's AbsOptions, NegOptions, SquareOptions, ExpOptions and CosOptions
# tables are empty; files may carry them, we write none.
_declare("ABS", "abs", options="AbsOptions", write_options=False, int8_version=2, int16_version=3)
_declare("NEG", "neg", options="NegOptions", write_options=False)
_declare("SQUARE", "square", options="SquareOptions", write_options=False)
_declare("SQRT", "sqrt")
_declare("RSQRT", "rsqrt", int8_version=2)
_declare("EXP", "exp", options="ExpOptions", write_options=False)
_declare("LOG", "log")
_declare("SIN", "sin")
_declare("COS", "cos", options="CosOptions", write_options=False)
_declare("FLOOR", "floor")
_declare("CEIL", "ceil")
_declare("ROUND", "round")
# Arithmetic. Their options tables are empty; files may carry them, we write none.
_declare("FLOOR_DIV", "floor_div", options="FloorDivOptions", write_options=False)
_declare("FLOOR_MOD", "floor_mod", options="FloorModOptions", write_options=False)
_declare("ADD_N", "add_n", options="AddNOptions", write_options=False)
_declare(
    "SQUARED_DIFFERENCE",
    "squared_difference",
    options="SquaredDifferenceOptions",
    write_options=False,
    int8_version=2,
    int16_version=3,
)
# Comparisons (bool results). Their options tables are empty; files may carry them, we write none.
for _name, _op in (("EQUAL", "equal"), ("NOT_EQUAL", "not_equal"), ("GREATER", "greater"),
                   ("GREATER_EQUAL", "greater_equal"), ("LESS", "less"), ("LESS_EQUAL", "less_equal")):  # fmt: skip
    _opts = "".join(w.capitalize() for w in _name.split("_")) + "Options"
    _declare(_name, _op, options=_opts, write_options=False, int8_version=2)
for _name, _op in (("LOGICAL_AND", "logical_and"), ("LOGICAL_OR", "logical_or"), ("LOGICAL_NOT", "logical_not")):
    _declare(_name, _op, options="".join(w.capitalize() for w in _name.split("_")) + "Options", write_options=False)
_declare("SELECT_V2", "select_v2", options="SelectV2Options", write_options=False)
_declare("RESHAPE", "reshape", options="ReshapeOptions")
_declare(
    "SOFTMAX",
    "softmax",
    options="SoftmaxOptions",
    fields=(OptionField("Beta", "beta", default=1.0, to_ir=_f32),),
    int8_version=2,
    int16_version=3,
)
# normalizes the last axis, as SOFTMAX; its LogSoftmaxOptions table is empty, we write none
_declare("LOG_SOFTMAX", "log_softmax", options="LogSoftmaxOptions", write_options=False, int8_version=2)
# the last axis, as SOFTMAX; L2NormOptions' only field is an activation TFLite Micro requires
# to be NONE, so we write none
_declare("L2_NORMALIZATION", "l2_normalize", options="L2NormOptions", write_options=False, int8_version=2)
_declare("QUANTIZE", "quantize", "requantize", options="QuantizeOptions", int8_version=2, int16_version=3)
# DEQUANTIZE also widens float16 weights to float32, which the IR calls a cast.
_declare("DEQUANTIZE", "dequantize", "cast", options="DequantizeOptions", int8_version=2, int16_version=4)
_declare("CAST", "cast", options="CastOptions", fields=(OptionField("InDataType"), OptionField("OutDataType")))
_declare("PAD", "pad", options="PadOptions", int8_version=2, int16_version=4)
_declare(
    "CONCATENATION",
    "concat",
    options="ConcatenationOptions",
    fields=(OptionField("Axis", "axis"),),
    int8_version=2,
    int16_version=3,
)
_declare(
    "MEAN",
    "mean",
    options="ReducerOptions",
    fields=(OptionField("KeepDims", "keepdims", default=False, to_ir=bool, to_tfl=bool),),
    int8_version=2,
    int16_version=3,
)
# Reductions over constant axes (an input tensor, read by their converters and rules)
for _name, _op in (("SUM", "sum"), ("REDUCE_MAX", "reduce_max"), ("REDUCE_MIN", "reduce_min")):
    _declare(
        _name,
        _op,
        options="ReducerOptions",
        fields=(OptionField("KeepDims", "keepdims", default=False, to_ir=bool, to_tfl=bool),),
        int8_version=2,
        int16_version=3,
    )
# bool in and out (the reductions' axes input, converter and rule)
_declare(
    "REDUCE_ALL",
    "reduce_all",
    options="ReducerOptions",
    fields=(OptionField("KeepDims", "keepdims", default=False, to_ir=bool, to_tfl=bool),),
)
# the axis is an input tensor (its converter and rule), float32 and int8 in TFLite Micro
_declare(
    "CUMSUM",
    "cumsum",
    options="CumsumOptions",
    fields=(
        OptionField("Exclusive", "exclusive", default=False, to_ir=bool, to_tfl=bool),
        OptionField("Reverse", "reverse", default=False, to_ir=bool, to_tfl=bool),
    ),
)
# ARG_MAX / ARG_MIN: the axis is an input tensor; OutputType follows the output's dtype
_declare("ARG_MAX", "argmax", options="ArgMaxOptions", fields=(OptionField("OutputType"),), int8_version=2)
_declare("ARG_MIN", "argmin", options="ArgMinOptions", fields=(OptionField("OutputType"),), int8_version=2)
_declare("TRANSPOSE", "transpose", options="TransposeOptions", int8_version=2, int16_version=5)
_declare("STRIDED_SLICE", "slice", options="StridedSliceOptions", int8_version=2, int16_version=4)
# a stride-1 slice (begin and size tensors), as converters write tf.slice; its SliceOptions table
# is empty, we write none. The exporter's slice rule picks among SLICE, REVERSE_V2, STRIDED_SLICE.
_declare("SLICE", "slice", options="SliceOptions", write_options=False, int8_version=2, int16_version=4)
# Data movement (ir/ops/movement.py and the layout ops they map to). Options tables without
# fields (ExpandDims, ReverseV2, PadV2, SpaceToBatchND, BatchToSpaceND, BroadcastTo) may be
# in a file; we write none.
_MIRROR_MODES = {0: "reflect", 1: "symmetric"}
_MIRROR_CODES = {v: k for k, v in _MIRROR_MODES.items()}
_declare("EXPAND_DIMS", "unsqueeze", options="ExpandDimsOptions", write_options=False)
_declare("SQUEEZE", "squeeze", options="SqueezeOptions")  # SqueezeDims is a vector: converter and rule
_declare(
    "PACK",
    "stack",
    options="PackOptions",
    fields=(OptionField("ValuesCount"), OptionField("Axis", "axis")),
    int8_version=2,
    int16_version=3,
)
_declare(
    "UNPACK",
    "unstack",
    options="UnpackOptions",
    fields=(OptionField("Num", "num"), OptionField("Axis", "axis")),
    int8_version=2,
    int16_version=4,
)
_declare("SPLIT", "split", options="SplitOptions", fields=(OptionField("NumSplits"),), int8_version=2, int16_version=4)
_declare(
    "SPLIT_V", "split", options="SplitVOptions", fields=(OptionField("NumSplits"),), int8_version=2, int16_version=3
)
_declare("REVERSE_V2", "slice", options="ReverseV2Options", write_options=False, int8_version=3)
_declare("PADV2", "pad", options="PadV2Options", write_options=False, int8_version=2, int16_version=3)
_declare(
    "MIRROR_PAD",
    "mirror_pad",
    options="MirrorPadOptions",
    fields=(OptionField("Mode", "mode", to_ir=_MIRROR_MODES.__getitem__, to_tfl=_MIRROR_CODES.__getitem__),),
    int8_version=2,
    int16_version=3,
)
_declare(
    "SPACE_TO_DEPTH",
    "space_to_depth",
    options="SpaceToDepthOptions",
    fields=(OptionField("BlockSize", "block_size"),),
    int8_version=2,
)
_declare(
    "DEPTH_TO_SPACE",
    "depth_to_space",
    options="DepthToSpaceOptions",
    fields=(OptionField("BlockSize", "block_size"),),
    int8_version=2,
)
_declare(
    "SPACE_TO_BATCH_ND",
    "space_to_batch_nd",
    options="SpaceToBatchNDOptions",
    write_options=False,
    int8_version=2,
    int16_version=4,
)
_declare(
    "BATCH_TO_SPACE_ND",
    "batch_to_space_nd",
    options="BatchToSpaceNDOptions",
    write_options=False,
    int8_version=2,
    int16_version=4,
)
_declare("BROADCAST_TO", "broadcast_to", options="BroadcastToOptions", write_options=False, int8_version=2)
_declare(
    "GATHER",
    "gather",
    options="GatherOptions",
    fields=(OptionField("Axis", "axis"), OptionField("BatchDims", "batch_dims")),
    int8_version=2,
)
_declare("GATHER_ND", "gather_nd", options="GatherNdOptions", write_options=False)
# rows of a table picked by an index vector: gather along axis 0 (inputs swapped: tflite.py);
# the exporter writes every gather as GATHER
_declare("EMBEDDING_LOOKUP", "gather")
_declare(
    "RESIZE_NEAREST_NEIGHBOR",
    "resize_nearest_neighbor",
    options="ResizeNearestNeighborOptions",
    fields=(
        OptionField("AlignCorners", "align_corners", default=False, to_ir=bool, to_tfl=bool),
        OptionField("HalfPixelCenters", "half_pixel_centers", default=False, to_ir=bool, to_tfl=bool),
    ),
    int8_version=2,
    int16_version=4,
)
_declare(
    "RESIZE_BILINEAR",
    "resize_bilinear",
    options="ResizeBilinearOptions",
    fields=(
        OptionField("AlignCorners", "align_corners", default=False, to_ir=bool, to_tfl=bool),
        OptionField("HalfPixelCenters", "half_pixel_centers", default=False, to_ir=bool, to_tfl=bool),
    ),
    int8_version=2,
    int16_version=4,
)
# its variable state tensor becomes a graph input/output pair: converter and export rule in
# tflite.py and _tflite_export.py; AsymmetricQuantizeInputs concerns hybrid kernels only
_declare(
    "SVDF",
    "svdf",
    options="SVDFOptions",
    fields=(OptionField("Rank", "rank", default=1), _ACT, OptionField("AsymmetricQuantizeInputs", default=False)),
    int8_version=3,
)
# inputs (output shape, weights, input, bias): converter and export rule in tflite.py and
# _tflite_export.py; QuantizedBiasType is left 0 (the bias tensor's own type decides)
_declare(
    "TRANSPOSE_CONV",
    "transpose_conv2d",
    options="TransposeConvOptions",
    fields=(*_WINDOW, _ACT, OptionField("QuantizedBiasType")),
    options_required=True,
    int8_version=3,
)
# hidden and cell state become graph input/output pairs as SVDF's (converter in tflite.py, export
# rule in _tflite_export.py); FusedActivationFunction is the cell gate's (TANH: the import checks it)
_declare(
    "UNIDIRECTIONAL_SEQUENCE_LSTM",
    "lstm",
    options="UnidirectionalSequenceLSTMOptions",
    fields=(
        OptionField("FusedActivationFunction"),
        OptionField("CellClip", "cell_clip", default=0.0, to_ir=_f32, to_tfl=_f32),
        OptionField("ProjClip", default=0.0),
        OptionField("TimeMajor", "time_major", default=False, to_ir=bool, to_tfl=bool),
        OptionField("AsymmetricQuantizeInputs", default=False),
        OptionField("DiagonalRecurrentTensors", default=False),
    ),
)
# control flow: the subgraph indices are not attributes (the subgraphs are): converters in
# tflite.py and export rules in _tflite_export.py read and write them
_declare("IF", "if_", options="IfOptions", fields=(OptionField("ThenSubgraphIndex"), OptionField("ElseSubgraphIndex")))
_declare(
    "WHILE",
    "while_",
    options="WhileOptions",
    fields=(OptionField("CondSubgraphIndex"), OptionField("BodySubgraphIndex")),
)
# runs its init subgraph once; without resource variables that does nothing, so the importer
# checks the subgraph and adds no node (tflite.py); the exporter never writes it
_declare("CALL_ONCE", options="CallOnceOptions", write_options=False, folded=True)
# Shape-only builtins: folded to constants at import (tflite.py)
_declare("SHAPE", options="ShapeOptions", write_options=False, folded=True)
_declare("ZEROS_LIKE", options="ZerosLikeOptions", write_options=False, folded=True)
_declare("FILL", options="FillOptions", write_options=False, folded=True)
_declare("BROADCAST_ARGS", folded=True)


# the inverse, derived -------------------------------------------------------------------------
def _inverse() -> dict[str, tuple[Builtin, ...]]:
    out: dict[str, tuple[Builtin, ...]] = {}
    for _, b in BUILTINS.items():
        for op in b.ir_ops:
            out[op] = (*out.get(op, ()), b)
    return out


_EXPORTED_AS = _inverse()


def exported_as(op: str) -> tuple[Builtin, ...]:
    """The builtins that write IR op ``op`` (empty when TFLite has none); an op's rule picks among several."""
    return _EXPORTED_AS.get(op, ())


# custom operators -----------------------------------------------------------------------------
@dataclass(frozen=True)
class CustomOp:
    """A TFLite custom operator (the CUSTOM builtin, named by its custom code) and the IR op it is.

    Its options are a flexbuffer map; ``options`` pairs each key with the IR attribute it carries
    (``None``: a key the import and export rules handle themselves). Keys absent from a file take
    the attribute's default, as the kernel's ``IsNull`` checks do.
    """

    code: str  # the custom code, e.g. "TFLite_Detection_PostProcess"
    ir_op: str
    options: tuple[tuple[str, str | None], ...]

    @property
    def opname(self) -> str:
        """The importer's name for the operator (what ``inspect`` reports)."""
        return f"CUSTOM:{self.code}"


CUSTOM_OPS: dict[str, CustomOp] = {
    c.opname: c
    for c in (
        CustomOp(
            "TFLite_Detection_PostProcess",
            "detection_postprocess",
            (
                ("max_detections", "max_detections"),
                ("max_classes_per_detection", None),  # 1 only (ir/ops/detection.py says why)
                ("detections_per_class", "detections_per_class"),
                ("use_regular_nms", "use_regular_nms"),
                ("nms_score_threshold", "score_threshold"),
                ("nms_iou_threshold", "iou_threshold"),
                ("num_classes", "num_classes"),
                ("y_scale", "y_scale"),
                ("x_scale", "x_scale"),
                ("h_scale", "h_scale"),
                ("w_scale", "w_scale"),
            ),
        ),
    )
}
for _c in CUSTOM_OPS.values():
    get_op(_c.ir_op)
CUSTOM_EXPORTED_AS = {c.ir_op: c for c in CUSTOM_OPS.values()}
EXPORTED_OPS = frozenset(_EXPORTED_AS) | frozenset(CUSTOM_EXPORTED_AS)  # the IR ops some operator writes
