"""Integer references of single ops against TFLite Micro, bit for bit.

Each case builds a one-op (or two-op) quantized graph with the graph builder,
writes it with the TFLite exporter, and runs
:func:`~rlx_edge.targets.reference.compare.compare_with_tflm` on seeded random
and edge inputs: every output must equal TFLite Micro's reference kernels.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from rlx_edge.frontends.tflite import export_tflite
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.types import QuantParams
from rlx_edge.targets.reference.compare import compare_with_tflm


def q8(scale: float, zp: int) -> QuantParams:
    return QuantParams(np.float32(scale), zp, storage="i8")


def q16(scale: float) -> QuantParams:
    return QuantParams(np.float32(scale), 0, storage="i16")


def _weights(rng, shape, axis, storage="i8"):
    w = rng.integers(-127, 128, shape).astype(np.int8)
    scales = rng.uniform(0.002, 0.02, shape[axis]).astype(np.float32)
    return w, QuantParams(scales, np.zeros(shape[axis], np.int64), axis=axis, storage=storage)


def _bias(rng, n, in_scale, w_q, dtype=np.int32):
    b = rng.integers(-3000, 3000, n).astype(dtype)
    scales = (np.float32(in_scale) * w_q.scale).astype(np.float32)
    storage = "i64" if dtype == np.int64 else "i32"
    return b, QuantParams(scales, np.zeros(n, np.int64), axis=0, storage=storage)


def g_mul(act="relu"):
    g = Graph("mul")
    a = g.input("a", (1, 4, 5, 3), "i8", quant=q8(0.05, 3))
    b = g.input("b", (1, 4, 5, 3), "i8", quant=q8(0.03, -7))
    g.output(g.mul(a, b, activation=act, out_quant=q8(0.07, -2)))
    return g


def g_add(op="add", act="none", bshape=(1, 4, 5, 3)):
    g = Graph(op)
    a = g.input("a", (1, 4, 5, 3), "i8", quant=q8(0.05, 3))
    b = g.input("b", bshape, "i8", quant=q8(0.11, -20))
    g.output(getattr(g, op)(a, b, activation=act, out_quant=q8(0.09, 5)))
    return g


def g_add16():
    g = Graph("add16")
    a = g.input("a", (1, 6, 7), "i16", quant=q16(0.001))
    b = g.input("b", (1, 6, 7), "i16", quant=q16(0.0007))
    g.output(g.add(a, b, out_quant=q16(0.0015)))
    return g


def g_pool(kind, padding="same", act="none", strides=(2, 2), kernel=(3, 3)):
    g = Graph(kind)
    x = g.input("x", (1, 9, 8, 4), "i8", quant=q8(0.1, -5))
    y = getattr(g, kind)(x, kernel=kernel, strides=strides, padding=padding, activation=act, out_quant=q8(0.1, -5))
    g.output(y)
    return g


def g_unary(op, out_q, in_q=None):
    g = Graph(op)
    x = g.input("x", (1, 300), "i8", quant=in_q or q8(0.06, 4))
    g.output(getattr(g, op)(x, out_quant=out_q))
    return g


def g_unary_q(op, in_q, out_q, storage="i8"):
    g = Graph(op)
    x = g.input("x", (1, 300), storage, quant=in_q)
    g.output(getattr(g, op)(x, out_quant=out_q))
    return g


def g_float_unary(op):
    g = Graph(op)
    x = g.input("x", (1, 300), "f32")
    g.output(getattr(g, op)(x))
    return g


def g_leaky_relu(alpha, in_q, out_q, storage="i8", n=300):
    g = Graph("leaky_relu")
    x = g.input("x", (1, n), storage, quant=in_q)
    g.output(g.leaky_relu(x, alpha=alpha, out_quant=out_q))
    return g


def g_prelu(alpha_shape, alpha_q):
    g = Graph("prelu")
    x = g.input("x", (1, 4, 5, 3), "i8", quant=q8(0.05, -10))
    alpha = np.random.default_rng(3).integers(-128, 128, alpha_shape).astype(np.int8)
    a = g.param("alpha", alpha, quant=alpha_q)
    g.output(g.prelu(x, a, out_quant=q8(0.04, 7)))
    return g


def g_requant(src, dst, in_q, out_q):
    g = Graph("requant")
    x = g.input("x", (1, 200), src, quant=in_q)
    g.output(g.requantize(x, dtype=dst, out_quant=out_q))
    return g


def g_quantize():
    g = Graph("quantize")
    x = g.input("x", (1, 64), "f32")
    g.output(g.quantize(x, dtype="i8", out_quant=q8(0.031, -3)))
    return g


def g_dequantize():
    g = Graph("dequantize")
    x = g.input("x", (1, 64), "i8", quant=q8(0.031, -3))
    g.output(g.dequantize(x))
    return g


def g_pad():
    g = Graph("pad")
    x = g.input("x", (1, 3, 4, 2), "i8", quant=q8(0.1, 17))
    g.output(g.pad(x, pads=(0, 0, 1, 2, 2, 1, 0, 0), out_quant=q8(0.1, 17)))
    return g


def g_concat():
    g = Graph("concat")
    a = g.input("a", (1, 3, 4, 2), "i8", quant=q8(0.1, 17))
    b = g.input("b", (1, 3, 4, 5), "i8", quant=q8(0.1, 17))
    g.output(g.concat(a, b, axis=3, out_quant=q8(0.1, 17)))
    return g


def g_mean(keep=True):
    g = Graph("mean")
    x = g.input("x", (1, 5, 7, 6), "i8", quant=q8(0.1, -3))
    g.output(g.mean(x, axes=(1, 2), keepdims=keep, out_quant=q8(0.05, 2)))
    return g


def g_softmax(src="i8", dst="i8", beta=1.0):
    g = Graph("softmax")
    in_q = q8(0.11, 7) if src == "i8" else q16(0.0005)
    out_q = q8(1 / 256, -128) if dst == "i8" else QuantParams(np.float32(1 / 32768), 0, storage="i16")
    x = g.input("x", (3, 10), src, quant=in_q)
    g.output(g.softmax(x, beta=beta, out_quant=out_q))
    return g


def g_conv(storage="i8", bias_dtype=np.int32, act="relu6", strides=(2, 1), dilations=(1, 1), padding="same"):
    rng = np.random.default_rng(5)
    g = Graph("conv")
    in_q = q8(0.05, -4) if storage == "i8" else q16(0.0004)
    out_q = q8(0.08, 6) if storage == "i8" else q16(0.0009)
    x = g.input("x", (1, 9, 7, 3), storage, quant=in_q)
    w, wq = _weights(rng, (5, 3, 3, 3), 0)
    b, bq = _bias(rng, 5, in_q.scale[0], wq, bias_dtype)
    wt = g.param("w", w, quant=wq)
    bt = g.param("b", b, quant=bq)
    y = g.conv2d(x, wt, bt, strides=strides, dilations=dilations, padding=padding, activation=act, out_quant=out_q)
    g.output(y)
    return g


def g_dw(mult=2, dilations=(2, 2), strides=(1, 1)):
    rng = np.random.default_rng(6)
    g = Graph("dw")
    in_q = q8(0.05, -4)
    x = g.input("x", (1, 9, 8, 3), "i8", quant=in_q)
    w, wq = _weights(rng, (1, 3, 3, 3 * mult), 3)
    b, bq = _bias(rng, 3 * mult, in_q.scale[0], wq)
    y = g.depthwise_conv2d(
        x,
        g.param("w", w, quant=wq),
        g.param("b", b, quant=bq),
        strides=strides,
        dilations=dilations,
        padding="same",
        depth_multiplier=mult,
        activation="relu",
        out_quant=q8(0.07, -10),
    )
    g.output(y)
    return g


def g_fc(per_channel=True, storage="i8"):
    rng = np.random.default_rng(7)
    g = Graph("fc")
    in_q = q8(0.05, -4) if storage == "i8" else q16(0.0004)
    out_q = q8(0.3, 9) if storage == "i8" else q16(0.002)
    x = g.input("x", (1, 40), storage, quant=in_q)
    if per_channel:
        w, wq = _weights(rng, (12, 40), 0)
    else:
        w = rng.integers(-127, 128, (12, 40)).astype(np.int8)
        wq = q8(0.01, 0)
    bias_dtype = np.int64 if storage == "i16" else np.int32
    b, bq = _bias(
        rng,
        12,
        in_q.scale[0],
        wq if per_channel else QuantParams(np.full(12, 0.01, np.float32), np.zeros(12, np.int64), axis=0),
        bias_dtype,
    )
    y = g.fully_connected(x, g.param("w", w, quant=wq), g.param("b", b, quant=bq), activation="none", out_quant=out_q)
    g.output(y)
    return g


CASES: dict[str, Callable[[], Graph]] = {
    "mul_relu": g_mul,
    "mul_none": lambda: g_mul("none"),
    "add_relu6": lambda: g_add("add", "relu6"),
    "add_broadcast": lambda: g_add("add", "none", (1, 1, 5, 3)),
    "sub": lambda: g_add("sub", "relu_n1_to_1"),
    "add_int16": g_add16,
    "max_pool_same": lambda: g_pool("max_pool2d"),
    "max_pool_relu": lambda: g_pool("max_pool2d", "valid", "relu", (1, 1), (2, 2)),
    "avg_pool_same": lambda: g_pool("avg_pool2d"),
    "avg_pool_relu6": lambda: g_pool("avg_pool2d", "same", "relu6", (1, 2), (2, 3)),
    "sigmoid": lambda: g_unary("sigmoid", q8(1 / 256, -128)),
    "sigmoid_wide_input": lambda: g_unary("sigmoid", q8(1 / 256, -128), q8(0.3, -20)),
    "tanh": lambda: g_unary("tanh", q8(1 / 128, 0)),
    "tanh_small_scale": lambda: g_unary("tanh", q8(1 / 128, 0), q8(0.01, 30)),
    "hard_swish": lambda: g_unary("hard_swish", q8(0.04, -50)),
    "relu_rescale": lambda: g_unary("relu", q8(0.05, -128)),
    "leaky_relu": lambda: g_leaky_relu(0.1, q8(0.06, 4), q8(0.04, -30)),
    "leaky_relu_steep": lambda: g_leaky_relu(1.7, q8(0.02, -100), q8(0.05, 20)),
    "prelu_per_channel_alpha": lambda: g_prelu((3,), q8(0.004, 20)),
    "prelu_full_alpha": lambda: g_prelu((1, 4, 5, 3), q8(0.01, -3)),
    "leaky_relu_int16": lambda: g_leaky_relu(0.2, q16(0.0003), q16(0.0002), "i16"),
    "relu6_same": lambda: g_unary("relu6", q8(0.06, 4)),
    # TFLite Micro's elementwise.cc (ABS: int8, int16; RSQRT: int8) and elu.cc (int8 table)
    "abs_rescale": lambda: g_unary_q("abs", q8(0.04, 7), q8(0.03, -128)),
    "abs_same_scale": lambda: g_unary_q("abs", q8(0.05, -20), q8(0.05, -128)),
    "abs_int16": lambda: g_unary_q("abs", q16(0.0003), q16(0.0002), "i16"),
    "abs_int16_same_scale": lambda: g_unary_q("abs", q16(0.0003), q16(0.0003), "i16"),
    # RSQRT refuses inputs below the zero point, so these cover every byte with zero point -128
    "rsqrt": lambda: g_unary_q("rsqrt", q8(0.02, -128), q8(0.03, -128)),
    "rsqrt_wide": lambda: g_unary_q("rsqrt", q8(0.7, -128), q8(0.004, -100)),
    "elu": lambda: g_unary_q("elu", q8(0.05, 10), q8(0.04, -80)),
    "elu_wide": lambda: g_unary_q("elu", q8(0.1, 60), q8(0.02, 30)),
    "requant_i8_i8": lambda: g_requant("i8", "i8", q8(0.05, 3), q8(0.07, -9)),
    "requant_i8_i16": lambda: g_requant("i8", "i16", q8(0.05, 3), q16(0.0002)),
    "requant_i16_i8": lambda: g_requant("i16", "i8", q16(0.0003), q8(0.05, 3)),
    "quantize": g_quantize,
    "dequantize": g_dequantize,
    "pad": g_pad,
    "concat": g_concat,
    "mean_keepdims": g_mean,
    "mean": lambda: g_mean(False),
    "softmax_i8": g_softmax,
    "softmax_i8_beta": lambda: g_softmax(beta=0.6),
    "softmax_i16": lambda: g_softmax("i16", "i16"),
    "conv_int8": g_conv,
    "conv_int8_dilated_valid": lambda: g_conv(strides=(1, 1), dilations=(2, 1), padding="valid", act="none"),
    "conv_16x8_int64_bias": lambda: g_conv("i16", np.int64, "none"),
    "conv_16x8_int32_bias": lambda: g_conv("i16", np.int32, "relu"),
    "depthwise_mult2_dilated": g_dw,
    "depthwise_strided": lambda: g_dw(1, (1, 1), (2, 2)),
    "fc_per_channel": g_fc,
    "fc_per_tensor": lambda: g_fc(False),
    "fc_16x8": lambda: g_fc(True, "i16"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_single_op_matches_tflm(case, tmp_path):
    path = tmp_path / f"{case}.tflite"
    export_tflite(CASES[case](), path)
    r = compare_with_tflm(path, n_inputs=30, seed=1)
    assert r.inputs == 30 and r.edge_inputs == 3
    assert r.compared >= 33
    assert r.mismatches == 0, r.first_mismatch


# Float32 kernels of the unary builtins, against TFLite Micro's. Those that IEEE arithmetic
# rounds once (abs, neg, square, sqrt, 1 / sqrt, floor, ceil, round) are bit-exact. exp, log,
# sin, cos and elu's expm1 are not: TFLite Micro calls libm (expf, logf, sinf, cosf, expm1f:
# within an ulp of the exact value) where numpy may use its own SIMD float32 approximations (a
# few ulps; up to 2 measured on 90,000 inputs in [-8, 8] on AVX2; numpy's expm1 equalled libm's
# on the AVX2 hosts before, but on an AVX-512 one (AMD EPYC) it is numpy's own and 1 ulp off
# libm's on 25 % of [-3, 0]); both are correct to float32 precision, so these compare within 4
# ulps of the value (rtol 2**-21), with no absolute slack.
FLOAT_RTOL = {"exp": 2.0**-21, "log": 2.0**-21, "sin": 2.0**-21, "cos": 2.0**-21, "elu": 2.0**-21}
FLOAT_UNARY = ("abs", "neg", "square", "sqrt", "rsqrt", "exp", "log", "sin", "cos", "floor", "ceil", "round", "elu")


@pytest.mark.parametrize("op", FLOAT_UNARY)
def test_float_unary_matches_tflm(op, tmp_path):
    path = tmp_path / f"{op}.tflite"
    export_tflite(g_float_unary(op), path)
    r = compare_with_tflm(path, n_inputs=30, seed=1, atol=0.0, rtol=FLOAT_RTOL.get(op, 0.0))
    assert r.inputs == 30 and r.edge_inputs == 3 and r.float_tensors == 1
    assert r.mismatches == 0, (r.first_mismatch, r.max_rel_error)


def test_leaky_relu_int16_every_value_equals_tflite_micro(tmp_path):
    """All 65,536 int16 inputs at the scales of TFLite Micro's seanet leaky_relu1 integration model, whose
    near-ties (1945 -> 2445.50001) tell a multiplier computed in double from one computed in float32."""
    from rlx_edge.frontends.tflm import run_tflm
    from rlx_edge.targets.reference import run

    g = g_leaky_relu(0.3, q16(0.005836874712258577), q16(0.0046422905288636684), "i16", n=1 << 16)
    path = export_tflite(g, tmp_path / "leaky_relu_i16.tflite")
    x = np.arange(-(1 << 15), 1 << 15, dtype=np.int16).reshape(1, -1)
    ours = run(g, [x])[g.outputs[0]]
    assert np.array_equal(ours, run_tflm(path, [x])[0])
