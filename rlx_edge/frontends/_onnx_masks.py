"""Attention masks written with -inf, turned into the bool ``mask`` input of ``softmax``.

Exporters mask attention scores with a very negative number: torch adds a float mask made by
``Where(mask, -inf, 0)`` (its padding and causal masks, reshaped and expanded over the heads) or
selects ``Where(mask, -inf, scores)``. In float that is the softmax over the kept positions,
since exp(-inf) is 0, but it cannot be quantized: calibration would see -inf and the integer
softmax's input range would hold nothing else. So each ``softmax(add(scores, m))`` and
``softmax(select_v2(c, NEG, scores))`` whose mask is such a pattern becomes
``softmax(scores, mask=keep)``, with ``keep`` computed from the same bool tensors by the same
layout ops (``logical_not`` / ``logical_and`` where the float mask negates or adds), so no -inf
is left in the graph. The float values are the same, exp of a masked score being exactly 0.

NEG is -inf or any value at most -1e9 (``torch.finfo.min``, ``-1e9``): exp(s - 1e9 - max) is 0
in float32 for every score whose distance to the row's maximum is below ~1e9. The one place the
rewritten graph differs is a row with no kept position: softmax over -inf gives NaN there (and
over -1e9 a uniform distribution over the masked keys), the masked softmax gives zeros.
"""

from __future__ import annotations

import math

import numpy as np

from rlx_edge.errors import IRError
from rlx_edge.ir.dtype import DType
from rlx_edge.ir.graph import Graph, Node
from rlx_edge.ir.ops import get_op

_NEG = -1e9
# bool layout ops that move a mask as they move the float mask (extra inputs and attrs kept)
_LAYOUT = frozenset({"reshape", "broadcast_to", "transpose", "squeeze", "unsqueeze", "expand_dims"})


def _const(g: Graph, v: str | None) -> np.ndarray | None:
    return None if v is None else g.params.get(v)


def _all_neg(arr: np.ndarray | None) -> bool:
    return arr is not None and arr.size > 0 and arr.dtype.kind == "f" and bool(np.all(arr <= _NEG))


def _all_zero(arr: np.ndarray | None) -> bool:
    return arr is not None and arr.size > 0 and arr.dtype.kind == "f" and bool(np.all(arr == 0))


class _Rewriter:
    """Builds ``keep`` values in front of one softmax node."""

    def __init__(self, g: Graph, before: Node) -> None:
        self.g = g
        self.before = before
        self.added: list[Node] = []

    def emit(self, op: str, inputs: list[str | None], attrs: dict | None = None) -> str:
        (out,) = self.g.add_node(op, inputs, attrs, name=self.g._fresh(f"{self.before.name}__keep"))
        self.added.append(self.g.nodes.pop())  # placed before the softmax by finish()
        return out.name

    def param(self, arr: np.ndarray) -> str:
        return self.g.param(self.g._fresh(f"{self.before.name}__keep"), arr).name

    def keep_of_additive(self, v: str) -> str | None:
        """A bool value True where float mask ``v`` (0 or NEG everywhere) is 0; None if ``v`` is no such mask."""
        g = self.g
        arr = _const(g, v)
        if arr is not None:
            if arr.dtype.kind != "f" or not bool(np.all((arr == 0) | (arr <= _NEG))):
                return None
            return self.param(arr == 0)
        n = g.producer(v)
        if n is None or g.types[v].quant is not None:
            return None
        if n.op == "select_v2" and len(n.inputs) == 3 and n.inputs[0] is not None:
            cond, a, b = n.inputs
            ca, cb = _const(g, a), _const(g, b)
            if g.types[cond].dtype != DType.bool:
                return None
            if _all_zero(ca) and _all_neg(cb):
                return cond
            if _all_neg(ca) and _all_zero(cb):
                return self.emit("logical_not", [cond])
            return None
        if n.op in _LAYOUT:
            return self.keep_moved(v)
        if n.op == "add" and len(n.inputs) == 2 and None not in n.inputs:
            ka, kb = (self.keep_of_additive(x) for x in n.inputs)  # type: ignore[arg-type]
            if ka is None or kb is None:
                return None
            return self.emit("logical_and", [ka, kb])
        return None

    def keep_moved(self, v: str) -> str | None:
        """The keep mask of a float mask that layout ops moved (reshape, broadcast_to, ...): their index map.

        The ops are run on the indices of the mask they start from, which tells where each position
        of ``v`` comes from. Where that is the source in order, only broadcast (the padding mask viewed
        [B, 1, 1, L] and expanded over the heads), the keep mask is the source's keep reshaped, and
        softmax broadcasts it: no bool data is moved at run time. Otherwise the same ops move it.
        """
        g = self.g
        chain: list[Node] = []
        src = v
        while (p := g.producer(src)) is not None and p.op in _LAYOUT and p.inputs and p.inputs[0] is not None:
            if any(i is not None and i not in g.params for i in p.inputs[1:]):
                return None
            chain.append(p)
            src = p.inputs[0]
        chain.reverse()
        keep = self.keep_of_additive(src)
        if keep is None:
            return None
        if not all(isinstance(d, int) for d in (*g.types[keep].shape, *g.types[src].shape)):
            return None  # symbolic dimensions: left as written
        kshape, sshape = tuple(g.types[keep].shape), tuple(g.types[src].shape)
        # a keep mask narrower than its float mask (a Where's constants broadcast it) is read broadcast
        index = np.broadcast_to(np.arange(math.prod(kshape)).reshape(kshape), sshape)
        for p in chain:
            extra = [None if i is None else g.params[i] for i in p.inputs[1:]]
            (index,) = get_op(p.op).run_reference([np.ascontiguousarray(index), *extra], dict(p.attrs))
        if keep in g.params:
            return self.param(np.ascontiguousarray(g.params[keep].reshape(-1)[index]))
        varies = [d > 1 and not bool(np.all(index == index.take([0], axis=a))) for a, d in enumerate(index.shape)]
        base = index[tuple(slice(None) if on else slice(0, 1) for on in varies)]
        if np.array_equal(base.reshape(-1), np.arange(math.prod(kshape))):
            shape = tuple(base.shape)
            return keep if shape == kshape else self.emit("reshape", [keep], {"shape": shape})
        if kshape != sshape:
            keep = self.emit("broadcast_to", [keep], {"shape": sshape})
        for p in chain:
            keep = self.emit(p.op, [keep, *p.inputs[1:]], dict(p.attrs))
        return keep

    def finish(self) -> None:
        at = self.g.nodes.index(self.before)
        self.g.nodes[at:at] = self.added


