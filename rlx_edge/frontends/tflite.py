"""TFLite frontend: ``.tflite`` flatbuffers to MIR graphs, and back.

:func:`load_tflite` reads a model with the ``tflite`` package's generated
schema readers. Float, int8 and 16x8 models keep every tensor's quantization
exactly (float32 scales, zero points, per-channel axis), weights keep their
integer storage, and each value records the TFLite tensor index it came from
in ``graph.metadata["tflite_tensor_index"]`` so intermediates can be compared
against TFLite Micro.

Model files are untrusted: every offset and size is checked against the file
before anything is read or allocated, and any failure of the reader becomes
one :class:`~rlx_edge.errors.ModelFileError` naming the file.

:func:`export_tflite` / :func:`to_tflite_bytes` write a graph back (see
``_tflite_export``).
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import flatbuffers
import numpy as np
from tflite.BuiltinOptions import BuiltinOptions
from tflite.Model import Model

from rlx_edge.errors import IRError, ModelFileError, UnsupportedOpError, one_line, shorten
from rlx_edge.frontends._tflite_export import export_tflite, to_tflite_bytes
from rlx_edge.frontends._tflite_ops import BUILTINS, CUSTOM_OPS, Builtin, OptionField
from rlx_edge.frontends._tflite_schema import (
    ACT_NAMES,
    ACT_TO_IR,
    FILE_IDENTIFIER,
    OP_CODES,
    OP_NAMES,
    PADDING_TO_IR,
    SCHEMA_VERSION,
    TFL_TO_DTYPE,
    TFL_TYPE_NAMES,
    schema_module,
    unpack_int4,
)
from rlx_edge.ir.dtype import DType
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.ops import get_op
from rlx_edge.ir.rules import RuleTable
from rlx_edge.ir.types import QuantParams
from rlx_edge.ir.verify import check_quantized, check_sizes, verify

__all__ = ["export_tflite", "load_tflite", "load_tflite_bytes", "to_tflite_bytes"]

# Tensors above this many dimensions are not something an embedded graph holds;
# the bound also keeps shape products of a hostile file small.
_MAX_RANK = 8
# No tensor of an embedded model comes near this; later stages allocate what a
# shape says, so a file's shapes are bounded before anything trusts them.
_MAX_TENSOR_BYTES = 1 << 30
# Error messages name tensors and ops by their (file-given, unbounded) names.
_NAME_CHARS = 60
_MESSAGE_CHARS = 400

_OPTION_TYPES: dict[int, str] = {v: k for k, v in vars(BuiltinOptions).items() if not k.startswith("_")}


@dataclass(frozen=True)
class _TensorInfo:
    name: str  # the IR value name (sanitized, unique)
    raw_name: str
    shape: tuple[int, ...]
    dtype: DType
    quant: QuantParams | None
    buffer: int


class _Bad(Exception):
    """Internal: the file breaks a structural rule (becomes ModelFileError)."""


def load_tflite(path: str | Path) -> Graph:
    """Load a ``.tflite`` model (float, int8 or 16x8) into a MIR graph.

    Raises ModelFileError for a missing, corrupt or truncated file and one
    UnsupportedOpError listing every op the model uses that rlx-edge cannot
    import.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ModelFileError(f"{path}: cannot read ({e.strerror or e})") from None
    return load_tflite_bytes(data, name=path.stem, source=str(path))


def load_tflite_bytes(data: bytes, *, name: str = "model", source: str = "<bytes>") -> Graph:
    """Like :func:`load_tflite`, from the bytes of a model file."""
    try:
        reader = _Reader(bytes(data), source)
        return _Importer(reader, name).run()
    except (UnsupportedOpError, ModelFileError):
        raise
    except (_Bad, IRError) as e:
        raise ModelFileError(f"{source}: invalid TFLite model: {one_line(e, _MESSAGE_CHARS)}") from None
    except Exception as e:  # the generated readers raise anything on garbage
        why = one_line(f"{type(e).__name__}: {e}", _MESSAGE_CHARS)
        raise ModelFileError(f"{source}: corrupt or truncated TFLite model ({why})") from None


# reading -------------------------------------------------------------------
class _Reader:
    """Bounds-checked access to one model flatbuffer."""

    def __init__(self, data: bytes, source: str) -> None:
        self.data = data
        self.size = len(data)
        self.source = source
        if self.size < 8:
            raise _Bad(f"file is {self.size} bytes, too short for a flatbuffer")
        if data[4:8] != FILE_IDENTIFIER:
            raise _Bad(f"not a TFLite flatbuffer (identifier {data[4:8]!r}, expected {FILE_IDENTIFIER!r})")
        root = flatbuffers.encode.Get(flatbuffers.packer.uoffset, data, 0)
        if root + 4 > self.size:
            raise _Bad("root table offset points past the end of the file")
        self.model = Model.GetRootAs(data, 0)
        version = self.model.Version()
        if version != SCHEMA_VERSION:
            raise _Bad(f"schema version {version}; only version {SCHEMA_VERSION} is supported")
        if self.model.SubgraphsLength() < 1:
            raise _Bad("the model has no subgraph")
        self.sg = self.model.Subgraphs(0)
        self.n_tensors = self.count(self.sg.TensorsLength(), "tensors")
        self.n_buffers = self.count(self.model.BuffersLength(), "buffers")
        self.count(self.sg.OperatorsLength(), "operators")
        self.count(self.model.OperatorCodesLength(), "operator codes")

    def for_subgraph(self, k: int, what: str) -> _Reader:
        """This reader on subgraph ``k`` (a control-flow op's branch or body) instead of the main one."""
        if not 0 <= k < self.model.SubgraphsLength():
            raise _Bad(f"{what} refers to subgraph {k}, but the model has {self.model.SubgraphsLength()}")
        sub = copy.copy(self)
        sub.sg = self.model.Subgraphs(k)
        sub.n_tensors = sub.count(sub.sg.TensorsLength(), f"subgraph {k} tensors")
        sub.count(sub.sg.OperatorsLength(), f"subgraph {k} operators")
        return sub

    def count(self, n: int, what: str) -> int:
        # Every vector element takes at least 4 bytes, so a larger count is a lie.
        if n < 0 or 4 * n > self.size:
            raise _Bad(f"{what} count {n} does not fit in a {self.size}-byte file")
        return n

    def vector(self, table: Any, slot: int, elem: int, what: str) -> np.ndarray | None:
        """A little-endian numeric vector field as a view of the file, checked first."""
        tab = table._tab
        o = tab.Offset(slot)
        if o == 0:
            return None
        start = tab.Vector(o)
        n = tab.VectorLen(o)
        if start < 0 or n < 0 or start + n * elem > self.size:
            raise _Bad(f"{what} ({n} x {elem} bytes at {start}) runs past the end of the file ({self.size} bytes)")
        return np.frombuffer(self.data, dtype=np.dtype(f"<{'i' if elem != 1 else 'u'}{elem}"), count=n, offset=start)

    def buffer_bytes(self, index: int, what: str) -> bytes | None:
        """Raw bytes of buffer ``index`` (``None`` when empty)."""
        if not 0 <= index < self.n_buffers:
            raise _Bad(f"{what} refers to buffer {index}, but the model has {self.n_buffers}")
        buf = self.model.Buffers(index)
        raw = self.vector(buf, 4, 1, f"data of buffer {index}")
        if raw is not None and raw.size:
            return raw.tobytes()
        off, size = buf.Offset(), buf.Size()
        if off > 1 or size:  # large models keep data after the flatbuffer (offset/size)
            if off + size > self.size or off < 0:
                raise _Bad(f"buffer {index} at offset {off} with {size} bytes runs past the end of the file")
            return self.data[off : off + size]
        return None


def _ints(v: np.ndarray | None) -> list[int]:
    return [] if v is None else [int(x) for x in v]


def _some(names: list[str], n: int = 3) -> str:
    """The first ``n`` names, quoted and cut short, and how many more there are."""
    shown = ", ".join(repr(shorten(x, _NAME_CHARS)) for x in names[:n])
    return shown if len(names) <= n else f"{shown} and {len(names) - n} more"


def _named(index: int, raw: str) -> str:
    """``tensor 3 ('conv/weights')`` with a long name cut short."""
    return f"tensor {index} ({shorten(raw, _NAME_CHARS)!r})"


def _sanitize(raw: str, index: int, used: set[str]) -> str:
    """A stable, unique value name from a TFLite tensor name.

    Converter names join every fused TF op with ';'; the first one names the
    result well enough, and keeps names readable in reports and C symbols.
    """
    base = raw.split(";")[0].strip()
    base = re.sub(r"[^A-Za-z0-9_./:-]", "_", base) or f"tensor_{index}"
    name, k = base, 1
    while name in used:
        name = f"{base}_{k}"
        k += 1
    used.add(name)
    return name


# Control-flow subgraphs may nest (an IF inside a WHILE body); a file must not nest them without end.
_MAX_SUBGRAPH_DEPTH = 16


