"""The ONNX import driver: value bookkeeping, layout conversion, folding, errors.

Op handlers live in :mod:`rlx_edge.frontends._onnx_ops`; this module gives them
a small API (:class:`Importer`) to read inputs in the layout they need and to
emit MIR nodes.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from rlx_edge.errors import IRError, ModelFileError, UnsupportedOpError, one_line, shorten
from rlx_edge.frontends._onnx_fuse import fuse_decompositions
from rlx_edge.frontends._onnx_masks import masks_into_softmax
from rlx_edge.ir.dtype import DType
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.passes import PassManager, get_pass
from rlx_edge.ir.rules import RuleTable
from rlx_edge.ir.types import QuantParams, TensorType
from rlx_edge.ir.verify import check_quantized, check_sizes, verify

Perm = tuple[int, ...] | None

# NCHW -> NHWC: internal axis j holds ONNX axis NHWC[j].
NHWC: tuple[int, ...] = (0, 2, 3, 1)

MIN_OPSET, MAX_OPSET = 7, 22

# What a quantized model goes through at import: QDQ patterns to integer ops, layout transposes folded,
# asymmetric dense weights made symmetric (all exact; see each pass).
QUANTIZED_IMPORT_PASSES = ("qdq_fold", "transpose_fold", "symmetric_weights", "dce")

# onnxruntime's contrib domain: only the ops registered in ``_onnx_ops.CONTRIB_HANDLERS``
# (QOperator ops its quantizer emits) are imported from it, as version 1 defines them.
CONTRIB_DOMAIN = "com.microsoft"
CONTRIB_OPSET = 1

# ONNX element types the IR can hold. Others (strings, float8, int4, uint16...) are unsupported.
ONNX_DTYPES: dict[int, DType] = {
    onnx.TensorProto.FLOAT: DType.f32,
    onnx.TensorProto.DOUBLE: DType.f64,
    onnx.TensorProto.FLOAT16: DType.f16,
    onnx.TensorProto.BFLOAT16: DType.bf16,
    onnx.TensorProto.INT64: DType.i64,
    onnx.TensorProto.INT32: DType.i32,
    onnx.TensorProto.INT16: DType.i16,
    onnx.TensorProto.INT8: DType.i8,
    onnx.TensorProto.UINT8: DType.u8,
    onnx.TensorProto.BOOL: DType.bool,
}

# Ops that only ever run at import, on constants: folding them needs no IR op.
FOLD_ONLY = frozenset(
    {
        "Constant",
        "Shape",
        "Size",
        "Gather",
        "ConstantOfShape",
        "Range",
        "Expand",
        "Equal",
        "Where",
        "Floor",
        "Ceil",
        "Sqrt",
        "Pow",
        "Exp",
        "Log",
        "Neg",
        "Abs",
        "Reciprocal",
        "ReduceProd",
        "ReduceMax",
        "ReduceMin",
        "Tile",
        "NonZero",
        "Not",
        "And",
        "Or",
        "Less",
        "Greater",
        "CastLike",
        "Mod",
    }
)

# Folding these would throw away information the IR keeps (quantized weights).
NO_FOLD = frozenset({"DequantizeLinear"})

# Ops whose result is random: never folded, never imported.
_RANDOM = frozenset(
    {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli"}
)
# Control flow runs subgraphs a file can make loop (almost) forever: never folded.
_CONTROL_FLOW = frozenset({"Loop", "Scan", "If"})

# Shapes of a file are bounded before anything allocates what they say; no
# embedded model comes near these.
MAX_TENSOR_BYTES = 1 << 30
_MAX_FOLD_ELEMENTS = 1 << 24  # constant subgraphs compute shapes and small tables
# Error messages name nodes and values by their (file-given, unbounded) names.
NAME_CHARS = 60
_MESSAGE_CHARS = 400


class Unsupported(Exception):
    """Raised by a handler for a node feature rlx-edge cannot import; collected, not fatal at once."""


class Invalid(Exception):
    """Raised by a handler for a node that breaks the ONNX spec; becomes a ModelFileError naming the node."""


def type_name(code: int) -> str:
    """An ONNX element type's name; a number no ONNX version defines is shown as a number."""
    try:
        return onnx.TensorProto.DataType.Name(code)
    except ValueError:
        return f"{code} (not an ONNX element type)"


def _known_type(code: int) -> bool:
    return code in onnx.TensorProto.DataType.values() and code != onnx.TensorProto.UNDEFINED


