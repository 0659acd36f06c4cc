"""Pooling ops: numeric checks against hand-computed values and a naive loop implementation."""

from __future__ import annotations

import numpy as np
import pytest

from rlx_edge.errors import OpError
from rlx_edge.ir.dtype import DType, from_numpy
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.ops import get_op
from rlx_edge.ir.types import QuantParams, TensorType
from rlx_edge.targets.reference import interpreter

POOL_OPS = ("avg_pool2d", "max_pool2d", "global_avg_pool")


def run(op: str, *inputs: np.ndarray, **attrs) -> np.ndarray:
    opdef = get_op(op)
    (y,) = opdef.run_reference(list(inputs), opdef.normalize_attrs(attrs))
    return y


def infer(op: str, *types: TensorType, **attrs) -> TensorType:
    opdef = get_op(op)
    (t,) = opdef.run_infer(list(types), opdef.normalize_attrs(attrs))
    return t


def naive_pool(x: np.ndarray, kind: str, kernel, strides, pads) -> np.ndarray:
    """Window by window over real (non-padding) pixels only, in float64."""
    n, h, w, c = x.shape
    kh, kw = kernel
    pt, pb, pl, pr = pads
    oh = (h + pt + pb - kh) // strides[0] + 1
    ow = (w + pl + pr - kw) // strides[1] + 1
    out = np.zeros((n, oh, ow, c))
    for i in range(oh):
        for j in range(ow):
            r0, c0 = i * strides[0] - pt, j * strides[1] - pl
            rows = range(max(r0, 0), min(r0 + kh, h))
            cols = range(max(c0, 0), min(c0 + kw, w))
            win = x[:, rows.start : rows.stop, cols.start : cols.stop, :].astype(np.float64)
            out[:, i, j, :] = win.mean(axis=(1, 2)) if kind == "avg" else win.max(axis=(1, 2))
    return out


def test_avg_pool_same_padding_divides_by_valid_count():
    x = np.arange(9, dtype=np.float32).reshape(1, 3, 3, 1)
    y = run("avg_pool2d", x, kernel=(3, 3), padding="same")
    img = x[0, :, :, 0]
    # corner windows see 4 real pixels, edge windows 6, the centre 9
    assert y[0, 0, 0, 0] == pytest.approx(img[:2, :2].sum() / 4)
    assert y[0, 0, 1, 0] == pytest.approx(img[:2, :].sum() / 6)
    assert y[0, 1, 1, 0] == pytest.approx(img.sum() / 9)
    assert y[0, 2, 2, 0] == pytest.approx((4 + 5 + 7 + 8) / 4)


def test_same_padding_puts_the_extra_pixel_after():
    # 5 pixels, kernel 2, stride 2: 3 outputs, one pad pixel, and TFLite puts it at the bottom/right
    x = np.arange(25, dtype=np.float32).reshape(1, 5, 5, 1)
    y = run("avg_pool2d", x, kernel=(2, 2), strides=(2, 2), padding="same")
    assert y.shape == (1, 3, 3, 1)
    assert y[0, 0, 0, 0] == pytest.approx((0 + 1 + 5 + 6) / 4)
    assert y[0, 2, 0, 0] == pytest.approx((20 + 21) / 2)
    assert y[0, 2, 2, 0] == pytest.approx(24.0)


def test_max_pool_padding_never_wins():
    x = -1.0 - np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1)  # all negative
    y = run("max_pool2d", x, kernel=(3, 3), padding="explicit", pads=(1, 1, 1, 1))
    assert (y < 0).all()
    np.testing.assert_array_equal(y, naive_pool(x, "max", (3, 3), (1, 1), (1, 1, 1, 1)).astype(np.float32))
    assert y[0, 0, 0, 0] == -1.0


def test_max_pool_integers_pad_with_type_minimum():
    x = np.full((1, 2, 2, 1), -128, np.int8)
    y = run("max_pool2d", x, kernel=(2, 2), padding="same")
    assert y.dtype == np.int8
    np.testing.assert_array_equal(y, x)


@pytest.mark.parametrize("kind", ["avg", "max"])
def test_pools_match_naive_loops(kind: str):
    rng = np.random.default_rng(7)
    for _ in range(60):
        kh, kw = (int(v) for v in rng.integers(1, 4, 2))
        strides = tuple(int(v) for v in rng.integers(1, 4, 2))
        pads = (int(rng.integers(kh)), int(rng.integers(kh)), int(rng.integers(kw)), int(rng.integers(kw)))
        h, w = (
            int(rng.integers(max(kh - pads[0] - pads[1], 1), 8)),
            int(rng.integers(max(kw - pads[2] - pads[3], 1), 8)),
        )
        x = rng.standard_normal((2, h, w, 3))
        y = run(f"{kind}_pool2d", x, kernel=(kh, kw), strides=strides, padding="explicit", pads=pads)
        np.testing.assert_allclose(y, naive_pool(x, kind, (kh, kw), strides, pads), rtol=1e-12, atol=1e-12)


