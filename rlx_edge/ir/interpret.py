"""Numpy interpreter over MIR graphs: the reference every target is checked against.

Float nodes run their op's float reference. Nodes whose inputs or outputs are
quantized run the op's integer reference (added with quantized semantics);
a quantized node whose op has none is a clear error, never a float fallback.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rlx_edge.errors import IRError, RlxError
from rlx_edge.ir.dtype import DType
from rlx_edge.ir.graph import Graph, Node
from rlx_edge.ir.ops import QContext, finish, get_op
from rlx_edge.ir.passes.legalize import check_quantized_node
from rlx_edge.ir.prepared import Prepared
from rlx_edge.ir.shape import format_shape
from rlx_edge.ir.types import TensorType


def run(
    graph: Graph,
    inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray] | np.ndarray,
    *,
    trace: bool = False,
    quant: Mapping[str, Prepared] | None = None,
) -> dict[str, np.ndarray] | tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Run ``graph`` on ``inputs`` (by name, in order, or a single array).

    Returns the outputs by name; with ``trace=True`` also every value
    computed (node outputs by name, in schedule order). ``quant`` holds
    prepared integer parameters by node name (a Program's ``quant``); nodes
    missing from it are prepared here.
    """
    if graph.stage == "hir":
        from rlx_edge.ir.passes.lower_hir import lower_hir

        graph = lower_hir(graph)
    env: dict[str, np.ndarray] = dict(graph.params)
    env.update(bind_inputs(graph, inputs))
    traced: dict[str, np.ndarray] = {}
    for node in graph.nodes:
        args = [None if v is None else env[v] for v in node.inputs]
        outs = run_node(graph, node, args, None if quant is None else quant.get(node.name))
        out_types = tuple(graph.types[o] for o in node.outputs)
        for name, arr, t in zip(node.outputs, outs, out_types):
            arr = np.asarray(arr)
            if arr.dtype != t.dtype.numpy or t.dtype == DType.bf16:
                arr = finish(arr, t.dtype)
            env[name] = arr
            if trace:
                traced[name] = arr
    outputs = {o: env[o] for o in graph.outputs}
    return (outputs, traced) if trace else outputs


def run_node(
    graph: Graph, node: Node, args: list[np.ndarray | None], params: Prepared | None = None
) -> Sequence[np.ndarray]:
    """One node's outputs: its integer reference when quantized, else its (typed) float reference.

    Errors name the node. A quantized node whose types the integer kernels
    cannot use (a value without quantization, a scale ratio no fixed-point
    multiplier holds) is an :class:`IRError`: the graph's fault, from a
    hand-built graph or a model file the loader could not judge. Anything
    else is a bug in the reference, and stays one (RuntimeError, cause kept).
    """
    opdef = get_op(node.op)
    in_types = tuple(None if v is None else graph.types[v] for v in node.inputs)
    out_types = tuple(graph.types[o] for o in node.outputs)
    ctx = QContext(node.name, in_types, out_types)
    quantized = ctx.quantized
    if quantized:
        check_quantized_node(graph, node)  # a clear error naming the node, not a None scale inside
        if not opdef.has_int_reference:
            raise RlxError(f"node {node.name!r} ({node.op}) is quantized but op {node.op} has no integer reference yet")
    try:
        if quantized:
            return opdef.run_int_reference(ctx, args, node.attrs, params)
        return opdef.run_typed_reference(ctx, args, node.attrs)
    except RlxError:
        raise
    except ValueError as e:
        if quantized:  # prepare / fixedpoint checking the quantization parameters they were given
            raise IRError(f"node {node.name!r} ({node.op}): its quantization does not fit integer kernels: {e}") from e
        raise RuntimeError(f"reference failed at node {node.name!r} ({node.op}): {e}") from e
    except Exception as e:  # name the node, keep the cause for debugging
        raise RuntimeError(f"reference failed at node {node.name!r} ({node.op}): {e}") from e


def bind_inputs(graph: Graph, inputs: Any) -> dict[str, np.ndarray]:
    """Match user arrays to graph inputs, checking shape and dtype."""
    if isinstance(inputs, np.ndarray):
        inputs = [inputs]
    if not isinstance(inputs, Mapping):
        inputs = list(inputs)
        if len(inputs) != len(graph.inputs):
            raise RlxError(f"graph {graph.name!r} takes {len(graph.inputs)} inputs, got {len(inputs)}")
        inputs = dict(zip(graph.inputs, inputs))
    missing = [n for n in graph.inputs if n not in inputs]
    if missing:
        raise RlxError(f"missing input(s) {', '.join(missing)} for graph {graph.name!r}")
    out: dict[str, np.ndarray] = {}
    symbols: dict[str, int] = {}
    for name in graph.inputs:
        t: TensorType = graph.types[name]
        arr = np.asarray(inputs[name])
        if arr.dtype != t.dtype.numpy:
            raise RlxError(f"input {name!r} must be {t.dtype} ({t.dtype.numpy}), got {arr.dtype}")
        if arr.ndim != t.rank:
            raise RlxError(f"input {name!r} must have shape {format_shape(t.shape)}, got {list(arr.shape)}")
        for d, s in zip(t.shape, arr.shape):
            if isinstance(d, str):
                if symbols.setdefault(d, s) != s:
                    raise RlxError(f"input {name!r}: symbol {d} is {symbols[d]} elsewhere but {s} here")
            elif d != s:
                raise RlxError(f"input {name!r} must have shape {format_shape(t.shape)}, got {list(arr.shape)}")
        out[name] = arr
    return out
