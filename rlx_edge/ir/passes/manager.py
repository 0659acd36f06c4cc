"""Running optimizer passes: a registry of named passes, a manager and its report.

A pass is a pure function ``(graph, ctx) -> graph``: it works on a copy and
never mutates its argument. Through ``ctx`` it records what it did (``fired``)
and what it recognized but left alone, with the reason (``skipped``); the
:class:`PassManager` collects those events into a :class:`PassReport` and,
when asked (always in tests), verifies the graph after every pass so that a
broken rewrite is caught at the pass that made it::

    from rlx_edge.ir.passes import optimize
    g2, report = optimize(g)
    print(report.text())
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rlx_edge.errors import IRError
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.rules import RuleTable

PassFn = Callable[[Graph, "PassContext"], Graph]


@dataclass(frozen=True)
class Event:
    """One thing a pass did (``fired``) or chose not to do (``skipped``) at a node."""

    pass_name: str
    kind: str  # "fired" | "skipped"
    node: str
    what: str

    def to_json(self) -> dict[str, str]:
        return {"pass": self.pass_name, "kind": self.kind, "node": self.node, "what": self.what}


@dataclass
class PassContext:
    """Handed to a running pass: where it records events, plus pass options."""

    pass_name: str
    options: dict[str, Any] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)

    def fired(self, node: str, what: str) -> None:
        self.events.append(Event(self.pass_name, "fired", node, what))

    def skipped(self, node: str, why: str) -> None:
        self.events.append(Event(self.pass_name, "skipped", node, why))


@dataclass(frozen=True)
class Pass:
    """A named graph rewrite."""

    name: str
    fn: PassFn
    doc: str = ""

    def __call__(self, graph: Graph, ctx: PassContext | None = None) -> Graph:
        return self.fn(graph, ctx or PassContext(self.name))


# Every pass by name, with its one-line description (metadata "doc").
PASSES: RuleTable[PassFn] = RuleTable("passes", what="pass")


def register(name: str, doc: str = "") -> Callable[[PassFn], PassFn]:
    """Register ``fn`` as the pass ``name`` (registration is by import, like ops)."""

    def deco(fn: PassFn) -> PassFn:
        return PASSES.rule(name, doc=doc or (fn.__doc__ or "").strip().splitlines()[0])(fn)

    return deco


def get_pass(name: str) -> Pass:
    import rlx_edge.ir.passes  # noqa: F401  (importing the package registers every pass)

    if name not in PASSES:
        raise IRError(f"unknown pass {name!r}; known passes: {', '.join(PASSES)}")
    return Pass(name, PASSES[name], PASSES.metadata(name)["doc"])


# The default pipeline. QDQ patterns (dequantize -> float op -> quantize) become
# integer ops before folding, which would turn their weight dequantize nodes into
# float params; the weight-only dequantize nodes left are what the fusions below
# need as float params. Layout transposes fold once constants are folded; DCE and
# CSE clean up after each rewrite. Fusing activations comes after BN folding,
# since a conv -> bn -> relu chain only fuses once the batch norm is gone.
DEFAULT_PIPELINE = (
    "qdq_fold", "fold", "transpose_fold", "symmetric_weights", "simplify", "cse", "bn_fold", "bias_fold",
    "pad_fold", "fuse_activation", "dce",
)  # fmt: skip


@dataclass
class PassReport:
    """What every pass of one run did, in order."""

    graph: str
    events: list[Event] = field(default_factory=list)
    runs: list[dict[str, Any]] = field(default_factory=list)  # per pass run: name, iteration, nodes before/after, ms

    def fired(self, pass_name: str | None = None) -> list[Event]:
        return [e for e in self.events if e.kind == "fired" and pass_name in (None, e.pass_name)]

    def skipped(self, pass_name: str | None = None) -> list[Event]:
        return [e for e in self.events if e.kind == "skipped" and pass_name in (None, e.pass_name)]

    def to_json(self) -> dict[str, Any]:
        return {"graph": self.graph, "runs": self.runs, "events": [e.to_json() for e in self.events]}

    def text(self) -> str:
        """Readable report: one line per event, grouped by pass."""
        lines = [f"passes over graph {self.graph!r}:"]
        for r in self.runs:
            lines.append(
                f"  {r['pass']:<16} iter {r['iteration']}  nodes {r['nodes_before']} -> {r['nodes_after']}"
                f"  ({r['ms']:.1f} ms)"
            )
        for e in self.events:
            mark = "+" if e.kind == "fired" else "-"
            lines.append(f"  {mark} {e.pass_name}: {e.node}: {e.what}")
        return "\n".join(lines)


def _verify_default() -> bool:
    # Verifying after every pass costs about as much as the passes: on in the test
    # suite (tests/conftest.py sets RLX_EDGE_VERIFY_PASSES=1), off in production runs.
    return os.environ.get("RLX_EDGE_VERIFY_PASSES", "0") not in ("", "0")


class PassManager:
    """Runs passes in order, verifying after each (``verify``) and collecting a report.

    ``verify=None`` verifies when ``RLX_EDGE_VERIFY_PASSES`` is set (the tests set it).

    ``max_iterations`` > 1 repeats the whole pipeline until no pass fires, since
    one rewrite can enable another (a fold that exposes an identity).
    """

    def __init__(
        self,
        passes: Sequence[str | Pass] = DEFAULT_PIPELINE,
        *,
        verify: bool | None = None,
        max_iterations: int = 3,
        options: dict[str, Any] | None = None,
    ) -> None:
        self.passes = [p if isinstance(p, Pass) else get_pass(p) for p in passes]
        self.verify = _verify_default() if verify is None else verify
        self.max_iterations = max(1, max_iterations)
        self.options = dict(options or {})

    def run(self, graph: Graph) -> tuple[Graph, PassReport]:
        from rlx_edge.ir.passes._provenance import PassHistory
        from rlx_edge.ir.passes.lower_hir import lower_hir
        from rlx_edge.ir.verify import verify

        given = graph
        if graph.stage == "hir":  # passes rewrite MIR
            graph = lower_hir(graph)
        report = PassReport(graph.name)
        history = PassHistory(graph)  # per node: the passes that rewrote it or left it, and why
        seen: set[tuple[str, str, str, str]] = set()
        for it in range(self.max_iterations):
            fired_any = False
            for p in self.passes:
                ctx = PassContext(p.name, self.options)
                before = len(graph.nodes)
                snapshot = history.snapshot(graph)
                t0 = time.perf_counter()
                graph = p(graph, ctx)
                ms = (time.perf_counter() - t0) * 1e3
                history.add(p.name, snapshot, graph, ctx.events)
                if self.verify:
                    try:
                        verify(graph)
                    except IRError as e:
                        raise IRError(f"after pass {p.name!r}: {e}") from e
                report.runs.append(
                    {"pass": p.name, "iteration": it, "nodes_before": before, "nodes_after": len(graph.nodes), "ms": ms}
                )
                for e in ctx.events:
                    # a "skipped" seen in an earlier iteration says nothing new
                    key = (e.pass_name, e.kind, e.node, e.what)
                    if e.kind == "fired":
                        fired_any = True
                    if key not in seen:
                        seen.add(key)
                        report.events.append(e)
            if not fired_any:
                break
        if graph is given:  # no pass copied it: the provenance goes on a copy, the caller's graph stays as it was
            graph = graph.copy()
        history.store(graph)
        return graph, report


def optimize(
    graph: Graph, passes: Sequence[str | Pass] = DEFAULT_PIPELINE, *, verify: bool | None = None, **options: Any
) -> tuple[Graph, PassReport]:
    """Run the default (or given) pipeline on ``graph``; returns the new graph and the report."""
    return PassManager(passes, verify=verify, options=options).run(graph)
