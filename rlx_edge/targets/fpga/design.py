# amaranth: UnusedElaboratable=no
"""From a quantized graph (or Program) to one streaming Amaranth design.

:class:`FpgaDesign` decides everything once, in Python: the layer order
(the Program's schedule), each layer's parallelism (PE x SIMD), the word
width of every activation buffer, which tensors share a physical buffer
(by the planner's liveness, :mod:`rlx_edge.ir.plan.liveness`), and every
integer constant (read from the nodes' prepared parameters, the ones the
reference computes with). :meth:`FpgaDesign.elaborate` then builds the top
level: buffers as instances of a small dual-port RAM module (``<top>_ram``),
weights and constants as ROM instances reading ``$readmemh`` files (``<top>_rom``; see
:class:`~rlx_edge.targets.fpga.components.RomSink`), one component per layer,
valid/ready streams at the edge. :mod:`.emit` appends both modules' Verilog.

Execution is layer-sequential: load every input stream, run each layer once
(each streams through its loops with no stalls), then drain every output
stream, and accept the next inference. The ``phase`` output says which step
is active (0 load, 1..L layer, L+1 drain), so test benches can time layers.
"""

from __future__ import annotations

import functools
import hashlib
import math
import operator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from amaranth.hdl import Cat, ClockSignal, Instance, Module, Mux, ResetSignal, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rlx_edge.errors import RlxError
from rlx_edge.ir.dtype import DType
from rlx_edge.ir.graph import Graph, Node
from rlx_edge.ir.ops import REGISTRY, window_shape
from rlx_edge.ir.plan.liveness import analyze
from rlx_edge.ir.plan.prepare import prepare_node
from rlx_edge.ir.prepared import Prepared
from rlx_edge.ir.rules import RuleTable
from rlx_edge.ir.types import TensorType
from rlx_edge.targets.fpga import components as hw
from rlx_edge.targets.fpga.arith import register_copies
from rlx_edge.targets.fpga.edges import EDGE_OPS, HostEdge, device_graph
from rlx_edge.targets.fpga.upsample import ResizeBilinear, ResizeNearest, TransposeConv2d, transpose_conv_steps

PRESETS = {"area": 1, "balanced": 16, "latency": 64}

rules = RuleTable.for_ops("fpga")
# Quantized storage types the layers take (rlx_edge.targets.support reports them): buffers hold
# int8 lanes; weight ROMs hold int4 weights as the int8 values they are in the IR.
ACTIVATION_DTYPES = frozenset({DType.i8})
WEIGHT_DTYPES = frozenset({DType.i8, DType.i4})


class FpgaConfigError(RlxError):
    """A design cannot be configured as asked (parallelism, unsupported layer)."""


@dataclass
class Layer:
    """One hardware layer: the node it implements, its parallelism and its buffers."""

    node: Node
    kind: str
    inputs: list[str]
    output: str
    pe: int = 1
    simd: int = 1
    macs: int = 0
    in_lanes: list[int] = field(default_factory=list)
    out_lanes: int = 1
    build: Any = None  # (in_ports, out_port) -> component
    steps: int = 0  # loop steps (cycles without pipeline latency) per inference

    @property
    def name(self) -> str:
        return self.node.name


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _pick_pe_simd(o: int, c: int, p: int) -> tuple[int, int]:
    """The PE x SIMD with the largest product <= p dividing (o, c); ties go to the most balanced."""
    best = (1, 1)
    for pe in _divisors(o):
        for simd in _divisors(c):
            if pe * simd > p:
                continue
            key = (pe * simd, -abs(math.log2(pe) - math.log2(simd)), simd)
            bkey = (best[0] * best[1], -abs(math.log2(best[0]) - math.log2(best[1])), best[1])
            if key > bkey:
                best = (pe, simd)
    return best


def _largest_divisor(n: int, p: int) -> int:
    return max(d for d in _divisors(n) if d <= max(p, 1))


def _quant(t: TensorType, what: str):
    if t.quant is None or t.dtype not in ACTIVATION_DTYPES:
        raise FpgaConfigError(f"{what} must be an int8 quantized tensor, got {t}")
    return t.quant


# rules: node -> Layer -------------------------------------------------------------------
def _mac_quant(g: Graph, node: Node, o: int, params: Prepared) -> hw.ChannelQuant:
    """The layer's prepared parameters (``Program.quant``) and its bias, for the MAC datapath."""
    xt, wt, yt = g.types[node.inputs[0]], g.types[node.inputs[1]], g.types[node.outputs[0]]
    _quant(xt, "input")  # the datapath's buffers hold int8 only
    _quant(yt, "output")
    if wt.quant is None or np.any(wt.quant.zero_point != 0) or wt.dtype not in WEIGHT_DTYPES:
        raise FpgaConfigError(
            f"layer {node.name!r} ({node.op}): weights must be symmetric int8 or int4 (zero point 0), got {wt}"
        )
    b = node.inputs[2] if len(node.inputs) > 2 else None
    bias = np.zeros(o, np.int64) if b is None else g.params[b].astype(np.int64)
    if b is not None and g.params[b].dtype != np.int32:
        raise FpgaConfigError(f"layer {node.name!r}: bias must be int32 (int8 scheme), got {g.params[b].dtype}")
    p = params
    return hw.ChannelQuant(
        bias=bias, mult=p.mult, shift=p.shift, zp_in=p.in_zp, zp_out=p.out_zp, lo=p.act_min, hi=p.act_max
    )


def _const_weights(g: Graph, node: Node) -> np.ndarray:
    w = g.params.get(node.inputs[1])
    if w is None:
        raise FpgaConfigError(f"layer {node.name!r} ({node.op}): weights must be constants")
    return w


def _lane_split(node: Node, n: int, p: int, explicit, of: str) -> tuple[int, int, int]:
    """PE, SIMD and the lanes (their product) over ``n`` elements: the largest divisor of ``n`` up to ``p``."""
    pe, simd = explicit or (_largest_divisor(n, p), 1)
    _check_div(node, pe * simd, n, "PE x SIMD", of)
    return pe, simd, pe * simd


def _window(g: Graph, node: Node, kh: int, kw: int, strides, dilations) -> hw.Window:
    xt = g.types[node.inputs[0]]
    oh, ow, pads = window_shape(xt, kh, kw, strides, dilations, node.attrs["padding"], node.attrs["pads"])
    n, h, w, c = (int(d) for d in xt.shape)
    return hw.Window(n, h, w, c, oh, ow, kh, kw, tuple(strides), tuple(dilations), tuple(pads))


