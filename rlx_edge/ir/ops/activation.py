"""Unary activations."""

from __future__ import annotations

import numpy as np

from rlx_edge.ir.ops._common import FLOAT_SAMPLE_DTYPES, compute_dtype, finish, rand_float, rand_shape
from rlx_edge.ir.ops._registry import Attr, OpDef, defop
from rlx_edge.ir.types import TensorType


def _unary(name: str, fn, *, attrs: dict | None = None, float_only: bool = True, doc: str) -> OpDef:
    """Declare one shape-preserving unary op."""
    op = defop(name, family="activation", inputs=("x",), attrs=attrs or {}, inplace=True, doc=doc)

    @op.infer
    def _infer(x, **kw):
        if float_only and not x.dtype.is_float and x.quant is None:
            from rlx_edge.ir.ops._common import fail

            fail(f"{name} needs a float or quantized input, got {x.dtype}")
        return TensorType(x.shape, x.dtype)

    @op.reference
    def _ref(x, **kw):
        if x.dtype.kind in "iu":
            return fn(x, **kw).astype(x.dtype)
        dt = x.dtype
        return finish(fn(x.astype(compute_dtype(dt)), **kw), _dtype_of(dt))

    @op.sample
    def _sample(rng):
        shape = rand_shape(rng, int(rng.integers(0, 5)))
        if not float_only and rng.random() < 0.2:
            x = rng.integers(-20, 20, shape).astype(np.int32)
        else:
            x = rand_float(rng, shape, FLOAT_SAMPLE_DTYPES[int(rng.integers(3))], scale=4.0)
        kw = {}
        if name == "clamp":
            lo = float(rng.uniform(-3, 0))
            kw = {"min": lo, "max": lo + float(rng.uniform(0, 6))}
        if name == "gelu":
            kw = {"approximate": str(rng.choice(["none", "tanh"]))}
        return [x], kw

    return op


def _dtype_of(dt):
    from rlx_edge.ir.dtype import from_numpy

    return from_numpy(dt)


def _gelu(x, approximate="none"):
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))
    from math import erf

    return 0.5 * x * (1 + np.vectorize(erf, otypes=[x.dtype])(x / np.sqrt(2)))


relu = _unary("relu", lambda x: np.maximum(x, 0), float_only=False, doc="max(x, 0)")
relu6 = _unary("relu6", lambda x: np.clip(x, 0, 6), float_only=False, doc="min(max(x, 0), 6)")
clamp = _unary(
    "clamp",
    lambda x, min, max: np.clip(x, min, max),
    attrs={"min": Attr("float", float("-inf")), "max": Attr("float", float("inf"))},
    float_only=False,
    doc="min(max(x, min), max)",
)
sigmoid = _unary("sigmoid", lambda x: 1 / (1 + np.exp(-x)), doc="1 / (1 + exp(-x)) (TFLite LOGISTIC)")
tanh = _unary("tanh", np.tanh, doc="tanh(x)")
gelu = _unary(
    "gelu",
    _gelu,
    attrs={"approximate": Attr("str", "none", choices=("none", "tanh"))},
    doc="x * Phi(x), exact (erf) or the tanh approximation",
)
silu = _unary("silu", lambda x: x / (1 + np.exp(-x)), doc="x * sigmoid(x)")
hard_swish = _unary("hard_swish", lambda x: x * np.clip(x + 3, 0, 6) / 6, doc="x * relu6(x + 3) / 6")


# integer semantics ------------------------------------------------------------------
# TFLite Micro's quantized activations (rlx_edge.quant.intkernels, imported
# lazily: the quant package builds on the IR types).
def _unary_int_args(ctx) -> dict:
    return {"x_q": ctx.in_types[0].quant, "y_q": ctx.out_types[0].quant, "out_dtype": ctx.out_types[0].dtype.numpy}


@relu.int_reference
def _relu_int(ctx, x):
    from rlx_edge.quant import intkernels

    return intkernels.relu_like(x, lo_real=0.0, hi_real=float("inf"), **_unary_int_args(ctx))


@relu6.int_reference
def _relu6_int(ctx, x):
    from rlx_edge.quant import intkernels

    return intkernels.relu_like(x, lo_real=0.0, hi_real=6.0, **_unary_int_args(ctx))


@clamp.int_reference
def _clamp_int(ctx, x, min, max):  # the attribute names of the op
    from rlx_edge.quant import intkernels

    return intkernels.relu_like(x, lo_real=min, hi_real=max, **_unary_int_args(ctx))


@sigmoid.int_reference
def _sigmoid_int(ctx, x):
    from rlx_edge.quant import intkernels

    if x.dtype != np.int8:
        raise NotImplementedError(f"sigmoid: integer reference covers int8, not {x.dtype}")
    return intkernels.sigmoid_int8(x, x_q=ctx.in_types[0].quant)


@tanh.int_reference
def _tanh_int(ctx, x):
    from rlx_edge.quant import intkernels

    if x.dtype != np.int8:
        raise NotImplementedError(f"tanh: integer reference covers int8, not {x.dtype}")
    return intkernels.tanh_int8(x, x_q=ctx.in_types[0].quant)


@hard_swish.int_reference
def _hard_swish_int(ctx, x):
    from rlx_edge.quant import intkernels

    if x.dtype != np.int8:
        raise NotImplementedError(f"hard_swish: integer reference covers int8, not {x.dtype}")
    return intkernels.hard_swish_int8(x, **_unary_int_args(ctx))
