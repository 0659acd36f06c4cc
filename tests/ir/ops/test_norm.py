"""batch_norm, layer_norm and rms_norm: values, shape checks; the integer layer and RMS norms."""

from __future__ import annotations

import numpy as np
import pytest

from rlx_edge.errors import IRError, OpError
from rlx_edge.ir.dtype import DType
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.ops import REGISTRY
from rlx_edge.ir.types import QuantParams
from rlx_edge.quant.calibrate import calibrate
from rlx_edge.quant.ptq import quantize
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


def test_batch_norm_is_float_only() -> None:
    g = Graph()
    x = g.input("x", (1, 4), "i8", quant=QuantParams(0.1, 0))
    p = g.param("p", np.ones(4, np.float32))
    with pytest.raises(OpError, match="float"):
        g.batch_norm(x, p, p, p, p)


@pytest.mark.parametrize("op", ["layer_norm", "rms_norm"])
def test_quantized_norm_needs_quantized_gamma(op: str) -> None:
    g = Graph()
    x = g.input("x", (1, 4), "i8", quant=QuantParams(0.1, 0))
    with pytest.raises(OpError, match="gamma must be quantized"):
        getattr(g, op)(x, g.param("p", np.ones(4, np.float32)))
    with pytest.raises(OpError, match="input must be float or quantized int8 / int16"):
        getattr(g, op)(g.input("u", (1, 4), "u8", quant=QuantParams(0.1, 0)), g.param("p2", np.ones(4, np.int16)))


def test_graph_runs_norms() -> None:
    g = Graph()
    x = g.input("x", (1, 2, 2, 2))
    one = g.param("one", np.ones(2, np.float32))
    zero = g.param("zero", np.zeros(2, np.float32))
    y = g.rms_norm(g.layer_norm(g.batch_norm(x, one, zero, zero, one), one, zero), one)
    g.output(y)
    out = run(g, np.arange(8, dtype=np.float32).reshape(1, 2, 2, 2))[y.name]
    np.testing.assert_allclose(np.abs(out), 1, rtol=1e-3)


# integer layer_norm / rms_norm ------------------------------------------------------------------
def norm_graph(op: str, dt: str, x_q: QuantParams, gamma_q: np.ndarray, s_g: float, y_q: QuantParams,
               beta_q: np.ndarray | None = None, n: int = 2, rows: int = 1, **attrs) -> Graph:  # fmt: skip
    """One integer norm node over rows of n: gamma int16 symmetric, beta int32 at the output's scale (PTQ's)."""
    g = Graph(op)
    x = g.input("x", (rows, n), dt, quant=x_q)
    args = [g.param("gamma", gamma_q.astype(np.int16), QuantParams(s_g, 0, storage="i16"))]
    if beta_q is not None:
        args.append(g.param("beta", beta_q.astype(np.int32), QuantParams(float(y_q.scale[0]), 0, storage="i32")))
    g.output(getattr(g, op)(x, *args, name="norm", out_quant=y_q, **attrs))
    return g


def test_int8_layer_norm_by_hand() -> None:
    """x = [1, 3] (scale 0.5, zero point -10: stored [-8, -4]), gamma 2, beta [0, 1], output scale 1/16, zp 5.

    d = [2, 6], S1 = 8, S2 = 40, N = 2: a = N*d - S1 = [-4, 4], V = N*S2 - S1^2 + E = 16 (E = round(4 * 1e-5
    / 0.25) = 0), so xhat = a / sqrt(V) = [-1, 1]; y = 2 * xhat + beta = [-2, 3], stored [-32, 48] + 5.
    """
    s_g = 2.0 / 32767
    g = norm_graph("layer_norm", "i8", QuantParams(0.5, -10), np.array([32767, 32767]), s_g,
                   QuantParams(1 / 16, 5), beta_q=np.array([0, 16]))  # fmt: skip
    y = run(g, {"x": np.array([[-8, -4]], np.int8)})[g.outputs[0]]
    assert y.dtype == np.int8
    np.testing.assert_array_equal(y, [[-27, 53]])


def test_int16_rms_norm_by_hand() -> None:
    """x = [3, 4] (scale 1/1024): mean square 12.5; gamma 1: y = x / sqrt(12.5) = [0.8485, 1.1314], at 2**-12."""
    g = norm_graph("rms_norm", "i16", QuantParams(1 / 1024, 0), np.array([32767, 32767]), 1 / 32767,
                   QuantParams(2.0**-12, 0), epsilon=0.0)  # fmt: skip
    y = run(g, {"x": np.array([[3 * 1024, 4 * 1024]], np.int16)})[g.outputs[0]]
    assert y.dtype == np.int16
    np.testing.assert_array_equal(y, np.round(np.array([[3, 4]]) / np.sqrt(12.5) * 4096))


def test_constant_row_gives_beta() -> None:
    """No spread at all: V is epsilon's E alone, a = 0, and the output is beta exactly."""
    g = norm_graph("layer_norm", "i8", QuantParams(0.1, 0), np.array([1000, -3000, 7]), 1e-3,
                   QuantParams(0.05, -3), beta_q=np.array([5, -7, 0]), n=3)  # fmt: skip
    y = run(g, {"x": np.full((1, 3), 42, np.int8)})[g.outputs[0]]
    np.testing.assert_array_equal(y, [[2, -10, -3]])


