"""TFLite builtin x dtype conformance: case generation, the four runs and their classification.

A case is one TFLite Micro builtin in one dtype: ``float`` (the unquantized
model: float32, or the bool / int32 tensors the op takes), ``int8`` or
``int16x8`` (PTQ with that scheme, seeded calibration). Its model is one op,
drawn from the IR op's sampler (seeded by builtin and dtype), written by the
exporter, read back by the importer and run on four sides:

- ``tflm``: TFLite Micro loads and runs it (``unsupported`` when it refuses);
- ``reference``: equal to TFLite Micro (``compare_with_tflm``; float within
  its documented tolerance);
- ``cortexm``: the host build, every case's graph a branch of one build,
  equal to the reference; the target is integer-only, so float cases are
  ``n/a`` there;
- ``jax``: one XLA program the same way, equal to the reference (float within
  ``JAX_FLOAT_TOL``).

A case ``pass``es when every side that applies passes; ``wrong`` is any
mismatch (must never happen); ``unsupported`` is a clear RlxError (ours) and
counts as not passing; ``tflm-unsupported`` cases are not counted.

A few builtins cannot come out of the exporter (``HAND_MADE``): EMBEDDING_LOOKUP
is the gather GATHER writes, and the shape-only builtins fold to constants at
import. Their models are written by hand (``tflitefiles.hand_made``), each from
a seeded draw, and the rest of the case is the same: TFLite Micro runs the file,
the reference runs what it imports to (for a shape-only builtin, the folded
graph), and the targets run that.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from opgraphs import merge_graphs, single_node_graph
from rlx_edge.errors import RlxError, UnsupportedOpError
from rlx_edge.frontends._tflite_ops import BUILTINS
from rlx_edge.frontends._tflite_schema import schema_module
from rlx_edge.frontends.tflite import load_tflite_bytes, to_tflite_bytes
from rlx_edge.frontends.tflm import TflmError, TflmModel
from rlx_edge.ir.dtype import DType
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.ops import REGISTRY
from rlx_edge.ir.plan import node_context
from rlx_edge.ir.types import QuantParams, TensorType
from rlx_edge.quant.calibrate import calibrate
from rlx_edge.quant.ptq import quantize
from rlx_edge.targets.reference import run
from rlx_edge.targets.reference.compare import DEFAULT_ATOL, DEFAULT_RTOL, compare_with_tflm, initial_state, make_inputs
from tflitefiles import hand_made

DTYPES = ("float", "int8", "int16x8")
SIDES = ("tflm", "reference", "cortexm", "jax")
N_INPUTS = 4  # seeded random inputs per case, plus compare's three edge inputs
MAX_TRIES = 40  # sampler draws per case
TFLM_TRIES = 3  # written models per case TFLite Micro may refuse before the case is called refused
# jax computes float32 in XLA's order, not numpy's: a few ulps apart on transcendental ops
JAX_FLOAT_TOL = 1e-5

_ALL3 = frozenset(DTYPES)
_FI8 = frozenset(("float", "int8"))
_F = frozenset(("float",))
_Q = frozenset(("int8", "int16x8"))

# inputs models hold as constants (weights, biases, positions)
_CONSTANT_INPUTS = ("w", "bias", "indices", "weights_feature", "weights_time",
                    *(f"{k}_{g}" for k in "wrb" for g in ("input", "forget", "cell", "output")))  # fmt: skip
# a divisor held constant, as models hold it: compare's edge inputs (all zeros) would divide by zero
_CONSTANT_DIVISOR = ("floor_div", "floor_mod")

# TFLite Micro's builtin set (issue #16: its op resolver's builtins) and, per builtin, the dtypes its
# kernels take, read off the TFLite Micro kernel sources. Only consulted for a case we cannot write
# (no importer, folded at import, PTQ keeps the op float): a case we can write is decided by
# TFLite Micro itself. "float" for bool / int32 ops means the unquantized model. (FILL's eval takes
# float32, int32 and int8 values, no int16; ZEROS_LIKE's takes int8 too: fill.cc, zeros_like.cc.
# REDUCE_MAX / REDUCE_MIN take float32 and int8 only: an int16 model fails its invoke with "Only
# float32 and int8 types are supported", reduce_common.cc; RESIZE_BILINEAR's with "requires float
# or int8", resize_bilinear.cc. EXP's Prepare takes float32 only: an int8 model fails to prepare with
# "input->type != kTfLiteFloat32 (INT8 != FLOAT32)", exp.cc.)
TFLM_DTYPES: dict[str, frozenset[str]] = {
    "ABS": _ALL3, "ADD": _ALL3, "ADD_N": _FI8, "ARG_MAX": _FI8, "ARG_MIN": _FI8, "AVERAGE_POOL_2D": _ALL3,
    "BATCH_MATMUL": _ALL3, "BATCH_TO_SPACE_ND": _FI8, "BROADCAST_ARGS": _F, "BROADCAST_TO": _ALL3, "CAST": _F,
    "CEIL": _F, "CONCATENATION": _ALL3, "CONV_2D": _ALL3, "COS": _F, "CUMSUM": _FI8, "DEPTHWISE_CONV_2D": _ALL3,
    "DEPTH_TO_SPACE": _FI8, "DEQUANTIZE": _Q, "DIV": _FI8, "ELU": _FI8, "EMBEDDING_LOOKUP": _FI8, "EQUAL": _FI8,
    "EXP": _F, "EXPAND_DIMS": _ALL3, "FILL": _FI8, "FLOOR": _F, "FLOOR_DIV": _F, "FLOOR_MOD": _F,
    "FULLY_CONNECTED": _ALL3, "GATHER": _FI8, "GATHER_ND": _FI8, "GREATER": _FI8, "GREATER_EQUAL": _FI8,
    "HARD_SWISH": _FI8, "L2_NORMALIZATION": _FI8, "L2_POOL_2D": _F, "LEAKY_RELU": _ALL3, "LESS": _FI8,
    "LESS_EQUAL": _FI8, "LOG": _F, "LOGICAL_AND": _F, "LOGICAL_NOT": _F, "LOGICAL_OR": _F, "LOGISTIC": _ALL3,
    "LOG_SOFTMAX": _FI8, "MAXIMUM": _ALL3, "MAX_POOL_2D": _ALL3, "MEAN": _ALL3, "MINIMUM": _ALL3,
    "MIRROR_PAD": _FI8, "MUL": _ALL3, "NEG": _F, "NOT_EQUAL": _FI8, "PACK": _ALL3, "PAD": _ALL3, "PADV2": _ALL3,
    "PRELU": _FI8, "QUANTIZE": _Q, "REDUCE_ALL": _F, "REDUCE_MAX": _FI8, "REDUCE_MIN": _FI8, "RELU": _ALL3,
    "RELU6": _ALL3, "RESHAPE": _ALL3, "RESIZE_BILINEAR": _FI8, "RESIZE_NEAREST_NEIGHBOR": _ALL3,
    "REVERSE_V2": _ALL3, "ROUND": _F, "RSQRT": _FI8, "SELECT_V2": _ALL3, "SHAPE": _F, "SIN": _F, "SLICE": _ALL3,
    "SOFTMAX": _ALL3, "SPACE_TO_BATCH_ND": _FI8, "SPACE_TO_DEPTH": _FI8, "SPLIT": _ALL3, "SPLIT_V": _ALL3,
    "SQRT": _F, "SQUARE": _F, "SQUARED_DIFFERENCE": _ALL3, "SQUEEZE": _ALL3, "STRIDED_SLICE": _ALL3, "SUB": _ALL3,
    "SUM": _ALL3, "SVDF": _FI8, "TANH": _ALL3, "TRANSPOSE": _ALL3, "TRANSPOSE_CONV": _ALL3,
    "UNIDIRECTIONAL_SEQUENCE_LSTM": _ALL3, "UNPACK": _FI8, "ZEROS_LIKE": _FI8,
}  # fmt: skip


@dataclass
class Case:
    builtin: str
    dtype: str
    # side -> pass | wrong | unsupported | error | refuses (tflm) | n/a | - (not run)
    sides: dict[str, str] = field(default_factory=dict)
    reason: str = ""  # why it is not a pass: the first refusal or mismatch
    note: str = ""  # how the model was made, where not by the exporter (shown for a pass too)
    model: bytes | None = None
    graph: Graph | None = None  # the imported model
    samples: list[dict[str, np.ndarray]] = field(default_factory=list)
    want: list[dict[str, np.ndarray]] = field(default_factory=list)  # the reference's outputs

    declared: bool = False  # TFLite Micro's kernels take this dtype (TFLM_DTYPES)

    def not_written(self, why: str) -> Case:
        self.sides = {side: "-" for side in SIDES}
        self.reason = why
        return self

    def refused_by_us(self, side: str, why: str, model: bytes) -> Case:
        self.model = model
        self.sides = {"tflm": "-", "reference": "-", "cortexm": "-", "jax": "-", side: "unsupported"}
        self.reason = why
        return self

    @property
    def key(self) -> str:
        return f"{self.builtin}/{self.dtype}"

    @property
    def status(self) -> str:
        s = self.sides
        if "wrong" in s.values():
            return "wrong"
        if s["tflm"] == "refuses":
            return "unsupported" if self.declared else "tflm-unsupported"
        if set(s.values()) == {"-"}:
            return "unsupported" if self.declared else "n/a"
        if "error" in s.values():
            return "error"  # an exception that is no RlxError: neither a pass nor a clear refusal
        if all(v in ("pass", "n/a") for v in s.values()):
            return "pass"
        return "unsupported"


def builtins() -> list[str]:
    return sorted(TFLM_DTYPES)


def _seed(*parts: str) -> list[int]:
    return [sum(map(ord, p)) * (i + 1) for i, p in enumerate(parts)]


def model_builtins(data: bytes) -> set[str]:
    """Builtin names of the model's operator codes."""
    model = schema_module("Model").Model.GetRootAs(data, 0)
    ops = schema_module("BuiltinOperator").BuiltinOperator
    names = {v: k for k, v in vars(ops).items() if not k.startswith("_")}
    out = set()
    for i in range(model.OperatorCodesLength()):
        c = model.OperatorCodes(i)
        out.add(names.get(max(c.BuiltinCode(), c.DeprecatedBuiltinCode()), "?"))
    return out


