"""PTQ of the ops whose quantized kernels compare or copy stored values of several inputs.

TFLite's MAXIMUM, MINIMUM and SELECT_V2 take their operands and output quantized alike
(``shared_quant`` ops): PTQ gives them one set of parameters, the union of their calibrated
ranges. A graph input or constant read only by such ops is made in those parameters; a
value whose parameters are fixed elsewhere (tanh's output) is requantized once. The PTQ'd
models export and run bit-exactly in TFLite Micro; an operand quantized unlike the output
(hand-built) is requantized by the reference and refused by the exporter.
"""

from __future__ import annotations

import numpy as np
import pytest

from rlx_edge.errors import UnsupportedOpError
from rlx_edge.frontends.tflite import to_tflite_bytes
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.types import QuantParams
from rlx_edge.quant.calibrate import calibrate
from rlx_edge.quant.ptq import quantize
from rlx_edge.targets.reference import run
from rlx_edge.targets.reference.compare import compare_with_tflm

OPS = ("maximum", "minimum", "select_v2")
SCHEMES = ("int8", "int16x8")
SHAPE = (2, 3, 5)


def _apply(g: Graph, op: str, a: str, b: str) -> str:
    if op == "select_v2":
        cond = "cond" if "cond" in g.types else g.input("cond", SHAPE, "bool")
        return g.select_v2(cond, a, b)
    return getattr(g, op)(a, b)


def _data(rng: np.random.Generator, g: Graph) -> dict[str, np.ndarray]:
    out = {}
    for v in g.inputs:
        shape = tuple(int(d) for d in g.types[v].shape)
        if str(g.types[v].dtype) == "bool":
            out[v] = rng.random((16, *shape)) < 0.5
        else:  # operands of different ranges: one shared range must cover both
            out[v] = (rng.standard_normal((16, *shape)) * (4.0 if v == "y" else 0.5)).astype(np.float32)
    return out


def _quantized(g: Graph, scheme: str) -> Graph:
    return quantize(g, calibrate(g, _data(np.random.default_rng(1), g), optimize=False), scheme=scheme, optimize=False)


def _inputs_graph(op: str) -> Graph:
    g = Graph(f"{op}_inputs")
    g.output(_apply(g, op, g.input("x", SHAPE, "f32"), g.input("y", SHAPE, "f32")))
    return g


def _mixed_graph(op: str) -> Graph:
    """One operand with fixed parameters of its own (tanh's), a constant, a graph input."""
    g = Graph(f"{op}_mixed")
    x, y = g.input("x", SHAPE, "f32"), g.input("y", SHAPE, "f32")
    c = g.param("c", np.linspace(-3, 1, 5, dtype=np.float32).reshape(1, 1, 5))
    g.output(_apply(g, op, g.tanh(x), _apply(g, op, y, c)))
    return g


def _node(q: Graph, op: str, k: int = 0):
    return [n for n in q.nodes if n.op == op][k]


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("op", OPS)
def test_operands_and_output_share_one_range(op: str, scheme: str) -> None:
    q = _quantized(_inputs_graph(op), scheme)
    node = _node(q, op)
    qs = [q.types[v].quant for v in node.inputs + node.outputs if q.types[v].quant is not None]
    assert len(qs) == 3 and all(p == qs[0] for p in qs)
    assert not any(n.op in ("quantize", "requantize") for n in q.nodes)  # the inputs are made so
    s = float(qs[0].scale[0])
    assert s * (127 if scheme == "int8" else 32767) >= 4.0  # y's range (4 sigma = 16) is covered, not x's (2)


@pytest.mark.parametrize("op", OPS)
def test_fixed_parameters_are_requantized_and_constants_quantized_alike(op: str) -> None:
    q = _quantized(_mixed_graph(op), "int8")
    inner, outer = _node(q, op, 0), _node(q, op, 1)
    for node in (inner, outer):
        want = q.types[node.outputs[0]].quant
        assert all(q.types[v].quant == want for v in node.inputs if q.types[v].quant is not None)
    made = {o: n for n in q.nodes for o in n.outputs}
    assert made[outer.inputs[-2]].op == "requantize"  # tanh's 1/128 output onto the outer range
    assert inner.inputs[-1] in q.params  # the constant is quantized in the shared parameters


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("build", [_inputs_graph, _mixed_graph], ids=["inputs", "mixed"])
def test_ptq_models_run_bit_exactly_in_tflm(op: str, scheme: str, build, tmp_path) -> None:
    q = _quantized(build(op), scheme)
    path = tmp_path / f"{q.name}_{scheme}.tflite"
    path.write_bytes(to_tflite_bytes(q))
    r = compare_with_tflm(path, n_inputs=10, seed=3)
    assert r.inputs == 10 and r.compared >= 10
    assert r.mismatches == 0, r.first_mismatch


@pytest.mark.parametrize("op", ("maximum", "minimum"))
def test_an_operand_quantized_unlike_the_output_is_requantized_and_not_exported(op: str) -> None:
    qa, qb, qy = QuantParams(0.02, 5), QuantParams(0.1, -7), QuantParams(0.05, 3)
    g = Graph(op)
    a, b = g.input("a", SHAPE, "i8", quant=qa), g.input("b", SHAPE, "i8", quant=qb)
    g.output(getattr(g, op)(a, b, out_quant=qy))
    h = Graph(f"{op}_requantized")  # the same with explicit requantize nodes onto the output's parameters
    ha, hb = h.input("a", SHAPE, "i8", quant=qa), h.input("b", SHAPE, "i8", quant=qb)
    ra, rb = (h.requantize(v, dtype="i8", out_quant=qy) for v in (ha, hb))
    h.output(getattr(h, op)(ra, rb, out_quant=qy))
    rng = np.random.default_rng(2)
    for _ in range(3):
        feed = {v: rng.integers(-128, 128, SHAPE).astype(np.int8) for v in ("a", "b")}
        assert np.array_equal(run(g, feed)[g.outputs[0]], run(h, feed)[h.outputs[0]])
    with pytest.raises(UnsupportedOpError, match=f"{op} with an input quantized unlike its output"):
        to_tflite_bytes(g)
    to_tflite_bytes(h)  # TFLite's form: QUANTIZE then the op on alike operands
