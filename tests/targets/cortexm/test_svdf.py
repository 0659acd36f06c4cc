"""SVDF on the Cortex-M host build over a sequence of invokes, the state threaded, against the reference.

(keyword_scrambled itself does not reach the MCU yet: its int16 -> int8 input QUANTIZE has no
Cortex-M kernel.)
"""

from __future__ import annotations

import numpy as np
import pytest
from svdfgraphs import svdf_graph

from rlx_edge.ir.interpret import run
from rlx_edge.targets.cortexm import compile_host

CASES = {
    "state_i16_rank2_batch2": dict(dtype="i8", rank=2, batch=2, memory=3),
    "state_i8_zero_point_no_bias": dict(dtype="i8", state_dtype="i8", state_zp=-7, units=4, bias=False),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_svdf_sequence_bit_exact(case, tmp_path):
    g = svdf_graph(**CASES[case])
    model = compile_host(g, tmp_path)
    rng = np.random.default_rng(4)
    state = {"state": np.zeros(tuple(g.types["state"].shape), g.types["state"].dtype.numpy)}
    for k in range(10):
        feed = {"x": rng.integers(-128, 128, tuple(g.types["x"].shape)).astype(np.int8), **state}
        want, got = run(g, feed), model.run(feed)
        for name in g.outputs:
            assert np.array_equal(want[name], got[name]), f"step {k}: {name}"
        state = {"state": got[g.outputs[1]]}  # the C's own update carries on
