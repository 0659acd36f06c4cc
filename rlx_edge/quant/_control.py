"""PTQ of control flow (``if_``, ``while_``, ``scan``): calibrating and quantizing their subgraphs.

Calibration observes every float value inside the subgraphs on every trip or branch the
calibration data takes, under qualified names: value ``v`` of attribute ``body`` of node
``loop`` is ``loop/body:v`` (nested control flow prefixes again: ``loop/body:inner/body:v``).

A subgraph's signature must match its op's operands and results exactly (``ir/ops/control.py``),
so each loop-carried slot (a while_'s carried value, a scan's carry), each scan ``y`` and each
if_ result gets one set of parameters: from the union of the observed ranges of everything that
flows through that slot (the op's operand and result, the subgraph inputs and outputs of every
trip or branch), so no value that passes through it clips. Subgraph inputs that are no slot (the
scanned slices, an if_'s operands) take their operand's parameters. Subgraphs are quantized with
the parent node's scheme by a nested quantizer; a result whose producer fixes its own parameters
(softmax) is requantized to its slot.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from rlx_edge.ir.graph import Graph, Node
from rlx_edge.ir.ops.control import subgraph_attrs
from rlx_edge.ir.types import QuantParams
from rlx_edge.quant.record import CalibrationError, CalibrationRecord, TensorRange

if TYPE_CHECKING:
    from rlx_edge.quant.ptq import Scheme, _Quantizer

CONTROL_OPS = frozenset({"if_", "while_", "scan"})


def has_control(graph: Graph) -> bool:
    return any(n.op in CONTROL_OPS for n in graph.nodes)


def sub_prefix(prefix: str, node: str, attr: str) -> str:
    """The prefix of the record names of subgraph ``attr`` of node ``node`` (in a graph named with ``prefix``)."""
    return f"{prefix}{node}/{attr}:"


# calibration ----------------------------------------------------------------------------------
class SubgraphPlans:
    """One prepared run plan per subgraph, for every trip of every sample."""

    def __init__(self) -> None:
        self._plans: dict[int, Any] = {}

    def __call__(self, graph: Graph) -> Any:
        from rlx_edge.ir.interpret import RunPlan

        plan = self._plans.get(id(graph))
        if plan is None:
            plan = self._plans[id(graph)] = (graph, RunPlan(graph))  # the graph kept alive: its id stays unique
        return plan[1]


def observe_subgraphs(
    graph: Graph, values: dict[str, np.ndarray], prefix: str = "", plans: SubgraphPlans | None = None
) -> Iterator[tuple[str, np.ndarray]]:
    """(record name, value) of every float value computed inside ``graph``'s control-flow subgraphs, given
    every value of one run of ``graph`` (one sample, no batch axis), on each trip or branch taken."""
    plans = plans or SubgraphPlans()
    for node in graph.nodes:
        if node.op in CONTROL_OPS:
            ins = [None if v is None else values[v] if v in values else graph.params[v] for v in node.inputs]
            yield from _observe_node(node, ins, prefix, plans)


def _traced(sub: Graph, args: Sequence[np.ndarray], prefix: str, plans: SubgraphPlans, seen: list) -> list[np.ndarray]:
    feed = dict(zip(sub.inputs, (np.asarray(a) for a in args)))
    outs, traced = plans(sub)(feed, trace=True)
    values = {**feed, **traced, **outs}
    seen.extend((prefix + k, v) for k, v in values.items() if sub.types[k].dtype.is_float)
    seen.extend(observe_subgraphs(sub, values, prefix, plans))
    return [outs[o] for o in sub.outputs]


def _observe_node(node: Node, ins: list, prefix: str, plans: SubgraphPlans) -> Iterator[tuple[str, np.ndarray]]:
    at = {k: sub_prefix(prefix, node.name, k) for k, _ in subgraph_attrs(node.attrs)}
    seen: list[tuple[str, np.ndarray]] = []
    a = node.attrs
    if node.op == "if_":
        attr = "then_branch" if bool(np.asarray(ins[0]).reshape(-1)[0]) else "else_branch"
        _traced(a[attr], ins[1:], at[attr], plans, seen)
    elif node.op == "while_":
        values, trips = ins, 0
        while a["max_trips"] is None or trips < a["max_trips"]:
            (flag,) = _traced(a["cond"], values, at["cond"], plans, seen)
            if not bool(np.asarray(flag).reshape(-1)[0]):
                break
            values = _traced(a["body"], values, at["body"], plans, seen)
            trips += 1
            yield from seen
            seen.clear()
    else:
        nc = a["num_carries"]
        carries, xs = ins[:nc], ins[nc:]
        for t in range(np.asarray(xs[0]).shape[0]):
            carries = _traced(a["body"], [*carries, *(np.asarray(x)[t] for x in xs)], at["body"], plans, seen)[:nc]
            yield from seen
            seen.clear()
    yield from seen


# quantization ---------------------------------------------------------------------------------
class RecordView:
    """The calibration ranges of a subgraph's values, under their own names (``root[prefix + name]``);
    ``overrides`` replace some (a subgraph result takes its slot's range)."""

    def __init__(self, root: CalibrationRecord, prefix: str, overrides: dict[str, TensorRange] | None = None):
        self.root, self.prefix, self.overrides = root, prefix, overrides or {}

    def __getitem__(self, name: str) -> TensorRange:
        if name in self.overrides:
            return self.overrides[name]
        key = self.prefix + name
        if key not in self.root and self.prefix:
            raise CalibrationError(
                f"calibration never ran subgraph {self.prefix.rstrip(':')!r} (no range for its value {name!r}):"
                " give calibration data that takes every branch and runs every loop body at least once"
            )
        return self.root[key]

    def __contains__(self, name: str) -> bool:
        return name in self.overrides or self.prefix + name in self.root


def as_view(rec: CalibrationRecord | RecordView) -> RecordView:
    return rec if isinstance(rec, RecordView) else RecordView(rec, "")


def _value_range(view: RecordView, graph: Graph, name: str) -> tuple[float, float]:
    if name in graph.params:
        arr = graph.params[name]
        return float(arr.min(initial=0.0)), float(arr.max(initial=0.0))
    return view[name].scalar()


def _union(ranges: Sequence[tuple[float, float]]) -> tuple[float, float]:
    return min(lo for lo, _ in ranges), max(hi for _, hi in ranges)


def slot_ranges(qz: _Quantizer, node: Node) -> list[tuple[float, float] | None]:
    """Per result of ``node``: the union range of its slot (None for a result that is not float)."""
    view, g, a = as_view(qz.rec), qz.g, node.attrs
    subs = dict(subgraph_attrs(a))

    def sub_view(attr: str) -> RecordView:
        return RecordView(view.root, sub_prefix(view.prefix, node.name, attr))

    got: list[tuple[float, float] | None] = []
    for i, o in enumerate(node.outputs):
        if not g.types[o].dtype.is_float:
            got.append(None)
            continue
        # the op's result, and every subgraph output feeding this result
        parts = [_value_range(view, g, o)]
        outs = ("then_branch", "else_branch") if node.op == "if_" else ("body",)
        for attr in outs:
            sub = subs[attr]
            # an if_ branch never taken has no ranges (its result range then comes from the other one)
            if sub.outputs[i] in sub.params or sub_view(attr).prefix + sub.outputs[i] in view.root:
                parts.append(_value_range(sub_view(attr), sub, sub.outputs[i]))
        carried = node.op == "while_" or (node.op == "scan" and i < a["num_carries"])
        if carried:  # the operand and every trip's subgraph inputs flow through the slot too
            parts.append(_value_range(view, g, node.inputs[i]))
            for attr, sub in subs.items():
                if sub_view(attr).prefix + sub.inputs[i] in view.root:
                    parts.append(sub_view(attr)[sub.inputs[i]].scalar())
        got.append(_union(parts))
    return got


def quantize_control(qz: _Quantizer, node: Node) -> None:
    """Add ``node`` (if_, while_ or scan) to ``qz.out`` with its subgraphs quantized in its scheme."""
    from rlx_edge.quant.ptq import activation_qparams

    sch = qz.scheme_of(node)
    ranges = slot_ranges(qz, node)
    slots = [None if r is None else activation_qparams(*r, sch) for r in ranges]
    a = node.attrs
    ins: list[str | None] = []
    for i, v in enumerate(node.inputs):
        carried = node.op == "while_" or (node.op == "scan" and i < a["num_carries"])
        if v is None or not qz.is_float(v):
            ins.append(None if v is None else qz.fname(v))
        elif carried:
            ins.append(qz.qname_as(v, slots[i], sch))
        else:
            ins.append(qz.qname(v, sch))
    in_types = [qz.out.types[v] for v in ins]  # type: ignore[index]
    view = as_view(qz.rec)
    attrs = dict(a)
    for attr, sub in subgraph_attrs(a):
        if node.op == "if_":
            sub_in = [t.quant for t in in_types[1:]]
        elif node.op == "scan":
            from rlx_edge.ir.ops.control import slice_quant

            nc = a["num_carries"]
            sub_in = [t.quant for t in in_types[:nc]] + [slice_quant(t.quant, -1) for t in in_types[nc:]]
        else:
            sub_in = [t.quant for t in in_types]
        sub_out, sub_ranges = ([None], [None]) if attr == "cond" else (slots, ranges)
        where = sub_prefix(view.prefix, node.name, attr)
        attrs[attr] = _quantize_subgraph(qz, sub, where, sub_in, sub_out, sub_ranges, sch)
    outs = [qz._fresh(o) for o in node.outputs]
    qz.out.add_node(node.op, ins, attrs, name=qz._fresh(node.name), out_names=outs, out_quant=slots)
    for o, name, q in zip(node.outputs, outs, slots):
        if q is None:
            qz.fv[o] = name
        else:
            qz._aq[(o, q.storage)] = q  # readers take the slot's parameters, not the result's own range
            qz.qv[o] = name


def _quantize_subgraph(
    qz: _Quantizer,
    sub: Graph,
    prefix: str,
    in_quant: Sequence[QuantParams | None],
    out_quant: Sequence[QuantParams | None],
    out_ranges: Sequence[tuple[float, float] | None],
    sch: Scheme,
) -> Graph:
    from rlx_edge.quant.ptq import _Quantizer

    # A result computed from its range takes its slot's parameters directly (no requantize);
    # one passing an input through, or fixing its own, is requantized below.
    overrides = {}
    for o, r in zip(sub.outputs, out_ranges):
        if r is not None and o not in sub.inputs and o not in sub.params:
            overrides[o] = TensorRange(*r)  # the slot's union range: activation_qparams gives the slot's parameters
    view = RecordView(as_view(qz.rec).root, prefix, overrides)
    inner = _Quantizer(sub, view, sch, False, set(), qz.bias_correction, qz.weight_method)  # type: ignore[arg-type]
    inner.input_quant = {v: q for v, q in zip(sub.inputs, in_quant) if q is not None}
    q = inner.run()
    q.metadata.pop("quantization", None)  # the parent's metadata describes the whole graph
    for t, c in inner.counts.items():
        qz.counts[prefix + t] = c
    for i, (o, want) in enumerate(zip(q.outputs, out_quant)):
        if want is None or q.types[o].quant == want:
            continue
        op = "quantize" if q.types[o].dtype.is_float else "requantize"
        name = f"{o}/slot"
        while name in q.types:
            name += "_"
        q.add_node(op, [o], {"dtype": want.storage}, name=name, out_quant=want)
        q.outputs[i] = name
    return q