def _constants(op: str, names: list[str], inputs: list) -> tuple[int, ...]:
    """Input positions held as constants, as models hold them: weights, biases, positions, a divisor."""
    weighted = "w" in names
    return tuple(
        i
        for i, n in enumerate(names)
        if inputs[i] is not None and (n in _CONSTANT_INPUTS or (n == "b" and (weighted or op in _CONSTANT_DIVISOR)))
    )


def _float_graph(op: str, rng: np.random.Generator) -> tuple[Graph, list[np.ndarray]] | None:
    """One node of ``op`` from its sampler, float32 numbers (bool and indices as drawn). A draw
    quantized by its sampler (SVDF's) is dequantized: the float model of the same numbers."""
    opdef = REGISTRY[op]
    if opdef.typed:
        return None  # quantize / dequantize: no float model
    inputs, attrs, _, in_q = opdef.draw(rng)
    names = opdef.input_names(len(inputs))
    floats = []
    for n, a, q in zip(names, inputs, in_q or [None] * len(inputs)):
        if a is None:
            floats.append(a)
            continue
        a = np.asarray(a)
        if a.ndim == 0:
            # TFLite Micro's Python interpreter cannot set a 0-d input ("Dimension mismatch. Got 1
            # but expected 0"): such a draw tests the harness, not the builtin
            return None
        if q is not None:
            zp = np.asarray(q.zero_point, np.float64)
            scale = np.asarray(q.scale, np.float64)
            if q.axis is not None and scale.size > 1:
                zp, scale = (v.reshape([-1 if d == q.axis % a.ndim else 1 for d in range(a.ndim)]) for v in (zp, scale))
            floats.append(((a - zp) * scale).astype(np.float32))
        elif n == "indices":
            floats.append(a.astype(np.int32))  # TFLite positions are int32 (TFLite Micro refuses int64)
        elif a.dtype.kind in "iuf" and op != "cast":
            floats.append(a.astype(np.float32))  # the float model: numbers are float32
        else:
            floats.append(a)  # bool conditions; a cast's source type is what it tests
    consts = _constants(op, names, floats)
    g = single_node_graph(op, floats, attrs, constants=consts)
    feeds = [a for i, a in enumerate(floats) if a is not None and i not in consts]
    return g, feeds


