"""Legalization: check that a target supports every op of a graph.

``rlx_edge.ir`` never imports a target, so callers hand in the target's rule
table (any container of op names, such as a ``RuleTable``) and, to make the
error useful, the tables of the other targets.
"""

from __future__ import annotations

from collections.abc import Container, Mapping

from rlx_edge.errors import UnsupportedOpError
from rlx_edge.ir.graph import Graph


def legalize(
    graph: Graph,
    rules: Container[str],
    *,
    target: str | None = None,
    targets: Mapping[str, Container[str]] | None = None,
) -> Graph:
    """Return ``graph`` when ``rules`` supports every node's op; else raise one error naming them all.

    Parameters
    ----------
    rules:
        The op names the target supports (``op in rules``).
    target:
        The target's name for messages (defaults to ``rules.target`` when it has one).
    targets:
        Every known target's rules, by name, to say where an unsupported op would run.
    """
    name = target or getattr(rules, "target", None) or "the target"
    bad = [n for n in graph.nodes if n.op not in rules]
    if not bad:
        return graph
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
