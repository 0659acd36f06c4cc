"""Layout ops: reshape, transpose, concat, split, slice, pad, squeeze, unsqueeze."""

from __future__ import annotations

import numpy as np
import pytest

from rlx_edge.errors import OpError
from rlx_edge.ir.dtype import DType, from_numpy
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.ops import get_op
from rlx_edge.ir.types import QuantParams, TensorType
from rlx_edge.targets.reference import interpreter

LAYOUT_OPS = ("reshape", "transpose", "concat", "split", "slice", "pad", "squeeze", "unsqueeze")
BIG = 2**31 - 1


def run(op: str, *inputs: np.ndarray, **attrs) -> tuple[np.ndarray, ...]:
    opdef = get_op(op)
    return opdef.run_reference(list(inputs), opdef.normalize_attrs(attrs))


def infer(op: str, *types: TensorType, **attrs) -> tuple[TensorType, ...]:
    opdef = get_op(op)
    return opdef.run_infer(list(types), opdef.normalize_attrs(attrs))


def f32(shape) -> TensorType:
    return TensorType(shape, "f32")


X = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
PER_TENSOR = QuantParams(np.float32(0.25), 1)


def per_channel(n: int, axis: int) -> QuantParams:
    return QuantParams(np.arange(1, n + 1, dtype=np.float32) / 8, np.zeros(n, np.int64), axis=axis)


# reshape ------------------------------------------------------------------------------
def test_reshape_infers_minus_one():
    (y,) = run("reshape", X, shape=(-1, 6))
    assert y.shape == (4, 6)
    np.testing.assert_array_equal(y.ravel(), X.ravel())
    assert infer("reshape", f32((2, 3, 4)), shape=(4, -1, 2)) == (f32((4, 3, 2)),)
    assert infer("reshape", f32((2, 3, 4)), shape=(24,)) == (f32((24,)),)
    assert infer("reshape", f32(()), shape=(1, -1)) == (f32((1, 1)),)


def test_reshape_zero_is_a_literal_size():
    assert infer("reshape", f32((2, 0, 3)), shape=(0, 5)) == (f32((0, 5)),)
    # with ONNX's "0 copies the input dimension" this would be [2, 12]; here it is an error
    with pytest.raises(OpError, match="cannot reshape"):
        infer("reshape", f32((2, 3, 4)), shape=(0, 12))
    with pytest.raises(OpError, match="cannot reshape"):
        infer("reshape", f32((2, 0)), shape=(-1, 0))


def test_reshape_keeps_a_symbolic_leading_dimension():
    assert infer("reshape", f32(("N", 4, 4, 3)), shape=(-1, 48)) == (f32(("N", 48)),)
    assert infer("reshape", f32(("N", 6)), shape=(-1, 2, 3)) == (f32(("N", 2, 3)),)
    assert infer("reshape", f32(("N", 1)), shape=(-1,)) == (f32(("N",)),)


@pytest.mark.parametrize(
    ("shape", "target", "message"),
    [
        ((2, 3, 4), (-1, -1), "more than one -1"),
        ((2, 3, 4), (5, -1), "cannot reshape"),
        ((2, 3, 4), (2, 3, 5), r"cannot reshape \[2,3,4\] \(24 elements\)"),
        ((2, 3), (-2, 3), "negative size"),
        (("N", 4, 4), (-1, 8), "bind the symbols first"),
        (("N", 4, 4), (-1, 5), "bind the symbols first"),
        (("N", 4), (4, -1), "only a symbolic leading"),
        ((2, "M"), (-1, 2), "only a symbolic leading"),
        (("N", 4), ("N", 4), "not a valid ints"),
    ],
)
def test_reshape_errors(shape, target, message):
    with pytest.raises(OpError, match=message):
        infer("reshape", f32(shape), shape=target)


def test_reshape_is_a_view_op():
    for op in ("reshape", "squeeze", "unsqueeze"):
        assert get_op(op).view and "view" in get_op(op).doc
    for op in ("transpose", "concat", "slice", "pad"):
        assert not get_op(op).view


# transpose ----------------------------------------------------------------------------
def test_transpose():
    (y,) = run("transpose", X, perm=(2, 0, 1))
    np.testing.assert_array_equal(y, np.transpose(X, (2, 0, 1)))
    assert y.flags.c_contiguous
    assert infer("transpose", f32(("N", 3, 4)), perm=(1, 2, 0)) == (f32((3, 4, "N")),)


@pytest.mark.parametrize("perm", [(0, 1), (0, 1, 1), (0, 1, 3), (-1, 0, 1)])
def test_transpose_rejects_non_permutations(perm):
    with pytest.raises(OpError, match=r"is not a permutation of 0\.\.2"):
        infer("transpose", f32((2, 3, 4)), perm=perm)