def _typed_graph(op: str, dtype: str, rng: np.random.Generator) -> Graph | None:
    """A draw whose sampler quantizes its own tensors (quantize, dequantize, SVDF), kept when its
    activations (the node's first input, or its output where that is float) have the case's storage."""
    opdef = REGISTRY[op]
    inputs, attrs, out_q, in_q = opdef.draw(rng)
    if not (opdef.typed or any(q is not None for q in (in_q or []))):
        return None
    consts = _constants(op, opdef.input_names(len(inputs)), inputs)
    g = single_node_graph(op, inputs, attrs, out_q, in_q, consts)
    if any(t.rank == 0 for t in g.types.values()):
        return None  # see _float_graph
    node = g.nodes[0]
    first = g.types[node.inputs[0]]
    act = g.types[node.outputs[0]] if first.dtype.is_float else first
    # the float side float32, as TFLite models have it (TFLite Micro's QUANTIZE / DEQUANTIZE take no f16)
    floats = {str(t.dtype) for t in g.types.values() if t.dtype.is_float}
    want = "i8" if dtype == "int8" else "i16"
    return g if act.quant is not None and str(act.dtype) == want and floats <= {"f32"} else None


def _build(builtin: str, dtype: str, op: str, rng: np.random.Generator) -> Graph | None:
    """A graph of ``op`` in ``dtype``, or None for a draw that gives none."""
    opdef = REGISTRY[op]
    # a sampler that quantizes its own draws (SVDF's int16 state) says how the op is quantized: its
    # integer cases are its draws, not PTQ's
    peek = opdef.draw(copy.deepcopy(rng))[3]
    if dtype != "float" and (opdef.typed or any(q is not None for q in (peek or []))):
        return _typed_graph(op, dtype, rng)
    got = _float_graph(op, rng)
    if got is None:
        return None
    fg, feeds = got
    if dtype == "float":
        return fg
    if not any(a.dtype.kind == "f" for a in feeds) and not fg.params:
        return None  # nothing to quantize
    data = {n: np.stack([a, rng.permutation(a.ravel()).reshape(a.shape)]) for n, a in zip(fg.inputs, feeds)}
    if any(a.size == 0 for a in data.values()):
        return None
    g = quantize(fg, calibrate(fg, data, optimize=False), scheme=dtype, optimize=False)
    node = next((n for n in g.nodes if n.op == op), None)
    if node is None or not node_context(g, node).quantized:
        raise UnsupportedOpError(f"{op}: PTQ ({dtype}) keeps the op float")
    return g


