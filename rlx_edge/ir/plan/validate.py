"""An independent proof that an arena plan is sound.

It trusts nothing the planner computed except the schedule and the offsets:
lifetimes, views and in-place sharing are recomputed here from the graph, and
every pair of values whose bytes overlap must be justified.
"""

from __future__ import annotations

from rlx_edge.errors import IRError
from rlx_edge.ir.ops import get_op
from rlx_edge.ir.plan.program import Program
from rlx_edge.ir.shape import numel


class PlanError(IRError):
    """A plan that would corrupt data or access memory outside the arena."""


def validate(program: Program) -> None:
    g = program.graph
    nodes = program.nodes()
    if sorted(program.schedule) != sorted(n.name for n in g.nodes):
        raise PlanError("schedule does not run every node exactly once")
    step = {n.name: i for i, n in enumerate(nodes)}
    params = set(g.params)
    last = len(nodes) - 1
    born = {v: 0 for v in g.inputs}
    dies = {v: 0 for v in g.inputs}
    for n in nodes:
        for v in n.inputs:
            if v is None or v in params:
                continue
            if v not in born:
                raise PlanError(f"node {n.name!r} reads {v!r} before it is computed in this schedule")
            dies[v] = max(dies[v], step[n.name])
        for o in n.outputs:
            born[o] = dies[o] = step[n.name]
    for v in g.outputs:
        dies[v] = max(dies[v], last)

    def nbytes(v: str) -> int:
        t = g.types[v]
        return numel(t.shape) * t.dtype.storage_bytes

    # view classes: a view op's output is its input's bytes
    cls = {v: v for v in born}

    def find(v: str) -> str:
        while cls[v] != v:
            v = cls[v]
        return v

    for n in nodes:
        if getattr(get_op(n.op), "view", False) and n.inputs and n.inputs[0] not in params:
            cls[find(n.outputs[0])] = find(n.inputs[0])
    class_dies: dict[str, int] = {}
    for v in born:
        class_dies[find(v)] = max(class_dies.get(find(v), 0), dies[v])

    spans: list[tuple[str, int, int, int, int]] = []  # name, lo, hi, born, dies
    for v in born:
        if v not in program.offsets:
            raise PlanError(f"value {v!r} has no arena offset")
        lo = program.offsets[v]
        hi = lo + nbytes(v)
        if lo < 0 or hi > program.arena_bytes:
            raise PlanError(f"value {v!r} [{lo}, {hi}) lies outside the arena of {program.arena_bytes} bytes")
        if lo % program.alignment:
            raise PlanError(f"value {v!r} at offset {lo} is not {program.alignment}-byte aligned")
        spans.append((v, lo, hi, born[v], dies[v]))
    for node, (lo, size) in program.scratch.items():
        s = step[node]
        if lo < 0 or lo + size > program.arena_bytes:
            raise PlanError(f"scratch of node {node!r} lies outside the arena")
        spans.append((f"{node}#scratch", lo, lo + size, s, s))

    spans.sort(key=lambda t: t[1])
    for i, (a, alo, ahi, ab, ad) in enumerate(spans):
        for b, blo, bhi, bb, bd in spans[i + 1 :]:
            if blo >= ahi:
                break
            if ahi == alo or bhi == blo:
                continue  # an empty value (a zero-size slice) occupies no bytes
            if max(ab, bb) > min(ad, bd):
                continue  # never live at the same time
            if _shared_legally(nodes, find, cls, class_dies, a, alo, ab, b, blo, bb):
                continue
            raise PlanError(
                f"values {a!r} and {b!r} are live together (steps {max(ab, bb)}..{min(ad, bd)}) "
                f"but overlap in the arena ([{alo}, {ahi}) and [{blo}, {bhi}))"
            )


def _shared_legally(nodes, find, cls, class_dies, a, alo, ab, b, blo, bb) -> bool:
    if "#scratch" in a or "#scratch" in b or alo != blo:
        return False
    if find(a) == find(b):
        return True  # views of the same bytes
    # in-place: the later value is the output of an elementwise node that consumes
    # the earlier value's bytes at the very step where those bytes die
    first, later, s = (a, b, bb) if ab <= bb else (b, a, ab)
    node = nodes[s]
    if later not in node.outputs or not get_op(node.op).inplace:
        return False
    if not any(v is not None and v in cls and find(v) == find(first) for v in node.inputs):
        return False
    return class_dies[find(first)] == s
