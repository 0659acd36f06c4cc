"""Algebraic simplification: identities (x+0, x*1, ...), transpose chains, reshape chains."""

from __future__ import annotations

import numpy as np

from rlx_edge.ir.graph import Graph, Node
from rlx_edge.ir.ops import get_op
from rlx_edge.ir.passes._rewrite import bypass, is_quantized, producers, reinfer, set_attrs
from rlx_edge.ir.passes.manager import PassContext, register

# op -> ((input position of the constant, neutral value), ...)
_NEUTRAL = {
    "add": ((1, 0.0), (0, 0.0)),
    "sub": ((1, 0.0),),
    "mul": ((1, 1.0), (0, 1.0)),
    "div": ((1, 1.0),),
}


def _identity_operand(g: Graph, node: Node) -> tuple[str, str] | None:
    """(the other operand, description) when ``node`` is x op neutral and changes nothing."""
    if node.attrs.get("activation", "none") != "none":
        return None
    y = g.types[node.outputs[0]]
    for pos, neutral in _NEUTRAL[node.op]:
        c, x = node.inputs[pos], node.inputs[1 - pos]
        arr = g.params.get(c)
        if arr is None or x is None or not np.all(arr == neutral):
            continue
        xt = g.types[x]
        # the constant must neither broadcast x to a bigger shape nor change its dtype
        if xt.shape != y.shape or xt.dtype != y.dtype or is_quantized(g, x) or is_quantized(g, node.outputs[0]):
            return None
        return x, f"{node.op} with constant {neutral:g}"
    return None


@register("simplify")
def simplify(graph: Graph, ctx: PassContext) -> Graph:
    """Remove arithmetic identities and collapse transpose and reshape chains."""
    g = graph.copy()
    changed = True
    while changed:  # each removal can expose the next (a chain of identities)
        changed = False
        prods = producers(g)
        for node in list(g.nodes):
            if node.op in _NEUTRAL:
                got = _identity_operand(g, node)
                if got is None:
                    continue
                why = bypass(g, node, got[0])
                if why is None:
                    ctx.fired(node.name, f"{got[1]} is the identity, removed")
                    changed = True
                    break
                ctx.skipped(node.name, f"{got[1]} is the identity but {why}")
            elif node.op == "transpose":
                if _transpose(g, node, prods, ctx):
                    changed = True
                    break
            elif node.op == "reshape":
                if _reshape(g, node, prods, ctx):
                    changed = True
                    break
    reinfer(g)
    return g


def _transpose(g: Graph, node: Node, prods: dict[str, Node], ctx: PassContext) -> bool:
    perm = node.attrs["perm"]
    src = node.inputs[0]
    first = prods.get(src)
    if first is not None and first.op == "transpose":
        # out[i] = mid[perm[i]] = x[p1[perm[i]]]
        p1 = first.attrs["perm"]
        composed = tuple(p1[p] for p in perm)
        node.inputs = [first.inputs[0]]
        set_attrs(node, perm=composed)
        ctx.fired(node.name, f"transpose of transpose {first.name!r} composed to perm {list(composed)}")
        return True
    if tuple(perm) == tuple(range(len(perm))):
        return _remove_identity(g, node, ctx, "transpose with the identity permutation", "identity transpose")
    return False


def _reshape(g: Graph, node: Node, prods: dict[str, Node], ctx: PassContext) -> bool:
    src = node.inputs[0]
    first = prods.get(src)
    # per-channel parameters follow their axis through a view; keep those chains as written
    if g.types[src].quant is not None and g.types[src].quant.per_channel:
        return False
    if first is not None and get_op(first.op).view:  # a reshape of any view reads the view's input
        node.inputs = [first.inputs[0]]
        ctx.fired(node.name, f"reshape of {first.op} {first.name!r} reads its input directly")
        return True
    if g.types[src].shape == g.types[node.outputs[0]].shape:
        return _remove_identity(g, node, ctx, "reshape to the same shape", "reshape to the same shape")
    return False


def _remove_identity(g: Graph, node: Node, ctx: PassContext, what: str, skipped: str) -> bool:
    """Bypass ``node``, which passes its input through unchanged, where :func:`bypass` allows it."""
    why = bypass(g, node, node.inputs[0])
    if why is None:
        ctx.fired(node.name, f"{what} removed")
        return True
    ctx.skipped(node.name, f"{skipped} but {why}")
    return False
