"""Common subexpression elimination: identical nodes and identical params are merged."""

from __future__ import annotations

import hashlib
from typing import Any

from rlx_edge.ir.graph import Graph
from rlx_edge.ir.passes._rewrite import prune_params, remove_node, replace_uses
from rlx_edge.ir.passes.manager import PassContext, register


def _param_key(g: Graph, name: str) -> tuple[Any, ...]:
    arr = g.params[name]
    t = g.types[name]
    return (t.dtype, t.shape, t.quant, hashlib.sha256(arr.tobytes()).hexdigest())


@register("cse")
def cse(graph: Graph, ctx: PassContext) -> Graph:
    """Merge params with equal bytes, type and quantization, then nodes with the same op, inputs and attributes.

    A duplicate whose value is a graph output is kept: merging would rename an output.
    """
    g = graph.copy()
    outputs = set(g.outputs)
    first_param: dict[tuple[Any, ...], str] = {}
    for name in list(g.params):
        key = _param_key(g, name)
        keep = first_param.setdefault(key, name)
        if keep != name and name not in outputs:
            replace_uses(g, name, keep)
            ctx.fired(name, f"param equal to {keep!r}, merged")
    prune_params(g)
    seen: dict[tuple[Any, ...], Any] = {}
    for node in list(g.nodes):
        key = (
            node.op,
            tuple(node.inputs),
            tuple(sorted(node.attrs.items())),
            tuple(g.types[o] for o in node.outputs),
        )
        twin = seen.get(key)
        if twin is None:
            seen[key] = node
            continue
        if any(o in outputs for o in node.outputs):
            ctx.skipped(node.name, f"same as {twin.name!r}, but its output is a graph output")
            continue
        for mine, theirs in zip(node.outputs, twin.outputs):
            replace_uses(g, mine, theirs)
        remove_node(g, node)
        ctx.fired(node.name, f"{node.op} computes the same as {twin.name!r}, merged")
    return g
