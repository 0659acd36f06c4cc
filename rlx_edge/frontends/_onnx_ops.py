"""ONNX op handlers: one function per ONNX op type, registered in the rule table ``HANDLERS``.

A handler reads its inputs through the :class:`Importer` in the layout it
needs (``imp.plain`` for ONNX layout, ``imp.rt(v, NHWC)`` for spatial ops,
``v.perm`` to follow whatever layout the value is held in), emits MIR nodes,
and records its outputs with ``imp.set_out`` together with their layout.
Anything it cannot express raises :class:`Unsupported` with a reason.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import onnx

from rlx_edge.errors import shorten
from rlx_edge.frontends._onnx_import import (
    NHWC,
    ONNX_DTYPES,
    Importer,
    Invalid,
    Perm,
    Unsupported,
    Value,
    compose,
    drop_axes,
    internal_axis,
    inverse,
)
from rlx_edge.ir.dtype import DType, from_numpy
from rlx_edge.ir.ops.conv import transpose_conv_pads
from rlx_edge.ir.rules import RuleTable
from rlx_edge.ir.types import QuantParams, TensorType

Handler = Callable[[Importer, onnx.NodeProto, dict[str, Any]], None]
HANDLERS: RuleTable[Handler] = RuleTable("onnx import", what="ONNX op")

# An "open" slice bound the slice op accepts even on symbolic dimensions.
_OPEN = 2**31 - 1
_DW_PERM = (1, 2, 3, 0)  # ONNX depthwise weight [C*M,1,KH,KW] -> [1,KH,KW,C*M]


def _axis(a: int, rank: int, what: str = "axis") -> int:
    if not -rank <= a < max(rank, 1):
        raise Unsupported(f"{what} {a} is out of range for rank {rank}")
    return a % max(rank, 1)


def _runtime(imp: Importer, node: onnx.NodeProto, i: int = 0) -> Value:
    v = imp.val(node, i)
    if v is None:
        raise Unsupported(f"input {i} is required")
    return v


def _only_first_output(node: onnx.NodeProto, what: str) -> None:
    extra = [o for o in node.output[1:] if o]
    if extra:
        raise Unsupported(f"{what} output(s) {', '.join(extra)} are not supported (inference outputs only)")


def _static(shape: Sequence, what: str) -> tuple[int, ...]:
    syms = [d for d in shape if isinstance(d, str)]
    if syms:
        raise Unsupported(f"{what} needs static dimensions, got symbol(s) {', '.join(syms)}")
    return tuple(int(d) for d in shape)


def _shape_attr(shape: Sequence) -> tuple[int, ...]:
    """An output shape for the reshape op; a symbolic leading (batch) dim becomes -1."""
    syms = [i for i, d in enumerate(shape) if isinstance(d, str)]
    if not syms:
        return tuple(int(d) for d in shape)
    if syms != [0] or -1 in shape[1:]:
        raise Unsupported(f"reshape to {list(shape)} with symbolic dimensions; only a symbolic batch dim is supported")
    return (-1, *(int(d) for d in shape[1:]))


# elementwise -------------------------------------------------------------------------------
def align(imp: Importer, vals: Sequence[Value], quants: Sequence[QuantParams] | None = None) -> tuple[list[str], Perm]:
    """Graph values for broadcasting operands, in one common layout.

    When a full-rank operand is held permuted (an NHWC image), the others
    follow it: constants are broadcast to full rank and permuted at import,
    runtime values of full rank are transposed. A runtime operand of lower
    rank cannot follow a permutation, so then everything goes back to ONNX layout.
    ``quants`` (per-tensor, one per operand) types quantized operands, as
    :func:`ensure_quant` does.
    """
    rank = max(imp.rank(v) for v in vals)
    target: Perm = None
    for v in vals:
        if not v.is_const and v.perm is not None and imp.rank(v) == rank:
            target = v.perm
            break
    if target is not None and any(not v.is_const and imp.rank(v) != rank for v in vals):
        target = None
    names = []
    for v in vals:
        if target is not None and v.is_const and v.const.ndim < rank:  # type: ignore[union-attr]
            c = v.const
            v = Value(const=c.reshape((1,) * (rank - c.ndim) + c.shape))  # type: ignore[union-attr]
        names.append(imp.rt(v, target) if quants is None else ensure_quant(imp, v, quants[len(names)], target))
    return names, target


def _binary(op: str) -> Handler:
    def handler(imp: Importer, node: onnx.NodeProto, a: dict[str, Any]) -> None:
        vals = [imp.vals[i] for i in node.input if i]
        if len(vals) == 1:  # Max/Min of one input is that input
            imp.vals[node.output[0]] = vals[0]
            return
        names, perm = align(imp, vals)
        out = names[0]
        for k, other in enumerate(names[1:], 1):
            last = k == len(names) - 1
            out = imp.emit(op, [out, other], base=imp.out_base(node, 0, perm) if last else None)
        imp.set_out(node, 0, out, perm)

    return handler


for _onnx_op, _ir_op in (
    ("Add", "add"),
    ("Sub", "sub"),
    ("Mul", "mul"),
    ("Div", "div"),
    ("Max", "maximum"),
    ("Min", "minimum"),
    ("PRelu", "prelu"),
):
    HANDLERS.add(_onnx_op, _binary(_ir_op))


def _unary(op: str, attrs_fn: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> Handler:
    def handler(imp: Importer, node: onnx.NodeProto, a: dict[str, Any]) -> None:
        v = _runtime(imp, node)
        attrs = attrs_fn(a) if attrs_fn else {}
        out = imp.emit(op, [imp.rt(v, v.perm)], attrs, base=imp.out_base(node, 0, v.perm))
        imp.set_out(node, 0, out, v.perm)

    return handler


HANDLERS.add("Relu", _unary("relu"))
HANDLERS.add("Sigmoid", _unary("sigmoid"))
HANDLERS.add("Tanh", _unary("tanh"))
HANDLERS.add("HardSwish", _unary("hard_swish"))
HANDLERS.add("LeakyRelu", _unary("leaky_relu", lambda a: {"alpha": a.get("alpha", 0.01)}))
HANDLERS.add("Gelu", _unary("gelu", lambda a: {"approximate": a.get("approximate", "none")}))
for _name in ("Abs", "Neg", "Sqrt", "Exp", "Log", "Sin", "Cos", "Floor", "Ceil", "Round"):
    HANDLERS.add(_name, _unary(_name.lower()))


def _elu_attrs(a: dict[str, Any]) -> dict[str, Any]:
    if float(a.get("alpha", 1.0)) != 1.0:
        raise Unsupported(f"Elu with alpha {a['alpha']} is not supported (alpha 1 only, as TFLite's ELU)")
    return {}


HANDLERS.add("Elu", _unary("elu", _elu_attrs))


@HANDLERS.rule("Identity", "Dropout")
def _identity(imp: Importer, node: onnx.NodeProto, a: dict[str, Any]) -> None:
    if node.op_type == "Dropout":
        _only_first_output(node, "Dropout mask")
        mode = imp.val(node, 2)
        if mode is not None and (not mode.is_const or bool(np.asarray(mode.const).reshape(-1)[0])):
            raise Unsupported("training mode Dropout is not supported (inference only)")
    imp.vals[node.output[0]] = imp.vals[node.input[0]]


@HANDLERS.rule("Clip")
def _clip(imp: Importer, node: onnx.NodeProto, a: dict[str, Any]) -> None:
    v = _runtime(imp, node)
    if imp.opset < 11:
        lo, hi = float(a.get("min", -np.inf)), float(a.get("max", np.inf))
    else:
        lo_c = imp.const_input(node, 1, "Clip min")
        hi_c = imp.const_input(node, 2, "Clip max")
        lo = -np.inf if lo_c is None else float(np.asarray(lo_c).reshape(-1)[0])
        hi = np.inf if hi_c is None else float(np.asarray(hi_c).reshape(-1)[0])
    x = imp.rt(v, v.perm)
    base = imp.out_base(node, 0, v.perm)
    if lo == 0 and hi == 6:
        out = imp.emit("relu6", [x], base=base)
    elif lo == 0 and hi == np.inf:
        out = imp.emit("relu", [x], base=base)
    else:
        out = imp.emit("clamp", [x], {"min": lo, "max": hi}, base=base)
    imp.set_out(node, 0, out, v.perm)


@HANDLERS.rule("Cast")
def _cast(imp: Importer, node: onnx.NodeProto, a: dict[str, Any]) -> None:
    v = _runtime(imp, node)
    to = int(a["to"])
    if to not in ONNX_DTYPES:
        raise Unsupported(f"cast to {onnx.TensorProto.DataType.Name(to)} is not supported")
    out = imp.emit("cast", [imp.rt(v, v.perm)], {"dtype": ONNX_DTYPES[to]}, base=imp.out_base(node, 0, v.perm))
    imp.set_out(node, 0, out, v.perm)


# convolution and matrix products --------------------------------------------------------------
def _window(
    imp: Importer, a: dict[str, Any], x_shape: Sequence, kernel: Sequence[int], *, ceil_mode: bool = False
) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int, int, int]]:
    """Strides, dilations and (top, bottom, left, right) pads of a 2-D window op from ONNX attributes."""
    strides = tuple(a.get("strides", (1, 1)))
    dil = tuple(a.get("dilations", (1, 1)))
    if len(kernel) != 2 or len(strides) != 2 or len(dil) != 2:
        raise Unsupported("only 2-D windows (4-D NCHW inputs) are supported")
    for what, values in (("kernel_shape", kernel), ("strides", strides), ("dilations", dil)):
        if min(values) < 1:
            raise Invalid(f"{what} {list(values)} must be positive")
    h, w = _static(x_shape[2:], "window input height/width")
    auto = a.get("auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        pads = []
        for size, k, s, d in ((h, kernel[0], strides[0], dil[0]), (w, kernel[1], strides[1], dil[1])):
            out = -(-size // s)
            total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
            small = total // 2
            pads.append((small, total - small) if auto == "SAME_UPPER" else (total - small, small))
        p = [pads[0][0], pads[0][1], pads[1][0], pads[1][1]]
    elif auto == "VALID":
        p = [0, 0, 0, 0]
    elif auto == "NOTSET":
        onnx_pads = list(a.get("pads", (0, 0, 0, 0)))
        if len(onnx_pads) != 4:
            raise Unsupported(f"pads {onnx_pads} must have 4 entries for a 2-D window")
        p = [onnx_pads[0], onnx_pads[2], onnx_pads[1], onnx_pads[3]]
    else:
        raise Unsupported(f"auto_pad={auto!r} is not supported")
    if ceil_mode:
        # ceil mode = floor mode with extra padding at the end; a window that would
        # start in the end padding is dropped, as ONNX does
        for i, (size, k, s, d) in enumerate(((h, kernel[0], strides[0], dil[0]), (w, kernel[1], strides[1], dil[1]))):
            b, e = p[2 * i], p[2 * i + 1]
            eff = (k - 1) * d + 1
            out = -(-(size + b + e - eff) // s) + 1
            if (out - 1) * s >= size + b:
                out -= 1
            p[2 * i + 1] = e + max((out - 1) * s + eff - (size + b + e), 0)
    return strides, dil, tuple(p)  # type: ignore[return-value]


def _padding_attrs(pads: Sequence[int]) -> dict[str, Any]:
    return {"padding": "valid"} if not any(pads) else {"padding": "explicit", "pads": tuple(pads)}


@HANDLERS.rule("Conv")
def _conv(imp: Importer, node: onnx.NodeProto, a: dict[str, Any]) -> None:
    x, w = _runtime(imp, node, 0), _runtime(imp, node, 1)
    b = imp.val(node, 2)
    if imp.rank(x) != 4:
        raise Unsupported(f"only 2-D convolution (4-D NCHW input) is supported, input has rank {imp.rank(x)}")
    if imp.rank(w) != 4:
        raise Invalid(f"weight has rank {imp.rank(w)}, but a 4-D input needs a 4-D weight [O, I/group, KH, KW]")
    xs = imp.onnx_shape(x)
    o, ig, kh, kw = _static(imp.onnx_shape(w), "Conv weight")
    kernel = tuple(a.get("kernel_shape", (kh, kw)))
    strides, dil, pads = _window(imp, a, xs, kernel)
    group = int(a.get("group", 1))
    c = xs[1]
    attrs: dict[str, Any] = {"strides": strides, "dilations": dil, **_padding_attrs(pads)}
    base = imp.out_base(node, 0, NHWC)
    bias = None if b is None else imp.plain(b)
    if group > 1 and group == c and ig == 1:
        # ONNX depthwise weight [C*M,1,KH,KW]: output channel c*M+m reads input channel c, as the IR's does
        out = imp.emit(
            "depthwise_conv2d",
            [imp.rt(x, NHWC), imp.rt(w, _DW_PERM), bias],
            {**attrs, "depth_multiplier": o // group},
            base=base,
        )
    else:
        out = imp.emit("conv2d", [imp.rt(x, NHWC), imp.rt(w, NHWC), bias], {**attrs, "groups": group}, base=base)
    imp.set_out(node, 0, out, NHWC)


def _conv_transpose_geometry(a: dict[str, Any], size: int, k: int, s: int, i: int) -> tuple[int, int]:
    """(output size, rows cut off the top of the full canvas) of one spatial axis ``i`` of ConvTranspose,
    as onnxruntime distributes the padding (SAME_UPPER puts the odd row at the end, otherwise the start)."""
    out_pad = int(a.get("output_padding", (0, 0))[i])
    canvas = s * (size - 1) + k + out_pad
    auto = a.get("auto_pad", "NOTSET")
    if "output_shape" in a or auto in ("SAME_UPPER", "SAME_LOWER"):
        out = int(a["output_shape"][-2 + i]) if "output_shape" in a else size * s
        total = canvas - out
        return out, (total // 2 if auto == "SAME_UPPER" else total - total // 2)
    if auto == "VALID":
        return canvas, 0
    if auto != "NOTSET":
        raise Unsupported(f"auto_pad={auto!r} is not supported")
    pads = list(a.get("pads", (0, 0, 0, 0)))
    return canvas - pads[i] - pads[2 + i], pads[i]


@HANDLERS.rule("ConvTranspose")
def _conv_transpose(imp: Importer, node: onnx.NodeProto, a: dict[str, Any]) -> None:
    """transpose_conv2d: weight [I, O, KH, KW] -> [O, KH, KW, I]; the top and left rows ONNX's padding
    cuts off become TFLite's SAME padding where they are that, else a slice of the VALID result."""
    x, w = _runtime(imp, node, 0), _runtime(imp, node, 1)
    b = imp.val(node, 2)
    if imp.rank(x) != 4 or imp.rank(w) != 4:
        raise Unsupported("only 2-D ConvTranspose (4-D NCHW input and weight) is supported")
    if int(a.get("group", 1)) != 1 or tuple(a.get("dilations", (1, 1))) != (1, 1):
        raise Unsupported("ConvTranspose with groups or dilations is not supported")
    n, _, h, wd = _static(imp.onnx_shape(x), "ConvTranspose input")
    _, o, kh, kw = _static(imp.onnx_shape(w), "ConvTranspose weight")
    strides = tuple(int(v) for v in a.get("strides", (1, 1)))
    (oh, top), (ow, left) = (_conv_transpose_geometry(a, size, k, s, i)
                             for i, (size, k, s) in enumerate(((h, kh, strides[0]), (wd, kw, strides[1]))))  # fmt: skip
    if min(oh, ow) < 1 or min(top, left) < 0:
        raise Unsupported(f"ConvTranspose with output {oh}x{ow} and padding {top}, {left} is not supported")
    ins = [imp.rt(x, NHWC), imp.rt(w, _DW_PERM), None if b is None else imp.plain(b)]
    base = imp.out_base(node, 0, NHWC)
    if (top, left) == transpose_conv_pads((oh, ow), (kh, kw), strides, "same"):
        attrs = {"output_shape": (n, oh, ow, o), "strides": strides, "padding": "same"}
        out = imp.emit("transpose_conv2d", ins, attrs, base=base)
    else:
        attrs = {"output_shape": (n, top + oh, left + ow, o), "strides": strides, "padding": "valid"}
        full = imp.emit("transpose_conv2d", ins, attrs)
        cut = {"begin": (0, top, left, 0), "end": (n, top + oh, left + ow, o)}
        out = imp.emit("slice", [full], cut, base=base)
    imp.set_out(node, 0, out, NHWC)


