"""Binary elementwise ops with numpy broadcasting."""

from __future__ import annotations

import numpy as np

from rlx_edge.ir import fixedpoint as fp
from rlx_edge.ir.dtype import from_numpy
from rlx_edge.ir.ops._common import (
    ACTIVATION,
    FLOAT_SAMPLE_DTYPES,
    apply_activation,
    broadcastable_pair,
    compute_dtype,
    elementwise_dtype,
    fail,
    finish,
    rand_float,
)
from rlx_edge.ir.ops._quantized import activation_clamp, clamp_cast, scalar_params
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


prelu = defop(
    "prelu",
    family="elementwise",
    inputs=("x", "alpha"),
    inplace=True,
    doc="x if x >= 0 else alpha * x, alpha broadcast against x (TFLite PRELU, ONNX PRelu)",
)


@prelu.infer
def _prelu_infer(x, alpha):
    if x.dtype.is_float != alpha.dtype.is_float:
        fail(f"prelu: input {x.dtype} and alpha {alpha.dtype} must both be float or both quantized")
    return TensorType(broadcast(x.shape, alpha.shape), x.dtype)


@prelu.reference
def _prelu_ref(x, alpha):
    ct = compute_dtype(x.dtype)
    xf = x.astype(ct)
    return finish(np.where(xf >= 0, xf, xf * alpha.astype(ct)), from_numpy(x.dtype))


@prelu.sample
def _prelu_sample(rng):
    x_shape, a_shape = broadcastable_pair(rng, int(rng.integers(1, 5)))
    dt = FLOAT_SAMPLE_DTYPES[int(rng.integers(len(FLOAT_SAMPLE_DTYPES)))]
    return [rand_float(rng, x_shape, dt), (rng.uniform(-0.5, 1.5, a_shape)).astype(dt)], {}


# integer semantics ------------------------------------------------------------------
# TFLite Micro's quantized ADD / SUB / MUL, split as its kernels are: prepare
# computes the multipliers once from the scales, eval only does integer math.
def _binary_scales(ctx) -> tuple[tuple[float, int], tuple[float, int], tuple[float, int], np.dtype]:
    at, bt = ctx.in_types
    yt = ctx.out_types[0]
    return (
        scalar_params(at.quant, "first input"),
        scalar_params(bt.quant, "second input"),
        scalar_params(yt.quant, "output"),
        yt.dtype.numpy,
    )


def _add_sub_prepare(ctx, activation="none") -> dict:
    """Both inputs go onto twice the larger input scale after 20 bits of headroom (15 for int16 output)."""
    (s1, zp1), (s2, zp2), (s_y, zp_y), dtype = _binary_scales(ctx)
    left_shift = 15 if dtype == np.int16 else 20
    twice_max = 2 * float(max(np.float32(s1), np.float32(s2)))
    m1, e1 = fp.quantize_multiplier_smaller_than_one_exp(float(s1) / twice_max)
    m2, e2 = fp.quantize_multiplier_smaller_than_one_exp(float(s2) / twice_max)
    mo, eo = fp.quantize_multiplier_smaller_than_one_exp(twice_max / ((1 << left_shift) * float(s_y)))
    lo, hi = activation_clamp(activation, ctx.out_types[0].quant, dtype)
    return {
        "a_zp": zp1, "b_zp": zp2, "left_shift": left_shift,
        "a_mult": m1, "a_shift": e1, "b_mult": m2, "b_shift": e2,
        "out_mult": mo, "out_shift": eo, "out_zp": zp_y,
        "act_min": lo, "act_max": hi, "dtype": dtype.name,
    }  # fmt: skip


def _add_sub_eval(subtract: bool):
    def evaluate(p, a, b, activation="none"):
        xp = fp.namespace(a, b)
        v1 = fp.wrap_int32((a.astype(xp.int64) - p.a_zp) << p.left_shift)
        v2 = fp.wrap_int32((b.astype(xp.int64) - p.b_zp) << p.left_shift)
        sv1 = fp.multiply_by_quantized_multiplier_smaller_than_one_exp(v1, p.a_mult, p.a_shift)
        sv2 = fp.multiply_by_quantized_multiplier_smaller_than_one_exp(v2, p.b_mult, p.b_shift)
        raw = fp.wrap_int32(sv1 - sv2 if subtract else sv1 + sv2)
        y = fp.multiply_by_quantized_multiplier_smaller_than_one_exp(raw, p.out_mult, p.out_shift) + p.out_zp
        return clamp_cast(y, p.act_min, p.act_max, p.dtype)

    return evaluate


add.prepare(_add_sub_prepare)
sub.prepare(_add_sub_prepare)
add.eval(_add_sub_eval(subtract=False))
sub.eval(_add_sub_eval(subtract=True))


@mul.prepare
def _mul_prepare(ctx, activation="none") -> dict:
    """One multiplier s_a * s_b / s_y for the product of the offset inputs."""
    (s1, zp1), (s2, zp2), (s_y, zp_y), dtype = _binary_scales(ctx)
    m, e = fp.quantize_multiplier(float(s1) * float(s2) / float(s_y))
    lo, hi = activation_clamp(activation, ctx.out_types[0].quant, dtype)
    return {
        "a_zp": zp1, "b_zp": zp2, "out_mult": m, "out_shift": e, "out_zp": zp_y,
        "act_min": lo, "act_max": hi, "dtype": dtype.name,
    }  # fmt: skip


@mul.eval
def _mul_eval(p, a, b, activation="none"):
    xp = fp.namespace(a, b)
    prod = fp.wrap_int32((a.astype(xp.int64) - p.a_zp) * (b.astype(xp.int64) - p.b_zp))
    y = fp.multiply_by_quantized_multiplier(prod, p.out_mult, p.out_shift) + p.out_zp
    return clamp_cast(y, p.act_min, p.act_max, p.dtype)


@prelu.prepare
def _prelu_prepare(ctx) -> dict:
    """TFLite Micro's Prelu Prepare: s_x / s_y for x >= 0, s_x * s_alpha / s_y for the product, in double."""
    (s_x, zp_x), (s_a, zp_a), (s_y, zp_y), dtype = _binary_scales(ctx)
    m1, e1 = fp.quantize_multiplier(float(s_x) / float(s_y))
    m2, e2 = fp.quantize_multiplier(float(s_x) * float(s_a) / float(s_y))
    lo, hi = activation_clamp("none", ctx.out_types[0].quant, dtype)
    return {
        "x_zp": zp_x, "alpha_zp": zp_a, "id_mult": m1, "id_shift": e1, "alpha_mult": m2, "alpha_shift": e2,
        "out_zp": zp_y, "act_min": lo, "act_max": hi, "dtype": dtype.name,
    }  # fmt: skip


@prelu.eval
def _prelu_eval(p, x, alpha):
    xp = fp.namespace(x, alpha)
    v = x.astype(xp.int64) - p.x_zp
    a = alpha.astype(xp.int64) - p.alpha_zp
    pos = fp.multiply_by_quantized_multiplier(v, p.id_mult, p.id_shift)
    neg = fp.multiply_by_quantized_multiplier(fp.wrap_int32(v * a), p.alpha_mult, p.alpha_shift)
    return clamp_cast(xp.where(v >= 0, pos, neg) + p.out_zp, p.act_min, p.act_max, p.dtype)