def _fits(g: Graph, scores: str, keep: str, x: str) -> bool:
    """The rewrite keeps softmax's input shape, and the mask broadcasts to it."""
    want = g.types[x].shape
    if g.types[scores].shape != want:
        return False
    try:
        return np.broadcast_shapes(tuple(want), tuple(g.types[keep].shape)) == tuple(want)
    except (ValueError, TypeError):  # a symbolic dimension: left as written
        return False


def _rewrite(g: Graph, sm: Node) -> bool:
    x = sm.inputs[0]
    n = g.producer(x) if x is not None else None
    if x is None or n is None or g.types[x].dtype.is_int or g.types[x].quant is not None:
        return False
    rw = _Rewriter(g, sm)
    found: tuple[str, str] | None = None
    if n.op == "add" and len(n.inputs) == 2 and None not in n.inputs:
        for scores, m in (n.inputs, n.inputs[::-1]):
            keep = rw.keep_of_additive(m)  # type: ignore[arg-type]
            if keep is not None:
                found = (scores, keep)  # type: ignore[assignment]
                break
    elif n.op == "select_v2" and len(n.inputs) == 3 and None not in n.inputs:
        cond, a, b = n.inputs
        if g.types[cond].dtype == DType.bool:  # type: ignore[index]
            if _all_neg(_const(g, a)):
                found = (b, rw.emit("logical_not", [cond]))  # type: ignore[list-item]
            elif _all_neg(_const(g, b)):
                found = (a, cond)  # type: ignore[assignment]
    if found is None or not _fits(g, found[0], found[1], x):
        for node in rw.added:  # nothing was placed: forget the values built on the way
            for o in node.outputs:
                g.types.pop(o, None)
        return False
    rw.finish()
    sm.inputs = [found[0], found[1]]
    return True


def _try_rewrite(g: Graph, sm: Node) -> bool:
    params, types = set(g.params), set(g.types)
    try:
        return _rewrite(g, sm)
    except IRError:  # a mask the IR's ops cannot move as written: the softmax stays as imported
        for k in set(g.types) - types:
            del g.types[k]
        for k in set(g.params) - params:
            del g.params[k]
        return False


def masks_into_softmax(g: Graph) -> int:
    """Rewrite, in place, each float softmax whose input is a -inf masking pattern; returns how many.

    The float mask nodes that only the softmax read are left dead, for the importer's DCE.
    """
    count = 0
    for sm in [n for n in g.nodes if n.op == "softmax"]:
        if len(sm.inputs) == 1 or (len(sm.inputs) > 1 and sm.inputs[1] is None):
            count += _try_rewrite(g, sm)
    return count