# concat -------------------------------------------------------------------------------
def test_concat_values_and_negative_axis():
    a, b = X, np.ones((2, 1, 4), np.float32)
    (y,) = run("concat", a, b, axis=-2)
    np.testing.assert_array_equal(y, np.concatenate([a, b], axis=1))
    ts = infer("concat", f32(("N", 3, 4)), f32((2, 1, 4)), f32(("N", 5, 4)), axis=1)
    assert ts == (f32((2, 9, 4)),)  # the static 2 pins down the symbol N
    assert infer("concat", f32(("N", 3)), f32(("N", 2)), axis=-1) == (f32(("N", 5)),)
    assert infer("concat", f32((2, 3)), axis=0) == (f32((2, 3)),)


@pytest.mark.parametrize(
    ("types", "axis", "message"),
    [
        ((f32((2, 3)), f32((3, 3))), 1, "dimension 0 differs"),
        ((f32((2, 3)), f32((2, 3, 1))), 0, "rank"),
        ((f32((2, 3)), TensorType((2, 3), "f16")), 0, "does not convert"),
        ((f32((2, 3)), f32((2, 3))), 2, "out of range"),
        ((f32(("N", 3)), f32((2, 3))), 0, "must be static"),
        ((f32(()),), 0, "rank >= 1"),
    ],
)
def test_concat_errors(types, axis, message):
    with pytest.raises(OpError, match=message):
        infer("concat", *types, axis=axis)


def test_concat_needs_an_input():
    with pytest.raises(OpError, match="at least 1"):
        get_op("concat").check_arity(0, "concat")


# split --------------------------------------------------------------------------------
def test_split_sizes():
    x = np.arange(28, dtype=np.int32).reshape(4, 7)
    ys = run("split", x, axis=-1, sizes=(1, 0, 4, 2))
    assert [y.shape for y in ys] == [(4, 1), (4, 0), (4, 4), (4, 2)]
    np.testing.assert_array_equal(ys[0], x[:, :1])
    np.testing.assert_array_equal(ys[2], x[:, 1:5])
    np.testing.assert_array_equal(ys[3], x[:, 5:])
    ts = infer("split", TensorType(("N", 7), "i32"), axis=1, sizes=(3, 4))
    assert ts == (TensorType(("N", 3), "i32"), TensorType(("N", 4), "i32"))
    assert get_op("split").count_outputs({"sizes": (1, 2, 3)}) == 3


@pytest.mark.parametrize(
    ("shape", "attrs", "message"),
    [
        ((4, 7), {"axis": 1, "sizes": (3, 3)}, r"add up to 6, but axis 1 of \[4,7\] is 7"),
        ((4, 7), {"axis": 1, "sizes": (8, -1)}, "non-negative"),
        ((4, 7), {"axis": 1, "sizes": ()}, "at least one"),
        ((4, 7), {"axis": -3, "sizes": (4,)}, "out of range"),
        (("N", 7), {"axis": 0, "sizes": (1,)}, "must be static"),
    ],
)
def test_split_errors(shape, attrs, message):
    with pytest.raises(OpError, match=message):
        infer("split", f32(shape), **attrs)


# slice --------------------------------------------------------------------------------
def test_slice_matches_numpy_with_negative_strides_and_clamping():
    x = np.arange(60, dtype=np.float64).reshape(3, 4, 5)
    cases = [
        ((0, 0, 0), (3, 4, 5), None, np.s_[0:3, 0:4, 0:5]),
        ((-1, 3, 4), (-BIG - 1, -5, 0), (-1, -1, -2), np.s_[::-1, 3:-5:-1, 4:0:-2]),
        ((-10, 1, -2), (10, -1, 100), (2, 1, 1), np.s_[-10:10:2, 1:-1, -2:100]),
        ((2, 0, 0), (1, BIG, BIG), (1, 3, -1), np.s_[2:1, 0::3, 0:BIG:-1]),
        ((5, -100, 3), (-BIG - 1, BIG, -BIG - 1), (-2, 2, -3), np.s_[5::-2, -100::2, 3::-3]),
    ]
    for begin, end, strides, index in cases:
        (y,) = run("slice", x, begin=begin, end=end, strides=strides)
        np.testing.assert_array_equal(y, x[index])
        (t,) = infer("slice", TensorType(x.shape, "f64"), begin=begin, end=end, strides=strides)
        assert t.shape == x[index].shape


