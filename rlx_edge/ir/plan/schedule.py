"""Execution orders: the graph's topological order and a memory-aware one."""

from __future__ import annotations

import heapq

from rlx_edge.ir.graph import Graph, Node
from rlx_edge.ir.shape import numel


def value_bytes(graph: Graph, value: str) -> int:
    t = graph.types[value]
    return numel(t.shape) * t.dtype.storage_bytes


def topological(graph: Graph) -> list[Node]:
    """The stored node order (graphs keep nodes topologically sorted)."""
    return list(graph.nodes)


def memory_aware(graph: Graph) -> list[Node]:
    """A valid order that greedily keeps the live set small.

    Among the ready nodes it runs the one that grows live memory least (the
    bytes it allocates minus the bytes whose last use it is), ties broken by
    the stored order; this lets a branch finish before another starts, which
    is what lowers the peak of residual and multi-branch graphs.
    """
    index = {n.name: i for i, n in enumerate(graph.nodes)}
    producer = {o: n for n in graph.nodes for o in n.outputs}
    consumers: dict[str, set[str]] = {}
    for n in graph.nodes:
        for v in n.inputs:
            if v is not None and v in producer:
                consumers.setdefault(v, set()).add(n.name)
    waiting = {n.name: {v for v in n.inputs if v is not None and v in producer} for n in graph.nodes}
    remaining_uses = {v: len(c) for v, c in consumers.items()}
    outputs = set(graph.outputs)
    done: set[str] = set()

    def delta(n: Node) -> int:
        alloc = sum(value_bytes(graph, o) for o in n.outputs)
        freed = sum(
            value_bytes(graph, v)
            for v in set(n.inputs)
            if v in producer and remaining_uses.get(v, 0) == 1 and v not in outputs
        )
        return alloc - freed

    ready = [(delta(n), index[n.name], n.name) for n in graph.nodes if not waiting[n.name]]
    heapq.heapify(ready)
    order: list[Node] = []
    by_name = {n.name: n for n in graph.nodes}
    while ready:
        # deltas change as other nodes run: recompute lazily for the top entry
        d, i, name = heapq.heappop(ready)
        if name in done:
            continue
        fresh = delta(by_name[name])
        if fresh != d:
            heapq.heappush(ready, (fresh, i, name))
            continue
        node = by_name[name]
        order.append(node)
        done.add(name)
        for v in set(node.inputs):
            if v in remaining_uses:
                remaining_uses[v] -= 1
        for o in node.outputs:
            for c in sorted(consumers.get(o, ()), key=index.get):
                waiting[c].discard(o)
                if not waiting[c] and c not in done:
                    heapq.heappush(ready, (delta(by_name[c]), index[c], c))
    assert len(order) == len(graph.nodes), "graph has a cycle"
    return order
