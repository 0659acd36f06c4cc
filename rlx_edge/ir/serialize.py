"""The ``.rlx`` model file: one versioned, checksummed container.

Layout (all integers little-endian)::

    offset  size  field
    0       8     magic  b"RLXEDGE\\0"
    8       4     u32 format version (FORMAT_VERSION)
    12      4     u32 reserved, 0
    16      8     u64 header length H
    24      8     u64 blob length B
    32      H     header: canonical JSON (sorted keys, compact, ASCII)
    ...           zero padding to a multiple of 16
    P       B     blob: raw little-endian arrays, each 16-byte aligned
    P+B     32    SHA-256 of every byte before it

Only magic and version are promised to keep their place across versions; the
rest is read only after the version is known. The header is a JSON object of
top-level sections plus ``"requires"``, a list of features a reader must
understand. v1 writes the ``"graph"`` section; later writers add sections
(``"program"``) that older readers ignore, and name a feature in
``"requires"`` when ignoring it would be wrong, which makes an older reader
stop with a clear error. Arrays are described in sections by
``{"offset", "nbytes", "dtype", "shape"}`` records pointing into the blob;
``dtype`` is the IR :class:`DType` name, so bf16 and i4 survive.

Model files are untrusted input (ARCHITECTURE.md): nothing here executes code
from a file, and every size is checked against the file before it is used.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from rlx_edge._io import atomic_write_bytes
from rlx_edge.errors import IRError, ModelFileError, one_line, shorten
from rlx_edge.ir.dtype import DType, from_numpy
from rlx_edge.ir.graph import STAGES, Graph, Node
from rlx_edge.ir.ops import PLUGIN_GROUP, REGISTRY, Attr
from rlx_edge.ir.plan.program import Program
from rlx_edge.ir.prepared import Prepared
from rlx_edge.ir.shape import Shape, as_shape
from rlx_edge.ir.types import QuantParams, TensorType

FORMAT_VERSION = 1
MAGIC = b"RLXEDGE\0"
ALIGN = 16
#: Features named in a file's ``"requires"`` list that this reader understands.
SUPPORTED_FEATURES: frozenset[str] = frozenset()

_PREFIX = struct.Struct("<8sIIQQ")
_DIGEST = 32
_RESERVED_KEYS = ("requires",)
_MESSAGE_CHARS = 400  # errors quote file-given names; a message stays one readable line
_NAME_CHARS = 60


# --------------------------------------------------------------------------
# public API


def dumps(graph: Graph) -> bytes:
    """Serialize ``graph`` to ``.rlx`` bytes; the same graph always gives the same bytes."""
    from rlx_edge.ir.verify import verify

    verify(graph)  # refuse to write a file that could not be loaded back
    blob = BlobWriter()
    return pack({"graph": graph_to_json(graph, blob)}, blob)


def loads(data: bytes, source: str = "<bytes>") -> Graph:
    """Read a graph from ``.rlx`` bytes, verified; ``source`` names the file in errors.

    Raises
    ------
    ModelFileError
        On a wrong magic, a newer version, a truncated or corrupt file, an
        unknown op or dtype, or a graph that breaks the IR's rules.
    """
    c = unpack(data, source)
    if "graph" not in c.sections:
        c.fail("has no graph section")
    return graph_from_json(c.sections["graph"], c)


def save(graph: Graph, path: str | os.PathLike) -> Path:
    """Write ``graph`` to ``path`` atomically (never half a file)."""
    return atomic_write_bytes(path, dumps(graph))


def load(path: str | os.PathLike) -> Graph:
    """Read and verify the graph in the ``.rlx`` file at ``path``."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise ModelFileError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ModelFileError(f"{path}: is a directory, not a model file") from None
    except OSError as e:
        raise ModelFileError(f"{path}: cannot read ({e.strerror or e})") from None
    return loads(data, str(path))


# --------------------------------------------------------------------------
# container: prefix, header, blob, digest