def read_model(path: Path) -> onnx.ModelProto:
    """Parse and sanity-check an ONNX file; any failure names the file."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ModelFileError(f"{path}: cannot read ({e.strerror or e})") from None
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except Exception as e:  # protobuf raises DecodeError, sometimes RuntimeWarning-like errors
        raise ModelFileError(f"{path}: not a readable ONNX model (corrupt or truncated: {e})") from None
    if not data or not model.HasField("graph"):
        raise ModelFileError(f"{path}: not an ONNX model (no graph found; corrupt or truncated file?)")
    if model.graph.node and not model.opset_import:
        raise ModelFileError(f"{path}: ONNX model declares no opset (corrupt file?)")
    _check_names(model, path)
    try:
        # external data is not supported: model files are self-contained here
        for init in model.graph.initializer:
            if init.data_location == onnx.TensorProto.EXTERNAL:
                raise ModelFileError(f"{path}: initializer {init.name!r} uses external data, which is not supported")
    except ModelFileError:
        raise
    return model


def _check_names(model: onnx.ModelProto, path: Path) -> None:
    """Every name the importer reads must be text: protobuf hands out bytes for invalid UTF-8."""
    g = model.graph
    named = [*g.input, *g.output, *g.initializer, *g.value_info]
    texts = [g.name, *(x.name for x in named), *(i.domain for i in model.opset_import)]
    for n in g.node:
        texts += [n.name, n.op_type, n.domain, *n.input, *n.output, *(a.name for a in n.attribute)]
    bad = next((t for t in texts if not isinstance(t, str)), None)
    if bad is not None:
        raise ModelFileError(f"{path}: the name {shorten(repr(bad), NAME_CHARS)} is not valid UTF-8 (corrupt file?)")


def attrs_of(node: onnx.NodeProto) -> dict[str, Any]:
    """A node's attributes as Python values (strings decoded)."""
    out: dict[str, Any] = {}
    for a in node.attribute:
        v = onnx.helper.get_attribute_value(a)
        if isinstance(v, bytes):
            v = v.decode("utf-8", "replace")
        elif isinstance(v, onnx.TensorProto):
            v = numpy_helper.to_array(v)
        out[a.name] = v
    return out


def is_identity(perm: Sequence[int] | None) -> bool:
    return perm is None or list(perm) == list(range(len(perm)))


def norm_perm(perm: Sequence[int] | None) -> Perm:
    return None if is_identity(perm) else tuple(int(p) for p in perm)  # type: ignore[union-attr]


def compose(p1: Perm, p2: Sequence[int]) -> tuple[int, ...]:
    """Permutation of ``transpose(transpose(a, p1), p2)`` as a single transpose of ``a``."""
    if p1 is None:
        return tuple(p2)
    return tuple(p1[i] for i in p2)


def inverse(perm: Sequence[int]) -> tuple[int, ...]:
    inv = [0] * len(perm)
    for j, p in enumerate(perm):
        inv[p] = j
    return tuple(inv)


def internal_axis(perm: Perm, axis: int) -> int:
    """Internal axis holding ONNX ``axis`` (already non-negative)."""
    return axis if perm is None else perm.index(axis)


def drop_axes(perm: Perm, removed: Sequence[int]) -> Perm:
    """Layout left after removing ONNX ``removed`` axes from a value held in ``perm``."""
    if perm is None:
        return None
    kept = [p for p in perm if p not in removed]
    order = sorted(kept)
    return norm_perm([order.index(p) for p in kept])


@dataclass
class Value:
    """An imported ONNX value: a constant (ONNX layout) or a graph value held in ``perm``."""

    name: str | None = None
    perm: Perm = None
    const: np.ndarray | None = None
    src: str = ""  # ONNX name of a constant, to name its parameter

    @property
    def is_const(self) -> bool:
        return self.const is not None


