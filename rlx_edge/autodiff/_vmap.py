"""vmap: a graph mapped over a new batch axis of some of its inputs, as one graph."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rlx_edge.autodiff._graph import finalize, named_output
from rlx_edge.errors import OpError
from rlx_edge.ir.emitter import Emitter
from rlx_edge.ir.graph import Graph, Node, Tensor
from rlx_edge.ir.passes.lower_hir import lower_hir

InAxes = int | None | Sequence[int | None] | Mapping[str, int | None]


def vmap(graph: Graph, in_axes: InAxes = 0, axis_size: int | None = None) -> Graph:
    """``graph`` applied to every slice of its batched inputs along a new axis (``jax.vmap``).

    ``in_axes`` gives, per graph input, where its new batch axis goes (``None``:
    not batched): one value for every input, a sequence in input order, or a
    mapping by name (absent names are not batched). ``axis_size`` is the batch
    size. Inputs keep their names with the batch axis inserted; every output
    gets the batch axis first (an output no batched input reaches is
    repeated). Params are shared by every slice.

    Each node is batched by its op's ``@op.batch`` rule, by numpy broadcasting
    for elementwise ops, or else unrolled: the op applied to each slice and
    the results joined.
    """
    g = lower_hir(graph) if graph.stage == "hir" else graph
    axes = _in_axes(g, in_axes)
    if axis_size is None or int(axis_size) < 1:
        raise OpError(f"vmap: axis_size must be a positive batch size, got {axis_size!r}")
    size = int(axis_size)
    out = Graph(g.name, "mir")
    out.metadata = {**g.metadata, "autodiff": {"transform": "vmap", "in_axes": axes, "axis_size": size}}
    env: dict[str, tuple[Tensor, bool]] = {}
    e = Emitter(out, "vmap")
    for name in g.inputs:
        t = g.types[name]
        a = axes[name]
        if t.quant is not None and a is not None:
            raise OpError(f"vmap: input {name!r} is quantized; only float or plain integer inputs can be batched")
        if a is None:
            env[name] = (out.input(name, t.shape, t.dtype), False)
            continue
        shape = tuple(t.shape[:a]) + (size,) + tuple(t.shape[a:])
        v = out.input(name, shape, t.dtype)
        if a:
            v = e.transpose(v, perm=(a, *range(a), *range(a + 1, len(shape))))
        env[name] = (v, True)
    for name, arr in g.params.items():
        t = g.types[name]
        env[name] = (out.param(name, arr, t.quant, dtype=t.dtype), False)
    for node in g.nodes:
        ins = [None if v is None else env[v] for v in node.inputs]
        if not any(i is not None and i[1] for i in ins):
            quants = [g.types[o].quant for o in node.outputs]
            outs = out.add_node(node.op, [None if i is None else i[0] for i in ins], node.attrs,
                                name=node.name, out_names=node.outputs, out_quant=quants)  # fmt: skip
            env.update((o, (t, False)) for o, t in zip(node.outputs, outs))
            continue
        e.where = f"node {node.name!r} ({node.op})"
        outs = _batch_node(e, node, ins, size)
        env.update((o, (t, True)) for o, t in zip(node.outputs, outs))
    finals = []
    for o in g.outputs:
        v, batched = env[o]
        if not batched:
            v = e.broadcast_to(v, (size, *e.static_shape(v)))
        finals.append(named_output(e, v, o))
    return finalize(out, finals)


def _in_axes(g: Graph, in_axes: InAxes) -> dict[str, int | None]:
    if in_axes is None or isinstance(in_axes, int):
        axes = dict.fromkeys(g.inputs, in_axes)
    elif isinstance(in_axes, Mapping):
        unknown = set(in_axes) - set(g.inputs)
        if unknown:
            raise OpError(f"vmap: in_axes names {sorted(unknown)}, which are not inputs of graph {g.name!r}")
        axes = {n: in_axes.get(n) for n in g.inputs}
    else:
        seq = list(in_axes)
        if len(seq) != len(g.inputs):
            raise OpError(f"vmap: in_axes has {len(seq)} entries for {len(g.inputs)} inputs of graph {g.name!r}")
        axes = dict(zip(g.inputs, seq))
    for n, a in axes.items():
        if a is None:
            continue
        rank = len(g.types[n].shape)
        if not -rank - 1 <= a <= rank:
            raise OpError(f"vmap: in_axes {a} is out of range for input {n!r} of rank {rank}")
        axes[n] = a % (rank + 1)
    if all(a is None for a in axes.values()):
        raise OpError("vmap: in_axes batches no input")
    return axes


def _batch_node(e: Emitter, node: Node, ins: list, size: int) -> list[Tensor]:
    opdef = node.opdef
    tensors = opdef._pad_inputs([None if i is None else i[0] for i in ins])
    batched = opdef._pad_inputs([i is not None and i[1] for i in ins])
    batched = [bool(b) for b in batched]
    if opdef._batch is not None:
        got = opdef._batch(e, tensors, batched, **node.attrs)
        if got is not None:
            return list(got)
    if opdef.elementwise:
        return [_broadcasting(e, node, tensors, batched)]
    return _unrolled(e, node, tensors, batched, size)


def _broadcasting(e: Emitter, node: Node, tensors: list, batched: list[bool]) -> Tensor:
    """numpy broadcasting does it: batched operands get ones after the batch axis up to the common rank."""
    ranks = [len(t.shape) - b for t, b in zip(tensors, batched) if t is not None]
    rank = max(ranks)
    args = []
    for t, b in zip(tensors, batched):
        if t is not None and b and len(t.shape) - 1 < rank:
            shape = e.static_shape(t)
            t = e.reshape(t, shape=(shape[0],) + (1,) * (rank + 1 - len(shape)) + shape[1:])
        args.append(t)
    return e.op(node.op, *args, **node.attrs)


def _unrolled(e: Emitter, node: Node, tensors: list, batched: list[bool], size: int) -> list[Tensor]:
    """The op once per slice, the results stacked: right for every op, one node per slice."""
    per_output: list[list[Tensor]] = [[] for _ in node.outputs]
    for i in range(size):
        args = []
        for t, b in zip(tensors, batched):
            if t is not None and b:
                shape = e.static_shape(t)
                t = e.slice(t, begin=(i,) + (0,) * (len(shape) - 1), end=(i + 1, *shape[1:]))
                t = e.reshape(t, shape=shape[1:])
            args.append(t)
        got = e.op(node.op, *args, **node.attrs)
        for k, o in enumerate(got if isinstance(got, tuple) else (got,)):
            per_output[k].append(e.reshape(o, shape=(1, *e.static_shape(o))))
    return [parts[0] if size == 1 else e.concat(*parts, axis=0) for parts in per_output]