def _scalar_const(imp: Importer, value: float, like: DType) -> str:
    return imp.param(np.asarray(value, dtype=like.numpy))


@HANDLERS.rule("Gemm")
def _gemm(imp: Importer, node: onnx.NodeProto, a: dict[str, Any]) -> None:
    av, bv, cv = _runtime(imp, node, 0), _runtime(imp, node, 1), imp.val(node, 2)
    if imp.rank(av) != 2 or imp.rank(bv) != 2:
        raise Invalid(f"A and B must be matrices, got ranks {imp.rank(av)} and {imp.rank(bv)}")
    alpha, beta = float(a.get("alpha", 1.0)), float(a.get("beta", 1.0))
    ta, tb = int(a.get("transA", 0)), int(a.get("transB", 0))
    dt = imp.dtype(av)
    if bv.is_const and not ta and dt.is_float:
        w = bv.const if tb else bv.const.T  # type: ignore[union-attr]
        w = (w * alpha).astype(w.dtype) if alpha != 1 else w
        n = w.shape[0]
        bias = None
        c_const = None if cv is None or not cv.is_const else cv.const * beta
        if c_const is not None and c_const.shape in ((), (1,), (n,), (1, n)):
            bias = imp.param(np.broadcast_to(c_const.reshape(-1), (n,)).astype(c_const.dtype))
        fc_base = imp.out_base(node) if cv is None or bias is not None else None
        y = imp.emit("fully_connected", [imp.plain(av), imp.param(w), bias], base=fc_base)
        if cv is not None and bias is None:
            y = _add_c(imp, node, y, cv, beta, dt)
        imp.set_out(node, 0, y)
        return
    am = imp.plain(av)
    bm = imp.plain(bv)
    if ta:
        am = imp.transpose(am, (1, 0))
    if tb:
        bm = imp.transpose(bm, (1, 0))
    y = imp.emit("matmul", [am, bm], base=imp.out_base(node) if cv is None and alpha == 1 else None)
    if alpha != 1:
        y = imp.emit("mul", [y, _scalar_const(imp, alpha, dt)], base=imp.out_base(node) if cv is None else None)
    if cv is not None:
        y = _add_c(imp, node, y, cv, beta, dt)
    imp.set_out(node, 0, y)


