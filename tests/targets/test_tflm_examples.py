"""TFLite Micro's example models, the first ones a new user tries, on every target (issue #16).

Every ``.tflite`` in ``models/tflm/`` but the two audio preprocessors (their
own front end, outside #16's acceptance) must match TFLite Micro in the
reference: integer models bit for bit, float ones within compare's documented
tolerance. Every integer model must also match the reference bit for bit on
the Cortex-M host build, QEMU (M4 and M3) and JAX; stateful ones (SVDF, LSTM)
over a sequence of invokes, each side threading its own state. A model whose
QEMU run another test already does is not run under QEMU twice (``QEMU_COVERED``).

``person_detect`` (a MobileNet v1 at 96x96 whose biases carry the filter's
``quantized_dimension`` 3) and ``micro_speech_quantized`` both start with a
depthwise layer of depth multiplier 8 on one input channel; for them every
intermediate tensor is compared too. The FPGA simulation is in
``fpga/test_models.py``. The NCHW MobileNet v2 (300 M MACs) runs on QEMU in
``bench/tflm_examples.py`` only: one emulated inference takes minutes.
"""

from __future__ import annotations

import ast

import numpy as np
import pytest

from modelfiles import MLPERF, TFLM
from rlx_edge.frontends import load_model
from rlx_edge.pipeline import AS_GIVEN, optimize_graph
from rlx_edge.runners import prepare
from rlx_edge.targets.reference.compare import compare_with_target, compare_with_tflm

ALL = sorted(p.stem for p in TFLM.glob("*.tflite") if not p.stem.startswith("audio_preprocessor"))
# model -> tensors TFLite Micro names per input (outputs and intermediates)
EXAMPLES = {"person_detect": 31, "micro_speech_quantized": 4}
TARGETS = ("cortexm-host", "qemu-m4", "qemu-m3", "jax")
# inputs per model where one inference is long (the rest: 3 + compare's 3 edge inputs)
INPUTS = {"mobilenet_v2_quantized_1x3x224x224": 1}
QEMU_IN_BENCH = {"mobilenet_v2_quantized_1x3x224x224"}
# models whose QEMU runs are another test's: simple_add_model's two 16 KB inputs cost ~24 s per QEMU
# target over the emulated UART, for one int8 ADD whose C (no DSP variant) runs under QEMU in
# test_qemu_multi_io.py (this very model on qemu-m4, its two inputs in the runner's order) and in
# hil/test_mlperf_campaigns.py (pretrainedResnet_quant's three ADDs on the M4 and M3 boards); its
# cortexm-host and jax cases below stay
QEMU_COVERED = {"simple_add_model": ("tests/targets/cortexm/test_qemu_multi_io.py", "hil/test_mlperf_campaigns.py")}
# stateful models whose every target has its own test over a sequence of invokes (one QEMU boot, the
# firmware threading its own state): not run twice
COVERED = {
    "keyword_scrambled": ("tests/targets/cortexm/test_svdf.py", "tests/targets/jax/test_svdf.py"),
    "trained_lstm_int8": ("tests/targets/cortexm/test_lstm.py", "tests/targets/jax/test_lstm.py"),
}


def _integer(name: str) -> bool:
    g = load_model(TFLM / f"{name}.tflite")
    return any(g.types[v].quant is not None for v in g.inputs)


INTEGER = [m for m in ALL if _integer(m)]
CASES = [
    (m, t)
    for m in INTEGER
    for t in TARGETS
    if m not in COVERED and not (t.startswith("qemu") and (m in QEMU_IN_BENCH or m in QEMU_COVERED))
]


def test_the_example_models_are_the_ones_we_expect():
    """A model file added or removed changes the cases below: say so here."""
    assert ALL == [
        "hello_world_float",
        "hello_world_int8",
        "keyword_scrambled",
        "micro_speech_quantized",
        "mobilenet_v2_quantized_1x3x224x224",
        "person_detect",
        "simple_add_model",
        "trained_lstm",
        "trained_lstm_int8",
    ]
    assert set(ALL) - set(INTEGER) == {"hello_world_float", "trained_lstm"}


@pytest.mark.parametrize("name", sorted(COVERED))
def test_stateful_examples_have_their_target_tests(name):
    root = TFLM.parents[1]  # the checkout
    for test_file in COVERED[name]:
        text = (root / test_file).read_text()
        assert name in text and ("qemu" in text or "jax" in test_file), (name, test_file)


def test_qemu_covered_examples_run_under_qemu_elsewhere():
    root = TFLM.parents[1]  # the checkout
    multi_io, campaigns = ((root / f).read_text() for f in QEMU_COVERED["simple_add_model"])
    # a test function of test_qemu_multi_io.py runs this model on qemu-m4
    functions = [f for f in ast.parse(multi_io).body if isinstance(f, ast.FunctionDef) and f.name.startswith("test_")]
    tests = [ast.get_source_segment(multi_io, f) or "" for f in functions]
    assert 'SIMPLE_ADD = TFLM / "simple_add_model.tflite"' in multi_io
    assert any("SIMPLE_ADD" in t and '"qemu-m4"' in t for t in tests)
    assert '"pretrainedResnet_quant"' in campaigns
    assert {n.op for n in load_model(TFLM / "simple_add_model.tflite").nodes} == {"add"}
    assert sum(n.op == "add" for n in load_model(MLPERF / "pretrainedResnet_quant.tflite").nodes) == 3


@pytest.mark.parametrize("name", ALL)
def test_every_example_matches_tflm(name):
    r = compare_with_tflm(TFLM / f"{name}.tflite", n_inputs=INPUTS.get(name, 5), seed=11)
    assert r.compared > 0
    assert r.mismatches == 0, (r.first_mismatch, r.by_tensor)


@pytest.mark.parametrize("name,target", CASES, ids=[f"{m}-{t}" for m, t in CASES])
def test_every_integer_example_on_every_target(graphs, name, target, tmp_path):
    g = graphs(name)
    n = INPUTS.get(name, 3)
    r = compare_with_target(g, prepare(target, g, tmp_path), n_inputs=n, seed=5)
    assert r.inputs == n
    assert r.mismatches == 0, r.first_mismatch


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
