"""Reduction ops: mean, sum, argmax, softmax, log_softmax."""

from __future__ import annotations

import numpy as np
import pytest

from rlx_edge.errors import OpError
from rlx_edge.ir.dtype import DType, from_numpy
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.ops import get_op
from rlx_edge.ir.types import QuantParams, TensorType
from rlx_edge.targets.reference import interpreter

REDUCE_OPS = ("mean", "sum", "argmax", "softmax", "log_softmax")


def run(op: str, x: np.ndarray, **attrs) -> np.ndarray:
    opdef = get_op(op)
    (y,) = opdef.run_reference([x], opdef.normalize_attrs(attrs))
    return y


def infer(op: str, t: TensorType, **attrs) -> TensorType:
    opdef = get_op(op)
    (out,) = opdef.run_infer([t], opdef.normalize_attrs(attrs))
    return out


X = np.arange(24, dtype=np.float32).reshape(2, 3, 4)


def test_mean_and_sum_values():
    np.testing.assert_allclose(run("mean", X, axes=(1, -1)), [5.5, 17.5])
    np.testing.assert_allclose(run("sum", X, axes=(0,)), X[0] + X[1])
    y = run("mean", X, axes=(-1,), keepdims=True)
    assert y.shape == (2, 3, 1)
    assert y[1, 2, 0] == pytest.approx((20 + 21 + 22 + 23) / 4)
    assert run("sum", X, axes=(2, 0, 1)).shape == ()
    assert float(run("sum", X, axes=(2, 0, 1))) == 276.0


def test_f16_reductions_compute_in_f32():
    x = np.full(3000, 0.1, np.float16)
    y = run("sum", x, axes=(0,))
    assert y.dtype == np.float16
    assert y == np.float16(x.astype(np.float32).sum())
    assert run("mean", x, axes=(0,)) == np.float16(x.astype(np.float32).mean())


def test_integer_sum_accumulates_wide_then_wraps():
    x = np.array([100, 100, 100], np.int8)
    assert run("sum", x, axes=(0,)) == np.int8(300 - 256)
    assert run("sum", x.astype(np.int32), axes=(0,)) == 300


def test_integer_mean_rounds_half_away_from_zero():
    x = np.array([[1, 2], [-1, -2], [3, 3]], np.int8)
    assert run("mean", x, axes=(1,)).tolist() == [2, -2, 3]


def test_argmax_first_index_on_ties_and_options():
    x = np.array([[1.0, 3.0, 3.0, 0.0], [5.0, 5.0, -1.0, 5.0]], np.float32)
    y = run("argmax", x)
    assert y.dtype == np.int32 and y.tolist() == [1, 0]
    y = run("argmax", x, axis=0, keepdims=True, dtype="i64")
    assert y.dtype == np.int64 and y.tolist() == [[1, 1, 0, 1]]
    assert run("argmax", np.array([-5, 7, 7], np.int8)).tolist() == 1


def test_softmax_matches_direct_formula_and_sums_to_one():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 5)).astype(np.float64)
    for beta in (1.0, 0.5, 3.0):
        y = run("softmax", x, beta=beta)
        e = np.exp(beta * x)
        np.testing.assert_allclose(y, e / e.sum(axis=1, keepdims=True), rtol=1e-12)
        np.testing.assert_allclose(y.sum(axis=-1), 1.0, rtol=1e-12)
    y0 = run("softmax", x, axis=0)
    np.testing.assert_allclose(y0.sum(axis=0), 1.0, rtol=1e-12)
    np.testing.assert_allclose(y0, np.exp(x) / np.exp(x).sum(axis=0), rtol=1e-12)


def test_softmax_is_stable_for_large_inputs_and_negative_beta():
    x = np.array([[1000.0, 1001.0, 1002.0]], np.float32)
    y = run("softmax", x)
    assert np.isfinite(y).all()
    e = np.exp([-2.0, -1.0, 0.0])
    np.testing.assert_allclose(y[0], e / e.sum(), rtol=1e-6)
    yn = run("softmax", x, beta=-1.0)
    np.testing.assert_allclose(yn[0], e[::-1] / e.sum(), rtol=1e-6)


def test_log_softmax():
    x = np.array([[1000.0, 1001.0, 1002.0], [0.0, 0.0, 0.0]], np.float32)
    y = run("log_softmax", x)
    assert np.isfinite(y).all()
    np.testing.assert_allclose(y[1], np.log(1 / 3), rtol=1e-6)
    e = np.exp([-2.0, -1.0, 0.0])
    np.testing.assert_allclose(y[0], np.log(e / e.sum()), rtol=1e-5)
    z = np.random.default_rng(1).standard_normal((2, 3, 4))
    np.testing.assert_allclose(run("log_softmax", z, axis=1), np.log(run("softmax", z, axis=1)), rtol=1e-12)


