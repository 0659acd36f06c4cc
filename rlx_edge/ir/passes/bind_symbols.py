"""Bind symbolic dimensions to sizes before compilation."""

from __future__ import annotations

from collections.abc import Mapping

from rlx_edge.errors import IRError
from rlx_edge.ir.graph import Graph, infer_node
from rlx_edge.ir.ops import get_op
from rlx_edge.ir.shape import bind, symbols
from rlx_edge.ir.types import TensorType


def graph_symbols(graph: Graph) -> set[str]:
    """Every symbol used by the graph's input shapes."""
    out: set[str] = set()
    for name in graph.inputs:
        out |= symbols(graph.types[name].shape)
    return out


def bind_symbols(graph: Graph, sizes: Mapping[str, int]) -> Graph:
    """A copy of ``graph`` with the named symbols replaced by sizes and types re-inferred."""
    unknown = set(sizes) - graph_symbols(graph)
    if unknown:
        raise IRError(f"graph {graph.name!r} has no symbol {', '.join(sorted(unknown))}")
    for s, v in sizes.items():
        if not isinstance(v, int) or v < 1:
            raise IRError(f"symbol {s} must be bound to a positive int, got {v!r}")
    g = graph.copy()
    for name in g.inputs:
        t = g.types[name]
        g.types[name] = TensorType(bind(t.shape, sizes), t.dtype, t.quant)
    for node in g.nodes:
        opdef = get_op(node.op)
        in_types = [None if v is None else g.types[v] for v in node.inputs]
        outs = infer_node(opdef, in_types, node.attrs, f"node {node.name!r} ({node.op})")
        for o, t in zip(node.outputs, outs):
            g.types[o] = TensorType(t.shape, g.types[o].dtype, g.types[o].quant)
    return g
