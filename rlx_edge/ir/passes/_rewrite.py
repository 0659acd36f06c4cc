"""Small graph surgery shared by the passes.

Every helper edits a graph in place; passes call them on their own copy.
Value names are the graph's interface (graph inputs and outputs keep theirs,
and the TFLite importer's tensor-index metadata is keyed by them), so when a
node disappears the surviving value takes the name its consumers already use
wherever that is possible.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlx_edge.ir.graph import Graph, Node, infer_node
from rlx_edge.ir.ops import get_op
from rlx_edge.ir.types import QuantParams, TensorType


def consumers(g: Graph) -> dict[str, list[Node]]:
    """Value name -> nodes reading it (a node reading a value twice is listed twice)."""
    out: dict[str, list[Node]] = {}
    for n in g.nodes:
        for v in n.inputs:
            if v is not None:
                out.setdefault(v, []).append(n)
    return out


def producers(g: Graph) -> dict[str, Node]:
    return {o: n for n in g.nodes for o in n.outputs}


def param_value(g: Graph, v: str | None) -> np.ndarray | None:
    return None if v is None else g.params.get(v)


def is_quantized(g: Graph, v: str) -> bool:
    t = g.types[v]
    return t.quant is not None and t.dtype.is_int


def fresh_name(g: Graph, base: str) -> str:
    """A name no value and no node of ``g`` uses, derived from ``base``."""
    taken = set(g.types) | {n.name for n in g.nodes}
    cand, k = base, 1
    while cand in taken:
        cand, k = f"{base}_{k}", k + 1
    return cand


def add_param(g: Graph, base: str, arr: np.ndarray, quant: QuantParams | None = None, dtype: Any = None) -> str:
    return g.param(fresh_name(g, base), arr, quant, dtype=dtype).name


def replace_uses(g: Graph, old: str, new: str) -> None:
    """Make every node input (not graph outputs) that reads ``old`` read ``new``."""
    for n in g.nodes:
        n.inputs = [new if v == old else v for v in n.inputs]


def rename_value(g: Graph, old: str, new: str) -> None:
    """Rename value ``old`` (a node output) to ``new``, which must be free."""
    assert new not in g.types, new
    for n in g.nodes:
        n.inputs = [new if v == old else v for v in n.inputs]
        n.outputs = [new if v == old else v for v in n.outputs]
    g.outputs = [new if v == old else v for v in g.outputs]
    g.types[new] = g.types.pop(old)


def remove_node(g: Graph, node: Node) -> None:
    """Drop ``node`` and the types of its outputs (callers redirect its consumers first)."""
    g.nodes = [n for n in g.nodes if n is not node]
    for o in node.outputs:
        g.types.pop(o, None)


def bypass(g: Graph, node: Node, src: str) -> str | None:
    """Remove single-output ``node``, whose output equals value ``src``.

    Returns None when done, or why it could not be done. When the node's
    output is a graph output, ``src`` takes over its name; that needs ``src``
    to be a node output that is not itself a graph output.
    """
    y = node.outputs[0]
    if y in g.outputs:
        prod = producers(g).get(src)
        if prod is None or src in g.outputs:
            return f"its output {y!r} is a graph output and {src!r} cannot take that name"
        replace_uses(g, y, src)
        remove_node(g, node)
        rename_value(g, src, y)
        return None
    replace_uses(g, y, src)
    remove_node(g, node)
    return None


def absorb(g: Graph, producer: Node, consumer: Node) -> None:
    """``producer`` takes over ``consumer``'s (single) output, and ``consumer`` goes away.

    The caller has checked that the consumer is the producer's only reader, so
    the producer's old output value disappears and every later reader (and
    the graph outputs) keep the name they used.
    """
    old, new = producer.outputs[0], consumer.outputs[0]
    remove_node(g, consumer)
    rename_value(g, old, new)


def reinfer(g: Graph) -> None:
    """Recompute node output types in schedule order, keeping quantization and storage types."""
    for node in g.nodes:
        opdef = get_op(node.op)
        in_types = [None if v is None else g.types[v] for v in node.inputs]
        outs = infer_node(opdef, in_types, node.attrs, f"node {node.name!r} ({node.op})")
        for o, t in zip(node.outputs, outs):
            old = g.types.get(o)
            q = old.quant if old is not None else None
            dt = q.storage if (q is not None and t.dtype.is_float) else t.dtype
            g.types[o] = TensorType(t.shape, dt, q if q is not None else t.quant)


def set_attrs(node: Node, **changes: Any) -> None:
    """Update attributes in their normal form (verify compares exact types)."""
    attrs = dict(node.attrs)
    attrs.update(changes)
    node.attrs = get_op(node.op).normalize_attrs(attrs, f"node {node.name!r} ({node.op})")


def prune_params(g: Graph) -> None:
    """Drop params no node reads and no graph output names."""
    used = {v for n in g.nodes for v in n.inputs if v is not None} | set(g.outputs)
    for p in [p for p in g.params if p not in used]:
        del g.params[p]
        del g.types[p]
