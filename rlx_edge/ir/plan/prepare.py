"""Resolve quantization to integers: every quantized node's ``prepare``, run once.

The result is ``Program.quant``: node name -> :class:`~rlx_edge.ir.prepared.Prepared`.
The reference interpreter, the Cortex-M emitter, the JAX lowering and the
FPGA generator read these parameters; none of them derives its own.
"""

from __future__ import annotations

from rlx_edge.errors import IRError, RlxError
from rlx_edge.ir.graph import Graph, Node
from rlx_edge.ir.ops import QContext, get_op
from rlx_edge.ir.prepared import Prepared


def node_context(graph: Graph, node: Node) -> QContext:
    """The types ``prepare`` reads: the node's input types (None where absent) and output types."""
    ins = tuple(None if v is None else graph.types[v] for v in node.inputs)
    return QContext(node.name, ins, tuple(graph.types[o] for o in node.outputs))


def prepare_node(graph: Graph, node: Node) -> Prepared | None:
    """One node's prepared parameters; None for a float node or an op without ``prepare``.

    A quantization the integer kernels cannot use (per-channel where a kernel
    needs one scale, a scale ratio no fixed-point multiplier holds) is an
    :class:`IRError` naming the node.
    """
    from rlx_edge.ir.passes.legalize import check_quantized_node

    opdef = get_op(node.op)
    ctx = node_context(graph, node)
    if not ctx.quantized or not opdef.has_prepare:
        return None
    check_quantized_node(graph, node)
    try:
        return opdef.prepare_node(ctx, node.attrs)
    except RlxError:
        raise
    except ValueError as e:
        raise IRError(f"node {node.name!r} ({node.op}): its quantization does not fit integer kernels: {e}") from e


def prepare_graph(graph: Graph) -> dict[str, Prepared]:
    """Every quantized node's prepared parameters, by node name."""
    out: dict[str, Prepared] = {}
    for node in graph.nodes:
        p = prepare_node(graph, node)
        if p is not None:
            out[node.name] = p
    return out


__all__ = ["node_context", "prepare_graph", "prepare_node"]
