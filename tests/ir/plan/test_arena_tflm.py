"""The plan proved on real models: executing in the planned arena stays bit-exact with TFLite Micro."""

import pytest

from modelfiles import MLPERF
from rlx_edge.frontends.tflite import load_tflite
from rlx_edge.ir.plan import plan
from rlx_edge.targets.reference.compare import compare_with_tflm

# (file, inputs, goal in bytes): min(ratio x TFLite Micro's measured arena, microTVM AOT workspace)
MODELS = [
    ("kws_ref_model.tflite", 50, min(0.70 * 24272, 17232)),
    ("vww_96_int8.tflite", 50, min(0.70 * 103680, 64800)),
    ("pretrainedResnet_quant.tflite", 50, min(0.90 * 55984, 66112)),
    ("ad01_int8.tflite", 50, min(0.30 * 3984, 1160)),
]


@pytest.mark.parametrize("model,n,goal", MODELS, ids=[m[0].split(".")[0] for m in MODELS])
def test_arena_execution_is_bit_exact_with_tflm(model, n, goal):
    result = compare_with_tflm(MLPERF / model, n_inputs=n, seed=7, runner="arena")
    assert result.inputs == n and result.edge_inputs == 3 and result.tensors > 0
    assert result.mismatches == 0, result.first_mismatch
    p = plan(load_tflite(MLPERF / model))
    assert p.lower_bound_bytes <= p.arena_bytes <= goal