def test_avg_pool_fused_activation_and_f16():
    x = np.array([[[[-4.0], [10.0]], [[8.0], [2.0]]]], np.float16)
    assert run("avg_pool2d", x, kernel=(2, 2), activation="relu6")[0, 0, 0, 0] == 4.0
    assert run("avg_pool2d", x, kernel=(1, 2), activation="relu").ravel().tolist() == [3.0, 5.0]
    assert run("avg_pool2d", x, kernel=(2, 2)).dtype == np.float16
    assert run("max_pool2d", -x, kernel=(2, 2), activation="relu_n1_to_1")[0, 0, 0, 0] == 1.0


def test_avg_pool_integer_rounds_half_away_from_zero():
    x = np.array([1, 2, -1, -2], np.int8).reshape(1, 1, 4, 1)
    y = run("avg_pool2d", x, kernel=(1, 2), strides=(1, 2))
    assert y.ravel().tolist() == [2, -2]


def test_global_avg_pool():
    x = np.random.default_rng(0).standard_normal((2, 3, 5, 4)).astype(np.float32)
    y = run("global_avg_pool", x)
    assert y.shape == (2, 1, 1, 4)
    np.testing.assert_allclose(y, x.mean(axis=(1, 2), keepdims=True), rtol=1e-6)
    t = infer("global_avg_pool", TensorType(("N", "H", "W", 8), "f32"))
    assert t == TensorType(("N", 1, 1, 8), "f32")


def test_infer_shapes_and_symbolic_batch():
    t = infer("avg_pool2d", TensorType(("N", 7, 9, 3), "f32"), kernel=(3, 3), strides=(2, 2), padding="same")
    assert t == TensorType(("N", 4, 5, 3), "f32")
    t = infer("max_pool2d", TensorType((1, 7, 9, 3), "f16"), kernel=(3, 2), strides=(2, 3))
    assert t == TensorType((1, 3, 3, 3), "f16")


def test_quantized_input_keeps_its_parameters():
    q = QuantParams(np.float32(0.05), 3)
    for op in POOL_OPS:
        t = infer(op, TensorType((1, 4, 4, 2), DType.i8, q), **({} if op == "global_avg_pool" else {"kernel": (2, 2)}))
        assert t.dtype == DType.i8 and t.quant == q


@pytest.mark.parametrize(
    ("op", "shape", "dtype", "attrs", "message"),
    [
        ("avg_pool2d", (1, 4, 4, 1), "f32", {"kernel": (2, 2, 2)}, "kernel must be two positive ints"),
        ("max_pool2d", (1, 4, 4, 1), "f32", {"kernel": (0, 2)}, "kernel must be two positive ints"),
        ("avg_pool2d", (4, 4, 1), "f32", {"kernel": (2, 2)}, "must have rank 4"),
        ("avg_pool2d", (1, 2, 4, 1), "f32", {"kernel": (3, 3)}, "too small"),
        ("avg_pool2d", (1, 4, 4, 1), "f32", {"kernel": (2, 2), "padding": "explicit", "pads": (2, 0, 0, 0)}, "smaller"),
        ("max_pool2d", (1, 4, 4, 1), "f32", {"kernel": (2, 2), "padding": "explicit", "pads": (1, 1)}, "pads must be"),
        ("avg_pool2d", (1, 4, 4, 1), "f32", {"kernel": (2, 2), "strides": (0, 1)}, "strides must be"),
        ("avg_pool2d", (1, 4, 4, 1), "i32", {"kernel": (2, 2)}, "float or quantized"),
        ("avg_pool2d", (1, "H", 4, 1), "f32", {"kernel": (2, 2)}, "must be static"),
        ("global_avg_pool", (1, 4, 4), "f32", {}, "must have rank 4"),
        ("global_avg_pool", (1, 0, 4, 2), "f32", {}, "no pixels"),
    ],
)
def test_bad_calls_raise(op, shape, dtype, attrs, message):
    with pytest.raises(OpError, match=message):
        infer(op, TensorType(shape, dtype), **attrs)


def test_kernel_is_required():
    with pytest.raises(OpError, match="needs attribute 'kernel'"):
        get_op("avg_pool2d").normalize_attrs({})


def test_graph_builder_and_interpreter():
    g = Graph("pool")
    x = g.input("x", (1, 4, 4, 2), "f32")
    y = g.global_avg_pool(g.max_pool2d(x, kernel=(2, 2), strides=(2, 2)))
    g.output(y)
    data = np.random.default_rng(3).standard_normal((1, 4, 4, 2)).astype(np.float32)
    out = interpreter.run(g, data)[y.name]
    expect = data.reshape(1, 2, 2, 2, 2, 2).max(axis=(2, 4)).mean(axis=(1, 2), keepdims=True)
    np.testing.assert_allclose(out, expect, rtol=1e-6)


@pytest.mark.parametrize("op", POOL_OPS)
def test_sampler_infer_matches_reference(op: str):
    opdef = get_op(op)
    rng = np.random.default_rng(1234)
    for _ in range(200):
        inputs, attrs, _, _ = opdef.draw(rng)
        norm = opdef.normalize_attrs(attrs)
        types = opdef.run_infer([TensorType(a.shape, from_numpy(a.dtype)) for a in inputs], norm)
        outs = opdef.run_reference(inputs, norm)
        assert len(types) == len(outs)
        for t, y in zip(types, outs):
            assert (t.shape, t.dtype.numpy) == (y.shape, y.dtype), (attrs, t, y.shape, y.dtype)
