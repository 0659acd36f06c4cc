"""The generated C as firmware under QEMU: bit-exact with the integer reference on real models."""

import numpy as np
import pytest

from modelfiles import MLPERF
from rlx_edge.frontends.tflite import load_tflite
from rlx_edge.hil.qemu import run_qemu
from rlx_edge.targets.cortexm import build_model_firmware
from rlx_edge.targets.reference import run
from rlx_edge.targets.reference.compare import make_inputs

MODELS = ["kws_ref_model", "vww_96_int8", "pretrainedResnet_quant", "ad01_int8"]
CASES = [(m, b) for m in MODELS for b in ("qemu-mps2-an386", "qemu-mps2-an385")] + [
    ("kws_ref_model", "qemu-mps2-an505"),
    ("kws_ref_model", "qemu-mps2-an500"),
]


@pytest.fixture(scope="module")
def graphs():
    return {m: load_tflite(MLPERF / f"{m}.tflite") for m in MODELS}


@pytest.mark.parametrize("model,board", CASES, ids=[f"{m}-{b[-5:]}" for m, b in CASES])
def test_firmware_is_bit_exact(graphs, tmp_path_factory, model, board):
    g = graphs[model]
    elf, _info = build_model_firmware(g, board, tmp_path_factory.getbasetemp() / "fw")
    samples = make_inputs(g, 5, seed=11)  # 5 seeded inputs plus all-min, all-max, all-zero-point
    out = g.outputs[0]
    t = g.types[out]
    got = run_qemu(elf, board, [s[g.inputs[0]] for s in samples], output_dtype=t.dtype.numpy, output_shape=t.shape)
    for k, (s, y) in enumerate(zip(samples, got)):
        np.testing.assert_array_equal(y, run(g, s)[out], err_msg=f"{model} on {board}, input {k}")
