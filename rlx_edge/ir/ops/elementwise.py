"""Binary elementwise ops with numpy broadcasting."""

from __future__ import annotations

import numpy as np

from rlx_edge.ir.ops._common import (
    ACTIVATION,
    FLOAT_SAMPLE_DTYPES,
    apply_activation,
    broadcastable_pair,
    compute_dtype,
    elementwise_dtype,
    finish,
    rand_float,
)
from rlx_edge.ir.ops._registry import OpDef, defop
from rlx_edge.ir.shape import broadcast
from rlx_edge.ir.types import TensorType


def _binary(name: str, fn, *, fused_activation: bool, doc: str) -> OpDef:
    """Declare one broadcasting binary op; each is one row of this family."""
    op = defop(
        name,
        family="elementwise",
        inputs=("a", "b"),
        attrs={"activation": ACTIVATION} if fused_activation else {},
        inplace=True,
        doc=doc,
    )

    @op.infer
    def _infer(a, b, **attrs):
        return TensorType(broadcast(a.shape, b.shape), elementwise_dtype(a, b))

    @op.reference
    def _ref(a, b, activation="none"):
        dt = elementwise_dtype(TensorType(a.shape, a.dtype), TensorType(b.shape, b.dtype))
        if dt.is_float:
            ct = compute_dtype(dt.numpy)
            return finish(apply_activation(fn(a.astype(ct), b.astype(ct)), activation), dt)
        y = fn(a.astype(np.int64), b.astype(np.int64))
        return apply_activation(y, activation).astype(dt.numpy)

    @op.sample
    def _sample(rng):
        a_shape, b_shape = broadcastable_pair(rng, int(rng.integers(0, 5)))
        if rng.random() < 0.5:
            a_shape, b_shape = b_shape, a_shape
        if rng.random() < 0.2:  # integer operands (index math in ONNX graphs)
            dt = np.int32
            a = rng.integers(-50, 50, a_shape).astype(dt)
            b = rng.integers(1, 20, b_shape).astype(dt)
        else:
            dt = FLOAT_SAMPLE_DTYPES[int(rng.integers(len(FLOAT_SAMPLE_DTYPES)))]
            a, b = rand_float(rng, a_shape, dt), rand_float(rng, b_shape, dt)
            if name == "div":
                b = np.where(np.abs(b) < 0.1, 1, b).astype(dt)
        attrs = {"activation": str(rng.choice(["none", "relu", "relu6"]))} if fused_activation else {}
        return [a, b], attrs

    return op


def _int_div(a, b):
    if a.dtype.kind == "f":
        return a / b
    # integer division truncates toward zero, as in C and ONNX
    return np.trunc(a / np.where(b == 0, 1, b)).astype(np.int64)


add = _binary("add", np.add, fused_activation=True, doc="a + b")
sub = _binary("sub", np.subtract, fused_activation=True, doc="a - b")
mul = _binary("mul", np.multiply, fused_activation=True, doc="a * b")
div = _binary("div", _int_div, fused_activation=False, doc="a / b (integers truncate toward zero)")
maximum = _binary("maximum", np.maximum, fused_activation=False, doc="elementwise max(a, b)")
minimum = _binary("minimum", np.minimum, fused_activation=False, doc="elementwise min(a, b)")


# integer semantics ------------------------------------------------------------------
# TFLite Micro's quantized ADD / SUB / MUL (rlx_edge.quant.intkernels, imported
# lazily: the quant package builds on the IR types).
def _binary_int_args(ctx) -> dict:
    at, bt = ctx.in_types
    yt = ctx.out_types[0]
    return {"a_q": at.quant, "b_q": bt.quant, "y_q": yt.quant, "out_dtype": yt.dtype.numpy}


@add.int_reference
def _add_int(ctx, a, b, activation="none"):
    from rlx_edge.quant import intkernels

    return intkernels.add_sub(a, b, activation=activation, subtract=False, **_binary_int_args(ctx))


@sub.int_reference
def _sub_int(ctx, a, b, activation="none"):
    from rlx_edge.quant import intkernels

    return intkernels.add_sub(a, b, activation=activation, subtract=True, **_binary_int_args(ctx))


@mul.int_reference
def _mul_int(ctx, a, b, activation="none"):
    from rlx_edge.quant import intkernels

    return intkernels.mul(a, b, activation=activation, **_binary_int_args(ctx))