# hand-made models ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class HandMade:
    """How a builtin the exporter never writes gets its model: ``make(dtype, rng)`` gives a file
    holding it (None for a draw that makes none). Only for the dtypes its TFLite Micro kernel takes
    (``TFLM_DTYPES``): the file says what we make it say, so one the kernel refuses tells nothing
    (and TFLite Micro's refusals print stray numbers, which would make the table vary)."""

    make: Callable[[str, np.random.Generator], bytes | None]
    note: str


def _embedding_lookup(dtype: str, rng: np.random.Generator) -> bytes | None:
    """A drawn gather of whole rows (axis 0, a vector of indices, a table of rank >= 2, as TFLite
    Micro's kernel takes) written as EMBEDDING_LOOKUP: the index vector first, then the table."""
    g = _build("EMBEDDING_LOOKUP", dtype, "gather", rng)
    if g is None or len(g.nodes) != 1:
        return None
    node = g.nodes[0]
    x, idx = node.inputs
    xt = g.types[x]
    if node.attrs["axis"] % xt.rank or node.attrs["batch_dims"] or xt.rank < 2 or idx not in g.params:
        return None
    lookup = np.asarray(g.params[idx])
    if lookup.ndim != 1:
        return None
    # the kernel reads int32 positions in [0, rows); the IR's negatives count from the end
    lookup = (lookup % int(xt.shape[0])).astype(np.int32)
    ops = [("EMBEDDING_LOOKUP", ["lookup", x], [node.outputs[0]], None, {})]
    return hand_made(g, ops, {"lookup": (lookup, TensorType(lookup.shape, DType.i32))})


def _case_quant(dtype: str, rng: np.random.Generator) -> tuple[str, QuantParams | None]:
    """Storage and parameters of a hand-made model's activations: the case's dtype, as PTQ makes them."""
    if dtype == "float":
        return "f32", None
    if dtype == "int8":
        return "i8", QuantParams(np.float32(rng.uniform(0.01, 0.1)), int(rng.integers(-20, 21)), storage="i8")
    return "i16", QuantParams(np.float32(rng.uniform(1e-4, 1e-3)), 0, storage="i16")  # int16x8: symmetric


def _drawn_shape(rng: np.random.Generator) -> tuple[int, ...]:
    return tuple(int(d) for d in rng.integers(1, 5, int(rng.integers(1, 4))))


