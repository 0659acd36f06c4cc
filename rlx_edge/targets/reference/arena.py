"""Run a Program inside one byte array at its planned offsets.

Every value is read from and written to the arena, so a plan that let two
live tensors overlap, misjudged an alias or an in-place op, or reached past
the arena would change the results. Comparing these results with the plain
interpreter (and with TFLite Micro) is therefore a test of the plan itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from rlx_edge.ir.interpret import bind_inputs, run_node
from rlx_edge.ir.ops import finish
from rlx_edge.ir.plan.program import Program
from rlx_edge.ir.shape import numel


class Arena:
    """Typed views into one ``uint8`` buffer."""

    def __init__(self, program: Program, poison: int = 0xA5) -> None:
        self.program = program
        # poison, not zeros: a kernel reading bytes nobody wrote must not get lucky
        self.bytes = np.full(program.arena_bytes, poison, dtype=np.uint8)

    def view(self, value: str) -> np.ndarray:
        t = self.program.graph.types[value]
        off = self.program.offsets[value]
        n = numel(t.shape) * t.dtype.storage_bytes
        return self.bytes[off : off + n].view(t.dtype.numpy).reshape(t.shape)

    def read(self, value: str) -> np.ndarray:
        return self.view(value).copy()

    def write(self, value: str, arr: np.ndarray) -> None:
        self.view(value)[...] = arr


def run_program(
    program: Program,
    inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray] | np.ndarray,
    *,
    trace: bool = False,
):
    """Execute ``program`` in its arena; returns outputs (and, with ``trace``, every value)."""
    g = program.graph
    arena = Arena(program)
    for name, arr in bind_inputs(g, inputs).items():
        arena.write(name, arr)
    traced: dict[str, np.ndarray] = {}
    for node in program.nodes():
        args = [None if v is None else (g.params[v] if v in g.params else arena.read(v)) for v in node.inputs]
        outs = run_node(g, node, args)
        out_types = tuple(g.types[o] for o in node.outputs)
        for name, arr, t in zip(node.outputs, outs, out_types):
            arr = finish(np.asarray(arr), t.dtype)
            arena.write(name, arr.reshape(t.shape))
            if trace:
                traced[name] = arena.read(name)
    outputs = {o: arena.read(o) for o in g.outputs}
    return (outputs, traced) if trace else outputs