def _add_c(imp: Importer, node: onnx.NodeProto, y: str, cv: Value, beta: float, dt: DType) -> str:
    if cv.is_const:
        c = imp.param((cv.const * beta).astype(cv.const.dtype))  # type: ignore[union-attr]
    else:
        c = imp.plain(cv)
        if beta != 1:
            c = imp.emit("mul", [c, _scalar_const(imp, beta, dt)])
    return imp.emit("add", [y, c], base=imp.out_base(node))


@HANDLERS.rule("MatMul")
def _matmul(imp: Importer, node: onnx.NodeProto, a: dict[str, Any]) -> None:
    av, bv = _runtime(imp, node, 0), _runtime(imp, node, 1)
    if bv.is_const and bv.const.ndim == 2 and imp.dtype(av).is_float:  # type: ignore[union-attr]
        # a constant [K, N] right operand is a dense layer with weights [N, K]
        w = imp.param(np.ascontiguousarray(bv.const.T))  # type: ignore[union-attr]
        y = imp.emit("fully_connected", [imp.plain(av), w], base=imp.out_base(node))
    else:
        y = imp.emit("matmul", [imp.plain(av), imp.plain(bv)], base=imp.out_base(node))
    imp.set_out(node, 0, y)


# pooling ------------------------------------------------------------------------------------------
@HANDLERS.rule("MaxPool", "AveragePool")
def _pool(imp: Importer, node: onnx.NodeProto, a: dict[str, Any]) -> None:
    x = _runtime(imp, node)
    _only_first_output(node, "MaxPool Indices")
    if imp.rank(x) != 4:
        raise Unsupported(f"only 2-D pooling (4-D NCHW input) is supported, input has rank {imp.rank(x)}")
    if any(d != 1 for d in a.get("dilations", (1, 1))):
        raise Unsupported(f"pooling with dilations {list(a['dilations'])} is not supported")
    kernel = tuple(a["kernel_shape"])
    ceil_mode = bool(a.get("ceil_mode", 0))
    strides, _, pads = _window(imp, a, imp.onnx_shape(x), kernel, ceil_mode=ceil_mode)
    if node.op_type == "AveragePool" and a.get("count_include_pad", 0) and any(pads):
        raise Unsupported("count_include_pad=1 with padding is not supported (the IR's average pool excludes padding)")
    op = "max_pool2d" if node.op_type == "MaxPool" else "avg_pool2d"
    attrs = {"kernel": kernel, "strides": strides, **_padding_attrs(pads)}
    out = imp.emit(op, [imp.rt(x, NHWC)], attrs, base=imp.out_base(node, 0, NHWC))
    imp.set_out(node, 0, out, NHWC)


@HANDLERS.rule("GlobalAveragePool")
def _gap(imp: Importer, node: onnx.NodeProto, a: dict[str, Any]) -> None:
    x = _runtime(imp, node)
    if imp.rank(x) != 4:
        raise Unsupported(f"only 4-D NCHW input is supported, input has rank {imp.rank(x)}")
    out = imp.emit("global_avg_pool", [imp.rt(x, NHWC)], base=imp.out_base(node, 0, NHWC))
    imp.set_out(node, 0, out, NHWC)


# reductions and normalizations --------------------------------------------------------------------
def _axes_of(imp: Importer, node: onnx.NodeProto, a: dict[str, Any], input_index: int) -> list[int] | None:
    """Axes from the attribute (older opsets) or the optional input (newer)."""
    c = imp.const_input(node, input_index, "axes")
    if c is not None:
        return [int(v) for v in np.asarray(c).reshape(-1)]
    if "axes" in a:
        return [int(v) for v in a["axes"]]
    return None


# ONNX reduction -> (elementwise op before, IR reduction, elementwise op after); the composite
# ones are their ONNX definitions: sum of squares, sum of magnitudes, root of the sum of squares
_REDUCE_OPS: dict[str, tuple[str | None, str, str | None]] = {
    "ReduceMean": (None, "mean", None),
    "ReduceSum": (None, "sum", None),
    "ReduceMax": (None, "reduce_max", None),
    "ReduceMin": (None, "reduce_min", None),
    "ReduceSumSquare": ("square", "sum", None),
    "ReduceL1": ("abs", "sum", None),
    "ReduceL2": ("square", "sum", "sqrt"),
}


@HANDLERS.rule(*_REDUCE_OPS)
def _reduce(imp: Importer, node: onnx.NodeProto, a: dict[str, Any]) -> None:
    x = _runtime(imp, node)
    r = imp.rank(x)
    axes = _axes_of(imp, node, a, 1)
    keep = bool(a.get("keepdims", 1))
    before, op, after = _REDUCE_OPS[node.op_type]
    if not axes:
        if a.get("noop_with_empty_axes", 0):
            if before or after:  # whether the elementwise part still applies is not settled between runtimes
                raise Unsupported(f"noop_with_empty_axes=1 without axes is not supported in {node.op_type}")
            imp.vals[node.output[0]] = x
            return
        axes = list(range(r))
    axes = sorted({_axis(v, r) for v in axes})
    iaxes = tuple(internal_axis(x.perm, v) for v in axes)
    perm = x.perm if keep else drop_axes(x.perm, axes)
    base = imp.out_base(node, 0, perm)
    y = imp.rt(x, x.perm)
    if before:
        y = imp.emit(before, [y])
    y = imp.emit(op, [y], {"axes": iaxes, "keepdims": keep}, base=None if after else base)
    if after:
        y = imp.emit(after, [y], base=base)
    imp.set_out(node, 0, y, perm)


