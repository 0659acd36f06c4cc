"""Pad folding: a zero ``pad`` of height/width in front of a convolution becomes its explicit pads."""

from __future__ import annotations

from rlx_edge.ir.graph import Graph, Node
from rlx_edge.ir.ops import window_pads
from rlx_edge.ir.passes._rewrite import consumers, set_attrs
from rlx_edge.ir.passes.manager import PassContext, register

_CONVS = ("conv2d", "depthwise_conv2d")


def _why_not(g: Graph, pad: Node, readers: list[Node]) -> str | None:
    p = pad.attrs["pads"]
    x, y = pad.inputs[0], pad.outputs[0]
    if g.types[x].rank != 4:
        return "the padded tensor is not NHWC (rank 4)"
    if any(p[i] for i in (0, 1, 6, 7)):
        return "it pads the batch or channel axis"
    if pad.attrs["value"] != 0.0:
        return f"it pads with {pad.attrs['value']:g}, while a convolution pads with zeros"
    if g.types[x].quant != g.types[y].quant:
        return "its input and output quantization differ"
    if y in g.outputs:
        return "its output is a graph output"
    if not readers:
        return "nothing reads its output"
    for r in readers:
        if r.op not in _CONVS:
            return f"its output is also read by {r.op} {r.name!r}, which has no padding of its own"
        if r.inputs[0] != y or y in r.inputs[1:]:
            return f"its output is not the data input of {r.name!r}"
    return None


@register("pad_fold")
def pad_fold(graph: Graph, ctx: PassContext) -> Graph:
    """Fold ``conv(pad(x))`` into ``conv(x, padding='explicit', pads=...)`` for zero padding of H and W."""
    g = graph.copy()
    for pad in [n for n in g.nodes if n.op == "pad"]:
        readers = consumers(g).get(pad.outputs[0], [])
        why = _why_not(g, pad, readers)
        if why is not None:
            ctx.skipped(pad.name, f"pad not folded: {why}")
            continue
        p = pad.attrs["pads"]
        extra = (p[2], p[3], p[4], p[5])  # (top, bottom, left, right)
        y_shape = g.types[pad.outputs[0]].shape
        for conv in readers:
            w_shape = g.types[conv.inputs[1]].shape
            a = conv.attrs
            have = window_pads(
                int(y_shape[1]), int(y_shape[2]), int(w_shape[1]), int(w_shape[2]),
                a["strides"], a["dilations"], a["padding"], a["pads"],
            )  # fmt: skip
            conv.inputs = [pad.inputs[0], *conv.inputs[1:]]
            set_attrs(conv, padding="explicit", pads=tuple(h + e for h, e in zip(have, extra)))
            ctx.fired(pad.name, f"pad folded into {conv.op} {conv.name!r} as explicit pads")
        g.nodes = [n for n in g.nodes if n is not pad]
        del g.types[pad.outputs[0]]
    return g
