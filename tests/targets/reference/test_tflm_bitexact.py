"""The integer reference against TFLite Micro on the real MLPerf Tiny int8 models.

For each model: 50 seeded random inputs plus the all-minimum, all-maximum and
all-zero-point inputs; every output and every intermediate tensor of the
reference must be np.array_equal to TFLite Micro's (reference kernels, the
pinned ``tflite-micro`` build). The reference runs the 53 inputs as one
batch; TFLite Micro runs them one by one.
"""

from __future__ import annotations

import numpy as np
import pytest

from modelfiles import MLPERF
from rlx_edge.frontends.tflite import load_tflite
from rlx_edge.ir.ops import get_op
from rlx_edge.targets.reference import compare
from rlx_edge.targets.reference.compare import compare_with_tflm

MODELS = MLPERF

# model -> number of tensors compared per input (every node output TFLite names)
EXPECTED_TENSORS = {
    "kws_ref_model": 13,
    "vww_96_int8": 31,
    "pretrainedResnet_quant": 16,
    "ad01_int8": 10,
}


@pytest.mark.parametrize("model", sorted(EXPECTED_TENSORS))
def test_model_bitexact_with_tflm(model):
    r = compare_with_tflm(MODELS / f"{model}.tflite", n_inputs=50, seed=0)
    assert r.inputs == 50 and r.edge_inputs == 3
    assert r.tensors == EXPECTED_TENSORS[model]
    assert r.compared == 53 * EXPECTED_TENSORS[model]
    assert r.mismatches == 0, (r.first_mismatch, r.by_tensor)
    assert r.first_mismatch is None
    assert r.to_json()["mismatches"] == 0


def test_reference_runs_the_inputs_as_one_batch():
    g = load_tflite(MODELS / "kws_ref_model.tflite")
    batched = compare._rebatch(g, 53)
    assert batched is not None
    assert batched.types[g.inputs[0]].shape[0] == 53
    # the original graph is untouched
    assert g.types[g.inputs[0]].shape[0] == 1


def test_edge_inputs_are_min_max_and_zero_point():
    g = load_tflite(MODELS / "kws_ref_model.tflite")
    samples = compare.make_inputs(g, 2, seed=0)
    x = [s[g.inputs[0]] for s in samples]
    assert len(x) == 5
    assert np.all(x[2] == -128) and np.all(x[3] == 127) and np.all(x[4] == 83)
    again = compare.make_inputs(g, 2, seed=0)
    assert all(np.array_equal(a[g.inputs[0]], b[g.inputs[0]]) for a, b in zip(samples, again))


def test_a_one_bit_error_is_reported(monkeypatch):
    # The comparison must be able to fail: nudge one op's arithmetic and the
    # softmax output (and only it) must be flagged, with the first difference.
    softmax = get_op("softmax")
    real = softmax._eval

    def off_by_one(p, *inputs, **kw):
        y = real(p, *inputs, **kw).astype(np.int16)
        return np.clip(y + (y < 127), -128, 127).astype(np.int8)

    monkeypatch.setattr(softmax, "_eval", off_by_one)
    r = compare_with_tflm(MODELS / "ad01_int8.tflite", n_inputs=2)
    assert r.mismatches == 0  # no softmax in the autoencoder
    r = compare_with_tflm(MODELS / "kws_ref_model.tflite", n_inputs=3)
    assert r.mismatches == r.inputs + r.edge_inputs == 6
    assert r.mismatched_inputs == 3 and r.mismatched_edge_inputs == 3
    m = r.first_mismatch
    assert m is not None and m.node == "Identity" and m.input == 0
    assert m.ours == m.theirs + 1
    assert list(r.by_tensor) == ["Identity"]
