"""Control flow: ``if_``, ``while_`` and ``scan``, ops whose attributes hold subgraphs.

A subgraph (an attribute of kind ``graph``) is a closed MIR :class:`Graph`:
it sees only its own inputs and parameters, never the enclosing graph's
values, as TFLite's subgraphs do. Its inputs and outputs must have exactly
the types (shape, dtype and quantization) the op passes it and expects back,
so a subgraph of a quantized graph is quantized and its nodes run their own
integer semantics: the integer ``eval`` of these ops runs the subgraph through
the reference interpreter, as the float reference does.

- ``if_(cond, *operands; then_branch, else_branch)``: ``cond`` is a bool with
  one element; both branches take the operands and give the same types.
- ``while_(*carried; cond, body, max_trips)``: while ``cond(carried)`` (a bool
  with one element) and fewer than ``max_trips`` trips (when given), run
  ``carried = body(carried)``.
- ``scan(*carries, *xs; body, num_carries)``: for each index ``t`` of axis 0 of
  the ``xs`` (all of one static length), ``carries, y = body(carries, xs[t])``;
  the outputs are the final carries, then each ``y`` stacked along a new axis 0.

None of these ops has side effects (nor has any op of the IR), so
``ir/passes/lower_control_flow.py`` may turn an ``if_`` into both branches and
a select, and unroll a ``while_`` whose trip count it can prove or a ``scan``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from rlx_edge.errors import OpError
from rlx_edge.ir.ops._common import rand_float, rand_shape
from rlx_edge.ir.ops._registry import Attr, defop
from rlx_edge.ir.types import QuantParams, TensorType

if TYPE_CHECKING:
    from rlx_edge.ir.graph import Graph

FAMILY = "control"


def subgraph_attrs(attrs: dict[str, Any]) -> list[tuple[str, Graph]]:
    """The (attribute name, subgraph) pairs of a node's attributes, in declaration order."""
    from rlx_edge.ir.graph import Graph  # graph.py imports the op registry

    return [(k, v) for k, v in attrs.items() if isinstance(v, Graph)]


def _type_str(t: TensorType) -> str:
    q = "" if t.quant is None else " quantized" + ("" if t.quant.axis is None else " per-channel")
    return f"{t.dtype}[{','.join(str(d) for d in t.shape)}]{q}"


def _check_signature(op: str, what: str, graph: Graph, want: Sequence[TensorType], side: str) -> None:
    """``graph``'s inputs (``side="input"``) or outputs must have exactly the types ``want``."""
    names = graph.inputs if side == "input" else graph.outputs
    if len(names) != len(want):
        raise OpError(f"{op}: {what} has {len(names)} {side}s but must have {len(want)}")
    for i, (name, t) in enumerate(zip(names, want)):
        got = graph.types[name]
        if got != t:
            raise OpError(f"{op}: {what} {side} {i} {name!r} is {_type_str(got)} but must be {_type_str(t)}")


def _check_flag(op: str, what: str, t: TensorType) -> None:
    if t.dtype.value != "bool" or any(d != 1 for d in t.shape):
        raise OpError(f"{op}: {what} must be a bool with one element, got {_type_str(t)}")


def _run(graph: Graph) -> Callable[[Sequence[np.ndarray]], list[np.ndarray]]:
    """``graph`` as a function of its inputs (in order) to its outputs (in order), prepared once."""
    from rlx_edge.ir.interpret import RunPlan  # interpret imports the op registry

    plan = RunPlan(graph)

    def call(values: Sequence[np.ndarray]) -> list[np.ndarray]:
        out = plan(dict(zip(graph.inputs, (np.asarray(v) for v in values))))
        return [out[o] for o in graph.outputs]

    return call


def _graph_macs(graph: Graph) -> int:
    from rlx_edge.ir.inspect import node_macs  # inspect imports the graph

    return sum(node_macs(graph, n) or 0 for n in graph.nodes)


# if_ ------------------------------------------------------------------------------------------
if_ = defop(
    "if_",
    family=FAMILY,
    inputs=("cond", "*operands"),
    attrs={
        "then_branch": Attr("graph", doc="runs when cond is true: operands -> results"),
        "else_branch": Attr("graph", doc="runs when cond is false: operands -> results of the same types"),
    },
    num_outputs=lambda a: len(a["then_branch"].outputs),
    differentiable=False,
    doc="then_branch(*operands) if cond else else_branch(*operands) (TFLite IF, ONNX If)",
)


@if_.infer
def _(cond, *operands, then_branch, else_branch):
    _check_flag("if_", "cond", cond)
    for name, g in (("then_branch", then_branch), ("else_branch", else_branch)):
        _check_signature("if_", name, g, operands, "input")
    want = [then_branch.types[o] for o in then_branch.outputs]
    _check_signature("if_", "else_branch", else_branch, want, "output")
    return tuple(want)


@if_.reference
def _if_run(cond, *operands, then_branch, else_branch):
    branch = then_branch if bool(np.asarray(cond).reshape(-1)[0]) else else_branch
    return tuple(_run(branch)(operands))


