"""Every hardware component on the second simulator, Icarus, with random parallelism.

Verilator runs every op the FPGA has a rule for in tests/targets/test_op_x_target.py;
here each component also runs on Icarus (the other simulator users have), with random
shapes, quantization and a random legal PE x SIMD, and every output element of
several random inputs must equal the integer reference's.
"""

from __future__ import annotations

import numpy as np
import pytest

from rlx_edge.targets.fpga import build_fpga
from rlx_edge.targets.fpga.design import _divisors

from ._graphs import BUILDERS

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
