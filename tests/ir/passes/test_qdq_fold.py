"""qdq_fold, symmetric_weights and transpose_fold on small graphs: what they fold, what they leave, and
that results stay bit-exact (the integer ops they make are compared with ones built by hand)."""

from __future__ import annotations

import numpy as np

from rlx_edge.ir.graph import Graph
from rlx_edge.ir.passes import PassContext, get_pass
from rlx_edge.ir.types import QuantParams
from rlx_edge.ir.verify import verify
from rlx_edge.targets.reference import run

X_Q = QuantParams(0.05, 3)
Y_Q = QuantParams(0.1, -5)


def apply(name: str, g: Graph) -> tuple[Graph, PassContext]:
    ctx = PassContext(name)
    out = get_pass(name)(g, ctx)
    verify(out)
    return out, ctx


def ops(g: Graph) -> list[str]:
    return [n.op for n in g.nodes]


def out(g: Graph, *xs: np.ndarray) -> np.ndarray:
    (y,) = run(g, list(xs)).values()
    return y


def ints(rng: np.random.Generator, shape: tuple[int, ...], n: int = 1) -> np.ndarray:
    """Seeded int8 inputs with the extremes in them."""
    x = rng.integers(-128, 128, (n, *shape)).astype(np.int8)
    x.reshape(-1)[:2] = (-128, 127)
    return x


