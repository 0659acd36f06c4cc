"""The jax target's own integer choices, bit for bit: conv accumulation modes and int16 softmax.

Every op on every target (this one included) is covered by
``tests/targets/test_op_x_target.py``; here the conv draws are quantized by
hand (per-tensor int8 activations, per-channel symmetric int8 weights, int32
biases on s_in * s_w) to pin each accumulation mode the jax rule can pick.
"""

from __future__ import annotations

import numpy as np
import pytest

from rlx_edge.ir.dtype import DType
from rlx_edge.ir.ops import REGISTRY
from rlx_edge.ir.ops.quant import affine_dequantize, affine_quantize
from rlx_edge.ir.types import QuantParams

from .test_ops import assert_matches, feed, single_node_graph

WEIGHTED = {"conv2d": 0, "depthwise_conv2d": 3, "fully_connected": 0}  # op -> per-channel weight axis
FIXED_OUT = {
    "softmax": QuantParams(1 / 256, -128),
    "sigmoid": QuantParams(1 / 256, -128),
    "tanh": QuantParams(1 / 128, 0),
}
# the quantization ops draw their own quantized calls (test_ops covers them); the rest are quantized here


def _act_quant(rng: np.random.Generator, a: np.ndarray) -> QuantParams:
    scale = max(float(np.max(np.abs(a), initial=0.0)), 1e-3) / float(rng.uniform(60, 127))
    return QuantParams(np.float32(scale), int(rng.integers(-20, 21)))


def quantize_draw(name: str, rng: np.random.Generator, inputs: list, attrs: dict):
    """Quantized inputs, their parameters, the output parameters and the positions that are parameters."""
    floats = [None if a is None else np.asarray(a, np.float32) for a in inputs]
    qs: list[QuantParams | None] = []
    arrays: list[np.ndarray | None] = []
    params: tuple[int, ...] = ()
    for i, a in enumerate(floats):
        if a is None:
            qs.append(None)
            arrays.append(None)
        elif name in WEIGHTED and i == 1:
            axis = WEIGHTED[name]
            other = tuple(d for d in range(a.ndim) if d != axis)
            scale = np.maximum(np.abs(a).max(axis=other), 1e-3) / 127
            q = QuantParams(scale.astype(np.float32), np.zeros(scale.size, np.int64), axis=axis)
            qs.append(q)
            arrays.append(affine_quantize(a, q, DType.i8))
        elif name in WEIGHTED and i == 2:
            s = qs[0].scale[0].astype(np.float64) * qs[1].scale.astype(np.float64)
            q = QuantParams(s.astype(np.float32), np.zeros(s.size, np.int64), axis=0)
            qs.append(q)
            arrays.append(np.round(a / s).astype(np.int32))
        else:
            q = _act_quant(rng, a)
            if name == "concat" and i > 0 and rng.random() < 0.5:
                q = qs[0]  # equal parameters: the plain copy path
            qs.append(q)
            arrays.append(affine_quantize(a, q, DType.i8))
    params = (1, 2) if name in WEIGHTED else ()
    real = [None if a is None else affine_dequantize(a, q) for a, q in zip(arrays, qs)]
    if REGISTRY[name].passthrough_quant:
        out_q = None
    elif name in FIXED_OUT:
        out_q = FIXED_OUT[name]
    elif name in ("relu", "relu6", "clamp") and rng.random() < 0.4:
        out_q = qs[0]  # identical parameters: the clamp-only path
    else:
        y = REGISTRY[name].run_reference(real, REGISTRY[name].normalize_attrs(attrs))[0]
        out_q = _act_quant(rng, np.asarray(y, np.float32))
    return arrays, qs, out_q, params


@pytest.mark.parametrize("mode", ["f32", "i32", "i8"])
def test_conv_matmul_modes_are_bit_exact(mode: str) -> None:
    rng = np.random.default_rng(9)
    for seed in range(4):
        inputs, attrs, _, _ = REGISTRY["conv2d"].draw(np.random.default_rng(seed))
        arrays, qs, out_q, params = quantize_draw("conv2d", rng, inputs, attrs)
        g = single_node_graph("conv2d", arrays, attrs, [out_q], qs, params)
        assert assert_matches(g, feed(g, arrays, params), int_matmul=mode) is None


def test_softmax_int16() -> None:
    rng = np.random.default_rng(4)
    x = rng.integers(-3000, 3000, (2, 7)).astype(np.int16)
    q_in = QuantParams(np.float32(0.002), 0, storage="i16")
    q_out = QuantParams(np.float32(1 / 32768), 0, storage="i16")
    g = single_node_graph("softmax", [x], {"beta": 1.0}, [q_out], [q_in])
    assert assert_matches(g, [x]) is None