@if_.eval
def _(p, cond, *operands, then_branch, else_branch):
    return _if_run(cond, *operands, then_branch=then_branch, else_branch=else_branch)


@if_.macs
def _(ins, outs, *, then_branch, else_branch):
    return max(_graph_macs(then_branch), _graph_macs(else_branch))


# while_ ---------------------------------------------------------------------------------------
while_ = defop(
    "while_",
    family=FAMILY,
    inputs=("*carried",),
    attrs={
        "cond": Attr("graph", doc="carried -> bool with one element: whether to run the body again"),
        "body": Attr("graph", doc="carried -> carried (the same types)"),
        "max_trips": Attr("int?", None, doc="stop after this many trips even while cond holds (None: no bound)"),
    },
    num_outputs=lambda a: len(a["body"].outputs),
    differentiable=False,
    doc="while cond(carried) (and fewer than max_trips trips): carried = body(carried) (TFLite WHILE, ONNX Loop)",
)


@while_.infer
def _(*carried, cond, body, max_trips):
    if max_trips is not None and max_trips < 0:
        raise OpError(f"while_: max_trips must be >= 0 or None, got {max_trips}")
    _check_signature("while_", "cond", cond, carried, "input")
    if len(cond.outputs) != 1:
        raise OpError(f"while_: cond has {len(cond.outputs)} outputs but must have 1 (a bool)")
    _check_flag("while_", "cond output", cond.types[cond.outputs[0]])
    _check_signature("while_", "body", body, carried, "input")
    _check_signature("while_", "body", body, carried, "output")
    return tuple(carried)


@while_.reference
def _while_run(*carried, cond, body, max_trips):
    test, step = _run(cond), _run(body)
    values, trips = list(carried), 0
    while (max_trips is None or trips < max_trips) and bool(np.asarray(test(values)[0]).reshape(-1)[0]):
        values = step(values)
        trips += 1
    return tuple(values)


@while_.eval
def _(p, *carried, cond, body, max_trips):
    return _while_run(*carried, cond=cond, body=body, max_trips=max_trips)


@while_.macs
def _(ins, outs, *, cond, body, max_trips):
    # per trip when the count is unknown: a lower bound, as for symbolic dims
    return (max_trips or 1) * (_graph_macs(cond) + _graph_macs(body))


# scan -----------------------------------------------------------------------------------------
scan = defop(
    "scan",
    family=FAMILY,
    inputs=("*inputs",),
    attrs={
        "body": Attr("graph", doc="(carries, x slices) -> (new carries, y slices)"),
        "num_carries": Attr("int", 0, doc="how many leading inputs are carries; the rest are scanned along axis 0"),
    },
    num_outputs=lambda a: len(a["body"].outputs),
    differentiable=False,
    doc="carries, ys[t] = body(carries, xs[t]) for t along axis 0; outputs: final carries, stacked ys",
)


def slice_quant(q: QuantParams | None, shift: int) -> QuantParams | None:
    """Parameters of a slice along axis 0 (``shift=-1``) or of a stack of slices (``shift=1``)."""
    if q is None or q.axis is None or q.axis < 0:
        return q
    if q.axis + shift < 0:
        raise OpError("scan: an input quantized per channel along axis 0 cannot be sliced along axis 0")
    return QuantParams(q.scale, q.zero_point, q.axis + shift, q.storage)


def _scan_split(inputs: Sequence[Any], num_carries: int) -> tuple[list[Any], list[Any]]:
    if not 0 <= num_carries < len(inputs):
        raise OpError(f"scan: num_carries={num_carries} must leave at least one of its {len(inputs)} inputs to scan")
    return list(inputs[:num_carries]), list(inputs[num_carries:])


@scan.infer
def _(*inputs, body, num_carries):
    carries, xs = _scan_split(inputs, num_carries)
    lengths = set()
    for i, x in enumerate(xs):
        if x.rank < 1 or isinstance(x.shape[0], str):
            raise OpError(f"scan: scanned input {i} ({_type_str(x)}) needs a static axis 0")
        lengths.add(x.shape[0])
    if len(lengths) != 1:
        raise OpError(f"scan: the scanned inputs have different lengths along axis 0: {sorted(lengths)}")
    (length,) = lengths
    slices = [TensorType(x.shape[1:], x.dtype, slice_quant(x.quant, -1)) for x in xs]
    _check_signature("scan", "body", body, [*carries, *slices], "input")
    if len(body.outputs) < num_carries:
        raise OpError(f"scan: body has {len(body.outputs)} outputs, fewer than its {num_carries} carries")
    outs = [body.types[o] for o in body.outputs]
    for i, (got, want) in enumerate(zip(outs, carries)):
        if got != want:
            raise OpError(
                f"scan: body output {i} {body.outputs[i]!r} is {_type_str(got)} but carry {i} is {_type_str(want)}"
            )
    ys = [TensorType((length, *y.shape), y.dtype, slice_quant(y.quant, 1)) for y in outs[num_carries:]]
    return (*carries, *ys)