@rules.rule("conv2d")
def _conv_rule(g: Graph, node: Node, p: int, explicit, params: Prepared) -> Layer:
    w = _const_weights(g, node)
    if node.attrs.get("groups", 1) != 1:
        raise FpgaConfigError(f"layer {node.name!r} (conv2d): grouped convolution is not supported")
    return _conv_layer(g, node, p, explicit, params, w, "conv2d")


@rules.rule("transpose_conv2d")
def _tconv_rule(g: Graph, node: Node, p: int, explicit, params: Prepared) -> Layer:
    """The conv datapath gathering each output pixel's taps from the input pixels that reach it
    (:class:`~.upsample.TransposeConv2d`), with the prepared top and left padding."""
    w = _const_weights(g, node)
    o, kh, kw, c = w.shape
    xt, yt = g.types[node.inputs[0]], g.types[node.outputs[0]]
    n, h, wd, _ = (int(d) for d in xt.shape)
    _, oh, ow, _ = (int(d) for d in yt.shape)
    pt, pl = (int(v) for v in params.tpads)
    win = hw.Window(n, h, wd, c, oh, ow, kh, kw, tuple(node.attrs["strides"]), (1, 1), (pt, 0, pl, 0))
    pe, simd = explicit or _pick_pe_simd(o, c, p)
    _check_div(node, pe, o, "PE", "output channels")
    _check_div(node, simd, c, "SIMD", "input channels")
    q = _mac_quant(g, node, o, params)
    flipped = np.ascontiguousarray(w[:, ::-1, ::-1, :])

    def build(ins, out):
        return TransposeConv2d(win, flipped, q, pe=pe, simd=simd, inp=ins[0], out=out)

    steps = transpose_conv_steps(win, o, pe, simd)
    macs = n * h * wd * c * o * kh * kw  # every input pixel meets the whole kernel (TFLite's count)
    return Layer(node, "transpose_conv2d", [node.inputs[0]], node.outputs[0], pe, simd, macs, [simd], pe, build, steps)


