"""The Program (LIR): a graph for one target, its schedule and arena plan."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rlx_edge.ir.graph import Graph, Node
from rlx_edge.ir.plan.liveness import Buffer
from rlx_edge.ir.prepared import Prepared


@dataclass
class Program:
    """Everything an emitter needs, decided once for every target.

    Attributes
    ----------
    graph:
        The legalized graph (stage ``lir``).
    target:
        The target it was planned for (``reference``, ``cortexm``, ...).
    schedule:
        Node names in execution order.
    offsets:
        Arena offset of every non-constant value (graph inputs and outputs
        included); values sharing a buffer (views, in-place) share an offset.
    scratch:
        Node name -> (offset, bytes) of its kernel scratch buffer.
    arena_bytes, lower_bound_bytes, scratch_bytes, weight_bytes, alignment:
        Sizes in bytes; the lower bound is the most bytes live at once under
        this schedule (scratch included).
    buffers:
        The placed buffers (for reports and drawings).
    inplace:
        Node name -> the input value whose buffer the node's output reuses.
    quant:
        Node name -> its op's prepared integer parameters (multipliers,
        shifts, zero points, clamps, tables: :class:`Prepared`), for every
        quantized node whose op has a ``prepare``. Targets read these.
    """

    graph: Graph
    target: str
    schedule: list[str]
    offsets: dict[str, int]
    scratch: dict[str, tuple[int, int]]
    arena_bytes: int
    lower_bound_bytes: int
    scratch_bytes: int
    weight_bytes: int
    alignment: int
    algorithm: str
    buffers: list[Buffer] = field(default_factory=list)
    inplace: dict[str, str] = field(default_factory=dict)
    quant: dict[str, Prepared] = field(default_factory=dict)

    def nodes(self) -> list[Node]:
        by_name = {n.name: n for n in self.graph.nodes}
        return [by_name[s] for s in self.schedule]

    def value_bytes(self, value: str) -> int:
        from rlx_edge.ir.plan.schedule import value_bytes

        return value_bytes(self.graph, value)

    def table(self) -> list[dict[str, Any]]:
        """One row per placed buffer: offset, size, lifetime, the values in it."""
        rows = []
        for b in sorted(self.buffers, key=lambda b: (b.offset, b.start)):
            rows.append(
                {
                    "buffer": b.name,
                    "kind": b.kind,
                    "offset": b.offset,
                    "bytes": b.size,
                    "first_step": b.start,
                    "last_step": b.end,
                    "values": list(b.values),
                }
            )
        return rows

    def summary(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "arena_bytes": self.arena_bytes,
            "lower_bound_bytes": self.lower_bound_bytes,
            "scratch_bytes": self.scratch_bytes,
            "weight_bytes": self.weight_bytes,
            "alignment": self.alignment,
            "algorithm": self.algorithm,
            "steps": len(self.schedule),
            "inplace": len(self.inplace),
        }
