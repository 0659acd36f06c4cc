"""LSTM on Cortex-M over a sequence of invokes, hidden and cell state threaded, against the reference.

Single LSTM layers (int8 with a zero point, int16x8, time-major batches, a cell clip) on the
host build, and TFLite Micro's trained_lstm_int8 (an LSTM of 28 steps, a fully connected
layer, softmax) on the host build and under QEMU on an M4 (DSP) and an M3 (portable), each
side threading its own states through the invokes.
"""

from __future__ import annotations

import numpy as np
import pytest
from lstmgraphs import lstm_graph
from threadedsequence import assert_threaded_equal, qemu_threaded, reference_sequence

from modelfiles import model_path
from opgraphs import merge_graphs
from rlx_edge.frontends.tflite import load_tflite
from rlx_edge.ir.interpret import run
from rlx_edge.targets.cortexm import compile_host
from rlx_edge.targets.reference.compare import run_threaded

CASES = {
    "i8_zero_points_clip": dict(dtype="i8", cell_clip=0.5, state=4),
    "i8_time_major_batch2": dict(dtype="i8", batch=2, time_major=True, cell_scale=2.0**-13),
    "i16x8_batch2": dict(dtype="i16", batch=2, steps=3, cell_scale=2.0**-12),
}


def test_lstm_sequences_bit_exact(tmp_path):
    """Every case a branch of one host build; each branch threads the C's own updated states."""
    names = sorted(CASES)
    g = merge_graphs([lstm_graph(**CASES[c]) for c in names], "lstm_cases", "c")
    model = compile_host(g, tmp_path)
    rng = np.random.default_rng(4)
    pairs = {f"c{i}_{s}": f"c{i}_{k}" for i in range(len(names)) for s, k in (("hidden", 1), ("cell", 2))}
    outs = {f"c{i}_{k}": g.outputs[3 * i + k] for i in range(len(names)) for k in range(3)}
    state = {s: np.zeros(tuple(g.types[s].shape), g.types[s].dtype.numpy) for s in pairs}
    for k in range(6):
        feed = dict(state)
        for i in range(len(names)):
            x = g.types[f"c{i}_x"]
            info = np.iinfo(x.dtype.numpy)
            feed[f"c{i}_x"] = rng.integers(info.min, int(info.max) + 1, tuple(x.shape)).astype(x.dtype.numpy)
        want, got = run(g, feed), model.run(feed)
        for name in g.outputs:
            assert np.array_equal(want[name], got[name]), f"step {k}: {name}"
        state = {s: got[outs[u]] for s, u in pairs.items()}  # the C's own updates carry on


@pytest.fixture(scope="module")
def lstm_model():
    g = load_tflite(model_path("tflm/trained_lstm_int8.tflite"))
    samples, wants = reference_sequence(g, 3, seed=2, moving=g.outputs[2])  # 6 invokes, the cell state moving
    return g, samples, wants


def test_trained_lstm_int8_host_threaded(lstm_model, tmp_path):
    g, samples, wants = lstm_model
    assert_threaded_equal(g, wants, run_threaded(g, samples, compile_host(g, tmp_path).run), "cortexm-host")


@pytest.mark.parametrize("core", ["m4", "m3"])
def test_trained_lstm_int8_qemu_threaded(lstm_model, core, tmp_path):
    g, samples, wants = lstm_model
    gots, board = qemu_threaded(g, samples, core, tmp_path)
    assert_threaded_equal(g, wants, gots, board)