def _filled(kind: str, dtype: str, rng: np.random.Generator) -> bytes:
    """FILL or ZEROS_LIKE making a tensor of x's shape that PACK stacks with x: after import, a
    stack of x and the folded constant."""
    st, q = _case_quant(dtype, rng)
    shape = _drawn_shape(rng)
    axis = int(rng.integers(-len(shape) - 1, len(shape) + 1))
    g = Graph(kind)
    x = g.input("x", shape, st, quant=q)
    # the folded tensor's type; the value it stands for is the file's to say
    z = g.param("z", np.zeros(shape, DType(st).numpy), quant=q)
    g.output(g.stack(x, z, axis=axis, name="y", out_quant=q))
    pack = ("PACK", ["x", "z"], ["y"], "PackOptions", {"ValuesCount": 2, "Axis": axis})
    t = TensorType(shape, DType(st), q)
    if kind == "ZEROS_LIKE":
        return hand_made(g, [("ZEROS_LIKE", ["x"], ["z"], None, {}), pack], {"z": (None, t)})
    value = np.asarray(rng.uniform(-4, 4), np.float32) if q is None else np.asarray(rng.integers(-100, 101))
    extra = {
        "dims": (np.array(shape, np.int32), TensorType((len(shape),), DType.i32)),
        "value": (value.astype(DType(st).numpy), TensorType((), DType(st), q)),
        "z": (None, t),
    }
    return hand_made(g, [("FILL", ["dims", "value"], ["z"], None, {}), pack], extra)


def _shaped(kind: str, rng: np.random.Generator) -> bytes:
    """SHAPE of x, or BROADCAST_ARGS of two constant shapes, feeding an int32 MAXIMUM with an input
    (TFLite Micro's RESHAPE and BROADCAST_TO want constant shapes): after import, a maximum of the
    folded shape and that input. SHAPE's x also feeds RELU, so the graph reads it."""
    shape = _drawn_shape(rng)
    g = Graph(kind)
    rank_t = TensorType((len(shape),), DType.i32)
    v = g.input("v", (len(shape),), "i32")
    s = g.param("s", np.zeros(len(shape), np.int32))  # the folded shape's type, as above
    ops: list = []
    extra: dict = {"s": (None, rank_t)}
    if kind == "SHAPE":
        x = g.input("x", shape, "f32")
        g.output(g.relu(x, name="r"))
        ops += [("RELU", ["x"], ["r"], None, {}), ("SHAPE", ["x"], ["s"], "ShapeOptions", {"OutType": 2})]
    else:
        # a shape and one that broadcasts with it: some of its axes 1, maybe fewer of them
        other = tuple(1 if rng.random() < 0.5 else d for d in shape[int(rng.integers(0, len(shape))) :])
        a, b = (other, shape) if rng.random() < 0.5 else (shape, other)
        extra["a"] = (np.array(a, np.int32), TensorType((len(a),), DType.i32))
        extra["b"] = (np.array(b, np.int32), TensorType((len(b),), DType.i32))
        ops.append(("BROADCAST_ARGS", ["a", "b"], ["s"], None, {}))
    g.output(g.maximum(s, v, name="y"))
    ops.append(("MAXIMUM", ["s", "v"], ["y"], None, {}))
    return hand_made(g, ops, extra)


_FOLDED = "hand-made: folded to a constant at import"
# the builtins whose models are written by hand, and how
HAND_MADE: dict[str, HandMade] = {
    "EMBEDDING_LOOKUP": HandMade(_embedding_lookup, "hand-made: the exporter writes gather as GATHER"),
    "FILL": HandMade(lambda d, rng: _filled("FILL", d, rng), _FOLDED),
    "ZEROS_LIKE": HandMade(lambda d, rng: _filled("ZEROS_LIKE", d, rng), _FOLDED),
    # int32 shapes whatever their input: the float (unquantized) case is their only one
    "SHAPE": HandMade(lambda d, rng: _shaped("SHAPE", rng), _FOLDED),
    "BROADCAST_ARGS": HandMade(lambda d, rng: _shaped("BROADCAST_ARGS", rng), _FOLDED),
}


