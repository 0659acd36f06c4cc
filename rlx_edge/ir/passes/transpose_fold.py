"""Layout-transpose folding: the transposes an NCHW model carries, removed where that is exact.

Importers of NCHW models (ONNX from PyTorch, TFLite converted from PyTorch)
convert to the IR's NHWC around every spatial op, and a layout-sensitive op
(reshape, an elementwise op with a lower-rank constant) sends the value back
to NCHW, so transposes pile up between layers. Each rewrite below keeps every
value bit for bit (a transpose moves data, never computes), in float and in
integers alike:

* a transpose of a constant becomes the transposed constant;
* two transposes in a row compose, and an identity disappears;
* a transpose sinks below an op that works element by element (unary, or
  binary with a constant, which is transposed the other way, or with a value
  transposed the same way), so that it meets the transpose that undoes it;
* a transpose that only moves size-1 axes is a reshape (a view: no copy),
  as at a one-channel image input;
* ``fully_connected(reshape(transpose(x), [N, K]))`` with constant weights
  reads ``reshape(x)`` with the weight columns permuted instead.

It never moves a transpose upward and never below a ``dequantize`` (the QDQ
fold moves dequantize nodes downward past transposes instead; see
``qdq_fold``), so the two passes cannot undo each other. A transpose at a
graph input or output stays: the public interface keeps its layout.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rlx_edge.ir.graph import Graph, Node, infer_node
from rlx_edge.ir.ops import get_op
from rlx_edge.ir.passes._rewrite import add_param, bypass, consumers, fresh_name, producers, prune_params, remove_node
from rlx_edge.ir.passes.manager import PassContext, register
from rlx_edge.ir.shape import is_static
from rlx_edge.ir.types import QuantParams, TensorType

# Element-by-element ops a transpose commutes with, besides the unary inplace ones (their
# integer semantics are per element too, with per-tensor parameters).
_UNARY_EXTRA = frozenset({"quantize", "requantize"})
_BINARY = frozenset({"add", "sub", "mul", "div", "maximum", "minimum"})


def inverse(perm: Sequence[int]) -> tuple[int, ...]:
    inv = [0] * len(perm)
    for j, p in enumerate(perm):
        inv[p] = j
    return tuple(inv)


def moved_quant(q: QuantParams | None, axis_map: Sequence[int]) -> QuantParams | None:
    """``q`` for a value whose axis ``a`` moves to ``axis_map[a]``."""
    if q is None or q.axis is None:
        return q
    return QuantParams(q.scale, q.zero_point, axis=axis_map[q.axis % len(axis_map)], storage=q.storage)


def insert_after(
    g: Graph,
    anchor: Node,
    op: str,
    inputs: list[str],
    attrs: dict,
    out: str,
    base: str,
    out_quant: QuantParams | None = None,
) -> Node:
    """A new node computing value ``out`` (whose type the caller has removed), placed right after ``anchor``.

    ``out`` keeps its name, so its readers and the graph outputs need no change.
    """
    g.add_node(op, inputs, attrs, name=fresh_name(g, base), out_names=[out], out_quant=out_quant)
    node = g.nodes.pop()
    g.nodes.insert(g.nodes.index(anchor) + 1, node)
    return node


def _unary_sinkable(node: Node) -> bool:
    opdef = get_op(node.op)
    return len(node.inputs) == 1 and (node.op in _UNARY_EXTRA or (opdef.inplace and len(opdef.inputs) == 1))


@register("transpose_fold")
def transpose_fold(graph: Graph, ctx: PassContext) -> Graph:
    """Fold layout transposes: into constants, cancelling pairs, through elementwise ops, into FC weights."""
    g = graph.copy()
    reported: set[str] = set()
    for _ in range(8 * len(g.nodes) + 8):  # every step removes a transpose or moves one down
        if not _step(g, ctx, reported):
            break
    prune_params(g)
    return g


def _step(g: Graph, ctx: PassContext, reported: set[str]) -> bool:
    readers = consumers(g)
    prods = producers(g)
    for t in [n for n in g.nodes if n.op == "transpose"]:
        x, y = t.inputs[0], t.outputs[0]
        perm = tuple(t.attrs["perm"])
        if x in g.params:
            yt = g.types[y]
            arr = np.transpose(g.params[x], perm)
            remove_node(g, t)
            g.param(y, arr, yt.quant, dtype=yt.dtype)
            ctx.fired(t.name, "transpose of a constant folded into the constant")
            return True
        if perm == tuple(range(len(perm))):
            why = bypass(g, t, x)
            if why is None:
                ctx.fired(t.name, "identity transpose removed")
                return True
            _skip(ctx, reported, t, f"identity transpose kept: {why}")
            continue
        p = prods.get(x)
        if p is not None and p.op == "transpose":
            p_perm = tuple(p.attrs["perm"])
            t.inputs = [p.inputs[0]]
            t.attrs = {**t.attrs, "perm": tuple(p_perm[i] for i in perm)}
            ctx.fired(t.name, f"composed with transpose {p.name!r}")
            return True
        mine = readers.get(y, [])
        if y not in g.outputs and not mine:  # left behind by a composition
            remove_node(g, t)
            return True
        if y not in g.outputs and len(mine) == 1:
            if mine[0].op == "transpose":
                continue  # the reader composes with it on its turn
            if _into_fc_weights(g, t, mine[0], readers, ctx):
                return True
            why = _sink(g, t, mine[0], prods, ctx)
            if why is None:
                return True
        else:
            why = "its output is a graph output" if y in g.outputs else f"{len(mine)} nodes read its output"
        if _to_reshape(g, t):
            ctx.fired(t.name, "transpose moving only size-1 axes became a reshape (a view)")
            return True
        _skip(ctx, reported, t, f"transpose kept: {why}")
    return False


def _skip(ctx: PassContext, reported: set[str], t: Node, why: str) -> None:
    if t.name not in reported:
        reported.add(t.name)
        ctx.skipped(t.name, why)


def _to_reshape(g: Graph, t: Node) -> bool:
    """A transpose keeping the order of its axes larger than one is a reshape."""
    xt, yt = g.types[t.inputs[0]], g.types[t.outputs[0]]
    if not is_static(xt.shape):
        return False
    perm = t.attrs["perm"]
    big = [a for a in perm if xt.shape[a] != 1]
    if big != sorted(big):
        return False
    attrs = get_op("reshape").normalize_attrs({"shape": tuple(int(d) for d in yt.shape)}, t.name)
    try:
        (rt,) = infer_node(get_op("reshape"), [xt], attrs, t.name)
    except Exception:
        return False
    if rt.quant != yt.quant:
        return False  # a per-channel axis of size 1 would land elsewhere
    t.op, t.attrs = "reshape", attrs
    return True


def _sink(g: Graph, t: Node, c: Node, prods: dict[str, Node], ctx: PassContext) -> str | None:
    """Move ``t`` below its only reader ``c``; None when done, else why not."""
    x, y = t.inputs[0], t.outputs[0]
    perm = tuple(t.attrs["perm"])
    if len(c.outputs) != 1:
        return f"{c.op} {c.name!r} has several outputs"
    out = c.outputs[0]
    rank = len(perm)
    if g.types[out].rank != rank:
        return f"{c.op} {c.name!r} broadcasts it to another rank"
    if _unary_sinkable(c):
        new_inputs: list[str | None] = [x]
    elif c.op in _BINARY and len(c.inputs) == 2:
        k = c.inputs.index(y)
        other = c.inputs[1 - k]
        if other == y:
            new_other = x
        else:
            op_ = prods.get(other)  # type: ignore[arg-type]
            if op_ is not None and op_.op == "transpose" and tuple(op_.attrs["perm"]) == perm:
                new_other = op_.inputs[0]
            elif other in g.params:
                new_other = _inverse_const(g, other, perm, f"{c.name}/const")
            else:
                return f"the other operand of {c.op} {c.name!r} is neither constant nor transposed alike"
        new_inputs = [x, new_other] if k == 0 else [new_other, x]
    else:
        return f"its reader {c.op} {c.name!r} is not elementwise"
    inv = inverse(perm)
    ot = g.types[out]
    mid = fresh_name(g, f"{out}__pre")
    # ``out`` = transpose(mid, perm): mid's axis perm[k] is out's axis k
    g.types[mid] = TensorType(tuple(ot.shape[inv[a]] for a in range(rank)), ot.dtype, moved_quant(ot.quant, perm))
    ctx.fired(t.name, f"transpose moved below {c.op} {c.name!r}")
    c.inputs = new_inputs
    c.outputs = [mid]
    if c.name == out:  # a node named after its output keeps that rule
        c.name = mid
    del g.types[out]
    remove_node(g, t)  # first, so that the transpose below takes its name
    insert_after(g, c, "transpose", [mid], {"perm": perm}, out, t.name)
    return None


def _inverse_const(g: Graph, name: str, perm: tuple[int, ...], base: str) -> str:
    """A constant that, transposed by ``perm``, broadcasts like ``name`` does at full rank."""
    arr, ct = g.params[name], g.types[name]
    lead = len(perm) - arr.ndim
    full = arr.reshape((1,) * lead + arr.shape)
    q = moved_quant(ct.quant, [a + lead for a in range(arr.ndim)]) if ct.quant is not None else None
    # np.transpose(full, inverse(perm)) puts full's axis a at perm[a]
    return add_param(g, base, np.transpose(full, inverse(perm)), moved_quant(q, perm), dtype=ct.dtype)


def _into_fc_weights(g: Graph, t: Node, r: Node, readers: dict[str, list[Node]], ctx: PassContext) -> bool:
    """``fc(reshape(transpose(x), [N, K]), W)`` -> ``fc(reshape(x, [N, K]), W[:, p])``: the flatten reads
    the features in another order, which the weight columns follow."""
    x = t.inputs[0]
    perm = tuple(t.attrs["perm"])
    xt = g.types[x]
    if r.op != "reshape" or not is_static(xt.shape) or perm[0] != 0 or xt.rank < 2:
        return False
    rt = g.types[r.outputs[0]]
    k = int(np.prod(xt.shape[1:]))
    if rt.shape != (xt.shape[0], k) or r.outputs[0] in g.outputs:
        return False
    if xt.quant is not None and xt.quant.axis is not None:
        return False
    fcs = readers.get(r.outputs[0], [])
    if not fcs or any(
        f.op != "fully_connected" or f.inputs[0] != r.outputs[0] or f.inputs[1] not in g.params or
        r.outputs[0] in f.inputs[1:]
        for f in fcs
    ):  # fmt: skip
        return False
    # order[k] is the position in flatten(x) of feature k of flatten(transpose(x))
    order = np.transpose(np.arange(k).reshape(xt.shape[1:]), [a - 1 for a in perm[1:]]).reshape(-1)
    for f in fcs:
        w, wt = g.params[f.inputs[1]], g.types[f.inputs[1]]
        w2 = np.empty_like(w)
        w2[:, order] = w
        f.inputs = [f.inputs[0], add_param(g, f"{f.name}/w_nhwc", w2, wt.quant, dtype=wt.dtype), *f.inputs[2:]]
    r.inputs = [x]
    remove_node(g, t)
    ctx.fired(t.name, f"transpose before the flatten {r.name!r} folded into the weights of {len(fcs)} fully_connected")
    return True