def test_softmax_f16_output_dtype():
    x = np.array([0.0, 1.0, 2.0], np.float16)
    y = run("softmax", x)
    assert y.dtype == np.float16
    assert abs(float(y.astype(np.float32).sum()) - 1.0) < 2e-3


def test_infer_shapes():
    t = TensorType(("N", 3, 4), "f32")
    assert infer("mean", t, axes=(-1, 1)) == TensorType(("N",), "f32")
    assert infer("sum", t, axes=(0,), keepdims=True) == TensorType((1, 3, 4), "f32")
    assert infer("argmax", t, axis=-1, dtype="i64") == TensorType(("N", 3), "i64")
    assert infer("argmax", t, axis=1, keepdims=True) == TensorType(("N", 1, 4), "i32")
    assert infer("softmax", t, axis=0) == t
    assert infer("log_softmax", TensorType((2, 3), "f16")) == TensorType((2, 3), "f16")


def test_quantized_inputs_are_accepted():
    q = QuantParams(np.float32(0.1), -5)
    t = TensorType((1, 8), DType.i8, q)
    assert infer("mean", t, axes=(1,)).quant == q  # a mean stays in range
    assert infer("sum", t, axes=(1,)).quant is None  # a sum does not
    assert infer("softmax", t).dtype == DType.i8
    assert infer("log_softmax", t).dtype == DType.i8
    assert infer("argmax", t) == TensorType((1,), "i32")


@pytest.mark.parametrize(
    ("op", "shape", "dtype", "attrs", "message"),
    [
        ("mean", (2, 3), "f32", {"axes": ()}, "at least one axis"),
        ("mean", (2, 3), "f32", {"axes": (2,)}, "axis 2 is out of range for rank 2"),
        ("sum", (2, 3, 4), "f32", {"axes": (1, -2)}, "same axis twice"),
        ("mean", (2, 3), "i32", {"axes": (0,)}, "float or quantized"),
        ("mean", (2, 0), "f32", {"axes": (1,)}, "nothing to average"),
        ("sum", (2,), "bool", {"axes": (0,)}, "numeric"),
        ("argmax", (2, 3), "f32", {"axis": -3}, "out of range"),
        ("argmax", (2, 3), "f32", {"dtype": "f32"}, "i32 or i64"),
        ("argmax", (), "f32", {}, "rank >= 1"),
        ("argmax", (2, 0), "f32", {}, "empty"),
        ("softmax", (2, 3), "f32", {"axis": 2}, "out of range"),
        ("softmax", (2, 3), "f32", {"beta": float("inf")}, "finite"),
        ("softmax", (2, 3), "i8", {}, "float or quantized"),
        ("log_softmax", (), "f32", {}, "rank >= 1"),
    ],
)
def test_bad_calls_raise(op, shape, dtype, attrs, message):
    with pytest.raises(OpError, match=message):
        infer(op, TensorType(shape, dtype), **attrs)


def test_axes_are_required():
    with pytest.raises(OpError, match="needs attribute 'axes'"):
        get_op("mean").normalize_attrs({})


def test_graph_builder_and_interpreter():
    g = Graph("cls")
    x = g.input("x", (2, 5), "f32")
    p = g.softmax(x, beta=2.0)
    k = g.argmax(p)
    g.output(p, k)
    data = np.random.default_rng(2).standard_normal((2, 5)).astype(np.float32)
    out = interpreter.run(g, data)
    e = np.exp(2 * data.astype(np.float64))
    np.testing.assert_allclose(out[p.name], e / e.sum(axis=1, keepdims=True), rtol=1e-6)
    assert out[k.name].tolist() == data.argmax(axis=1).tolist()


@pytest.mark.parametrize("op", REDUCE_OPS)
def test_sampler_infer_matches_reference(op: str):
    opdef = get_op(op)
    rng = np.random.default_rng(4321)
    for _ in range(200):
        inputs, attrs, _, _ = opdef.draw(rng)
        norm = opdef.normalize_attrs(attrs)
        types = opdef.run_infer([TensorType(a.shape, from_numpy(a.dtype)) for a in inputs], norm)
        outs = opdef.run_reference(inputs, norm)
        assert len(types) == len(outs)
        for t, y in zip(types, outs):
            assert (t.shape, t.dtype.numpy) == (y.shape, y.dtype), (attrs, t, y.shape, y.dtype)
