"""What every transform shares: the copy of the graph it extends, checks, output naming."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rlx_edge.errors import IRError, OpError
from rlx_edge.ir.emitter import Emitter
from rlx_edge.ir.graph import Graph, Node, Tensor
from rlx_edge.ir.passes.lower_hir import lower_hir
from rlx_edge.ir.passes.manager import get_pass
from rlx_edge.ir.verify import verify


def working_copy(graph: Graph, lift: Sequence[str] = ()) -> Graph:
    """``graph`` lowered to MIR and replayed into a new graph; the params named in ``lift`` become inputs.

    Lifted params follow the graph's own inputs, in ``lift`` order, with
    their names, shapes and dtypes: a training loop feeds the current
    weights each step instead of rebuilding the graph.
    """
    g = lower_hir(graph) if graph.stage == "hir" else graph
    out = Graph(g.name, "mir")
    out.metadata = dict(g.metadata)
    for name in g.inputs:
        t = g.types[name]
        out.input(name, t.shape, t.dtype, t.quant)
    for name in lift:
        t = g.types[name]
        out.input(name, t.shape, t.dtype, t.quant)
    for name, arr in g.params.items():
        if name not in lift:
            t = g.types[name]
            out.param(name, arr, t.quant, dtype=t.dtype)
    for node in g.nodes:
        quants = [g.types[o].quant for o in node.outputs]
        out.add_node(node.op, node.inputs, node.attrs, name=node.name, out_names=node.outputs, out_quant=quants)
    out.output(*g.outputs)
    out._counters = dict(g._counters)
    return out


def resolve_wrt(graph: Graph, wrt: str | Iterable[str] | None, what: str) -> list[str]:
    """The names to differentiate with respect to: float graph inputs or params (default: every float param)."""
    g = lower_hir(graph) if graph.stage == "hir" else graph
    if wrt is None:
        names = [n for n in g.params if _differentiable_type(g, n)]
        if not names:
            raise OpError(f"{what}: graph {g.name!r} has no float params; name the values to differentiate in wrt=")
        return names
    names = [wrt] if isinstance(wrt, str) else list(wrt)
    if not names:
        raise OpError(f"{what}: wrt names no value")
    if len(set(names)) != len(names):
        raise OpError(f"{what}: wrt {names} names a value twice")
    for n in names:
        if n not in g.inputs and n not in g.params:
            raise OpError(f"{what}: wrt {n!r} is not a graph input or param of {g.name!r}")
        if not _differentiable_type(g, n):
            raise OpError(f"{what}: wrt {n!r} is {g.types[n].dtype}; only float values can be differentiated")
    return names


def _differentiable_type(g: Graph, name: str) -> bool:
    t = g.types[name]
    return t.dtype.is_float and t.quant is None


def check_node(g: Graph, node: Node, active: Iterable[str]) -> None:
    """A node a derivative must pass through: its op differentiable, the values involved float.

    An integer or quantized value is blamed on the node that produced it (a
    cast to int, argmax, quantize), where the derivative was lost.
    """
    _check_op(node)
    for v in [*active, *node.outputs]:
        t = g.types[v]
        if not t.dtype.is_float or t.quant is not None:
            src = g.producer(v)
            if src is not None:
                _check_op(src)
            where = f"node {(src or node).name!r} ({(src or node).op})"
            kind = "quantized" if t.quant is not None else str(t.dtype)
            raise OpError(
                f"{where}: value {v!r} is {kind}; derivatives flow through float values only"
                " (use fake_quant for quantization-aware training)"
            )


def _check_op(node: Node) -> None:
    if not node.opdef.differentiable:
        raise OpError(
            f"node {node.name!r} ({node.op}): {node.op} is not differentiable, and the derivative asked for"
            " depends on it"
        )


def named_output(e: Emitter, value: Tensor, name: str) -> str:
    """``value`` under the output name ``name`` (an identity reshape), or a fresh variant of it."""
    g = e.graph
    cand, k = name, 1
    while cand in g.types or any(n.name == cand for n in g.nodes):
        cand, k = f"{name}_{k}", k + 1
    shape = e.static_shape(value)
    g.add_node("reshape", [value], {"shape": shape}, name=cand)
    return cand


def finalize(g: Graph, outputs: Sequence[str]) -> Graph:
    """Set the outputs, drop what none of them needs, verify."""
    g.outputs = []
    g.output(*outputs)
    g = get_pass("dce")(g)
    try:
        verify(g)
    except IRError as err:  # a rule built an ill-typed node: a bug in the rule, not in the user's graph
        raise RuntimeError(f"autodiff produced an invalid graph: {err}") from err
    return g


def need_scalar(g: Graph, name: str, what: str) -> None:
    if name not in g.outputs:
        raise OpError(f"{what}: loss {name!r} is not an output of graph {g.name!r} (outputs: {', '.join(g.outputs)})")
    t = g.types[name]
    if any(d != 1 for d in t.shape):
        raise OpError(f"{what}: loss {name!r} has shape {list(t.shape)}; a loss must be a scalar (one element)")
    if not t.dtype.is_float or t.quant is not None:
        raise OpError(f"{what}: loss {name!r} is {t.dtype}; a loss must be a float value")