def test_slice_symbolic_full_range_keeps_symbol():
    t = f32(("N", 10))
    assert infer("slice", t, begin=(0, 2), end=(BIG, 8)) == (f32(("N", 6)),)
    assert infer("slice", t, begin=(-1, 0), end=(-BIG - 1, 10), strides=(-1, 3)) == (f32(("N", 4)),)
    with pytest.raises(OpError, match="symbol 'N'"):
        infer("slice", t, begin=(1, 0), end=(BIG, 10))
    with pytest.raises(OpError, match="symbol 'N'"):
        infer("slice", t, begin=(0, 0), end=(BIG, 10), strides=(2, 1))


@pytest.mark.parametrize(
    ("attrs", "message"),
    [
        ({"begin": (0,), "end": (1, 1)}, r"begin \[0\] needs one entry per dimension"),
        ({"begin": (0, 0), "end": (1, 1), "strides": (1,)}, "strides"),
        ({"begin": (0, 0), "end": (1, 1), "strides": (1, 0)}, "must not contain 0"),
    ],
)
def test_slice_errors(attrs, message):
    with pytest.raises(OpError, match=message):
        infer("slice", f32((3, 4)), **attrs)


# pad ----------------------------------------------------------------------------------
def test_pad_pairs_per_dimension():
    x = np.array([[1, 2], [3, 4]], np.int8)
    (y,) = run("pad", x, pads=(1, 0, 0, 2), value=-7.0)
    assert y.dtype == np.int8
    assert y.tolist() == [[-7, -7, -7, -7], [1, 2, -7, -7], [3, 4, -7, -7]]
    (y,) = run("pad", X, pads=(0, 0, 1, 1, 2, 0))
    assert y.shape == (2, 5, 6)
    np.testing.assert_array_equal(y[:, 1:4, 2:], X)
    assert y.sum() == X.sum()
    assert infer("pad", f32(("N", 3)), pads=(0, 0, 2, 1)) == (f32(("N", 6)),)


@pytest.mark.parametrize(
    ("t", "attrs", "message"),
    [
        (f32((2, 3)), {"pads": (1, 1, 1)}, r"must have 2\*rank = 4 entries"),
        (f32((2, 3)), {"pads": (1, 1, 1, -1)}, "non-negative"),
        (TensorType((2, 3), "i8"), {"pads": (0, 0, 0, 1), "value": 0.5}, "not representable in i8"),
        (TensorType((2, 3), "i8"), {"pads": (0, 0, 0, 1), "value": 200.0}, "not representable in i8"),
        (f32(("N", 3)), {"pads": (1, 0, 0, 0)}, "symbol 'N' and cannot be padded"),
    ],
)
def test_pad_errors(t, attrs, message):
    with pytest.raises(OpError, match=message):
        infer("pad", t, **attrs)


# squeeze / unsqueeze ------------------------------------------------------------------------
def test_squeeze_and_unsqueeze():
    x = np.arange(6, dtype=np.float32).reshape(1, 3, 1, 2)
    (y,) = run("squeeze", x, axes=(-2, 0))
    assert y.shape == (3, 2)
    np.testing.assert_array_equal(y, x.reshape(3, 2))
    assert infer("squeeze", f32(("N", 1, 4)), axes=(1,)) == (f32(("N", 4)),)
    z = np.arange(12, dtype=np.int32).reshape(3, 4)
    (y,) = run("unsqueeze", z, axes=(0, -1))
    assert y.shape == (1, 3, 4, 1)
    np.testing.assert_array_equal(y, np.expand_dims(z, (0, 3)))
    assert infer("unsqueeze", f32(("N", 4)), axes=(1, 3)) == (f32(("N", 1, 4, 1)),)
    assert infer("unsqueeze", f32(()), axes=(0,)) == (f32((1,)),)


@pytest.mark.parametrize(
    ("op", "shape", "axes", "message"),
    [
        ("squeeze", (1, 3), (1,), "axis 1 of \\[1,3\\] has size 3, not 1"),
        ("squeeze", ("N", 3), (0,), "has size N, not 1"),
        ("squeeze", (1, 1), (0, -2), "same axis twice"),
        ("squeeze", (1, 1), (), "at least one axis"),
        ("squeeze", (1, 1), (2,), "out of range"),
        ("unsqueeze", (2, 3), (3,), "out of range for rank 3"),
        ("unsqueeze", (2, 3), (1, 1), "same axis twice"),
    ],
)
def test_squeeze_unsqueeze_errors(op, shape, axes, message):
    with pytest.raises(OpError, match=message):
        infer(op, f32(shape), axes=axes)