class _Importer:
    def __init__(self, reader: _Reader, name: str, within: tuple[int, ...] = (0,)) -> None:
        self.r = reader
        self.within = within  # the subgraph indices being imported, outermost first (cycles, depth)
        self.g = Graph(name)
        self.tensors: list[_TensorInfo] = []
        self.value_of: dict[int, str] = {}  # tensor index -> IR value already in the graph
        self.index_of: dict[str, int] = {}  # IR value -> tensor index (metadata)
        self.used: set[str] = set()
        self.dequantized: dict[str, str] = {}  # int8 weight -> its float copy (hybrid models)
        self.folded: dict[int, np.ndarray] = {}  # tensor index -> value of a shape-only op, folded at import
        # SVDF's variable state tensors: graph input -> the graph output holding its update (metadata["state"])
        self.state_pairs: dict[str, str] = {}

    # tensors --------------------------------------------------------------
    def read_tensors(self) -> None:
        for i in range(self.r.n_tensors):
            t = self.r.sg.Tensors(i)
            raw = (t.Name() or b"").decode("utf-8", "replace")
            shape_arr = self.r.vector(t, 4, 4, f"shape of tensor {i}")
            shape = () if shape_arr is None else tuple(int(d) for d in shape_arr)
            if len(shape) > _MAX_RANK or any(d < 0 for d in shape):
                raise _Bad(f"{_named(i, raw)} has an invalid shape {shorten(list(shape), _NAME_CHARS)}")
            ttype = t.Type()
            if TFL_TYPE_NAMES.get(ttype) == "RESOURCE":
                raise UnsupportedOpError(
                    f"{self.r.source}: {_named(i, raw)} is a resource variable (VAR_HANDLE, READ_VARIABLE,"
                    " ASSIGN_VARIABLE); rlx-edge graphs hold no mutable variables: freeze them into constants"
                )
            if ttype not in TFL_TO_DTYPE:
                raise _Bad(f"{_named(i, raw)} has unsupported element type {TFL_TYPE_NAMES.get(ttype, ttype)}")
            dtype = TFL_TO_DTYPE[ttype]
            if math.prod(shape) * dtype.numpy.itemsize > _MAX_TENSOR_BYTES:
                raise _Bad(f"{_named(i, raw)} of shape {list(shape)} would take over {_MAX_TENSOR_BYTES} bytes")
            buffer = t.Buffer()
            if not 0 <= buffer < self.r.n_buffers:
                raise _Bad(f"{_named(i, raw)} refers to buffer {buffer}, but the model has {self.r.n_buffers}")
            quant = self.read_quant(t, i, raw, shape, dtype)
            self.tensors.append(_TensorInfo("", raw, shape, dtype, quant, buffer))
        # Converters give a bias and the activation it feeds the same leading
        # name; model inputs and operator outputs claim the clean names first.
        sg = self.r.sg
        order = _ints(self.r.vector(sg, 6, 4, "subgraph inputs"))
        for k in range(sg.OperatorsLength()):
            order += _ints(self.r.vector(sg.Operators(k), 8, 4, f"outputs of operator {k}"))
        order += range(len(self.tensors))
        for i in dict.fromkeys(order):
            if 0 <= i < len(self.tensors):
                info = self.tensors[i]
                self.tensors[i] = replace(info, name=_sanitize(info.raw_name, i, self.used))

    def read_quant(self, t: Any, i: int, raw: str, shape: tuple[int, ...], dtype: DType) -> QuantParams | None:
        """The tensor's quantization, checked as TFLite Micro's kernels assume it (they do not check)."""
        q = t.Quantization()
        if q is None or not dtype.is_int:
            return None
        what = _named(i, raw)
        scale = self.r.vector(q, 8, 4, f"scales of tensor {i}")
        if scale is None or scale.size == 0:
            return None
        scale = scale.view("<f4").astype(np.float32)
        if not np.all(np.isfinite(scale)) or np.any(scale <= 0):
            bad = scale[~(np.isfinite(scale) & (scale > 0))][0]
            raise _Bad(f"{what} has quantization scale {bad}; scales must be finite and positive")
        zp_raw = self.r.vector(q, 10, 8, f"zero points of tensor {i}")
        zp = np.zeros(scale.size, np.int64) if zp_raw is None or zp_raw.size == 0 else zp_raw.astype(np.int64)
        if zp.size != scale.size:
            raise _Bad(f"{what} has {scale.size} quantization scales but {zp.size} zero points")
        if np.any(zp < dtype.min) or np.any(zp > dtype.max):
            bad_zp = int(zp[(zp < dtype.min) | (zp > dtype.max)][0])
            raise _Bad(f"{what} has zero point {bad_zp}, outside the range of {dtype} [{dtype.min}, {dtype.max}]")
        qd = int(q.QuantizedDimension())
        if scale.size == 1 and not (0 < qd < len(shape) and shape[qd] == 1):
            return QuantParams(scale, zp, storage=dtype)  # one scale is per-tensor, whatever the dimension says
        if len(shape) == 1 and shape[0] == scale.size and qd != 0:
            # A 1-D tensor has one axis to be per-channel along, whatever the field says: TFLite's
            # converter wrote the filter's dimension (3) into person_detect's biases, and TFLite
            # Micro, which never reads it for a bias, runs the model.
            qd = 0
        if not 0 <= qd < len(shape) or shape[qd] != scale.size:
            raise _Bad(f"{what}: {scale.size} scales do not match dimension {qd} of shape {list(shape)}")
        return QuantParams(scale, zp, axis=qd, storage=dtype)

    def const(self, index: int) -> np.ndarray | None:
        """The constant value of tensor ``index`` (``None`` for activations)."""
        if index in self.folded:
            return self.folded[index]
        info = self.tensors[index]
        raw = self.r.buffer_bytes(info.buffer, f"tensor {index} ({info.raw_name!r})")
        if raw is None:
            return None
        count = math.prod(info.shape)
        if info.dtype == DType.i4:  # packed two per byte
            need = (count + 1) // 2
            if len(raw) != need:
                raise _Bad(
                    f"tensor {index} ({info.raw_name!r}) has {len(raw)} bytes of int4 data, its shape needs {need}"
                )
            return unpack_int4(raw, count).reshape(info.shape)
        want = count * info.dtype.numpy.itemsize
        if len(raw) != want:  # checked before any array of that size exists
            raise _Bad(f"tensor {index} ({info.raw_name!r}) has {len(raw)} bytes of data, its shape needs {want}")
        arr = np.frombuffer(raw, dtype=info.dtype.numpy.newbyteorder("<"), count=count)
        return arr.astype(info.dtype.numpy).reshape(info.shape)

    def value(self, index: int) -> str:
        """The IR value for tensor ``index``, adding constants as params on first use."""
        if index in self.value_of:
            return self.value_of[index]
        if not 0 <= index < len(self.tensors):
            raise _Bad(f"operator refers to tensor {index}, but the subgraph has {len(self.tensors)}")
        arr = self.const(index)
        if arr is None:
            raise _Bad(f"tensor {index} ({self.tensors[index].raw_name!r}) is read before any operator writes it")
        info = self.tensors[index]
        self.g.param(info.name, arr, quant=info.quant, dtype=info.dtype)  # the dtype: i4 is held in int8
        self.bind(index, info.name)
        return info.name

    def bind(self, index: int, name: str) -> None:
        self.value_of[index] = name
        self.index_of[name] = index

    # the whole model ------------------------------------------------------
    def run(self) -> Graph:
        self.read_tensors()
        ops = [self.describe(i) for i in range(self.r.sg.OperatorsLength())]
        self.check_supported(ops)
        sg = self.r.sg
        for i in _ints(self.r.vector(sg, 6, 4, "subgraph inputs")):
            info = self.tensor(int(i))
            if self.r.buffer_bytes(info.buffer, f"input {info.raw_name!r}") is not None:
                continue  # a constant listed as an input is a parameter, not a model input
            self.g.input(info.name, info.shape, info.dtype, quant=info.quant)
            self.bind(int(i), info.name)
        for op in ops:
            if op.opname in CUSTOM_OPS:
                _CUSTOM_CONVERTERS[op.opname](self, op)
            else:
                _CONVERTERS.get(op.opname, _plain)(self, op)
        for i in _ints(self.r.vector(sg, 8, 4, "subgraph outputs")):
            self.g.output(self.value(int(i)))
        if self.state_pairs and len(self.within) > 1:
            raise UnsupportedOpError(
                f"{self.r.source}: variable tensors (SVDF, LSTM state) inside a WHILE or IF subgraph"
            )
        if self.state_pairs:  # after the model's own outputs, in operator order
            self.g.output(*self.state_pairs.values())
            self.g.metadata["state"] = dict(self.state_pairs)
        # every rule a later stage (ours or TFLite Micro's) relies on, before anyone runs the graph
        verify(self.g)
        check_quantized(self.g, narrow_is_quantized=True)
        check_sizes(self.g)
        self.g.metadata["source_format"] = "tflite"
        self.g.metadata["tflite_tensor_index"] = dict(self.index_of)
        return self.g

    def subgraph(self, k: int, what: str) -> Graph:
        """Subgraph ``k`` of the model as a closed IR graph (a branch or loop body of ``what``)."""
        if k in self.within:
            raise _Bad(f"{what} refers to subgraph {k}, which contains it (recursion)")
        if len(self.within) > _MAX_SUBGRAPH_DEPTH:
            raise _Bad(f"{what}: subgraphs nested deeper than {_MAX_SUBGRAPH_DEPTH}")
        sub = self.r.for_subgraph(k, what)
        name = (sub.sg.Name() or b"").decode("utf-8", "replace") or f"subgraph{k}"
        return _Importer(sub, _sanitize(name, k, set()), (*self.within, k)).run()

    def emit_all(self, op: _Op, irop: str, inputs: list[str | None], attrs: dict[str, Any]) -> None:
        """Add the node computing all of ``op``'s output tensors, checked against the file."""
        infos = [self.tensors[o] for o in op.outputs]
        names, quants = [i.name for i in infos], [i.quant for i in infos]
        outs = self.g.add_node(irop, inputs, attrs, name=infos[0].name, out_names=names, out_quant=quants)
        for k, (index, info, out) in enumerate(zip(op.outputs, infos, outs)):
            t = out.type
            if tuple(t.shape) != info.shape or t.dtype != info.dtype:
                raise _Bad(
                    f"operator {op.index} ({op.opname}) output {k} {_named(index, info.raw_name)} is"
                    f" {info.dtype}{list(info.shape)} in the file, but its subgraphs give {t.dtype}{list(t.shape)}"
                )
            self.bind(index, info.name)

    def tensor(self, index: int) -> _TensorInfo:
        if not 0 <= index < len(self.tensors):
            raise _Bad(f"reference to tensor {index}, but the subgraph has {len(self.tensors)}")
        return self.tensors[index]

    def describe(self, i: int) -> _Op:
        op = self.r.sg.Operators(i)
        idx = op.OpcodeIndex()
        if not 0 <= idx < self.r.model.OperatorCodesLength():
            raise _Bad(f"operator {i} uses opcode index {idx}, but the model has {self.r.model.OperatorCodesLength()}")
        oc = self.r.model.OperatorCodes(idx)
        # deprecated_builtin_code holds codes < 127; builtin_code holds all (newer files)
        code = max(int(oc.BuiltinCode()), int(oc.DeprecatedBuiltinCode()))
        if code == OP_CODES["CUSTOM"]:
            opname = f"CUSTOM:{(oc.CustomCode() or b'?').decode('utf-8', 'replace')}"
        else:
            opname = OP_NAMES.get(code, f"BUILTIN_{code}")
        ins = self.r.vector(op, 6, 4, f"inputs of operator {i}")
        outs = self.r.vector(op, 8, 4, f"outputs of operator {i}")
        inputs = [] if ins is None else [int(v) for v in ins]
        outputs = [] if outs is None else [int(v) for v in outs]
        for t in (*inputs, *outputs):
            if t != -1:
                self.tensor(t)
        where = f"operator {i} ({shorten(opname, _NAME_CHARS)})"
        if (not outputs and opname != "CALL_ONCE") or -1 in outputs:  # CALL_ONCE runs a subgraph for effects
            raise _Bad(f"{where} has no output tensor")
        for t in outputs:
            if self.r.buffer_bytes(self.tensors[t].buffer, _named(t, self.tensors[t].raw_name)) is not None:
                raise _Bad(f"{where} writes {_named(t, self.tensors[t].raw_name)}, which holds constant data")
        self.check_options(op, opname, where)
        return _Op(i, opname, inputs, outputs, op, self.tensors[outputs[0]].name if outputs else f"operator_{i}")

    def check_options(self, op: Any, opname: str, where: str) -> None:
        """The options union must hold the op's own table: TFLite Micro reads it without asking."""
        kind = int(op.BuiltinOptionsType())
        if kind not in _OPTION_TYPES:
            raise _Bad(f"{where} has options of unknown type {kind}")
        declared = BUILTINS.get(opname)
        table = None if declared is None else declared.options
        required = declared is not None and declared.options_required
        if table is None or kind == BuiltinOptions.NONE:
            if required:
                raise _Bad(f"{where} lacks its {table} (strides, padding)")
            return
        if _OPTION_TYPES[kind] != table:
            raise _Bad(f"{where} has options of type {_OPTION_TYPES[kind]}, expected {table}")
        if op.BuiltinOptions() is None and required:
            raise _Bad(f"{where} lacks its {table} (strides, padding)")

    def check_supported(self, ops: list[_Op]) -> None:
        """Collect every unsupported op (type and feature) before converting anything."""
        bad: dict[str, list[str]] = {}
        for op in ops:
            if op.opname in CUSTOM_OPS:
                reason: str | None = _check_custom(self, op)
            elif op.opname not in BUILTINS:
                reason = op.opname
            else:
                reason = _check(self, op)
                act = _fused_activation(op)
                if reason is None and act is not None and act not in ACT_TO_IR:
                    reason = f"{op.opname} with fused {ACT_NAMES.get(act, act)}"
            if reason is not None:
                bad.setdefault(reason, []).append(op.name)
        if bad:
            parts = [f"{shorten(k, _NAME_CHARS)} (at {_some(v)})" for k, v in bad.items()]
            raise UnsupportedOpError(f"{self.r.source}: {len(bad)} unsupported TFLite op type(s): {'; '.join(parts)}")

    # emitting -------------------------------------------------------------
    def emit(self, op: _Op, irop: str, inputs: list[str | None], attrs: dict[str, Any]) -> str:
        """Add the node computing ``op``'s (single) output tensor, checked against the file."""
        out_index = op.outputs[0]
        info = self.tensors[out_index]
        (out,) = self.g.add_node(irop, inputs, attrs, name=info.name, out_quant=info.quant)
        t = out.type
        if tuple(t.shape) != info.shape or t.dtype != info.dtype:
            raise _Bad(
                f"operator {op.index} ({op.opname}) output {_named(out_index, info.raw_name)} is"
                f" {info.dtype}{list(info.shape)}"
                f" in the file, but its inputs give {t.dtype}{list(t.shape)}"
            )
        self.bind(out_index, info.name)
        return info.name

    def helper(self, op: _Op, irop: str, inputs: list[str | None], attrs: dict[str, Any], suffix: str, quant) -> str:
        """A node the IR needs but TFLite folds into ``op`` (e.g. FC's flatten)."""
        name = _sanitize(f"{op.name}/{suffix}", -1, self.used)
        self.g.add_node(irop, inputs, attrs, name=name, out_quant=quant)
        return name

    def weights(self, op: _Op) -> tuple[str | None, str | None, str | None]:
        """Input, weights and bias of a conv / FC op.

        Hybrid ("dynamic range") models pair float activations with int8
        weights. Their float meaning is the dequantized weights; an explicit
        dequantize node keeps the int8 data and scale exact, and is what
        TFLite Micro (which refuses hybrid kernels) can run after export.
        """
        x, w, b = self.x(op, 0), self.x(op, 1), self.x(op, 2, optional=True)
        if x is not None and self.g.types[x].dtype.is_float:
            w, b = self.as_float(w), self.as_float(b)
        return x, w, b

    def as_float(self, v: str | None) -> str | None:
        if v is None or self.g.types[v].dtype.is_float or self.g.types[v].quant is None:
            return v
        if v not in self.dequantized:
            name = _sanitize(f"{v}/dequantized", -1, self.used)
            self.g.add_node("dequantize", [v], {"dtype": DType.f32}, name=name)
            self.dequantized[v] = name
        return self.dequantized[v]

    def x(self, op: _Op, j: int, *, optional: bool = False) -> str | None:
        """Input ``j`` of ``op`` as an IR value (None when an optional input is absent)."""
        if j >= len(op.inputs) or op.inputs[j] == -1:
            if optional:
                return None
            raise _Bad(f"operator {op.index} ({op.opname}) lacks its input {j}")
        return self.value(op.inputs[j])

    def const_input(self, op: _Op, j: int, what: str) -> np.ndarray:
        if j >= len(op.inputs) or op.inputs[j] == -1:
            raise _Bad(f"operator {op.index} ({op.opname}) lacks its {what} input")
        arr = self.const(op.inputs[j])
        if arr is None:
            raise _UnsupportedFeature(f"{op.opname} with a computed (non-constant) {what}")
        return arr

    def shape_of(self, op: _Op, j: int) -> tuple[int, ...]:
        if j >= len(op.inputs) or op.inputs[j] == -1:
            raise _Bad(f"operator {op.index} ({op.opname}) lacks its input {j}")
        return self.tensors[op.inputs[j]].shape