def make_case(builtin: str, dtype: str, workdir: Path) -> Case:
    """Draw, write, read back and run the case's model in TFLite Micro and the reference.

    Draws go on until TFLite Micro loads and runs one (at most ``TFLM_TRIES`` written models): a draw
    outside what its kernel takes (a rank, a scalar) says nothing about the builtin.
    """
    case = Case(builtin, dtype, declared=dtype in TFLM_DTYPES[builtin])
    b = BUILTINS.get(builtin) if builtin in BUILTINS else None
    if b is None:
        return case.not_written("no importer for this builtin")
    hand = HAND_MADE.get(builtin)
    if hand is not None:
        case.note = hand.note
        if not case.declared:
            return case.not_written(f"{hand.note}, for the dtypes TFLite Micro's kernel takes")
    elif b.folded:
        return case.not_written("folded to a constant at import: the exporter writes no such op")
    op = b.ir_ops[0] if b.ir_ops else ""
    if hand is None and REGISTRY[op]._sample is None:
        return case.not_written(f"{op} has no sampler")
    rng = np.random.default_rng(_seed(builtin, dtype))
    why, written, tflm_tries = "no draw of the sampler makes this builtin", set(), 0
    path = workdir / f"{builtin}_{dtype}.tflite"
    for _ in range(MAX_TRIES):
        try:
            if hand is not None:
                data = hand.make(dtype, rng)
            else:
                g = _build(builtin, dtype, op, rng)
                data = None if g is None else to_tflite_bytes(g)
            if data is None:
                continue
        except RlxError as e:
            why = _one_line(e)
            continue
        got = model_builtins(data)
        if builtin not in got:
            written |= got
            continue
        path.write_bytes(data)
        tflm_tries += 1
        try:
            graph = load_tflite_bytes(data, name=path.stem, source=str(path))
        except RlxError as e:
            return case.refused_by_us("reference", f"import: {_one_line(e)}", data)
        try:
            if graph.metadata.get("state"):
                mismatch = _compare_stateful(data, graph, sum(map(ord, case.key)))
            else:
                r = compare_with_tflm(path, n_inputs=N_INPUTS, seed=sum(map(ord, case.key)))
                mismatch = None if r.ok else f"reference vs TFLite Micro: {r.first_mismatch}"
        except TflmError as e:
            why = f"TFLite Micro: {_one_line(e)}"
            if tflm_tries < TFLM_TRIES:
                continue
            case.model = data
            case.sides = {"tflm": "refuses", "reference": "-", "cortexm": "-", "jax": "-"}
            case.reason = why
            return case
        except RlxError as e:
            return case.refused_by_us("reference", f"reference: {_one_line(e)}", data)
        case.model, case.graph = data, graph
        case.sides = {"tflm": "pass", "reference": "pass" if mismatch is None else "wrong"}
        if mismatch is not None:
            case.reason = mismatch
            case.sides["cortexm"] = case.sides["jax"] = "-"
            return case
        # a stateful op (svdf) runs each sample from the state TFLite Micro starts at: the targets then
        # compare single invokes on equal inputs, the state threading is compared with TFLite Micro above
        case.samples = [s | initial_state(graph) for s in make_inputs(graph, N_INPUTS, sum(map(ord, case.key)))]
        case.want = [run(graph, s) for s in case.samples]
        return case
    if written:
        why = f"the exporter writes {op} as {', '.join(sorted(written))}"
    return case.not_written(why)


def _compare_stateful(data: bytes, g: Graph, seed: int) -> str | None:
    """A model with a variable tensor (SVDF's state) over ``N_INPUTS`` invokes of one interpreter:
    TFLite Micro starts the variable at its zero point and keeps it; ours threads it through the
    graph (``graph.metadata["state"]``). The first mismatch, or None."""
    pairs: dict[str, str] = g.metadata["state"]
    model_inputs = [n for n in g.inputs if n not in pairs]
    samples = make_inputs(g, N_INPUTS, seed, edge=False)
    outputs = [o for o in g.outputs if o not in pairs.values()]
    with TflmModel(data) as m:
        theirs = [m([s[n] for n in model_inputs]) for s in samples]
    state = {}
    for v in pairs:
        t = g.types[v]
        zp = 0 if t.quant is None else int(t.quant.zero_point[0])
        state[v] = np.full(tuple(int(d) for d in t.shape), zp, t.dtype.numpy)
    for k, (sample, got) in enumerate(zip(samples, theirs)):
        ours = run(g, {**{n: sample[n] for n in model_inputs}, **state})
        state = {v: ours[u] for v, u in pairs.items()}
        for o, want in zip(outputs, got):
            mine = np.asarray(ours[o]).reshape(want.shape)
            same = (
                np.allclose(mine, want, rtol=DEFAULT_RTOL, atol=DEFAULT_ATOL)
                if want.dtype.kind == "f"
                else np.array_equal(mine, want)
            )
            if not same:
                return f"reference vs TFLite Micro: {o} differs on invoke {k}"
    return None


