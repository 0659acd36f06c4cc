"""Batch-norm folding into the preceding conv2d / depthwise_conv2d / fully_connected."""

from __future__ import annotations

import numpy as np

from rlx_edge.ir.graph import Graph, Node
from rlx_edge.ir.passes._rewrite import absorb, add_param, consumers, producers, prune_params
from rlx_edge.ir.passes.manager import PassContext, register
from rlx_edge.ir.shape import along_axis

# where the output channel lives in each weight layout (conv.py)
_CHANNEL_AXIS = {"conv2d": 0, "depthwise_conv2d": 3, "fully_connected": 0}


def _bias(node: Node) -> str | None:
    """The bias input of a conv-like node (builders drop a trailing absent input)."""
    return node.inputs[2] if len(node.inputs) > 2 else None


def _why_not(g: Graph, bn: Node, conv: Node | None, readers: dict[str, list[Node]]) -> str | None:
    x = bn.inputs[0]
    if conv is None or conv.op not in _CHANNEL_AXIS:
        what = "a graph input or param" if conv is None else f"{conv.op} {conv.name!r}"
        return f"its input comes from {what}, not conv2d/depthwise_conv2d/fully_connected"
    if any(v not in g.params for v in bn.inputs[1:]):
        return "its scale/bias/mean/var are not constants"
    if conv.inputs[1] not in g.params or (_bias(conv) is not None and _bias(conv) not in g.params):
        return f"{conv.name!r} has non-constant weights or bias"
    if conv.attrs["activation"] != "none":
        return f"{conv.name!r} applies {conv.attrs['activation']} before the batch norm"
    if len(readers.get(x, [])) > 1 or x in g.outputs:
        return f"the output of {conv.name!r} is also read elsewhere, so it must stay unnormalized"
    t = g.types[x]
    if bn.attrs["axis"] % t.rank != t.rank - 1:
        return f"it normalizes axis {bn.attrs['axis']}, not the channel axis of {conv.op}"
    if not g.types[conv.inputs[1]].dtype.is_float:
        return f"{conv.name!r} has quantized weights"
    return None


@register("bn_fold")
def bn_fold(graph: Graph, ctx: PassContext) -> Graph:
    """Fold ``batch_norm(conv(x, w, b))`` into ``conv(x, w*k, (b-mean)*k + bias)``, k = scale/sqrt(var+eps)."""
    g = graph.copy()
    for bn in [n for n in g.nodes if n.op == "batch_norm"]:
        prods, readers = producers(g), consumers(g)
        conv = prods.get(bn.inputs[0])
        why = _why_not(g, bn, conv, readers)
        if why is not None:
            ctx.skipped(bn.name, f"batch_norm not folded: {why}")
            continue
        assert conv is not None
        scale, beta, mean, var = (g.params[v].astype(np.float64) for v in bn.inputs[1:])
        k = scale / np.sqrt(var + bn.attrs["epsilon"])
        w = g.params[conv.inputs[1]]
        axis = _CHANNEL_AXIS[conv.op]
        w2 = (w.astype(np.float64) * along_axis(k, axis, w.ndim)).astype(w.dtype)
        b = g.params[_bias(conv)].astype(np.float64) if _bias(conv) is not None else np.zeros_like(k)
        bdt = g.params[_bias(conv)].dtype if _bias(conv) is not None else w.dtype
        b2 = ((b - mean) * k + beta).astype(bdt)
        conv.inputs = [
            conv.inputs[0],
            add_param(g, f"{conv.name}/w_bn", w2),
            add_param(g, f"{conv.name}/b_bn", b2),
        ]
        absorb(g, conv, bn)
        ctx.fired(bn.name, f"batch_norm folded into {conv.op} {conv.name!r}")
    prune_params(g)
    return g


@register("bias_fold")
def bias_fold(graph: Graph, ctx: PassContext) -> Graph:
    """Fold ``add(conv(x), c)`` with a per-channel constant ``c`` into the convolution's bias.

    ONNX exporters often write MatMul + Add or Conv + Add; the bias form is
    what the int8 kernels want (an int32 bias instead of a quantized add). The
    add's fused activation moves to the convolution.
    """
    g = graph.copy()
    for add in [n for n in g.nodes if n.op == "add"]:
        prods, readers = producers(g), consumers(g)
        for pos in (0, 1):
            conv, c = prods.get(add.inputs[pos]), add.inputs[1 - pos]
            if conv is None or conv.op not in _CHANNEL_AXIS or c not in g.params:
                continue
            why = _bias_why_not(g, add, conv, c, readers)
            if why is not None:
                ctx.skipped(add.name, f"add not folded into the bias of {conv.name!r}: {why}")
                break
            n_out = int(g.types[conv.outputs[0]].shape[-1])
            cval = np.broadcast_to(g.params[c].astype(np.float64).reshape(-1), (n_out,))
            b = g.params[_bias(conv)].astype(np.float64) if _bias(conv) is not None else 0.0
            dt = g.params[conv.inputs[1]].dtype
            conv.inputs = [conv.inputs[0], conv.inputs[1], add_param(g, f"{conv.name}/b_add", (b + cval).astype(dt))]
            conv.attrs = {**conv.attrs, "activation": add.attrs["activation"]}
            absorb(g, conv, add)
            ctx.fired(add.name, f"add of a constant folded into the bias of {conv.op} {conv.name!r}")
            break
    prune_params(g)
    return g


def _bias_why_not(g: Graph, add: Node, conv: Node, c: str, readers: dict[str, list[Node]]) -> str | None:
    x = conv.outputs[0]
    yt, xt, ct = g.types[add.outputs[0]], g.types[x], g.types[c]
    if conv.attrs["activation"] != "none":
        return f"{conv.name!r} applies {conv.attrs['activation']} before the add"
    if len(readers.get(x, [])) > 1 or x in g.outputs:
        return f"the output of {conv.name!r} is also read elsewhere"
    if yt.shape != xt.shape or not (xt.dtype.is_float and ct.dtype.is_float and yt.dtype == xt.dtype):
        return "the constant broadcasts the result to another shape or type"
    n_out = xt.shape[-1]
    if ct.rank and (any(d != 1 for d in ct.shape[:-1]) or ct.shape[-1] not in (1, n_out)):
        return f"the constant of shape {list(ct.shape)} is not one value per output channel"
    if conv.inputs[1] not in g.params or (_bias(conv) is not None and _bias(conv) not in g.params):
        return f"{conv.name!r} has non-constant weights or bias"
    return None
