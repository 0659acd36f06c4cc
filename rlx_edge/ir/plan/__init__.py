"""Static memory planning: schedule, lifetimes, arena offsets -> Program (LIR).

>>> program = plan(graph)                     # doctest: +SKIP
>>> program.arena_bytes, program.lower_bound_bytes
"""

from __future__ import annotations

from collections.abc import Sequence

from rlx_edge.errors import IRError, shorten
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.plan.liveness import Liveness, ScratchFn, analyze
from rlx_edge.ir.plan.placement import ALGORITHMS, place
from rlx_edge.ir.plan.prepare import node_context, prepare_graph, prepare_node
from rlx_edge.ir.plan.program import Program
from rlx_edge.ir.plan.schedule import memory_aware, topological
from rlx_edge.ir.plan.validate import PlanError, validate
from rlx_edge.ir.prepared import Prepared
from rlx_edge.ir.shape import is_static

SCHEDULES = {"topological": topological, "memory": memory_aware}


def plan(
    graph: Graph,
    *,
    target: str = "reference",
    alignment: int = 16,
    schedule: str = "auto",
    algorithms: Sequence[str] = tuple(ALGORITHMS),
    inplace: bool = True,
    scratch: ScratchFn | None = None,
    quant: dict[str, Prepared] | None = None,
) -> Program:
    """Plan ``graph`` into one arena.

    ``schedule`` is ``topological``, ``memory`` or ``auto`` (both, keeping the
    smaller arena). ``scratch(graph, node) -> bytes`` declares kernel scratch
    (targets pass their own). ``quant`` is the nodes' prepared integer
    parameters (:func:`prepare_graph`, computed here when not given); it
    becomes ``Program.quant``. The result is validated before it is returned.
    """
    if graph.stage == "hir":
        raise IRError("plan needs an MIR graph; lower the HIR blocks first (lower_hir)")
    for v, t in graph.types.items():
        if not is_static(t.shape):
            raise IRError(f"value {v!r} has symbolic shape {list(t.shape)}; bind the symbols before planning")
    if alignment < 1 or alignment & (alignment - 1):
        raise IRError(f"alignment must be a power of two, got {alignment}")
    for v in graph.outputs:
        if v in graph.params:
            # An arena holds computed values; a constant output would need a copy no target emits.
            raise IRError(f"graph output {shorten(v, 80)!r} is a constant (weights), not computed by any node; "
                          "outputs must be node results")  # fmt: skip
    unknown = [a for a in algorithms if a not in ALGORITHMS]
    if unknown:
        raise IRError(f"unknown placement algorithm {', '.join(unknown)}; use {', '.join(ALGORITHMS)}")
    if quant is None:
        quant = prepare_graph(graph)
    names = list(SCHEDULES) if schedule == "auto" else [schedule]
    if any(n not in SCHEDULES for n in names):
        raise IRError(f"unknown schedule {schedule!r}; use auto, {', '.join(SCHEDULES)}")

    best: Program | None = None
    for sname in names:
        order = SCHEDULES[sname](graph)
        live: Liveness = analyze(graph, order, inplace=inplace, scratch=scratch)
        placement = place(live.buffers, alignment, algorithms)
        for b, off in zip(live.buffers, placement.offsets):
            b.offset = off
        offsets = {v: next(b.offset for b in live.buffers if b.name == r) for v, r in live.value_buffer.items()}
        scratch_map = {b.name.split("#")[0]: (b.offset, b.size) for b in live.buffers if b.kind == "scratch"}
        lir = graph.copy()
        lir.stage = "lir"
        prog = Program(
            graph=lir,
            target=target,
            schedule=[n.name for n in order],
            offsets=offsets,
            scratch=scratch_map,
            arena_bytes=placement.arena_bytes,
            lower_bound_bytes=live.lower_bound,
            scratch_bytes=max((s for _, s in scratch_map.values()), default=0),
            weight_bytes=sum(a.nbytes for a in graph.params.values()),
            alignment=alignment,
            algorithm=f"{sname}+{placement.algorithm}",
            buffers=live.buffers,
            inplace=dict(live.inplace),
            quant=dict(quant),
        )
        if best is None or prog.arena_bytes < best.arena_bytes:
            best = prog
    assert best is not None
    validate(best)
    return best


__all__ = ["PlanError", "Program", "node_context", "plan", "prepare_graph", "prepare_node", "validate"]
