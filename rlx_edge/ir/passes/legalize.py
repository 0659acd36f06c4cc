"""Legalization: check that a target supports every op of a graph, and can compute each node.

``rlx_edge.ir`` never imports a target, so callers hand in the target's rule
table (any container of op names, such as a ``RuleTable``) and, to make the
error useful, the tables of the other targets.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Mapping

import numpy as np

from rlx_edge.errors import IRError, UnsupportedOpError, shorten
from rlx_edge.ir.dtype import DType
from rlx_edge.ir.graph import Graph, Node

# Storage whose integers mean nothing without a scale and zero point once a node computes on them.
_QUANTIZED_STORAGE = frozenset({DType.i4, DType.i8, DType.u8, DType.i16})


def legalize(
    graph: Graph,
    rules: Container[str],
    *,
    target: str | None = None,
    targets: Mapping[str, Container[str]] | Callable[[], Mapping[str, Container[str]]] | None = None,
) -> Graph:
    """Return ``graph`` when ``rules`` supports every node's op; else raise one error naming them all.

    Parameters
    ----------
    rules:
        The op names the target supports (``op in rules``).
    target:
        The target's name for messages (defaults to ``rules.name`` when it has one).
    targets:
        Every known target's rules, by name, to say where an unsupported op would run; or a function
        returning them, called only when an op is unsupported (loading every target's table imports
        every target, which a graph that legalizes never needs).
    """
    name = target or getattr(rules, "name", None) or "the target"
    bad = [n for n in graph.nodes if n.op not in rules]
    if not bad:
        return graph
    if callable(targets):
        targets = targets()
    lines = []
    for n in bad:
        where = sorted(t for t, r in (targets or {}).items() if n.op in r)
        if where:
            hint = f"supported by {', '.join(where)}"
        elif targets is None:
            hint = "no other target tables were given"
        else:
            hint = "no target supports it"
        lines.append(f"node {n.name!r} (op {n.op}): {hint}")
    raise UnsupportedOpError(
        f"graph {graph.name!r} has {len(bad)} node(s) that {name} does not support: " + "; ".join(lines)
    )


def check_quantized_node(graph: Graph, node: Node) -> None:
    """Raise one :class:`IRError` naming ``node`` if its integer kernel cannot run on its types.

    A node is quantized (runs an integer kernel) when any of its integer values
    carries quantization. Every narrow integer value of such a node then needs
    quantization too, with finite, positive scales: kernels read them to
    requantize. The loaders refuse such files; this covers graphs built or
    edited in Python, before a kernel fails on a missing scale deep inside.
    """
    types = [(v, graph.types[v]) for v in (*node.inputs, *node.outputs) if v is not None]
    if not any(t.dtype.is_int and t.quant is not None for _, t in types):
        return
    where = f"node {shorten(node.name, 60)!r} ({node.op})"
    for v, t in types:
        if t.dtype in _QUANTIZED_STORAGE and t.quant is None:
            raise IRError(
                f"{where}: value {shorten(v, 60)!r} is {t.dtype} without quantization parameters, "
                "but the node is quantized; give it a scale and zero point (or quantize the graph again)"
            )
        if t.quant is not None:
            scale = np.asarray(t.quant.scale, dtype=np.float64)
            if not (np.all(np.isfinite(scale)) and np.all(scale > 0)):
                raise IRError(f"{where}: value {shorten(v, 60)!r} has quantization scales that are not finite and > 0")