@scan.reference
def _scan_run(*inputs, body, num_carries):
    carries, xs = _scan_split(inputs, num_carries)
    step = _run(body)
    length = np.asarray(xs[0]).shape[0]
    ys: list[list[np.ndarray]] = [[] for _ in body.outputs[num_carries:]]
    for t in range(length):
        out = step([*carries, *(np.asarray(x)[t] for x in xs)])
        carries = out[:num_carries]
        for acc, y in zip(ys, out[num_carries:]):
            acc.append(y)
    stacked = []
    for acc, name in zip(ys, body.outputs[num_carries:]):
        t = body.types[name]
        stacked.append(np.stack(acc) if acc else np.zeros((0, *t.shape), t.dtype.numpy))
    return (*carries, *stacked)


@scan.eval
def _(p, *inputs, body, num_carries):
    return _scan_run(*inputs, body=body, num_carries=num_carries)


@scan.macs
def _(ins, outs, *, body, num_carries):
    length = ins[num_carries].shape[0] if len(ins) > num_carries else 0
    return length * _graph_macs(body)


# samplers: a float draw or an int8 one (typed: its subgraphs are quantized with the operands' parameters)
def _draw_quant(rng: np.random.Generator) -> QuantParams | None:
    if rng.random() < 0.5:
        return None
    return QuantParams(np.float32(rng.choice([0.02, 0.05, 0.1])), int(rng.integers(-20, 21)), storage="i8")


def _values(rng: np.random.Generator, shape: tuple[int, ...], q: QuantParams | None) -> np.ndarray:
    if q is None:
        return rand_float(rng, shape)
    return rng.integers(-128, 128, shape).astype(np.int8)


def _subgraph(name: str, types: Sequence[tuple[str, TensorType]], build: Callable[..., Sequence[Any]]) -> Graph:
    from rlx_edge.ir.graph import Graph

    g = Graph(name)
    handles = [g.input(n, t.shape, t.dtype, t.quant) for n, t in types]
    g.output(*build(g, *handles))
    return g


@if_.sample
def _(rng):
    q = _draw_quant(rng)
    shape = rand_shape(rng, int(rng.integers(1, 3)))
    t = TensorType(shape, "i8" if q else "f32", q)
    x, y = _values(rng, shape, q), _values(rng, shape, q)
    cond = np.asarray(rng.random() < 0.5).reshape((1,) if rng.random() < 0.5 else ())
    then_ = _subgraph("then", [("x", t), ("y", t)], lambda g, a, b: [g.add(a, b, out_quant=q), g.relu(a, out_quant=q)])
    else_ = _subgraph("else", [("x", t), ("y", t)], lambda g, a, b: [g.sub(a, b, out_quant=q), g.relu(b, out_quant=q)])
    attrs = {"then_branch": then_, "else_branch": else_}
    return [cond, x, y], attrs, None if q is None else [q, q], None if q is None else [None, q, q]


@while_.sample
def _(rng):
    q = _draw_quant(rng)
    shape = rand_shape(rng, int(rng.integers(1, 3)))
    t = TensorType(shape, "i8" if q else "f32", q)
    # quantized draws count in int8 (the targets without int32 arithmetic run them too); scales below 1
    # for TFLite's int8 LESS, so a trip adds the stored 1
    cq = QuantParams(np.float32(0.5), 0, storage="i8") if q else None
    ct = TensorType((), "i8", cq) if q else TensorType((), "i32")
    limit, step = np.asarray(int(rng.integers(0, 5)), ct.dtype.numpy), _values(rng, shape, q)

    def test(g, i, x):
        return [g.less(i, g.param("limit", limit, quant=cq))]

    def body(g, i, x):
        one = g.param("one", np.asarray(1, ct.dtype.numpy), quant=cq)
        return [g.add(i, one, out_quant=cq), g.add(x, g.param("c", step, quant=q), out_quant=q)]

    carried = [("i", ct), ("x", t)]
    # a bound always: the op x target test feeds the counter any value, and the lowest would loop long
    attrs = {"cond": _subgraph("cond", carried, test), "body": _subgraph("body", carried, body)}
    attrs["max_trips"] = int(rng.integers(1, 7))
    inputs = [np.asarray(rng.integers(-2, 3), ct.dtype.numpy), _values(rng, shape, q)]
    return inputs, attrs, None if q is None else [cq, q], None if q is None else [cq, q]


@scan.sample
def _(rng):
    q = _draw_quant(rng)
    shape = rand_shape(rng, int(rng.integers(1, 3)))
    length = int(rng.integers(1, 5))
    t = TensorType(shape, "i8" if q else "f32", q)

    def body(g, acc, x):
        s = g.add(acc, x, out_quant=q)
        return [s, g.relu(s, out_quant=q)]

    attrs = {"body": _subgraph("body", [("acc", t), ("x", t)], body), "num_carries": 1}
    inputs = [_values(rng, shape, q), _values(rng, (length, *shape), q)]
    return inputs, attrs, None if q is None else [q, q], None if q is None else [q, q]
