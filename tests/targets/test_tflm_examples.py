"""TFLite Micro's example models, the first ones a new user tries, on every target (issue #16).

``person_detect`` (a MobileNet v1 at 96x96 whose biases carry the filter's
``quantized_dimension`` 3) and ``micro_speech_quantized`` both start with a
depthwise layer of depth multiplier 8 on one input channel. Each must match
TFLite Micro bit for bit in the reference (outputs and every intermediate)
and the reference bit for bit on the Cortex-M host build, QEMU (M4 and M3)
and JAX; the FPGA simulation is in ``fpga/test_models.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

from modelfiles import TFLM
from rlx_edge.frontends import load_model
from rlx_edge.pipeline import AS_GIVEN, optimize_graph
from rlx_edge.runners import prepare
from rlx_edge.targets.reference.compare import compare_with_target, compare_with_tflm

# model -> tensors TFLite Micro names per input (outputs and intermediates)
EXAMPLES = {"person_detect": 31, "micro_speech_quantized": 4}
TARGETS = ("cortexm-host", "qemu-m4", "qemu-m3", "jax")


@pytest.fixture(scope="module")
def graphs():
    cache = {}

    def get(name: str):
        if name not in cache:
            cache[name] = optimize_graph(load_model(TFLM / f"{name}.tflite"), AS_GIVEN)[0]
        return cache[name]

    return get


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_reference_is_bit_exact_with_tflm(name):
    r = compare_with_tflm(TFLM / f"{name}.tflite", n_inputs=20, seed=3)
    assert r.tensors == EXAMPLES[name]
    assert r.compared == 23 * EXAMPLES[name]
    assert r.mismatches == 0, (r.first_mismatch, r.by_tensor)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_target_is_bit_exact_with_reference(graphs, name, target, tmp_path):
    g = graphs(name)
    r = compare_with_target(g, prepare(target, g, tmp_path), n_inputs=3, seed=5)
    assert r.inputs == 3 and r.edge_inputs == 3
    assert r.float_tensors == 0  # int8 in, int8 out: nothing is compared with a tolerance
    assert r.mismatches == 0, r.first_mismatch


def test_person_detect_biases_are_per_channel_along_their_only_axis(graphs):
    """The file says quantized dimension 3 for a 1-D bias; TFLite Micro ignores it, and so do we."""
    g = graphs("person_detect")
    biases = [p for p in g.params if p.endswith("_bias")]
    assert len(biases) == 28  # 27 convolution layers and the classifier
    for b in biases:
        q = g.types[b].quant
        assert q.axis == 0 and q.scale.size == g.types[b].shape[0] > 1, (b, q)
    # the scales are the products of the input's and each filter channel's scale, as the spec says
    conv = next(n for n in g.nodes if n.inputs[2:] and n.inputs[2] == biases[0])
    want = g.types[conv.inputs[0]].quant.scale * g.types[conv.inputs[1]].quant.scale
    assert np.allclose(g.types[biases[0]].quant.scale, want, rtol=1e-6)