# qdq_fold --------------------------------------------------------------------------------------
def _qdq_conv(bias: str = "float") -> tuple[Graph, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1)
    w = rng.integers(-127, 128, (4, 3, 3, 3)).astype(np.int8)
    s_w = np.array([0.01, 0.02, 0.005, 0.03], np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    g = Graph("qdq_conv")
    x = g.input("x", [1, 6, 6, 3], "i8", X_Q)
    wq = g.param("w", w, QuantParams(s_w, 0, axis=0))
    if bias == "float":
        bv = g.param("b", b)
    else:  # an int32 dequantize at twice the scale kernels take: not foldable
        b32 = np.round(b / (0.05 * s_w * 2)).astype(np.int32)
        bv = g.dequantize(g.param("b32", b32, QuantParams(0.05 * s_w * 2, 0, axis=0, storage="i32")))
    y = g.conv2d(g.dequantize(x), g.dequantize(wq), bv, padding="same", name="conv")
    g.output(g.quantize(y, dtype="i8", out_quant=Y_Q, name="q"))
    return g, w, s_w, b


def test_conv_between_dequantize_and_quantize_becomes_the_integer_conv() -> None:
    g, w, s_w, b = _qdq_conv()
    folded, ctx = apply("qdq_fold", g)
    assert ops(folded) == ["conv2d"] and folded.outputs == ["q"]
    assert all(t.dtype.is_int for t in folded.types.values())
    # by hand: onnxruntime's bias quantization (float64 division, half to even) and the IR's int8 conv
    want = Graph("int")
    x = want.input("x", [1, 6, 6, 3], "i8", X_Q)
    bias = np.round(b.astype(np.float64) / (np.float32(0.05) * s_w).astype(np.float64)).astype(np.int32)
    bq = QuantParams((np.float32(0.05) * s_w).astype(np.float32), 0, axis=0, storage="i32")
    wq = want.param("w", w, QuantParams(s_w, 0, axis=0))
    want.output(want.conv2d(x, wq, want.param("b", bias, bq), padding="same", out_quant=Y_Q))
    got_b = folded.nodes[0].inputs[2]
    assert np.array_equal(folded.params[got_b], bias) and folded.types[got_b].quant == bq
    xs = ints(np.random.default_rng(2), (1, 6, 6, 3), 4)
    for xi in xs:
        assert np.array_equal(out(folded, xi), out(want, xi))
    assert any("conv2d on integers" in e.what for e in ctx.events)


def test_bias_at_another_scale_stays_float_and_says_why() -> None:
    g, *_ = _qdq_conv(bias="int32 at another scale")
    folded, ctx = apply("qdq_fold", g)
    assert "quantize" in ops(folded) and "conv2d" in ops(folded)
    assert not folded.types[folded.node("conv").outputs[0]].dtype.is_int
    assert [e.what for e in ctx.events if e.kind == "skipped"] == [
        "conv2d stays float: its int32 bias is not at scale s_in * s_w"
    ]


def test_dequantize_sinks_past_moves_and_equal_quantize_disappears() -> None:
    g = Graph("moves")
    x = g.input("x", [1, 4, 4, 2], "i8", X_Q)
    p = g.max_pool2d(g.dequantize(x), kernel=(2, 2), strides=(2, 2))
    t = g.transpose(p, perm=(0, 3, 1, 2))
    g.output(g.quantize(t, dtype="i8", out_quant=X_Q, name="q"))
    folded, _ = apply("qdq_fold", g)
    assert ops(folded) == ["max_pool2d", "transpose"]
    assert all(t.dtype.is_int for t in folded.types.values())
    for xi in ints(np.random.default_rng(3), (1, 4, 4, 2), 4):
        assert np.array_equal(out(folded, xi), out(g, xi))  # moving integers is exact, even through the max


def _qdq_matmul(w: np.ndarray, zp: int) -> Graph:
    g = Graph("qdq_matmul")
    x = g.input("x", [2, 16], "i8", X_Q)
    wq = g.param("w", w, QuantParams(0.02, zp))
    y = g.matmul(g.dequantize(x), g.dequantize(wq), name="mm")
    g.output(g.quantize(y, dtype="i8", out_quant=Y_Q, name="q"))
    return g


def test_matmul_with_constant_right_operand_becomes_fully_connected() -> None:
    w = np.random.default_rng(4).integers(-127, 128, (16, 5)).astype(np.int8)
    folded, _ = apply("qdq_fold", _qdq_matmul(w, 0))
    assert ops(folded) == ["fully_connected"]
    fc_w = folded.params[folded.nodes[0].inputs[1]]
    assert np.array_equal(fc_w, w.T)  # the [N, K] layout


def test_symmetric_weights_split_keeps_every_output() -> None:
    rng = np.random.default_rng(5)
    full = rng.integers(-128, 128, (16, 5)).astype(np.int8)
    full[0, :2] = (-128, 127)  # w - zp reaches 155: no single int8 holds it
    narrow = rng.integers(-99, 100, (16, 5)).astype(np.int8)  # w - zp stays in [-127, 127]
    for w, want_ops in ((full, ["concat", "fully_connected"]), (narrow, ["fully_connected"])):
        fc, _ = apply("qdq_fold", _qdq_matmul(w, -28))
        sym, ctx = apply("symmetric_weights", fc)
        assert ops(sym) == want_ops, ctx.events
        wt = sym.types[sym.nodes[-1].inputs[1]]
        assert wt.quant is not None and int(wt.quant.zero_point[0]) == 0
        for xi in ints(rng, (2, 16), 6):
            assert np.array_equal(out(sym, xi), out(fc, xi))


# transpose_fold ----------------------------------------------------------------------------------
def test_transpose_pair_cancels_through_elementwise_ops() -> None:
    rng = np.random.default_rng(6)
    g = Graph("pair")
    x = g.input("x", [1, 4, 4, 3])
    nchw = g.transpose(x, perm=(0, 3, 1, 2))
    y = g.relu(g.add(nchw, g.param("c", rng.standard_normal((3, 1, 1)).astype(np.float32))))
    g.output(g.transpose(y, perm=(0, 2, 3, 1), name="back"))
    folded, ctx = apply("transpose_fold", g)
    assert ops(folded) == ["add", "relu"], ctx.events
    xi = rng.standard_normal((1, 4, 4, 3)).astype(np.float32)
    assert np.array_equal(out(folded, xi), out(g, xi))  # the same float operations on the same values


def _flatten_fc(quantized: bool) -> Graph:
    rng = np.random.default_rng(7)
    g = Graph("flatten_fc")
    x = g.input("x", [1, 2, 3, 4], "i8" if quantized else "f32", X_Q if quantized else None)
    flat = g.reshape(g.transpose(x, perm=(0, 3, 1, 2), name="to_nchw"), shape=(1, 24))
    if quantized:
        s_w = rng.uniform(0.01, 0.03, 5).astype(np.float32)
        w = g.param("w", rng.integers(-127, 128, (5, 24)).astype(np.int8), QuantParams(s_w, 0, axis=0))
        bq = QuantParams((np.float32(0.05) * s_w).astype(np.float32), 0, axis=0, storage="i32")
        b = g.param("b", rng.integers(-500, 500, 5).astype(np.int32), bq)
        g.output(g.fully_connected(flat, w, b, out_quant=Y_Q))
    else:
        w = g.param("w", rng.standard_normal((5, 24)).astype(np.float32))
        g.output(g.fully_connected(flat, w, g.param("b", rng.standard_normal(5).astype(np.float32))))
    return g


def test_transpose_before_flatten_folds_into_the_weights() -> None:
    rng = np.random.default_rng(8)
    g = _flatten_fc(quantized=False)
    folded, _ = apply("transpose_fold", g)
    assert ops(folded) == ["reshape", "fully_connected"]
    for _ in range(4):
        xi = rng.standard_normal((1, 2, 3, 4)).astype(np.float32)
        # the same products, summed in another order: float32 rounding may differ in the last bits
        np.testing.assert_allclose(out(folded, xi), out(g, xi), rtol=1e-5, atol=1e-5)
    gq = _flatten_fc(quantized=True)
    folded_q, _ = apply("transpose_fold", gq)
    assert ops(folded_q) == ["reshape", "fully_connected"]
    for xi in ints(rng, (1, 2, 3, 4), 6):
        assert np.array_equal(out(folded_q, xi), out(gq, xi))  # integer sums: any order, same result


def test_unit_axis_transpose_is_a_reshape_and_others_stay_at_the_output() -> None:
    g = Graph("unit")
    x = g.input("x", [1, 1, 5, 5])
    g.output(g.transpose(x, perm=(0, 2, 3, 1)))
    folded, _ = apply("transpose_fold", g)
    assert ops(folded) == ["reshape"]
    xi = np.random.default_rng(9).standard_normal((1, 1, 5, 5)).astype(np.float32)
    assert np.array_equal(out(folded, xi), out(g, xi))
    g2 = Graph("real")
    x2 = g2.input("x", [1, 3, 5, 5])
    g2.output(g2.transpose(x2, perm=(0, 2, 3, 1), name="t"))
    kept, ctx = apply("transpose_fold", g2)
    assert ops(kept) == ["transpose"]
    assert [e.what for e in ctx.events] == ["transpose kept: its output is a graph output"]
