"""Buffers and their lifetimes over a schedule.

A *buffer* is one region of the arena. Several values can share one: the
output of a view op (reshape, squeeze, unsqueeze, declared ``view=True``)
is its input seen with another shape, and the output of an in-place op
(declared ``inplace=True``: elementwise ops, activations, requantize) may
take over an input that dies at that node when both have the same byte size.
Kernel scratch is a buffer live at its node's step only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from rlx_edge.ir.graph import Graph, Node
from rlx_edge.ir.ops import get_op
from rlx_edge.ir.plan.schedule import value_bytes

ScratchFn = Callable[[Graph, Node], int]


@dataclass
class Buffer:
    """One arena region: the values sharing it, its size and lifetime (steps, inclusive)."""

    name: str
    size: int
    start: int
    end: int
    values: list[str] = field(default_factory=list)
    kind: str = "activation"  # activation | scratch
    offset: int = -1

    def overlaps_in_time(self, other: Buffer) -> bool:
        return self.start <= other.end and other.start <= self.end


@dataclass
class Liveness:
    buffers: list[Buffer]
    value_buffer: dict[str, str]  # value -> buffer name
    inplace: dict[str, str]  # node -> the input value whose buffer its output took
    steps: int

    def live_bytes(self) -> list[int]:
        """Bytes live at each step (the lower bound is their maximum)."""
        live = [0] * max(self.steps, 1)
        for b in self.buffers:
            for s in range(b.start, b.end + 1):
                live[s] += b.size
        return live

    @property
    def lower_bound(self) -> int:
        return max(self.live_bytes(), default=0)


def is_view(node: Node, graph: Graph) -> bool:
    """A view op whose output may alias its input (quantization must not change)."""
    if not getattr(get_op(node.op), "view", False):
        return False
    src = graph.types[node.inputs[0]]
    dst = graph.types[node.outputs[0]]
    return src.dtype == dst.dtype and src.quant == dst.quant


def analyze(
    graph: Graph,
    schedule: Sequence[Node],
    *,
    inplace: bool = True,
    scratch: ScratchFn | None = None,
    overwrite_inputs: bool = False,
) -> Liveness:
    """Group values into buffers and compute each buffer's lifetime."""
    step = {n.name: i for i, n in enumerate(schedule)}
    last = len(schedule) - 1
    params = set(graph.params)
    # first and last step each value is touched
    first: dict[str, int] = {v: 0 for v in graph.inputs}
    use: dict[str, int] = {v: 0 for v in graph.inputs}
    for n in schedule:
        for o in n.outputs:
            first[o] = use[o] = step[n.name]
        for v in n.inputs:
            if v is not None and v not in params:
                use[v] = max(use[v], step[n.name])
    for v in graph.outputs:
        if v in use:
            use[v] = last if last >= 0 else 0

    group: dict[str, str] = {v: v for v in first}  # value -> representative

    def root(v: str) -> str:
        while group[v] != v:
            v = group[v]
        return v

    taken: dict[str, str] = {}
    for n in schedule:
        if not n.outputs or n.inputs[0] is None or n.inputs[0] in params:
            continue
        out = n.outputs[0]
        if is_view(n, graph):
            group[out] = root(n.inputs[0])
            continue
        if not inplace or not get_op(n.op).inplace or len(n.outputs) != 1:
            continue
        for v in dict.fromkeys(x for x in n.inputs if x is not None and x not in params):
            r = root(v)
            members = [m for m in first if root(m) == r]
            dies_here = max(use[m] for m in members) == step[n.name]
            protected = any(m in graph.outputs for m in members) or (
                not overwrite_inputs and any(m in graph.inputs for m in members)
            )
            if dies_here and not protected and value_bytes(graph, v) == value_bytes(graph, out):
                if graph.types[v].shape == graph.types[out].shape:
                    group[out] = r
                    taken[n.name] = v
                    break

    buffers: dict[str, Buffer] = {}
    for v in first:
        r = root(v)
        b = buffers.get(r)
        size = value_bytes(graph, v)
        if b is None:
            buffers[r] = Buffer(r, size, first[v], use[v], [v])
        else:
            b.size = max(b.size, size)
            b.start = min(b.start, first[v])
            b.end = max(b.end, use[v])
            b.values.append(v)
    out = list(buffers.values())
    if scratch is not None:
        for n in schedule:
            size = int(scratch(graph, n))
            if size > 0:
                out.append(Buffer(f"{n.name}#scratch", size, step[n.name], step[n.name], [], kind="scratch"))
    value_buffer = {v: root(v) for v in first}
    return Liveness(out, value_buffer, taken, len(schedule))
