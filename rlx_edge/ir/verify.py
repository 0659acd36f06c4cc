"""The IR's well-formedness rules, checked in one place.

:func:`verify` is run after every loader (``.rlx`` files, frontends) and by
tests after every pass. It re-derives everything that can be derived (types,
normalized attributes) and compares it to what the graph records, so a pass
that forgets to update a type, or a file that lies about one, is caught at
the node where it happens.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from rlx_edge.errors import IRError, OpError, shorten
from rlx_edge.ir.dtype import DType
from rlx_edge.ir.graph import STAGES, Graph, Node, infer_node
from rlx_edge.ir.inspect import node_macs
from rlx_edge.ir.ops import OpDef, get_op
from rlx_edge.ir.types import TensorType


def verify(graph: Graph) -> None:
    """Check every rule of the IR; raise :class:`IRError` naming the first offender.

    Parameters
    ----------
    graph:
        The graph to check. It is not modified.

    Raises
    ------
    IRError
        With a one-line message that names the node (or graph input / param)
        at fault.
    """
    g = f"graph {graph.name!r}"
    if graph.stage not in STAGES:
        raise IRError(f"{g}: unknown stage {graph.stage!r}; use one of {', '.join(STAGES)}")

    # Where each value comes from, filled in schedule order so that a lookup
    # tells apart "defined earlier" from "defined later" (a cycle).
    defined: dict[str, str] = {}
    for name in graph.inputs:
        if name in defined:
            raise IRError(f"{g}: graph input {name!r} is listed twice")
        if name not in graph.types:
            raise IRError(f"{g}: graph input {name!r} has no recorded type")
        defined[name] = f"graph input {name!r}"
    for name, arr in graph.params.items():
        if name in defined:
            raise IRError(f"{g}: param {name!r} is also a graph input")
        if name not in graph.types:
            raise IRError(f"{g}: param {name!r} has no recorded type")
        _check_param(f"param {name!r}", arr, graph.types[name])
        defined[name] = f"param {name!r}"

    later: dict[str, Node] = {}
    for n in graph.nodes:
        for o in n.outputs:
            later.setdefault(o, n)

    node_names: set[str] = set()
    node_ids: set[int] = set()
    for node in graph.nodes:
        where = f"node {node.name!r} ({node.op})"
        if not isinstance(node.name, str) or not node.name:
            raise IRError(f"{g}: a node has the invalid name {node.name!r}")
        if node.name in node_names:
            raise IRError(f"{where}: another node has the same name")
        node_names.add(node.name)
        if node.id in node_ids:
            raise IRError(f"{where}: id {node.id} is used by another node")
        if not isinstance(node.id, int) or node.id < 0 or node.id >= graph._next_id:
            raise IRError(f"{where}: id {node.id!r} is not below the graph's next id {graph._next_id}")
        node_ids.add(node.id)
        opdef = _opdef(node, where)
        if opdef.stage == "hir" and graph.stage != "hir":
            raise IRError(f"{where}: {node.op} is an HIR block op but the graph is at stage {graph.stage!r}")
        opdef.check_arity(len(node.inputs), where)
        in_types = _input_types(graph, node, opdef, defined, later, where)
        norm = opdef.normalize_attrs(dict(node.attrs), where)
        _check_attrs_normalized(node.attrs, norm, where)
        _verify_subgraphs(node, opdef, where, graph.stage)
        inferred = infer_node(opdef, in_types, norm, where)
        if len(inferred) != len(node.outputs):
            raise IRError(f"{where}: op gives {len(inferred)} outputs but the node lists {len(node.outputs)}")
        for i, (o, want) in enumerate(zip(node.outputs, inferred)):
            what = f"{where}: output {i} {o!r}"
            if o in defined:
                raise IRError(f"{what} has more than one producer (also {defined[o]})")
            if o not in graph.types:
                raise IRError(f"{what} has no recorded type")
            got = graph.types[o]
            # add_node stores a quantized float result in its storage type; mirror that rule.
            if got.quant is not None and want.dtype.is_float:
                want = TensorType(want.shape, got.quant.storage)
            if not got.same_shape_dtype(want):
                raise IRError(f"{what} is recorded as {_sd(got)} but its inputs give {_sd(want)}")
            _check_quant(what, got)
            defined[o] = f"node {node.name!r}"
        if node.name in graph.types and node.name not in node.outputs:
            raise IRError(f"{where}: the node's name is also the name of value {node.name!r} it does not produce")

    for name in graph.outputs:
        if name not in defined:
            raise IRError(f"{g}: graph output {name!r} is not a value of the graph")
    for name, t in graph.types.items():
        if name not in defined:
            raise IRError(f"{g}: value {name!r} has a recorded type but no producer (not an input, param or output)")
        if name in graph.inputs or name in graph.params:
            _check_quant(defined[name], t)


def _verify_subgraphs(node: Node, opdef: OpDef, where: str, stage: str) -> None:
    """Control-flow ops hold closed subgraphs: each must be a well-formed MIR graph of its own, or an HIR
    one in an HIR graph (lower_hir lowers both)."""
    for k, spec in opdef.attrs.items():
        if spec.kind != "graph":
            continue
        sub = node.attrs[k]
        if sub.stage != "mir" and not (sub.stage == "hir" and stage == "hir"):
            raise IRError(f"{where}: subgraph {k} is at stage {sub.stage!r}; lower it to MIR first (lower_hir)")
        try:
            verify(sub)
        except IRError as e:
            raise IRError(f"{where}: subgraph {k}: {e}") from None


def _opdef(node: Node, where: str) -> OpDef:
    try:
        return get_op(node.op)
    except OpError:
        raise IRError(f"{where}: unknown op {node.op!r}") from None


def _input_types(
    graph: Graph, node: Node, opdef: OpDef, defined: dict[str, str], later: dict[str, Node], where: str
) -> list[TensorType | None]:
    out: list[TensorType | None] = []
    for i, v in enumerate(node.inputs):
        if v is None:
            spec = opdef.inputs[min(i, len(opdef.inputs) - 1)]
            if not spec.endswith("?"):
                raise IRError(f"{where}: input {i} ({spec.lstrip('*')}) is required but absent")
            out.append(None)
            continue
        if v not in defined:
            if v in later:
                p = later[v]
                how = "is the node's own output" if p is node else f"is produced by the later node {p.name!r}"
                raise IRError(f"{where}: input {i} {v!r} {how} (cycle or out-of-order reference)")
            raise IRError(f"{where}: input {i} {v!r} is not defined before use")
        out.append(graph.types[v])
    return out


def _check_attrs_normalized(attrs: dict[str, Any], norm: dict[str, Any], where: str) -> None:
    # Targets hash and compare attributes, so a list where a tuple belongs (or a
    # missing default) is a bug even when the values look equal.
    for k, v in norm.items():
        if k not in attrs:
            raise IRError(f"{where}: attribute {k!r} is missing (normalize attributes with OpDef.normalize_attrs)")
        a = attrs[k]
        same = type(a) is type(v) and (a == v or (isinstance(v, float) and math.isnan(v) and math.isnan(a)))
        if not same:
            raise IRError(f"{where}: attribute {k}={a!r} is not in normal form (expected {v!r})")


def _check_quant(what: str, t: TensorType) -> None:
    q = t.quant
    if q is None:
        return
    if not t.dtype.is_int:
        raise IRError(f"{what}: quantization parameters on non-integer type {t.dtype}")
    if q.storage != t.dtype:
        raise IRError(f"{what}: quantization storage {q.storage} does not match its dtype {t.dtype}")
    if not np.all(np.isfinite(q.scale)) or np.any(q.scale < 0):
        raise IRError(f"{what}: quantization scales must be finite and non-negative")
    if np.any(q.zero_point < t.dtype.min) or np.any(q.zero_point > t.dtype.max):
        raise IRError(f"{what}: a zero point lies outside the range of {t.dtype}")
    if q.axis is not None:
        if not -t.rank <= q.axis < t.rank:
            raise IRError(f"{what}: quantization axis {q.axis} is outside rank {t.rank}")
        dim = t.shape[q.axis]
        if isinstance(dim, str):
            raise IRError(f"{what}: per-channel axis {q.axis} is the symbolic dimension {dim!r}")
        if q.scale.size != dim:
            raise IRError(f"{what}: {q.scale.size} per-channel scales for dimension {q.axis} of size {dim}")


def _check_param(what: str, arr: Any, t: TensorType) -> None:
    if not isinstance(arr, np.ndarray):
        raise IRError(f"{what}: value is a {type(arr).__name__}, not a numpy array")
    if arr.dtype != t.dtype.numpy:
        raise IRError(f"{what}: array dtype {arr.dtype} does not store {t.dtype} (expected {t.dtype.numpy})")
    if tuple(arr.shape) != t.shape:
        raise IRError(f"{what}: array shape {list(arr.shape)} differs from its recorded type {_sd(t)}")
    # These types share numpy storage with a wider one; values outside the
    # narrower type would silently change meaning in a target.
    if t.dtype == DType.i4 and arr.size and (arr.min() < DType.i4.min or arr.max() > DType.i4.max):
        raise IRError(f"{what}: i4 values must lie in [-8, 7]")
    if t.dtype == DType.bf16 and np.any(arr.view(np.uint32) & np.uint32(0xFFFF)):
        raise IRError(f"{what}: bf16 values must be exactly representable in bfloat16 (low 16 bits zero)")
    if t.dtype == DType.bool and arr.size and arr.view(np.uint8).max() > 1:
        raise IRError(f"{what}: bool values must be stored as bytes 0 or 1")


def _sd(t: TensorType) -> str:
    return f"{t.dtype}[{','.join(str(d) for d in t.shape)}]"


# Storage types whose values mean nothing without a scale and zero point when an op computes on them.
_QUANTIZED_STORAGE = frozenset({DType.i4, DType.i8, DType.u8, DType.i16})


def check_quantized(graph: Graph, *, narrow_is_quantized: bool = False) -> None:
    """Check that every node with integer semantics is quantized throughout; raise :class:`IRError` if not.

    Loaders run this on untrusted models (``verify`` stays neutral about
    quantization, so that passes may build partial graphs). A node whose op
    has an integer reference runs it as soon as one of its values carries
    quantization, and that reference reads the parameters of every narrow
    integer value (i4, i8, u8, i16) of the node: all of them must have some.
    Only ``quant`` family ops, which convert between domains, may mix in
    float values. Without this, a model whose tensor lost its quantization
    loads and fails later, inside an integer kernel.

    ``narrow_is_quantized`` is TFLite's convention: a narrow integer value
    that an op computes on is always quantized, so a node of such values
    without any quantization is broken too (``layout`` ops, which only move
    values, excepted). In ONNX it is plain integer arithmetic.
    """
    for node in graph.nodes:
        opdef = _opdef(node, f"node {node.name!r} ({node.op})")
        for k, spec in opdef.attrs.items():
            if spec.kind == "graph":  # a subgraph's nodes run their own integer semantics
                try:
                    check_quantized(node.attrs[k], narrow_is_quantized=narrow_is_quantized)
                except IRError as e:
                    raise IRError(f"node {shorten(node.name, 60)!r} ({node.op}): subgraph {k}: {e}") from None
        if not opdef.has_int_reference:
            continue
        types = [(v, graph.types[v]) for v in (*node.inputs, *node.outputs) if v is not None]
        narrow = [v for v, t in types if t.dtype in _QUANTIZED_STORAGE]
        quantized = any(t.quant is not None for _, t in types)
        if not quantized and (not narrow_is_quantized or not narrow or opdef.family == "layout"):
            continue
        where = f"node {shorten(node.name, 60)!r} ({node.op})"
        for v, t in types:
            what = f"{where}: value {shorten(v, 60)!r}"
            if t.dtype in _QUANTIZED_STORAGE and t.quant is None:
                why = "the node is quantized" if quantized else f"{node.op} computes on quantized values"
                raise IRError(f"{what} is {t.dtype} without quantization parameters, but {why}")
            if not t.dtype.is_int and t.dtype != DType.bool and opdef.family != "quant":  # bool: conditions, results
                raise IRError(f"{what} is {t.dtype} in a quantized node (expected an integer type)")


# Bounds for untrusted models: no embedded model comes near them (the largest
# real layers are around 1e8 multiply-accumulates), and later stages allocate
# and compute what a model's shapes and attributes say.
MAX_VALUE_BYTES = 1 << 30
MAX_NODE_MACS = 1 << 32


def check_sizes(graph: Graph, max_bytes: int = MAX_VALUE_BYTES, max_macs: int = MAX_NODE_MACS) -> None:
    """Bound the memory and work running ``graph`` takes; raise :class:`IRError` naming the value or node.

    Every value (symbolic dimensions counted as 1), every padded input of a
    node with ``pads`` and every node's multiply-accumulates must stay within
    the bounds. Loaders run this so that a hostile file is refused before a
    reference run allocates terabytes or computes for days.
    """
    for name, t in graph.types.items():
        if _static_numel(t.shape) * t.dtype.storage_bytes > max_bytes:
            raise IRError(f"value {shorten(name, 60)!r} ({_sd(t)}) would take over {max_bytes} bytes")
    for node in graph.nodes:
        where = f"node {shorten(node.name, 60)!r} ({node.op})"
        x = graph.types[node.inputs[0]] if node.inputs and node.inputs[0] is not None else None
        pads = node.attrs.get("pads")
        if x is not None and isinstance(pads, tuple) and pads:
            padded = _padded_numel(x.shape, pads)
            if padded * x.dtype.storage_bytes > max_bytes:
                raise IRError(f"{where}: pads {shorten(list(pads), 60)} make its input take over {max_bytes} bytes")
        macs = node_macs(graph, node)
        if macs is not None and macs > max_macs:
            raise IRError(f"{where}: {macs} multiply-accumulates, more than {max_macs}")
        for k, sub in node.attrs.items():  # control flow: a subgraph's values are bounded the same way
            if isinstance(sub, Graph):
                try:
                    check_sizes(sub, max_bytes, max_macs)
                except IRError as e:
                    raise IRError(f"{where}: subgraph {k}: {e}") from None


def _static_numel(shape: Any) -> int:
    return math.prod(d for d in shape if isinstance(d, int))


def _padded_numel(shape: Any, pads: tuple) -> int:
    """Elements of an input padded by ``pads``: a (before, after) pair per axis, or per spatial axis of NHWC."""
    dims = [d if isinstance(d, int) else 1 for d in shape]
    if len(pads) == 2 * len(dims):
        axes = range(len(dims))
    elif len(pads) == 4 and len(dims) == 4:
        axes = range(1, 3)
    else:
        return math.prod(dims)
    for k, ax in enumerate(axes):
        dims[ax] += max(pads[2 * k], 0) + max(pads[2 * k + 1], 0)
    return math.prod(dims)
