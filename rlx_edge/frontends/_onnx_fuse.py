"""Exporter decompositions put back together before import: Erf-form GELU and decomposed layer norm.

Exporters write ops an older opset lacks as elementwise chains: torch's GELU below opset 20 is
``x * (Erf(x / sqrt 2) + 1) * 0.5`` and its layer norm below opset 17 is ``ReduceMean, Sub, Pow,
ReduceMean, Add(eps), Sqrt, Div, Mul(gamma), Add(beta)``. The IR has ``gelu`` and ``layer_norm``
(with integer kernels) but no ``erf``, so each chain is replaced by the one ``Gelu`` /
``LayerNormalization`` node it computes, which the importer's handlers then translate. A chain is
fused only when its constants are the ones that make it that function and no value inside it is
read from outside (or is a graph output); anything else is left as written. Malformed nodes are
never fused: the importer reports them as it would without this pass.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import numpy_helper

_SQRT2 = math.sqrt(2.0)


@dataclass
class _Graph:
    """Producers, consumers and constants of one ONNX graph, by value name."""

    graph: onnx.GraphProto
    producer: dict[str, onnx.NodeProto] = field(default_factory=dict)
    readers: dict[str, int] = field(default_factory=dict)
    consts: dict[str, np.ndarray] = field(default_factory=dict)
    # values computed from constants alone: the importer folds them, by ONNX's evaluator, which knows
    # only the model's opset (a Gelu there would be refused), so chains over them stay as written
    static: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, graph: onnx.GraphProto) -> _Graph:
        g = cls(graph)
        for t in graph.initializer:
            g.consts[t.name] = t
        for n in graph.node:
            for o in n.output:
                g.producer[o] = n
            for i in n.input:
                g.readers[i] = g.readers.get(i, 0) + 1
            if n.op_type == "Constant" and n.domain in ("", "ai.onnx") and len(n.output) == 1:
                value = [a for a in n.attribute if a.name == "value" and a.type == onnx.AttributeProto.TENSOR]
                if len(value) == 1 and len(n.attribute) == 1:
                    g.consts[n.output[0]] = value[0].t
        for o in graph.output:
            g.readers[o.name] = g.readers.get(o.name, 0) + 1  # a graph output is read from outside
        g.static = set(g.consts)
        for n in graph.node:
            if n.input and all(not i or i in g.static for i in n.input):
                g.static.update(o for o in n.output if o)
        return g

    def const(self, name: str) -> np.ndarray | None:
        t = self.consts.get(name)
        if t is None:
            return None
        if not isinstance(t, np.ndarray):
            try:
                t = numpy_helper.to_array(t)
            except Exception:  # a corrupt tensor: the importer names it when it reads it
                return None
            self.consts[name] = t
        return t

    def scalar(self, name: str, want: float) -> bool:
        """``name`` is a constant holding the one value ``want`` (float32 precision)."""
        c = self.const(name)
        return (
            c is not None
            and c.size == 1
            and c.dtype.kind == "f"
            and math.isclose(float(c.reshape(-1)[0]), want, rel_tol=1e-6, abs_tol=0.0)
        )

    def node_of(self, name: str, op: str) -> onnx.NodeProto | None:
        n = self.producer.get(name)
        if n is None or n.op_type != op or n.domain not in ("", "ai.onnx") or len(n.output) != 1:
            return None
        return n

    def private(self, name: str, readers: int = 1) -> bool:
        """Only the chain reads ``name``."""
        return self.readers.get(name, 0) == readers

    def sole_reader(self, name: str, op: str) -> onnx.NodeProto | None:
        if not self.private(name):
            return None
        for n in self.graph.node:
            if name in n.input:
                return n if n.op_type == op and n.domain in ("", "ai.onnx") and len(n.output) == 1 else None
        return None


def _binary(n: onnx.NodeProto) -> tuple[str, str] | None:
    return (n.input[0], n.input[1]) if len(n.input) == 2 and all(n.input) else None


def _other(n: onnx.NodeProto, one: str) -> str | None:
    """The operand of binary ``n`` that is not ``one``."""
    ab = _binary(n)
    if ab is None or one not in ab:
        return None
    return ab[1] if ab[0] == one else ab[0]


@dataclass
class _Match:
    drop: list[onnx.NodeProto]  # the chain's nodes; the new node takes the place of the last
    node: onnx.NodeProto


def _gelu(g: _Graph, erf: onnx.NodeProto) -> _Match | None:
    """0.5 * x * (1 + erf(x / sqrt 2)), with the three multiplies in any order, from its Erf node."""
    if len(erf.input) != 1 or len(erf.output) != 1:
        return None
    scaled = g.node_of(erf.input[0], "Div") or g.node_of(erf.input[0], "Mul")
    if scaled is None or not g.private(scaled.output[0]) or _binary(scaled) is None:
        return None
    x, c = scaled.input
    if scaled.op_type == "Mul" and g.scalar(x, 1 / _SQRT2) and not g.scalar(c, 1 / _SQRT2):
        x, c = c, x
    if not g.scalar(c, _SQRT2 if scaled.op_type == "Div" else 1 / _SQRT2) or x in g.static:
        return None
    plus = g.sole_reader(erf.output[0], "Add")
    if plus is None or not g.scalar(_other(plus, erf.output[0]) or "", 1.0):
        return None
    m1 = g.sole_reader(plus.output[0], "Mul")
    if m1 is None:
        return None
    a = _other(m1, plus.output[0])
    chain = [scaled, erf, plus, m1]
    if a == x:  # (x * (1 + erf)) * 0.5
        m2 = g.sole_reader(m1.output[0], "Mul")
        if m2 is None or not g.scalar(_other(m2, m1.output[0]) or "", 0.5):
            return None
        chain.append(m2)
    elif a is not None and g.scalar(a, 0.5):  # x * ((1 + erf) * 0.5)
        m2 = g.sole_reader(m1.output[0], "Mul")
        if m2 is None or _other(m2, m1.output[0]) != x:
            return None
        chain.append(m2)
    else:  # (x * 0.5) * (1 + erf)
        half = g.node_of(a or "", "Mul")
        if half is None or not g.private(half.output[0]) or _other(half, x) is None:
            return None
        if not g.scalar(_other(half, x) or "", 0.5):
            return None
        chain.insert(0, half)
    last = chain[-1]
    node = onnx.helper.make_node("Gelu", [x], list(last.output), name=last.name or erf.name)
    return _Match(chain, node)


def _reduce_axes(g: _Graph, n: onnx.NodeProto) -> list[int] | None:
    """Axes of a keepdims ReduceMean (attribute below opset 18, input from 18)."""
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
    if int(attrs.get("keepdims", 1)) != 1 or int(attrs.get("noop_with_empty_axes", 0)):
        return None
    if len(n.input) > 1 and n.input[1]:
        c = g.const(n.input[1])
        axes = None if c is None or c.dtype.kind != "i" else [int(v) for v in c.reshape(-1)]
    else:
        axes = [int(v) for v in attrs.get("axes", [])] or None
    return axes


def _trailing(axes: list[int] | None) -> int | None:
    """The first of negative axes that run to the end (-2, -1): layer norm's ``axis``."""
    if not axes or sorted(axes) != list(range(-len(axes), 0)):
        return None
    return -len(axes)


