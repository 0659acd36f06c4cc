"""The four int8 MLPerf Tiny models: host builds bit-exact with the reference.

50 seeded inputs plus all -128, all 127 and all zero point, through both the
portable C and the (emulated) DSP code path.
"""

from __future__ import annotations

import numpy as np
import pytest

from rlx_edge.targets.cortexm import compile_host
from rlx_edge.targets.reference.compare import make_inputs
from rlx_edge.targets.reference.interpreter import run

from .conftest import MLPERF


@pytest.mark.parametrize("key", sorted(MLPERF))
def test_mlperf_bit_exact(key, mlperf_graph, host_dir):
    g = mlperf_graph(key)
    samples = make_inputs(g, 50, seed=7)
    assert len(samples) == 53
    refs = [run(g, s) for s in samples]
    for dsp in (False, True):
        model = compile_host(g, host_dir, dsp_emulate=dsp)
        mismatched = [
            k
            for k, (s, r) in enumerate(zip(samples, refs))
            if not all(np.array_equal(model.run(s)[o], r[o]) for o in g.outputs)
        ]
        assert mismatched == [], f"{key} ({'dsp' if dsp else 'portable'}): inputs {mismatched} differ"
    # the outputs are not constant (a kernel that wrote nothing would fail above, but be sure)
    assert len({refs[k][g.outputs[0]].tobytes() for k in range(50)}) > 1


def test_arena_matches_plan(mlperf_graph, host_dir):
    g = mlperf_graph("kws")
    model = compile_host(g, host_dir)
    prog = model.program
    assert prog.target == "cortexm"
    assert model.arena_bytes == prog.arena_bytes
    # scratch is declared by the rules and planned: the 1x1 convolutions and the first conv need it
    assert prog.scratch and prog.scratch_bytes > 0
    assert prog.arena_bytes >= prog.lower_bound_bytes
