"""Dead code elimination: nodes and params that no graph output depends on."""

from __future__ import annotations

from rlx_edge.ir.graph import Graph
from rlx_edge.ir.passes._rewrite import prune_params
from rlx_edge.ir.passes.manager import PassContext, register


@register("dce")
def dce(graph: Graph, ctx: PassContext) -> Graph:
    """Remove nodes none of whose outputs reach a graph output, then unused params.

    Graph inputs stay, even unused ones: they are the model's interface.
    """
    g = graph.copy()
    live = set(g.outputs)
    keep = []
    for node in reversed(g.nodes):
        if any(o in live for o in node.outputs):
            keep.append(node)
            live.update(v for v in node.inputs if v is not None)
        else:
            ctx.fired(node.name, f"{node.op} is dead (no graph output depends on it)")
            for o in node.outputs:
                del g.types[o]
    g.nodes = keep[::-1]
    before = len(g.params)
    prune_params(g)
    if len(g.params) < before:
        ctx.fired("<params>", f"removed {before - len(g.params)} unused param(s)")
    return g