class _UnsupportedFeature(Exception):
    """Internal: a check found an op feature rlx-edge cannot import."""


@dataclass
class _Op:
    index: int
    opname: str
    inputs: list[int]
    outputs: list[int]
    raw: Any
    name: str  # the IR name of its first output

    def options(self) -> Any:
        """The op's builtin options table, or None when the file omits it (all defaults).

        :meth:`_Importer.describe` has checked that the union holds the op's own table.
        """
        declared = BUILTINS.get(self.opname)
        table = None if declared is None else declared.options
        tab = self.raw.BuiltinOptions()
        if table is None or tab is None or self.raw.BuiltinOptionsType() == BuiltinOptions.NONE:
            return None  # TFLite reads a union by its type: no type, no table
        opts = getattr(schema_module(table), table)()
        opts.Init(tab.Bytes, tab.Pos)
        return opts

    @property
    def builtin(self) -> Builtin:
        return BUILTINS[self.opname]

    def option(self, name: str) -> Any:
        """A declared option field: the file's value, or the declared default when it has no table."""
        return self._read(self.builtin.field(name))

    def attrs(self) -> dict[str, Any]:
        """The IR attributes the builtin's declared option fields carry."""
        return self.builtin.attrs(self._read)

    def _read(self, field: OptionField) -> Any:
        return _opt(self, field.name, field.default)


