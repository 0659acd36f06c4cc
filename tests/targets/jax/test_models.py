"""The MLPerf Tiny models on the jax target against the numpy reference.

Integer models must agree bit for bit (np.array_equal) on 50 seeded inputs
run as one batch; the reference runs them one at a time at the model's own
batch of 1, so the batching (the batch-1 reshape included) is checked too.

Float models agree within 1e-5: XLA and numpy add the products of a
convolution in different orders, and float32 addition is not associative,
so the last bits of intermediates differ (observed: about 4e-7).
"""

from __future__ import annotations

import numpy as np
import pytest

from modelfiles import MLPERF as MODELS
from rlx_edge.frontends.tflite import load_tflite
from rlx_edge.ir.graph import Graph
from rlx_edge.targets.jax import compile_jax
from rlx_edge.targets.reference import run

from .conftest import DEVICE

INT8_MODELS = ["kws_ref_model", "vww_96_int8", "pretrainedResnet_quant", "ad01_int8"]
FLOAT_MODELS = ["kws_ref_model_float32", "pretrainedResnet", "vww_96_float"]
COUNT = 50


def _inputs(g: Graph, n: int, seed: int) -> np.ndarray:
    t = g.types[g.inputs[0]]
    shape = (n, *(int(d) for d in t.shape[1:]))
    rng = np.random.default_rng(seed)
    if t.dtype.is_int:
        return rng.integers(-128, 128, shape).astype(np.int8)
    return rng.standard_normal(shape).astype(np.float32)


def _reference(g: Graph, x: np.ndarray) -> np.ndarray:
    return np.concatenate([run(g, x[i : i + 1])[g.outputs[0]] for i in range(len(x))])


@pytest.mark.parametrize("name", INT8_MODELS)
def test_int8_model_is_bit_exact(name: str) -> None:
    g = load_tflite(MODELS / f"{name}.tflite")
    x = _inputs(g, COUNT, seed=sum(map(ord, name)))
    got = compile_jax(g, DEVICE)(x)[g.outputs[0]]
    want = _reference(g, x)
    assert got.dtype == want.dtype == np.int8
    assert got.shape == want.shape == (COUNT, *g.types[g.outputs[0]].shape[1:])
    assert np.array_equal(got, want), f"{np.sum(got != want)} of {got.size} outputs differ"
    # the inputs were not degenerate: outputs vary across samples
    assert len({row.tobytes() for row in got}) > 1


@pytest.mark.parametrize("mode", ["i32", "i8"])
def test_other_integer_matmuls_are_bit_exact(mode: str) -> None:
    g = load_tflite(MODELS / "ad01_int8.tflite")
    x = _inputs(g, 16, seed=5)
    model = compile_jax(g, DEVICE, int_matmul=mode)
    assert {n["int_matmul"] for n in model.notes.values()} == {mode}
    np.testing.assert_array_equal(model(x)[g.outputs[0]], _reference(g, x))


@pytest.mark.parametrize("name", FLOAT_MODELS)
def test_float_model_within_tolerance(name: str) -> None:
    g = load_tflite(MODELS / f"{name}.tflite")
    x = _inputs(g, 8, seed=1)
    got = compile_jax(g, DEVICE)(x)[g.outputs[0]]
    want = _reference(g, x)
    assert got.dtype == want.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)