@HANDLERS.rule("CumSum")
def _cumsum(imp: Importer, node: onnx.NodeProto, a: dict[str, Any]) -> None:
    x = _runtime(imp, node)
    c = imp.const_input(node, 1, "axis")
    if c is None or np.asarray(c).size != 1:
        raise Unsupported("CumSum needs a constant axis of one value")
    axis = _axis(int(np.asarray(c).reshape(-1)[0]), imp.rank(x))
    attrs = {"axis": internal_axis(x.perm, axis), "exclusive": bool(a.get("exclusive", 0)),
             "reverse": bool(a.get("reverse", 0))}  # fmt: skip
    out = imp.emit("cumsum", [imp.rt(x, x.perm)], attrs, base=imp.out_base(node, 0, x.perm))
    imp.set_out(node, 0, out, x.perm)


@HANDLERS.rule("ArgMax", "ArgMin")
def _argmax(imp: Importer, node: onnx.NodeProto, a: dict[str, Any]) -> None:
    x = _runtime(imp, node)
    if a.get("select_last_index", 0):
        raise Unsupported("select_last_index=1 is not supported (ties give the first index)")
    axis = _axis(int(a.get("axis", 0)), imp.rank(x))
    keep = bool(a.get("keepdims", 1))
    perm = x.perm if keep else drop_axes(x.perm, [axis])
    attrs = {"axis": internal_axis(x.perm, axis), "keepdims": keep, "dtype": "i64"}
    out = imp.emit(node.op_type.lower(), [imp.rt(x, x.perm)], attrs, base=imp.out_base(node, 0, perm))
    imp.set_out(node, 0, out, perm)


@HANDLERS.rule("Softmax", "LogSoftmax")
def _softmax(imp: Importer, node: onnx.NodeProto, a: dict[str, Any]) -> None:
    x = _runtime(imp, node)
    r = imp.rank(x)
    op = "softmax" if node.op_type == "Softmax" else "log_softmax"
    if imp.opset >= 13:
        axis = _axis(int(a.get("axis", -1)), r)
        out = imp.emit(
            op, [imp.rt(x, x.perm)], {"axis": internal_axis(x.perm, axis)}, base=imp.out_base(node, 0, x.perm)
        )
        imp.set_out(node, 0, out, x.perm)
        return
    # Before opset 13 the input is flattened to 2-D at `axis` and normalized over the second dimension.
    axis = _axis(int(a.get("axis", 1)), r)
    if axis == r - 1:
        out = imp.emit(
            op, [imp.rt(x, x.perm)], {"axis": internal_axis(x.perm, axis)}, base=imp.out_base(node, 0, x.perm)
        )
        imp.set_out(node, 0, out, x.perm)
        return
    shape = imp.onnx_shape(x)
    inner = math.prod(_static(shape[axis:], "Softmax (opset < 13) over trailing dimensions"))
    outer = shape[:axis]
    flat = _shape_attr((outer[0] if len(outer) == 1 else _prod_or_symbol(outer), inner))
    y = imp.emit("reshape", [imp.plain(x)], {"shape": flat})
    y = imp.emit(op, [y], {"axis": 1})
    y = imp.emit("reshape", [y], {"shape": _shape_attr(shape)}, base=imp.out_base(node))
    imp.set_out(node, 0, y)


def _prod_or_symbol(dims: Sequence) -> int | str:
    """Product of leading dims; a single symbol among static ones stays that symbol only if the rest are 1."""
    syms = [d for d in dims if isinstance(d, str)]
    if not syms:
        return math.prod(dims)
    if len(syms) == 1 and math.prod(d for d in dims if isinstance(d, int)) == 1:
        return syms[0]
    raise Unsupported(f"flattening dimensions {list(dims)} with symbols needs them bound first")


@HANDLERS.rule("BatchNormalization")
def _batch_norm(imp: Importer, node: onnx.NodeProto, a: dict[str, Any]) -> None:
    x = _runtime(imp, node)
    if a.get("training_mode", 0):
        raise Unsupported("training_mode=1 is not supported (inference only)")
    if not a.get("spatial", 1):
        raise Unsupported("spatial=0 (per-activation statistics) is not supported")
    _only_first_output(node, "BatchNormalization training")
    params = [imp.plain(_runtime(imp, node, i)) for i in range(1, 5)]
    axis = internal_axis(x.perm, 1) if imp.rank(x) >= 2 else 0
    attrs = {"epsilon": float(a.get("epsilon", 1e-5)), "axis": axis}
    out = imp.emit("batch_norm", [imp.rt(x, x.perm), *params], attrs, base=imp.out_base(node, 0, x.perm))
    imp.set_out(node, 0, out, x.perm)


@HANDLERS.rule("LayerNormalization")
def _layer_norm(imp: Importer, node: onnx.NodeProto, a: dict[str, Any]) -> None:
    x = _runtime(imp, node)
    _only_first_output(node, "LayerNormalization Mean/InvStdDev")
    shape = imp.onnx_shape(x)
    axis = _axis(int(a.get("axis", -1)), len(shape))
    trailing = shape[axis:]
    params: list[str | None] = []
    for i in (1, 2):
        p = imp.val(node, i)
        if p is None:
            params.append(None)
        elif p.is_const:
            # ONNX broadcasts scale/bias to the normalized dims; the IR wants them spelled out
            full = np.broadcast_to(p.const, _static(trailing, "LayerNormalization normalized dims"))  # type: ignore[arg-type]
            params.append(imp.param(np.ascontiguousarray(full)))
        else:
            params.append(imp.plain(p))
    attrs = {"axis": axis, "epsilon": float(a.get("epsilon", 1e-5))}
    out = imp.emit("layer_norm", [imp.plain(x), *params], attrs, base=imp.out_base(node))
    imp.set_out(node, 0, out)


# layout ops -----------------------------------------------------------------------------------------
@HANDLERS.rule("Reshape")
def _reshape(imp: Importer, node: onnx.NodeProto, a: dict[str, Any]) -> None:
    x = _runtime(imp, node)
    target = imp.const_input(node, 1, "Reshape shape")
    if target is None:
        raise Unsupported("Reshape needs a shape input")
    in_shape = imp.onnx_shape(x)
    allowzero = bool(a.get("allowzero", 0))
    dims: list[int | str] = []
    for i, d in enumerate(int(v) for v in np.asarray(target).reshape(-1)):
        if d == 0 and not allowzero:
            if i >= len(in_shape):
                raise Unsupported(f"shape entry {i} is 0 (copy) but the input has rank {len(in_shape)}")
            dims.append(in_shape[i])
        else:
            dims.append(d)
    out = imp.emit("reshape", [imp.plain(x)], {"shape": _reshape_dims(in_shape, dims)}, base=imp.out_base(node))
    imp.set_out(node, 0, out)