class Importer:
    """One import of one model. Handlers call the helpers below."""

    def __init__(self, model: onnx.ModelProto, path: Path) -> None:
        self.model = model
        self.path = path
        self.opset = self._default_opset()
        self.g = Graph(_clean_name(model.graph.name) or path.stem)
        self.vals: dict[str, Value] = {}
        self.problems: list[str] = []
        self.poisoned: set[str] = set()
        self._layout_cache: dict[tuple[str, Perm], str] = {}
        self._param_cache: dict[tuple[int, Perm], str] = {}
        self._transposed: dict[str, tuple[str, tuple[int, ...]]] = {}
        self._const_keep: list[np.ndarray] = []  # keeps arrays alive so id() keys stay unique
        self.node: onnx.NodeProto | None = None
        self.depth = 0  # how deep in If/Loop/Scan subgraphs this import is (_onnx_control sets it)
        graph = model.graph
        self.reserved: set[str] = {o for n in graph.node for o in n.output} | {i.name for i in graph.input} - {
            t.name for t in graph.initializer
        }

    # driver ------------------------------------------------------------------
    def _default_opset(self) -> int:
        for imp in self.model.opset_import:
            if imp.domain in ("", "ai.onnx"):
                return int(imp.version)
        return MAX_OPSET if not self.model.graph.node else 0

    def run(self) -> Graph:
        from rlx_edge.frontends._onnx_ops import CONTRIB_HANDLERS, HANDLERS

        if self.model.graph.node and self.opset < MIN_OPSET:
            raise UnsupportedOpError(
                f"{self.path}: ONNX opset {self.opset or '(none for the default domain)'} is not supported;"
                f" rlx-edge imports opsets {MIN_OPSET} to {MAX_OPSET}"
            )
        self._check_structure()
        # exporters' Erf-form GELU and decomposed layer norm become the one node each stands for
        self.model = fuse_decompositions(self.model)
        graph = self.model.graph
        for init in graph.initializer:
            self.vals[init.name] = Value(const=self._to_array(init), src=init.name)
        for vi in graph.input:
            if vi.name in self.vals:
                continue  # IR < 4: initializers are listed as inputs too; they stay constants
            self._add_input(vi)
        for node in graph.node:
            self.node = node
            self._import_node(node, HANDLERS, CONTRIB_HANDLERS)
        self.node = None
        if self.problems:
            raise UnsupportedOpError(
                f"{self.path}: {len(self.problems)} node(s) cannot be imported:\n  " + "\n  ".join(self.problems)
            )
        self._outputs()
        masks_into_softmax(self.g)  # -inf attention masks become softmax's bool mask (their nodes die below)
        self.g = get_pass("dce")(self.g)  # drops what nothing reads (replaced transposes, unused conversions)
        if any(t.quant is not None for t in self.g.types.values()):
            # A quantized model (QDQ or QOperator) is taken as the integer model it stands for, so that
            # commands taking it as given (compile, run --target) find integer ops and no NCHW transposes.
            self.g = PassManager(QUANTIZED_IMPORT_PASSES, max_iterations=8).run(self.g)[0]
        try:  # every rule a later stage relies on, before anyone runs the graph
            verify(self.g)
            check_quantized(self.g)
            check_sizes(self.g)
        except IRError as e:
            raise ModelFileError(f"{self.path}: invalid model: {one_line(e, _MESSAGE_CHARS)}") from None
        self.g.metadata["source"] = "onnx"
        self.g.metadata["onnx_opset"] = self.opset
        return self.g

    def _check_structure(self) -> None:
        """Single assignment, defined graph outputs, nodes with outputs: what every handler takes for granted."""
        graph = self.model.graph
        defined = {t.name for t in graph.initializer} | {i.name for i in graph.input}
        for k, node in enumerate(graph.node):
            where = f"node {_where(node, k)}"
            outs = [o for o in node.output if o]
            if not outs:
                raise ModelFileError(f"{self.path}: {where} has no outputs")
            for o in outs:
                if o in defined:
                    raise ModelFileError(f"{self.path}: {where} assigns {_q(o)}, which is already defined")
                defined.add(o)
        for vi in graph.output:
            if vi.name not in defined:
                raise ModelFileError(f"{self.path}: graph output {_q(vi.name)} is not computed by any node")

    def _check_attributes(self, node: onnx.NodeProto, where: str) -> None:
        """Each attribute given once, with a valid type."""
        seen: set[str] = set()
        for a in node.attribute:
            if a.name in seen:
                raise self.invalid(where, f"attribute {_q(a.name)} is given twice")
            seen.add(a.name)
            if a.type not in onnx.AttributeProto.AttributeType.values() or a.type == onnx.AttributeProto.UNDEFINED:
                raise self.invalid(where, f"attribute {_q(a.name)} has no valid type ({a.type})")

    def _check_schema(self, node: onnx.NodeProto, where: str) -> None:
        """A node against its op's ONNX schema: input and output counts, required attributes, attribute types."""
        self._check_attributes(node, where)
        try:
            schema = onnx.defs.get_schema(node.op_type, _schema_version(self.opset), "")
        except onnx.defs.SchemaError:
            return  # an op ONNX does not define here is reported as unsupported
        for kind, names, lo, hi in (
            ("inputs", node.input, schema.min_input, schema.max_input),
            ("outputs", node.output, schema.min_output, schema.max_output),
        ):
            if not lo <= len(names) <= hi:
                raise self.invalid(where, f"has {len(names)} {kind}; {node.op_type} takes {lo} to {hi}")
        # an optional formal input may be left empty even below min_input (Loop's M and cond)
        optional = onnx.defs.OpSchema.FormalParameterOption.Optional
        formal = list(schema.inputs)
        required = [i for i in range(min(schema.min_input, len(node.input))) if formal[i].option != optional]
        if not all(node.input[i] for i in required):
            raise self.invalid(where, f"leaves a required input empty (the first {schema.min_input} are required)")
        given = {a.name: a for a in node.attribute}
        for name, spec in schema.attributes.items():
            a = given.get(name)
            if a is None:
                if spec.required:
                    raise self.invalid(where, f"required attribute {_q(name)} is missing")
            elif a.type != int(spec.type):
                got = onnx.AttributeProto.AttributeType.Name(a.type)
                raise self.invalid(where, f"attribute {_q(name)} is of type {got}, expected {spec.type.name}")

    def _check_contrib(self, node: onnx.NodeProto, where: str, schema: Any) -> None:
        """A ``com.microsoft`` node against the schema its handler declares (``onnx.defs`` has none for the domain).

        ``schema`` is the handler's metadata: ``inputs`` (fewest, most; None for
        variadic), ``required`` (input positions that must not be empty) and
        ``attrs`` (attribute name -> AttributeProto type; ``required_attrs``
        must be given). The domain must be declared, in the version these
        handlers follow.
        """
        declared = [int(i.version) for i in self.model.opset_import if i.domain == CONTRIB_DOMAIN]
        if not declared:
            raise self.invalid(
                where, f"uses domain {CONTRIB_DOMAIN!r}, which the model's opset_import does not declare"
            )
        if declared[0] != CONTRIB_OPSET:
            raise Unsupported(
                f"{CONTRIB_DOMAIN} opset {declared[0]} is not supported (rlx-edge follows version {CONTRIB_OPSET})"
            )
        self._check_attributes(node, where)
        lo, hi = schema["inputs"]
        n = len(node.input)
        if n < lo or (hi is not None and n > hi):
            takes = f"{lo} to {hi}" if hi is not None else f"at least {lo}"
            raise self.invalid(where, f"has {n} inputs; {node.op_type} takes {takes}")
        if len(node.output) != 1:
            raise self.invalid(where, f"has {len(node.output)} outputs; {node.op_type} has one")
        empty = [i for i in schema.get("required", ()) if i < n and not node.input[i]]
        if empty:
            raise self.invalid(where, f"leaves required input {empty[0]} empty")
        given = {a.name: a for a in node.attribute}
        for name in schema.get("required_attrs", ()):
            if name not in given:
                raise self.invalid(where, f"required attribute {_q(name)} is missing")
        for name, kind in schema.get("attrs", {}).items():
            if name in given and given[name].type != kind:
                got = onnx.AttributeProto.AttributeType.Name(given[name].type)
                want = onnx.AttributeProto.AttributeType.Name(kind)
                raise self.invalid(where, f"attribute {_q(name)} is of type {got}, expected {want}")

    def invalid(self, where: str, msg: str) -> ModelFileError:
        return ModelFileError(f"{self.path}: node {where}: {one_line(msg, _MESSAGE_CHARS)}")

    def _import_node(self, node: onnx.NodeProto, handlers: RuleTable, contrib: RuleTable) -> None:
        op = node.op_type
        where = _where(node)
        if node.domain == CONTRIB_DOMAIN:
            if op not in contrib:
                ours = ", ".join(contrib)
                self._problem(
                    node, f"{where}: op {op} of domain {CONTRIB_DOMAIN!r} is not supported (rlx-edge imports {ours})"
                )
                return
            try:
                self._check_contrib(node, where, contrib.metadata(op))
            except Unsupported as e:
                self._problem(node, f"{where}: {e}")
                return
            handlers = contrib
        elif node.domain not in ("", "ai.onnx"):
            self._problem(node, f"{where}: op of domain {_q(node.domain)} is not supported")
            return
        else:
            self._check_schema(node, where)
            newer = self._newer_than_supported(op)
            if newer:
                self._problem(node, f"{where}: {newer}")
                return
        standard = handlers is not contrib
        ins = [i for i in node.input if i]
        if any(i in self.poisoned for i in ins):
            # its inputs come from a node that failed; only its op type can still be judged
            if op not in handlers and op not in FOLD_ONLY:
                self._problem(node, f"{where}: op {op} is not supported")
            else:
                self.poisoned.update(node.output)
            return
        missing = [i for i in ins if i not in self.vals]
        if missing:
            names = ", ".join(_q(m) for m in missing[:3])
            raise ModelFileError(f"{self.path}: node {where} reads undefined value(s) {names}")
        # contrib ops never fold: ONNX's reference evaluator does not know them
        never_folded = not standard or op in NO_FOLD or op in _RANDOM or op in _CONTROL_FLOW
        foldable = not never_folded and all(self.vals[i].is_const for i in ins)
        try:
            if foldable:
                self._fold(node)
                return
            if standard and (op == "Shape" or op == "Size"):
                self._shape_of(node)
                return
            if op not in handlers:
                self._problem(node, f"{where}: op {op} is not supported")
                return
            self._convert(node, handlers[op], where)
        except Unsupported as e:
            self._problem(node, f"{where}: {e}")
        except IRError as e:
            # a node the IR rejects (bad shapes, a feature an op lacks) is reported like any unsupported feature
            self._problem(node, f"{where}: {e}")

    def _convert(self, node: onnx.NodeProto, handler: Any, where: str) -> None:
        try:
            handler(self, node, attrs_of(node))
        except Invalid as e:
            raise self.invalid(where, str(e)) from None
        except (KeyError, ValueError, IndexError, TypeError) as e:
            # Safety net for a malformed node that no specific check caught. It names
            # the node; the cause stays chained for debugging (a bug of ours shows there).
            why = f"{type(e).__name__}: {e}"
            raise self.invalid(where, f"cannot be imported, the node is malformed ({why})") from e

    def _newer_than_supported(self, op: str) -> str:
        """A model may declare a newer opset; its ops are fine while they are unchanged since opset 22."""
        if self.opset <= MAX_OPSET:
            return ""
        try:
            since = onnx.defs.get_schema(op, _schema_version(self.opset)).since_version
        except Exception:
            return f"op {op} is unknown at opset {self.opset}"
        if since > MAX_OPSET:
            return (
                f"op {op} as defined in opset {since} is not supported"
                f" (rlx-edge follows opsets {MIN_OPSET} to {MAX_OPSET})"
            )
        return ""

    def _problem(self, node: onnx.NodeProto, msg: str) -> None:
        self.problems.append(msg)
        self.poisoned.update(o for o in node.output if o)

    # inputs / outputs ----------------------------------------------------------
    def _add_input(self, vi: onnx.ValueInfoProto) -> None:
        t = vi.type.tensor_type
        what = f"{self.path}: input {_q(vi.name)}"
        if not vi.type.HasField("tensor_type"):
            raise UnsupportedOpError(f"{what} is not a tensor (sequences/maps are not supported)")
        if not _known_type(t.elem_type):
            raise ModelFileError(f"{what} has element type {type_name(t.elem_type)}")
        if t.elem_type not in ONNX_DTYPES:
            raise UnsupportedOpError(f"{what} has element type {type_name(t.elem_type)}, which is not supported")
        shape: list[int | str] = []
        for i, d in enumerate(t.shape.dim):
            if d.HasField("dim_value"):
                if d.dim_value < 0:
                    raise ModelFileError(f"{what} has the negative dimension {d.dim_value}")
                shape.append(int(d.dim_value))
            else:
                shape.append(_symbol(d.dim_param) if d.dim_param else _symbol(f"{vi.name}_d{i}"))
        static = [d for d in shape if isinstance(d, int)]
        if math.prod(static) * ONNX_DTYPES[t.elem_type].numpy.itemsize > MAX_TENSOR_BYTES:
            big = shorten(shape, NAME_CHARS)
            raise ModelFileError(f"{what} of shape {big} would take over {MAX_TENSOR_BYTES} bytes")
        try:
            self.g.input(vi.name, shape, ONNX_DTYPES[t.elem_type])
        except IRError as e:  # a repeated name, a symbol the IR cannot hold
            raise ModelFileError(f"{what}: {one_line(e, _MESSAGE_CHARS)}") from None
        self.vals[vi.name] = Value(name=vi.name)

    def _outputs(self) -> None:
        for vi in self.model.graph.output:
            v = self.vals[vi.name]  # defined: _check_structure saw to it
            name = self.rt(v, None)
            if name != vi.name:
                name = self._rename(name, vi.name)
            self.g.output(name)

    def _rename(self, old: str, new: str) -> str:
        """Give a node's output the ONNX output name, when it is free and ``old`` is a node output."""
        g = self.g
        prod = g.producer(old)
        if prod is None or new in g.types or any(n.name == new for n in g.nodes) or old in g.outputs:
            return old
        prod.outputs = [new if o == old else o for o in prod.outputs]
        if prod.name == old:
            prod.name = new
        for n in g.nodes:
            n.inputs = [new if i == old else i for i in n.inputs]
        g.types[new] = g.types.pop(old)
        for key, val in list(self._layout_cache.items()):
            if val == old:
                self._layout_cache[key] = new
        return new

    # values ----------------------------------------------------------------------
    def _to_array(self, t: onnx.TensorProto) -> np.ndarray:
        what = f"{self.path}: tensor {_q(t.name)}"
        if not _known_type(t.data_type):
            raise ModelFileError(f"{what} has element type {type_name(t.data_type)}")
        if t.data_type not in ONNX_DTYPES:
            raise UnsupportedOpError(f"{what} has element type {type_name(t.data_type)}, which is not supported")
        if any(d < 0 for d in t.dims):
            raise ModelFileError(f"{what} has a negative dimension in {shorten(list(t.dims), NAME_CHARS)}")
        try:
            arr = numpy_helper.to_array(t)
        except Exception as e:
            raise ModelFileError(f"{what} cannot be read ({one_line(e, 200)}); corrupt file?") from None
        if t.data_type == onnx.TensorProto.BFLOAT16:
            arr = arr.astype(np.float32)
        return np.asarray(arr)

    def val(self, node: onnx.NodeProto, i: int) -> Value | None:
        """Input ``i`` of ``node``; ``None`` when absent (optional)."""
        if i >= len(node.input) or not node.input[i]:
            return None
        return self.vals[node.input[i]]

    def const_input(self, node: onnx.NodeProto, i: int, what: str) -> np.ndarray | None:
        """A constant input (absent -> None); a runtime one is unsupported."""
        v = self.val(node, i)
        if v is None:
            return None
        if not v.is_const:
            raise Unsupported(f"{what} (input {i}) must be a constant, but is computed at run time")
        return v.const

    def onnx_shape(self, v: Value) -> tuple:
        if v.is_const:
            return tuple(v.const.shape)  # type: ignore[union-attr]
        ish = self.g.types[v.name].shape  # type: ignore[index]
        if v.perm is None:
            return tuple(ish)
        out: list = [0] * len(ish)
        for j, p in enumerate(v.perm):
            out[p] = ish[j]
        return tuple(out)

    def rank(self, v: Value) -> int:
        return len(self.onnx_shape(v))

    def dtype(self, v: Value) -> DType:
        if v.is_const:
            from rlx_edge.ir.dtype import from_numpy

            return from_numpy(v.const.dtype)  # type: ignore[union-attr]
        return self.g.types[v.name].dtype  # type: ignore[index]

    def ttype(self, v: Value) -> TensorType | None:
        return None if v.is_const else self.g.types[v.name]  # type: ignore[index]

    def rt(self, v: Value, perm: Perm, quant: QuantParams | None = None) -> str:
        """Name of a graph value holding ``v`` in layout ``perm`` (None: ONNX layout)."""
        perm = norm_perm(perm)
        if v.is_const:
            arr = v.const if perm is None else np.transpose(v.const, perm)  # type: ignore[arg-type]
            base = v.src if perm is None else f"{v.src}__nhwc" if perm == NHWC and v.src else ""
            key = (id(v.const), perm) if quant is None else None
            if key is not None and key not in self._param_cache:
                # the key's id must stay unique while cached: a temporary constant (a broadcast
                # reshape) would otherwise be freed and its id reused by the next one
                self._const_keep.append(v.const)  # type: ignore[arg-type]
            return self.param(arr, quant=quant, key=key, base=base)
        if v.perm == perm:
            return v.name  # type: ignore[return-value]
        # internal = onnx.T(v.perm); wanted = onnx.T(perm) = internal.T(inv(v.perm)[perm])
        q = perm if v.perm is None else compose(inverse(v.perm), perm or tuple(range(len(v.perm))))
        return self.transpose(v.name, q)  # type: ignore[arg-type]

    def plain(self, v: Value) -> str:
        return self.rt(v, None)

    def transpose(self, src: str, perm: Sequence[int]) -> str:
        """Emit ``transpose(src, perm)``, composing with a transpose that produced ``src``.

        This is the importer's peephole: a conversion back and forth is a
        composed identity and returns the original value, and chains collapse
        to one transpose. Replaced transposes die in the final DCE.
        """
        if src in self._transposed:
            base, p0 = self._transposed[src]
            return self.transpose(base, compose(p0, perm))
        if is_identity(perm):
            return src
        key = (src, tuple(perm))
        if key in self._layout_cache:
            return self._layout_cache[key]
        name = self.emit("transpose", [src], {"perm": tuple(perm)}, base=f"{src}__T")
        self._transposed[name] = (src, tuple(perm))
        self._layout_cache[key] = name
        return name

    def param(self, arr: np.ndarray, *, quant: QuantParams | None = None, key: Any = None, base: str = "") -> str:
        if key is not None and key in self._param_cache:
            return self._param_cache[key]
        if not base and self.node is not None:
            base = f"{self.node.output[0]}__const"
        name = self.unique(base or "const")
        self.g.param(name, np.asarray(arr), quant=quant)
        if key is not None:
            self._const_keep.append(arr)
            self._param_cache[key] = name
        return name

    def unique(self, base: str) -> str:
        """A fresh value/node name; ONNX value names stay reserved for the values they name."""
        base = base or "v"
        g = self.g
        own = set(self.node.output) if self.node is not None else set()
        name, k = base, 0
        while name in g.types or any(n.name == name for n in g.nodes) or (name in self.reserved and name not in own):
            k += 1
            name = f"{base}_{k}"
        return name

    def emit(
        self,
        op: str,
        inputs: Sequence[str | None],
        attrs: dict[str, Any] | None = None,
        *,
        base: str | None = None,
        out_quant: QuantParams | Sequence[QuantParams | None] | None = None,
        n_out: int = 1,
    ) -> str:
        """Add one MIR node; returns its (first) output name."""
        name = self.unique(base or op)
        out_names = None if n_out == 1 else [self.unique(f"{name}:{i}") for i in range(n_out)]
        outs = self.g.add_node(op, inputs, attrs, name=name, out_quant=out_quant, out_names=out_names)
        return outs[0].name

    def emit_multi(
        self, op: str, inputs: Sequence[str | None], attrs: dict[str, Any], base: str, n_out: int
    ) -> list[str]:
        name = self.unique(base)
        out_names = [self.unique(f"{name}:{i}") for i in range(n_out)]
        outs = self.g.add_node(op, inputs, attrs, name=name, out_names=out_names)
        return [o.name for o in outs]

    def out_base(self, node: onnx.NodeProto, i: int = 0, perm: Perm = None) -> str:
        """Name for the MIR value of ONNX output ``i``: the ONNX name when it is held as ONNX shapes it."""
        onnx_name = node.output[i]
        return onnx_name if perm is None else f"{onnx_name}__nhwc" if perm == NHWC else f"{onnx_name}__p"

    def set_out(self, node: onnx.NodeProto, i: int, name: str, perm: Perm = None) -> None:
        if i < len(node.output) and node.output[i]:
            self.vals[node.output[i]] = Value(name=name, perm=norm_perm(perm))

    def set_const(self, node: onnx.NodeProto, i: int, arr: np.ndarray) -> None:
        if i < len(node.output) and node.output[i]:
            self.vals[node.output[i]] = Value(const=np.asarray(arr), src=node.output[i])

    def used_outputs(self, node: onnx.NodeProto) -> list[int]:
        return [i for i, o in enumerate(node.output) if o]

    # folding ------------------------------------------------------------------------
    def _fold(self, node: onnx.NodeProto) -> None:
        """Evaluate a node whose inputs are all constants with ONNX's numpy reference evaluator."""
        from onnx.reference import ReferenceEvaluator

        size = self._fold_size(node)
        if size is not None and size > _MAX_FOLD_ELEMENTS:
            raise Unsupported(f"constant folding would create {size} elements (at most {_MAX_FOLD_ELEMENTS})")
        feeds: dict[str, np.ndarray] = {}
        inputs = []
        for name in node.input:
            if not name:
                continue
            arr = self.vals[name].const
            feeds[name] = arr  # type: ignore[assignment]
            inputs.append(onnx.helper.make_tensor_value_info(name, _onnx_elem(arr), arr.shape))  # type: ignore[union-attr]
        outs = [o for o in node.output if o]
        one = onnx.helper.make_graph(
            [node],
            "fold",
            inputs,
            [onnx.helper.make_tensor_value_info(o, onnx.TensorProto.UNDEFINED, None) for o in outs],
        )
        m = onnx.helper.make_model(one, opset_imports=list(self.model.opset_import))
        m.ir_version = self.model.ir_version or onnx.IR_VERSION
        try:
            results = ReferenceEvaluator(m).run(None, feeds)
        except (Exception, MemoryError) as e:
            raise Unsupported(f"constant folding failed ({one_line(f'{type(e).__name__}: {e}', 200)})") from None
        for o, r in zip(outs, results):
            arr = np.asarray(r)
            if arr.dtype == object or arr.dtype.kind in "USV" or not _storable(arr.dtype):
                raise Unsupported(f"constant {o!r} has element type {arr.dtype}, which the IR cannot hold")
            self.vals[o] = Value(const=arr, src=o)

    def _fold_size(self, node: onnx.NodeProto) -> int | None:
        """Elements folding ``node`` would create, for the ops whose result can dwarf their inputs."""
        c = [self.vals[i].const if i else None for i in node.input]
        op = node.op_type
        try:
            if op == "ConstantOfShape":
                return abs(math.prod(int(d) for d in c[0].reshape(-1)))  # type: ignore[union-attr]
            if op == "Expand":
                shape = [abs(int(d)) for d in c[1].reshape(-1)]  # type: ignore[union-attr]
                rank = max(len(shape), c[0].ndim)  # type: ignore[union-attr]
                a = [1] * (rank - c[0].ndim) + list(c[0].shape)  # type: ignore[union-attr]
                b = [1] * (rank - len(shape)) + shape
                return math.prod(max(x, y) for x, y in zip(a, b))
            if op == "Tile":
                return c[0].size * abs(math.prod(int(r) for r in c[1].reshape(-1)))  # type: ignore[union-attr]
            if op == "Range":
                start, limit, delta = (float(np.asarray(x).reshape(-1)[0]) for x in c[:3])
                return math.ceil(abs((limit - start) / delta)) if delta else None
            if op == "Pad" and len(c) > 1 and c[1] is not None:
                pads = [int(p) for p in c[1].reshape(-1)]
                shape = c[0].shape  # type: ignore[union-attr]
                if len(pads) != 2 * len(shape):
                    return None
                return math.prod(max(d + pads[i] + pads[i + len(shape)], 0) for i, d in enumerate(shape))
        except (ValueError, TypeError, IndexError, AttributeError, OverflowError, ZeroDivisionError):
            return None  # malformed inputs: the evaluator reports them
        return None

    def _shape_of(self, node: onnx.NodeProto) -> None:
        """Shape / Size of a runtime value: a constant when its shape is static."""
        shape = self.onnx_shape(self.val(node, 0))  # type: ignore[arg-type]
        syms = [d for d in shape if isinstance(d, str)]
        a = attrs_of(node)
        if node.op_type == "Shape":
            r = len(shape)
            start = a.get("start", 0)
            end = a.get("end", r)
            start = min(max(start + r if start < 0 else start, 0), r)
            end = min(max(end + r if end < 0 else end, 0), r)
            shape = shape[start:end]
            syms = [d for d in shape if isinstance(d, str)]
            if syms:
                raise Unsupported(
                    f"the shape depends on symbolic dimension(s) {', '.join(syms)}; bind them before import"
                )
            self.set_const(node, 0, np.array(shape, dtype=np.int64))
            return
        if syms:
            raise Unsupported(f"the size depends on symbolic dimension(s) {', '.join(syms)}")
        self.set_const(node, 0, np.array(int(np.prod(shape)), dtype=np.int64))


def _onnx_elem(arr: np.ndarray) -> int:
    return onnx.helper.np_dtype_to_tensor_dtype(arr.dtype)


def _storable(dt: np.dtype) -> bool:
    try:
        from rlx_edge.ir.dtype import from_numpy

        from_numpy(dt)
        return True
    except IRError:
        return False


def _symbol(s: str) -> str:
    """An ONNX dim_param as an IR symbol (an identifier)."""
    s = re.sub(r"\W", "_", s)
    if not s or not s.isidentifier():
        s = f"d_{s}"
    return s


def _schema_version(opset: int) -> int:
    """An opset as onnx.defs takes it (a C int); a file may declare any 64-bit number."""
    return min(max(opset, 1), 2**31 - 1)


def _clean_name(s: str) -> str:
    return s.strip()


def _q(name: str) -> str:
    """A file-given name, quoted and cut short for a message."""
    return repr(shorten(name, NAME_CHARS))


def _where(node: onnx.NodeProto, index: int | None = None) -> str:
    """``conv1 (Conv)``: how messages name a node."""
    name = shorten(node.name, NAME_CHARS) if node.name else "(unnamed)" if index is None else f"#{index}"
    return f"{name} ({shorten(node.op_type, NAME_CHARS)})"
