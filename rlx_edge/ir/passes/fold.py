"""Constant folding: a node whose inputs are all params becomes params."""

from __future__ import annotations

import numpy as np

from rlx_edge.ir.dtype import DType
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.ops import QContext, get_op
from rlx_edge.ir.passes._rewrite import prune_params
from rlx_edge.ir.passes.manager import PassContext, register

#: Folding can grow a graph (a broadcast of a scalar, a dequantized int8
#: weight is four times bigger); results above this size stay computed.
DEFAULT_MAX_BYTES = 4 << 20


def is_index_math(t) -> bool:
    """A plain integer or bool tensor (no quantization): a shape, an index, a count."""
    return t.quant is None and (t.dtype.is_int or t.dtype == DType.bool)


def has_constant_index_math(graph: Graph) -> bool:
    """Whether some node computes index math (:func:`is_index_math`) from constants only."""
    return any(
        node.inputs
        and all(v is None or v in graph.params for v in node.inputs)
        and all(is_index_math(graph.types[o]) for o in node.outputs)
        for node in graph.nodes
    )


@register("fold")
def fold(graph: Graph, ctx: PassContext) -> Graph:
    """Replace nodes whose inputs are all params by params computed with the op's reference.

    Quantized nodes use the integer reference, float ones the float
    reference, exactly as the interpreter would at run time, so folding never
    changes a result. Option ``fold_max_bytes`` bounds the size of a folded value;
    ``fold_index_only`` folds only nodes whose outputs are plain (unquantized)
    integers or bools: the shape arithmetic of an exported model, never weights.
    """
    limit = int(ctx.options.get("fold_max_bytes", DEFAULT_MAX_BYTES))
    index_only = bool(ctx.options.get("fold_index_only", False))
    g = graph.copy()
    kept = []
    for node in g.nodes:
        present = [v for v in node.inputs if v is not None]
        if not present or not all(v in g.params for v in present):
            kept.append(node)
            continue
        if index_only and not all(is_index_math(g.types[o]) for o in node.outputs):
            kept.append(node)
            continue
        opdef = get_op(node.op)
        in_types = tuple(None if v is None else g.types[v] for v in node.inputs)
        out_types = tuple(g.types[o] for o in node.outputs)
        args = [None if v is None else g.params[v] for v in node.inputs]
        quantized = any(t is not None and t.quant is not None and t.dtype.is_int for t in (*in_types, *out_types))
        try:
            qctx = QContext(node.name, in_types, out_types)
            if quantized:
                outs = opdef.run_int_reference(qctx, args, node.attrs)
            else:
                outs = opdef.run_typed_reference(qctx, args, node.attrs)
        except Exception as e:  # an op without a reference for these types stays a node
            ctx.skipped(node.name, f"inputs are constant but its reference failed: {e}")
            kept.append(node)
            continue
        nbytes = sum(np.asarray(a).nbytes for a in outs)
        if nbytes > limit:
            ctx.skipped(node.name, f"folding would store {nbytes} bytes (limit {limit})")
            kept.append(node)
            continue
        for o, arr, t in zip(node.outputs, outs, out_types):
            del g.types[o]
            g.param(o, np.asarray(arr).astype(t.dtype.numpy, copy=False), t.quant, dtype=t.dtype)
        ctx.fired(node.name, f"{node.op} of constants folded into param(s) {', '.join(node.outputs)}")
    g.nodes = kept
    prune_params(g)
    return g