def _layer_norm(g: _Graph, mean: onnx.NodeProto) -> _Match | None:
    """(x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps) [* gamma] [+ beta], from its first ReduceMean."""
    if not mean.input or not mean.input[0] or len(mean.output) != 1:
        return None
    x, axes = mean.input[0], _reduce_axes(g, mean)
    axis = _trailing(axes)
    if x in g.static:
        return None
    sub = g.sole_reader(mean.output[0], "Sub")
    if axis is None or sub is None or _binary(sub) != (x, mean.output[0]):
        return None
    d = sub.output[0]
    readers = [n for n in g.graph.node if d in n.input]
    sq = next((n for n in readers if n.op_type in ("Pow", "Mul")), None)
    div = next((n for n in readers if n.op_type == "Div"), None)
    if len(readers) != 2 or sq is None or div is None or len(sq.output) != 1:
        return None
    if not g.private(d, 2 + (sq.op_type == "Mul")):  # Mul(d, d) reads it twice
        return None
    if not (sq.op_type == "Pow" and _binary(sq) and sq.input[0] == d and g.scalar(sq.input[1], 2.0)) and not (
        sq.op_type == "Mul" and _binary(sq) == (d, d)
    ):
        return None
    var = g.sole_reader(sq.output[0], "ReduceMean")
    if var is None or _reduce_axes(g, var) != axes:
        return None
    add = g.sole_reader(var.output[0], "Add")
    eps_name = _other(add, var.output[0]) if add is not None else None
    eps = g.const(eps_name) if eps_name else None
    if eps is None or eps.size != 1 or eps.dtype.kind != "f" or not float(eps.reshape(-1)[0]) >= 0:
        return None
    root = g.sole_reader(add.output[0], "Sqrt")  # type: ignore[union-attr]
    if root is None or g.sole_reader(root.output[0], "Div") is not div or _binary(div) != (d, root.output[0]):
        return None
    chain = [mean, sub, sq, var, add, root, div]  # type: ignore[list-item]
    inputs = [x, "", ""]
    scale_mul = g.sole_reader(div.output[0], "Mul")
    gamma = _other(scale_mul, div.output[0]) if scale_mul is not None else None
    if scale_mul is not None and gamma is not None and g.const(gamma) is not None:
        chain.append(scale_mul)
        inputs[1] = gamma
        bias_add = g.sole_reader(scale_mul.output[0], "Add")
        beta = _other(bias_add, scale_mul.output[0]) if bias_add is not None else None
        if bias_add is not None and beta is not None and g.const(beta) is not None:
            chain.append(bias_add)
            inputs[2] = beta
    last = chain[-1]
    attrs = {"axis": axis, "epsilon": float(eps.reshape(-1)[0])}
    if not inputs[2]:
        inputs.pop()
    node = onnx.helper.make_node("LayerNormalization", inputs, list(last.output), name=last.name, **attrs)
    return _Match(chain, node)


