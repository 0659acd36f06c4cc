"""Reductions and normalizations for the jax target: mean, sum, argmax, softmax, log_softmax, norms.

Quantized softmax (int8 and int16) and mean mirror ``rlx_edge.quant.intkernels``;
float32 steps of TFLite's kernels (the quantized mean) are kept from being
fused into FMAs by computing each product exactly in float64 and rounding it
to float32 explicitly, as the C code rounds after every operation.
"""

from __future__ import annotations

import numpy as np

from rlx_edge.ir.ops._common import norm_axes, norm_axis
from rlx_edge.quant import fixedpoint as fp
from rlx_edge.quant import intkernels
from rlx_edge.targets.jax import fixedpoint as jfp
from rlx_edge.targets.jax._lazy import jnp
from rlx_edge.targets.jax._table import RULES, LowerCtx
from rlx_edge.targets.jax._util import compute_dtype, finish, storage_range


def f32_mul(a, b_scalar: np.float32):
    """``a * b`` rounded once to float32, immune to FMA contraction with a following add."""
    return (a.astype(jnp.float64) * float(b_scalar)).astype(jnp.float32)


# mean / sum ------------------------------------------------------------------------------------
@RULES.rule("mean")
def _mean(ctx: LowerCtx):
    xt, yt = ctx.in_types[0], ctx.out_types[0]
    ax = norm_axes(ctx.attrs["axes"], xt.rank, "mean")
    keep = ctx.attrs["keepdims"]
    if not ctx.quantized:

        def mean_float(x):
            if xt.dtype.is_int:  # unreachable for valid graphs (infer wants float or quantized)
                raise ctx.unsupported("mean of plain integers")
            return finish(x.astype(compute_dtype(x.dtype)).mean(axis=ax, keepdims=keep), xt.dtype)

        return mean_float

    s_x, zp_x = intkernels.scalar_params(xt.quant, "mean input")
    s_y, zp_y = intkernels.scalar_params(yt.quant, "mean output")
    f32 = np.float32
    count = int(np.prod([int(xt.shape[a]) for a in ax]))
    scale = f32(s_x) / f32(s_y)
    bias = f32(-zp_x) * scale
    out_dt = yt.dtype.numpy
    lo, hi = storage_range(out_dt)

    def mean_int(x):
        total = jfp.wrap_int32(x.astype(jnp.int64).sum(axis=ax, keepdims=keep))
        m = total.astype(jnp.float32) / f32(count)
        r = jfp.round_half_away(f32_mul(m, scale) + bias) + f32(zp_y)
        return jnp.clip(r, f32(lo), f32(hi)).astype(out_dt)

    return mean_int


@RULES.rule("sum")
def _sum(ctx: LowerCtx):
    xt = ctx.in_types[0]
    if ctx.quantized:
        raise ctx.unsupported("quantized sum (the op has no integer reference)")
    ax = norm_axes(ctx.attrs["axes"], xt.rank, "sum")
    keep = ctx.attrs["keepdims"]

    def sum_(x):
        if xt.dtype.is_int:  # int64 accumulation, wrapped to the input type
            return x.astype(jnp.int64).sum(axis=ax, keepdims=keep).astype(x.dtype)
        return finish(x.astype(compute_dtype(x.dtype)).sum(axis=ax, keepdims=keep), xt.dtype)

    return sum_


@RULES.rule("argmax")
def _argmax(ctx: LowerCtx):
    a = ctx.attrs
    out_dt = ctx.out_types[0].dtype.numpy

    def argmax(x):
        # first index wins ties, as numpy; stored quantized values order like their real values
        return jnp.argmax(x, axis=a["axis"], keepdims=a["keepdims"]).astype(out_dt)

    return argmax


# softmax ---------------------------------------------------------------------------------------
def _softmax_int8(ctx: LowerCtx, beta: float, out_dt: np.dtype):
    """``intkernels.softmax_int8`` along the last axis."""
    s_x, _ = intkernels.scalar_params(ctx.in_types[0].quant, "softmax input")
    bits = intkernels._SCALED_DIFF_INTEGER_BITS
    acc_bits = intkernels._ACCUMULATION_INTEGER_BITS
    mult, left_shift = fp.preprocess_softmax_scaling(beta, s_x, bits)
    diff_min = -fp.calculate_input_radius(bits, left_shift)
    out_bits = np.dtype(out_dt).itemsize * 8
    lo, hi = storage_range(out_dt)

    def softmax_int8(x):
        xi = x.astype(jnp.int64)
        diff = xi - xi.max(axis=-1, keepdims=True)
        use = diff >= diff_min
        rescaled = jfp.multiply_by_quantized_multiplier_greater_than_one(diff, mult, left_shift)
        exps = jfp.exp_on_negative_values(rescaled, bits)
        acc_terms = jfp.rounding_divide_by_pot(exps, acc_bits)
        sum_of_exps = jnp.where(use, acc_terms, 0).sum(axis=-1, keepdims=True)
        shifted_scale, bits_over_unit = jfp.get_reciprocal(sum_of_exps, acc_bits)
        unsat = jfp.rounding_divide_by_pot(
            jfp.saturating_rounding_doubling_high_mul(shifted_scale, exps), bits_over_unit + 31 - out_bits
        )
        y = jnp.clip(unsat + lo, lo, hi)
        return jnp.where(use, y, lo).astype(out_dt)

    return softmax_int8


