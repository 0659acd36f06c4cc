"""Where each MIR node came from: its HIR block and the passes that rewrote it or left it alone.

Kept in ``graph.metadata["provenance"]`` (plain JSON, so it travels through
every pass, quantization and ``.rlx`` files): node name -> ``{"block": the HIR
node it was lowered from, "block_op": that node's op, "passes": [{"pass",
"kind": "fired" | "skipped", "what"}]}``; a node missing from the map is one
the model gave as MIR and no pass touched. ``lower_hir`` records the blocks,
the :class:`~rlx_edge.ir.passes.manager.PassManager` the passes; ``rlx-edge
inspect --provenance`` shows it.

A pass event belongs to the node it names and to the first node its text
quotes, the other node of the rewrite (``"relu fused into conv2d 'c'"``), so
a fusion shows on the node that survives it. A node a pass changed (op,
inputs or attributes) without an event naming it gets a bare ``rewritten``
entry.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from rlx_edge.ir.graph import Graph, Node

KEY = "provenance"
_QUOTED = re.compile(r"'([^']+)'")


def _entries(graph: Graph) -> dict[str, dict[str, Any]]:
    # a fresh map of fresh entries: graph.copy() shares metadata values, and the original must not change
    return {k: dict(v) for k, v in graph.metadata.get(KEY, {}).items()}


def record_blocks(graph: Graph, nodes: Iterable[str], block: Node, inherited: dict[str, Any] | None = None) -> None:
    """``nodes`` of ``graph`` were lowered from HIR node ``block``."""
    prov = _entries(graph)
    for name in nodes:
        prov[name] = {**(inherited or {}), "block": block.name, "block_op": block.op}
    graph.metadata[KEY] = prov


def _signature(node: Node) -> tuple:
    # subgraph attributes (control flow) are copied by every pass: compare their size, not their identity
    attrs = tuple(
        sorted((k, ("graph", len(v.nodes)) if isinstance(v, Graph) else repr(v)) for k, v in node.attrs.items())
    )
    return node.op, tuple(node.inputs), tuple(node.outputs), attrs


class PassHistory:
    """Collects, over one PassManager run, which pass touched which node; :meth:`store` writes it."""

    def __init__(self, graph: Graph) -> None:
        self.entries = _entries(graph)

    def snapshot(self, graph: Graph) -> dict[str, tuple]:
        return {n.name: _signature(n) for n in graph.nodes}

    def add(self, pass_name: str, before: dict[str, tuple], after: Graph, events: Iterable[Any]) -> None:
        names = set(before) | {n.name for n in after.nodes}
        named: set[str] = set()
        for e in events:
            quoted = _QUOTED.search(e.what)  # the first name quoted is the other node of the rewrite
            targets = {e.node} | ({quoted.group(1)} if quoted else set())
            for t in targets & names:
                self._append(t, {"pass": e.pass_name, "kind": e.kind, "what": e.what})
                if e.kind == "fired":
                    named.add(t)
        for n in after.nodes:
            if n.name in before and n.name not in named and before[n.name] != _signature(n):
                self._append(n.name, {"pass": pass_name, "kind": "fired", "what": "rewritten"})

    def _append(self, node: str, item: dict[str, str]) -> None:
        entry = self.entries.setdefault(node, {})
        passes = entry.setdefault("passes", [])
        if item not in passes:  # later iterations of the pipeline repeat their skips
            passes.append(item)

    def store(self, graph: Graph) -> None:
        """The history of the nodes ``graph`` still has, into its metadata (removed nodes are dropped)."""
        live = {n.name for n in graph.nodes}
        kept = {k: v for k, v in self.entries.items() if k in live}
        if kept:
            graph.metadata[KEY] = kept
        else:
            graph.metadata.pop(KEY, None)