def _one_scale(model: onnx.ModelProto, match: _Match) -> None:
    """A fused layer norm without its Mul gets a scale of 1 (the importer broadcasts it)."""
    if len(match.node.input) < 2 or match.node.input[1]:
        return
    taken = {t.name for t in model.graph.initializer} | {o for n in model.graph.node for o in n.output}
    name, k = f"{match.node.output[0]}__scale", 0
    while name in taken:
        k += 1
        name = f"{match.node.output[0]}__scale_{k}"
    model.graph.initializer.append(numpy_helper.from_array(np.ones(1, np.float32), name))
    match.node.input[1] = name


def _key(n: onnx.NodeProto) -> tuple[str, ...]:
    """A node's identity: its outputs (the importer has checked that each value is assigned once)."""
    return tuple(n.output)


def fuse_decompositions(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with each Erf-form GELU and decomposed layer norm as one node; ``model`` itself if none."""
    g = _Graph.of(model.graph)
    matches: list[_Match] = []
    used: set[tuple[str, ...]] = set()
    for n in model.graph.node:
        if n.domain not in ("", "ai.onnx"):
            continue
        try:
            m = _gelu(g, n) if n.op_type == "Erf" else _layer_norm(g, n) if n.op_type == "ReduceMean" else None
        except (ValueError, TypeError, KeyError, IndexError, AttributeError):
            m = None  # a malformed node is no match: the importer reports it as it is
        if m is not None and not any(_key(k) in used for k in m.drop):
            used.update(_key(k) for k in m.drop)
            matches.append(m)
    if not matches:
        return model
    out = onnx.ModelProto()
    out.CopyFrom(model)
    for m in matches:
        _one_scale(out, m)
    last = {_key(m.drop[-1]): m.node for m in matches}
    nodes = [last.get(_key(n), n) for n in model.graph.node if _key(n) in last or _key(n) not in used]
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    return out
