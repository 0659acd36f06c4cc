"""QDQ folding: float ops wrapped in dequantize / quantize become the integer ops they stand for.

A QDQ model (what onnxruntime's ``quantize_static`` writes with
``QuantFormat.QDQ``, or any graph of the same shape) computes in float between
a ``dequantize`` of every integer operand and a ``quantize`` of the result.
Runtimes execute that as the quantized op, and so does the IR after this pass:

* ``dequantize`` sinks below ops that only move or pick values (transpose,
  reshape, squeeze, unsqueeze, slice, zero pad, max pool): moving the integers
  and dequantizing afterwards gives the same floats (dequantization is
  monotonic, so even a max commutes with it);
* ``quantize(dequantize(q))`` is ``q`` when both sides have the same
  parameters, else a ``requantize`` (TFLite's fixed-point rescale: it may
  differ by one quantum from onnxruntime, which computes this pair in float);
* ``quantize(op(dequantize(a), ...))`` becomes ``op`` on the integers with the
  quantize's output parameters: conv2d, depthwise_conv2d, transpose_conv2d,
  fully_connected, matmul with a constant 2-D right operand (a fully_connected), add, sub,
  mul, and the single-input ops with integer semantics (pooling, mean,
  activations, softmax). An op whose integer kernel keeps its input's
  parameters (average pool) or fixes its own (sigmoid, softmax: 1/256 and
  -128; tanh: 1/128 and 0, TFLite's) is followed by a ``requantize`` when the
  quantize asks for others.

Weighted ops take the weights' quantization as given: per tensor, or per
output channel with zero points 0. Their bias is int32 at scale
``s_in * s_w[c]``: a ``dequantize`` of int32 values at that scale (what
onnxruntime's quantizer writes) is taken as it is; a float bias is quantized
as onnxruntime's quantizer does it, ``round_half_even(b / (s_in * s_w[c]))``
in float64, saturated to int32. A bias written as an ``add`` of a constant
after a matmul (ONNX Gemm) folds in the same way.

The integer ops follow TFLite's arithmetic (ARCHITECTURE.md, numerics
contract). Where onnxruntime's own QDQ fusion rounds otherwise, its results
can differ: its int8 convolutions and matrix products requantize in float32
and round half to even (TFLite: Q31 multiplier, double rounding) and its
average pool and sigmoid round once in float; add agrees with TFLite.
``tests/frontends/test_onnx_qdq.py`` measures what that means on a model.

``symmetric_weights`` (below) rewrites fully_connected weights with a
per-tensor zero point, which the int8 kernels of the targets do not take,
into symmetric ones with the same accumulators.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rlx_edge.ir.dtype import DType
from rlx_edge.ir.graph import Graph, Node, infer_node
from rlx_edge.ir.ops import get_op
from rlx_edge.ir.passes._rewrite import add_param, bypass, consumers, fresh_name, producers, prune_params, remove_node
from rlx_edge.ir.passes.manager import PassContext, register
from rlx_edge.ir.passes.transpose_fold import insert_after
from rlx_edge.ir.types import QuantParams, TensorType

# Weighted ops: the weight axis that holds the output channels (conv.py's layouts).
_WEIGHT_AXIS = {"conv2d": 0, "depthwise_conv2d": 3, "fully_connected": 0, "transpose_conv2d": 0}
# Ops that move or pick stored values: a dequantize commutes with them exactly.
_MOVERS = frozenset({"transpose", "reshape", "squeeze", "unsqueeze", "slice", "pad", "max_pool2d"})
_WEIGHTED_OPS = ("conv2d", "depthwise_conv2d", "fully_connected", "matmul", "transpose_conv2d")
_BINARY = frozenset({"add", "sub", "mul"})
# int8 kernels that fix their output's parameters (TFLite's LOGISTIC, SOFTMAX and TANH).
_FIXED_OUT = {
    "sigmoid": QuantParams(1.0 / 256, -128, storage=DType.i8),
    "softmax": QuantParams(1.0 / 256, -128, storage=DType.i8),
    "tanh": QuantParams(1.0 / 128, 0, storage=DType.i8),
}
_INT32 = np.iinfo(np.int32)


class _Skip(Exception):
    """A QDQ pattern that stays float, with the reason."""


@dataclass
class _Match:
    node: Node  # the float op
    bias_add: Node | None  # an add of a constant bias between it and the quantize
    q: Node  # the quantize that ends the pattern


@register("qdq_fold")
def qdq_fold(graph: Graph, ctx: PassContext) -> Graph:
    """Fold dequantize -> float op -> quantize patterns into integer ops (QDQ models onto integer targets)."""
    g = graph.copy()
    reported: set[tuple[str, str]] = set()
    for _ in range(4 * len(g.nodes) + 8):  # every step removes a quantize or moves a dequantize down
        if not _step(g, ctx, reported):
            break
    _drop_dead_dequantize(g)
    prune_params(g)
    return g


def _step(g: Graph, ctx: PassContext, reported: set[tuple[str, str]]) -> bool:
    readers, prods = consumers(g), producers(g)
    for d in [n for n in g.nodes if n.op == "dequantize"]:
        if _sink_dequantize(g, d, readers, ctx):
            return True
    for q in [n for n in g.nodes if n.op == "quantize"]:
        src = prods.get(q.inputs[0])
        if src is None:
            continue
        if src.op == "dequantize":
            if _requantize(g, q, src, ctx):
                return True
            continue
        m = _match(g, q, src, readers, prods)
        if m is None:
            continue
        try:
            _fold(g, m, prods, ctx)
            return True
        except _Skip as e:
            key = (m.node.name, str(e))
            if key not in reported:
                reported.add(key)
                ctx.skipped(m.node.name, f"{m.node.op} stays float: {e}")
    return False


def _sink_dequantize(g: Graph, d: Node, readers: dict[str, list[Node]], ctx: PassContext) -> bool:
    f = d.outputs[0]
    rs = readers.get(f, [])
    if f in g.outputs or len(rs) != 1:
        return False
    p = rs[0]
    if p.op not in _MOVERS or p.inputs != [f] or len(p.outputs) != 1:
        return False
    if p.op == "pad" and p.attrs["value"] != 0.0:
        return False  # another fill is not always on the integer grid
    if p.op == "max_pool2d" and p.attrs["activation"] != "none":
        return False
    src = d.inputs[0]
    st = g.types[src]
    try:
        (it,) = infer_node(get_op(p.op), [st], p.attrs, p.name)
    except Exception:
        return False  # e.g. a per-channel axis a reshape does not keep
    if it.quant is None:
        it = TensorType(it.shape, st.dtype, st.quant)
    out = p.outputs[0]
    mid = fresh_name(g, f"{out}__q")
    g.types[mid] = it
    p.inputs, p.outputs = [src], [mid]
    if p.name == out:  # a node named after its output keeps that rule
        p.name = mid
    del g.types[out]
    remove_node(g, d)  # first, so that the dequantize below takes its name
    insert_after(g, p, "dequantize", [mid], {"dtype": d.attrs["dtype"]}, out, d.name)
    ctx.fired(d.name, f"dequantize moved below {p.op} {p.name!r}, which now moves the integers")
    return True


def _requantize(g: Graph, q: Node, d: Node, ctx: PassContext) -> bool:
    """``quantize(dequantize(x))``: ``x`` itself on equal parameters, else a requantize."""
    x, y = d.inputs[0], q.outputs[0]
    xt, yt = g.types[x], g.types[y]
    if xt.dtype == yt.dtype and xt.quant == yt.quant:
        why = bypass(g, q, x)
        if why is not None:
            return False
        ctx.fired(q.name, f"quantize of dequantize {d.name!r} on the same parameters removed")
        return True
    if xt.quant is None or xt.quant.per_channel or yt.quant is None or yt.quant.per_channel:
        return False
    q.op, q.inputs = "requantize", [x]
    q.attrs = get_op("requantize").normalize_attrs({"dtype": yt.dtype}, q.name)
    ctx.fired(q.name, f"quantize of dequantize {d.name!r} became a requantize (TFLite's fixed-point rescale)")
    return True


def _match(g: Graph, q: Node, n: Node, readers: dict[str, list[Node]], prods: dict[str, Node]) -> _Match | None:
    """The float op (and bias add) that ``q`` ends, when every value between them is read only there."""
    if len(n.outputs) != 1 or get_op(n.op).family == "quant":
        return None
    bias_add = None
    if n.op == "add" and len(n.inputs) == 2:
        first = prods.get(n.inputs[0])
        if first is not None and first.op in _WEIGHTED_OPS and _const_like(g, n.inputs[1], prods):
            if readers.get(first.outputs[0], []) == [n] and first.outputs[0] not in g.outputs:
                bias_add, n = n, first
    for v in (n.outputs[0], *(bias_add.outputs if bias_add else ())):
        if v in g.outputs:
            return None
    last = bias_add or n
    if readers.get(last.outputs[0], []) != [q]:
        return None
    return _Match(n, bias_add, q)


def _const_like(g: Graph, v: str, prods: dict[str, Node]) -> bool:
    if v in g.params:
        return True
    p = prods.get(v)
    return p is not None and p.op == "dequantize" and p.inputs[0] in g.params


def _dq(g: Graph, prods: dict[str, Node], v: str | None, what: str) -> str:
    """The integer value that ``v`` dequantizes."""
    p = prods.get(v) if v is not None else None
    if p is None or p.op != "dequantize":
        raise _Skip(f"its {what} is not a dequantized integer tensor")
    return p.inputs[0]


def _per_tensor(g: Graph, v: str, what: str) -> QuantParams:
    t = g.types[v]
    if t.quant is None or t.quant.per_channel:
        raise _Skip(f"its {what} is not quantized per tensor")
    return t.quant


def _fold(g: Graph, m: _Match, prods: dict[str, Node], ctx: PassContext) -> None:
    n = m.node
    yt = g.types[m.q.outputs[0]]
    if yt.quant is None or yt.quant.per_channel:
        raise _Skip("its result is quantized per channel")
    if n.op in _WEIGHTED_OPS:
        op, inputs, attrs = _weighted(g, m, prods)
        out_q = yt.quant
    elif n.op in _BINARY and len(n.inputs) == 2:
        a, b = (_dq(g, prods, v, f"operand {i}") for i, v in enumerate(n.inputs))
        for i, v in enumerate((a, b)):
            _per_tensor(g, v, f"operand {i}")
        op, inputs, attrs, out_q = n.op, [a, b], dict(n.attrs), yt.quant
    elif len(n.inputs) == 1 and get_op(n.op).has_int_reference:
        x = _dq(g, prods, n.inputs[0], "input")
        xq = _per_tensor(g, x, "input")
        opdef = get_op(n.op)
        if g.types[x].dtype not in opdef.int_dtypes or yt.dtype != g.types[x].dtype:
            raise _Skip(f"{n.op} has no integer kernel from {g.types[x].dtype} to {yt.dtype}")
        op, inputs, attrs = n.op, [x], dict(n.attrs)
        if opdef.passthrough_quant:
            out_q = xq
        elif n.op in _FIXED_OUT and yt.dtype == DType.i8:
            out_q = _FIXED_OUT[n.op]
        else:
            out_q = yt.quant
    else:
        raise _Skip("no integer form is known for it")
    _replace(g, m, op, inputs, attrs, out_q, ctx)


def _weighted(g: Graph, m: _Match, prods: dict[str, Node]) -> tuple[str, list[str | None], dict]:
    n = m.node
    x = _dq(g, prods, n.inputs[0], "input")
    xq = _per_tensor(g, x, "input")
    w = _dq(g, prods, n.inputs[1], "weight")
    wt = g.types[w]
    attrs = dict(n.attrs)
    op = n.op
    if op == "matmul":
        if wt.rank != 2 or g.types[n.outputs[0]].rank < 2:
            raise _Skip("only a 2-D right operand makes a fully_connected")
        w = _transposed(g, w, n)  # [K, N] -> the fully_connected layout [N, K]
        wt = g.types[w]
        op, attrs = "fully_connected", {}
    if wt.dtype not in (DType.i8, DType.i4) or wt.quant is None:
        raise _Skip(f"its weights are {wt.dtype}, not int8")
    wq = wt.quant
    if wq.per_channel:
        if wq.axis % wt.rank != _WEIGHT_AXIS[op]:
            raise _Skip(f"its weights are quantized along axis {wq.axis}, not the output channels")
        if np.any(wq.zero_point):
            raise _Skip("its per-channel weights have nonzero zero points")
    channels = int(g.types[n.outputs[0]].shape[-1])
    bias_v = n.inputs[2] if len(n.inputs) > 2 else None
    if m.bias_add is not None:
        if bias_v is not None:
            raise _Skip("it has a bias and adds another")
        bias_v = m.bias_add.inputs[1]
        act = m.bias_add.attrs["activation"]
        if attrs.get("activation", "none") != "none" and act != "none":
            raise _Skip("it applies an activation before its bias add")
        if act != "none":
            attrs["activation"] = act
    bias = None if bias_v is None else _int32_bias(g, prods, bias_v, xq, wq, channels, n.name)
    return op, [x, w, bias], attrs


def _transposed(g: Graph, v: str, reader: Node) -> str:
    """``v`` (2-D) transposed for ``reader``: a constant, or a transpose node placed before it."""
    base = f"{reader.name}/w"
    if v in g.params:
        t = g.types[v]
        q = t.quant
        if q is not None and q.axis is not None:
            q = QuantParams(q.scale, q.zero_point, axis=1 - q.axis % 2, storage=q.storage)
        return add_param(g, base, np.ascontiguousarray(g.params[v].T), q, dtype=t.dtype)
    (out,) = g.add_node("transpose", [v], {"perm": (1, 0)}, name=fresh_name(g, base))
    g.nodes.insert(g.nodes.index(reader), g.nodes.pop())
    return out.name


def _int32_bias(
    g: Graph, prods: dict[str, Node], v: str, xq: QuantParams, wq: QuantParams, channels: int, where: str
) -> str:
    """The bias as int32 at scale ``s_in * s_w[c]`` (one value per output channel)."""
    scale = (np.float32(xq.scale[0]) * wq.scale.astype(np.float32)).astype(np.float32)
    if v in g.params:
        b = g.params[v]
        if not b.dtype.kind == "f":
            raise _Skip("its bias is a constant of integers without quantization")
        if b.size not in (1, channels):
            raise _Skip(f"its bias has {b.size} values for {channels} output channels")
        # onnxruntime's quantizer: float64 division, round half to even, saturate
        vals = np.clip(np.round(b.astype(np.float64).reshape(-1) / scale.astype(np.float64)), _INT32.min, _INT32.max)
    else:
        src = _dq(g, prods, v, "bias")
        bt = g.types[src]
        if src not in g.params or bt.dtype != DType.i32 or bt.quant is None:
            raise _Skip("its bias is not a constant int32 tensor")
        if bt.quant.scale.size not in (1, channels) or np.any(bt.quant.zero_point):
            raise _Skip("its bias is not quantized per tensor or per output channel with zero point 0")
        # the quantizer writes s_in * s_w itself; anything else is another scale, which kernels do not take
        if not np.allclose(bt.quant.scale, scale, rtol=1e-6, atol=0):
            raise _Skip("its int32 bias is not at scale s_in * s_w")
        vals = g.params[src].reshape(-1)
        if vals.size not in (1, channels):
            raise _Skip(f"its bias has {vals.size} values for {channels} output channels")
    vals = np.broadcast_to(vals, (channels,)).astype(np.int32)
    per_channel = scale.size > 1
    bq = QuantParams(
        scale if per_channel else scale.reshape(-1)[:1],
        np.zeros(scale.size, np.int64),
        axis=0 if per_channel else None,
        storage=DType.i32,
    )
    return add_param(g, f"{where}/bias_i32", vals, bq, dtype=DType.i32)


def _replace(g: Graph, m: _Match, op: str, inputs: list[str | None], attrs: dict, out_q: QuantParams, ctx) -> None:
    """``m.node`` becomes integer ``op``; its quantize's output keeps its name (after a requantize if needed)."""
    n, q = m.node, m.q
    y = q.outputs[0]
    yt = g.types[y]
    opdef = get_op(op)
    norm = opdef.normalize_attrs(attrs, n.name)
    in_types = [None if v is None else g.types[v] for v in inputs]
    try:
        (it,) = infer_node(opdef, in_types, norm, n.name)
    except Exception as e:
        raise _Skip(f"the integer {op} does not take these operands ({e})") from None
    if tuple(it.shape) != tuple(yt.shape):
        raise _Skip(f"the integer {op} gives shape {list(it.shape)}, not {list(yt.shape)}")
    float_out = [n.outputs[0], *(m.bias_add.outputs if m.bias_add else ())]
    if m.bias_add is not None:
        remove_node(g, m.bias_add)
    remove_node(g, q)
    for v in float_out:
        g.types.pop(v, None)
    while inputs and inputs[-1] is None:
        inputs.pop()
    n.op, n.inputs, n.attrs = op, list(inputs), norm
    if out_q == yt.quant:
        n.outputs = [y]
        g.types[y] = yt
        ctx.fired(n.name, f"{op} on integers (quantize {q.name!r} folded)")
        return
    mid = fresh_name(g, f"{y}__{op}")
    n.outputs = [mid]
    g.types[mid] = TensorType(yt.shape, out_q.storage, out_q)
    insert_after(g, n, "requantize", [mid], {"dtype": yt.dtype}, y, f"{q.name}_requantize", out_quant=yt.quant)
    ctx.fired(n.name, f"{op} on integers, then a requantize to the parameters of quantize {q.name!r}")