def _softmax_int16(ctx: LowerCtx, beta: float):
    """``intkernels.softmax_int16``: interpolated table lookups for exp and 1/(1+x)."""
    s_x, _ = intkernels.scalar_params(ctx.in_types[0].quant, "softmax input")
    exp_lut, recip_lut = intkernels._softmax_luts()
    mult, shift = fp.quantize_multiplier(float(np.float32(s_x) * np.float32(beta)) / (10.0 / 65535.0))

    def softmax_int16(x):
        xi = x.astype(jnp.int64)
        diff = xi - xi.max(axis=-1, keepdims=True)
        scaled = jfp.multiply_by_quantized_multiplier(diff, mult, shift)
        sym = jnp.clip(scaled + 32767, fp.INT16_MIN, fp.INT16_MAX)
        exps = jfp.int16_table_lookup(sym, exp_lut)
        total = exps.sum(axis=-1, keepdims=True)
        headroom_plus_one = jfp.count_leading_zeros_u32(total)
        shifted_sum = ((total << (headroom_plus_one - 1)) + (1 << 13)) >> 14
        sym_sum = jnp.clip(shifted_sum - ((1 << 15) + (1 << 16)), fp.INT16_MIN, fp.INT16_MAX)
        recip = jfp.int16_table_lookup(sym_sum, recip_lut)
        right_shift = 31 - headroom_plus_one
        rnd = jnp.int64(1) << (right_shift - 1)
        y = (exps * recip + rnd) >> right_shift
        return jnp.clip(y, 0, fp.INT16_MAX).astype(jnp.int16)

    return softmax_int16


@RULES.rule("softmax")
def _softmax(ctx: LowerCtx):
    xt, yt = ctx.in_types[0], ctx.out_types[0]
    axis, beta = ctx.attrs["axis"], ctx.attrs["beta"]
    if not ctx.quantized:

        def softmax_float(x):
            z = beta * x.astype(compute_dtype(x.dtype))
            if z.size:
                z = z - z.max(axis=axis, keepdims=True)
            e = jnp.exp(z)
            return finish(e / e.sum(axis=axis, keepdims=True), xt.dtype)

        return softmax_float

    a = norm_axis(axis, xt.rank, "softmax")
    out_dt = yt.dtype.numpy
    if xt.dtype.numpy == np.int8:
        inner = _softmax_int8(ctx, beta, out_dt)
    elif xt.dtype.numpy == np.int16 and out_dt == np.int16:
        inner = _softmax_int16(ctx, beta)
    else:
        raise ctx.unsupported(f"quantized softmax {xt.dtype} -> {yt.dtype}")

    def softmax_int(x):
        # the kernels normalize the innermost axis, as TFLite does
        return jnp.moveaxis(inner(jnp.moveaxis(x, a, -1)), -1, a)

    return softmax_int


@RULES.rule("log_softmax")
def _log_softmax(ctx: LowerCtx):
    if ctx.quantized:
        raise ctx.unsupported("quantized log_softmax (the op has no integer reference)")
    xt = ctx.in_types[0]
    axis = ctx.attrs["axis"]

    def log_softmax(x):
        z = x.astype(compute_dtype(x.dtype))
        if z.size:
            z = z - z.max(axis=axis, keepdims=True)
        return finish(z - jnp.log(jnp.exp(z).sum(axis=axis, keepdims=True)), xt.dtype)

    return log_softmax


# normalization (float only) ----------------------------------------------------------------------
def _float_only(ctx: LowerCtx) -> None:
    if ctx.quantized:
        raise ctx.unsupported(f"quantized {ctx.node.op} (run it in float between dequantize and quantize)")


@RULES.rule("batch_norm")
def _batch_norm(ctx: LowerCtx):
    _float_only(ctx)
    dt = ctx.out_types[0].dtype
    axis, eps = ctx.attrs["axis"], ctx.attrs["epsilon"]

    def batch_norm(x, scale, bias, mean, var):
        ct = compute_dtype(dt.numpy)
        shape = [1] * x.ndim
        shape[axis % x.ndim] = -1

        def p(v):
            return v.astype(ct).reshape(shape)

        inv = 1 / jnp.sqrt(p(var) + jnp.asarray(eps, ct))
        return finish((x.astype(ct) - p(mean)) * inv * p(scale) + p(bias), dt)

    return batch_norm


@RULES.rule("layer_norm")
def _layer_norm(ctx: LowerCtx):
    _float_only(ctx)
    dt = ctx.out_types[0].dtype
    axis, eps = ctx.attrs["axis"], ctx.attrs["epsilon"]

    def layer_norm(x, gamma, beta=None):
        ct = compute_dtype(dt.numpy)
        dims = tuple(range(axis % x.ndim, x.ndim))
        xc = x.astype(ct)
        mean = xc.mean(axis=dims, keepdims=True)
        var = jnp.square(xc - mean).mean(axis=dims, keepdims=True)
        y = (xc - mean) / jnp.sqrt(var + jnp.asarray(eps, ct)) * gamma.astype(ct)
        if beta is not None:
            y = y + beta.astype(ct)
        return finish(y, dt)

    return layer_norm


@RULES.rule("rms_norm")
def _rms_norm(ctx: LowerCtx):
    _float_only(ctx)
    dt = ctx.out_types[0].dtype
    axis, eps = ctx.attrs["axis"], ctx.attrs["epsilon"]

    def rms_norm(x, gamma):
        ct = compute_dtype(dt.numpy)
        dims = tuple(range(axis % x.ndim, x.ndim))
        xc = x.astype(ct)
        ms = jnp.square(xc).mean(axis=dims, keepdims=True)
        return finish(xc / jnp.sqrt(ms + jnp.asarray(eps, ct)) * gamma.astype(ct), dt)

    return rms_norm
