"""Acceptance: the default pipeline keeps every shared model's outputs (float within 1e-5, int8 exactly)."""

from __future__ import annotations

import numpy as np
import pytest

from modelfiles import MODELS
from rlx_edge.frontends.onnx import load_onnx
from rlx_edge.frontends.tflite import load_tflite
from rlx_edge.ir.passes import optimize
from rlx_edge.ir.passes.bind_symbols import bind_symbols, graph_symbols
from rlx_edge.models import build_digits_cnn
from rlx_edge.targets.reference import run
from rlx_edge.targets.reference.compare import make_inputs

SHARED = MODELS
TFLITE = [
    "kws_ref_model_float32.tflite",
    "pretrainedResnet.tflite",
    "vww_96_float.tflite",
    "kws_ref_model.tflite",
    "vww_96_int8.tflite",
    "pretrainedResnet_quant.tflite",
    "ad01_int8.tflite",
]
ONNX = ["mnist-8_onnx-model-zoo.onnx", "mnist_simplified_onnx2c.onnx", "tflm_hello_world_sine.onnx"]
# what the pipeline must achieve on each model (a pass that stops firing is a regression too)
MIN_REMOVED = {"kws_ref_model_float32.tflite": 5, "mnist-8_onnx-model-zoo.onnx": 5, "tflm_hello_world_sine.onnx": 5}


def _load(name: str):
    if name == "digits":
        return build_digits_cnn()
    if name.endswith(".onnx"):
        return load_onnx(SHARED / "onnx" / name)
    return load_tflite(SHARED / "mlperf-tiny" / name)


@pytest.mark.parametrize("name", [*TFLITE, *ONNX, "digits"])
def test_pipeline_keeps_outputs(name: str):
    g = _load(name)
    out, rep = optimize(g)  # verifies after every pass
    syms = graph_symbols(g)
    if syms:
        g, out = bind_symbols(g, {s: 3 for s in syms}), bind_symbols(out, {s: 3 for s in syms})
    assert out.inputs == g.inputs and out.outputs == g.outputs
    assert len(g.nodes) - len(out.nodes) >= MIN_REMOVED.get(name, 0), rep.text()
    for x in make_inputs(g, 2, seed=1)[:3]:
        a, b = run(g, x), run(out, x)
        for k in a:
            if a[k].dtype.kind == "f":
                np.testing.assert_allclose(b[k], a[k], rtol=1e-5, atol=1e-5)
            else:
                np.testing.assert_array_equal(b[k], a[k])