def _drop_dead_dequantize(g: Graph) -> None:
    """The dequantize nodes the fold left without readers (nothing else reads what they make)."""
    while True:
        read = {v for n in g.nodes for v in n.inputs if v is not None} | set(g.outputs)
        dead = [n for n in g.nodes if n.op == "dequantize" and n.outputs[0] not in read]
        if not dead:
            return
        for n in dead:
            remove_node(g, n)


# symmetric weights -----------------------------------------------------------------------------
@register("symmetric_weights")
def symmetric_weights(graph: Graph, ctx: PassContext) -> Graph:
    """Make per-tensor asymmetric fully_connected weights symmetric with the same accumulators.

    ``sum (x - zx) * (w - zw)`` needs ``w - zw``, which may not fit int8.
    Where it does, the weights become ``w - zw`` with zero point 0. Where
    it does not, it is split in two int8 halves ``a + b`` (``a`` clipped to
    [-127, 127]) and the layer reads its input twice:
    ``fc(concat(x, x), [a | b])`` sums the same products, so every
    accumulator, and every output, is unchanged (at twice the MACs).
    """
    g = graph.copy()
    for fc in [n for n in g.nodes if n.op == "fully_connected"]:
        w = fc.inputs[1]
        wt, x = g.types[w], fc.inputs[0]
        q = wt.quant
        if w not in g.params or q is None or q.per_channel or not q.zero_point[0] or wt.dtype != DType.i8:
            continue
        if g.types[x].quant is None:
            continue
        centred = g.params[w].astype(np.int64) - int(q.zero_point[0])
        sym = QuantParams(q.scale, 0, storage=DType.i8)
        if centred.min() >= -127 and centred.max() <= 127:
            fc.inputs = [x, add_param(g, f"{fc.name}/w_sym", centred.astype(np.int8), sym), *fc.inputs[2:]]
            ctx.fired(fc.name, f"weights re-centred on zero point 0 (were {int(q.zero_point[0])})")
            continue
        a = np.clip(centred, -127, 127)
        b = centred - a
        if b.min() < -127 or b.max() > 127:
            ctx.skipped(fc.name, "asymmetric weights kept: w - zero point needs more than two int8 halves")
            continue
        xt = g.types[x]
        base = fresh_name(g, f"{x}__twice")
        g.add_node("concat", [x, x], {"axis": xt.rank - 1}, name=base, out_quant=xt.quant)
        node = g.nodes.pop()
        g.nodes.insert(g.nodes.index(fc), node)
        w2 = np.concatenate([a, b], axis=1).astype(np.int8)
        fc.inputs = [base, add_param(g, f"{fc.name}/w_split", w2, sym), *fc.inputs[2:]]
        ctx.fired(fc.name, f"asymmetric weights (zero point {int(q.zero_point[0])}) split in two symmetric halves")
    prune_params(g)
    return g
