"""The two sweeps over a graph: tangents forward (jvp rules), cotangents backward (vjp rules)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from rlx_edge.autodiff._graph import check_node
from rlx_edge.errors import OpError
from rlx_edge.ir.emitter import Emitter, check_like
from rlx_edge.ir.graph import Graph, Tensor


def _reachable_from(g: Graph, sources: Iterable[str]) -> set[str]:
    seen = set(sources)
    for node in g.nodes:
        if any(v in seen for v in node.inputs if v is not None):
            seen.update(node.outputs)
    return seen


def forward(e: Emitter, tangents: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """Tangents of every value that depends on those given (by value name), built with the jvp rules.

    The primal nodes are those of ``e.graph`` now; the tangent nodes follow them.
    """
    g = e.graph
    tan: dict[str, Tensor] = dict(tangents)
    for node in list(g.nodes):
        ts = [None if v is None else tan.get(v) for v in node.inputs]
        if all(t is None for t in ts):
            continue
        active = [v for v, t in zip(node.inputs, ts) if t is not None]
        check_node(g, node, active)
        opdef = node.opdef
        e.where = f"node {node.name!r} ({node.op})"
        if opdef._jvp is None:
            raise OpError(f"{e.where}: {node.op} declares no jvp rule")
        primals = opdef._pad_inputs([None if v is None else g.tensor(v) for v in node.inputs])
        outs = [g.tensor(o) for o in node.outputs]
        got = list(opdef._jvp(e, primals, outs, opdef._pad_inputs(ts), **node.attrs))
        if len(got) != len(outs):
            raise RuntimeError(f"{e.where}: jvp rule gave {len(got)} tangents for {len(outs)} outputs")
        for o, t in zip(outs, got):
            check_like(t, o, f"{e.where}: tangent of {o.name!r}")
            if t is not None:
                tan[o.name] = t
    e.where = ""
    return tan


def backward(e: Emitter, seeds: Mapping[str, Tensor], wrt: Iterable[str]) -> dict[str, Tensor | None]:
    """Cotangents of ``wrt`` given those of some values (``seeds``), built with the vjp rules.

    Only nodes on a path from ``wrt`` to a seeded value are visited; a value
    no cotangent reaches gets ``None`` (zero).
    """
    g = e.graph
    wrt = list(wrt)
    active = _reachable_from(g, wrt)
    ct: dict[str, Tensor] = dict(seeds)
    for node in reversed(list(g.nodes)):
        cts = [ct.get(o) for o in node.outputs]
        ins = [v for v in node.inputs if v is not None and v in active]
        if not ins or all(c is None for c in cts):
            continue
        check_node(g, node, ins)
        opdef = node.opdef
        e.where = f"node {node.name!r} ({node.op})"
        if opdef._vjp is None:
            raise OpError(f"{e.where}: {node.op} declares no vjp rule")
        primals = opdef._pad_inputs([None if v is None else g.tensor(v) for v in node.inputs])
        outs = [g.tensor(o) for o in node.outputs]
        got = list(opdef._vjp(e, primals, outs, cts, **node.attrs))
        if len(got) < len(node.inputs):
            raise RuntimeError(f"{e.where}: vjp rule gave {len(got)} cotangents for {len(node.inputs)} inputs")
        for v, c in zip(node.inputs, got):
            if v is None or c is None or v not in active:
                continue
            check_like(c, g.tensor(v), f"{e.where}: cotangent of {v!r}")
            ct[v] = e.add_maybe(ct.get(v), c)
    e.where = ""
    return {w: ct.get(w) for w in wrt}