def _conv_layer(g: Graph, node: Node, p: int, explicit, params: Prepared, w: np.ndarray, kind: str) -> Layer:
    """The dense conv datapath for weights ``w`` [O, KH, KW, C] (the node's, or a depthwise's as dense)."""
    o, kh, kw, c = w.shape
    win = _window(g, node, kh, kw, node.attrs["strides"], node.attrs["dilations"])
    pe, simd = explicit or _pick_pe_simd(o, c, p)
    _check_div(node, pe, o, "PE", "output channels")
    _check_div(node, simd, c, "SIMD", "input channels")
    q = _mac_quant(g, node, o, params)
    macs = win.n * win.oh * win.ow * o * kh * kw * c

    def build(ins, out):
        return hw.Conv2d(win, w, q, pe=pe, simd=simd, inp=ins[0], out=out)

    steps = win.n * win.oh * win.ow * (o // pe) * kh * kw * (c // simd)
    return Layer(node, kind, [node.inputs[0]], node.outputs[0], pe, simd, macs, [simd], pe, build, steps)


@rules.rule("fully_connected")
def _fc_rule(g: Graph, node: Node, p: int, explicit, params: Prepared) -> Layer:
    w = _const_weights(g, node)
    o, c = w.shape
    xt = g.types[node.inputs[0]]
    batch = int(np.prod([int(d) for d in xt.shape[:-1]]))
    pe, simd = explicit or _pick_pe_simd(o, c, p)
    _check_div(node, pe, o, "PE", "output features")
    _check_div(node, simd, c, "SIMD", "input features")
    q = _mac_quant(g, node, o, params)

    def build(ins, out):
        return hw.FullyConnected(batch, w, q, pe=pe, simd=simd, inp=ins[0], out=out)

    steps = batch * (o // pe) * (c // simd)
    macs = batch * o * c
    return Layer(node, "fully_connected", [node.inputs[0]], node.outputs[0], pe, simd, macs, [simd], pe, build, steps)


@rules.rule("depthwise_conv2d")
def _dw_rule(g: Graph, node: Node, p: int, explicit, params: Prepared) -> Layer:
    w = _const_weights(g, node)
    if node.attrs.get("depth_multiplier", 1) != 1:
        return _dw_multiplier_rule(g, node, p, explicit, params, w)
    _, kh, kw, c = w.shape
    win = _window(g, node, kh, kw, node.attrs["strides"], node.attrs["dilations"])
    pe, simd, lanes = _lane_split(node, c, p, explicit, "channels")  # SIMD folds into channel lanes: one tap a cycle
    q = _mac_quant(g, node, c, params)
    macs = win.n * win.oh * win.ow * c * kh * kw

    def build(ins, out):
        return hw.DepthwiseConv2d(win, w, q, lanes=lanes, inp=ins[0], out=out)

    steps = macs // lanes
    return Layer(
        node, "depthwise_conv2d", [node.inputs[0]], node.outputs[0], pe, simd, macs, [lanes], lanes, build, steps
    )


def _dw_multiplier_rule(g: Graph, node: Node, p: int, explicit, params: Prepared, w: np.ndarray) -> Layer:
    """A depthwise layer with depth multiplier M on one input channel is a dense convolution to M
    channels (the first layer of person_detect and micro_speech): the same taps meet the same
    weights, so the conv datapath computes it exactly."""
    c_in = int(g.types[node.inputs[0]].shape[-1])
    if c_in != 1:
        raise FpgaConfigError(
            f"layer {node.name!r} (depthwise_conv2d): depth multiplier {node.attrs['depth_multiplier']} "
            f"is supported on one input channel only, this layer has {c_in}"
        )
    dense = np.ascontiguousarray(w.transpose(3, 1, 2, 0))  # [1, KH, KW, M] -> [M, KH, KW, 1]
    return _conv_layer(g, node, p, explicit, params, dense, "depthwise_conv2d")


def _pool_rule(kind: str):
    def rule(g: Graph, node: Node, p: int, explicit, params: Prepared) -> Layer:
        xt, yt = g.types[node.inputs[0]], g.types[node.outputs[0]]
        xq, yq = _quant(xt, "input"), _quant(yt, "output")
        if xq != yq:
            raise FpgaConfigError(f"layer {node.name!r} ({node.op}): input and output quantization must agree")
        kh, kw = node.attrs["kernel"]
        win = _window(g, node, kh, kw, node.attrs["strides"], (1, 1))
        pe, simd, lanes = _lane_split(node, win.c, p, explicit, "channels")
        lo, hi = params.act_min, params.act_max

        def build(ins, out):
            return hw.Pool2d(win, kind=kind, lo=lo, hi=hi, lanes=lanes, inp=ins[0], out=out)

        steps = win.n * win.oh * win.ow * (win.c // lanes) * kh * kw
        return Layer(node, node.op, [node.inputs[0]], node.outputs[0], pe, simd, 0, [lanes], lanes, build, steps)

    return rule


rules.rule("avg_pool2d")(_pool_rule("avg"))
rules.rule("max_pool2d")(_pool_rule("max"))


def _inner(t: TensorType) -> int:
    return int(t.shape[-1]) if t.rank else 1


def _broadcast_period(c: np.ndarray, shape: tuple[int, ...], lanes: int) -> np.ndarray:
    """``c`` broadcast to ``shape`` and flattened, up to where it repeats, in whole words of ``lanes``.

    Axes before the outermost one where ``c`` is not 1 do not change its values, so the
    flattened broadcast repeats with the size of the axes from there on; lanes divide
    that (they divide the innermost axis) unless ``c`` is a scalar.
    """
    full = np.broadcast_to(c, shape).reshape(-1)
    dims = (1,) * (len(shape) - c.ndim) + tuple(c.shape)
    k = next((i for i, d in enumerate(dims) if d != 1), len(shape))
    period = int(np.prod(shape[k:], dtype=np.int64))
    return np.resize(full[:period], math.lcm(period, lanes))


@rules.rule("add")
def _add_rule(g: Graph, node: Node, p: int, explicit, params: Prepared) -> Layer:
    """Two computed operands of the output's shape, or one computed and one constant broadcast against
    it (a bias add, as ONNX models have them): the constant's int8 values, one period of its broadcast,
    in a ROM the layer reads in step with the other operand."""
    a, b = node.inputs
    at, bt, yt = g.types[a], g.types[b], g.types[node.outputs[0]]
    consts = [v in g.params for v in (a, b)]
    if all(consts):
        raise FpgaConfigError(f"layer {node.name!r} (add): both operands are constants; fold them first")
    if a == b:
        raise FpgaConfigError(f"layer {node.name!r} (add): both operands are the same tensor")
    _quant(at, "first input"), _quant(bt, "second input"), _quant(yt, "output")
    computed = [v for v, c in zip((a, b), consts) if not c]
    for v in computed:
        if g.types[v].shape != yt.shape:
            raise FpgaConfigError(
                f"layer {node.name!r} (add): broadcasting a computed operand is not supported ({at} + {bt}); "
                "only a constant one broadcasts"
            )
    if params.left_shift != 20:
        raise FpgaConfigError(f"layer {node.name!r} (add): only int8 outputs are supported")
    pr = params
    q = hw.AddQuant(pr.a_zp, pr.b_zp, pr.a_mult, pr.a_shift, pr.b_mult, pr.b_shift, pr.out_mult, pr.out_shift,
                    pr.out_zp, pr.act_min, pr.act_max)  # fmt: skip
    shape = tuple(int(d) for d in yt.shape)
    size = int(np.prod(shape))
    pe, simd, lanes = _lane_split(node, _inner(yt), p, explicit, "innermost elements")
    const = None
    if any(consts):
        side = consts.index(True)
        values = _broadcast_period(g.params[(a, b)[side]], shape, lanes)
        const = (side, hw.pack_words(values.reshape(-1, lanes), 8))

    def build(ins, out):
        it = iter(ins)
        in_a, in_b = (None if c else next(it) for c in consts)
        return hw.Add(size, q, lanes=lanes, in_a=in_a, in_b=in_b, out=out, const=const)

    lanes_in = [lanes] * len(computed)
    return Layer(node, "add", computed, node.outputs[0], pe, simd, 0, lanes_in, lanes, build, size // lanes)


@rules.rule("requantize", "relu", "relu6", "clamp")
def _requant_rule(g: Graph, node: Node, p: int, explicit, params: Prepared) -> Layer:
    """y = clamp(zp_out + MultiplyByQuantizedMultiplier(x - zp_in), lo, hi), from the prepared parameters.

    A relu-like op whose input and output share parameters carries the
    identity multiplier (the hardware always multiplies).
    """
    xt, yt = g.types[node.inputs[0]], g.types[node.outputs[0]]
    _quant(xt, "input"), _quant(yt, "output")
    pr = params
    if not isinstance(pr.mult, int):
        raise FpgaConfigError(f"layer {node.name!r} ({node.op}): per-channel requantization is not supported")
    size = int(np.prod([int(d) for d in yt.shape]))
    pe, simd, lanes = _lane_split(node, _inner(yt), p, explicit, "innermost elements")

    def build(ins, out):
        return hw.Requantize(size, zp_in=pr.in_zp, mult=pr.mult, shift=pr.shift, zp_out=pr.out_zp, lo=pr.act_min,
                             hi=pr.act_max, lanes=lanes, inp=ins[0], out=out)  # fmt: skip

    return Layer(node, node.op, [node.inputs[0]], node.outputs[0], pe, simd, 0, [lanes], lanes, build, size // lanes)


@rules.rule("sigmoid", "tanh", "hard_swish", "leaky_relu", "elu", "gelu", "silu", "abs", "rsqrt")
def _lookup_rule(g: Graph, node: Node, p: int, explicit, params: Prepared) -> Layer:
    """Any unary op of int8 values: its prepared 256-entry table in a ROM per lane."""
    xt, yt = g.types[node.inputs[0]], g.types[node.outputs[0]]
    _quant(xt, "input"), _quant(yt, "output")
    if params.get("table") is None:
        raise FpgaConfigError(f"layer {node.name!r} ({node.op}): needs a per-tensor int8 input (a byte table)")
    size = int(np.prod([int(d) for d in yt.shape]))
    pe, simd, lanes = _lane_split(node, _inner(yt), p, explicit, "innermost elements")
    table = params.table

    def build(ins, out):
        return hw.Lookup(size, table, lanes=lanes, inp=ins[0], out=out)

    return Layer(node, node.op, [node.inputs[0]], node.outputs[0], pe, simd, 0, [lanes], lanes, build, size // lanes)


@rules.rule("softmax")
def _softmax_rule(g: Graph, node: Node, p: int, explicit, params: Prepared) -> Layer:
    xt, yt = g.types[node.inputs[0]], g.types[node.outputs[0]]
    _quant(xt, "input")
    yq = _quant(yt, "output")
    if node.attrs["axis"] not in (-1, xt.rank - 1):
        raise FpgaConfigError(f"layer {node.name!r} (softmax): only the last axis is supported")
    if len(node.inputs) > 1 and node.inputs[1] is not None:
        raise FpgaConfigError(
            f"layer {node.name!r} (softmax): a masked softmax has no FPGA unit; run it on another target"
        )
    if yq.scale.size != 1 or int(yq.zero_point[0]) != -128 or float(yq.scale[0]) != 1 / 256:
        raise FpgaConfigError(f"layer {node.name!r} (softmax): output must be scale 1/256, zero point -128")
    table = params.exp_table  # table[d]: the exp of difference -d to the row max
    length = _inner(xt)
    rows = int(np.prod([int(d) for d in xt.shape])) // length

    def build(ins, out):
        return hw.Softmax(rows, length, table, lo=-128, hi=127, inp=ins[0], out=out)

    steps = rows * hw.Softmax.row_steps(length)
    return Layer(node, "softmax", [node.inputs[0]], node.outputs[0], 1, 1, 0, [1], 1, build, steps)


def _computed(g: Graph, node: Node, v: str) -> TensorType:
    """The int8 type of computed operand ``v``; constants and empty tensors are refused."""
    t = g.types[v]
    if v in g.params:
        raise FpgaConfigError(f"layer {node.name!r} ({node.op}): a constant operand ({v!r}) is not supported")
    _quant(t, f"layer {node.name!r} ({node.op}) input {v!r}")
    if any(int(d) == 0 for d in t.shape):
        raise FpgaConfigError(f"layer {node.name!r} ({node.op}): the empty input {v!r} is not supported")
    return t


@rules.rule("pad")
def _pad_rule(g: Graph, node: Node, p: int, explicit, params: Prepared) -> Layer:
    """Constant padding on any axes; the fill is the prepared one (a real value on the output's grid)."""
    x, y = node.inputs[0], node.outputs[0]
    xt, yt = _computed(g, node, x), g.types[y]
    _quant(yt, "output")
    shape = tuple(int(d) for d in xt.shape) or (1,)
    pads = tuple(node.attrs["pads"]) or (0, 0)
    # a lane group must be all inside or all outside the input: lanes divide the innermost size and its pads
    n = math.gcd(shape[-1], pads[-2], pads[-1])
    pe, simd, lanes = _lane_split(node, n, p, explicit, "innermost input elements and pads (their gcd)")
    fill = int(params.fill)

    def build(ins, out):
        return hw.Pad(xt.shape, node.attrs["pads"], fill, lanes=lanes, inp=ins[0], out=out)

    steps = int(np.prod([int(d) for d in yt.shape])) // lanes
    return Layer(node, "pad", [x], y, pe, simd, 0, [lanes], lanes, build, steps)


@rules.rule("concat")
def _concat_rule(g: Graph, node: Node, p: int, explicit, params: Prepared) -> Layer:
    """Any axis; inputs on other parameters than the output's go through their prepared byte table
    (TFLite's ConcatenationWithScaling), the others are copied."""
    y = node.outputs[0]
    yt = g.types[y]
    _quant(yt, "output")
    ins = [_computed(g, node, v) for v in node.inputs]
    if params.get("tables") is None:
        raise FpgaConfigError(f"layer {node.name!r} (concat): needs int8 inputs and output (byte tables)")
    shape = [int(d) for d in yt.shape]
    axis = node.attrs["axis"] % len(shape)
    outer, after = int(np.prod(shape[:axis])), int(np.prod(shape[axis + 1 :]))
    unique = list(dict.fromkeys(node.inputs))  # an input named twice is one port, read twice
    n = math.gcd(_inner(yt), *(_inner(t) for t in ins))
    pe, simd, lanes = _lane_split(node, n, p, explicit, "innermost elements of its inputs and output (their gcd)")
    parts = [
        hw.ConcatPart(unique.index(v), int(t.shape[axis]) * after // lanes, row)
        for row, (v, t) in enumerate(zip(node.inputs, ins))
    ]
    tables = params.tables if any(params.rescale) else None

    def build(in_ports, out):
        return hw.Concat(outer, parts, tables, lanes=lanes, inputs=in_ports, out=out)

    steps = outer * sum(part.groups for part in parts)
    return Layer(node, "concat", unique, y, pe, simd, 0, [lanes] * len(unique), lanes, build, steps)


def _resize_io(g: Graph, node: Node) -> tuple[TensorType, TensorType]:
    xt, yt = _computed(g, node, node.inputs[0]), g.types[node.outputs[0]]
    if _quant(yt, "output") != xt.quant:
        raise FpgaConfigError(f"layer {node.name!r} ({node.op}): input and output quantization must agree")
    return xt, yt


@rules.rule("resize_nearest_neighbor")
def _resize_nearest_rule(g: Graph, node: Node, p: int, explicit, params: Prepared) -> Layer:
    """Each output pixel a copy of the input pixel the op's ``nearest_indices`` picks (row and column tables)."""
    from rlx_edge.ir.ops.resize import nearest_indices

    xt, yt = _resize_io(g, node)
    _, h, w, c = (int(d) for d in xt.shape)
    _, oh, ow, _ = (int(d) for d in yt.shape)
    flags = node.attrs["align_corners"], node.attrs["half_pixel_centers"]
    rows, cols = nearest_indices(h, oh, *flags), nearest_indices(w, ow, *flags)
    pe, simd, lanes = _lane_split(node, c, p, explicit, "channels")

    def build(ins, out):
        return ResizeNearest(xt.shape, rows, cols, lanes=lanes, inp=ins[0], out=out)

    steps = int(np.prod([int(d) for d in yt.shape])) // lanes
    return Layer(node, node.op, [node.inputs[0]], node.outputs[0], pe, simd, 0, [lanes], lanes, build, steps)


@rules.rule("resize_bilinear")
def _resize_bilinear_rule(g: Graph, node: Node, p: int, explicit, params: Prepared) -> Layer:
    """TFLite's integer bilinear resize from the prepared rows, columns and weights: four taps a pixel."""
    xt, yt = _resize_io(g, node)
    if params.get("dy") is None:
        raise FpgaConfigError(f"layer {node.name!r} (resize_bilinear): needs int8 input and output")
    c = int(xt.shape[3])
    pe, simd, lanes = _lane_split(node, c, p, explicit, "channels")
    tables = [params[k] for k in ("y0", "y1", "dy", "x0", "x1", "dx")]

    def build(ins, out):
        return ResizeBilinear(xt.shape, *tables, lanes=lanes, inp=ins[0], out=out)

    steps = 4 * int(np.prod([int(d) for d in yt.shape])) // lanes
    return Layer(node, node.op, [node.inputs[0]], node.outputs[0], pe, simd, 0, [lanes], lanes, build, steps)


@rules.rule(*EDGE_OPS)
def _edge_rule(g: Graph, node: Node, p: int, explicit, params: Prepared) -> HostEdge:
    """quantize of a model input, dequantize of a model output: on the host with the node's prepared
    parameters (:mod:`.edges`: float32 arithmetic no fixed-point circuit reproduces for every scale);
    the datapath streams the int8 side."""
    if node.op == "quantize":
        x = node.inputs[0]
        if x not in g.inputs:
            raise FpgaConfigError(
                f"node {node.name!r} (quantize): the fpga target quantizes model inputs only (on the host), "
                f"not the computed value {x!r}"
            )
        others = [n for n in g.consumers(x) if n.op != "quantize"]
        if others or x in g.outputs:
            what = f"node {others[0].name!r} ({others[0].op})" if others else "the model's outputs"
            raise FpgaConfigError(
                f"model input {x!r} is float and also read by {what}; the fpga target takes float inputs into "
                "quantize only"
            )
        _quant(g.types[node.outputs[0]], f"node {node.name!r} (quantize) output")
    else:
        y = node.outputs[0]
        if y not in g.outputs or g.consumers(y):
            raise FpgaConfigError(
                f"node {node.name!r} (dequantize): the fpga target dequantizes model outputs only (on the host); "
                f"{y!r} is read by other nodes"
            )
        _quant(g.types[node.inputs[0]], f"node {node.name!r} (dequantize) input")
    return HostEdge(node, params)


# View ops (their output is the input's bytes with another shape) need no layer: the design
# reads their input's buffer. The op declarations say which ops are views.
ALIAS_OPS = frozenset(name for name, op in REGISTRY.items() if op.view)


def _check_div(node: Node, v: int, n: int, what: str, of: str) -> None:
    if v < 1 or n % v:
        raise FpgaConfigError(f"layer {node.name!r} ({node.op}): {what}={v} does not divide its {n} {of}")


# the design ---------------------------------------------------------------------------------
@dataclass
class Buffer:
    """One physical on-chip buffer; tensors with disjoint lifetimes share it."""

    index: int
    word_lanes: int
    depth: int
    tensors: list[str] = field(default_factory=list)


class FpgaDesign(wiring.Component):
    """The streaming datapath of one quantized graph.

    Parameters
    ----------
    graph:
        A quantized int8 MIR graph, or a :class:`~rlx_edge.ir.plan.Program`
        (its schedule orders the layers).
    parallelism:
        ``"area"`` (PE=SIMD=1), ``"balanced"`` (16 MACs per cycle per
        layer), ``"latency"`` (64), an int (target PE x SIMD per layer), or a
        dict mapping layer names to ``(pe, simd)`` (others get the
        ``"default"`` entry, else ``"latency"``). Divisibility is checked
        here: a PE that does not divide a layer's output channels is an
        error naming the layer.
    name:
        Verilog module name of the top level.
    dsp:
        A device family whose DSP primitive the multipliers instantiate, with its input and
        output registers (``"ecp5"``: MULT18X18D; :func:`~rlx_edge.targets.fpga.arith.dsp_product`),
        or ``None``: the same registers in the fabric, for any device. The cycles are the same.

    Ports
    -----
    in{k}_data : In(8 * lanes)
        Graph input ``k``, ``lanes`` int8 elements per beat in NHWC order,
        element 0 in the low byte.
    in{k}_valid : In(1), in{k}_ready : Out(1)
        Handshake: a beat transfers on a rising clock edge with both high.
    out{k}_data : Out(8 * lanes)
        Graph output ``k``, packed the same way.
    out{k}_valid : Out(1), out{k}_ready : In(1), out{k}_last : Out(1)
        Handshake; ``last`` marks the final beat of an inference.
    phase : Out(8)
        0 loading inputs, ``1..L`` running layer ``i-1``, ``L+1`` draining outputs.
    """

    def __init__(self, graph, parallelism: Any = "latency", name: str | None = None, dsp: str | None = None):
        from rlx_edge.ir.plan.program import Program
        from rlx_edge.targets.fpga.arith import check_dsp_family

        check_dsp_family(dsp)
        self.dsp = dsp

        if isinstance(graph, Program):
            g = graph.graph
            order = [n.name for n in graph.nodes()]
            quant = graph.quant
        else:
            g = graph
            order = [n.name for n in g.nodes]
            quant = {}
        self.source_graph = g
        self.top_name = name or _verilog_name(g.name)
        by_name = {n.name: n for n in g.nodes}
        # quantize at the model's inputs and dequantize at its outputs run on the host (.edges); the
        # datapath implements the device graph between them, which streams int8 only
        self.edges: list[HostEdge] = [
            rules[by_name[n].op](g, by_name[n], 1, None, quant.get(n) or prepare_node(g, by_name[n]))
            for n in order
            if by_name[n].op in EDGE_OPS
        ]
        g = device_graph(g, self.edges)
        order = [n for n in order if by_name[n].op not in EDGE_OPS]
        self.graph = g
        # The planner's liveness over the schedule, without in-place reuse (a layer streams its
        # input while it writes its output): a view's output shares its input's buffer (alias).
        self.liveness = analyze(g, [by_name[n] for n in order], inplace=False)
        self.alias: dict[str, str] = {v: r for v, r in self.liveness.value_buffer.items() if v != r}
        self.layers: list[Layer] = []
        # fill() and requant_lanes() by id(layer); the fold asks on every step
        self._fill: dict[int, tuple[Layer, int, int, bool]] = {}
        explicit_all = parallelism if isinstance(parallelism, dict) else {}
        default = explicit_all.get("default", "latency") if isinstance(parallelism, dict) else parallelism
        p = PRESETS.get(default, default) if isinstance(default, str) else default
        if not isinstance(p, int) or p < 1:
            raise FpgaConfigError(
                f"parallelism must be one of {', '.join(PRESETS)}, a positive int or a dict, not {parallelism!r}"
            )
        known = set(by_name)
        unknown = [k for k in explicit_all if k != "default" and k not in known]
        if unknown:
            raise FpgaConfigError(f"parallelism names unknown layer(s): {', '.join(map(repr, unknown))}")
        self.parallelism = p
        for name_ in order:
            node = by_name[name_]
            if node.op in ALIAS_OPS:
                if node.outputs[0] not in self.alias:
                    raise FpgaConfigError(
                        f"node {node.name!r} ({node.op}) is a view that cannot share its input's buffer "
                        "(its quantization changes, or its input is a constant)"
                    )
                continue
            if node.op not in rules:
                raise FpgaConfigError(
                    f"node {node.name!r} ({node.op}) has no FPGA implementation; the fpga target supports "
                    f"{', '.join(rules)}"
                )
            ex = explicit_all.get(node.name)
            if isinstance(ex, int):
                ex = (ex, 1)
            params = quant.get(node.name) or prepare_node(g, node) or Prepared()
            layer = rules[node.op](g, node, p, tuple(ex) if ex is not None else None, params)
            if ex is None:
                layer = self._fit_views(g, node, p, params, layer)
            layer.inputs = [self._resolve(v) for v in layer.inputs]
            if len(set(layer.inputs)) != len(layer.inputs):  # one buffer has one read port
                raise FpgaConfigError(
                    f"layer {node.name!r} ({node.op}) reads one buffer through two operands (views of one tensor)"
                )
            self.layers.append(layer)
        if not self.layers:
            raise FpgaConfigError(f"graph {g.name!r} has no layers to implement")
        for v in g.inputs:
            _quant(g.types[v], f"graph input {v!r}")
        self.inputs = [self._resolve(v) for v in g.inputs]
        self.outputs = [self._resolve(v) for v in g.outputs]
        self._plan_buffers()
        sig = {}
        for k, v in enumerate(self.inputs):
            lanes = self.buffers[self.buffer_of[v]].word_lanes
            sig[f"in{k}_data"] = In(8 * lanes)
            sig[f"in{k}_valid"] = In(1)
            sig[f"in{k}_ready"] = Out(1)
        for k, v in enumerate(self.outputs):
            lanes = self.buffers[self.buffer_of[v]].word_lanes
            sig[f"out{k}_data"] = Out(8 * lanes)
            sig[f"out{k}_valid"] = Out(1)
            sig[f"out{k}_ready"] = In(1)
            sig[f"out{k}_last"] = Out(1)
        sig["phase"] = Out(8)
        super().__init__(sig)

    # planning -----------------------------------------------------------------------------
    def _lane_cap(self, v: str) -> int:
        """The most lanes a word of ``v``'s buffer can hold: they must divide the innermost size of every view."""
        return math.gcd(*(_inner(self.graph.types[view]) for view in self._views(self._resolve(v))))

    def _fit_views(self, g: Graph, node: Node, p: int, params: Prepared, layer: Layer) -> Layer:
        """``layer``, or the same rule's layer with fewer lanes where its choice does not divide a view of its
        buffers (a flatten's input read or written in words longer than its innermost axis)."""
        caps = [self._lane_cap(v) for v in layer.inputs]
        cap_out = self._lane_cap(layer.output)
        if all(c % n == 0 for c, n in zip(caps, layer.in_lanes)) and cap_out % layer.out_lanes == 0:
            return layer
        if all(n == layer.out_lanes for n in layer.in_lanes) and layer.out_lanes == layer.pe * layer.simd:
            explicit = (math.gcd(layer.out_lanes, cap_out, *caps), 1)  # one lane count, in and out
        else:  # a MAC layer: PE output lanes, SIMD input lanes
            explicit = (math.gcd(layer.pe, cap_out), math.gcd(layer.simd, caps[0]))
        return rules[node.op](g, node, p, explicit, params)

    def _resolve(self, v: str) -> str:
        while v in self.alias:
            v = self.alias[v]
        return v

    def _views(self, v: str) -> list[str]:
        return [v] + [a for a, src in self.alias.items() if self._resolve(a) == v]

    def _plan_buffers(self) -> None:
        g = self.graph
        lanes: dict[str, list[tuple[int, str]]] = {}
        for layer in self.layers:
            lanes.setdefault(layer.output, []).append((layer.out_lanes, f"layer {layer.name!r} writes"))
            for v, ln in zip(layer.inputs, layer.in_lanes):
                lanes.setdefault(v, []).append((ln, f"layer {layer.name!r} reads"))
        self.word_lanes: dict[str, int] = {}
        for v, uses in lanes.items():
            wl = math.lcm(*[u[0] for u in uses])
            for view in self._views(v):
                inner = _inner(g.types[view])
                if inner % wl:
                    detail = "; ".join(f"{why} {n} lanes" for n, why in uses)
                    raise FpgaConfigError(
                        f"tensor {v!r}: its buffer needs words of {wl} lanes ({detail}), "
                        f"which do not divide its innermost dimension {inner}; change PE/SIMD of these layers"
                    )
            self.word_lanes[v] = wl
        # Physical RAMs: tensors whose liveness buffers never live at once and whose words have the
        # same lanes share one RAM, sized for the deepest of them.
        self.buffers: list[Buffer] = []
        self.buffer_of: dict[str, int] = {}
        free: list[int] = []

        def words(v: str) -> int:
            return int(np.prod([int(d) for d in g.types[v].shape])) // self.word_lanes[v]

        def alloc(v: str) -> None:
            wl = self.word_lanes.setdefault(v, 1)
            fits = [b for b in free if self.buffers[b].word_lanes == wl]
            if fits:
                b = max(fits, key=lambda i: self.buffers[i].depth)  # reuse the largest: fewer growths
                free.remove(b)
                buf = self.buffers[b]
                buf.depth = max(buf.depth, words(v))
            else:
                buf = Buffer(len(self.buffers), wl, words(v))
                self.buffers.append(buf)
            buf.tensors.append(v)
            self.buffer_of[v] = buf.index

        starting: dict[int, list[str]] = {}
        ending: dict[int, list[str]] = {}
        for b in self.liveness.buffers:  # graph inputs first, then outputs in schedule order
            if b.kind == "activation":
                starting.setdefault(b.start, []).append(b.name)
                ending.setdefault(b.end, []).append(b.name)
        for step in range(self.liveness.steps):
            for v in starting.get(step, []):
                alloc(v)
            for v in ending.get(step, []):
                if v not in self.outputs:
                    free.append(self.buffer_of[v])

    # reports ------------------------------------------------------------------------------
    def fill(self, layer: Layer) -> int:
        """Cycles a layer runs beyond its loop steps: the cycle of its start pulse and its pipeline's
        latency (from the last loop step to ``done``). Builds the layer's component to ask it (the
        first line of this file keeps Amaranth from warning that the component is never elaborated)."""
        return self._component_facts(layer)[0]

    def requant_lanes(self, layer: Layer) -> int:
        """Requantizer lanes of a MAC layer (fewer than its accumulators where they take turns;
        :meth:`~.components._MacLayer.requant_lanes`); the PE of other layers."""
        return self._component_facts(layer)[1]

    def requant_narrow(self, layer: Layer) -> bool:
        """Whether a MAC layer's requantizer lanes multiply on two DSPs each, not four (narrow accumulators)."""
        return self._component_facts(layer)[2]

    def _component_facts(self, layer: Layer) -> tuple[int, int, bool]:
        if id(layer) not in self._fill:
            comp = layer.build(*self._ports(layer))
            facts = (1 + comp.latency, getattr(comp, "rq_lanes", layer.pe), getattr(comp, "rq_narrow", False))
            self._fill[id(layer)] = (layer, *facts)
        return self._fill[id(layer)][1:]

    def layer_table(self) -> list[dict[str, Any]]:
        """Per layer: op, PE, SIMD, MACs, loop steps, the cycles beyond them (:meth:`fill`) and the ideal
        cycles ``MACs / (PE * SIMD)``."""
        rows = []
        for i, layer in enumerate(self.layers):
            rows.append(
                {
                    "index": i,
                    "name": layer.name,
                    "op": layer.kind,
                    "pe": layer.pe,
                    "simd": layer.simd,
                    "macs": layer.macs,
                    "steps": layer.steps,
                    "fill": self.fill(layer),
                    "ideal_cycles": layer.macs / (layer.pe * layer.simd) if layer.macs else None,
                }
            )
        return rows

    def stream_info(self) -> dict[str, list[dict[str, Any]]]:
        """Lanes per beat and beats per inference of every stream, for drivers and monitors."""

        def info(v: str) -> dict[str, Any]:
            t = self.graph.types[v]
            lanes = self.buffers[self.buffer_of[v]].word_lanes
            size = int(np.prod([int(d) for d in t.shape]))
            return {"value": v, "shape": [int(d) for d in t.shape], "lanes": lanes, "beats": size // lanes}

        ins, outs = [info(v) for v in self.inputs], [info(v) for v in self.outputs]
        # what the host computes on each side of a stream (a float interface), as the driver must
        for streams, values, kind in ((ins, self.graph.inputs, "quantize"), (outs, self.graph.outputs, "dequantize")):
            host = {e.stream_value: e.describe() for e in self.edges if e.kind == kind}
            for s, v in zip(streams, values):
                if v in host:
                    s["host"] = host[v]
        # a watchdog for the bench: far above any real inference (loop steps, streaming, pipeline fill)
        work = sum(layer.steps for layer in self.layers) + sum(s["beats"] for s in (*ins, *outs))
        return {"inputs": ins, "outputs": outs, "cycle_budget": 20 * work + 20 * len(self.layers) + 10_000}

    def _ports(self, layer: Layer):
        ins = [
            hw.BufferPort(self.buffers[self.buffer_of[v]].word_lanes, self.buffers[self.buffer_of[v]].depth)
            for v in layer.inputs
        ]
        ob = self.buffers[self.buffer_of[layer.output]]
        return ins, hw.BufferPort(ob.word_lanes, ob.depth)

    # hardware -----------------------------------------------------------------------------
    def elaborate(self, platform):
        m = Module()
        nl = len(self.layers)
        phase = Signal(8)
        m.d.comb += self.phase.eq(phase)
        start = Signal()
        m.d.sync += start.eq(0)

        self.rom_sink = hw.RomSink(self.top_name)
        rd, wr = {}, {}
        for buf in self.buffers:
            rd[buf.index], wr[buf.index] = _ram(m, self.top_name, buf)

        # phase == i + 1 (layer i runs) as registers of their own, set and cleared with phase: the compares
        # drove every buffer's port multiplexer from one register, and that fan-out across the chip was
        # person_detect's critical path on ECP5-85K (16 ns of routing). One such register still was (7-8 ns
        # to the buffers' address multiplexers), so each port multiplexer has a copy of its own.
        # Layers run in order, so a layer's done steps the phase by one and shifts the one-hot along: a
        # multiplexer of constants per layer behind the phase register was AD's critical path (9.6 ns).
        running = [Signal(name=f"running_{i}") for i in range(nl)]
        running_next = [Signal(name=f"running_{i}_next") for i in range(nl)]
        done = [Signal(name=f"done_{i}") for i in range(nl)]  # layer i runs and is done
        m.d.sync += [r.eq(n) for r, n in zip(running, running_next)]
        idle, drain = phase == 0, phase == nl + 1
        begin = Signal()  # every input is in: layer 0 starts
        any_done = Cat(*done).any()
        m.d.comb += [
            n.eq((r & ~d) | (done[j - 1] if j else begin))
            for j, (n, r, d) in enumerate(zip(running_next, running, done))
        ]
        with m.If(begin):
            m.d.sync += [phase.eq(1), start.eq(1)]
        with m.Elif(any_done):
            # the last layer's done enters the drain phase and starts nothing
            m.d.sync += [phase.eq(phase + 1), start.eq(~done[-1] if nl else 0)]

        # layers: each drives its buffers' ports only while its phase is active. The phases are one-hot, so
        # a port's value is the OR of each layer's value AND its phase: a tree, where a chain of Ifs was a
        # priority multiplexer as deep as the layers sharing the buffer (person_detect's critical path,
        # 15 ns on ECP5-85K)
        driven: dict[tuple[int, int], tuple[Value, list[Value]]] = {}

        def drive(target: Signal, select: Value, value: Value, chunk: int = -1) -> None:
            """``target`` (its 32-bit ``chunk``) takes ``value`` while ``select`` is high."""
            part = target if chunk < 0 else target[32 * chunk : 32 * (chunk + 1)]
            driven.setdefault((id(target), chunk), (part, []))[1].append(Mux(select, value, 0))

        for i, layer in enumerate(self.layers):
            comp = layer.build(*self._ports(layer))
            comp.rom_sink = self.rom_sink
            m.submodules[f"l{i}_{_verilog_name(layer.kind)}"] = comp
            port = wr[self.buffer_of[layer.output]]
            # copies: one per read port, one for the write address and enables, one per 32 data bits
            chunks = -(-len(port.data) // 32)
            copies = register_copies(
                m, running_next[i] & ~ResetSignal(), len(layer.inputs) + 1 + chunks, f"running_{i}"
            )
            active = running[i]
            m.d.comb += comp.start.eq(start & active)
            for k, v in enumerate(layer.inputs):
                rport = rd[self.buffer_of[v]]
                m.d.comb += getattr(comp, f"rd{k}_data").eq(rport.data)
                drive(rport.addr, copies[k], getattr(comp, f"rd{k}_addr"))
            drive(port.addr, copies[len(layer.inputs)], comp.wr_addr)
            drive(port.en, copies[len(layer.inputs)], comp.wr_en)
            for c in range(chunks):
                drive(port.data, copies[len(layer.inputs) + 1 + c], comp.wr_data[32 * c : 32 * (c + 1)], c)
            m.d.comb += done[i].eq(active & comp.done)
        # (the input and output streams below assign some of these ports again, in phases no layer runs in)
        for target, values in driven.values():
            m.d.comb += target.eq(functools.reduce(operator.or_, values))

        # input streams: fill each input buffer word by word
        in_done = []
        for k, v in enumerate(self.inputs):
            buf = self.buffers[self.buffer_of[v]]
            beats = self.stream_info()["inputs"][k]["beats"]
            cnt = Signal(range(beats + 1), name=f"in{k}_count")
            full = cnt == beats
            ready = getattr(self, f"in{k}_ready")
            valid = getattr(self, f"in{k}_valid")
            m.d.comb += ready.eq(idle & ~full)
            port = wr[buf.index]
            with m.If(idle):
                # the reset term changes nothing in hardware; it puts reset in the sensitivity list of
                # this mux so that event-driven simulators (Icarus) evaluate it before the first beat
                m.d.comb += [port.addr.eq(Mux(ResetSignal(), 0, cnt)), port.data.eq(getattr(self, f"in{k}_data"))]
                with m.If(valid & ready):
                    m.d.comb += port.en.eq((1 << buf.word_lanes) - 1)
                    m.d.sync += cnt.eq(cnt + 1)
            in_done.append((full, cnt))
        all_in = Cat(*[f for f, _ in in_done]).all()
        m.d.comb += begin.eq(idle & all_in)
        with m.If(begin):
            m.d.sync += [c.eq(0) for _, c in in_done]

        # output streams: read ahead one word; the port holds its data while not enabled
        out_done = []
        for k, v in enumerate(self.outputs):
            buf = self.buffers[self.buffer_of[v]]
            beats = self.stream_info()["outputs"][k]["beats"]
            issued = Signal(range(beats + 1), name=f"out{k}_issued")
            sent = Signal(range(beats + 1), name=f"out{k}_sent")
            ovalid = Signal(name=f"out{k}_pending")
            port = rd[buf.index]
            valid = getattr(self, f"out{k}_valid")
            ready = getattr(self, f"out{k}_ready")
            m.d.comb += [
                valid.eq(ovalid),
                getattr(self, f"out{k}_data").eq(port.data),
                getattr(self, f"out{k}_last").eq(ovalid & (sent == beats - 1)),
            ]
            advance = ~ovalid | ready
            with m.If(drain):
                m.d.comb += port.addr.eq(issued)
                m.d.comb += port.en.eq(advance)
                with m.If(advance):
                    with m.If(issued < beats):
                        m.d.sync += [ovalid.eq(1), issued.eq(issued + 1)]
                    with m.Else():
                        m.d.sync += ovalid.eq(0)
                with m.If(ovalid & ready):
                    m.d.sync += sent.eq(sent + 1)
            out_done.append((sent, issued, beats))
        finished = Cat(*[s == b for s, _, b in out_done]).all()
        with m.If(drain & finished):
            m.d.sync += phase.eq(0)
            m.d.sync += [s.eq(0) for s, _, _ in out_done] + [i.eq(0) for _, i, _ in out_done]
        return m


class _Port:
    """Signals of one RAM port, named like the fields of Amaranth's memory ports."""

    def __init__(self, name: str, abits: int, width: int, en_width: int, en_init: int):
        self.addr = Signal(abits, name=f"{name}_addr")
        self.data = Signal(width, name=f"{name}_data")
        self.en = Signal(en_width, name=f"{name}_en", init=en_init)


#: buffers this shallow are flip-flops (``<top>_ram_regs``), deeper ones block RAM (``<top>_ram``)
REGISTER_BUFFER_DEPTH = 4


def _ram(m: Module, top: str, buf: Buffer) -> tuple[_Port, _Port]:
    """One activation buffer: synchronous read port (enable defaults high), byte-enable write port."""
    lanes = buf.word_lanes
    abits = hw._addr_bits(buf.depth)
    rd = _Port(f"buf{buf.index}_r", abits, 8 * lanes, 1, 1)
    wr = _Port(f"buf{buf.index}_w", abits, 8 * lanes, lanes, 0)
    m.submodules[f"buf{buf.index}"] = Instance(
        f"{top}_ram_regs" if buf.depth <= REGISTER_BUFFER_DEPTH else f"{top}_ram",
        p_WIDTH=8 * lanes,
        p_LANES=lanes,
        p_DEPTH=max(buf.depth, 1),
        p_ABITS=abits,
        i_clk=ClockSignal(),
        i_rd_addr=rd.addr,
        i_rd_en=rd.en,
        o_rd_data=rd.data,
        i_wr_addr=wr.addr,
        i_wr_en=wr.en,
        i_wr_data=wr.data,
    )
    return rd, wr


def _verilog_name(s: str) -> str:
    out = "".join(ch if ch.isalnum() else "_" for ch in s)
    if not out or out[0].isdigit():
        out = "m_" + out
    return out


def design_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]