def _one_line(e: BaseException) -> str:
    lines = str(e).strip().splitlines() or [type(e).__name__]
    return lines[-1][:200]


# the batched targets ------------------------------------------------------------------------------
def _merge(cases: list[Case]) -> Graph:
    """Disjoint branches of one graph, case ``i``'s names prefixed ``c{i}_``."""
    return merge_graphs([c.graph for c in cases], "conformance", "c")


def _accepts(target: str, g: Graph) -> str | None:
    """None when ``target`` takes ``g``, else its clear refusal."""
    try:
        if target == "cortexm":
            from rlx_edge.targets.cortexm.rules import layer_for

            for n in g.nodes:
                layer_for(g, n)
        else:
            from rlx_edge.targets.jax.lower import lower_graph

            lower_graph(g)
    except UnsupportedOpError as e:
        return _one_line(e)
    return None


def _compile(target: str, m: Graph, workdir: Path):
    if target == "cortexm":
        from rlx_edge.targets.cortexm import compile_host

        return compile_host(m, workdir).run
    from rlx_edge.targets.jax import compile_jax

    return compile_jax(m, batch="exact")


def _equal(target: str, got: np.ndarray, want: np.ndarray) -> bool:
    got = np.asarray(got)
    if got.dtype != want.dtype or got.shape != want.shape:
        return False
    if want.dtype.kind == "f" and target == "jax":
        return bool(np.allclose(got, want, rtol=JAX_FLOAT_TOL, atol=JAX_FLOAT_TOL, equal_nan=True))
    return bool(np.array_equal(got, want, equal_nan=want.dtype.kind == "f"))


def run_batched(target: str, cases: list[Case], workdir: Path) -> None:
    """Every case the reference passed, on ``target``: one build for them all; a build that fails
    is split in halves until the cases that break it are found."""
    todo = []
    for c in cases:
        if c.sides.get("reference") != "pass":
            continue
        if target == "cortexm" and c.dtype == "float":
            c.sides[target] = "n/a"  # the Cortex-M target is integer-only
            continue
        refusal = _accepts(target, c.graph)
        if refusal is not None:
            c.sides[target] = "unsupported"
            c.reason = c.reason or f"{target}: {refusal}"
            continue
        todo.append(c)
    _run_group(target, todo, workdir, "all")


def _run_group(target: str, group: list[Case], workdir: Path, tag: str) -> None:
    if not group:
        return
    try:
        m = _merge(group)
        fn = _compile(target, m, workdir / f"{target}_{tag}")
        n = len(group[0].samples)
        gots = [fn({f"c{i}_{k}": v for i, c in enumerate(group) for k, v in c.samples[s].items()}) for s in range(n)]
    except Exception as e:  # a build that breaks: find which case breaks it
        if len(group) == 1:
            c = group[0]
            c.sides[target] = "unsupported" if isinstance(e, RlxError) else "error"
            c.reason = c.reason or f"{target}: {type(e).__name__}: {_one_line(e)}"
            return
        half = len(group) // 2
        _run_group(target, group[:half], workdir, tag + "a")
        _run_group(target, group[half:], workdir, tag + "b")
        return
    for i, c in enumerate(group):
        ok = True
        for s, want in enumerate(c.want):
            for name, w in want.items():
                if not _equal(target, gots[s][f"c{i}_{name}"], w):
                    ok = False
                    if not c.reason:
                        c.reason = f"{target}: {name} differs from the reference on sample {s}"
        c.sides[target] = "pass" if ok else "wrong"


def run_suite(workdir: Path, only: list[str] | None = None) -> list[Case]:
    """Every case, every side."""
    cases = []
    for b in builtins():
        for d in DTYPES:
            if only is not None and f"{b}/{d}" not in only:
                continue
            cases.append(make_case(b, d, workdir))
    for target in ("cortexm", "jax"):
        run_batched(target, cases, workdir)
    for c in cases:  # the table must not depend on where it ran
        c.reason = c.reason.replace(f"{workdir}/", "")
    return cases
