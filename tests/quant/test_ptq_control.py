"""PTQ of control flow: calibration observes the values inside while_/scan/if_ subgraphs on every trip or
branch taken, and quantize gives each loop-carried slot / branch result one set of parameters (the
union of what flows through it), so the quantized subgraph signatures match and every target runs the
int8 graph bit for bit."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rlx_edge.cli import main
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.serialize import load, save
from rlx_edge.ir.types import QuantParams
from rlx_edge.quant.calibrate import calibrate
from rlx_edge.quant.ptq import activation_qparams, get_scheme, quantize
from rlx_edge.quant.record import CalibrationError
from rlx_edge.targets.cortexm.emit import emit
from rlx_edge.targets.cortexm.host import compile_host
from rlx_edge.targets.jax import compile_jax
from rlx_edge.targets.reference import run

RNG = np.random.default_rng(19)
W = (RNG.standard_normal((4, 4)) * 0.6).astype(np.float32)
B = (RNG.standard_normal(4) * 0.1).astype(np.float32)
LENGTH = 5


def _sub(name: str, types: list[tuple[str, tuple[int, ...]]]) -> tuple[Graph, list]:
    g = Graph(name)
    return g, [g.input(n, s, "f32") for n, s in types]


def loops() -> Graph:
    """``i = 0; while i < n: h = tanh(fc(h)); i += 1`` (n a graph input: the trip count is dynamic), then
    ``acc = h; for x in xs: acc = acc + x; y = relu(acc)``; outputs h, the final acc and the ys."""
    carried = [("i", (1,)), ("n", (1,)), ("h", (1, 4))]
    cond, (i, n, _) = _sub("cond", carried)
    cond.output(cond.less(i, n, name="more"))
    body, (i, n, h) = _sub("body", carried)
    fc = body.fully_connected(h, body.param("w", W), body.param("b", B), name="fc")
    one = body.param("one", np.ones(1, np.float32))
    body.output(body.add(i, one, name="next_i"), n, body.tanh(fc, name="next_h"))
    step, (acc, xt) = _sub("step", [("acc", (1, 4)), ("xt", (1, 4))])
    s = step.add(acc, xt, name="s")
    step.output(s, step.relu(s, name="y"))
    g = Graph("loops")
    x, n, xs = g.input("x", (1, 4), "f32"), g.input("n", (1,), "f32"), g.input("xs", (LENGTH, 1, 4), "f32")
    _, _, h = g.while_(g.param("i0", np.zeros(1, np.float32)), n, x, cond=cond, body=body, name="loop")
    acc, ys = g.scan(h, xs, body=step, num_carries=1, name="steps")
    g.output(h, acc, ys)
    return g


def _samples(k: int, trips: tuple[int, ...] = (0, 1, 2, 3, 4, 5)) -> dict[str, np.ndarray]:
    # n half-way between integers: the quantized counter (steps of about 0.02) compares as the float one
    return {
        "x": RNG.uniform(-1, 1, (k, 1, 4)).astype(np.float32),
        "n": (RNG.choice(trips, (k, 1)) - 0.5).astype(np.float32),
        "xs": RNG.uniform(-0.5, 0.5, (k, LENGTH, 1, 4)).astype(np.float32),
    }


def _quantize_inputs(q: Graph, data: dict[str, np.ndarray], k: int) -> dict[str, np.ndarray]:
    out = {}
    for name in q.inputs:
        qp = q.types[name].quant
        v = np.round(data[name][k] / qp.scale[0]) + qp.zero_point[0]
        out[name] = np.clip(v, -128, 127).astype(np.int8)
    return out


def _dequantize(q: Graph, name: str, v: np.ndarray) -> np.ndarray:
    qp = q.types[name].quant
    return (v.astype(np.float64) - qp.zero_point[0]) * qp.scale[0]


@pytest.fixture(scope="module")
def quantized() -> tuple[Graph, Graph, object]:
    g = loops()
    rec = calibrate(g, _samples(24))
    return g, quantize(g, rec), rec


def test_calibration_observes_every_trip_inside_the_subgraphs(quantized) -> None:
    _, _, rec = quantized
    # the body's values under qualified names; tanh's range comes from trips, not from the graph's inputs
    for name in ("loop/body:fc", "loop/body:next_h", "loop/body:next_i", "loop/cond:i", "steps/body:s"):
        assert name in rec, name
    lo, hi = rec["loop/body:next_i"].scalar()
    assert (lo, hi) == (1.0, 5.0)  # the counter after trips 1..5: every trip of the longest loop observed
    assert rec["loop/cond:i"].scalar() == (0.0, 5.0)  # the cond also sees the value that ends the loop


def test_carried_slots_take_the_union_of_their_ranges(quantized) -> None:
    _, q, rec = quantized
    (loop, *_) = [n for n in q.nodes if n.op == "while_"]
    body, cond = loop.attrs["body"], loop.attrs["cond"]
    sch = get_scheme("int8")
    names = ("loop/body:h", "loop/body:next_h", "loop/cond:h", "x", "loop:2")
    want = activation_qparams(min(rec[v].scalar()[0] for v in names), max(rec[v].scalar()[1] for v in names), sch)
    for t in (
        q.types[loop.outputs[2]], q.types[loop.inputs[2]], body.types[body.inputs[2]],
        body.types[body.outputs[2]], cond.types[cond.inputs[2]],
    ):  # fmt: skip
        assert t.quant == want
    # tanh fixes its own output parameters (1/128, 0): requantized into the slot, inside the body
    assert [n.op for n in body.nodes][-1] == "requantize"
    # the counter's slot holds 0..5: its scale is well below the 0.5 margin of the half-integer limits
    assert q.types[loop.outputs[0]].quant.scale[0] < 0.05
    assert q.metadata["quantization"]["float_nodes"] == {}


def test_int8_loops_run_bit_exact_on_reference_jax_and_cortexm_host(quantized, tmp_path) -> None:
    g, q, _ = quantized
    data = _samples(7, trips=(0, 1, 2, 3, 4, 5, 5))
    data["n"] = (np.arange(-1, 6)[:, None] - 0.5).astype(np.float32)  # 0 trips (twice) up to 5
    feeds = [_quantize_inputs(q, data, k) for k in range(7)]
    assert emit(q).files["model.c"].count("while (1) {") == 1  # the while_ is a C loop, not unrolled
    host = compile_host(q, tmp_path)
    assert host.program.graph.nodes[0].op == "while_"
    jx = compile_jax(q, batch="exact")({k: np.stack([f[k] for f in feeds]) for k in q.inputs})
    worst = 0.0
    for k, f in enumerate(feeds):
        want = run(q, f)
        got = host.run(f)
        flt = run(g, {name: data[name][k] for name in g.inputs})
        for o, fo in zip(q.outputs, g.outputs):
            assert want[o].dtype == np.int8
            assert np.array_equal(got[o], want[o]), (o, k)
            assert np.array_equal(jx[o][k], want[o]), (o, k)
            worst = max(worst, float(np.abs(_dequantize(q, o, want[o]) - flt[fo]).max()))
    # int8 vs float: each int8 op rounds once (half a step of its output, scales <= 0.015 here) and
    # the errors add along a path: the scan's 5 adds, the requantize into its carry and the loop's
    # last trip (tanh contracts earlier trips' errors) stay below 10 half-steps, 0.075
    assert worst < 0.075, worst


def test_a_branch_the_calibration_never_took_is_named() -> None:
    t_ = Graph("then")
    a = t_.input("a", (3,), "f32")
    t_.output(t_.relu(a))
    e_ = Graph("else")
    a = e_.input("a", (3,), "f32")
    e_.output(e_.tanh(e_.add(a, a, name="twice")))  # twice needs a range: tanh's output does not
    g = Graph("branchy")
    c, x = g.input("c", (1,), "bool"), g.input("x", (3,), "f32")
    g.output(g.if_(c, x, then_branch=t_, else_branch=e_, name="pick"))
    rec = calibrate(g, {"c": np.ones((4, 1), bool), "x": RNG.standard_normal((4, 3)).astype(np.float32)})
    with pytest.raises(
        CalibrationError,
        match=r"never ran subgraph 'pick/else_branch' \(no range for its value 'twice'\).*takes every branch",
    ):
        quantize(g, rec)
    # both branches taken: the result's slot holds both (relu's and tanh's ranges)
    rec = calibrate(g, {"c": np.array([[True], [False]] * 4), "x": RNG.standard_normal((8, 3)).astype(np.float32)})
    q = quantize(g, rec)
    (node,) = q.nodes
    qp: QuantParams = q.types[node.outputs[0]].quant
    assert node.attrs["then_branch"].types[node.attrs["then_branch"].outputs[0]].quant == qp
    assert node.attrs["else_branch"].types[node.attrs["else_branch"].outputs[0]].quant == qp


def test_cli_quantizes_an_rlx_with_control_flow(tmp_path, capsys) -> None:
    model, data, out = tmp_path / "loops.rlx", tmp_path / "cal.npz", tmp_path / "q.rlx"
    save(loops(), model)
    np.savez(data, **_samples(8))
    assert main(["quantize", str(model), "--data", str(data), "-o", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["summary"]["numerics"]["silent_clips"] == 0
    q = load(out)
    assert {n.op for n in q.nodes} >= {"while_", "scan"}
    body = next(n for n in q.nodes if n.op == "while_").attrs["body"]
    assert {body.types[o].dtype.value for o in body.outputs} == {"i8"}