def _reshape_dims(in_shape: Sequence, dims: list) -> tuple[int, ...]:
    """Reshape target for the IR, resolving -1 against a symbolic batch dim copied through."""
    if any(isinstance(d, str) for d in dims) and -1 in dims:
        # e.g. [N, C, H, W] -> [0, -1]: the -1 is the static remainder
        rest_in = [d for d in in_shape if d not in [s for s in dims if isinstance(s, str)]]
        known = math.prod(d for d in dims if isinstance(d, int) and d != -1)
        total = math.prod(_static(rest_in, "reshape input"))
        dims = [total // known if d == -1 else d for d in dims]
    return _shape_attr(dims)


@HANDLERS.rule("Flatten")
def _flatten(imp: Importer, node: onnx.NodeProto, a: dict[str, Any]) -> None:
    x = _runtime(imp, node)
    shape = imp.onnx_shape(x)
    axis = int(a.get("axis", 1))
    axis = axis + len(shape) if axis < 0 else axis
    if not 0 <= axis <= len(shape):
        raise Unsupported(f"axis {a.get('axis')} is out of range for rank {len(shape)}")
    inner = math.prod(_static(shape[axis:], "Flatten trailing dimensions"))
    outer = _prod_or_symbol(shape[:axis]) if axis else 1
    out = imp.emit("reshape", [imp.plain(x)], {"shape": _shape_attr((outer, inner))}, base=imp.out_base(node))
    imp.set_out(node, 0, out)


@HANDLERS.rule("Transpose")
def _transpose(imp: Importer, node: onnx.NodeProto, a: dict[str, Any]) -> None:
    x = _runtime(imp, node)
    r = imp.rank(x)
    perm = tuple(int(p) for p in a.get("perm", range(r - 1, -1, -1)))
    if sorted(perm) != list(range(r)):
        raise Unsupported(f"perm {list(perm)} is not a permutation of rank {r}")
    # the value is held as onnx.T(x.perm); one transpose yields onnx.T(perm)
    q = perm if x.perm is None else compose(inverse(x.perm), perm)
    imp.set_out(node, 0, imp.transpose(x.name, q))  # type: ignore[arg-type]


def _common_perm(imp: Importer, vals: Sequence[Value]) -> Perm:
    for v in vals:
        if not v.is_const:
            return v.perm
    return None


@HANDLERS.rule("Concat")
def _concat(imp: Importer, node: onnx.NodeProto, a: dict[str, Any]) -> None:
    vals = [imp.vals[i] for i in node.input if i]
    if not vals:
        raise Invalid("Concat needs at least one input")
    r = imp.rank(vals[0])
    axis = _axis(int(a["axis"]), r)  # required: the attribute check has seen to it
    perm = _common_perm(imp, vals)
    names = [imp.rt(v, perm) for v in vals]
    attrs = {"axis": internal_axis(perm, axis)}
    out = imp.emit("concat", names, attrs, base=imp.out_base(node, 0, perm))
    imp.set_out(node, 0, out, perm)


@HANDLERS.rule("Split")
def _split(imp: Importer, node: onnx.NodeProto, a: dict[str, Any]) -> None:
    x = _runtime(imp, node)
    shape = imp.onnx_shape(x)
    axis = _axis(int(a.get("axis", 0)), len(shape))
    n_out = len(node.output)
    size = shape[axis]
    sizes_c = imp.const_input(node, 1, "Split sizes") if imp.opset >= 13 else None
    if sizes_c is not None:
        sizes = [int(v) for v in np.asarray(sizes_c).reshape(-1)]
    elif "split" in a:
        sizes = [int(v) for v in a["split"]]
    else:
        if isinstance(size, str):
            raise Unsupported(f"splitting symbolic dimension {size!r} needs explicit sizes")
        n = int(a.get("num_outputs", n_out))
        chunk = -(-size // n)
        # equal parts; with num_outputs (opset 18) the last one may be smaller
        sizes = [chunk] * (n - 1) + [size - chunk * (n - 1)]
    if len(sizes) != n_out:
        raise Unsupported(f"{len(sizes)} split sizes for {n_out} outputs")
    attrs = {"axis": internal_axis(x.perm, axis), "sizes": tuple(sizes)}
    outs = imp.emit_multi("split", [imp.rt(x, x.perm)], attrs, imp.out_base(node, 0, x.perm), n_out)
    for i, o in enumerate(outs):
        imp.set_out(node, i, o, x.perm)


@HANDLERS.rule("Slice")
def _slice(imp: Importer, node: onnx.NodeProto, a: dict[str, Any]) -> None:
    x = _runtime(imp, node)
    shape = imp.onnx_shape(x)
    r = len(shape)
    if imp.opset < 10:
        starts, ends = list(a["starts"]), list(a["ends"])
        axes = list(a.get("axes", range(len(starts))))
        steps = [1] * len(starts)
    else:
        starts = [int(v) for v in np.asarray(imp.const_input(node, 1, "Slice starts")).reshape(-1)]
        ends = [int(v) for v in np.asarray(imp.const_input(node, 2, "Slice ends")).reshape(-1)]
        ax_c = imp.const_input(node, 3, "Slice axes")
        st_c = imp.const_input(node, 4, "Slice steps")
        axes = list(range(len(starts))) if ax_c is None else [int(v) for v in np.asarray(ax_c).reshape(-1)]
        steps = [1] * len(starts) if st_c is None else [int(v) for v in np.asarray(st_c).reshape(-1)]
    begin, end, stride = [0] * r, [_OPEN] * r, [1] * r
    for s, e, ax, st in zip(starts, ends, axes, steps):
        ax = _axis(ax, r)
        if st == 0:
            raise Unsupported("Slice step 0 is invalid")
        begin[ax], end[ax], stride[ax] = _slice_bounds(shape[ax], s, e, st)
    perm = x.perm
    order = perm if perm is not None else tuple(range(r))
    attrs = {
        "begin": tuple(begin[p] for p in order),
        "end": tuple(end[p] for p in order),
        "strides": tuple(stride[p] for p in order),
    }
    out = imp.emit("slice", [imp.rt(x, perm)], attrs, base=imp.out_base(node, 0, perm))
    imp.set_out(node, 0, out, perm)


def _slice_bounds(dim: int | str, s: int, e: int, st: int) -> tuple[int, int, int]:
    """ONNX slice bounds of one axis as numpy slice bounds (clamped, never wrapping)."""
    if isinstance(dim, str):
        # only open bounds are meaningful on a symbol; the slice op checks the rest
        big = _OPEN
        return (max(min(s, big), -big), max(min(e, big), -big), st)
    if st > 0:
        s = min(max(s + dim if s < 0 else s, 0), dim)
        e = min(max(e + dim if e < 0 else e, 0), dim)
        return s, e, st
    s = min(max(s + dim if s < 0 else s, 0), dim - 1)
    e = min(max(e + dim if e < 0 else e, -1), dim - 1)
    # ONNX end -1 means "before element 0"; numpy's -1 would mean the last element
    return s, (-dim - 1 if e < 0 else e), st


@HANDLERS.rule("Pad")
def _pad(imp: Importer, node: onnx.NodeProto, a: dict[str, Any]) -> None:
    x = _runtime(imp, node)
    r = imp.rank(x)
    mode = a.get("mode", "constant")
    if mode not in ("constant", "reflect"):
        # edge repeats the border value and wrap the other side: neither is TFLite's MIRROR_PAD
        raise Unsupported(f"mode={mode!r} is not supported (constant or reflect padding)")
    if imp.opset < 11:
        pads = [int(v) for v in a.get("pads", a.get("paddings", ()))]
        value = float(a.get("value", 0.0))
        axes = list(range(r))
    else:
        pads = [int(v) for v in np.asarray(imp.const_input(node, 1, "Pad pads")).reshape(-1)]
        cv = imp.const_input(node, 2, "Pad constant_value")
        value = 0.0 if cv is None or np.asarray(cv).size == 0 else float(np.asarray(cv).reshape(-1)[0])
        ax_c = imp.const_input(node, 3, "Pad axes")
        axes = list(range(r)) if ax_c is None else [_axis(int(v), r) for v in np.asarray(ax_c).reshape(-1)]
    if len(pads) != 2 * len(axes):
        raise Unsupported(f"pads {pads} must have 2 entries per padded axis ({len(axes)})")
    if min(pads, default=0) < 0:
        raise Unsupported(f"negative pads {pads} (cropping) are not supported")
    pairs = [(0, 0)] * r
    for k, ax in enumerate(axes):
        pairs[ax] = (pads[k], pads[k + len(axes)])
    order = x.perm if x.perm is not None else tuple(range(r))
    flat = tuple(v for p in order for v in pairs[p])
    base = imp.out_base(node, 0, x.perm)
    if mode == "reflect":  # numpy's reflect (the edge not repeated): TFLite's MIRROR_PAD REFLECT
        out = imp.emit("mirror_pad", [imp.rt(x, x.perm)], {"pads": flat, "mode": "reflect"}, base=base)
    else:
        out = imp.emit("pad", [imp.rt(x, x.perm)], {"pads": flat, "value": value}, base=base)
    imp.set_out(node, 0, out, x.perm)


@HANDLERS.rule("Squeeze")
def _squeeze(imp: Importer, node: onnx.NodeProto, a: dict[str, Any]) -> None:
    x = _runtime(imp, node)
    shape = imp.onnx_shape(x)
    axes = _axes_of(imp, node, a, 1)
    if axes is None:
        if any(isinstance(d, str) for d in shape):
            raise Unsupported("Squeeze without axes on a symbolic shape needs the axes spelled out")
        axes = [i for i, d in enumerate(shape) if d == 1]
    axes = sorted({_axis(v, len(shape)) for v in axes})
    if not axes:
        imp.vals[node.output[0]] = x
        return
    perm = drop_axes(x.perm, axes)
    attrs = {"axes": tuple(internal_axis(x.perm, v) for v in axes)}
    out = imp.emit("squeeze", [imp.rt(x, x.perm)], attrs, base=imp.out_base(node, 0, perm))
    imp.set_out(node, 0, out, perm)


@HANDLERS.rule("Unsqueeze")
def _unsqueeze(imp: Importer, node: onnx.NodeProto, a: dict[str, Any]) -> None:
    x = _runtime(imp, node)
    axes = _axes_of(imp, node, a, 1)
    if not axes:
        raise Unsupported("Unsqueeze needs axes")
    out = imp.emit("unsqueeze", [imp.plain(x)], {"axes": tuple(axes)}, base=imp.out_base(node))
    imp.set_out(node, 0, out)


# quantization ------------------------------------------------------------------------------------------
_QUANT_STORAGE = {np.dtype(np.int8): DType.i8, np.dtype(np.uint8): DType.u8, np.dtype(np.int16): DType.i16}


def _qparams(imp: Importer, scale: np.ndarray, zp: np.ndarray | None, storage: DType, axis: int | None) -> QuantParams:
    scale = np.asarray(scale)
    if scale.ndim > 1:
        raise Unsupported(f"blocked quantization (scale of shape {list(scale.shape)}) is not supported")
    if scale.dtype.kind != "f" or not np.all(np.isfinite(scale)) or np.any(scale <= 0):
        raise Invalid(f"quantization scale {shorten(scale.reshape(-1).tolist(), 40)} must be finite and positive")
    zpa = np.zeros(scale.shape, np.int64) if zp is None else np.asarray(zp).astype(np.int64)
    if scale.size == 1:
        return QuantParams(scale.reshape(-1).astype(np.float32), zpa.reshape(-1), storage=storage)
    return QuantParams(scale.astype(np.float32), zpa.reshape(-1), axis=axis, storage=storage)


def _storage_of(arr_dtype: np.dtype, what: str) -> DType:
    dt = np.dtype(arr_dtype)
    if dt not in _QUANT_STORAGE:
        raise Unsupported(f"{what} of type {dt} is not supported (int8, uint8 or int16)")
    return _QUANT_STORAGE[dt]


def ensure_quant(imp: Importer, v: Value, qp: QuantParams, perm: Perm) -> str:
    """A graph value holding quantized ``v`` in layout ``perm``, typed with ``qp`` (given in ONNX axes)."""
    if v.is_const:
        arr = v.const if perm is None else np.transpose(v.const, perm)  # type: ignore[arg-type]
        return imp.param(arr, quant=_moved_quant(qp, perm))
    name: str = v.name  # type: ignore[assignment]
    held = _moved_quant(qp, v.perm)
    t = imp.g.types[name]
    if t.quant is None and name in imp.g.inputs and t.dtype.is_int:
        # a quantized model input: its parameters are the ones its first reader declares
        imp.g.types[name] = TensorType(t.shape, t.dtype, held)
    elif t.quant != held:
        raise Unsupported(
            f"input {name!r} is typed {t} but the node reads it with quantization {held!r};"
            " re-labelling stored integers is not supported"
        )
    return imp.rt(v, perm)


def _moved_quant(qp: QuantParams, perm: Perm) -> QuantParams:
    if qp.axis is None or perm is None:
        return qp
    return QuantParams(qp.scale, qp.zero_point, axis=perm.index(qp.axis), storage=qp.storage)


def _qdq_operands(imp: Importer, node: onnx.NodeProto, a: dict[str, Any], prefix: str):
    """Quantize- and DequantizeLinear: the runtime input, constant ``{prefix}_scale`` and ``{prefix}_zero_point``."""
    x = _runtime(imp, node)
    if a.get("block_size", 0):
        raise Unsupported("blocked quantization (block_size) is not supported")
    return x, imp.const_input(node, 1, f"{prefix}_scale"), imp.const_input(node, 2, f"{prefix}_zero_point")


@HANDLERS.rule("QuantizeLinear")
def _quantize(imp: Importer, node: onnx.NodeProto, a: dict[str, Any]) -> None:
    x, scale, zp = _qdq_operands(imp, node, a, "y")
    if zp is not None:
        storage = _storage_of(zp.dtype, "quantized type")
    elif a.get("output_dtype"):
        od = int(a["output_dtype"])
        if od not in ONNX_DTYPES:
            raise Unsupported(f"output_dtype {onnx.TensorProto.DataType.Name(od)} is not supported")
        storage = _storage_of(ONNX_DTYPES[od].numpy, "quantized type")
    else:
        storage = DType.u8
    axis = _axis(int(a.get("axis", 1)), max(imp.rank(x), 1))
    qp = _moved_quant(_qparams(imp, scale, zp, storage, axis), x.perm)  # type: ignore[arg-type]
    out = imp.emit(
        "quantize", [imp.rt(x, x.perm)], {"dtype": storage}, out_quant=qp, base=imp.out_base(node, 0, x.perm)
    )
    imp.set_out(node, 0, out, x.perm)


@HANDLERS.rule("DequantizeLinear")
def _dequantize(imp: Importer, node: onnx.NodeProto, a: dict[str, Any]) -> None:
    x, scale, zp = _qdq_operands(imp, node, a, "x")
    xdt = imp.dtype(x).numpy
    storage = DType.i32 if xdt == np.dtype(np.int32) else _storage_of(xdt, "quantized input")
    axis = _axis(int(a.get("axis", 1)), max(imp.rank(x), 1))
    qp = _qparams(imp, scale, zp, storage, axis)  # type: ignore[arg-type]
    perm = None if x.is_const else x.perm
    src = ensure_quant(imp, x, qp, perm)
    out_dt = from_numpy(np.asarray(scale).dtype)
    out = imp.emit("dequantize", [src], {"dtype": out_dt}, base=imp.out_base(node, 0, perm))
    imp.set_out(node, 0, out, perm)


def _int8_weight(w: np.ndarray, zp: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """uint8 weights as int8 (shift both values and zero point by 128: the same real values)."""
    zpa = np.zeros(1, np.int64) if zp is None else np.asarray(zp).astype(np.int64).reshape(-1)
    if w.dtype == np.uint8:
        return (w.astype(np.int16) - 128).astype(np.int8), zpa - 128
    if w.dtype != np.int8:
        raise Unsupported(f"weights of type {w.dtype} are not supported (int8 or uint8)")
    return w, zpa


@HANDLERS.rule("QLinearConv")
def _qlinear_conv(imp: Importer, node: onnx.NodeProto, a: dict[str, Any]) -> None:
    x = _runtime(imp, node)
    names = ("x_scale", "x_zero_point", "w", "w_scale", "w_zero_point", "y_scale", "y_zero_point", "B")
    c = {n: imp.const_input(node, i + 1, n) for i, n in enumerate(names)}
    if c["w"] is None:
        raise Unsupported("QLinearConv needs weights")
    if imp.rank(x) != 4:
        raise Unsupported("only 2-D convolution (4-D NCHW input) is supported")
    if c["w"].ndim != 4:  # type: ignore[union-attr]
        raise Invalid(f"weight has rank {c['w'].ndim}, but a 4-D input needs a 4-D weight")  # type: ignore[union-attr]
    xq = _qparams(imp, c["x_scale"], c["x_zero_point"], _storage_of(imp.dtype(x).numpy, "input"), None)  # type: ignore[arg-type]
    w, wzp = _int8_weight(c["w"], c["w_zero_point"])  # type: ignore[arg-type]
    yzp = c["y_zero_point"]
    ystore = _storage_of(yzp.dtype, "output") if yzp is not None else xq.storage
    yq = _qparams(imp, c["y_scale"], yzp, ystore, None)  # type: ignore[arg-type]
    xs = imp.onnx_shape(x)
    o, ig, kh, kw = w.shape
    strides, dil, pads = _window(imp, a, xs, tuple(a.get("kernel_shape", (kh, kw))))
    group = int(a.get("group", 1))
    depthwise = group > 1 and group == xs[1] and ig == 1
    wperm = _DW_PERM if depthwise else NHWC
    wscale = np.asarray(c["w_scale"], np.float32).reshape(-1)
    waxis = 3 if depthwise else 0
    wq = QuantParams(wscale, wzp, axis=waxis if wscale.size > 1 else None, storage=DType.i8)
    wname = imp.param(np.transpose(w, wperm), quant=wq)
    bname = None
    if c["B"] is not None:
        bscale = (np.float32(xq.scale[0]) * wscale).astype(np.float32)
        bq = QuantParams(
            bscale, np.zeros(bscale.size, np.int64), axis=0 if bscale.size > 1 else None, storage=DType.i32
        )
        bname = imp.param(np.asarray(c["B"]).astype(np.int32), quant=bq)
    attrs: dict[str, Any] = {"strides": strides, "dilations": dil, **_padding_attrs(pads)}
    if depthwise:
        op, attrs["depth_multiplier"] = "depthwise_conv2d", o // group
    else:
        op, attrs["groups"] = "conv2d", group
    xin = ensure_quant(imp, x, xq, NHWC)
    out = imp.emit(op, [xin, wname, bname], attrs, out_quant=yq, base=imp.out_base(node, 0, NHWC))
    imp.set_out(node, 0, out, NHWC)


@HANDLERS.rule("QLinearMatMul")
def _qlinear_matmul(imp: Importer, node: onnx.NodeProto, a: dict[str, Any]) -> None:
    x = _runtime(imp, node)
    names = ("a_scale", "a_zero_point", "b", "b_scale", "b_zero_point", "y_scale", "y_zero_point")
    c = {}
    for i, n in enumerate(names):
        v = imp.val(node, i + 1)
        if v is not None and not v.is_const:
            raise Unsupported(f"QLinearMatMul with a run-time {n} is not supported (constant 2-D b only)")
        c[n] = None if v is None else v.const
    b = c["b"]
    if b is None or b.ndim != 2:
        raise Unsupported("QLinearMatMul needs a constant 2-D b")
    xq = _qparams(imp, c["a_scale"], c["a_zero_point"], _storage_of(imp.dtype(x).numpy, "input"), None)  # type: ignore[arg-type]
    w, wzp = _int8_weight(np.ascontiguousarray(b.T), c["b_zero_point"])
    wscale = np.asarray(c["b_scale"], np.float32).reshape(-1)
    wq = QuantParams(wscale, wzp, axis=0 if wscale.size > 1 else None, storage=DType.i8)
    yzp = c["y_zero_point"]
    ystore = _storage_of(yzp.dtype, "output") if yzp is not None else xq.storage
    yq = _qparams(imp, c["y_scale"], yzp, ystore, None)  # type: ignore[arg-type]
    xin = ensure_quant(imp, x, xq, None)
    out = imp.emit("fully_connected", [xin, imp.param(w, quant=wq)], out_quant=yq, base=imp.out_base(node))
    imp.set_out(node, 0, out)


# com.microsoft QOperator ops ------------------------------------------------------------------------
# What onnxruntime's quantizer (quantize_static, QuantFormat.QOperator) emits for Add, Mul, AveragePool,
# GlobalAveragePool, Concat, LeakyRelu and Sigmoid (besides the standard QLinearConv / QLinearMatMul; its
# other contrib ops are not imported). Each is one IR op with the quantization of its scale and zero-point
# inputs (constants, per tensor); an op that keeps its input's parameters in the IR (average pool)
# or fixes its output's (sigmoid) is followed by a requantize to the parameters the node declares.
# The metadata of each rule is its schema (onnx.defs has none for this domain), which the importer checks.
CONTRIB_HANDLERS: RuleTable[Handler] = RuleTable("onnx import (com.microsoft)", what="com.microsoft op")

_A = onnx.AttributeProto
_BYTE_STORAGE = {np.dtype(np.int8): DType.i8, np.dtype(np.uint8): DType.u8}
_SIGMOID_OUT = QuantParams(1.0 / 256, -128, storage=DType.i8)  # what the IR's int8 sigmoid produces


def _byte_storage(imp: Importer, v: Value, what: str) -> DType:
    dt = imp.dtype(v).numpy
    if dt not in _BYTE_STORAGE:
        raise Invalid(f"{what} is {dt}; this op takes int8 or uint8 tensors")
    return _BYTE_STORAGE[dt]


def _scalar_quant(imp: Importer, node: onnx.NodeProto, i: int, what: str, storage: DType) -> QuantParams:
    """The constant per-tensor (scale, zero point) at inputs ``i`` and ``i + 1`` (an absent zero point is 0)."""
    scale = imp.const_input(node, i, f"{what} scale")
    zp = imp.const_input(node, i + 1, f"{what} zero point")
    if scale is None:
        raise Invalid(f"{what} scale (input {i}) is required")
    for arr, name in ((scale, "scale"), (zp, "zero point")):
        if arr is not None and np.asarray(arr).size != 1:
            raise Unsupported(f"{what} {name} has shape {list(np.shape(arr))}; only per-tensor (scalar) is supported")
    if zp is not None and np.asarray(zp).dtype != storage.numpy:
        raise Invalid(f"{what} zero point is {np.asarray(zp).dtype}, but the tensor it belongs to is {storage}")
    return _qparams(imp, scale, zp, storage, None)


def _requantized(
    imp: Importer, node: onnx.NodeProto, y: str, have: QuantParams, want: QuantParams, perm: Perm, base: str = ""
) -> str:
    """``y`` (quantized with ``have``) on ``want``'s parameters: itself when they agree, else a requantize
    (named ``base``, by default as the node's output)."""
    if have == want:
        return y
    base = base or imp.out_base(node, 0, perm)
    return imp.emit("requantize", [y], {"dtype": want.storage}, out_quant=want, base=base)


_BINARY_SCHEMA = {"inputs": (7, 8), "required": (0, 1, 3, 4, 6)}
_UNARY_SCHEMA = {"inputs": (4, 5), "required": (0, 1, 3)}


@CONTRIB_HANDLERS.rule("QLinearAdd", "QLinearMul", **_BINARY_SCHEMA)
def _qlinear_binary(imp: Importer, node: onnx.NodeProto, a: dict[str, Any]) -> None:
    """C = A + B or A * B on A's, B's and C's parameters: the IR's quantized add / mul (TFLite's kernels)."""
    av, bv = _runtime(imp, node, 0), _runtime(imp, node, 3)
    storage = _byte_storage(imp, av, "A")
    if _byte_storage(imp, bv, "B") != storage:
        raise Invalid(f"A is {storage} but B is {imp.dtype(bv)}; both must have the same type")
    aq = _scalar_quant(imp, node, 1, "A", storage)
    bq = _scalar_quant(imp, node, 4, "B", storage)
    yq = _scalar_quant(imp, node, 6, "C", storage)
    names, perm = align(imp, [av, bv], [aq, bq])
    op = "add" if node.op_type == "QLinearAdd" else "mul"
    out = imp.emit(op, names, out_quant=yq, base=imp.out_base(node, 0, perm))
    imp.set_out(node, 0, out, perm)


@CONTRIB_HANDLERS.rule("QLinearLeakyRelu", **_UNARY_SCHEMA, attrs={"alpha": _A.FLOAT})
@CONTRIB_HANDLERS.rule("QLinearSigmoid", **_UNARY_SCHEMA)
def _qlinear_unary(imp: Importer, node: onnx.NodeProto, a: dict[str, Any]) -> None:
    """quantize(f(dequantize(X))) elementwise, following the input's layout."""
    x = _runtime(imp, node)
    storage = _byte_storage(imp, x, "X")
    xq = _scalar_quant(imp, node, 1, "X", storage)
    yq = _scalar_quant(imp, node, 3, "Y", storage)
    xin = ensure_quant(imp, x, xq, x.perm)
    base = imp.out_base(node, 0, x.perm)
    if node.op_type == "QLinearLeakyRelu":
        alpha = float(a.get("alpha", 0.01))  # the contrib schema's default, as ONNX LeakyRelu's
        out = imp.emit("leaky_relu", [xin], {"alpha": alpha}, out_quant=yq, base=base)
    else:
        if storage == DType.u8:  # the integer sigmoid is int8's: the same real values, zero point shifted by 128
            i8q = QuantParams(xq.scale, xq.zero_point - 128, storage=DType.i8)
            xin = _requantized(imp, node, xin, xq, i8q, x.perm, base=f"{xin}__i8")
        # the IR's int8 sigmoid (TFLite's LOGISTIC) produces scale 1/256, zero point -128
        y = imp.emit("sigmoid", [xin], out_quant=_SIGMOID_OUT, base=base if yq == _SIGMOID_OUT else None)
        out = _requantized(imp, node, y, _SIGMOID_OUT, yq, x.perm)
    imp.set_out(node, 0, out, x.perm)


_AVG_POOL_ATTRS = {
    "kernel_shape": _A.INTS, "strides": _A.INTS, "pads": _A.INTS, "auto_pad": _A.STRING,
    "ceil_mode": _A.INT, "count_include_pad": _A.INT, "channels_last": _A.INT,
}  # fmt: skip


@CONTRIB_HANDLERS.rule("QLinearAveragePool", **_UNARY_SCHEMA, required_attrs=("kernel_shape",), attrs=_AVG_POOL_ATTRS)
def _qlinear_avg_pool(imp: Importer, node: onnx.NodeProto, a: dict[str, Any]) -> None:
    """The IR's avg_pool2d (padding excluded from the count) keeps X's parameters; then Y's.

    The average is rounded onto X's grid (TFLite's AVERAGE_POOL_2D) before the requantize, where
    onnxruntime rounds the float average once on Y's: the two differ by less than s_x / (2 s_y) + 1
    quanta of Y, more than one where Y's scale is under half X's.
    """
    x = _runtime(imp, node)
    storage = _byte_storage(imp, x, "X")
    xq = _scalar_quant(imp, node, 1, "X", storage)
    yq = _scalar_quant(imp, node, 3, "Y", storage)
    if imp.rank(x) != 4:
        raise Unsupported(f"only 2-D pooling (4-D input) is supported, input has rank {imp.rank(x)}")
    channels_last = bool(a.get("channels_last", 0))
    shape = imp.onnx_shape(x)
    nchw = (shape[0], shape[3], shape[1], shape[2]) if channels_last else shape
    kernel = tuple(a["kernel_shape"])
    strides, _, pads = _window(imp, a, nchw, kernel, ceil_mode=bool(a.get("ceil_mode", 0)))
    if a.get("count_include_pad", 0) and any(pads):
        raise Unsupported("count_include_pad=1 with padding is not supported (the IR's average pool excludes padding)")
    perm = None if channels_last else NHWC  # the layout in which the value is NHWC
    attrs = {"kernel": kernel, "strides": strides, **_padding_attrs(pads)}
    base = imp.out_base(node, 0, perm)
    y = imp.emit("avg_pool2d", [ensure_quant(imp, x, xq, perm)], attrs, out_quant=xq, base=base if xq == yq else None)
    imp.set_out(node, 0, _requantized(imp, node, y, xq, yq, perm), perm)


@CONTRIB_HANDLERS.rule(
    "QLinearGlobalAveragePool", inputs=(5, 5), required=(0, 1, 2, 3, 4), attrs={"channels_last": _A.INT}
)
def _qlinear_global_avg_pool(imp: Importer, node: onnx.NodeProto, a: dict[str, Any]) -> None:
    """The IR's quantized mean over the spatial axes (TFLite's MEAN: one multiplier folding in 1/count)."""
    x = _runtime(imp, node)
    storage = _byte_storage(imp, x, "X")
    xq = _scalar_quant(imp, node, 1, "X", storage)
    yq = _scalar_quant(imp, node, 3, "Y", storage)
    r = imp.rank(x)
    if r < 3:
        raise Invalid(f"input has rank {r}; it needs a batch, a channel and at least one spatial axis")
    spatial = range(1, r - 1) if a.get("channels_last", 0) else range(2, r)
    attrs = {"axes": tuple(internal_axis(x.perm, d) for d in spatial), "keepdims": True}
    out = imp.emit("mean", [ensure_quant(imp, x, xq, x.perm)], attrs, out_quant=yq, base=imp.out_base(node, 0, x.perm))
    imp.set_out(node, 0, out, x.perm)


@CONTRIB_HANDLERS.rule(
    "QLinearConcat", inputs=(5, None), required=(0, 1), required_attrs=("axis",), attrs={"axis": _A.INT}
)
def _qlinear_concat(imp: Importer, node: onnx.NodeProto, a: dict[str, Any]) -> None:
    """Inputs: Y_scale, Y_zero_point, then (tensor, scale, zero point) per input; inputs on other
    parameters than Y's are requantized by the IR's concat (TFLite's ConcatenationWithScaling)."""
    if (len(node.input) - 2) % 3:
        raise Invalid(
            f"has {len(node.input)} inputs; it takes Y_scale, Y_zero_point, then (X, scale, zero point) triples"
        )
    starts = range(2, len(node.input), 3)
    vals = [_runtime(imp, node, i) for i in starts]
    storage = _byte_storage(imp, vals[0], "input 0")
    for k, v in enumerate(vals[1:], 1):
        if _byte_storage(imp, v, f"input {k}") != storage:
            raise Invalid(f"input {k} is {imp.dtype(v)} but input 0 is {storage}; all must have the same type")
    quants = [_scalar_quant(imp, node, i + 1, f"input {k}", storage) for k, i in enumerate(starts)]
    yq = _scalar_quant(imp, node, 0, "Y", storage)
    axis = _axis(int(a["axis"]), imp.rank(vals[0]))
    perm = _common_perm(imp, vals)
    names = [ensure_quant(imp, v, q, perm) for v, q in zip(vals, quants)]
    out = imp.emit("concat", names, {"axis": internal_axis(perm, axis)}, out_quant=yq, base=imp.out_base(node, 0, perm))
    imp.set_out(node, 0, out, perm)


# The ONNX equivalents of TFLite Micro's other builtins, and If / Loop / Scan, register themselves in
# HANDLERS on import.
from rlx_edge.frontends import _onnx_control, _onnx_ops_more  # noqa: E402, F401
