"""grad, value_and_grad, vjp, jvp and hvp: graph in, graph out."""

from __future__ import annotations

from collections.abc import Iterable

from rlx_edge.autodiff._graph import finalize, named_output, need_scalar, resolve_wrt, working_copy
from rlx_edge.autodiff._sweep import backward, forward
from rlx_edge.errors import OpError
from rlx_edge.ir.emitter import Emitter
from rlx_edge.ir.graph import Graph

Names = str | Iterable[str] | None


def _default_loss(g: Graph, loss: str | None, what: str) -> str:
    if loss is not None:
        return loss
    if len(g.outputs) != 1:
        raise OpError(f"{what}: graph {g.name!r} has {len(g.outputs)} outputs; name the loss with loss=")
    return g.outputs[0]


def _lifted(graph: Graph, wrt: list[str]) -> list[str]:
    """The params among ``wrt`` (resolve_wrt let through inputs and params only)."""
    return [w for w in wrt if w not in graph.inputs]


def _record(g: Graph, transform: str, **info: object) -> None:
    g.metadata = {**g.metadata, "autodiff": {"transform": transform, **info}}


def _reverse(graph: Graph, loss: str | None, wrt: Names, what: str, keep: bool, aux: bool) -> Graph:
    names = resolve_wrt(graph, wrt, what)
    g = working_copy(graph, _lifted(graph, names))
    loss = _default_loss(g, loss, what)
    need_scalar(g, loss, what)
    e = Emitter(g, "grad")
    cts = backward(e, {loss: e.const(1, g.tensor(loss), g.types[loss].shape)}, names)
    outs = [named_output(e, cts[w] if cts[w] is not None else e.zeros(g.tensor(w)), f"grad/{w}") for w in names]
    others = [o for o in g.outputs if o != loss] if aux else []
    final = ([loss] if keep else []) + outs + others
    _record(g, what, loss=loss, wrt=names, grads=outs)
    return finalize(g, final)


def grad(graph: Graph, loss: str | None = None, wrt: Names = None) -> Graph:
    """The gradient of the scalar output ``loss`` with respect to ``wrt``, as a graph.

    ``loss`` defaults to the graph's only output; ``wrt`` names float graph
    inputs and params (default: every float param). Params named in ``wrt``
    become graph inputs of the same name (after the graph's own inputs), so
    the result is a function of the current weights; other params stay
    constants. The outputs are ``grad/<name>`` per ``wrt`` entry, each of its
    value's shape and dtype.
    """
    return _reverse(graph, loss, wrt, "grad", keep=False, aux=False)


def value_and_grad(graph: Graph, loss: str | None = None, wrt: Names = None, *, aux: bool = False) -> Graph:
    """As :func:`grad`, with the loss as the first output; ``aux=True`` keeps the graph's other outputs last."""
    return _reverse(graph, loss, wrt, "value_and_grad", keep=True, aux=aux)


def vjp(graph: Graph, wrt: Names = None, of: Names = None) -> Graph:
    """Reverse mode with given cotangents: ``ct/<out>`` inputs in, ``grad/<name>`` outputs out.

    ``of`` names the outputs whose cotangents are inputs (default: all). The
    result's outputs are the graph's outputs, then the cotangent of each
    ``wrt`` entry (params in ``wrt`` become inputs, as in :func:`grad`).
    """
    names = resolve_wrt(graph, wrt, "vjp")
    g = working_copy(graph, _lifted(graph, names))
    ofs = list(g.outputs) if of is None else ([of] if isinstance(of, str) else list(of))
    for o in ofs:
        if o not in g.outputs:
            raise OpError(f"vjp: {o!r} is not an output of graph {g.name!r}")
        t = g.types[o]
        if not t.dtype.is_float or t.quant is not None:
            raise OpError(f"vjp: output {o!r} is {t.dtype}; cotangents exist for float values only")
    e = Emitter(g, "vjp")
    seeds = {}
    for o in ofs:
        t = g.types[o]
        seeds[o] = g.input(_fresh_input(g, f"ct/{o}"), t.shape, t.dtype)
    cts = backward(e, seeds, names)
    outs = [named_output(e, cts[w] if cts[w] is not None else e.zeros(g.tensor(w)), f"grad/{w}") for w in names]
    _record(g, "vjp", wrt=names, of=ofs, grads=outs)
    return finalize(g, list(g.outputs) + outs)


def jvp(graph: Graph, wrt: Names = None) -> Graph:
    """Forward mode: a ``tangent/<name>`` input per ``wrt`` entry, a ``tangent/<out>`` output per graph output.

    The outputs are the graph's outputs, then their tangents (params in
    ``wrt`` become inputs, as in :func:`grad`).
    """
    names = resolve_wrt(graph, wrt, "jvp")
    g = working_copy(graph, _lifted(graph, names))
    e = Emitter(g, "jvp")
    seeds = {}
    for w in names:
        t = g.types[w]
        seeds[w] = g.input(_fresh_input(g, f"tangent/{w}"), t.shape, t.dtype)
    tan = forward(e, seeds)
    primal = list(g.outputs)
    outs = [
        named_output(e, tan[o] if o in tan else e.zeros(g.tensor(o)), f"tangent/{o}")
        for o in primal
        if g.types[o].dtype.is_float and g.types[o].quant is None
    ]
    _record(g, "jvp", wrt=names, tangent_inputs=[s.name for s in seeds.values()], tangents=outs)
    return finalize(g, primal + outs)


def hvp(graph: Graph, loss: str | None = None, wrt: Names = None) -> Graph:
    """Hessian-vector products of the scalar ``loss``, forward over reverse.

    Inputs: the graph's inputs (params in ``wrt`` lifted, as in :func:`grad`),
    then ``tangent/<name>`` per ``wrt`` entry (the vector). Outputs:
    ``hvp/<name>`` per ``wrt`` entry, the Hessian times the vector.
    """
    names = resolve_wrt(graph, wrt, "hvp")
    gg = grad(graph, loss, names)
    grads = list(gg.outputs)
    g = working_copy(gg)
    e = Emitter(g, "hvp")
    seeds = {}
    for w in names:
        t = g.types[w]
        seeds[w] = g.input(_fresh_input(g, f"tangent/{w}"), t.shape, t.dtype)
    tan = forward(e, seeds)
    outs = [named_output(e, tan[d] if d in tan else e.zeros(g.tensor(d)), f"hvp/{w}") for d, w in zip(grads, names)]
    _record(g, "hvp", loss=gg.metadata["autodiff"]["loss"], wrt=names, hvps=outs)
    return finalize(g, outs)


def _fresh_input(g: Graph, name: str) -> str:
    cand, k = name, 1
    while cand in g.types or any(n.name == cand for n in g.nodes):
        cand, k = f"{name}_{k}", k + 1
    return cand
