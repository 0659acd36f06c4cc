"""Single-op int16 models from TFLite Micro's own integration tests (SEANet), against TFLite Micro.

``transpose_conv4`` computes its output shape at run time (SHAPE -> STRIDED_SLICE -> PACK): the
importer takes the output tensor's static shape instead of refusing the op. ``leaky_relu1``'s scales
make the identity multiplier land on near-ties that only a multiplier computed in double (as TFLite
Micro computes it) rounds the same way. Found by running every ``.tflite`` of tflite-micro at
90b983c2 through ``rlx-edge compare --against tflm``.
"""

from __future__ import annotations

import pytest

from modelfiles import SEANET
from rlx_edge.frontends.tflite import load_tflite
from rlx_edge.targets.reference.compare import compare_with_tflm


@pytest.mark.parametrize("name", ["transpose_conv4", "leaky_relu1"])
def test_reference_equals_tflite_micro(name):
    path = SEANET / f"{name}.tflite"
    report = compare_with_tflm(path, n_inputs=20, seed=5)
    assert report.ok, report.first_mismatch
    assert report.mismatched_inputs == 0


def test_a_computed_transpose_conv_shape_is_the_output_tensors():
    g = load_tflite(SEANET / "transpose_conv4.tflite")
    (tconv,) = [n for n in g.nodes if n.op == "transpose_conv2d"]
    assert tconv.attrs["output_shape"] == g.types[tconv.outputs[0]].shape