# quantized inputs ------------------------------------------------------------------------
def test_quantized_inputs_pass_their_parameters_through():
    t = TensorType((1, 2, 3, 4), DType.i8, PER_TENSOR)
    calls = {
        "reshape": {"shape": (-1, 4)},
        "transpose": {"perm": (0, 3, 1, 2)},
        "split": {"axis": 3, "sizes": (1, 3)},
        "slice": {"begin": (0, 0, 0, 1), "end": (1, 2, 3, 4)},
        "pad": {"pads": (0, 0, 1, 1, 0, 0, 0, 0)},
        "squeeze": {"axes": (0,)},
        "unsqueeze": {"axes": (0,)},
    }
    for op, attrs in calls.items():
        for out in infer(op, t, **attrs):
            assert out.dtype == DType.i8 and out.quant == PER_TENSOR, op
    assert infer("concat", t, t, axis=1)[0].quant == PER_TENSOR
    other = TensorType((1, 2, 3, 4), DType.i8, QuantParams(np.float32(0.5), 0))
    # inputs on different scales: the output's parameters are the caller's (out_quant) choice
    assert infer("concat", t, other, axis=1)[0].quant is None


def test_per_channel_axis_follows_its_dimension():
    t = TensorType((2, 3, 1, 4), DType.i8, per_channel(4, axis=3))
    (out,) = infer("transpose", t, perm=(3, 0, 1, 2))
    assert out.quant.axis == 0 and np.array_equal(out.quant.scale, t.quant.scale)
    assert infer("squeeze", t, axes=(2,))[0].quant.axis == 2
    assert infer("unsqueeze", t, axes=(0, 2))[0].quant.axis == 5
    assert infer("reshape", t, shape=(6, 4))[0].quant.axis == 1
    (out,) = infer("slice", t, begin=(0, 0, 0, -1), end=(2, 3, 1, -BIG - 1), strides=(1, 1, 1, -2))
    np.testing.assert_array_equal(out.quant.scale, t.quant.scale[::-2])
    _, b = infer("split", t, axis=-1, sizes=(1, 3))
    np.testing.assert_array_equal(b.quant.scale, t.quant.scale[1:])
    (out,) = infer("concat", t, t, axis=3)
    np.testing.assert_array_equal(out.quant.scale, np.tile(t.quant.scale, 2))
    with pytest.raises(OpError, match="per-channel quantization along axis 3"):
        infer("reshape", t, shape=(2, 12))
    with pytest.raises(OpError, match="no parameters for the padded channels"):
        infer("pad", t, pads=(0, 0, 0, 0, 0, 0, 1, 0))


# graph and sampler ----------------------------------------------------------------------
def test_graph_builder_and_interpreter():
    g = Graph("layout")
    x = g.input("x", (2, 3, 4), "f32")
    a, b = g.split(x, axis=2, sizes=(1, 3))
    y = g.concat(g.transpose(b, perm=(0, 2, 1)), g.reshape(a, shape=(2, 1, 3)), axis=1)
    y = g.squeeze(g.unsqueeze(g.pad(y, pads=(0, 0, 0, 0, 1, 0), value=9.0), axes=(0, 2)), axes=(-3,))
    g.output(y)
    assert y.shape == (1, 2, 4, 4)
    out = interpreter.run(g, X)[y.name]
    expect = np.concatenate([np.transpose(X[:, :, 1:], (0, 2, 1)), X[:, :, :1].reshape(2, 1, 3)], axis=1)
    expect = np.pad(expect, ((0, 0), (0, 0), (1, 0)), constant_values=9.0)[None]
    np.testing.assert_array_equal(out, expect)


def test_graph_rejects_bad_perm_naming_the_node():
    g = Graph("bad")
    x = g.input("x", (2, 3), "f32")
    with pytest.raises(OpError, match=r"node 'transpose_0' \(transpose\): transpose: perm \[0, 0\]"):
        g.transpose(x, perm=(0, 0))


@pytest.mark.parametrize("op", LAYOUT_OPS)
def test_sampler_infer_matches_reference(op: str):
    opdef = get_op(op)
    rng = np.random.default_rng(9876)
    dtypes = set()
    for _ in range(200):
        inputs, attrs, _, _ = opdef.draw(rng)
        norm = opdef.normalize_attrs(attrs)
        types = opdef.run_infer([TensorType(a.shape, from_numpy(a.dtype)) for a in inputs], norm)
        outs = opdef.run_reference(inputs, norm)
        assert len(types) == len(outs)
        for t, y in zip(types, outs):
            assert (t.shape, t.dtype.numpy) == (y.shape, y.dtype), (attrs, t, y.shape, y.dtype)
            assert y.dtype == inputs[0].dtype
        dtypes.add(inputs[0].dtype)
    # layout ops must be exercised on integer data too
    assert {np.dtype(np.int8), np.dtype(np.int32)} <= dtypes