def _opt(op: _Op, field: str, default: Any) -> Any:
    o = op.options()
    return default if o is None else getattr(o, field)()


def _fused_activation(op: _Op) -> int | None:
    """The fused activation code, for any op whose options table has one (declared as a field or not)."""
    declared = BUILTINS.get(op.opname)
    table = None if declared is None else declared.options
    if table is None or not hasattr(getattr(schema_module(table), table), "FusedActivationFunction"):
        return None
    if op.opname == "UNIDIRECTIONAL_SEQUENCE_LSTM":
        return None  # there the field names the cell gate's nonlinearity, which the op's check reads
    return int(_opt(op, "FusedActivationFunction", 0))


# converters ------------------------------------------------------------------
# A declared builtin (_tflite_ops) without a converter here becomes its IR op with
# its inputs and declared attributes (_plain). A check says why an op's use in a
# file cannot be imported (None when it can), before anything is converted.
_Converter = Callable[[_Importer, _Op], None]
_Check = Callable[[_Importer, _Op], "str | None"]
_CONVERTERS: RuleTable[_Converter] = RuleTable("tflite import", keys=BUILTINS, what="builtin operator")
_CHECKS: RuleTable[_Check] = RuleTable("tflite import checks", keys=BUILTINS, what="builtin operator")


def _check(imp: _Importer, op: _Op) -> str | None:
    check = _CHECKS.get(op.opname)
    try:
        return check(imp, op) if check else None
    except _UnsupportedFeature as e:
        return str(e)


def _plain(imp: _Importer, op: _Op) -> None:
    irop = op.builtin.ir_ops[0]
    specs = get_op(irop).inputs
    if any(spec.startswith("*") for spec in specs):
        xs = [imp.x(op, j) for j in range(len(op.inputs))]
    else:
        xs = [imp.x(op, j, optional=spec.endswith("?")) for j, spec in enumerate(specs)]
    imp.emit(op, irop, xs, op.attrs())


@_CONVERTERS.rule("WHILE")
def _while(imp: _Importer, op: _Op) -> None:
    opts = op.options()
    if opts is None:
        raise _Bad(f"operator {op.index} (WHILE) lacks its WhileOptions (the cond and body subgraphs)")
    what = f"operator {op.index} (WHILE)"
    cond = imp.subgraph(int(opts.CondSubgraphIndex()), what)
    body = imp.subgraph(int(opts.BodySubgraphIndex()), what)
    imp.emit_all(op, "while_", [imp.x(op, j) for j in range(len(op.inputs))], {"cond": cond, "body": body})


@_CHECKS.rule("CALL_ONCE")
def _call_once(imp: _Importer, op: _Op) -> str | None:
    """The init subgraph runs once, for its effects on resource variables, which rlx-edge refuses when it
    reads their tensors: imported (so its ops are checked) and inlined as what it is then, nothing."""
    opts = op.options()
    if opts is None or op.inputs or op.outputs:
        raise _Bad(f"operator {op.index} (CALL_ONCE) needs its CallOnceOptions and no inputs or outputs")
    init = imp.subgraph(int(opts.InitSubgraphIndex()), f"operator {op.index} (CALL_ONCE)")
    if init.inputs or init.outputs:
        return "CALL_ONCE of a subgraph with inputs or outputs"
    return None


@_CONVERTERS.rule("IF")
def _if(imp: _Importer, op: _Op) -> None:
    opts = op.options()
    if opts is None:
        raise _Bad(f"operator {op.index} (IF) lacks its IfOptions (the then and else subgraphs)")
    what = f"operator {op.index} (IF)"
    then_ = imp.subgraph(int(opts.ThenSubgraphIndex()), what)
    else_ = imp.subgraph(int(opts.ElseSubgraphIndex()), what)
    xs = [imp.x(op, j) for j in range(len(op.inputs))]
    imp.emit_all(op, "if_", xs, {"then_branch": then_, "else_branch": else_})


@_CHECKS.rule("CONV_2D", "DEPTHWISE_CONV_2D", "AVERAGE_POOL_2D", "MAX_POOL_2D")
def _check_padding(imp: _Importer, op: _Op) -> str | None:
    pad = op.option("Padding")
    return None if pad in PADDING_TO_IR else f"{op.opname} with padding code {pad}"


@_CONVERTERS.rule("CONV_2D")
def _conv(imp: _Importer, op: _Op) -> None:
    x, w, b = imp.weights(op)
    c = imp.g.types[x].shape[3]
    ig = imp.g.types[w].shape[3]
    attrs = op.attrs()
    attrs["groups"] = c // ig if ig and c % ig == 0 else 1
    imp.emit(op, "conv2d", [x, w, b], attrs)


@_CONVERTERS.rule("DEPTHWISE_CONV_2D")
def _depthwise(imp: _Importer, op: _Op) -> None:
    x, w, b = imp.weights(op)
    c = imp.g.types[x].shape[3]
    cm = imp.g.types[w].shape[3]
    # Some converters write depth_multiplier 0 or a stale value; TFLite itself
    # derives it from the shapes, and so do we.
    attrs = op.attrs()
    if c and cm % c == 0:
        attrs["depth_multiplier"] = cm // c
    imp.emit(op, "depthwise_conv2d", [x, w, b], attrs)


@_CHECKS.rule("FULLY_CONNECTED")
def _check_fc(imp: _Importer, op: _Op) -> str | None:
    fmt = op.option("WeightsFormat")
    if fmt != 0:
        return "FULLY_CONNECTED with shuffled weights"
    if len(op.inputs) > 1 and op.inputs[1] != -1 and len(imp.tensors[op.inputs[1]].shape) != 2:
        return "FULLY_CONNECTED with weights of rank != 2"
    return None


