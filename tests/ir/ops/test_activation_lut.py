"""gelu and silu on integers: lookup tables built at prepare (rlx_edge/ir/ops/activation.py).

GELU's tables are TFLite's (kernels/gelu.cc with LUTPopulate). TFLite Micro has no GELU
kernel, so the oracle is TFLite's own interpreter: ``gelu_litert.json`` holds its outputs on
every int8 and int16 input for a few quantizations (written by ``gelu_litert.py`` with
LiteRT); here our reference must equal them bit for bit. SILU is no TFLite builtin; its
tables are our documented semantics (x * sigmoid(x) in float64 per entry, rounded half
away from zero), checked against an independent evaluation. The targets (Cortex-M host
build, JAX, FPGA) are held equal to the reference by tests/targets/test_op_x_target.py.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from ir.ops.gelu_litert import all_inputs, digest, gelu_graph

from rlx_edge.errors import UnsupportedOpError
from rlx_edge.frontends.tflite import export_tflite, load_tflite
from rlx_edge.frontends.tflm import TflmError, run_tflm
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.plan import plan
from rlx_edge.ir.types import QuantParams
from rlx_edge.quant.calibrate import calibrate
from rlx_edge.quant.ptq import quantize
from rlx_edge.targets.reference import run

GOLDEN = json.loads(Path(__file__).with_name("gelu_litert.json").read_text())["cases"]


def _q(scale: float, zp: int, storage: str) -> QuantParams:
    return QuantParams(np.float32(scale), zp, storage=storage)


def _single(op: str, storage: str, in_q: tuple, out_q: tuple, **attrs) -> tuple[Graph, np.ndarray]:
    xs = all_inputs(storage)
    g = Graph(op)
    x = g.input("x", xs.shape, storage, quant=_q(*in_q, storage))
    g.output(getattr(g, op)(x, name="act", out_quant=_q(*out_q, storage), **attrs))
    return g, xs


def test_tflite_micro_has_no_gelu_kernel(tmp_path) -> None:
    """Why the oracle is TFLite's interpreter: should TFLite Micro gain GELU, this fails and the
    tables get checked against it instead."""
    path = tmp_path / "gelu.tflite"
    export_tflite(gelu_graph("i8", "none", 0.05, 3, 0.03, -100), path)
    with pytest.raises(TflmError, match="GELU"):
        run_tflm(path, [all_inputs("i8")])


@pytest.mark.parametrize("row", GOLDEN, ids=["-".join(map(str, r["case"])) for r in GOLDEN])
def test_gelu_equals_tflite_on_every_input(row) -> None:
    storage = row["case"][0]
    g = gelu_graph(*row["case"])
    (y,) = run(g, {g.inputs[0]: all_inputs(storage)}).values()
    y = y.reshape(-1)
    if storage == "i8":
        want = np.frombuffer(bytes.fromhex(row["outputs"]), np.int8)
        assert y.dtype == np.int8 and np.array_equal(y, want), f"{int((y != want).sum())} of 256 outputs differ"
    else:
        assert y.dtype == np.int16 and digest(y) == row["outputs"]


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_exports_and_imports_with_its_approximate_flag(approximate, tmp_path) -> None:
    g = gelu_graph("i8", approximate, 0.05, 3, 0.03, -100)
    path = tmp_path / "gelu.tflite"
    export_tflite(g, path)
    back = load_tflite(path)
    (node,) = back.nodes
    assert node.op == "gelu" and node.attrs["approximate"] == approximate
    xs = all_inputs("i8")
    assert np.array_equal(run(back, {back.inputs[0]: xs})[back.outputs[0]], run(g, {"x": xs})[g.outputs[0]])


def _silu(v: float) -> float:
    """x * sigmoid(x) written otherwise than the op's (0.5 x (1 + tanh(x / 2))), in float64."""
    return 0.5 * v * (1.0 + math.tanh(0.5 * v))


# the last: a table float32 arithmetic gets wrong by one entry
@pytest.mark.parametrize(
    ("in_q", "out_q"),
    [((0.05, 3), (0.03, -100)), ((0.11, -128), (0.02, -20)), ((0.06930999, -12), (0.040603377, -115))],
)
def test_silu_int8_table_is_float64_rounded_half_away(in_q, out_q) -> None:
    g, xs = _single("silu", "i8", in_q, out_q)
    y = run(g, {"x": xs})["act"].reshape(-1)
    s_x, s_y = float(np.float32(in_q[0])), float(np.float32(out_q[0]))
    exact = [_silu(s_x * (q - in_q[1])) / s_y for q in xs.reshape(-1).tolist()]
    # the two float64 evaluations round alike unless a value lies within their error of a tie
    assert all(abs(abs(v - math.trunc(v)) - 0.5) > 1e-9 for v in exact)
    want = [min(127, max(-128, math.copysign(math.floor(abs(v) + 0.5), v) + out_q[1])) for v in exact]
    assert np.array_equal(y, np.array(want, np.int8))


@pytest.mark.parametrize(("op", "fn"), [("silu", np.vectorize(_silu)), ("gelu", None)])
def test_int16_tables_follow_the_function_closely(op, fn) -> None:
    """A sanity bound on the 513-entry interpolated table, not the contract (that is the table's
    construction): within 3 output steps of the real value on every input (the table scales by
    65536 / 65535 / s_y, and interpolates)."""
    if fn is None:
        fn = np.vectorize(lambda v: 0.5 * v * math.erfc(-v / math.sqrt(2)))
    for s_x, s_y in ((2.0**-12, 2.0**-12), (3e-4, 4e-4)):  # outputs in range (saturated ones wrap)
        g, xs = _single(op, "i16", (s_x, 0), (s_y, 0))
        y = run(g, {"x": xs})["act"].reshape(-1).astype(np.float64)
        want = fn(xs.reshape(-1).astype(np.float64) * float(np.float32(s_x))) / float(np.float32(s_y))
        assert np.max(np.abs(y - want)) <= 3.0, (op, s_x)


@pytest.mark.parametrize("op", ["gelu", "silu"])
def test_int16_output_zero_point_is_refused(op) -> None:
    g, _ = _single(op, "i16", (2.0**-12, 0), (2.0**-12, 5))
    with pytest.raises(UnsupportedOpError, match=rf"node 'act' \({op}\): .*output zero point 0, got 5"):
        plan(g)


@pytest.mark.parametrize("scheme", ["int8", "int16x8"])
def test_ptq_puts_gelu_and_silu_on_the_integer_path(scheme) -> None:
    rng = np.random.default_rng(3)
    g = Graph("ffn")
    x = g.input("x", (1, 16))
    h = g.fully_connected(x, g.param("w", rng.standard_normal((16, 16)).astype(np.float32) * 0.5), name="fc")
    g.output(g.silu(g.gelu(h, approximate="tanh", name="gelu"), name="silu"))
    data = rng.standard_normal((32, 1, 16)).astype(np.float32)
    q = quantize(g, calibrate(g, list(data)), scheme=scheme, float_interface=True)
    storage = {"int8": "i8", "int16x8": "i16"}[scheme]
    for op in ("gelu", "silu"):
        (node,) = [n for n in q.nodes if n.op == op]
        assert str(q.types[node.inputs[0]].dtype) == storage and str(q.types[node.outputs[0]].dtype) == storage
    # quantized against float: a loose accuracy bound (the int8 weights' error dominates either scheme)
    want = run(g, {"x": data[0]})[g.outputs[0]]
    got = run(q, {q.inputs[0]: data[0]})[q.outputs[0]]
    assert np.max(np.abs(got - want)) < (0.08 if scheme == "int8" else 0.03)