class BlobWriter:
    """Collects arrays for the blob and hands out their header records."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []
        self._size = 0

    def add(self, arr: np.ndarray, dtype: DType) -> dict[str, Any]:
        """Append ``arr`` (stored as ``dtype``) and return its ``{offset, nbytes, dtype, shape}`` record."""
        pad = -self._size % ALIGN
        if pad:
            self._parts.append(b"\0" * pad)
            self._size += pad
        le = np.ascontiguousarray(arr, dtype=dtype.numpy.newbyteorder("<"))
        raw = le.tobytes()
        rec = {"offset": self._size, "nbytes": len(raw), "dtype": dtype.value, "shape": [int(d) for d in arr.shape]}
        self._parts.append(raw)
        self._size += len(raw)
        return rec

    def getvalue(self) -> bytes:
        return b"".join(self._parts)


def pack(sections: dict[str, Any], blob: BlobWriter, requires: Sequence[str] = ()) -> bytes:
    """Assemble a file from JSON-safe ``sections`` and the arrays they point to in ``blob``."""
    for k in sections:
        if k in _RESERVED_KEYS:
            raise ValueError(f"{k!r} is reserved and cannot name a section")
    header = {**sections, "requires": sorted(set(requires))}
    return _pack_raw(header, blob.getvalue())


def _pack_raw(header: dict[str, Any], blob: bytes) -> bytes:
    text = json.dumps(header, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    head = text.encode("ascii")
    prefix = _PREFIX.pack(MAGIC, FORMAT_VERSION, 0, len(head), len(blob))
    pad = b"\0" * (-(len(prefix) + len(head)) % ALIGN)
    body = prefix + head + pad + blob
    return body + hashlib.sha256(body).digest()


@dataclass
class Container:
    """A checked ``.rlx`` file: its header sections and its blob."""

    source: str
    sections: dict[str, Any]
    requires: list[str]
    blob: memoryview

    def fail(self, msg: str) -> NoReturn:
        # messages quote names from the file: each cut short, the line bounded
        raise ModelFileError(f"{self.source}: {one_line(msg, _MESSAGE_CHARS)}")

    def array(self, rec: Any, what: str) -> tuple[np.ndarray, DType]:
        """The read-only array that record ``rec`` describes, checked against the blob first."""
        rec = _obj(self, rec, what)
        dt = _dtype(self, rec.get("dtype"), what)
        shape = _static_shape(self, rec.get("shape"), what)
        offset, nbytes = rec.get("offset"), rec.get("nbytes")
        if not _is_int(offset) or not _is_int(nbytes) or offset < 0 or nbytes < 0:
            self.fail(f"{what}: offset and nbytes must be non-negative integers")
        if offset % ALIGN:
            self.fail(f"{what}: offset {offset} is not {ALIGN}-byte aligned")
        count = math.prod(shape)
        if count * dt.storage_bytes != nbytes:
            self.fail(f"{what}: {nbytes} bytes do not hold {dt}{list(shape)} ({count * dt.storage_bytes} bytes)")
        if offset + nbytes > len(self.blob):
            self.fail(f"is truncated: {what} ends at blob byte {offset + nbytes} but the blob has {len(self.blob)}")
        le = dt.numpy.newbyteorder("<")
        if count == 0:  # frombuffer rejects an offset at the very end of the buffer
            arr = np.zeros(shape, dtype=le)
        else:
            arr = np.frombuffer(self.blob, dtype=le, count=count, offset=offset).reshape(shape)
        if not le.isnative:
            arr = arr.astype(dt.numpy)
        arr.flags.writeable = False
        return arr, dt


def unpack(data: bytes, source: str = "<bytes>") -> Container:
    """Check magic, version, sizes and checksum of ``data``; parse the header.

    Sections a reader does not know are returned untouched, so that code
    which understands them (or rewrites the file) can find them.
    """
    data = bytes(data)
    n = len(data)
    if n == 0:
        raise ModelFileError(f"{source}: is empty (0 bytes), not an rlx-edge model file")
    if data[: len(MAGIC)] != MAGIC[: min(n, len(MAGIC))]:
        raise ModelFileError(f"{source}: is not an rlx-edge model file (wrong magic bytes)")
    if n < 12:
        raise ModelFileError(f"{source}: is truncated ({n} bytes, shorter than the file prefix)")
    (version,) = struct.unpack_from("<I", data, 8)
    if version > FORMAT_VERSION:
        raise ModelFileError(
            f"{source} was written by rlx-edge format v{version}; this rlx-edge reads up to v{FORMAT_VERSION}"
            " — upgrade rlx-edge"
        )
    if version < 1:
        raise ModelFileError(f"{source}: declares format version {version}, which never existed (corrupt file?)")
    if n < _PREFIX.size:
        raise ModelFileError(f"{source}: is truncated ({n} bytes, shorter than the file prefix)")
    _, _, reserved, head_len, blob_len = _PREFIX.unpack_from(data, 0)
    blob_start = _PREFIX.size + head_len + (-(_PREFIX.size + head_len) % ALIGN)
    total = blob_start + blob_len + _DIGEST
    if total > n:
        raise ModelFileError(f"{source}: is truncated: its prefix declares {total} bytes but the file has {n}")
    if total < n:
        raise ModelFileError(f"{source}: is corrupt: {n - total} unexpected bytes after the end of the model")
    body = memoryview(data)[: n - _DIGEST]
    if hashlib.sha256(body).digest() != data[n - _DIGEST :]:
        raise ModelFileError(f"{source}: is corrupt: checksum mismatch (the file was damaged after it was written)")
    if reserved != 0:
        raise ModelFileError(f"{source}: reserved prefix field is {reserved}, not 0 (written by a broken writer?)")
    header = _parse_header(data[_PREFIX.size : _PREFIX.size + head_len], source)
    requires = header.pop("requires", [])
    if not isinstance(requires, list) or not all(isinstance(r, str) for r in requires):
        raise ModelFileError(f"{source}: 'requires' must be a list of feature names")
    missing = sorted(set(requires) - SUPPORTED_FEATURES)
    if missing:
        raise ModelFileError(
            f"{source}: needs feature(s) {', '.join(missing)} that this rlx-edge does not support — upgrade rlx-edge"
        )
    return Container(source, header, requires, memoryview(data)[blob_start : blob_start + blob_len])


def _parse_header(raw: bytes, source: str) -> dict[str, Any]:
    def no_dupes(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        d = dict(pairs)
        if len(d) != len(pairs):
            raise ValueError("duplicate key")
        return d

    def no_constants(name: str) -> NoReturn:
        raise ValueError(f"non-standard JSON constant {name}")

    try:
        header = json.loads(raw.decode("ascii"), object_pairs_hook=no_dupes, parse_constant=no_constants)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise ModelFileError(f"{source}: has a malformed header ({e})") from None
    if not isinstance(header, dict):
        raise ModelFileError(f"{source}: has a malformed header (not a JSON object)")
    return header


# --------------------------------------------------------------------------
# graph section


def graph_to_json(graph: Graph, blob: BlobWriter) -> dict[str, Any]:
    """The ``graph`` section of ``graph``; its params go into ``blob``."""
    where = f"graph {graph.name!r}"
    _check_json_safe(graph.metadata, f"{where}: metadata")
    values = []
    for name, t in graph.types.items():
        values.append({"name": name, "shape": list(t.shape), "dtype": t.dtype.value, "quant": _quant_json(t, name)})
    params = []
    for name, arr in graph.params.items():
        params.append({"name": name, **blob.add(arr, graph.types[name].dtype)})
    nodes = []
    for n in graph.nodes:
        opdef = REGISTRY.get(n.op)
        if opdef is None:
            raise IRError(f"node {n.name!r} ({n.op}): unknown op")
        attrs = {k: _attr_json(opdef.attrs.get(k), v) for k, v in n.attrs.items() if not isinstance(v, Graph)}
        _check_json_safe(attrs, f"node {n.name!r} ({n.op}): attributes")
        # subgraphs (control-flow ops): a graph section of their own, params in the same blob
        attrs.update({k: {"graph": graph_to_json(v, blob)} for k, v in n.attrs.items() if isinstance(v, Graph)})
        nodes.append(
            {
                "id": n.id,
                "name": n.name,
                "op": n.op,
                "inputs": list(n.inputs),
                "outputs": list(n.outputs),
                "attrs": attrs,
            }
        )
    return {
        "name": graph.name,
        "stage": graph.stage,
        "inputs": list(graph.inputs),
        "outputs": list(graph.outputs),
        "metadata": graph.metadata,
        "values": values,
        "params": params,
        "nodes": nodes,
        "next_id": graph._next_id,
        "counters": dict(graph._counters),
    }


def _named(c: Container, items: Any, kind: str, seen: dict, verb: str) -> Iterator[tuple[dict, str, str]]:
    """Each object of the graph's list of ``kind`` entries, with its name and how messages name it;
    a name already in ``seen`` (filled as the caller goes) fails as ``verb`` twice."""
    for i, e in enumerate(_list(c, items, f"graph {kind}s")):
        e = _obj(c, e, f"{kind} {i}")
        name = _str(c, e.get("name"), f"{kind} {i} name")
        what = f"{kind} {shorten(name, _NAME_CHARS)!r}"
        if name in seen:
            c.fail(f"{what} is {verb} twice")
        yield e, name, what


def graph_from_json(d: Any, c: Container, depth: int = 0) -> Graph:
    """Rebuild and verify the graph of a ``graph`` section read from container ``c``.

    ``depth`` counts the control-flow subgraphs this one is nested in.
    """
    from rlx_edge.ir.verify import check_quantized, check_sizes, verify

    d = _obj(c, d, "graph section")
    name = d.get("name")
    if not isinstance(name, str):  # Graph accepts any string, even ""
        c.fail("graph name must be a string")
    stage = d.get("stage")
    if stage not in STAGES:
        c.fail(f"graph stage {stage!r} is not one of {', '.join(STAGES)}")
    g = Graph(name, stage)
    g.metadata = _metadata(c, d.get("metadata", {}))
    for v, vname, what in _named(c, d.get("values"), "value", g.types, "declared"):
        g.types[vname] = _type(c, v, what)
    g.inputs = [_str(c, x, "graph input") for x in _list(c, d.get("inputs"), "graph inputs")]
    g.outputs = [_str(c, x, "graph output") for x in _list(c, d.get("outputs"), "graph outputs")]
    for p, pname, what in _named(c, d.get("params"), "param", g.params, "stored"):
        arr, dt = c.array(p, what)
        t = g.types.get(pname)
        if t is None or t.dtype != dt or t.shape != arr.shape:
            c.fail(f"{what}: stored as {dt}{list(arr.shape)}, which does not match its declared type")
        g.params[pname] = arr
    for i, nd in enumerate(_list(c, d.get("nodes"), "graph nodes")):
        g.nodes.append(_node(c, nd, i, depth))
    next_id = d.get("next_id")
    if not _is_int(next_id) or next_id < 0:
        c.fail("graph next_id must be a non-negative integer")
    g._next_id = next_id
    counters = _obj(c, d.get("counters", {}), "graph counters")
    if not all(_is_int(v) and v >= 0 for v in counters.values()):
        c.fail("graph counters must be non-negative integers")
    g._counters = dict(counters)
    try:
        verify(g)
        check_quantized(g)
        check_sizes(g)
    except IRError as e:
        c.fail(f"invalid graph: {one_line(e, _MESSAGE_CHARS)}")
    except Exception as e:  # an op's inference tripped over odd but well-typed input
        why = one_line(f"{type(e).__name__}: {e}", _MESSAGE_CHARS)
        raise ModelFileError(f"{c.source}: invalid graph: verification failed ({why})") from e
    return g


def _metadata(c: Container, x: Any) -> dict[str, Any]:
    """Graph metadata; the entries later stages read must have the form they assume."""
    meta = _obj(c, x, "graph metadata")
    index = meta.get("tflite_tensor_index", {})
    if not isinstance(index, dict) or not all(_is_int(i) and i >= 0 for i in index.values()):
        c.fail("graph metadata 'tflite_tensor_index' must map value names to tensor indices")
    quant = meta.get("quantization", {})
    if not isinstance(quant, dict):
        c.fail("graph metadata 'quantization' must be a JSON object")
    for key in ("values", "float_nodes"):
        entries = quant.get(key, {})
        if not isinstance(entries, dict) or not all(isinstance(v, str) for v in entries.values()):
            c.fail(f"graph metadata 'quantization.{key}' must map names to names")
    return meta


# Subgraphs nest (an if_ inside a while_ body); a hostile file must not nest them without end.
MAX_SUBGRAPH_DEPTH = 16


def _node(c: Container, nd: Any, i: int, depth: int = 0) -> Node:
    nd = _obj(c, nd, f"node {i}")
    name = _str(c, nd.get("name"), f"node {i} name")
    op = _str(c, nd.get("op"), f"node {shorten(name, _NAME_CHARS)!r} op")
    where = f"node {shorten(name, _NAME_CHARS)!r} ({shorten(op, _NAME_CHARS)})"
    opdef = REGISTRY.get(op)
    if opdef is None:
        node, unknown = shorten(name, _NAME_CHARS), shorten(op, _NAME_CHARS)
        c.fail(
            f"node {node!r} uses unknown op {unknown!r}: no installed package declares it in the {PLUGIN_GROUP}"
            " entry points; install the one that does (or a newer rlx-edge)"
        )
    nid = nd.get("id")
    if not _is_int(nid) or nid < 0:
        c.fail(f"{where}: id must be a non-negative integer")
    inputs = [
        None if x is None else _str(c, x, f"{where} input") for x in _list(c, nd.get("inputs"), f"{where} inputs")
    ]
    outputs = [_str(c, x, f"{where} output") for x in _list(c, nd.get("outputs"), f"{where} outputs")]
    attrs = _obj(c, nd.get("attrs", {}), f"{where} attributes")
    for k, spec in opdef.attrs.items():
        if spec.kind == "graph" and k in attrs:
            if depth >= MAX_SUBGRAPH_DEPTH:
                c.fail(f"{where}: subgraphs nested deeper than {MAX_SUBGRAPH_DEPTH}")
            sub = _obj(c, attrs[k], f"{where} subgraph {k}")
            try:
                attrs = {**attrs, k: graph_from_json(sub.get("graph"), c, depth + 1)}
            except ModelFileError as e:  # name the node the subgraph belongs to
                msg = str(e).removeprefix(f"{c.source}: ").removeprefix("invalid graph: ")
                c.fail(f"{where}: subgraph {k}: {msg}")
    try:
        norm = opdef.normalize_attrs(attrs, where)
    except IRError as e:
        c.fail(str(e))
    return Node(nid, name, op, inputs, outputs, norm)


def _type(c: Container, v: dict, what: str) -> TensorType:
    shape = _shape(c, v.get("shape"), what)
    dt = _dtype(c, v.get("dtype"), what)
    q = v.get("quant")
    quant = None if q is None else _quant(c, q, what)
    try:
        return TensorType(shape, dt, quant)
    except IRError as e:
        c.fail(f"{what}: {e}")


def _quant_json(t: TensorType, name: str) -> dict[str, Any] | None:
    if t.quant is None:
        return None
    if not np.all(np.isfinite(t.quant.scale)):
        raise IRError(f"value {name!r}: quantization scale is not finite; such a graph cannot be saved")
    # to_json writes float32 scales as float64 numbers, which JSON keeps exactly.
    return t.quant.to_json()


def _quant(c: Container, q: Any, what: str) -> QuantParams:
    q = _obj(c, q, f"{what} quantization")
    scale = _list(c, q.get("scale"), f"{what} quantization scale")
    zp = _list(c, q.get("zero_point"), f"{what} quantization zero_point")
    axis = q.get("axis")
    if not all(isinstance(s, float) for s in scale):
        c.fail(f"{what}: quantization scales must be floating-point numbers")
    s64 = np.asarray(scale, dtype=np.float64)
    with np.errstate(over="ignore"):
        s32 = s64.astype(np.float32)
    # A scale that float32 cannot hold exactly was not written by rlx-edge.
    if not np.array_equal(s32.astype(np.float64), s64):
        c.fail(f"{what}: quantization scales are not exact float32 values")
    if not all(_is_int(z) and -(2**63) <= z < 2**63 for z in zp):
        c.fail(f"{what}: quantization zero points must be 64-bit integers")
    if axis is not None and not _is_int(axis):
        c.fail(f"{what}: quantization axis must be an integer or null")
    storage = _dtype(c, q.get("storage", "i8"), f"{what} quantization storage")
    try:
        return QuantParams(s32, np.asarray(zp, dtype=np.int64), axis, storage)
    except IRError as e:
        c.fail(f"{what}: {e}")


def _attr_json(spec: Attr | None, value: Any) -> Any:
    v = spec.to_json(value) if spec is not None else value
    # JSON has no inf/nan; Attr.coerce turns these strings back into floats.
    if isinstance(v, float) and not math.isfinite(v):
        return repr(v)
    if isinstance(v, list):
        return [repr(x) if isinstance(x, float) and not math.isfinite(x) else x for x in v]
    return v


# --------------------------------------------------------------------------
# checks of untrusted header values


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _obj(c: Container, x: Any, what: str) -> dict[str, Any]:
    if not isinstance(x, dict):
        c.fail(f"{what} must be a JSON object")
    return x


def _list(c: Container, x: Any, what: str) -> list[Any]:
    if not isinstance(x, list):
        c.fail(f"{what} must be a JSON list")
    return x


def _str(c: Container, x: Any, what: str) -> str:
    if not isinstance(x, str) or not x:
        c.fail(f"{what} must be a non-empty string, not {x!r:.40}")
    return x


def _dtype(c: Container, x: Any, what: str) -> DType:
    if not isinstance(x, str) or x not in DType.__members__:
        c.fail(f"{what}: unknown dtype {x!r:.40}")
    return DType[x]


def _shape(c: Container, x: Any, what: str) -> Shape:
    dims = _list(c, x, f"{what} shape")
    if not all((_is_int(d) and d >= 0) or isinstance(d, str) for d in dims):
        c.fail(f"{what}: shape dimensions must be non-negative integers or symbol names")
    try:
        return as_shape(dims)
    except IRError as e:
        c.fail(f"{what}: {e}")


def _static_shape(c: Container, x: Any, what: str) -> tuple[int, ...]:
    shape = _shape(c, x, what)
    if not all(isinstance(d, int) for d in shape):
        c.fail(f"{what}: a stored array needs a static shape")
    return shape  # type: ignore[return-value]


def _check_json_safe(x: Any, what: str) -> None:
    """Reject what JSON would change or cannot hold (tuples, non-str keys, inf/nan, objects)."""
    if x is None or isinstance(x, (bool, str, int)):
        return
    if isinstance(x, float):
        if not math.isfinite(x):
            raise IRError(f"{what}: {x!r} has no JSON form")
        return
    if isinstance(x, list):
        for v in x:
            _check_json_safe(v, what)
        return
    if isinstance(x, dict):
        for k, v in x.items():
            if not isinstance(k, str):
                raise IRError(f"{what}: key {k!r} is not a string")
            _check_json_safe(v, f"{what}[{k!r}]")
        return
    raise IRError(f"{what}: a {type(x).__name__} ({x!r:.40}) cannot be saved; use JSON types (dict, list, str, number)")


# --------------------------------------------------------------------------
# Programs (LIR): the graph section plus a "program" section


def dumps_program(program: Program) -> bytes:
    """Serialize a Program: its graph, schedule, arena plan and resolved quantization."""
    from rlx_edge.ir.verify import verify

    verify(program.graph)
    blob = BlobWriter()
    section = {
        "target": program.target,
        "schedule": list(program.schedule),
        "offsets": dict(program.offsets),
        "scratch": {k: [o, s] for k, (o, s) in program.scratch.items()},
        "arena_bytes": program.arena_bytes,
        "lower_bound_bytes": program.lower_bound_bytes,
        "scratch_bytes": program.scratch_bytes,
        "weight_bytes": program.weight_bytes,
        "alignment": program.alignment,
        "algorithm": program.algorithm,
        "buffers": [
            {
                "name": b.name,
                "size": b.size,
                "start": b.start,
                "end": b.end,
                "values": b.values,
                "kind": b.kind,
                "offset": b.offset,
            }
            for b in program.buffers
        ],
        "inplace": dict(program.inplace),
        "quant": {k: _prepared_json(v, blob, k) for k, v in program.quant.items()},
    }
    _check_json_safe(section, "program section")
    return pack({"graph": graph_to_json(program.graph, blob), "program": section}, blob)


def loads_program(data: bytes, source: str = "<bytes>") -> Program:
    """Read a Program and re-prove its arena plan before returning it."""
    from rlx_edge.ir.plan import PlanError, validate
    from rlx_edge.ir.plan.liveness import Buffer

    c = unpack(data, source)
    if "program" not in c.sections:
        c.fail("holds a graph, not a planned program (run `rlx-edge plan` or plan() first)")
    graph = graph_from_json(c.sections.get("graph"), c)
    p = _obj(c, c.sections["program"], "program")
    try:
        program = Program(
            graph=graph,
            target=_str(c, p.get("target"), "program target"),
            schedule=[_str(c, s, "schedule entry") for s in _list(c, p.get("schedule"), "schedule")],
            offsets={str(k): int(v) for k, v in _obj(c, p.get("offsets"), "offsets").items()},
            scratch={str(k): (int(v[0]), int(v[1])) for k, v in _obj(c, p.get("scratch"), "scratch").items()},
            arena_bytes=int(p["arena_bytes"]),
            lower_bound_bytes=int(p["lower_bound_bytes"]),
            scratch_bytes=int(p["scratch_bytes"]),
            weight_bytes=int(p["weight_bytes"]),
            alignment=int(p["alignment"]),
            algorithm=_str(c, p.get("algorithm"), "algorithm"),
            buffers=[Buffer(**_obj(c, b, "buffer")) for b in _list(c, p.get("buffers"), "buffers")],
            inplace={str(k): str(v) for k, v in _obj(c, p.get("inplace"), "inplace").items()},
            quant={
                str(k): _prepared(c, v, f"prepared parameters of node {k!r}")
                for k, v in _obj(c, p.get("quant"), "quant").items()
            },
        )
    except (KeyError, TypeError, ValueError, IndexError) as e:
        c.fail(f"has a malformed program section ({e.__class__.__name__}: {e})")
    try:
        validate(program)
    except PlanError as e:
        c.fail(f"holds an unsound arena plan: {e}")
    return program


def _prepared_json(p: Prepared, blob: BlobWriter, node: str) -> dict[str, Any]:
    """A node's prepared parameters: plain values as JSON, arrays into the blob as ``{"array": record}``."""

    def enc(v: Any) -> Any:
        if isinstance(v, np.ndarray):
            return {"array": blob.add(v, from_numpy(v.dtype))}
        if isinstance(v, tuple):
            return [enc(x) for x in v]
        if isinstance(v, float) and not math.isfinite(v):
            raise IRError(f"node {node!r}: prepared parameter is not finite ({v}); such a program cannot be saved")
        return v

    return {k: enc(v) for k, v in p.items()}


def _prepared(c: Container, d: Any, what: str) -> Prepared:
    def dec(v: Any, where: str) -> Any:
        if isinstance(v, dict):
            if set(v) != {"array"}:
                c.fail(f"{where}: an object must be an array record {{'array': ...}}")
            return c.array(v["array"], where)[0]
        if isinstance(v, list):
            return tuple(dec(x, where) for x in v)
        if v is None or isinstance(v, (bool, int, float, str)):
            return v
        c.fail(f"{where}: unsupported value {v!r:.40}")

    d = _obj(c, d, what)
    return Prepared({str(k): dec(v, f"{what}: {k}") for k, v in d.items()})


def save_program(program: Program, path: str | os.PathLike) -> Path:
    return atomic_write_bytes(path, dumps_program(program))


def load_program(path: str | os.PathLike) -> Program:
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise ModelFileError(f"{path}: cannot read ({e.strerror or e})") from None
    return loads_program(data, str(path))
