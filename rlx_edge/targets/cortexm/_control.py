"""while_ on Cortex-M: a C loop over its cond and body subgraphs' own layers; if_: a C ``if`` over its
branches' layers, so only the branch taken runs (emit.py writes both).

Each subgraph is planned as a program of its own (through the pipeline, so control flow nested in it
is lowered or looped the same way); the node's kernel scratch holds the larger of the two arenas, as
only one of them runs at a time. The loop-carried values live in the node's outputs.
"""

from __future__ import annotations

from rlx_edge.errors import UnsupportedOpError
from rlx_edge.ir.graph import Graph, Node
from rlx_edge.ir.plan import Program

#: The kernel name of a while_ layer: emit.py writes a loop, not a call.
WHILE_KERNEL = "<while>"
#: The kernel name of an if_ layer: emit.py writes an ``if``, not a call.
IF_KERNEL = "<if>"


def _program(graph: Graph) -> Program:
    from rlx_edge.pipeline import AS_GIVEN, to_program  # the pipeline finds this target through the registry

    return to_program(graph, "cortexm", AS_GIVEN)


# the subgraph attributes each control op runs, in the order emit.py reads them
_SUBGRAPHS = {"while_": ("cond", "body"), "if_": ("then_branch", "else_branch")}


def subgraph_programs(node: Node) -> tuple[Program, Program]:
    """The cortexm programs of a while_'s cond and body, or an if_'s then and else branches."""
    try:
        return tuple(_program(node.attrs[a]) for a in _SUBGRAPHS[node.op])  # type: ignore[return-value]
    except UnsupportedOpError as e:
        raise UnsupportedOpError(f"node {node.name!r} ({node.op}): a subgraph cannot run on cortexm: {e}") from e


def subgraph_scratch(node: Node) -> int:
    """Bytes of the node's scratch: the larger subgraph arena (one subgraph runs at a time)."""
    return max(p.arena_bytes for p in subgraph_programs(node))