@pytest.mark.parametrize("op", ["layer_norm", "rms_norm"])
@pytest.mark.parametrize("dt", ["i8", "i16"])
def test_integer_norm_vs_float(op: str, dt: str) -> None:
    """Random rows of 3..300 values against the float norm of the same (dequantized) input.

    Bound: 1.5 output steps for int8, 2 for int16. Half a step is the output's rounding and half beta's
    (int32 at the output's scale, added after the requantization); the rest is gamma's int16 rounding and
    the int64 requantization's Q15 multiplier, each at most 2**-16 relative: nothing at int8's 127 steps,
    up to half a step each at int16's 32767. The Q22 normalized value and the 28-bit 1/sqrt add less.
    """
    rng = np.random.default_rng(7 + len(op) + len(dt))
    qmax = 127 if dt == "i8" else 32767
    bound = 1.5 if dt == "i8" else 2.0
    for _ in range(12):
        n, rows = int(rng.integers(3, 300)), int(rng.integers(1, 5))
        xf = rng.standard_normal((rows, n)) * rng.uniform(0.1, 10) + rng.uniform(-3, 3)
        gamma = rng.uniform(-2, 2, n)
        beta = rng.uniform(-1, 1, n) if op == "layer_norm" else None
        s_x = float(np.abs(xf).max()) / qmax
        zp_x = int(rng.integers(-20, 20)) if dt == "i8" else 0
        xq = np.clip(np.round(xf / s_x) + zp_x, -qmax - 1, qmax).astype(np.dtype(dt.replace("i", "int")))
        xd = (xq.astype(np.float64) - zp_x) * s_x
        s_g = float(np.abs(gamma).max()) / 32767
        gq = np.round(gamma / s_g)
        gd = gq * s_g
        if op == "layer_norm":
            c = xd - xd.mean(axis=1, keepdims=True)
            want = c / np.sqrt(np.square(c).mean(axis=1, keepdims=True) + 1e-5) * gd + beta
        else:
            want = xd / np.sqrt(np.square(xd).mean(axis=1, keepdims=True) + 1e-6) * gd
        s_y = float(np.abs(want).max()) / qmax
        bq = None if beta is None else np.round(beta / s_y)
        g = norm_graph(op, dt, QuantParams(s_x, zp_x), gq, s_g, QuantParams(s_y, 0), beta_q=bq, n=n, rows=rows)
        got = run(g, {"x": xq})[g.outputs[0]].astype(np.float64) * s_y
        err = np.abs(got - want).max() / s_y
        assert err <= bound, (op, dt, n, err)


def test_integer_norm_refuses_wide_rows() -> None:
    g = norm_graph("rms_norm", "i8", QuantParams(0.1, 0), np.ones(2**14 + 1), 1e-3, QuantParams(0.1, 0), n=2**14 + 1)
    with pytest.raises(IRError, match="at most 16384 elements"):
        run(g, {"x": np.zeros((1, 2**14 + 1), np.int8)})


@pytest.mark.parametrize("op", ["layer_norm", "rms_norm"])
@pytest.mark.parametrize("scheme", ["int8", "int16x8"])
def test_ptq_norm_close_to_float(op: str, scheme: str) -> None:
    """PTQ puts the norm on the integer path (gamma int16, beta int32) and stays close to float.

    A realistic residual stream: 32 features with per-feature scales 0.5..3 and offsets, as transformer
    activations have. Bound: two of the input's quantization steps, divided by the smallest row's standard
    deviation and times max |gamma| (the normalization amplifies the input's rounding by that much), plus
    two output steps (the integer norm's own error, see test_integer_norm_vs_float).
    """
    rng = np.random.default_rng(3)
    e = 32
    x = (rng.standard_normal((200, 8, e)) * rng.uniform(0.5, 3, e) + rng.uniform(-1, 1, e)).astype(np.float32)
    gamma = rng.uniform(0.5, 1.5, e).astype(np.float32)
    g = Graph()
    xi = g.input("x", (8, e))
    params = [g.param("gamma", gamma)]
    if op == "layer_norm":
        params.append(g.param("beta", (rng.standard_normal(e) * 0.2).astype(np.float32)))
    y = getattr(g, op)(xi, *params, name="norm")
    g.output(y)
    q = quantize(g, calibrate(g, {"x": x[:100]}, optimize=False), scheme=scheme, optimize=False, float_interface=True)
    node = next(n for n in q.nodes if n.op == op)
    types = [q.types[v].dtype for v in node.inputs]
    act = DType.i8 if scheme == "int8" else DType.i16
    assert types == [act, DType.i16, DType.i32][: len(types)] and q.types[node.outputs[0]].dtype == act
    s_x = float(q.types[node.inputs[0]].quant.scale[0])
    s_y = float(q.types[node.outputs[0]].quant.scale[0])
    test = x[100:130]
    xd = test.astype(np.float64)
    c = xd - xd.mean(axis=2, keepdims=True) if op == "layer_norm" else xd
    sigma = float(np.sqrt(np.square(c).mean(axis=2)).min())
    bound = 2 * s_x / sigma * float(gamma.max()) + 2 * s_y
    worst = max(float(np.abs(run(q, {"x": t})[q.outputs[0]] - run(g, {"x": t})[y.name]).max()) for t in test)
    assert worst < bound, (worst, bound)
