"""int4w weights on the jax target: the MLPerf Tiny IC model quantized int4w, bit-exact with the reference."""

from __future__ import annotations

import numpy as np

from modelfiles import MLPERF
from rlx_edge.frontends.tflite import load_tflite
from rlx_edge.ir.dtype import DType
from rlx_edge.quant.calibrate import calibrate
from rlx_edge.quant.ptq import quantize
from rlx_edge.targets.jax import compile_jax
from rlx_edge.targets.reference import run

from .conftest import DEVICE


def test_int4w_ic_is_bit_exact() -> None:
    g = load_tflite(MLPERF / "pretrainedResnet.tflite")
    rng = np.random.default_rng(0)
    q = quantize(g, calibrate(g, rng.uniform(0, 255, (8, 32, 32, 3)).astype(np.float32)), scheme="int4w")
    assert any(t.dtype == DType.i4 for t in q.types.values())
    x = rng.integers(-128, 128, (16, 32, 32, 3)).astype(np.int8)
    got = compile_jax(q, DEVICE)(x)[q.outputs[0]]
    want = np.concatenate([run(q, x[i : i + 1])[q.outputs[0]] for i in range(len(x))])
    assert got.dtype == want.dtype == np.int8
    assert np.array_equal(got, want), f"{np.sum(got != want)} of {got.size} outputs differ"
    assert len({row.tobytes() for row in got}) > 1
