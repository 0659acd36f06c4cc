"""Bind symbolic dimensions to sizes before compilation (``compile --bind seq=16``).

A graph may carry symbols (``"seq"``, ``"N"``) in its input shapes, and
inference carries them to the values computed from those inputs. Targets that
plan an arena (the reference planner, Cortex-M, FPGA) need every size static:
:func:`bind_symbols` gives a copy with sizes in their place, and
:func:`require_static` is the one check that names what is still unbound.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from rlx_edge.errors import IRError
from rlx_edge.ir.graph import Graph, infer_node
from rlx_edge.ir.ops import get_op
from rlx_edge.ir.shape import bind, symbols
from rlx_edge.ir.types import TensorType


class BindingError(IRError):
    """A ``--bind NAME=SIZE`` the graph cannot take."""


def graph_symbols(graph: Graph) -> set[str]:
    """Every symbol in the graph's value types (inputs first among them; inference carries them on)."""
    out: set[str] = set()
    for name in graph.inputs:
        out |= symbols(graph.types[name].shape)
    for t in graph.types.values():
        out |= symbols(t.shape)
    return out


def parse_binding(text: str) -> tuple[str, int]:
    """``NAME=SIZE`` as (name, size): a symbol name (an identifier) and a positive integer."""
    name, eq, size = text.partition("=")
    name, size = name.strip(), size.strip()
    if not eq or not name.isidentifier():
        raise BindingError(f"{text!r} is not NAME=SIZE (a symbol name, '=', a positive integer), e.g. seq=16")
    try:
        value = int(size)
    except ValueError:
        raise BindingError(f"{name}={size}: the size must be a positive integer") from None
    if value < 1:
        raise BindingError(f"{name}={size}: the size must be a positive integer, not {value}")
    return name, value


def bindings(pairs: Iterable[tuple[str, int]]) -> dict[str, int]:
    """Parsed ``--bind`` pairs as one mapping; a symbol bound twice to different sizes is an error."""
    out: dict[str, int] = {}
    for name, value in pairs:
        if out.setdefault(name, value) != value:
            raise BindingError(f"--bind {name} is given twice ({out[name]} and {value}); give it once")
    return out


def bind_symbols(graph: Graph, sizes: Mapping[str, int]) -> Graph:
    """A copy of ``graph`` with the named symbols replaced by sizes and types re-inferred."""
    have = graph_symbols(graph)
    unknown = sorted(set(sizes) - have)
    if unknown:
        known = f"its symbols are {', '.join(sorted(have))}" if have else "it has no symbolic dimensions"
        raise BindingError(f"graph {graph.name!r} has no symbol {', '.join(unknown)}; {known}")
    for s, v in sizes.items():
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise BindingError(f"symbol {s} must be bound to a positive int, got {v!r}")
    g = graph.copy()
    for name in g.inputs:
        t = g.types[name]
        g.types[name] = TensorType(bind(t.shape, sizes), t.dtype, t.quant)
    for node in g.nodes:
        opdef = get_op(node.op)
        in_types = [None if v is None else g.types[v] for v in node.inputs]
        outs = infer_node(opdef, in_types, node.attrs, f"node {node.name!r} ({node.op})")
        for o, t in zip(node.outputs, outs):
            g.types[o] = TensorType(t.shape, g.types[o].dtype, g.types[o].quant)
    return g


def require_static(graph: Graph, target: str) -> None:
    """Nothing if every dimension of ``graph`` is static; else an error naming the unbound symbols and
    where one is first seen, with the ``--bind`` that fixes it."""
    unbound = graph_symbols(graph)
    if not unbound:
        return
    first = sorted(unbound)[0]
    where = next(v for v in [*graph.inputs, *graph.types] if first in symbols(graph.types[v].shape))
    shape = "[" + ",".join(map(str, graph.types[where].shape)) + "]"
    hint = " ".join(f"--bind {s}=N" for s in sorted(unbound))
    raise IRError(
        f"target {target!r} plans static sizes but symbol(s) {', '.join(sorted(unbound))} are unbound"
        f" ({where!r} is {shape}); give {hint}"
    )
