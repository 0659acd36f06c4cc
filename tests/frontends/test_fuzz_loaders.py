"""Fuzzing the model loaders with 3,000+ seeded mutants of real .tflite, .onnx and .rlx files.

Model files are untrusted input: loading any file must give a valid graph or
one :class:`~rlx_edge.errors.RlxError` naming the file, never another
exception, a signal, a hang or a runaway allocation. The mutants come from
the checked-in models (and .rlx files saved from them):

* byte-level: bit flips, byte sets, truncation, splices (for .rlx also with
  the checksum re-sealed, so that the mutation reaches the parser);
* TFLite structure: fields changed through the flatbuffer object API
  (buffer / opcode indices, options types and fields, quantization, shapes,
  element types, operator and graph inputs/outputs, the operator list);
* ONNX structure: fields changed through the protobuf (undefined names,
  missing / mistyped / odd attributes, wrong-rank weights, unknown element
  types, deleted / duplicated / swapped nodes, dimensions, op types, opsets);
* .rlx structure: the JSON header edited, the file re-sealed.

``fuzz_loaders_worker.py`` loads them in batches, in subprocesses with an
address-space limit and a timeout, and reports one JSON line per file. The
counts are asserted (total, every mutation kind, both accepted and rejected
outcomes), so a generator that silently produces nothing fails.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import struct
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import flatbuffers
import numpy as np
import onnx
import pytest
from tflite_micro.tensorflow.lite.micro.python import schema_py_generated as tfl

from modelfiles import MLPERF, ONNX, TFLM
from rlx_edge.errors import ModelFileError, shorten
from rlx_edge.frontends import load_model
from rlx_edge.ir.serialize import ALIGN, FORMAT_VERSION, MAGIC, save

SEED = 14
MEMORY_LIMIT = 2 << 30  # bytes of address space per worker
PER_FILE_TIMEOUT_S = 20  # one file; the real ones load in well under a second
RUN_TIMEOUT_S = 240  # all workers together; they need about 30 s on 2 cores
WORKERS = 2
WORKER = Path(__file__).with_name("fuzz_loaders_worker.py")

TFLITE_SOURCES = [
    TFLM / "hello_world_int8.tflite",
    TFLM / "hello_world_float.tflite",
    TFLM / "micro_speech_quantized.tflite",
    TFLM / "simple_add_model.tflite",
    MLPERF / "kws_ref_model.tflite",
    MLPERF / "kws_ref_model_float32.tflite",
    MLPERF / "pretrainedResnet_quant.tflite",
    MLPERF / "pretrainedResnet.tflite",
    MLPERF / "ad01_int8.tflite",
    MLPERF / "vww_96_int8.tflite",
]
ONNX_SOURCES = sorted(ONNX.glob("*.onnx"))
RLX_FROM = [TFLM / "hello_world_int8.tflite", MLPERF / "kws_ref_model.tflite", ONNX / "mnist-8_onnx-model-zoo.onnx"]

# mutants per (format, family); each family cycles through its kinds
PLAN = {
    ("tflite", "struct"): 1900,
    ("tflite", "bytes"): 700,
    ("onnx", "struct"): 1000,
    ("onnx", "bytes"): 400,
    ("rlx", "struct"): 600,
    ("rlx", "bytes"): 400,
}
MIN_TOTAL = 3000
MIN_PER_KIND = 20
MAX_MESSAGE_CHARS = 1500  # ONNX lists every unsupported node on its own line; a TFLite / .rlx error is one line


@dataclass
class Mutant:
    path: Path
    fmt: str
    kind: str
    source: str


# byte-level ------------------------------------------------------------------------------------
def _bitflip(data: bytes, rng: np.random.Generator, donors: list[bytes]) -> bytes:
    b = bytearray(data)
    for _ in range(int(rng.integers(1, 9))):
        b[int(rng.integers(len(b)))] ^= 1 << int(rng.integers(8))
    return bytes(b)


def _byteset(data: bytes, rng: np.random.Generator, donors: list[bytes]) -> bytes:
    b = bytearray(data)
    for _ in range(int(rng.integers(1, 5))):
        b[int(rng.integers(len(b)))] = int(rng.choice([0x00, 0xFF, 0x7F, 0x80, 0x01, int(rng.integers(256))]))
    return bytes(b)


def _truncate(data: bytes, rng: np.random.Generator, donors: list[bytes]) -> bytes:
    return data[: int(rng.integers(len(data)))]


def _splice(data: bytes, rng: np.random.Generator, donors: list[bytes]) -> bytes:
    donor = donors[int(rng.integers(len(donors)))]
    n = int(rng.integers(1, 65))
    a = int(rng.integers(max(len(donor) - n, 1)))
    chunk = donor[a : a + n]
    at = int(rng.integers(len(data)))
    if rng.random() < 0.5:
        return data[:at] + chunk + data[at:]  # insert
    return data[:at] + chunk + data[at + len(chunk) :]  # overwrite


BYTE_MUTATIONS: dict[str, Callable[[bytes, np.random.Generator, list[bytes]], bytes]] = {
    "bitflip": _bitflip,
    "byteset": _byteset,
    "truncate": _truncate,
    "splice": _splice,
}


# TFLite structure (object API) -----------------------------------------------------------------
# Each mutation edits the unpacked model in place and records how to undo it, so
# that one unpacked copy per source serves every mutant.
Undo = list[tuple[Any, str, Any]]


def _set(undo: Undo, obj: Any, attr: str, value: Any) -> None:
    undo.append((obj, attr, getattr(obj, attr)))
    setattr(obj, attr, value)


def _pick(rng: np.random.Generator, items: list) -> Any:
    return items[int(rng.integers(len(items)))]


def _ops(m: Any) -> list:
    return list(m.subgraphs[0].operators or [])


def _tensors(m: Any) -> list:
    return list(m.subgraphs[0].tensors or [])


def _tfl_opcode_index(m: Any, rng: np.random.Generator, undo: Undo) -> bool:
    n = len(m.operatorCodes)
    _set(undo, _pick(rng, _ops(m)), "opcodeIndex", _pick(rng, [n, n + 7, 2**32 - 1, int(rng.integers(n))]))
    return True


def _tfl_buffer_index(m: Any, rng: np.random.Generator, undo: Undo) -> bool:
    n = len(m.buffers)
    _set(undo, _pick(rng, _tensors(m)), "buffer", _pick(rng, [n, 2**32 - 1, 0, int(rng.integers(n))]))
    return True


def _tfl_options_type(m: Any, rng: np.random.Generator, undo: Undo) -> bool:
    op = _pick(rng, _ops(m))
    how = int(rng.integers(4))
    if how == 0:
        _set(undo, op, "builtinOptionsType", 127)  # past the last union member
    elif how == 1:
        _set(undo, op, "builtinOptionsType", int(rng.integers(1, 127)))
    elif how == 2:
        _set(undo, op, "builtinOptionsType", 0)
    else:
        _set(undo, op, "builtinOptions", None)
    return True


def _tfl_options_field(m: Any, rng: np.random.Generator, undo: Undo) -> bool:
    opts = [op.builtinOptions for op in _ops(m) if op.builtinOptions is not None]
    if not opts:
        return False
    o = _pick(rng, opts)
    fields = [k for k, v in vars(o).items() if isinstance(v, (int, float))]
    if not fields:
        return False
    value = _pick(rng, [-1, 0, 1, 2, 3, 5, 17, 127, -128])
    field = _pick(rng, fields)
    _set(undo, o, field, float(value) if isinstance(getattr(o, field), float) else value)
    return True


def _tfl_quant(m: Any, rng: np.random.Generator, undo: Undo) -> bool:
    quantized = [t for t in _tensors(m) if t.quantization is not None and t.quantization.scale is not None]
    if not quantized or rng.random() < 0.1:
        t = _pick(rng, _tensors(m))  # quantization where there was none (or, rarely, none where there was)
        q = tfl.QuantizationParametersT()
        q.scale, q.zeroPoint = [0.5], [int(rng.integers(-3, 3))]
        _set(undo, t, "quantization", None if t.quantization is not None and rng.random() < 0.5 else q)
        return True
    t = _pick(rng, quantized)
    q = copy.copy(t.quantization)
    _set(undo, t, "quantization", q)
    scale, zp = [float(s) for s in q.scale], [int(z) for z in (q.zeroPoint if q.zeroPoint is not None else [])]
    how = int(rng.integers(9))
    if how == 0:
        t.quantization = None  # the bug of the issue: a quantized op's tensor without quantization
    elif how == 1:
        q.scale = [_pick(rng, [math.nan, math.inf, 0.0, -scale[0], 1e-45, 1e30])] + scale[1:]
    elif how == 2:
        q.zeroPoint = [_pick(rng, [300, -129, 128, 2**40, 65536])] + zp[1:]
    elif how == 3:
        q.zeroPoint = zp + [0]
    elif how == 4:
        q.zeroPoint = []
    elif how == 5:
        q.quantizedDimension = _pick(rng, [1, 3, 7, -1, 2**20])
    elif how == 6:
        q.scale = scale + [scale[0]]  # one scale more than the channels
    elif how == 7:
        q.scale = []
    else:
        q.scale, q.zeroPoint = scale[:1], zp[:1]  # per-channel to per-tensor
    return True


def _tfl_shape(m: Any, rng: np.random.Generator, undo: Undo) -> bool:
    t = _pick(rng, _tensors(m))
    shape = [int(d) for d in (t.shape if t.shape is not None else [])]
    how = int(rng.integers(5))
    if how == 0 and shape:
        shape[int(rng.integers(len(shape)))] = _pick(rng, [-1, 0, 2**31 - 1, 65536, 3])
    elif how == 1:
        shape.append(_pick(rng, [1, 2]))
    elif how == 2 and shape:
        shape.pop()
    elif how == 3:
        shape = [1] * 9
    else:
        shape = [2**15] * 4
    _set(undo, t, "shape", shape)
    return True


def _tfl_tensor_type(m: Any, rng: np.random.Generator, undo: Undo) -> bool:
    _set(undo, _pick(rng, _tensors(m)), "type", _pick(rng, [int(rng.integers(18)), 99, 127]))
    return True


def _tfl_op_io(m: Any, rng: np.random.Generator, undo: Undo) -> bool:
    op = _pick(rng, _ops(m))
    attr = "inputs" if rng.random() < 0.6 else "outputs"
    ids = [int(i) for i in getattr(op, attr)]
    n = len(_tensors(m))
    how = int(rng.integers(4))
    if how == 0 and ids:
        ids[int(rng.integers(len(ids)))] = _pick(rng, [-1, n, 2**31 - 1, int(rng.integers(n))])
    elif how == 1 and ids:
        ids.pop(int(rng.integers(len(ids))))
    elif how == 2:
        ids.append(int(rng.integers(n)))
    else:
        ids = []
    _set(undo, op, attr, ids)
    return True


def _tfl_graph_io(m: Any, rng: np.random.Generator, undo: Undo) -> bool:
    sg = m.subgraphs[0]
    attr = "inputs" if rng.random() < 0.5 else "outputs"
    ids = [int(i) for i in getattr(sg, attr)]
    n = len(_tensors(m))
    how = int(rng.integers(4))
    if how == 0 and ids:
        ids[int(rng.integers(len(ids)))] = _pick(rng, [n, -1, int(rng.integers(n))])
    elif how == 1:
        ids = ids + ids[:1]
    elif how == 2:
        ids.append(int(rng.integers(n)))
    else:
        ids = []
    _set(undo, sg, attr, ids)
    return True


def _tfl_op_list(m: Any, rng: np.random.Generator, undo: Undo) -> bool:
    sg = m.subgraphs[0]
    ops = list(sg.operators)
    how = int(rng.integers(3))
    k = int(rng.integers(len(ops)))
    if how == 0:
        ops.pop(k)
    elif how == 1:
        ops.insert(k, ops[k])
    else:
        j = int(rng.integers(len(ops)))
        ops[k], ops[j] = ops[j], ops[k]
    _set(undo, sg, "operators", ops)
    return True


def _tfl_opcode(m: Any, rng: np.random.Generator, undo: Undo) -> bool:
    oc = _pick(rng, list(m.operatorCodes))
    code = _pick(rng, [int(rng.integers(210)), 32, 0, 127])  # 32: CUSTOM
    _set(undo, oc, "builtinCode", code)
    _set(undo, oc, "deprecatedBuiltinCode", min(code, 127))
    return True


def _tfl_buffer_data(m: Any, rng: np.random.Generator, undo: Undo) -> bool:
    full = [b for b in m.buffers if b.data is not None and len(b.data)]
    if not full:
        return False
    b = _pick(rng, full)
    data = np.asarray(b.data, np.uint8)
    how = int(rng.integers(3))
    if how == 0:
        new = data[: int(rng.integers(len(data)))]
    elif how == 1:
        new = np.concatenate([data, data[:4]])
    else:
        new = None
    _set(undo, b, "data", new)
    return True


TFL_MUTATIONS: dict[str, Callable[[Any, np.random.Generator, Undo], bool]] = {
    "tfl_opcode_index": _tfl_opcode_index,
    "tfl_buffer_index": _tfl_buffer_index,
    "tfl_options_type": _tfl_options_type,
    "tfl_options_field": _tfl_options_field,
    "tfl_quant": _tfl_quant,
    "tfl_shape": _tfl_shape,
    "tfl_tensor_type": _tfl_tensor_type,
    "tfl_op_io": _tfl_op_io,
    "tfl_graph_io": _tfl_graph_io,
    "tfl_op_list": _tfl_op_list,
    "tfl_opcode": _tfl_opcode,
    "tfl_buffer_data": _tfl_buffer_data,
}


def _tfl_pack(m: Any) -> bytes:
    b = flatbuffers.Builder(0)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


# ONNX structure (protobuf) ----------------------------------------------------------------------
_ATTR_TYPES = [v for v in onnx.AttributeProto.AttributeType.values() if v]
_OP_TYPES = [
    "Relu", "Conv", "Concat", "Cast", "MaxPool", "AveragePool", "Reshape", "Add", "Gemm", "MatMul", "Softmax",
    "Flatten", "Transpose", "BatchNormalization", "QuantizeLinear", "DequantizeLinear", "Loop", "NoSuchOp",
    "ConstantOfShape", "Tile", "Expand", "Pad", "Split", "Slice", "Squeeze", "Clip",
]  # fmt: skip


def _nodes_with_attrs(g: onnx.GraphProto) -> list[onnx.NodeProto]:
    return [n for n in g.node if n.attribute]


def _onnx_undefined_name(m: onnx.ModelProto, rng: np.random.Generator) -> bool:
    g = m.graph
    how = int(rng.integers(3))
    if how == 0:
        n = _pick(rng, list(g.node))
        n.input[int(rng.integers(len(n.input)))] = "ghost"
    elif how == 1:
        g.output[0].name = "ghost"
    else:
        n = _pick(rng, list(g.node))
        n.output[0] = "renamed"  # its readers now read an undefined value
    return True


def _onnx_attr_missing(m: onnx.ModelProto, rng: np.random.Generator) -> bool:
    nodes = _nodes_with_attrs(m.graph)
    if not nodes:
        return False
    n = _pick(rng, nodes)
    del n.attribute[int(rng.integers(len(n.attribute)))]
    return True


def _onnx_attr_type(m: onnx.ModelProto, rng: np.random.Generator) -> bool:
    nodes = _nodes_with_attrs(m.graph)
    if not nodes:
        return False
    a = _pick(rng, list(_pick(rng, nodes).attribute))
    a.type = _pick(rng, [t for t in _ATTR_TYPES if t != a.type])
    return True


def _onnx_attr_value(m: onnx.ModelProto, rng: np.random.Generator) -> bool:
    nodes = _nodes_with_attrs(m.graph)
    if not nodes:
        return False
    a = _pick(rng, list(_pick(rng, nodes).attribute))
    if a.type == onnx.AttributeProto.INTS:
        del a.ints[:]
        a.ints.extend(_pick(rng, [[0, 0], [-1, -1], [], [1, 2, 3], [2**40, 1], [1]]))
    elif a.type == onnx.AttributeProto.INT:
        a.i = _pick(rng, [-1, 0, 99, 2**40])
    elif a.type == onnx.AttributeProto.STRING:
        a.s = _pick(rng, [b"BOGUS", b"", b"SAME_LOWER", b"\xff\xfe"])
    elif a.type == onnx.AttributeProto.FLOAT:
        a.f = _pick(rng, [math.nan, math.inf, -1.0, 0.0])
    else:
        return False
    return True


def _onnx_weight_rank(m: onnx.ModelProto, rng: np.random.Generator) -> bool:
    inits = [t for t in m.graph.initializer if len(t.dims) >= 1]
    t = _pick(rng, inits)
    dims = list(t.dims)
    how = int(rng.integers(3))
    if how == 0:
        new = [math.prod(dims)]
    elif how == 1:
        new = [*dims, 1]
    else:
        new = [dims[0], math.prod(dims[1:])] if len(dims) > 2 else [1, *dims]
    del t.dims[:]
    t.dims.extend(new)
    return True


def _onnx_elem_type(m: onnx.ModelProto, rng: np.random.Generator) -> bool:
    code = _pick(rng, [99, 0, 8, 16, 17, int(rng.integers(1, 26))])
    if rng.random() < 0.5 and m.graph.input:
        _pick(rng, list(m.graph.input)).type.tensor_type.elem_type = code
    else:
        _pick(rng, list(m.graph.initializer)).data_type = code
    return True


def _onnx_node_list(m: onnx.ModelProto, rng: np.random.Generator) -> bool:
    nodes = list(m.graph.node)
    how = int(rng.integers(3))
    k = int(rng.integers(len(nodes)))
    if how == 0:
        nodes.pop(k)
    elif how == 1:
        nodes.insert(k, nodes[k])
    else:
        j = int(rng.integers(len(nodes)))
        nodes[k], nodes[j] = nodes[j], nodes[k]
    copies = [onnx.NodeProto() for _ in nodes]
    for c, n in zip(copies, nodes):
        c.CopyFrom(n)
    del m.graph.node[:]
    m.graph.node.extend(copies)
    return True


def _onnx_dims(m: onnx.ModelProto, rng: np.random.Generator) -> bool:
    if rng.random() < 0.5 and m.graph.input:
        dims = _pick(rng, list(m.graph.input)).type.tensor_type.shape.dim
        if not dims:
            return False
        dims[int(rng.integers(len(dims)))].dim_value = _pick(rng, [-1, 0, 2**40, 2**31, 7])
    else:
        t = _pick(rng, [t for t in m.graph.initializer if t.dims])
        t.dims[int(rng.integers(len(t.dims)))] += _pick(rng, [1, -1, 2**20])
    return True


def _onnx_op_type(m: onnx.ModelProto, rng: np.random.Generator) -> bool:
    _pick(rng, list(m.graph.node)).op_type = _pick(rng, _OP_TYPES)
    return True


def _onnx_opset(m: onnx.ModelProto, rng: np.random.Generator) -> bool:
    m.opset_import[0].version = _pick(rng, [1, 6, 7, 13, 22, 23, 99, 2**40])
    return True


ONNX_MUTATIONS: dict[str, Callable[[onnx.ModelProto, np.random.Generator], bool]] = {
    "onnx_undefined_name": _onnx_undefined_name,
    "onnx_attr_missing": _onnx_attr_missing,
    "onnx_attr_type": _onnx_attr_type,
    "onnx_attr_value": _onnx_attr_value,
    "onnx_weight_rank": _onnx_weight_rank,
    "onnx_elem_type": _onnx_elem_type,
    "onnx_node_list": _onnx_node_list,
    "onnx_dims": _onnx_dims,
    "onnx_op_type": _onnx_op_type,
    "onnx_opset": _onnx_opset,
}


# .rlx structure (JSON header) --------------------------------------------------------------------
# The container layout of rlx_edge/ir/serialize.py: prefix, header, padding, blob, SHA-256.
_RLX_PREFIX = struct.Struct("<8sIIQQ")
_DIGEST = 32


def _rlx_split(data: bytes) -> tuple[dict, bytes]:
    _, _, _, head_len, blob_len = _RLX_PREFIX.unpack_from(data, 0)
    start = _RLX_PREFIX.size + head_len
    blob_start = start + (-start % ALIGN)
    return json.loads(data[_RLX_PREFIX.size : start]), data[blob_start : blob_start + blob_len]


def _rlx_join(header: Any, blob: bytes) -> bytes:
    head = json.dumps(header, sort_keys=True, separators=(",", ":")).encode("ascii")
    prefix = _RLX_PREFIX.pack(MAGIC, FORMAT_VERSION, 0, len(head), len(blob))
    body = prefix + head + b"\0" * (-(len(prefix) + len(head)) % ALIGN) + blob
    return body + hashlib.sha256(body).digest()


def _reseal(data: bytes) -> bytes:
    """The checksum made right again, so that a byte mutation reaches the parser."""
    if len(data) <= _DIGEST:
        return data
    return data[:-_DIGEST] + hashlib.sha256(data[:-_DIGEST]).digest()


def _json_slots(x: Any, out: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    """Every (container, key) of a JSON tree."""
    items = x.items() if isinstance(x, dict) else enumerate(x) if isinstance(x, list) else ()
    for k, v in items:
        out.append((x, k))
        _json_slots(v, out)
    return out


_JSON_VALUES: list[Any] = [None, True, -1, 0, 1, 2**31, 2**64, 1e308, -0.5, "", "x", "i8", "conv2d", [], {}, [1, 2]]


def _rlx_json(header: dict, rng: np.random.Generator) -> bool:
    slots = _json_slots(header, [])
    parent, key = _pick(rng, slots)
    strings = [c[k] for c, k in slots if isinstance(c[k], str)]
    how = int(rng.integers(5))
    if how == 0:
        parent[key] = copy.deepcopy(_pick(rng, _JSON_VALUES))
    elif how == 1:
        del parent[key]  # a dict key or a list element
    elif how == 2 and isinstance(parent[key], list) and parent[key]:
        parent[key].append(copy.deepcopy(parent[key][-1]))
    elif how == 3 and strings:
        parent[key] = _pick(rng, strings)  # a name from elsewhere in the file
    elif isinstance(parent[key], (int, float)) and not isinstance(parent[key], bool):
        parent[key] = parent[key] + _pick(rng, [1, -1, 2**20, -(2**20)])
    else:
        parent[key] = "?" * 300
    return True


# the corpus --------------------------------------------------------------------------------------
class _Corpus:
    def __init__(self, root: Path, rng: np.random.Generator) -> None:
        self.root = root
        self.rng = rng
        self.mutants: list[Mutant] = []
        self.files = {
            "tflite": {p.name: p.read_bytes() for p in TFLITE_SOURCES},
            "onnx": {p.name: p.read_bytes() for p in ONNX_SOURCES},
            "rlx": self._rlx_sources(),
        }

    def _rlx_sources(self) -> dict[str, bytes]:
        out = {}
        for p in RLX_FROM:
            path = self.root / f"{p.stem}.rlx"
            save(load_model(p), path)
            out[path.name] = path.read_bytes()
        return out

    def add(self, fmt: str, kind: str, source: str, data: bytes) -> None:
        path = self.root / f"{len(self.mutants):05d}.{fmt}"
        path.write_bytes(data)
        self.mutants.append(Mutant(path, fmt, kind, source))

    def bytes_family(self, fmt: str, count: int) -> None:
        files = self.files[fmt]
        names, donors = sorted(files), list(files.values())
        kinds = list(BYTE_MUTATIONS)
        for i in range(count):
            kind, name = kinds[i % len(kinds)], _pick(self.rng, names)
            data = BYTE_MUTATIONS[kind](files[name], self.rng, donors)
            if fmt == "rlx" and i // len(kinds) % 2:
                data, kind = _reseal(data), f"{kind}+reseal"
            self.add(fmt, kind, name, data)

    def tflite_struct(self, count: int) -> None:
        # the small models take most mutants: the loader reaches deeper in them per millisecond
        models = {p.name: tfl.ModelT.InitFromPackedBuf(self.files["tflite"][p.name], 0) for p in TFLITE_SOURCES}
        names = sorted(models)
        weights = np.array([4.0 if len(self.files["tflite"][n]) < 120_000 else 1.0 for n in names])
        kinds = list(TFL_MUTATIONS)
        made = 0
        while made < count:
            kind = kinds[made % len(kinds)]
            name = names[int(self.rng.choice(len(names), p=weights / weights.sum()))]
            m, undo = models[name], []
            try:
                if not TFL_MUTATIONS[kind](m, self.rng, undo):
                    continue
                data = _tfl_pack(m)
            except (struct.error, OverflowError, TypeError):  # a value the field cannot hold: draw again
                continue
            finally:
                for obj, attr, old in reversed(undo):
                    setattr(obj, attr, old)
            self.add("tflite", kind, name, data)
            made += 1

    def onnx_struct(self, count: int) -> None:
        models = {n: onnx.load_from_string(d) for n, d in self.files["onnx"].items()}
        names = sorted(models)
        kinds = list(ONNX_MUTATIONS)
        made = 0
        while made < count:
            kind, name = kinds[made % len(kinds)], _pick(self.rng, names)
            m = onnx.ModelProto()
            m.CopyFrom(models[name])
            try:
                if not ONNX_MUTATIONS[kind](m, self.rng):
                    continue
            except ValueError:  # a value protobuf refuses to hold: draw again
                continue
            self.add("onnx", kind, name, m.SerializeToString())
            made += 1

    def rlx_struct(self, count: int) -> None:
        parts = {n: _rlx_split(d) for n, d in self.files["rlx"].items()}
        names = sorted(parts)
        for _ in range(count):
            name = _pick(self.rng, names)
            header, blob = parts[name]
            header = copy.deepcopy(header)
            _rlx_json(header, self.rng)
            self.add("rlx", "rlx_json", name, _rlx_join(header, blob))


def _make_corpus(root: Path) -> list[Mutant]:
    c = _Corpus(root, np.random.default_rng(SEED))
    for (fmt, family), count in PLAN.items():
        if family == "bytes":
            c.bytes_family(fmt, count)
        elif fmt == "tflite":
            c.tflite_struct(count)
        elif fmt == "onnx":
            c.onnx_struct(count)
        else:
            c.rlx_struct(count)
    return c.mutants


# running -------------------------------------------------------------------------------------------
def _run_workers(mutants: list[Mutant], root: Path) -> dict[str, dict]:
    """Outcome per mutant path; fails naming the mutant a worker died or hung on."""
    batches = [mutants[k::WORKERS] for k in range(WORKERS)]
    procs = []
    for k, batch in enumerate(batches):
        listing = root / f"batch{k}.txt"
        listing.write_text("".join(f"{m.path}\n" for m in batch))
        cmd = [sys.executable, str(WORKER), str(listing), str(MEMORY_LIMIT), str(PER_FILE_TIMEOUT_S)]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    deadline = time.monotonic() + RUN_TIMEOUT_S
    results: dict[str, dict] = {}
    stopped = []
    for batch, proc in zip(batches, procs):
        try:
            out, err = proc.communicate(timeout=max(deadline - time.monotonic(), 1))
        except subprocess.TimeoutExpired:  # a hang the per-file alarm could not interrupt
            proc.kill()
            out, err = proc.communicate()
        lines = [json.loads(line) for line in out.splitlines()]
        for rec in lines:
            results[rec["path"]] = rec
        if len(lines) < len(batch):
            m = batch[len(lines)]
            stopped.append(
                f"worker stopped (exit status {proc.returncode}) at mutant {m.path.name} ({m.kind} of {m.source}):"
                f" {err.strip()[-1500:]}"
            )
    if stopped:
        pytest.fail("\n".join(stopped))
    return results


def test_loaders_give_a_graph_or_a_clear_error_on_mutants(tmp_path: Path) -> None:
    mutants = _make_corpus(tmp_path)
    results = _run_workers(mutants, tmp_path)

    bad = []
    for m in mutants:
        rec = results[str(m.path)]
        if rec["outcome"] in ("accepted", "rejected"):
            msg = rec.get("message", "")
            if rec["outcome"] == "rejected" and (str(m.path) not in msg or len(msg) > MAX_MESSAGE_CHARS):
                bad.append(f"{m.path.name} ({m.kind} of {m.source}): unclear {rec['error']}: {msg[:300]!r}")
            continue
        detail = f"{rec.get('error')}: {rec.get('message')} at {rec.get('where')}" if rec["outcome"] == "crash" else ""
        bad.append(f"{m.path.name} ({m.kind} of {m.source}): {rec['outcome']} {detail}")
    assert not bad, f"{len(bad)} of {len(mutants)} mutants:\n" + "\n".join(bad[:40])

    # the counts: a generator or worker that silently did nothing fails here
    assert len(mutants) == sum(PLAN.values()) >= MIN_TOTAL
    kinds = Counter(m.kind for m in mutants)
    expected = {*TFL_MUTATIONS, *ONNX_MUTATIONS, "rlx_json", *BYTE_MUTATIONS, *(f"{k}+reseal" for k in BYTE_MUTATIONS)}
    assert set(kinds) == expected
    assert min(kinds.values()) >= MIN_PER_KIND, kinds
    outcomes = Counter((m.fmt, results[str(m.path)]["outcome"]) for m in mutants)
    for fmt in ("tflite", "onnx", "rlx"):
        n = sum(1 for m in mutants if m.fmt == fmt)
        assert outcomes[fmt, "accepted"] >= 0.03 * n, outcomes
        assert outcomes[fmt, "rejected"] >= 0.3 * n, outcomes


# the findings of the issue, one mutant each ----------------------------------------------------------
# Each case names the fragment the one-line error must carry besides the file name.
def _tfl_case(source: Path, edit: Callable[[Any], None], tmp_path: Path) -> Path:
    m = tfl.ModelT.InitFromPackedBuf(source.read_bytes(), 0)
    edit(m)
    path = tmp_path / "case.tflite"
    path.write_bytes(_tfl_pack(m))
    return path


def _kws_conv(m: Any) -> Any:
    return m.subgraphs[0].operators[0]  # CONV_2D: input 0, weights 17, bias 3


def _tensor(m: Any, i: int) -> Any:
    return m.subgraphs[0].tensors[i]


def _quant(m: Any, i: int, **fields: Any) -> None:
    q = copy.copy(_tensor(m, i).quantization)
    for k, v in fields.items():
        setattr(q, k, v)
    _tensor(m, i).quantization = q


TFL_CASES: dict[str, tuple[Path, Callable[[Any], None], str]] = {
    # the issue: a quantized op whose weights lost their quantization passed and crashed later
    "weights without quantization": (
        TFLM / "hello_world_int8.tflite",
        lambda m: setattr(_tensor(m, 6), "quantization", None),
        "node 'sequential/dense/MatMul' (fully_connected): value 'sequential/dense/MatMul_1' is i8 without"
        " quantization parameters, but the node is quantized",
    ),
    "output without quantization": (
        TFLM / "hello_world_int8.tflite",
        lambda m: setattr(_tensor(m, 9), "quantization", None),
        "is i8 without quantization parameters",
    ),
    "all of a node without quantization": (
        TFLM / "hello_world_int8.tflite",
        lambda m: [setattr(_tensor(m, i), "quantization", None) for i in (0, 5, 6, 7)],  # operator 0
        "is i8 without quantization parameters, but fully_connected computes on quantized values",
    ),
    "unknown options type": (
        MLPERF / "kws_ref_model.tflite",
        lambda m: setattr(_kws_conv(m), "builtinOptionsType", 127),
        "operator 0 (CONV_2D) has options of unknown type 127",
    ),
    "options of another op": (
        TFLM / "hello_world_int8.tflite",
        lambda m: setattr(m.subgraphs[0].operators[1], "builtinOptionsType", 1),
        "operator 1 (FULLY_CONNECTED) has options of type Conv2DOptions, expected FullyConnectedOptions",
    ),
    "conv without options": (
        MLPERF / "kws_ref_model.tflite",
        lambda m: setattr(_kws_conv(m), "builtinOptionsType", 0),
        "operator 0 (CONV_2D) lacks its Conv2DOptions",
    ),
    "NaN scale": (
        TFLM / "hello_world_int8.tflite",
        lambda m: _quant(m, 7, scale=[math.nan]),
        # the long name is cut short
        "tensor 7 ('sequential/dense/MatMul;sequential/dense…ntial/dense/BiasAdd') has quantization scale nan;"
        " scales must be finite and positive",
    ),
    "zero scale": (
        TFLM / "hello_world_int8.tflite",
        lambda m: _quant(m, 0, scale=[0.0]),
        "has quantization scale 0.0; scales must be finite and positive",
    ),
    "zero point out of range": (
        TFLM / "hello_world_int8.tflite",
        lambda m: _quant(m, 0, zeroPoint=[300]),
        "tensor 0 ('serving_default_dense_input:0') has zero point 300, outside the range of i8 [-128, 127]",
    ),
    "more zero points than scales": (
        TFLM / "hello_world_int8.tflite",
        lambda m: _quant(m, 0, zeroPoint=[-128, 0]),
        "has 1 quantization scales but 2 zero points",
    ),
    "per-channel scales that miss the channels": (
        MLPERF / "kws_ref_model.tflite",
        lambda m: _quant(m, 3, scale=[0.5] * 5, zeroPoint=[0] * 5),
        "5 scales do not match dimension 0 of shape [64]",
    ),
    "buffer index out of range": (
        TFLM / "hello_world_int8.tflite",
        lambda m: setattr(_tensor(m, 2), "buffer", 4000),
        "tensor 2 ('sequential/dense_2/MatMul') refers to buffer 4000, but the model has",
    ),
    "opcode index out of range": (
        TFLM / "hello_world_int8.tflite",
        lambda m: setattr(m.subgraphs[0].operators[2], "opcodeIndex", 9),
        "operator 2 uses opcode index 9, but the model has 1",
    ),
    "operator writes a constant": (
        TFLM / "hello_world_int8.tflite",
        lambda m: setattr(m.subgraphs[0].operators[0], "outputs", [2]),
        "operator 0 (FULLY_CONNECTED) writes tensor 2 ('sequential/dense_2/MatMul'), which holds constant data",
    ),
    "huge shape": (
        MLPERF / "kws_ref_model.tflite",
        lambda m: setattr(_tensor(m, 22), "shape", [1, 2**15, 2**15, 64]),
        "of shape [1, 32768, 32768, 64] would take over 1073741824 bytes",
    ),
    "negative dimension": (
        TFLM / "hello_world_int8.tflite",
        lambda m: setattr(_tensor(m, 7), "shape", [1, -16]),
        "has an invalid shape [1, -16]",
    ),
    "missing required input": (
        TFLM / "hello_world_int8.tflite",
        lambda m: setattr(m.subgraphs[0].operators[1], "inputs", [7, -1, 3]),
        "operator 1 (FULLY_CONNECTED) lacks its input 1",
    ),
}


@pytest.mark.parametrize("case", list(TFL_CASES))
def test_tflite_loader_names_what_is_wrong(case: str, tmp_path: Path) -> None:
    source, edit, fragment = TFL_CASES[case]
    path = _tfl_case(source, edit, tmp_path)
    with pytest.raises(ModelFileError) as err:
        load_model(path)
    msg = str(err.value)
    assert msg.startswith(f"{path}: ") and "\n" not in msg
    assert fragment in msg


def _onnx_base() -> onnx.ModelProto:
    """x -> Conv -> Relu -> MaxPool -> Concat -> Cast -> y, named so messages can be checked."""
    h = onnx.helper
    w = onnx.numpy_helper.from_array(np.ones((2, 1, 3, 3), np.float32), "w")
    nodes = [
        h.make_node("Conv", ["x", "w"], ["c"], "conv", kernel_shape=[3, 3], strides=[1, 1]),
        h.make_node("Relu", ["c"], ["r"], "relu"),
        h.make_node("MaxPool", ["r"], ["p"], "pool", kernel_shape=[2, 2], strides=[2, 2]),
        h.make_node("Concat", ["p", "p"], ["cat"], "concat", axis=1),
        h.make_node("Cast", ["cat"], ["y"], "cast", to=onnx.TensorProto.FLOAT),
    ]
    x = h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 1, 8, 8])
    y = h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)
    graph = h.make_graph(nodes, "case", [x], [y], [w])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])


def _node(m: onnx.ModelProto, name: str) -> onnx.NodeProto:
    return next(n for n in m.graph.node if n.name == name)


def _drop_attr(m: onnx.ModelProto, node: str, attr: str) -> None:
    n = _node(m, node)
    keep = [a for a in n.attribute if a.name != attr]
    del n.attribute[:]
    n.attribute.extend(keep)


def _conv_weight_rank3(m: onnx.ModelProto) -> None:
    w = onnx.numpy_helper.from_array(np.ones((2, 1, 9), np.float32), "w")
    m.graph.initializer[0].CopyFrom(w)


def _strides_as_int(m: onnx.ModelProto) -> None:
    a = next(a for a in _node(m, "conv").attribute if a.name == "strides")
    a.type = onnx.AttributeProto.INT


ONNX_CASES: dict[str, tuple[Callable[[onnx.ModelProto], None], str]] = {
    # the six crashes of the issue
    "graph output undefined": (
        lambda m: setattr(m.graph.output[0], "name", "ghost"),
        "graph output 'ghost' is not computed by any node",
    ),
    "conv weight of rank 3": (_conv_weight_rank3, "node conv (Conv): weight has rank 3"),
    "concat without axis": (
        lambda m: _drop_attr(m, "concat", "axis"),
        "node concat (Concat): required attribute 'axis' is missing",
    ),
    "cast without to": (lambda m: _drop_attr(m, "cast", "to"), "node cast (Cast): required attribute 'to' is missing"),
    "pool without kernel_shape": (
        lambda m: _drop_attr(m, "pool", "kernel_shape"),
        "node pool (MaxPool): required attribute 'kernel_shape' is missing",
    ),
    "unknown element type": (
        lambda m: setattr(m.graph.input[0].type.tensor_type, "elem_type", 99),
        "input 'x' has element type 99 (not an ONNX element type)",
    ),
    # and their relatives
    "attribute of the wrong type": (_strides_as_int, "node conv (Conv): attribute 'strides' is of type INT"),
    "zero strides": (
        lambda m: _node(m, "pool").attribute[1].ints.__setitem__(slice(None), [0, 0]),
        "node pool (MaxPool): strides [0, 0] must be positive",
    ),
    "node assigns a value twice": (
        lambda m: m.graph.node.insert(2, _node(m, "relu")),
        "node relu (Relu) assigns 'r', which is already defined",
    ),
    "node reads an undefined value": (
        lambda m: _node(m, "relu").input.__setitem__(0, "ghost"),
        "node relu (Relu) reads undefined value(s) 'ghost'",
    ),
    "missing input": (lambda m: _node(m, "conv").input.pop(), "node conv (Conv): has 1 inputs; Conv takes 2 to 3"),
    "negative input dimension": (
        lambda m: setattr(m.graph.input[0].type.tensor_type.shape.dim[2], "dim_value", -8),
        "input 'x' has the negative dimension -8",
    ),
    "huge input": (
        lambda m: setattr(m.graph.input[0].type.tensor_type.shape.dim[2], "dim_value", 2**40),
        "would take over 1073741824 bytes",
    ),
    "initializer of unknown element type": (
        lambda m: setattr(m.graph.initializer[0], "data_type", 99),
        "tensor 'w' has element type 99 (not an ONNX element type)",
    ),
}


@pytest.mark.parametrize("case", list(ONNX_CASES))
def test_onnx_loader_names_what_is_wrong(case: str, tmp_path: Path) -> None:
    m = _onnx_base()
    load_model(_write(m, tmp_path / "base.onnx"))  # the unmutated model loads
    edit, fragment = ONNX_CASES[case]
    edit(m)
    path = _write(m, tmp_path / "case.onnx")
    with pytest.raises(ModelFileError) as err:
        load_model(path)
    msg = str(err.value)
    assert msg.startswith(f"{path}: ") and "\n" not in msg
    assert fragment in msg


def _write(m: onnx.ModelProto, path: Path) -> Path:
    path.write_bytes(m.SerializeToString())
    return path


def test_onnx_safety_net_names_the_node_and_keeps_the_cause(tmp_path: Path) -> None:
    from rlx_edge.frontends._onnx_ops import HANDLERS

    def broken(imp: Any, node: onnx.NodeProto, a: dict) -> None:
        raise KeyError("lost")

    path = _write(_onnx_base(), tmp_path / "m.onnx")
    with HANDLERS.replaced("Relu", broken), pytest.raises(ModelFileError) as err:
        load_model(path)
    assert str(err.value) == f"{path}: node relu (Relu): cannot be imported, the node is malformed (KeyError: 'lost')"
    assert isinstance(err.value.__cause__, KeyError)


def test_onnx_safety_net_is_narrow(tmp_path: Path) -> None:
    # an error type that only a bug of ours raises keeps its traceback
    from rlx_edge.frontends._onnx_ops import HANDLERS

    def buggy(imp: Any, node: onnx.NodeProto, a: dict) -> None:
        raise AttributeError("a bug")

    with HANDLERS.replaced("Relu", buggy), pytest.raises(AttributeError, match="a bug"):
        load_model(_write(_onnx_base(), tmp_path / "m.onnx"))


def _rlx_case(tmp_path: Path, edit: Callable[[dict], None]) -> Path:
    src = tmp_path / "kws.rlx"
    save(load_model(MLPERF / "kws_ref_model.tflite"), src)
    header, blob = _rlx_split(src.read_bytes())
    edit(header)
    path = tmp_path / "case.rlx"
    path.write_bytes(_rlx_join(header, blob))
    return path


def _unquantize(header: dict, name: str) -> None:
    value = next(v for v in header["graph"]["values"] if v["name"] == name)
    value["quant"] = None


RLX_CASES: dict[str, tuple[Callable[[dict], None], str]] = {
    "weights without quantization": (
        lambda h: _unquantize(h, "functional_1/conv2d_4/Conv2D"),
        "value 'functional_1/conv2d_4/Conv2D' is i8 without quantization parameters, but the node is quantized",
    ),
    "tensor index metadata of the wrong form": (
        lambda h: h["graph"]["metadata"].__setitem__("tflite_tensor_index", {"x": "seven"}),
        "graph metadata 'tflite_tensor_index' must map value names to tensor indices",
    ),
    "long names are cut short": (
        lambda h: h["graph"]["params"][0].__setitem__("name", "n" * 5000),
        f"param {shorten('n' * 5000, 60)!r}: stored as",
    ),
}


@pytest.mark.parametrize("case", list(RLX_CASES))
def test_rlx_loader_names_what_is_wrong(case: str, tmp_path: Path) -> None:
    edit, fragment = RLX_CASES[case]
    path = _rlx_case(tmp_path, edit)
    with pytest.raises(ModelFileError) as err:
        load_model(path)
    msg = str(err.value)
    assert msg.startswith(f"{path}: ") and "\n" not in msg and len(msg) < len(str(path)) + 420
    assert fragment in msg
