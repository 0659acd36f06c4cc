"""Write MIR graphs as ``.tflite`` flatbuffers (schema version 3).

The writer uses the ``tflite`` package's generated builder functions, so field
slots match the schema. Output is deterministic: the same graph always gives
the same bytes (tensors, buffers and operator codes are numbered in graph
order, and nothing depends on dict order of anything but the graph).

Layout choices that TFLite Micro relies on:

- buffer 0 is the empty sentinel, and every non-constant tensor uses it;
- constant data vectors are 16-byte aligned (kernels read int32/float data
  straight out of the flatbuffer);
- operator codes carry both ``builtin_code`` and ``deprecated_builtin_code``
  (``min(code, 127)``), the way newer converters write them, so old and new
  readers agree.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import flatbuffers
import numpy as np

from rlx_edge._io import atomic_write_bytes
from rlx_edge.errors import UnsupportedOpError
from rlx_edge.frontends._tflite_ops import BUILTINS, CUSTOM_EXPORTED_AS, EXPORTED_OPS, Builtin, exported_as
from rlx_edge.frontends._tflite_schema import (
    DTYPE_TO_TFL,
    FILE_IDENTIFIER,
    OP_CODES,
    PADDING_TO_TFL,
    SCHEMA_VERSION,
    pack_int4,
    schema_module,
)
from rlx_edge.ir.dtype import DType
from rlx_edge.ir.graph import Graph, Node
from rlx_edge.ir.ops import QContext, get_op, same_pads
from rlx_edge.ir.ops.reduce import int8_softmax_refusal
from rlx_edge.ir.rules import RuleTable
from rlx_edge.ir.types import QuantParams, TensorType

_DATA_ALIGN = 16

# Builtins whose int8 kernels TFLite Micro runs with INT4 (packed) weights, and the op version
# TFLite's op_version gives them (tools/versioning/op_version.cc); other ops refuse int4 tensors.
_INT4_VERSIONS = {"CONV_2D": 7, "DEPTHWISE_CONV_2D": 7, "FULLY_CONNECTED": 10}
_INT4_OPS = {"conv2d": "CONV_2D", "depthwise_conv2d": "DEPTHWISE_CONV_2D", "fully_connected": "FULLY_CONNECTED"}


@dataclass
class _OpOut:
    """One TFLite operator to write: its builtin name, tensor indices and options."""

    opname: str
    inputs: list[int]
    outputs: list[int]
    table: str | None = None  # options table name, e.g. "Conv2DOptions"
    fields: dict[str, Any] = field(default_factory=dict)  # scalar fields (CamelCase)
    vectors: dict[str, np.ndarray] = field(default_factory=dict)  # int32 vector fields
    custom_code: str | None = None  # a CUSTOM operator's name (opname is then "CUSTOM")
    custom_options: bytes = b""  # its options, a flexbuffer map


class _Writer:
    """One subgraph being written; ``root`` (the main subgraph's writer) holds what the model shares."""

    def __init__(self, graph: Graph, root: _Writer | None = None) -> None:
        self.g = graph
        self.tensors: list[tuple[str, TensorType, int]] = []  # name, type, buffer index
        self.tensor_index: dict[str, int] = {}
        # buffer 0: the empty sentinel; buffers and subgraphs are the model's, shared by every subgraph
        self.buffers: list[bytes] = [b""] if root is None else root.buffers
        self.subgraphs: list[_Writer] = [self] if root is None else root.subgraphs
        self.root = root or self
        self.ops: list[_OpOut] = []
        self.widened = _int4_as_int8(graph)
        # SVDF states: tensors TFLite keeps across invokes (is_variable), neither model input nor output
        self.variables: set[int] = set()

    # tensors ----------------------------------------------------------------
    def tensor(self, name: str) -> int:
        """Index of IR value ``name``, adding it (and its constant data) on first use."""
        if name in self.tensor_index:
            return self.tensor_index[name]
        t = self.g.types[name]
        if name in self.widened:  # same values and scales, one per byte (see _int4_as_int8)
            t = TensorType(t.shape, DType.i8, replace(t.quant, storage=DType.i8))
        buf = 0
        if name in self.g.params:
            buf = self.add_buffer(self.g.params[name], t.dtype)
        return self.add_tensor(name, t, buf)

    def add_tensor(self, name: str, t: TensorType, buf: int) -> int:
        self.tensors.append((name, t, buf))
        self.tensor_index[name] = len(self.tensors) - 1
        return len(self.tensors) - 1

    def add_buffer(self, arr: np.ndarray, dtype: DType) -> int:
        if dtype == DType.i4:
            self.buffers.append(pack_int4(arr))  # TFLite's INT4 buffers are packed two per byte
            return len(self.buffers) - 1
        le = np.ascontiguousarray(arr, dtype=dtype.numpy.newbyteorder("<"))
        self.buffers.append(le.tobytes())
        return len(self.buffers) - 1

    def const_i32(self, name: str, values: Any) -> int:
        """An int32 constant tensor for an operand TFLite takes as a tensor (shape, paddings, axes)."""
        arr = np.asarray(values, dtype=np.int32)
        return self.const_tensor(name, arr, TensorType(arr.shape, DType.i32))

    def const_tensor(self, name: str, arr: np.ndarray, t: TensorType) -> int:
        """A constant tensor of type ``t`` holding ``arr``, under a name no value of the graph has."""
        base, k = name, 1
        while name in self.tensor_index or name in self.g.types:
            name = f"{base}_{k}"
            k += 1
        return self.add_tensor(name, t, self.add_buffer(arr, t.dtype))

    def subgraph(self, graph: Graph) -> int:
        """Write ``graph`` (a control-flow op's branch or body) as a subgraph of the model; its index."""
        w = _Writer(graph, self.root)
        self.subgraphs.append(w)
        _fill(w)
        return self.subgraphs.index(w)

    # serialization -------------------------------------------------------------
    def build(self) -> bytes:
        size_hint = sum(len(b) for b in self.buffers) + 64 * 1024
        b = flatbuffers.Builder(size_hint)
        m = {n: schema_module(n) for n in ("Model", "SubGraph", "Tensor", "QuantizationParameters", "Buffer")}
        m.update({n: schema_module(n) for n in ("Operator", "OperatorCode")})

        # operator codes in order of first use
        codes: list[tuple[str, int]] = []  # builtin name, or a custom operator's code
        code_index: dict[tuple[str, int], int] = {}
        op_code_idx: list[int] = []
        for sub in self.subgraphs:
            for op in sub.ops:
                key = (op.custom_code or op.opname, sub.version(op))
                if key not in code_index:
                    code_index[key] = len(codes)
                    codes.append(key)
                op_code_idx.append(code_index[key])

        buffer_offs = []
        for data in self.buffers:
            data_off = None
            if data:
                b.StartVector(1, len(data), _DATA_ALIGN)
                b.head -= len(data)
                b.Bytes[b.head : b.head + len(data)] = data
                data_off = b.EndVector()
            m["Buffer"].Start(b)
            if data_off is not None:
                m["Buffer"].AddData(b, data_off)
            buffer_offs.append(m["Buffer"].End(b))

        sgs, first = [], 0
        for k, sub in enumerate(self.subgraphs):
            sgs.append(sub.build_subgraph(b, m, op_code_idx[first : first + len(sub.ops)], "main" if k == 0 else None))
            first += len(sub.ops)

        code_offs = []
        for opname, version in codes:
            custom = None if opname in OP_CODES else b.CreateString(opname)
            code = OP_CODES["CUSTOM" if custom is not None else opname]
            m["OperatorCode"].Start(b)
            m["OperatorCode"].AddDeprecatedBuiltinCode(b, min(code, 127))
            m["OperatorCode"].AddBuiltinCode(b, code)
            if custom is not None:
                m["OperatorCode"].AddCustomCode(b, custom)
            m["OperatorCode"].AddVersion(b, version)
            code_offs.append(m["OperatorCode"].End(b))

        codes_vec = _table_vector(b, code_offs)
        sgs_vec = _table_vector(b, sgs)
        bufs_vec = _table_vector(b, buffer_offs)
        desc = b.CreateString("rlx-edge")
        m["Model"].Start(b)
        m["Model"].AddVersion(b, SCHEMA_VERSION)
        m["Model"].AddOperatorCodes(b, codes_vec)
        m["Model"].AddSubgraphs(b, sgs_vec)
        m["Model"].AddDescription(b, desc)
        m["Model"].AddBuffers(b, bufs_vec)
        model = m["Model"].End(b)
        b.Finish(model, file_identifier=FILE_IDENTIFIER)
        return bytes(b.Output())

    def build_subgraph(self, b: flatbuffers.Builder, m: dict, code_idx: list[int], label: str | None) -> int:
        """This writer's SubGraph table (named ``label``, else after its graph)."""
        tensor_offs = [
            self.build_tensor(b, m, name, t, buf, k in self.variables) for k, (name, t, buf) in enumerate(self.tensors)
        ]
        op_offs = [self.build_op(b, m, op, idx) for op, idx in zip(self.ops, code_idx)]
        sg_name = b.CreateString(label or self.g.name)
        tensors_vec = _table_vector(b, tensor_offs)
        ops_vec = _table_vector(b, op_offs)
        ins, outs = ([self.tensor_index[n] for n in names] for names in (self.g.inputs, self.g.outputs))
        ins_vec = b.CreateNumpyVector(np.array([i for i in ins if i not in self.variables], np.int32))
        outs_vec = b.CreateNumpyVector(np.array([i for i in outs if i not in self.variables], np.int32))
        m["SubGraph"].Start(b)
        m["SubGraph"].AddTensors(b, tensors_vec)
        m["SubGraph"].AddInputs(b, ins_vec)
        m["SubGraph"].AddOutputs(b, outs_vec)
        m["SubGraph"].AddOperators(b, ops_vec)
        m["SubGraph"].AddName(b, sg_name)
        return m["SubGraph"].End(b)

    def build_tensor(
        self, b: flatbuffers.Builder, m: dict, name: str, t: TensorType, buf: int, variable: bool = False
    ) -> int:
        shape = b.CreateNumpyVector(np.array([int(d) for d in t.shape], np.int32))
        q_off = _quant(b, m["QuantizationParameters"], t.quant, t.rank) if t.quant is not None else None
        name_off = b.CreateString(name)
        mt = m["Tensor"]
        mt.Start(b)
        mt.AddShape(b, shape)
        mt.AddType(b, DTYPE_TO_TFL[t.dtype])
        mt.AddBuffer(b, buf)
        mt.AddName(b, name_off)
        if q_off is not None:
            mt.AddQuantization(b, q_off)
        if variable:
            mt.AddIsVariable(b, True)
        return mt.End(b)

    def build_op(self, b: flatbuffers.Builder, m: dict, op: _OpOut, code_idx: int) -> int:
        opts = None
        if op.table is not None:
            mod = schema_module(op.table)
            vecs = {k: b.CreateNumpyVector(np.asarray(v, np.int32)) for k, v in op.vectors.items()}
            mod.Start(b)
            for k, v in op.fields.items():
                getattr(mod, f"Add{k}")(b, v)
            for k, v in vecs.items():
                getattr(mod, f"Add{k}")(b, v)
            opts = mod.End(b)
        ins = b.CreateNumpyVector(np.array(op.inputs, np.int32))
        outs = b.CreateNumpyVector(np.array(op.outputs, np.int32))
        custom = b.CreateNumpyVector(np.frombuffer(op.custom_options, np.uint8)) if op.custom_options else None
        mo = m["Operator"]
        mo.Start(b)
        mo.AddOpcodeIndex(b, code_idx)
        mo.AddInputs(b, ins)
        mo.AddOutputs(b, outs)
        if custom is not None:
            mo.AddCustomOptions(b, custom)  # format 0: flexbuffers, the schema's default
        if opts is not None:
            options_type = getattr(schema_module("BuiltinOptions").BuiltinOptions, op.table)
            mo.AddBuiltinOptionsType(b, options_type)
            mo.AddBuiltinOptions(b, opts)
        return mo.End(b)

    def version(self, op: _OpOut) -> int:
        """The op version a reader needs: float kernels are version 1, quantized ones are declared."""
        declared = BUILTINS.get(op.opname)
        types = [self.tensors[i][1] for i in (*op.inputs, *op.outputs) if i >= 0]
        if declared is None:
            return 1
        if op.opname in _INT4_VERSIONS and any(t.dtype == DType.i4 for t in types):
            return _INT4_VERSIONS[op.opname]
        if any(t.dtype == DType.i16 and t.quant is not None for t in types):
            return declared.version(int16=True)
        if any(t.dtype in (DType.i8, DType.u8) and t.quant is not None for t in types):
            return declared.version(int16=False)
        return 1


def _table_vector(b: flatbuffers.Builder, offs: list[int]) -> int:
    b.StartVector(4, len(offs), 4)
    for o in reversed(offs):
        b.PrependUOffsetTRelative(o)
    return b.EndVector()


def _quant(b: flatbuffers.Builder, mq: Any, q: QuantParams, rank: int) -> int:
    scale = b.CreateNumpyVector(np.asarray(q.scale, "<f4"))
    zp = b.CreateNumpyVector(np.asarray(q.zero_point, "<i8"))
    axis = 0 if q.axis is None else (q.axis % rank if rank else 0)
    mq.Start(b)
    mq.AddScale(b, scale)
    mq.AddZeroPoint(b, zp)
    mq.AddQuantizedDimension(b, axis)
    return mq.End(b)


# per-op export rules ---------------------------------------------------------------
# Which builtin writes an IR op, its options table and its fields come from the
# declarations in _tflite_ops; an op whose builtin needs nothing more (its
# inputs as they are, fields from attributes) has no rule here. A rule returns
# the operator, or why the node cannot be written.
_Rule = Callable[[_Writer, Node], "_OpOut | str"]
_RULES: RuleTable[_Rule] = RuleTable("tflite export", keys=EXPORTED_OPS, what="op")


def _ins(w: _Writer, node: Node) -> list[int]:
    return [-1 if v is None else w.tensor(v) for v in node.inputs]


def _outs(w: _Writer, node: Node) -> list[int]:
    return [w.tensor(o) for o in node.outputs]


def _builtin(node: Node) -> Builtin:
    """The one builtin declared for ``node``'s op (an op with several has a rule that picks)."""
    (declared,) = exported_as(node.op)
    return declared


def _op_out(
    w: _Writer,
    node: Node,
    declared: Builtin,
    ins: list[int] | None = None,
    vectors: dict[str, np.ndarray] | None = None,
    outs: list[str] | None = None,
    **computed: Any,
) -> _OpOut:
    """``node`` as ``declared``, writing the outputs ``outs`` (all the node's by default). Inputs get their
    tensor numbers before outputs, as in every file we write."""
    ins = _ins(w, node) if ins is None else ins
    table = declared.options if declared.write_options else None
    fields = declared.option_fields(node.attrs, **computed) if table else {}
    written = _outs(w, node) if outs is None else [w.tensor(v) for v in outs]
    return _OpOut(declared.name, ins, written, table, fields, dict(vectors or {}))


def _plain(w: _Writer, node: Node) -> _OpOut:
    return _op_out(w, node, _builtin(node))


def _tfl_padding(w: _Writer, node: Node, kh: int, kw: int) -> int | str:
    """TFLite padding code, or why the node's padding has none."""
    a = node.attrs
    if a["padding"] != "explicit":
        return PADDING_TO_TFL[a["padding"]]
    pads = tuple(a["pads"])
    if not any(pads):
        return PADDING_TO_TFL["valid"]
    x = w.g.types[node.inputs[0]]
    dil = a.get("dilations", (1, 1))
    same = same_pads(int(x.shape[1]), kh, a["strides"][0], dil[0]) + same_pads(
        int(x.shape[2]), kw, a["strides"][1], dil[1]
    )
    if pads == same:
        return PADDING_TO_TFL["same"]
    return f"{node.op} with explicit pads {list(pads)} (neither VALID nor SAME)"


@_RULES.rule("conv2d", "depthwise_conv2d")
def _conv(w: _Writer, node: Node) -> _OpOut | str:
    wt = w.g.types[node.inputs[1]]
    pad = _tfl_padding(w, node, int(wt.shape[1]), int(wt.shape[2]))
    if isinstance(pad, str):
        return pad
    return _op_out(w, node, _builtin(node), Padding=pad)


@_RULES.rule("fully_connected")
def _fc(w: _Writer, node: Node) -> _OpOut:
    keep = w.g.types[node.inputs[0]].rank != 2  # the IR keeps leading dims; rank 2 is TFLite's default form
    return _op_out(w, node, _builtin(node), KeepNumDims=keep)


@_RULES.rule("avg_pool2d", "max_pool2d", "l2_pool2d")
def _pool(w: _Writer, node: Node) -> _OpOut | str:
    kh, kw = node.attrs["kernel"]
    pad = _tfl_padding(w, node, kh, kw)
    if isinstance(pad, str):
        return pad
    return _op_out(w, node, _builtin(node), Padding=pad)


@_RULES.rule("reshape")
def _reshape(w: _Writer, node: Node) -> _OpOut:
    shape = [int(d) for d in w.g.types[node.outputs[0]].shape]
    ins = _ins(w, node) + [w.const_i32(f"{node.name}/shape", shape)]
    return _op_out(w, node, _builtin(node), ins, vectors={"NewShape": np.array(shape)})


@_RULES.rule("softmax", "log_softmax", "l2_normalize")
def _softmax(w: _Writer, node: Node) -> _OpOut | str:
    if len(node.inputs) > 1 and node.inputs[1] is not None:
        return "softmax with a mask (TFLite's SOFTMAX takes none)"
    rank = w.g.types[node.inputs[0]].rank
    if node.attrs.get("axis", -1) not in (-1, rank - 1):
        return f"{node.op} over an axis other than the last"
    xt = w.g.types[node.inputs[0]]
    if node.op == "softmax" and xt.dtype == DType.i8 and xt.quant is not None and xt.quant.scale.size == 1:
        why = int8_softmax_refusal(node.attrs.get("beta", 1.0), float(xt.quant.scale[0]))
        if why is not None:  # a model TFLite Micro would abort on
            return why
    return _plain(w, node)


@_RULES.rule("svdf")
def _svdf(w: _Writer, node: Node) -> _OpOut | str:
    """The state input and the updated-state output become one variable tensor (see tflite.py's import).

    That needs the state to be a graph input that only this node reads and the update to
    be a graph output (or unused): a caller threading one into the other, as TFLite does.
    """
    x, wf, wt, state = node.inputs[:4]
    bias = node.inputs[4] if len(node.inputs) > 4 else None
    update = node.outputs[1]
    readers = [n for n in w.g.nodes if state in n.inputs]
    if state not in w.g.inputs or len(readers) != 1 or any(update in n.inputs for n in w.g.nodes):
        return "svdf whose state is not a graph input read by it alone, with its update a graph output"
    ins = [w.tensor(x), w.tensor(wf), w.tensor(wt), -1, w.tensor(state)]
    if bias is not None:
        ins[3] = w.tensor(bias)
    else:  # TFLite Micro's SVDF dereferences its bias unchecked (it crashes without one): zeros mean the same
        units = int(w.g.types[node.outputs[0]].shape[1])
        st, wtt = w.g.types[state], w.g.types[wt]
        if st.quant is None:
            ins[3] = w.const_tensor(f"{node.name}/bias", np.zeros(units, np.float32), TensorType((units,), DType.f32))
        else:
            scale = np.float32(st.quant.scale[0]) * np.float32(wtt.quant.scale[0])
            bq = QuantParams(scale, 0, storage=DType.i32)
            ins[3] = w.const_tensor(f"{node.name}/bias", np.zeros(units, np.int32), TensorType((units,), DType.i32, bq))
    w.variables.add(ins[4])
    w.tensor_index[update] = ins[4]
    return _op_out(w, node, _builtin(node), ins, outs=node.outputs[:1], AsymmetricQuantizeInputs=False)


@_RULES.rule("transpose_conv2d")
def _transpose_conv(w: _Writer, node: Node) -> _OpOut:
    """TFLite's inputs are (output shape, weights, input, bias); without a bias the op has three."""
    x, wv, b = (node.inputs + [None])[:3]
    ins = [w.const_i32(f"{node.name}/output_shape", node.attrs["output_shape"]), w.tensor(wv), w.tensor(x)]
    if b is not None:
        ins.append(w.tensor(b))
    return _op_out(w, node, _builtin(node), ins)


@_RULES.rule("lstm")
def _lstm(w: _Writer, node: Node) -> _OpOut | str:
    """UNIDIRECTIONAL_SEQUENCE_LSTM: hidden and cell state become variable tensors as SVDF's state does.

    TFLite's 24 inputs: the node's first 13 at 0-8 and 12-15, the states at 18 and 19, the
    variants' slots (peephole, projection, layer norm) absent.
    """
    states, updates = node.inputs[13:15], node.outputs[1:3]
    for state, update in zip(states, updates):
        readers = [n for n in w.g.nodes if state in n.inputs]
        if state not in w.g.inputs or len(readers) != 1 or any(update in n.inputs for n in w.g.nodes):
            return "lstm whose states are not graph inputs read by it alone, with their updates graph outputs"
    if states[0] == states[1]:
        return "lstm whose hidden and cell state are one value"
    ins = [-1] * 24
    for j, v in zip((*range(9), *range(12, 16), 18, 19), node.inputs):
        ins[j] = w.tensor(v)
    for j, update in zip((18, 19), updates):
        w.variables.add(ins[j])
        w.tensor_index[update] = ins[j]
    return _op_out(
        w,
        node,
        _builtin(node),
        ins,
        outs=node.outputs[:1],
        FusedActivationFunction=schema_module("ActivationFunctionType").ActivationFunctionType.TANH,
        ProjClip=0.0,
        AsymmetricQuantizeInputs=False,
        DiagonalRecurrentTensors=False,
    )


@_RULES.rule("cast")
def _cast(w: _Writer, node: Node) -> _OpOut:
    src, dst = w.g.types[node.inputs[0]].dtype, w.g.types[node.outputs[0]].dtype
    if src == DType.f16 and dst == DType.f32:  # how TFLite stores float16 weights
        return _op_out(w, node, BUILTINS["DEQUANTIZE"])
    return _op_out(w, node, BUILTINS["CAST"], InDataType=DTYPE_TO_TFL[src], OutDataType=DTYPE_TO_TFL[dst])


@_RULES.rule("select_v2")
def _select_v2(w: _Writer, node: Node) -> _OpOut | str:
    out_q = w.g.types[node.outputs[0]].quant
    for v in node.inputs[1:]:
        q = w.g.types[v].quant
        if out_q is not None and (q is None or not _same_quant(q, out_q)):
            return "select_v2 with x or y quantized unlike its output (TFLite Micro's SELECT_V2 copies stored values)"
    return _plain(w, node)


@_RULES.rule("maximum", "minimum")
def _minmax(w: _Writer, node: Node) -> _OpOut | str:
    out_q = w.g.types[node.outputs[0]].quant
    for v in node.inputs:
        q = w.g.types[v].quant
        if out_q is not None and (q is None or not _same_quant(q, out_q)):
            return f"{node.op} with an input quantized unlike its output (TFLite Micro compares stored values)"
    return _plain(w, node)


@_RULES.rule("matmul")
def _matmul(w: _Writer, node: Node) -> _OpOut | str:
    ranks = [w.g.types[v].rank for v in node.inputs]
    if not all(2 <= r <= 5 for r in ranks):
        return f"matmul of ranks {ranks[0]} and {ranks[1]} (TFLite's BATCH_MATMUL takes 2 to 5; reshape a vector)"
    return _plain(w, node)


@_RULES.rule("add_n")
def _add_n(w: _Writer, node: Node) -> _OpOut | str:
    qs = [w.g.types[v].quant for v in node.inputs]
    if qs[0] is not None and not all(_same_quant(q, qs[0]) for q in qs[1:]):
        return "add_n with inputs quantized unlike each other (TFLite Micro's ADD_N needs one scale and zero point)"
    return _plain(w, node)


@_RULES.rule("relu6")
def _relu6(w: _Writer, node: Node) -> _OpOut | str:
    qi, qo = (w.g.types[v].quant for v in (node.inputs[0], node.outputs[0]))
    if qo is not None and (qi is None or not _same_quant(qi, qo)):
        return "relu6 quantized unlike its input (TFLite Micro's RELU6 clamps stored values without rescaling)"
    return _plain(w, node)


@_RULES.rule("concat")
def _concat(w: _Writer, node: Node) -> _OpOut | str:
    qo = w.g.types[node.outputs[0]].quant
    if qo is not None and not all(_same_quant(w.g.types[v].quant or qo, qo) for v in node.inputs):
        return "concat with inputs quantized unlike its output (TFLite Micro's CONCATENATION copies stored values)"
    return _plain(w, node)


@_RULES.rule("dequantize")
def _dequantize(w: _Writer, node: Node) -> _OpOut | str:
    q = w.g.types[node.inputs[0]].quant
    if q is not None and q.scale.size != 1:
        return "per-channel dequantize (TFLite Micro's DEQUANTIZE applies one scale and zero point)"
    return _plain(w, node)


def _same_quant(a: QuantParams, b: QuantParams) -> bool:
    """Equal float32 scales and zero points: the same stored values mean the same reals."""
    return np.array_equal(np.float32(a.scale), np.float32(b.scale)) and np.array_equal(a.zero_point, b.zero_point)


@_RULES.rule("pad")
def _pad(w: _Writer, node: Node) -> _OpOut | str:
    pads = np.asarray(node.attrs["pads"], np.int32).reshape(-1, 2)
    ins = _ins(w, node) + [w.const_i32(f"{node.name}/paddings", pads)]
    if float(node.attrs.get("value", 0.0)) == 0.0:
        return _op_out(w, node, BUILTINS["PAD"], ins)
    # PADV2: the fill as a one-element tensor of the input's type, on the output's grid
    t = w.g.types[node.outputs[0]]
    if t.quant is not None:
        q = t.quant
        if q.scale.size != 1:
            return "pad with a non-zero value of a per-channel tensor"
        ctx = QContext(node.name, (w.g.types[node.inputs[0]],), (t,))
        fill = np.array([get_op("pad").prepare_node(ctx, node.attrs).fill], t.dtype.numpy)
    else:
        fill = np.array([node.attrs["value"]], t.dtype.numpy)
    ins.append(w.const_tensor(f"{node.name}/constant_values", fill, TensorType((1,), t.dtype, t.quant)))
    return _op_out(w, node, BUILTINS["PADV2"], ins)


@_RULES.rule("argmax", "argmin")
def _arg_reduce(w: _Writer, node: Node) -> _OpOut | str:
    if node.attrs["keepdims"]:
        return f"{node.op} keeping the searched axis (TFLite's ARG_MAX / ARG_MIN drop it)"
    ins = _ins(w, node) + [w.const_i32(f"{node.name}/axis", [node.attrs["axis"]])]
    return _op_out(w, node, _builtin(node), ins, OutputType=DTYPE_TO_TFL[w.g.types[node.outputs[0]].dtype])


@_RULES.rule("mean", "sum", "reduce_max", "reduce_min", "reduce_all")
def _mean(w: _Writer, node: Node) -> _OpOut:
    axes = node.attrs.get("axes")
    if axes is None:  # all axes
        axes = tuple(range(w.g.types[node.inputs[0]].rank))
    return _op_out(w, node, _builtin(node), _ins(w, node) + [w.const_i32(f"{node.name}/axes", list(axes))])


@_RULES.rule("cumsum")
def _cumsum(w: _Writer, node: Node) -> _OpOut:
    axis = [int(node.attrs["axis"])]
    return _op_out(w, node, _builtin(node), _ins(w, node) + [w.const_i32(f"{node.name}/axis", axis)])


@_RULES.rule("transpose")
def _transpose(w: _Writer, node: Node) -> _OpOut:
    perm = node.attrs.get("perm")
    if perm is None:
        perm = tuple(reversed(range(w.g.types[node.inputs[0]].rank)))
    return _op_out(w, node, _builtin(node), _ins(w, node) + [w.const_i32(f"{node.name}/perm", list(perm))])


@_RULES.rule("slice")
def _slice(w: _Writer, node: Node) -> _OpOut | str:
    a = node.attrs
    rank = w.g.types[node.inputs[0]].rank
    if a.get("axes") is not None and tuple(a["axes"]) != tuple(range(len(a["begin"]))):
        return "slice over a subset of axes"
    shape = [int(d) for d in w.g.types[node.inputs[0]].shape]
    strides = list(a.get("strides") or [1] * len(a["begin"]))
    if len(a["begin"]) != rank or rank == 0:
        return "slice of a scalar or with fewer bounds than axes"
    picked = _slice_or_reverse(w, node, shape, strides)
    if picked is not None:
        return picked
    # numpy's bounds resolved here; a walk backwards through the first element has no end
    # index TFLite reads as such (-1 counts from the end), so its end mask says it
    begin, end, end_mask = [], [], 0
    for i, (b, e, st, d) in enumerate(zip(a["begin"], a["end"], strides, shape)):
        r = range(*slice(b, e, st).indices(d))
        if not r:
            b, e, strides[i] = 0, 0, 1
        elif st < 0 and r.stop < 0:
            b, e, end_mask = r.start, 0, end_mask | 1 << i
        else:
            b, e = r.start, r.stop
        begin.append(b)
        end.append(e)
    ins = _ins(w, node) + [
        w.const_i32(f"{node.name}/begin", begin),
        w.const_i32(f"{node.name}/end", end),
        w.const_i32(f"{node.name}/strides", strides),
    ]
    out = _op_out(w, node, BUILTINS["STRIDED_SLICE"], ins)
    if end_mask:
        out.table, out.fields = "StridedSliceOptions", {"EndMask": end_mask}
    return out


_SLICE_MAX_RANK = 5  # TFLite Micro's SLICE and REVERSE_V2 kernels take up to 5 axes


def _slice_or_reverse(w: _Writer, node: Node, shape: list[int], strides: list[int]) -> _OpOut | None:
    """The builtin TensorFlow's converter writes for such a slice: REVERSE_V2 for whole axes, some
    walked backwards (TFLite Micro reverses a contiguous run of axes only), SLICE for a non-empty
    stride-1 slice; None leaves it to STRIDED_SLICE."""
    a = node.attrs
    spans = [range(*slice(b, e, st).indices(d)) for b, e, st, d in zip(a["begin"], a["end"], strides, shape)]
    if len(shape) > _SLICE_MAX_RANK or not all(spans):
        return None
    # an axis of one element is the same walked either way
    backwards = [i for i, (r, d) in enumerate(zip(spans, shape)) if r.step < 0 and d > 1]
    whole = all(len(r) == d for r, d in zip(spans, shape))
    if whole and backwards and backwards == list(range(backwards[0], backwards[-1] + 1)):
        ins = _ins(w, node) + [w.const_i32(f"{node.name}/axis", backwards)]
        return _op_out(w, node, BUILTINS["REVERSE_V2"], ins)
    if all(r.step == 1 or len(r) == 1 for r in spans):
        ins = _ins(w, node) + [
            w.const_i32(f"{node.name}/begin", [r.start for r in spans]),
            w.const_i32(f"{node.name}/size", [len(r) for r in spans]),
        ]
        return _op_out(w, node, BUILTINS["SLICE"], ins)
    return None


@_RULES.rule("unsqueeze")
def _unsqueeze(w: _Writer, node: Node) -> _OpOut:
    axes = node.attrs["axes"]
    if len(axes) == 1:
        return _op_out(w, node, _builtin(node), _ins(w, node) + [w.const_i32(f"{node.name}/axis", [axes[0]])])
    return _as_reshape(w, node)


def _as_reshape(w: _Writer, node: Node) -> _OpOut:
    """A view the TFLite builtins cannot say in one op, written as the RESHAPE it is."""
    shape = [int(d) for d in w.g.types[node.outputs[0]].shape]
    ins = _ins(w, node) + [w.const_i32(f"{node.name}/shape", shape)]
    return _op_out(w, node, BUILTINS["RESHAPE"], ins, vectors={"NewShape": np.array(shape)})


@_RULES.rule("squeeze")
def _squeeze(w: _Writer, node: Node) -> _OpOut:
    rank = w.g.types[node.inputs[0]].rank
    dims = np.array(sorted(a % rank for a in node.attrs["axes"]))
    return _op_out(w, node, _builtin(node), vectors={"SqueezeDims": dims})


@_RULES.rule("stack")
def _stack(w: _Writer, node: Node) -> _OpOut | str:
    q = w.g.types[node.outputs[0]].quant
    if q is not None and any(w.g.types[v].quant != q for v in node.inputs):
        return "stack of inputs quantized unlike its output (TFLite's PACK copies bytes)"
    return _op_out(w, node, _builtin(node), ValuesCount=len(node.inputs))


@_RULES.rule("split")
def _split(w: _Writer, node: Node) -> _OpOut:
    sizes = list(node.attrs["sizes"])
    if sizes[0] > 0 and len(set(sizes)) == 1:  # equal parts: SPLIT, as TensorFlow's converter writes them
        ins = [w.const_i32(f"{node.name}/axis", node.attrs["axis"]), *_ins(w, node)]  # the axis comes first
        return _op_out(w, node, BUILTINS["SPLIT"], ins, NumSplits=len(sizes))
    ins = _ins(w, node) + [
        w.const_i32(f"{node.name}/size_splits", sizes),
        w.const_i32(f"{node.name}/axis", [node.attrs["axis"]]),
    ]
    return _op_out(w, node, BUILTINS["SPLIT_V"], ins, NumSplits=len(sizes))


@_RULES.rule("mirror_pad")
def _mirror_pad(w: _Writer, node: Node) -> _OpOut:
    pads = np.asarray(node.attrs["pads"], np.int32).reshape(-1, 2)
    return _op_out(w, node, _builtin(node), _ins(w, node) + [w.const_i32(f"{node.name}/paddings", pads)])


@_RULES.rule("space_to_batch_nd", "batch_to_space_nd")
def _space_batch(w: _Writer, node: Node) -> _OpOut:
    a = node.attrs
    edges = a["pads"] if node.op == "space_to_batch_nd" else a["crops"]
    ins = _ins(w, node) + [
        w.const_i32(f"{node.name}/block_shape", list(a["block_shape"])),
        w.const_i32(f"{node.name}/{'paddings' if node.op == 'space_to_batch_nd' else 'crops'}",
                    np.asarray(edges, np.int32).reshape(-1, 2)),
    ]  # fmt: skip
    return _op_out(w, node, _builtin(node), ins)


@_RULES.rule("broadcast_to")
def _broadcast_to(w: _Writer, node: Node) -> _OpOut:
    shape = w.const_i32(f"{node.name}/shape", list(node.attrs["shape"]))
    return _op_out(w, node, _builtin(node), _ins(w, node) + [shape])


@_RULES.rule("gather")
def _gather(w: _Writer, node: Node) -> _OpOut | str:
    """GATHER (EMBEDDING_LOOKUP, read as a gather, is one too). TFLite Micro's kernel takes int32
    positions in [0, n) only (it refuses int64 ones when loading, negative ones when invoked):
    constant indices are written so, the same positions; computed int64 ones are refused here."""
    x, idx = node.inputs
    if idx not in w.g.params:
        if w.g.types[idx].dtype != DType.i32:
            return "gather with computed int64 indices (TFLite Micro's GATHER reads int32 positions only)"
        return _op_out(w, node, BUILTINS["GATHER"])
    arr = np.asarray(w.g.params[idx])
    n = int(w.g.types[x].shape[node.attrs["axis"] % w.g.types[x].rank])
    if arr.dtype == np.int32 and not (arr < 0).any():
        return _op_out(w, node, BUILTINS["GATHER"])
    pos = np.where(arr < 0, arr + n, arr).astype(np.int32)  # the IR's negatives count from the end
    t = TensorType(tuple(arr.shape), DType.i32)
    shared = idx in w.tensor_index or idx in w.g.outputs or sum(idx in m.inputs for m in w.g.nodes) > 1
    if shared:  # others read the indices as they are: these positions under a name of their own
        ins = [w.tensor(x), w.const_tensor(idx, pos, t)]
    else:
        ins = [w.tensor(x), w.add_tensor(idx, t, w.add_buffer(pos, DType.i32))]
    return _op_out(w, node, BUILTINS["GATHER"], ins)


@_RULES.rule("while_")
def _while(w: _Writer, node: Node) -> _OpOut | str:
    if node.attrs["max_trips"] is not None:
        return "while_ with max_trips (TFLite's WHILE has no trip bound; lower_control_flow unrolls it)"
    cond, body = w.subgraph(node.attrs["cond"]), w.subgraph(node.attrs["body"])
    return _op_out(w, node, _builtin(node), CondSubgraphIndex=cond, BodySubgraphIndex=body)


@_RULES.rule("if_")
def _if(w: _Writer, node: Node) -> _OpOut:
    then_, else_ = w.subgraph(node.attrs["then_branch"]), w.subgraph(node.attrs["else_branch"])
    return _op_out(w, node, _builtin(node), ThenSubgraphIndex=then_, ElseSubgraphIndex=else_)


@_RULES.rule("resize_nearest_neighbor", "resize_bilinear")
def _resize(w: _Writer, node: Node) -> _OpOut:
    size = w.const_i32(f"{node.name}/size", list(node.attrs["size"]))
    return _op_out(w, node, _builtin(node), _ins(w, node) + [size])


@_RULES.rule("detection_postprocess")
def _detection_postprocess(w: _Writer, node: Node) -> _OpOut:
    """TFLite's custom op TFLite_Detection_PostProcess, its options a flexbuffer map."""
    from flatbuffers import flexbuffers

    custom = CUSTOM_EXPORTED_AS[node.op]
    options: dict[str, Any] = {"max_classes_per_detection": 1}  # the one value the op covers
    for key, attr in custom.options:
        if attr is not None:
            v = node.attrs[attr]
            options[key] = float(np.float32(v)) if isinstance(v, float) else v
    blob = bytes(flexbuffers.Dumps(options))
    return _OpOut("CUSTOM", _ins(w, node), _outs(w, node), custom_code=custom.code, custom_options=blob)


# entry points ------------------------------------------------------------------------------
def to_tflite_bytes(graph: Graph) -> bytes:
    """Serialize ``graph`` (float or quantized MIR) as a ``.tflite`` flatbuffer.

    Raises UnsupportedOpError naming every node TFLite cannot express.
    """
    w = _Writer(graph)
    _fill(w)
    return w.build()


def _fill(w: _Writer) -> None:
    """Add ``w``'s graph's inputs, operators and outputs; raise UnsupportedOpError naming every node TFLite
    cannot express."""
    graph = w.g
    problems: dict[str, list[str]] = {}
    for node in graph.nodes:
        if node.op not in EXPORTED_OPS:
            problems.setdefault(node.op, []).append(node.name)
    for name, t in graph.types.items():
        if t.dtype not in DTYPE_TO_TFL:
            problems.setdefault(f"tensors of type {t.dtype}", []).append(name)
    for why, names in _int4_problems(graph).items():
        problems.setdefault(why, []).extend(names)
    if not problems:
        for name in graph.inputs:
            w.tensor(name)
        for node in graph.nodes:
            got = _RULES.get(node.op, _plain)(w, node)
            if isinstance(got, str):
                problems.setdefault(got, []).append(node.name)
            else:
                w.ops.append(got)
    if problems:
        parts = [f"{k} (at {', '.join(repr(n) for n in v)})" for k, v in problems.items()]
        raise UnsupportedOpError(f"graph {graph.name!r} cannot be written as TFLite: {'; '.join(parts)}")
    for name in graph.outputs:
        w.tensor(name)


def _int4_as_int8(graph: Graph) -> set[str]:
    """int4 weights written as INT8: fully connected weights quantized per channel.

    TFLite Micro's FULLY_CONNECTED takes INT4 filters per tensor only (its
    per-channel path requires an int8 filter), so per-channel int4 weights go
    out as int8 tensors holding the same values in [-8, 7] with the same
    scales: the layer computes exactly the same numbers, only stored a byte
    per weight. Reading the file back gives int8 weights for those layers.
    """
    out = set()
    for node in graph.nodes:
        if node.op == "fully_connected" and len(node.inputs) > 1 and node.inputs[1] in graph.params:
            t = graph.types[node.inputs[1]]
            if t.dtype == DType.i4 and t.quant is not None and t.quant.per_channel:
                out.add(node.inputs[1])
    return out


def _int4_problems(graph: Graph) -> dict[str, list[str]]:
    """int4 tensors TFLite Micro cannot run: activations, and weights of ops other than its
    int4-capable kernels (conv, depthwise conv, fully connected: the filter operand only)."""
    problems: dict[str, list[str]] = {}
    allowed = ", ".join(_INT4_OPS)
    for node in graph.nodes:
        for k, v in enumerate(node.inputs):
            if v is None or graph.types[v].dtype != DType.i4:
                continue
            if v not in graph.params:
                problems.setdefault("int4 activations (TFLite Micro has int4 weights only)", []).append(v)
            elif node.op not in _INT4_OPS or k != 1:
                why = f"int4 operands of {node.op} (TFLite Micro takes int4 weights in {allowed} only)"
                problems.setdefault(why, []).append(node.name)
    for node in graph.nodes:
        for v in node.outputs:
            if graph.types[v].dtype == DType.i4:
                problems.setdefault("int4 activations (TFLite Micro has int4 weights only)", []).append(v)
    return problems


def export_tflite(graph: Graph, path: str | Path) -> Path:
    """Write ``graph`` to ``path`` as ``.tflite``, atomically (no half-written file on failure)."""
    return atomic_write_bytes(path, to_tflite_bytes(graph))
