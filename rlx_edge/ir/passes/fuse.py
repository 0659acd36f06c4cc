"""Activation fusion: conv / depthwise / transpose conv / fully_connected / add followed by a clamp-like activation."""

from __future__ import annotations

import math

from rlx_edge.ir.graph import Graph, Node
from rlx_edge.ir.passes._rewrite import absorb, consumers, is_quantized, producers
from rlx_edge.ir.passes.manager import PassContext, register

FUSERS = ("conv2d", "depthwise_conv2d", "transpose_conv2d", "fully_connected", "add")


def fused_form(node: Node) -> str | None:
    """The ``activation`` attribute value equivalent to ``node``, or None if it has none."""
    if node.op == "relu":
        return "relu"
    if node.op == "relu6":
        return "relu6"
    if node.op == "clamp":
        lo, hi = node.attrs["min"], node.attrs["max"]
        if lo == 0.0 and math.isinf(hi) and hi > 0:
            return "relu"
        if (lo, hi) == (0.0, 6.0):
            return "relu6"
        if (lo, hi) == (-1.0, 1.0):
            return "relu_n1_to_1"
    return None


@register("fuse_activation")
def fuse_activation(graph: Graph, ctx: PassContext) -> Graph:
    """Fold relu / relu6 / clamp(0,6) / clamp(-1,1) into the ``activation`` attribute of the producer."""
    g = graph.copy()
    for act in [n for n in g.nodes if n.op in ("relu", "relu6", "clamp")]:
        form = fused_form(act)
        prod = producers(g).get(act.inputs[0])
        if form is None:
            ctx.skipped(act.name, f"clamp({act.attrs['min']:g}, {act.attrs['max']:g}) has no fused form")
            continue
        if prod is None or prod.op not in FUSERS:
            continue  # nothing to fuse into; not worth a report line
        x = act.inputs[0]
        readers = consumers(g).get(x, [])
        if len(readers) > 1 or x in g.outputs:
            others = [r.name for r in readers if r is not act] or ["the graph outputs"]
            ctx.skipped(
                act.name,
                f"{act.op} not fused into {prod.name!r}: its output also feeds {', '.join(map(repr, others))},"
                " which must see the value before the activation",
            )
            continue
        if prod.attrs["activation"] != "none":
            ctx.skipped(act.name, f"{prod.name!r} already applies {prod.attrs['activation']}")
            continue
        if is_quantized(g, x) or is_quantized(g, act.outputs[0]):
            ctx.skipped(act.name, "quantized tensors: fusing would drop a requantization and change results")
            continue
        prod.attrs = {**prod.attrs, "activation": form}
        absorb(g, prod, act)
        ctx.fired(act.name, f"{act.op} fused into {prod.op} {prod.name!r} as activation={form}")
    return g
