"""Numpy interpreter over MIR graphs: the reference every target is checked against.

Float nodes run their op's float reference. Nodes whose inputs or outputs are
quantized run the op's integer reference (added with quantized semantics);
a quantized node whose op has none is a clear error, never a float fallback.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlx_edge.errors import IRError, OpError, RlxError
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
    missing from it are prepared here. To run a graph many times, make a
    :class:`RunPlan` once and call it: this function makes one per call.
    """
    return RunPlan(graph, quant)(inputs, trace=trace)


@dataclass(frozen=True)
class _Step:
    node: Node
    args: tuple[str | None, ...]
    outs: tuple[tuple[str, DType, np.dtype, bool], ...]  # name, type, its numpy type, always cast (bf16)
    quantized: bool
    kernel: Callable[..., Any]  # the node's inputs -> an array or a tuple of arrays


class RunPlan:
    """``graph`` ready to run many times: what depends only on the graph is done once, here.

    Each quantized node is checked, prepared (or given ``quant``'s
    parameters) and bound to its constant inputs (:meth:`OpDef.bind_eval`:
    an op's numpy fast path with its weights re-laid out once), so a call
    only does each node's arithmetic. The plan keeps what it derived from
    the graph's parameters: change the graph, make a new plan. Errors name
    the node as :func:`run_node`'s do.
    """

    def __init__(self, graph: Graph, quant: Mapping[str, Prepared] | None = None) -> None:
        if graph.stage == "hir":
            from rlx_edge.ir.passes.lower_hir import lower_hir

            graph = lower_hir(graph)
        self.graph = graph
        self._params = dict(graph.params)
        self._inputs = tuple((n, graph.types[n].dtype.numpy, tuple(graph.types[n].shape)) for n in graph.inputs)
        self._steps = [self._step(node, None if quant is None else quant.get(node.name)) for node in graph.nodes]

    def _step(self, node: Node, params: Prepared | None) -> _Step:
        graph = self.graph
        opdef = get_op(node.op)
        ctx = _checked_context(graph, node)
        quantized = ctx.quantized
        attrs = node.attrs
        if quantized:
            consts = [None if v is None else graph.params.get(v) for v in node.inputs]
            try:
                if params is None:
                    params = opdef.prepare_node(ctx, attrs)
                kernel = opdef.bind_eval(params, consts, attrs)
            except RlxError:
                raise
            except Exception as e:
                raise _named(node, quantized, e) from e
        else:

            def kernel(*args: Any) -> Sequence[Any]:
                return opdef.run_typed_reference(ctx, args, attrs)

        outs = []
        for o in node.outputs:
            dt = graph.types[o].dtype
            outs.append((o, dt, dt.numpy, dt == DType.bf16))  # bf16 is held as float32: always round it
        return _Step(node, tuple(node.inputs), tuple(outs), quantized, kernel)

    def __call__(
        self, inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray] | np.ndarray, *, trace: bool = False
    ) -> dict[str, np.ndarray] | tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """The outputs by name (and with ``trace=True`` every node output), as :func:`run`."""
        env: dict[str, Any] = dict(self._params)
        env.update(self._bind(inputs))
        traced: dict[str, np.ndarray] = {}
        for step in self._steps:
            args = [None if v is None else env[v] for v in step.args]
            try:
                outs = step.kernel(*args)
            except OpError as e:  # the data broke an op's rule (an index out of range): name the node
                where = f"node {step.node.name!r} ({step.node.op})"
                if str(e).startswith(where):
                    raise
                raise type(e)(f"{where}: {e}") from e
            except RlxError:
                raise
            except Exception as e:
                raise _named(step.node, step.quantized, e) from e
            if not isinstance(outs, (tuple, list)):
                outs = (outs,)
            for (name, dtype, np_dtype, always), arr in zip(step.outs, outs):
                arr = np.asarray(arr)
                if always or arr.dtype != np_dtype:
                    arr = finish(arr, dtype)
                env[name] = arr
                if trace:
                    traced[name] = arr
        outputs = {o: env[o] for o in self.graph.outputs}
        return (outputs, traced) if trace else outputs

    def _bind(self, inputs: Any) -> dict[str, np.ndarray]:
        """:func:`bind_inputs`, without its work for the usual dict of arrays of exactly the graph's types."""
        if type(inputs) is dict and len(inputs) == len(self._inputs):
            out = {}
            for name, dtype, shape in self._inputs:
                arr = inputs.get(name)
                if type(arr) is not np.ndarray or arr.dtype != dtype or arr.shape != shape:
                    return bind_inputs(self.graph, inputs)  # symbolic shapes, conversions, errors
                out[name] = arr
            return out
        return bind_inputs(self.graph, inputs)


def _checked_context(graph: Graph, node: Node) -> QContext:
    """The node's :class:`QContext`; a quantized node is first checked to be one the integer kernels can run."""
    in_types = tuple(None if v is None else graph.types[v] for v in node.inputs)
    ctx = QContext(node.name, in_types, tuple(graph.types[o] for o in node.outputs))
    if ctx.quantized:
        check_quantized_node(graph, node)  # a clear error naming the node, not a None scale inside
        if not get_op(node.op).has_int_reference:
            raise RlxError(f"node {node.name!r} ({node.op}) is quantized but op {node.op} has no integer reference yet")
    return ctx


def _named(node: Node, quantized: bool, e: Exception) -> Exception:
    """The error to raise (from ``e``) for an exception in a node's prepare or kernel (see :func:`run_node`)."""
    if isinstance(e, ValueError) and quantized:  # prepare / fixedpoint checking the parameters they were given
        return IRError(f"node {node.name!r} ({node.op}): its quantization does not fit integer kernels: {e}")
    return RuntimeError(f"reference failed at node {node.name!r} ({node.op}): {e}")  # a bug: keep the cause


def run_node(
    graph: Graph, node: Node, args: list[np.ndarray | None], params: Prepared | None = None
) -> Sequence[np.ndarray]:
    """One node's outputs: its integer reference when quantized, else its (typed) float reference.

    Errors name the node. A quantized node whose types the integer kernels
    cannot use (a value without quantization, a scale ratio no fixed-point
    multiplier holds) is an :class:`IRError`: the graph's fault, from a
    hand-built graph or a model file the loader could not judge. Anything
    else is a bug in the reference, and stays one (RuntimeError, cause kept).
    This runs the op's ``eval`` itself, never a bound fast path: the arena
    runner uses it, so comparing the two checks one against the other.
    """
    opdef = get_op(node.op)
    ctx = _checked_context(graph, node)
    quantized = ctx.quantized
    try:
        if quantized:
            return opdef.run_int_reference(ctx, args, node.attrs, params)
        return opdef.run_typed_reference(ctx, args, node.attrs)
    except RlxError:
        raise
    except Exception as e:
        raise _named(node, quantized, e) from e


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