@_CONVERTERS.rule("FULLY_CONNECTED")
def _fc(imp: _Importer, op: _Op) -> None:
    x, w, b = imp.weights(op)
    keep = bool(op.option("KeepNumDims"))
    xt = imp.g.types[x]
    if not keep and xt.rank != 2:
        # TFLite flattens the input to [-1, I] when keep_num_dims is false.
        n_in = int(imp.g.types[w].shape[1])
        total = math.prod(int(d) for d in xt.shape)
        if n_in == 0 or total % n_in:
            raise _Bad(f"FULLY_CONNECTED {op.name!r}: {total} input elements are not a multiple of {n_in}")
        x = imp.helper(op, "reshape", [x], {"shape": (total // n_in, n_in)}, "flatten", xt.quant)
    imp.emit(op, "fully_connected", [x, w, b], op.attrs())


@_CONVERTERS.rule("RESHAPE")
def _reshape(imp: _Importer, op: _Op) -> None:
    x = imp.x(op, 0)
    shape: list[int] | None = None
    if len(op.inputs) > 1 and op.inputs[1] != -1:
        arr = imp.const(op.inputs[1])
        if arr is not None:
            shape = [int(v) for v in arr.reshape(-1)]
    if shape is None:
        o = op.options()
        ns = None if o is None else imp.r.vector(o, 4, 4, f"new_shape of operator {op.index}")
        if ns is not None and ns.size:
            shape = [int(v) for v in ns]
    out_shape = imp.tensors[op.outputs[0]].shape
    if shape is None:
        shape = list(out_shape)  # neither given: the output tensor's static shape decides
    total = math.prod(int(d) for d in imp.g.types[x].shape)
    if shape.count(-1) == 1:
        known = math.prod(d for d in shape if d != -1)
        if known <= 0 or total % known:
            raise _Bad(f"RESHAPE {op.name!r}: cannot reshape {total} elements to {shape}")
        shape[shape.index(-1)] = total // known
    if any(d < 0 for d in shape) or math.prod(shape) != total:
        raise _Bad(f"RESHAPE {op.name!r}: cannot reshape {total} elements to {shape}")
    imp.emit(op, "reshape", [x], {"shape": tuple(shape)})


@_CONVERTERS.rule("QUANTIZE")
def _quantize(imp: _Importer, op: _Op) -> None:
    x = imp.x(op, 0)
    irop = "quantize" if imp.g.types[x].dtype.is_float else "requantize"
    imp.emit(op, irop, [x], {"dtype": imp.tensors[op.outputs[0]].dtype})


@_CONVERTERS.rule("DEQUANTIZE")
def _dequantize(imp: _Importer, op: _Op) -> None:
    x = imp.x(op, 0)
    xt = imp.g.types[x]
    if xt.dtype.is_float:  # float16 weights stored compactly: a plain cast
        imp.emit(op, "cast", [x], {"dtype": imp.tensors[op.outputs[0]].dtype})
    else:
        imp.emit(op, "dequantize", [x], {"dtype": imp.tensors[op.outputs[0]].dtype})


@_CONVERTERS.rule("CAST")
def _cast(imp: _Importer, op: _Op) -> None:
    imp.emit(op, "cast", [imp.x(op, 0)], {"dtype": imp.tensors[op.outputs[0]].dtype})


@_CHECKS.rule("PAD")
def _check_pad(imp: _Importer, op: _Op) -> str | None:
    imp.const_input(op, 1, "paddings")
    return None


@_CONVERTERS.rule("PAD")
def _pad(imp: _Importer, op: _Op) -> None:
    pads = imp.const_input(op, 1, "paddings")
    rank = len(imp.shape_of(op, 0))
    if pads.shape != (rank, 2):
        raise _Bad(f"PAD {op.name!r}: paddings have shape {list(pads.shape)}, expected [{rank}, 2]")
    imp.emit(op, "pad", [imp.x(op, 0)], {"pads": tuple(int(v) for v in pads.reshape(-1)), "value": 0.0})


@_CHECKS.rule("CONCATENATION")
def _check_concat(imp: _Importer, op: _Op) -> str | None:
    act = _fused_activation(op)
    return f"CONCATENATION with fused {ACT_NAMES.get(act, act)}" if act else None


@_CHECKS.rule("MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_ALL")
def _check_mean(imp: _Importer, op: _Op) -> str | None:
    imp.const_input(op, 1, "axes")
    return None


@_CONVERTERS.rule("MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_ALL")
def _mean(imp: _Importer, op: _Op) -> None:
    axes = tuple(int(v) for v in imp.const_input(op, 1, "axes").reshape(-1))
    imp.emit(op, op.builtin.ir_ops[0], [imp.x(op, 0)], {"axes": axes, **op.attrs()})


@_CHECKS.rule("CUMSUM")
def _check_cumsum(imp: _Importer, op: _Op) -> str | None:
    if imp.const_input(op, 1, "axis").size != 1:
        return "CUMSUM with an axis input that is not one value"
    return None


@_CONVERTERS.rule("CUMSUM")
def _cumsum(imp: _Importer, op: _Op) -> None:
    (axis,) = _const_ints(imp, op, 1, "axis")
    imp.emit(op, "cumsum", [imp.x(op, 0)], {"axis": axis, **op.attrs()})


@_CHECKS.rule("ARG_MAX", "ARG_MIN")
def _check_arg(imp: _Importer, op: _Op) -> str | None:
    axis = imp.const_input(op, 1, "axis")
    if axis.size != 1:
        return f"{op.opname} with {axis.size} axes (TFLite Micro takes one)"
    return None


@_CONVERTERS.rule("ARG_MAX", "ARG_MIN")
def _arg_reduce(imp: _Importer, op: _Op) -> None:
    (axis,) = _const_ints(imp, op, 1, "axis")
    dtype = imp.tensors[op.outputs[0]].dtype  # OutputType repeats it
    imp.emit(op, op.builtin.ir_ops[0], [imp.x(op, 0)], {"axis": axis, "keepdims": False, "dtype": dtype})


@_CHECKS.rule("TRANSPOSE")
def _check_transpose(imp: _Importer, op: _Op) -> str | None:
    imp.const_input(op, 1, "permutation")
    return None


@_CONVERTERS.rule("TRANSPOSE")
def _transpose(imp: _Importer, op: _Op) -> None:
    perm = tuple(int(v) for v in imp.const_input(op, 1, "permutation").reshape(-1))
    imp.emit(op, "transpose", [imp.x(op, 0)], {"perm": perm})


# BATCH_MATMUL: an adjoint flag transposes its operand's last two axes first (exact in any type)
@_CHECKS.rule("BATCH_MATMUL")
def _check_batch_matmul(imp: _Importer, op: _Op) -> str | None:
    ranks = [len(imp.shape_of(op, j)) for j in (0, 1)]
    if not all(2 <= r <= 5 for r in ranks):
        return f"BATCH_MATMUL of ranks {ranks[0]} and {ranks[1]} (TFLite Micro takes 2 to 5)"
    dtypes = {imp.tensors[op.inputs[j]].dtype for j in (0, 1)}
    if len(dtypes) > 1:
        return "hybrid BATCH_MATMUL (float and int8 operands); TFLite Micro has no hybrid kernel"
    return None


@_CONVERTERS.rule("BATCH_MATMUL")
def _batch_matmul(imp: _Importer, op: _Op) -> None:
    xs = []
    for j, flag in enumerate(("AdjX", "AdjY")):
        v = imp.x(op, j)
        if op.option(flag):
            r = len(imp.shape_of(op, j))
            perm = (*range(r - 2), r - 1, r - 2)
            v = imp.helper(op, "transpose", [v], {"perm": perm}, flag.lower(), imp.g.types[v].quant)
        xs.append(v)
    imp.emit(op, "matmul", xs, {})


@_CHECKS.rule("STRIDED_SLICE")
def _check_strided_slice(imp: _Importer, op: _Op) -> str | None:
    o = op.options()
    if o is not None and (o.EllipsisMask() or o.NewAxisMask()):
        return "STRIDED_SLICE with ellipsis or new-axis masks"
    for j, what in ((1, "begin"), (2, "end"), (3, "strides")):
        imp.const_input(op, j, what)
    if np.any(imp.const_input(op, 3, "strides") == 0):
        return "STRIDED_SLICE with a zero stride"
    return None


@_CONVERTERS.rule("STRIDED_SLICE")
def _strided_slice(imp: _Importer, op: _Op) -> None:
    o = op.options()
    begin_mask = o.BeginMask() if o is not None else 0
    end_mask = o.EndMask() if o is not None else 0
    shrink = o.ShrinkAxisMask() if o is not None else 0
    offset = bool(o.Offset()) if o is not None else False
    shape = imp.shape_of(op, 0)
    begin_t = [int(v) for v in imp.const_input(op, 1, "begin").reshape(-1)]
    end_t = [int(v) for v in imp.const_input(op, 2, "end").reshape(-1)]
    strides_t = [int(v) for v in imp.const_input(op, 3, "strides").reshape(-1)]
    if not len(begin_t) == len(end_t) == len(strides_t) <= len(shape):
        raise _Bad(f"STRIDED_SLICE {op.name!r}: begin/end/strides lengths do not match the input rank")
    begin, end, strides = [], [], []
    for i, d in enumerate(shape):
        if i >= len(begin_t):  # unspecified trailing axes are taken whole
            begin.append(0)
            end.append(d)
            strides.append(1)
            continue
        b, e, s = begin_t[i], end_t[i], strides_t[i]
        if offset:
            e = b + e
        # TensorFlow's bounds: negatives count from the end, then clamp to [0, d] walking
        # forwards or to [-1, d - 1] walking backwards (-1: before the first element)
        lo, hi = (0, d) if s > 0 else (-1, d - 1)
        b = (lo if s > 0 else hi) if begin_mask >> i & 1 else min(max(b + d if b < 0 else b, lo), hi)
        e = (hi if s > 0 else lo) if end_mask >> i & 1 else min(max(e + d if e < 0 else e, lo), hi)
        if shrink >> i & 1:
            b = min(max(begin_t[i] + d if begin_t[i] < 0 else begin_t[i], 0), d - 1)
            e, s = b + 1, 1
        if s < 0 and b < 0:  # nothing left to walk: an empty slice
            b, e = 0, 0
        elif s < 0 and e < 0:  # the IR (numpy) spells "through the first element" with an open end
            e = -_OPEN - 1
        begin.append(b)
        end.append(max(e, b) if s > 0 else e)
        strides.append(s)
    attrs = {"begin": tuple(begin), "end": tuple(end), "strides": tuple(strides)}
    x = imp.x(op, 0)
    if shrink:
        info = imp.tensors[op.outputs[0]]
        y = imp.helper(op, "slice", [x], attrs, "slice", info.quant)
        imp.emit(op, "reshape", [y], {"shape": info.shape})
    else:
        imp.emit(op, "slice", [x], attrs)


# data movement -------------------------------------------------------------------------
# slice's "to the end" bound (the IR follows numpy slices; ir/ops/layout.py)
_OPEN = 2**31 - 1


def _emit_outputs(imp: _Importer, op: _Op, irop: str, inputs: list[str | None], attrs: dict[str, Any]) -> None:
    """Like :meth:`_Importer.emit` for an op with several outputs (split, unpack), each checked."""
    infos = [imp.tensors[i] for i in op.outputs]
    outs = imp.g.add_node(
        irop, inputs, attrs, name=infos[0].name, out_quant=[i.quant for i in infos], out_names=[i.name for i in infos]
    )
    for index, info, t in zip(op.outputs, infos, outs):
        if tuple(t.shape) != info.shape or t.dtype != info.dtype:
            raise _Bad(
                f"operator {op.index} ({op.opname}) output {_named(index, info.raw_name)} is"
                f" {info.dtype}{list(info.shape)} in the file, but its inputs give {t.dtype}{list(t.shape)}"
            )
        imp.bind(index, info.name)


@_CONVERTERS.rule("SOFTMAX")
def _softmax(imp: _Importer, op: _Op) -> None:
    """TFLite Micro's int8 softmax may write int16 (the output's type says so)."""
    x = imp.x(op, 0)
    wide = imp.g.types[x].dtype == DType.i8 and imp.tensors[op.outputs[0]].dtype == DType.i16
    imp.emit(op, "softmax", [x], {**op.attrs(), "out_dtype": "i16" if wide else "same"})


# SVDF -------------------------------------------------------------------------------------------
# TFLite keeps SVDF's activation state in a variable tensor the op rewrites on every invoke. The IR
# is functional (ir/ops/recurrent.py): the variable tensor becomes a graph input, the op's second
# output its update, which becomes a graph output after the model's own; metadata["state"] pairs
# them so a caller threads one invoke's output into the next invoke's input. TFLite Micro starts
# the state at zero (int16) or the zero point (int8); the update maps to the variable tensor's index,
# which holds it after an invoke, for comparisons with TFLite Micro.
@_CHECKS.rule("SVDF")
def _check_svdf(imp: _Importer, op: _Op) -> str | None:
    if len(op.inputs) != 5 or op.inputs[4] == -1:
        raise _Bad(f"SVDF {op.name!r} needs 5 inputs (the last its state), it has {len(op.inputs)}")
    j = op.inputs[4]
    info = imp.tensors[j]
    if not imp.r.sg.Tensors(j).IsVariable() or imp.const(j) is not None:
        return "SVDF whose state is not a variable tensor"
    if j in imp.value_of:
        return f"SVDF state {shorten(info.raw_name, _NAME_CHARS)!r} shared by several operators"
    imp.value_of[j] = ""  # claimed here, the checks run in operator order; the converter binds it
    return None


@_CONVERTERS.rule("SVDF")
def _svdf(imp: _Importer, op: _Op) -> None:
    x, wf, wt, b = imp.x(op, 0), imp.x(op, 1), imp.x(op, 2), imp.x(op, 3, optional=True)
    if imp.g.types[x].dtype.is_float:  # hybrid file: the weights' float meaning (as weights() does)
        wf, wt, b = imp.as_float(wf), imp.as_float(wt), imp.as_float(b)
    _stateful_node(imp, op, "svdf", "SVDF", (4,), lambda states: [x, wf, wt, *states, b])


def _stateful_node(
    imp: _Importer, op: _Op, kind: str, builtin: str, slots: tuple[int, ...], inputs: Callable[[list[str]], list]
) -> None:
    """A stateful operator's node: each variable tensor (the op's inputs at ``slots``) becomes a graph
    input and its update a graph output after the op's own, paired in ``imp.state_pairs`` (TFLite keeps
    the variable across invokes; the caller threads the update back). ``inputs`` places the states
    among the node's inputs."""
    states, updates, quants = [], [], []
    for j in slots:
        info = imp.tensors[op.inputs[j]]
        states.append(imp.g.input(info.name, info.shape, info.dtype, quant=info.quant).name)
        imp.value_of[op.inputs[j]] = states[-1]
        updates.append(_sanitize(f"{info.name}/next", -1, imp.used))
        quants.append(info.quant)
    y_info = imp.tensors[op.outputs[0]]
    y = imp.g.add_node(
        kind, inputs(states), op.attrs(), name=y_info.name, out_quant=[y_info.quant, *quants],
        out_names=[y_info.name, *updates],
    )[0]  # fmt: skip
    if tuple(y.shape) != y_info.shape or y.dtype != y_info.dtype:
        raise _Bad(
            f"operator {op.index} ({builtin}) output {_named(op.outputs[0], y_info.raw_name)} is"
            f" {y_info.dtype}{list(y_info.shape)} in the file, but its inputs give {y.dtype}{list(y.shape)}"
        )
    imp.bind(op.outputs[0], y_info.name)
    for j, state, update in zip(slots, states, updates):
        imp.index_of[update] = op.inputs[j]
        imp.state_pairs[state] = update


# TRANSPOSE_CONV: inputs (output shape, weights, input, optional bias); the shape becomes an attribute
def _transpose_conv_shape(imp: _Importer, op: _Op) -> tuple[int, ...]:
    """The output shape: input 0 when it is a constant, else the output tensor's static shape.

    Some exporters compute input 0 (Shape -> StridedSlice -> Pack, as TFLite Micro's seanet
    integration models do); the file's output tensor then holds the same sizes, which TFLite Micro
    allocates by, so a static one stands in for it."""
    if op.inputs and op.inputs[0] != -1 and imp.const(op.inputs[0]) is None:
        shape = tuple(imp.tensors[op.outputs[0]].shape)
        if len(shape) == 4 and all(d > 0 for d in shape):
            return shape
    return tuple(_const_ints(imp, op, 0, "output shape"))


@_CHECKS.rule("TRANSPOSE_CONV")
def _check_transpose_conv(imp: _Importer, op: _Op) -> str | None:
    if len(_transpose_conv_shape(imp, op)) != 4:
        return "TRANSPOSE_CONV with an output shape that is not 4 sizes"
    return _check_padding(imp, op)


@_CONVERTERS.rule("TRANSPOSE_CONV")
def _transpose_conv(imp: _Importer, op: _Op) -> None:
    shape = _transpose_conv_shape(imp, op)
    x, w, b = imp.x(op, 2), imp.x(op, 1), imp.x(op, 3, optional=True)
    if imp.g.types[x].dtype.is_float:  # hybrid file: the weights' float meaning (as weights() does)
        w, b = imp.as_float(w), imp.as_float(b)
    imp.emit(op, "transpose_conv2d", [x, w, b], {**op.attrs(), "output_shape": shape})


# UNIDIRECTIONAL_SEQUENCE_LSTM ---------------------------------------------------------------------
# Its hidden (input 18) and cell (19) states are variable tensors, imported as SVDF's state is: each
# a graph input, its update an output of the node (ir/ops/recurrent.py). The IR op's inputs are
# TFLite's 0-8 (input, input and recurrent weights), 12-15 (gate biases), 18 and 19; TFLite Micro
# refuses the others (peephole 9-11, projection 16-17, layer norm 20-23), and so does the import.
_LSTM_TAKEN = (*range(9), *range(12, 16), 18, 19)
_LSTM_VARIANTS = {9: "peephole", 10: "peephole", 11: "peephole", 16: "projection", 17: "projection",
                  20: "layer norm", 21: "layer norm", 22: "layer norm", 23: "layer norm"}  # fmt: skip


@_CHECKS.rule("UNIDIRECTIONAL_SEQUENCE_LSTM")
def _check_lstm(imp: _Importer, op: _Op) -> str | None:
    if len(op.inputs) != 24:
        raise _Bad(f"UNIDIRECTIONAL_SEQUENCE_LSTM {op.name!r} needs 24 inputs, it has {len(op.inputs)}")
    for j, what in _LSTM_VARIANTS.items():
        if op.inputs[j] != -1:
            return f"UNIDIRECTIONAL_SEQUENCE_LSTM with {what} (input {j}), which TFLite Micro does not run"
    if any(op.inputs[j] == -1 for j in _LSTM_TAKEN):
        return "UNIDIRECTIONAL_SEQUENCE_LSTM without an input gate, a bias or a state (TFLite Micro needs them)"
    if ACT_NAMES.get(op.option("FusedActivationFunction")) != "TANH":
        return "UNIDIRECTIONAL_SEQUENCE_LSTM whose cell activation is not TANH"
    if op.option("ProjClip") or op.option("DiagonalRecurrentTensors"):
        return "UNIDIRECTIONAL_SEQUENCE_LSTM with a projection clip or diagonal recurrent weights"
    for j in (18, 19):
        info = imp.tensors[op.inputs[j]]
        if not imp.r.sg.Tensors(op.inputs[j]).IsVariable() or imp.const(op.inputs[j]) is not None:
            return "UNIDIRECTIONAL_SEQUENCE_LSTM whose state is not a variable tensor"
        if op.inputs[j] in imp.value_of:
            return f"LSTM state {shorten(info.raw_name, _NAME_CHARS)!r} shared by several operators or states"
        imp.value_of[op.inputs[j]] = ""  # claimed here; the converter binds it
    return None


@_CONVERTERS.rule("UNIDIRECTIONAL_SEQUENCE_LSTM")
def _lstm(imp: _Importer, op: _Op) -> None:
    x = imp.x(op, 0)
    consts = [imp.x(op, j) for j in _LSTM_TAKEN[1:13]]
    if imp.g.types[x].dtype.is_float:  # hybrid file: the weights' float meaning (as weights() does)
        consts = [imp.as_float(c) for c in consts]
    _stateful_node(imp, op, "lstm", "UNIDIRECTIONAL_SEQUENCE_LSTM", (18, 19), lambda states: [x, *consts, *states])


def _const_ints(imp: _Importer, op: _Op, j: int, what: str) -> list[int]:
    return [int(v) for v in imp.const_input(op, j, what).reshape(-1)]


def _need_consts(*inputs: tuple[int, str]) -> _Check:
    """A check that the inputs at these positions are constants (shapes, axes, paddings)."""

    def check(imp: _Importer, op: _Op) -> str | None:
        for j, what in inputs:
            imp.const_input(op, j, what)
        return None

    return check


_CHECKS.add("EXPAND_DIMS", _need_consts((1, "axis")))
_CHECKS.add("SPLIT", _need_consts((0, "axis")))
_CHECKS.add("SPLIT_V", _need_consts((1, "size_splits"), (2, "axis")))
_CHECKS.add("REVERSE_V2", _need_consts((1, "axes")))
_CHECKS.add("SLICE", _need_consts((1, "begin"), (2, "size")))
_CHECKS.add("SPACE_TO_BATCH_ND", _need_consts((1, "block_shape"), (2, "paddings")))
_CHECKS.add("BATCH_TO_SPACE_ND", _need_consts((1, "block_shape"), (2, "crops")))
_CHECKS.add("BROADCAST_TO", _need_consts((1, "shape")))
_CHECKS.add("RESIZE_NEAREST_NEIGHBOR", _need_consts((1, "size")))
_CHECKS.add("RESIZE_BILINEAR", _need_consts((1, "size")))


@_CONVERTERS.rule("EXPAND_DIMS")
def _expand_dims(imp: _Importer, op: _Op) -> None:
    (axis,) = _const_ints(imp, op, 1, "axis")  # TFLite takes one axis, counted in the output's rank
    imp.emit(op, "unsqueeze", [imp.x(op, 0)], {"axes": (axis,)})


@_CONVERTERS.rule("SQUEEZE")
def _squeeze(imp: _Importer, op: _Op) -> None:
    o = op.options()
    dims = None if o is None else imp.r.vector(o, 4, 4, f"squeeze_dims of operator {op.index}")
    shape = imp.shape_of(op, 0)
    axes = _ints(dims) or [i for i, d in enumerate(shape) if d == 1]  # none given: every size-1 axis
    x = imp.x(op, 0)
    if not axes:  # nothing to drop: TFLite copies the tensor, the IR's reshape is that view
        imp.emit(op, "reshape", [x], {"shape": tuple(shape)})
        return
    imp.emit(op, "squeeze", [x], {"axes": tuple(axes)})


@_CHECKS.rule("PACK")
def _check_pack(imp: _Importer, op: _Op) -> str | None:
    # TFLite Micro's PACK copies bytes whatever the parameters say; the IR's stack would rescale
    q = imp.tensors[op.outputs[0]].quant
    if any(j != -1 and imp.tensors[j].quant != q for j in op.inputs):
        return "PACK of inputs quantized unlike its output"
    return None


@_CONVERTERS.rule("PACK")
def _pack(imp: _Importer, op: _Op) -> None:
    xs = [imp.x(op, j) for j in range(len(op.inputs))]
    imp.emit(op, "stack", xs, {"axis": op.option("Axis")})


@_CONVERTERS.rule("UNPACK")
def _unpack(imp: _Importer, op: _Op) -> None:
    shape = imp.shape_of(op, 0)
    axis = int(op.option("Axis"))
    if not -len(shape) <= axis < len(shape):
        raise _Bad(f"UNPACK {op.name!r}: axis {axis} is out of range for rank {len(shape)}")
    # TFLite Micro reads num off the tensor's shape, so a file's stale Num does not matter
    _emit_outputs(imp, op, "unstack", [imp.x(op, 0)], {"axis": axis, "num": shape[axis]})


def _split_sizes(op: _Op, dim: int, sizes: list[int]) -> tuple[int, ...]:
    holes = [i for i, s in enumerate(sizes) if s == -1]
    if len(holes) == 1:
        sizes[holes[0]] = dim - (sum(sizes) + 1)
    if any(s < 0 for s in sizes) or sum(sizes) != dim:
        raise _Bad(f"{op.opname} {op.name!r}: sizes {sizes} do not split a dimension of {dim}")
    return tuple(sizes)


@_CONVERTERS.rule("SPLIT")
def _split(imp: _Importer, op: _Op) -> None:
    (axis,) = _const_ints(imp, op, 0, "axis")
    shape = imp.shape_of(op, 1)
    n = len(op.outputs)
    dim = shape[axis % len(shape)] if shape and -len(shape) <= axis < len(shape) else -1
    if dim < 0 or dim % n:
        raise _Bad(f"SPLIT {op.name!r}: axis {axis} of {list(shape)} does not split into {n} equal parts")
    _emit_outputs(imp, op, "split", [imp.x(op, 1)], {"axis": axis, "sizes": (dim // n,) * n})


@_CONVERTERS.rule("SPLIT_V")
def _split_v(imp: _Importer, op: _Op) -> None:
    (axis,) = _const_ints(imp, op, 2, "axis")
    shape = imp.shape_of(op, 0)
    if not shape or not -len(shape) <= axis < len(shape):
        raise _Bad(f"SPLIT_V {op.name!r}: axis {axis} is out of range for shape {list(shape)}")
    sizes = _split_sizes(op, shape[axis], _const_ints(imp, op, 1, "size_splits"))
    _emit_outputs(imp, op, "split", [imp.x(op, 0)], {"axis": axis, "sizes": sizes})


@_CONVERTERS.rule("REVERSE_V2")
def _reverse(imp: _Importer, op: _Op) -> None:
    shape = imp.shape_of(op, 0)
    axes = {a % len(shape) for a in _const_ints(imp, op, 1, "axes")} if shape else set()
    # a reversed axis is a slice walking it backwards from its last element
    begin = tuple(-1 if i in axes else 0 for i in range(len(shape)))
    end = tuple(-_OPEN - 1 if i in axes else _OPEN for i in range(len(shape)))
    strides = tuple(-1 if i in axes else 1 for i in range(len(shape)))
    imp.emit(op, "slice", [imp.x(op, 0)], {"begin": begin, "end": end, "strides": strides})


@_CONVERTERS.rule("SLICE")
def _slice(imp: _Importer, op: _Op) -> None:
    """``size`` elements from ``begin`` on each axis, -1 meaning through the end (tf.slice)."""
    shape = imp.shape_of(op, 0)
    begin, size = _const_ints(imp, op, 1, "begin"), _const_ints(imp, op, 2, "size")
    if not len(begin) == len(size) == len(shape):
        raise _Bad(f"SLICE {op.name!r}: begin {begin} and size {size} need one entry per axis of {list(shape)}")
    end = []
    for b, s, d in zip(begin, size, shape):
        e = d if s == -1 else b + s
        # TFLite Micro reads out of bounds for these; numpy would clamp them
        if not 0 <= b <= e <= d:
            raise _Bad(f"SLICE {op.name!r}: begin {begin} and size {size} do not fit in {list(shape)}")
        end.append(e)
    attrs = {"begin": tuple(begin), "end": tuple(end), "strides": (1,) * len(shape)}
    imp.emit(op, "slice", [imp.x(op, 0)], attrs)


@_CHECKS.rule("PADV2")
def _check_padv2(imp: _Importer, op: _Op) -> str | None:
    imp.const_input(op, 1, "paddings")
    if len(op.inputs) > 2 and op.inputs[2] != -1:
        imp.const_input(op, 2, "constant_values")
    return None


@_CONVERTERS.rule("PADV2")
def _padv2(imp: _Importer, op: _Op) -> None:
    pads = imp.const_input(op, 1, "paddings")
    rank = len(imp.shape_of(op, 0))
    if pads.shape != (rank, 2):
        raise _Bad(f"PADV2 {op.name!r}: paddings have shape {list(pads.shape)}, expected [{rank}, 2]")
    value = 0.0
    if len(op.inputs) > 2 and op.inputs[2] != -1:
        raw = imp.const_input(op, 2, "constant_values").reshape(-1)
        if raw.size != 1:
            raise _Bad(f"PADV2 {op.name!r}: constant_values has {raw.size} elements, expected 1")
        q = imp.tensors[op.inputs[2]].quant
        # the IR's fill is a real value: a quantized one is its stored value on its own grid,
        # which the pad's prepare puts back on the output's (the same grid, TFLite Micro checks)
        value = float(raw[0]) if q is None else (int(raw[0]) - int(q.zero_point[0])) * float(q.scale[0])
    imp.emit(op, "pad", [imp.x(op, 0)], {"pads": tuple(int(v) for v in pads.reshape(-1)), "value": value})


@_CHECKS.rule("MIRROR_PAD")
def _check_mirror_pad(imp: _Importer, op: _Op) -> str | None:
    imp.const_input(op, 1, "paddings")
    mode = op.option("Mode")
    return None if mode in (0, 1) else f"MIRROR_PAD with mode {mode}"


@_CONVERTERS.rule("MIRROR_PAD")
def _mirror_pad(imp: _Importer, op: _Op) -> None:
    pads = imp.const_input(op, 1, "paddings")
    rank = len(imp.shape_of(op, 0))
    if pads.shape != (rank, 2):
        raise _Bad(f"MIRROR_PAD {op.name!r}: paddings have shape {list(pads.shape)}, expected [{rank}, 2]")
    imp.emit(op, "mirror_pad", [imp.x(op, 0)], {"pads": tuple(int(v) for v in pads.reshape(-1)), **op.attrs()})


def _pairs(imp: _Importer, op: _Op, j: int, what: str, m: int) -> tuple[int, ...]:
    arr = imp.const_input(op, j, what)
    if arr.shape != (m, 2):
        raise _Bad(f"{op.opname} {op.name!r}: {what} have shape {list(arr.shape)}, expected [{m}, 2]")
    return tuple(int(v) for v in arr.reshape(-1))


@_CONVERTERS.rule("SPACE_TO_BATCH_ND")
def _space_to_batch(imp: _Importer, op: _Op) -> None:
    block = tuple(_const_ints(imp, op, 1, "block_shape"))
    pads = _pairs(imp, op, 2, "paddings", len(block))
    imp.emit(op, "space_to_batch_nd", [imp.x(op, 0)], {"block_shape": block, "pads": pads})


@_CONVERTERS.rule("BATCH_TO_SPACE_ND")
def _batch_to_space(imp: _Importer, op: _Op) -> None:
    block = tuple(_const_ints(imp, op, 1, "block_shape"))
    crops = _pairs(imp, op, 2, "crops", len(block))
    imp.emit(op, "batch_to_space_nd", [imp.x(op, 0)], {"block_shape": block, "crops": crops})


@_CONVERTERS.rule("BROADCAST_TO")
def _broadcast_to(imp: _Importer, op: _Op) -> None:
    imp.emit(op, "broadcast_to", [imp.x(op, 0)], {"shape": tuple(_const_ints(imp, op, 1, "shape"))})


@_CHECKS.rule("EMBEDDING_LOOKUP")
def _check_embedding_lookup(imp: _Importer, op: _Op) -> str | None:
    if len(op.inputs) != 2:
        raise _Bad(f"EMBEDDING_LOOKUP {op.name!r} needs 2 inputs (lookup, value), it has {len(op.inputs)}")
    value, out = imp.tensors[op.inputs[1]], imp.tensors[op.outputs[0]]
    if value.dtype != out.dtype:  # TFLite's hybrid kernel: int8 rows scaled into float
        return f"EMBEDDING_LOOKUP of {value.dtype} values into a {out.dtype} output (hybrid)"
    return None


@_CONVERTERS.rule("EMBEDDING_LOOKUP")
def _embedding_lookup(imp: _Importer, op: _Op) -> None:
    """Input 0 is the index vector, input 1 the table: the table's rows, gathered."""
    imp.emit(op, "gather", [imp.x(op, 1), imp.x(op, 0)], {"axis": 0, "batch_dims": 0})


@_CONVERTERS.rule("RESIZE_NEAREST_NEIGHBOR", "RESIZE_BILINEAR")
def _resize(imp: _Importer, op: _Op) -> None:
    size = tuple(_const_ints(imp, op, 1, "size"))
    if len(size) != 2:
        raise _Bad(f"{op.opname} {op.name!r}: size has {len(size)} values, expected 2 (height, width)")
    irop = "resize_nearest_neighbor" if op.opname == "RESIZE_NEAREST_NEIGHBOR" else "resize_bilinear"
    imp.emit(op, irop, [imp.x(op, 0)], {"size": size, **op.attrs()})


# shape-only ops ---------------------------------------------------------------------------
# SHAPE, FILL, ZEROS_LIKE and BROADCAST_ARGS compute nothing a static graph does not know at
# import: their checks (which run in operator order, before any conversion) fold each output
# to a constant that later operators and the outputs read like any constant tensor.
def _fold(imp: _Importer, op: _Op, value: np.ndarray) -> None:
    info = imp.tensors[op.outputs[0]]
    value = np.asarray(value)
    if value.shape != info.shape:
        what = f"operator {op.index} ({op.opname})"
        raise _Bad(f"{what}: output {list(info.shape)} in the file, {list(value.shape)} folded")
    imp.folded[op.outputs[0]] = value.astype(info.dtype.numpy)


def _folded(imp: _Importer, op: _Op) -> None:
    """The converter of a folded op: nothing to add; readers of its output get the constant."""


@_CHECKS.rule("SHAPE")
def _shape(imp: _Importer, op: _Op) -> str | None:
    _fold(imp, op, np.array(imp.shape_of(op, 0)))
    return None


@_CHECKS.rule("ZEROS_LIKE")
def _zeros_like(imp: _Importer, op: _Op) -> str | None:
    _fold(imp, op, np.zeros(imp.shape_of(op, 0)))  # quantized too: TFLite Micro writes stored zeros
    return None


@_CHECKS.rule("FILL")
def _fill(imp: _Importer, op: _Op) -> str | None:
    dims = [int(d) for d in imp.const_input(op, 0, "dims").reshape(-1)]
    value = imp.const_input(op, 1, "value").reshape(-1)
    if value.size != 1 or any(d < 0 for d in dims):
        raise _Bad(f"FILL {op.name!r}: a value of {value.size} elements for dims {dims}")
    q_in, q_out = imp.tensors[op.inputs[1]].quant, imp.tensors[op.outputs[0]].quant
    if q_in != q_out:
        return "FILL with a value quantized unlike its output"
    _fold(imp, op, np.full(dims, value[0]))
    return None


@_CHECKS.rule("BROADCAST_ARGS")
def _broadcast_args(imp: _Importer, op: _Op) -> str | None:
    a, b = (tuple(int(d) for d in imp.const_input(op, j, "shape").reshape(-1)) for j in (0, 1))
    try:
        shape = np.broadcast_shapes(a, b)
    except ValueError:
        raise _Bad(f"BROADCAST_ARGS {op.name!r}: shapes {list(a)} and {list(b)} do not broadcast") from None
    _fold(imp, op, np.array(shape))
    return None


for _name in ("SHAPE", "ZEROS_LIKE", "FILL", "BROADCAST_ARGS", "CALL_ONCE"):
    _CONVERTERS.add(_name, _folded)


# custom operators ------------------------------------------------------------------
# A custom operator (CUSTOM with a custom code, declared in _tflite_ops.CUSTOM_OPS) keeps its
# options in a flexbuffer map instead of a builtin table; its check and converter are here.
_CUSTOM_FLEXBUFFERS = 0  # CustomOptionsFormat.FLEXBUFFERS, the only format the schema has


def _custom_options(op: _Op) -> dict[str, Any]:
    """The flexbuffer map of ``op``'s custom options ({} when the file has none)."""
    from flatbuffers import flexbuffers

    raw = op.raw.CustomOptionsAsNumpy()
    if isinstance(raw, int) or len(raw) == 0:  # the reader gives 0 for an absent vector
        return {}
    where = f"operator {op.index} ({shorten(op.opname, _NAME_CHARS)})"
    if op.raw.CustomOptionsFormat() != _CUSTOM_FLEXBUFFERS:
        raise _Bad(f"{where}: custom options of format {op.raw.CustomOptionsFormat()}, expected flexbuffers (0)")
    try:
        options = flexbuffers.Loads(bytes(raw))
    except Exception as e:  # the flexbuffer reader raises anything on garbage
        raise _Bad(f"{where}: its custom options are not a flexbuffer ({type(e).__name__})") from None
    if not isinstance(options, dict):
        raise _Bad(f"{where}: its custom options are a flexbuffer {type(options).__name__}, expected a map")
    return options


# the keys TFLite Micro's kernel reads without a default (a file without them runs on zeros there)
_DETECTION_REQUIRED = (
    "max_detections",
    "max_classes_per_detection",
    "nms_score_threshold",
    "nms_iou_threshold",
    "num_classes",
    "y_scale",
    "x_scale",
    "h_scale",
    "w_scale",
)


def _check_custom(imp: _Importer, op: _Op) -> str | None:
    if op.opname != "CUSTOM:TFLite_Detection_PostProcess":
        return None
    options = _custom_options(op)
    missing = [k for k in _DETECTION_REQUIRED if k not in options]
    if missing:
        raise _Bad(f"operator {op.index} ({op.opname}) lacks the option(s) {', '.join(missing)}")
    if len(op.inputs) != 3 or len(op.outputs) != 4:
        raise _Bad(f"operator {op.index} ({op.opname}) has {len(op.inputs)} inputs and {len(op.outputs)} outputs;"
                   " TFLite Micro's kernel takes 3 and 4")  # fmt: skip
    per_box = options["max_classes_per_detection"]
    if per_box != 1:
        # TFLite Micro's fast NMS writes the rows of several classes per box at overlapping offsets
        return f"TFLite_Detection_PostProcess: max_classes_per_detection {per_box}"
    for j in range(3):
        t = imp.tensors[op.inputs[j]] if op.inputs[j] != -1 else None
        if t is None:
            raise _Bad(f"operator {op.index} ({op.opname}) lacks its input {j}")
        if t.dtype != DType.f32 and (t.quant is None or t.dtype not in (DType.i8, DType.u8)):
            return f"TFLite_Detection_PostProcess with a {t.dtype} input"
    return None


def _detection_postprocess(imp: _Importer, op: _Op) -> None:
    """SSD post-processing. Quantized inputs are dequantized first, as TFLite's kernel does
    (``(float(q) - zero_point) * scale``, which the ``dequantize`` op computes)."""
    custom = CUSTOM_OPS[op.opname]
    options = _custom_options(op)
    attrs: dict[str, Any] = {}
    for key, attr in custom.options:
        if attr is None or key not in options:
            continue
        kind, v = get_op(custom.ir_op).attrs[attr].kind, options[key]
        # as the kernel reads them: AsFloat (float32), AsBool, AsInt32
        attrs[attr] = float(np.float32(v)) if kind == "float" else bool(v) if kind == "bool" else int(v)
    xs = [imp.as_float(imp.x(op, j)) for j in range(3)]
    imp.emit_all(op, custom.ir_op, xs, attrs)


_CUSTOM_CONVERTERS: dict[str, _Converter] = {"CUSTOM:TFLite_Detection_PostProcess": _detection_postprocess}
