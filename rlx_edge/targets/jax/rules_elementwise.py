"""Elementwise binary ops, unary activations and cast for the jax target (one table row per op).

Float semantics follow the references: f16/bf16 compute in f32 and round
at the end, integer operands compute in int64 and wrap to the result type.
Quantized add, sub, mul and the quantized activations mirror
``rlx_edge.quant.intkernels`` with the fixed-point functions of
:mod:`rlx_edge.targets.jax.fixedpoint`; their multipliers come from the
numpy module at lowering time.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from rlx_edge.ir.dtype import DType
from rlx_edge.ir.ops._common import elementwise_dtype
from rlx_edge.quant import fixedpoint as fp
from rlx_edge.quant import intkernels
from rlx_edge.targets.jax import fixedpoint as jfp
from rlx_edge.targets.jax._lazy import jnp
from rlx_edge.targets.jax._table import RULES, LowerCtx
from rlx_edge.targets.jax._util import act_range, activation, clamp_cast, compute_dtype, finish, storage_range


# binary --------------------------------------------------------------------------------------
def _int_div(a, b):
    # the reference divides in float64 and truncates toward zero (C and ONNX integer division)
    return jnp.trunc(a / jnp.where(b == 0, 1, b)).astype(jnp.int64)


_BINARY: dict[str, Callable] = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "maximum": lambda a, b: jnp.maximum(a, b),
    "minimum": lambda a, b: jnp.minimum(a, b),
}


def _float_binary(ctx: LowerCtx, name: str):
    dt = elementwise_dtype(*ctx.in_types)
    act = ctx.attrs.get("activation", "none")
    fn = _BINARY[name]

    def binary(a, b):
        if dt.is_float:
            ct = compute_dtype(dt.numpy)
            return finish(activation(fn(a.astype(ct), b.astype(ct)), act), dt)
        a64, b64 = a.astype(jnp.int64), b.astype(jnp.int64)
        y = _int_div(a64, b64) if name == "div" else fn(a64, b64)
        return activation(y, act).astype(dt.numpy)

    return binary


def _binary_int_params(ctx: LowerCtx):
    at, bt = ctx.in_types
    yt = ctx.out_types[0]
    s1, zp1 = intkernels.scalar_params(at.quant, "first input")
    s2, zp2 = intkernels.scalar_params(bt.quant, "second input")
    s_y, zp_y = intkernels.scalar_params(yt.quant, "output")
    lo, hi = act_range(ctx.attrs["activation"], yt.quant, yt.dtype.numpy)
    return s1, zp1, s2, zp2, s_y, zp_y, lo, hi, yt.dtype.numpy


def _add_sub_int(ctx: LowerCtx, subtract: bool):
    """``intkernels.add_sub``: both inputs onto twice the larger scale, 20 (or 15) bits of headroom."""
    s1, zp1, s2, zp2, s_y, zp_y, lo, hi, out_dt = _binary_int_params(ctx)
    left_shift = 15 if np.dtype(out_dt) == np.int16 else 20
    twice_max = 2 * float(max(np.float32(s1), np.float32(s2)))
    m1, e1 = fp.quantize_multiplier_smaller_than_one_exp(float(s1) / twice_max)
    m2, e2 = fp.quantize_multiplier_smaller_than_one_exp(float(s2) / twice_max)
    mo, eo = fp.quantize_multiplier_smaller_than_one_exp(twice_max / ((1 << left_shift) * float(s_y)))

    def add_sub(a, b):
        v1 = jfp.wrap_int32((a.astype(jnp.int64) - zp1) << left_shift)
        v2 = jfp.wrap_int32((b.astype(jnp.int64) - zp2) << left_shift)
        sv1 = jfp.multiply_by_quantized_multiplier_smaller_than_one_exp(v1, m1, e1)
        sv2 = jfp.multiply_by_quantized_multiplier_smaller_than_one_exp(v2, m2, e2)
        raw = jfp.wrap_int32(sv1 - sv2 if subtract else sv1 + sv2)
        y = jfp.multiply_by_quantized_multiplier_smaller_than_one_exp(raw, mo, eo) + zp_y
        return clamp_cast(y, lo, hi, out_dt)

    return add_sub


def _mul_int(ctx: LowerCtx):
    s1, zp1, s2, zp2, s_y, zp_y, lo, hi, out_dt = _binary_int_params(ctx)
    m, e = fp.quantize_multiplier(float(s1) * float(s2) / float(s_y))

    def mul(a, b):
        prod = jfp.wrap_int32((a.astype(jnp.int64) - zp1) * (b.astype(jnp.int64) - zp2))
        return clamp_cast(jfp.multiply_by_quantized_multiplier(prod, m, e) + zp_y, lo, hi, out_dt)

    return mul


def _binary_rule(name: str) -> None:
    @RULES.rule(name)
    def rule(ctx: LowerCtx):
        if not ctx.quantized:
            return _float_binary(ctx, name)
        if name in ("add", "sub"):
            return _add_sub_int(ctx, subtract=name == "sub")
        if name == "mul":
            return _mul_int(ctx)
        raise ctx.unsupported(f"quantized {name} (the op has no integer reference)")


for _name in _BINARY:
    _binary_rule(_name)


# unary ----------------------------------------------------------------------------------------
def _gelu(x, approximate="none"):
    if approximate == "tanh":
        return 0.5 * x * (1 + jnp.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))
    from jax.scipy.special import erf

    return 0.5 * x * (1 + erf(x / np.sqrt(2)))


_UNARY: dict[str, Callable] = {
    "relu": lambda x: jnp.maximum(x, 0),
    "relu6": lambda x: jnp.clip(x, 0, 6),
    "clamp": lambda x, min, max: jnp.clip(x, min, max),
    "sigmoid": lambda x: 1 / (1 + jnp.exp(-x)),
    "tanh": lambda x: jnp.tanh(x),
    "gelu": _gelu,
    "silu": lambda x: x / (1 + jnp.exp(-x)),
    "hard_swish": lambda x: x * jnp.clip(x + 3, 0, 6) / 6,
}


def _float_unary(ctx: LowerCtx, name: str):
    fn = _UNARY[name]
    attrs = dict(ctx.attrs)
    xt = ctx.in_types[0]

    def unary(x):
        if xt.dtype.is_int:
            if name == "clamp":  # numpy clips integers against float bounds, then truncates back
                return jnp.clip(x.astype(jnp.float64), attrs["min"], attrs["max"]).astype(x.dtype)
            return fn(x, **attrs).astype(x.dtype)
        return finish(fn(x.astype(compute_dtype(x.dtype)), **attrs), xt.dtype)

    return unary


def _relu_like_int(ctx: LowerCtx, lo_real: float, hi_real: float):
    """``intkernels.relu_like``: rescale to the output parameters (when they differ), then clamp."""
    xt, yt = ctx.in_types[0], ctx.out_types[0]
    s_x, zp_x = intkernels.scalar_params(xt.quant, "input")
    s_y, zp_y = intkernels.scalar_params(yt.quant, "output")
    out_dt = yt.dtype.numpy
    qlo, qhi = storage_range(out_dt)
    lo = qlo if not np.isfinite(lo_real) else max(qlo, intkernels._quantize_bound(lo_real, s_y, zp_y))
    hi = qhi if not np.isfinite(hi_real) else min(qhi, intkernels._quantize_bound(hi_real, s_y, zp_y))
    same = s_x == s_y and zp_x == zp_y
    m, e = (0, 0) if same else fp.quantize_multiplier(float(s_x) / float(s_y))

    def relu_like(x):
        y = x.astype(jnp.int64)
        if not same:
            y = zp_y + jfp.multiply_by_quantized_multiplier(y - zp_x, m, e)
        return jnp.minimum(jnp.maximum(y, lo), hi).astype(out_dt)

    return relu_like


def _sigmoid_tanh_int(ctx: LowerCtx, name: str):
    """``intkernels.sigmoid_int8`` / ``tanh_int8``: gemmlowp logistic / tanh of the input in Q4.27."""
    xt = ctx.in_types[0]
    if xt.dtype != DType.i8:
        raise ctx.unsupported(f"quantized {name} on {xt.dtype} (the integer reference covers int8)")
    s_x, zp_x = intkernels.scalar_params(xt.quant, f"{name} input")
    m, shift, radius = intkernels._sigmoid_tanh_scaling(s_x)
    bits = intkernels._INPUT_INTEGER_BITS

    def sigmoid_tanh(x):
        v = x.astype(jnp.int64) - zp_x
        q4 = jfp.multiply_by_quantized_multiplier(v, m, shift)
        if name == "sigmoid":
            out = jfp.rounding_divide_by_pot(jfp.logistic_fixed(q4, bits), 31 - 8)
            out = jnp.clip(out - 128, -128, 127)
        else:
            out = jnp.clip(jfp.rounding_divide_by_pot(jfp.tanh_fixed(q4, bits), 31 - 7), -128, 127)
        out = jnp.where(v <= -radius, -128, jnp.where(v >= radius, 127, out))
        return out.astype(jnp.int8)

    return sigmoid_tanh


def _hard_swish_int(ctx: LowerCtx):
    """``intkernels.hard_swish_int8``: 16-bit fixed point with Q15 multipliers."""
    xt, yt = ctx.in_types[0], ctx.out_types[0]
    if xt.dtype != DType.i8:
        raise ctx.unsupported(f"quantized hard_swish on {xt.dtype} (the integer reference covers int8)")
    s_x, zp_x = intkernels.scalar_params(xt.quant, "hard_swish input")
    s_y, zp_y = intkernels.scalar_params(yt.quant, "hard_swish output")
    f32 = np.float32
    hires_scale = f32(1.0 / 128.0) * f32(s_x)
    out_m32, out_e = fp.quantize_multiplier(float(hires_scale / f32(s_y)))
    out_m16 = fp.down_scale_int32_to_int16_multiplier(out_m32)
    rel_m32, rel_e = fp.quantize_multiplier(float(hires_scale / (f32(3.0) / f32(32768.0))))
    rel_m16 = fp.down_scale_int32_to_int16_multiplier(rel_m32)
    if out_e > 0:
        raise ctx.unsupported("quantized hard_swish with an output multiplier above 1 (TFLite requires <= 1)")
    out_dt = yt.dtype.numpy
    lo, hi = storage_range(out_dt)

    def hard_swish(x):
        v = x.astype(jnp.int64) - zp_x
        hires = jfp.wrap_int32(v << 7)
        hires = ((hires + 2**15) & 0xFFFF) - 2**15
        pre_out = jfp.saturating_rounding_doubling_high_mul_int16(hires, out_m16)
        rel = hires
        if rel_e > 0:
            rel = jfp.saturating_left_shift_int16(rel, rel_e - 1)
        rel = jfp.saturating_rounding_doubling_high_mul_int16(rel, rel_m16)
        if rel_e > 0:
            rel = jfp.saturating_left_shift_int16(rel, 1)
        if rel_e < 0:
            rel = jfp.rounding_divide_by_pot(rel, -rel_e)
        rel = (rel + (1 << 15)) >> 1
        pre = jfp.saturating_doubling_high_mul_int16(rel, pre_out)
        y = jfp.rounding_divide_by_pot(pre, -out_e) + zp_y
        return clamp_cast(y, lo, hi, out_dt)

    return hard_swish


def _unary_rule(name: str) -> None:
    @RULES.rule(name)
    def rule(ctx: LowerCtx):
        if not ctx.quantized:
            return _float_unary(ctx, name)
        if name == "relu":
            return _relu_like_int(ctx, 0.0, float("inf"))
        if name == "relu6":
            return _relu_like_int(ctx, 0.0, 6.0)
        if name == "clamp":
            return _relu_like_int(ctx, ctx.attrs["min"], ctx.attrs["max"])
        if name in ("sigmoid", "tanh"):
            return _sigmoid_tanh_int(ctx, name)
        if name == "hard_swish":
            return _hard_swish_int(ctx)
        raise ctx.unsupported(f"quantized {name} (the op has no integer reference)")


for _name in _UNARY:
    _unary_rule(_name)


# cast -------------------------------------------------------------------------------------------
@RULES.rule("cast")
def _cast(ctx: LowerCtx):
    src = ctx.in_types[0].dtype
    dst: DType = ctx.attrs["dtype"]

    def cast(x):
        if dst == DType.bool:
            return x != 0
        if dst.is_float:
            return finish(x.astype(jnp.float64 if dst == DType.f64 else jnp.float32), dst)
        if src.is_float:  # truncate toward zero, saturate, NaN -> 0 (comparisons in float64, as the reference)
            t = jnp.trunc(x.astype(jnp.float64))
            big, small = t >= float(dst.max), t <= float(dst.min)
            safe = jnp.where(big | small | jnp.isnan(t), 0, t).astype(jnp.int64)
            return jnp.where(big, dst.max, jnp.where(small, dst.min, safe)).astype(dst.numpy)
        y = x.astype(jnp.int64)
        if dst == DType.i4:
            return (((y + 8) & 15) - 8).astype(jnp.int8)
        return y.astype(dst.numpy)  # wraps modulo 2**bits like C

    return cast
