"""SVDF on Cortex-M over a sequence of invokes, the state threaded, against the reference.

Single SVDF layers on the host build, and TFLite Micro's keyword_scrambled (seven SVDF
layers with int16 state, an int16 -> int8 input QUANTIZE, an int8 -> int16 softmax and an
int16 -> int32 output QUANTIZE) on the host build and under QEMU on an M4 (DSP) and an M3
(portable), each side threading its own state through 13 invokes.
"""

from __future__ import annotations

import numpy as np
import pytest
from svdfgraphs import svdf_graph
from threadedsequence import assert_threaded_equal, qemu_threaded, reference_sequence

from modelfiles import model_path
from rlx_edge.frontends.tflite import load_tflite
from rlx_edge.ir.interpret import run
from rlx_edge.targets.cortexm import compile_host
from rlx_edge.targets.reference.compare import run_threaded

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


@pytest.fixture(scope="module")
def kws():
    g = load_tflite(model_path("tflm/keyword_scrambled.tflite"))
    samples, wants = reference_sequence(g, 10, seed=2, moving=g.outputs[1])  # 13 invokes, the states moving
    return g, samples, wants


def test_keyword_scrambled_host_threaded(kws, tmp_path):
    g, samples, wants = kws
    assert_threaded_equal(g, wants, run_threaded(g, samples, compile_host(g, tmp_path).run), "cortexm-host")


@pytest.mark.parametrize("core", ["m4", "m3"])
def test_keyword_scrambled_qemu_threaded(kws, core, tmp_path):
    g, samples, wants = kws
    gots, board = qemu_threaded(g, samples, core, tmp_path)
    assert_threaded_equal(g, wants, gots, board)
