"""batch_norm, layer_norm and rms_norm: values, shape checks, float-only."""

from __future__ import annotations

import numpy as np
import pytest

from rlx_edge.errors import OpError
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.ops import REGISTRY
from rlx_edge.ir.types import QuantParams
from rlx_edge.targets.reference import run


def ref(op: str, inputs: list, **attrs) -> np.ndarray:
    opdef = REGISTRY[op]
    return opdef.run_reference(inputs, opdef.normalize_attrs(attrs))[0]


def test_batch_norm_values_nhwc() -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 3, 4)).astype(np.float32)
    scale, bias, mean = (rng.standard_normal(4).astype(np.float32) for _ in range(3))
    var = rng.uniform(0.5, 2, 4).astype(np.float32)
    y = ref("batch_norm", [x, scale, bias, mean, var], epsilon=1e-3)
    want = (x.astype(np.float64) - mean) / np.sqrt(var.astype(np.float64) + 1e-3) * scale + bias
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)


def test_batch_norm_channel_axis_1() -> None:
    x = np.ones((1, 2, 3), np.float32)
    one = np.ones(2, np.float32)
    y = ref("batch_norm", [x, one, np.array([0, 10], np.float32), np.zeros(2, np.float32), one], axis=1, epsilon=0.0)
    np.testing.assert_array_equal(y[0, :, 0], [1, 11])


def test_batch_norm_rejects_wrong_channel_count() -> None:
    g = Graph()
    x = g.input("x", (1, 4, 4, 3))
    p = g.param("p", np.ones(4, np.float32))
    with pytest.raises(OpError, match="channels"):
        g.batch_norm(x, p, p, p, p)


def test_layer_norm_normalizes_trailing_dims() -> None:
    rng = np.random.default_rng(2)
    x = (rng.standard_normal((2, 3, 5)) * 4 + 7).astype(np.float32)
    gamma = np.ones((3, 5), np.float32)
    y = ref("layer_norm", [x, gamma, None], axis=1)
    flat = y.reshape(2, -1)
    np.testing.assert_allclose(flat.mean(axis=1), 0, atol=1e-5)
    np.testing.assert_allclose(flat.var(axis=1), 1, rtol=1e-3)


def test_layer_norm_gamma_beta() -> None:
    x = np.array([[1.0, 3.0]], np.float32)  # mean 2, var 1
    y = ref("layer_norm", [x, np.array([2, 2], np.float32), np.array([0, 1], np.float32)], epsilon=0.0)
    np.testing.assert_allclose(y, [[-2, 3]])


def test_layer_norm_rejects_bad_gamma() -> None:
    g = Graph()
    x = g.input("x", (2, 3, 5))
    gamma = g.param("g", np.ones(3, np.float32))
    with pytest.raises(OpError, match="gamma"):
        g.layer_norm(x, gamma)
    with pytest.raises(OpError, match="axis"):
        g.layer_norm(x, gamma, axis=3)


def test_rms_norm_values() -> None:
    x = np.array([[3.0, 4.0]], np.float32)  # mean square 12.5
    y = ref("rms_norm", [x, np.array([1, 2], np.float32)], epsilon=0.0)
    np.testing.assert_allclose(y, [[3 / np.sqrt(12.5), 8 / np.sqrt(12.5)]], rtol=1e-6)


def test_f16_stays_f16() -> None:
    x = np.ones((2, 4), np.float16)
    y = ref("rms_norm", [x, np.ones(4, np.float16)])
    assert y.dtype == np.float16


@pytest.mark.parametrize("op", ["batch_norm", "layer_norm", "rms_norm"])
def test_norms_are_float_only(op: str) -> None:
    g = Graph()
    x = g.input("x", (1, 4), "i8", quant=QuantParams(0.1, 0))
    p = g.param("p", np.ones(4, np.float32))
    args = {"batch_norm": [p, p, p, p], "layer_norm": [p], "rms_norm": [p]}[op]
    with pytest.raises(OpError, match="float"):
        getattr(g, op)(x, *args)


def test_graph_runs_norms() -> None:
    g = Graph()
    x = g.input("x", (1, 2, 2, 2))
    one = g.param("one", np.ones(2, np.float32))
    zero = g.param("zero", np.zeros(2, np.float32))
    y = g.rms_norm(g.layer_norm(g.batch_norm(x, one, zero, zero, one), one, zero), one)
    g.output(y)
    out = run(g, np.arange(8, dtype=np.float32).reshape(1, 2, 2, 2))[y.name]
    np.testing.assert_allclose(np.abs(out), 1, rtol=1e-3)
