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


def while_programs(node: Node) -> tuple[Program, Program]:
    """The cortexm programs of ``node``'s cond and body subgraphs."""
    try:
        return _program(node.attrs["cond"]), _program(node.attrs["body"])
    except UnsupportedOpError as e:
        raise UnsupportedOpError(f"node {node.name!r} (while_): a subgraph cannot run on cortexm: {e}") from e


def while_scratch(node: Node) -> int:
    """Bytes of the node's scratch: the larger subgraph arena."""
    cond, body = while_programs(node)
    return max(cond.arena_bytes, body.arena_bytes)


def if_programs(node: Node) -> tuple[Program, Program]:
    """The cortexm programs of ``node``'s then and else branches."""
    try:
        return _program(node.attrs["then_branch"]), _program(node.attrs["else_branch"])
    except UnsupportedOpError as e:
        raise UnsupportedOpError(f"node {node.name!r} (if_): a branch cannot run on cortexm: {e}") from e


def if_scratch(node: Node) -> int:
    """Bytes of the node's scratch: the larger branch arena (only the branch taken runs)."""
    then_, else_ = if_programs(node)
    return max(then_.arena_bytes, else_.arena_bytes)
