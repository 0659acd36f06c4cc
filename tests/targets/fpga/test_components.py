"""Every hardware component on the second simulator, Icarus, with random parallelism.

Verilator runs every op the FPGA has a rule for in tests/targets/test_op_x_target.py;
here each component also runs on Icarus (the other simulator users have), with random
shapes, quantization and a random legal PE x SIMD, and every output element of
several random inputs must equal the integer reference's.
"""

from __future__ import annotations

import numpy as np
import pytest

from rlx_edge.ir.graph import Graph
from rlx_edge.ir.types import QuantParams
from rlx_edge.targets.fpga import build_fpga
from rlx_edge.targets.fpga.components import _MacLayer
from rlx_edge.targets.fpga.design import _divisors

from ._graphs import BUILDERS, act_q, depthwise, weights

SEEDS = {name: 100 + i for i, name in enumerate(BUILDERS)}


def _random_parallelism(rng, graph) -> dict:
    """A random legal (PE, SIMD) for the layer: divisors of its output and input channels."""
    node = graph.nodes[0]
    if node.op in ("conv2d", "fully_connected"):
        w = graph.params[node.inputs[1]]
        return {node.name: (int(rng.choice(_divisors(w.shape[0]))), int(rng.choice(_divisors(w.shape[-1]))))}
    if node.op == "softmax":
        return {}
    inner = int(graph.types[node.outputs[0]].shape[-1])
    return {node.name: (int(rng.choice(_divisors(inner))), 1)}


@pytest.mark.parametrize("op", sorted(BUILDERS))
def test_component_bit_exact_on_icarus(op, tmp_path):
    simulator = "icarus"
    rng = np.random.default_rng(SEEDS[op])
    graph = BUILDERS[op](rng)
    par = _random_parallelism(rng, graph)
    res = build_fpga(
        graph, tmp_path, parallelism=par or "latency", simulate=True, simulator=simulator, inferences=3, seed=SEEDS[op]
    )
    assert res["mismatches"] == 0, res["first_mismatch"]
    assert res["inferences"] == 3
    # the bench really compared something: outputs came back with the reference's shapes
    assert all(o.shape[0] == 3 for o in res["outputs"])
    assert res["cycles"] > 0
    # the cycle model (fold.cycles, build_fpga without simulation) is exact: loop steps, the start pulse
    # and the component's declared pipeline latency
    for row in res["per_layer"]:
        assert row["cycles"] == row["steps"] + row["fill"], row


def _fc_graph(i: int, o: int, per_channel: bool) -> Graph:
    rng = np.random.default_rng(i * 100 + o)
    g = Graph("rand_fc_rq")
    x = g.input("x", (1, i), "i8", quant=act_q(rng))
    w, wq = weights(rng, (o, i), 0)
    if not per_channel:  # one scale for every output: the requantizer's constant form
        wq = QuantParams(float(wq.scale[0]), 0)
    b = g.param("b", rng.integers(-3000, 3000, o).astype(np.int32))
    g.output(g.fully_connected(x, g.param("w", w, quant=wq), b, activation="relu", out_quant=act_q(rng)))
    return g


@pytest.mark.parametrize(
    ("build", "par", "taps", "rq_lanes"),
    [
        # 8 accumulators every 2 steps: 4 requantizer lanes in 2 turns (per-channel parameters shifted too)
        (lambda: _fc_graph(8, 8, per_channel=True), (8, 4), 2, 4),
        (lambda: _fc_graph(16, 8, per_channel=False), (8, 4), 4, 2),  # per-tensor: no parameters to shift
        # a 3x3 depthwise's 8 channels every 9 taps: one lane, 8 turns
        (lambda: depthwise(np.random.default_rng(7), c=8), (8, 1), 9, 1),
    ],
    ids=["fc-2-turns", "fc-per-tensor-4-turns", "dw-8-turns"],
)
def test_accumulators_share_requantizer_lanes(build, par, taps, rq_lanes, tmp_path):
    """Fewer requantizer lanes than accumulators (``_MacLayer.requant_lanes``): bit-exact, the cycle model
    exact, on Icarus."""
    graph = build()
    node = graph.nodes[0]
    assert _MacLayer.requant_lanes(par[0], taps) == rq_lanes  # the case exercises what its id says
    res = build_fpga(graph, tmp_path, parallelism={node.name: par}, simulate=True, simulator="icarus", inferences=2)
    (row,) = res["per_layer"]
    assert (row["pe"], row["simd"]) == par
    assert res["mismatches"] == 0, res["first_mismatch"]
    assert row["cycles"] == row["steps"] + row["fill"], row


def test_requant_lanes_are_the_fewest_that_keep_up():
    assert [_MacLayer.requant_lanes(8, t) for t in (1, 2, 3, 4, 7, 8, 100)] == [8, 4, 4, 2, 2, 1, 1]
    assert [_MacLayer.requant_lanes(6, t) for t in (1, 2, 3, 5, 6)] == [6, 3, 2, 2, 1]
    assert _MacLayer.requant_lanes(1, 1) == 1
