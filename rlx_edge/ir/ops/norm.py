"""Normalization ops: batch, layer and RMS normalization (float only).

Quantized graphs never carry these: batch_norm is folded into the preceding
convolution before quantization, and layer/RMS norm run in float (a
dequantize/quantize pair around them) until an integer kernel exists.
"""

from __future__ import annotations

import numpy as np

from rlx_edge.ir import fixedpoint as fp
from rlx_edge.ir.dtype import DType, from_numpy
from rlx_edge.ir.ops._common import (
    FLOAT_SAMPLE_DTYPES,
    batch_shifting_axes,
    compute_dtype,
    elementwise_dtype,
    fail,
    finish,
    need_float,
    rand_float,
    rand_shape,
)
from rlx_edge.ir.ops._quantized import scalar_params
from rlx_edge.ir.ops._registry import Attr, defop
from rlx_edge.ir.shape import along_axis, unify
from rlx_edge.ir.types import TensorType


def _axis(axis: int, rank: int, op: str) -> int:
    """``axis`` as a non-negative index into a tensor of ``rank``."""
    if not -rank <= axis < rank:
        fail(f"{op}: axis {axis} is outside a rank-{rank} input")
    return axis % rank


def _check_float(op: str, **tensors: TensorType | None) -> None:
    for what, t in tensors.items():
        if t is not None:
            need_float(t, f"{op} {what}")


def _check_trailing(op: str, x: TensorType, axis: int, what: str, p: TensorType | None) -> None:
    """``p`` must have the shape of ``x`` from ``axis`` to the end."""
    if p is None:
        return
    want = x.shape[axis:]
    if p.rank != len(want):
        fail(f"{op}: {what} shape {list(p.shape)} must be {list(want)} (input dims from axis {axis})")
    for a, b in zip(p.shape, want):
        unify(a, b, f"{op}: {what} shape {list(p.shape)} vs input dims {list(want)}")


def _pick_float(rng: np.random.Generator):
    return FLOAT_SAMPLE_DTYPES[int(rng.integers(len(FLOAT_SAMPLE_DTYPES)))]


# batch_norm -------------------------------------------------------------------
batch_norm = defop(
    "batch_norm",
    family="norm",
    inputs=("x", "scale", "bias", "mean", "var"),
    attrs={
        "epsilon": Attr("float", 1e-5, doc="added to the variance before the square root"),
        "axis": Attr("int", -1, doc="channel axis (-1 for NHWC)"),
    },
    doc="Inference batch norm: (x - mean) / sqrt(var + epsilon) * scale + bias, per channel along axis.",
)


@batch_norm.infer
def _bn_infer(x, scale, bias, mean, var, *, epsilon, axis):
    _check_float("batch_norm", input=x, scale=scale, bias=bias, mean=mean, var=var)
    if x.rank < 1:
        fail("batch_norm: input must have rank >= 1")
    ax = _axis(axis, x.rank, "batch_norm")
    for what, p in (("scale", scale), ("bias", bias), ("mean", mean), ("var", var)):
        if p.rank != 1:
            fail(f"batch_norm: {what} must be 1-D, got shape {list(p.shape)}")
        unify(p.shape[0], x.shape[ax], f"batch_norm: {what} length vs input channels (axis {axis})")
    return TensorType(x.shape, elementwise_dtype(x, scale, bias, mean, var))


@batch_norm.reference
def _bn_ref(x, scale, bias, mean, var, *, epsilon, axis):
    dt = elementwise_dtype(*(TensorType(a.shape, a.dtype) for a in (x, scale, bias, mean, var)))
    ct = compute_dtype(dt.numpy)

    def p(a: np.ndarray) -> np.ndarray:  # parameters broadcast along the channel axis only
        return along_axis(a.astype(ct), axis, x.ndim)

    inv = 1 / np.sqrt(p(var) + ct.type(epsilon))
    y = (x.astype(ct) - p(mean)) * inv * p(scale) + p(bias)
    return finish(y, dt)


@batch_norm.sample
def _bn_sample(rng):
    dt = _pick_float(rng)
    shape = rand_shape(rng, int(rng.integers(1, 5)))
    axis = int(rng.integers(-len(shape), len(shape)))
    c = shape[axis]
    var = (np.abs(rng.standard_normal(c)) + 0.1).astype(dt)
    params = [rand_float(rng, (c,), dt) for _ in range(3)]
    attrs = {"axis": axis, "epsilon": float(rng.choice([1e-5, 1e-3]))}
    return [rand_float(rng, shape, dt), params[0], params[1], params[2], var], attrs


# layer_norm ---------------------------------------------------------------------
layer_norm = defop(
    "layer_norm",
    family="norm",
    inputs=("x", "gamma", "beta?"),
    attrs={
        "axis": Attr("int", -1, doc="normalize over dims axis..end"),
        "epsilon": Attr("float", 1e-5, doc="added to the variance before the square root"),
    },
    doc="Layer norm over dims axis..end: (x - mean) / sqrt(var + epsilon) * gamma + beta.",
)


@layer_norm.infer
def _ln_infer(x, gamma, beta, *, axis, epsilon):
    _check_float("layer_norm", input=x, gamma=gamma, beta=beta)
    if x.rank < 1:
        fail("layer_norm: input must have rank >= 1")
    ax = _axis(axis, x.rank, "layer_norm")
    _check_trailing("layer_norm", x, ax, "gamma", gamma)
    _check_trailing("layer_norm", x, ax, "beta", beta)
    return TensorType(x.shape, elementwise_dtype(x, gamma, beta))


@layer_norm.reference
def _ln_ref(x, gamma, beta, *, axis, epsilon):
    dt = elementwise_dtype(*(TensorType(a.shape, a.dtype) for a in (x, gamma, beta) if a is not None))
    ct = compute_dtype(dt.numpy)
    dims = tuple(range(axis % x.ndim, x.ndim))
    xc = x.astype(ct)
    mean = xc.mean(axis=dims, keepdims=True)
    var = np.square(xc - mean).mean(axis=dims, keepdims=True)
    y = (xc - mean) / np.sqrt(var + ct.type(epsilon)) * gamma.astype(ct)
    if beta is not None:
        y = y + beta.astype(ct)
    return finish(y, dt)


@layer_norm.sample
def _ln_sample(rng):
    dt = _pick_float(rng)
    shape = rand_shape(rng, int(rng.integers(1, 5)))
    axis = int(rng.integers(-len(shape), len(shape)))
    tail = shape[axis % len(shape) :]
    beta = rand_float(rng, tail, dt) if rng.random() < 0.7 else None
    return [rand_float(rng, shape, dt, scale=3.0), rand_float(rng, tail, dt), beta], {"axis": axis}


# rms_norm -------------------------------------------------------------------------
rms_norm = defop(
    "rms_norm",
    family="norm",
    inputs=("x", "gamma"),
    attrs={
        "axis": Attr("int", -1, doc="normalize over dims axis..end"),
        "epsilon": Attr("float", 1e-6, doc="added to the mean square before the square root"),
    },
    doc="RMS norm over dims axis..end: x / sqrt(mean(x^2) + epsilon) * gamma.",
)


@rms_norm.infer
def _rms_infer(x, gamma, *, axis, epsilon):
    _check_float("rms_norm", input=x, gamma=gamma)
    if x.rank < 1:
        fail("rms_norm: input must have rank >= 1")
    ax = _axis(axis, x.rank, "rms_norm")
    _check_trailing("rms_norm", x, ax, "gamma", gamma)
    return TensorType(x.shape, elementwise_dtype(x, gamma))


@rms_norm.reference
def _rms_ref(x, gamma, *, axis, epsilon):
    dt = elementwise_dtype(TensorType(x.shape, x.dtype), TensorType(gamma.shape, gamma.dtype))
    ct = compute_dtype(dt.numpy)
    dims = tuple(range(axis % x.ndim, x.ndim))
    xc = x.astype(ct)
    ms = np.square(xc).mean(axis=dims, keepdims=True)
    return finish(xc / np.sqrt(ms + ct.type(epsilon)) * gamma.astype(ct), dt)


@rms_norm.sample
def _rms_sample(rng):
    dt = _pick_float(rng)
    shape = rand_shape(rng, int(rng.integers(1, 5)))
    axis = int(rng.integers(-len(shape), len(shape)))
    tail = shape[axis % len(shape) :]
    attrs = {"axis": axis, "epsilon": float(rng.choice([1e-6, 1e-5]))}
    return [rand_float(rng, shape, dt, scale=3.0), rand_float(rng, tail, dt)], attrs


# derivatives ----------------------------------------------------------------------
# Written in terms of the normalized input xhat and the inverse deviation r; the input's
# cotangent is the projection r * (g - mean(g) - xhat * mean(g * xhat)) of g = ct * gamma
# (layer norm; RMS norm has no mean to take out), and the tangent the same projection.
def _along(e, p, axis: int, rank: int):
    """A per-channel vector [C] shaped to broadcast along ``axis`` of a rank-``rank`` tensor."""
    shape = [1] * rank
    shape[axis] = e.static_shape(p)[0]
    return p if rank == 1 else e.reshape(p, shape=tuple(shape))


def _bn_parts(e, x, scale, mean, var, epsilon: float, axis: int):
    rank = len(x.shape)
    ax = _axis(axis, rank, "batch_norm")
    inv = e.rsqrt(e.add(var, e.const(epsilon, var)))
    xhat = e.mul(e.sub(x, _along(e, mean, ax, rank)), _along(e, inv, ax, rank))
    return ax, rank, inv, xhat


def _sum_but(e, t, ax: int, rank: int):
    """``t`` summed over every axis but ``ax``."""
    others = tuple(i for i in range(rank) if i != ax)
    return e.sum(t, axes=others) if others else t


@batch_norm.jvp
def _bn_jvp(e, primals, outputs, tangents, *, epsilon, axis):
    x, scale, _, mean, var = primals
    tx, tscale, tbias, tmean, tvar = tangents
    ax, rank, inv, xhat = _bn_parts(e, x, scale, mean, var, epsilon, axis)
    t = None
    tc = e.add_maybe(tx, None if tmean is None else e.neg(_along(e, tmean, ax, rank)))
    if tc is not None:  # (tx - tmean) * inv * scale
        t = e.mul(tc, _along(e, e.mul(inv, scale), ax, rank))
    per_channel = e.add_maybe(tscale, None if tvar is None else e.mul(
        tvar, e.mul(e.mul(scale, e.square(inv)), e.const(-0.5, inv))))  # fmt: skip
    if per_channel is not None:  # xhat * (tscale - scale * inv^2 * tvar / 2)
        t = e.add_maybe(t, e.mul(xhat, _along(e, per_channel, ax, rank)))
    if tbias is not None:
        t = e.add_maybe(t, e.broadcast_to(_along(e, tbias, ax, rank), e.static_shape(x)))
    return [e.broadcast_to(t, e.static_shape(outputs[0]))]


@batch_norm.vjp
def _bn_vjp(e, primals, outputs, cotangents, *, epsilon, axis):
    x, scale, _, mean, var = primals
    ct = cotangents[0]
    ax, rank, inv, xhat = _bn_parts(e, x, scale, mean, var, epsilon, axis)
    gain = e.mul(inv, scale)
    ct_scale = _sum_but(e, e.mul(ct, xhat), ax, rank)
    ct_bias = _sum_but(e, ct, ax, rank)
    ct_mean = e.neg(e.mul(ct_bias, gain))
    ct_var = e.mul(e.mul(ct_scale, e.mul(scale, e.square(inv))), e.const(-0.5, inv))
    return [e.mul(ct, _along(e, gain, ax, rank)), ct_scale, ct_bias, ct_mean, ct_var]


def _normalized(e, x, axis: int, epsilon: float, centered: bool):
    """(dims, r, xhat) of layer norm (``centered``) or RMS norm over dims axis..end."""
    rank = len(x.shape)
    dims = tuple(range(_axis(axis, rank, "norm"), rank))
    xc = e.sub(x, e.mean(x, axes=dims, keepdims=True)) if centered else x
    r = e.rsqrt(e.add(e.mean(e.square(xc), axes=dims, keepdims=True), e.const(epsilon, x)))
    return dims, r, e.mul(xc, r)


def _project(e, g, r, xhat, dims, centered: bool):
    """r * (g - mean(g) - xhat * mean(g * xhat)); no mean(g) term for RMS norm."""
    t = e.sub(g, e.mul(xhat, e.mean(e.mul(g, xhat), axes=dims, keepdims=True)))
    if centered:
        t = e.sub(t, e.mean(g, axes=dims, keepdims=True))
    return e.mul(r, t)


def _norm_jvp(e, x, gamma, beta, tx, tgamma, tbeta, axis, epsilon, centered, out):
    dims, r, xhat = _normalized(e, x, axis, epsilon, centered)
    t = None if tx is None else e.mul(_project(e, tx, r, xhat, dims, centered), gamma)
    t = e.add_maybe(t, None if tgamma is None else e.mul(xhat, tgamma))
    t = e.add_maybe(t, tbeta)
    return [e.broadcast_to(t, e.static_shape(out))]


def _norm_vjp(e, x, gamma, beta, ct, axis, epsilon, centered):
    dims, r, xhat = _normalized(e, x, axis, epsilon, centered)
    ct_x = _project(e, e.mul(ct, gamma), r, xhat, dims, centered)
    ct_gamma = e.sum_to(e.mul(ct, xhat), e.static_shape(gamma))
    ct_beta = None if beta is None else e.sum_to(ct, e.static_shape(beta))
    return [ct_x, ct_gamma, ct_beta]


@layer_norm.jvp
def _ln_jvp(e, primals, outputs, tangents, *, axis, epsilon):
    return _norm_jvp(e, *primals, *tangents, axis, epsilon, True, outputs[0])


@layer_norm.vjp
def _ln_vjp(e, primals, outputs, cotangents, *, axis, epsilon):
    return _norm_vjp(e, *primals, cotangents[0], axis, epsilon, True)


@rms_norm.jvp
def _rms_jvp(e, primals, outputs, tangents, *, axis, epsilon):
    x, gamma = primals
    return _norm_jvp(e, x, gamma, None, *tangents, None, axis, epsilon, False, outputs[0])


@rms_norm.vjp
def _rms_vjp(e, primals, outputs, cotangents, *, axis, epsilon):
    x, gamma = primals
    return _norm_vjp(e, x, gamma, None, cotangents[0], axis, epsilon, False)[:2]


# vmap of the input alone: the normalized axis moves up by one (parameters stay shared)
for _op in (batch_norm, layer_norm, rms_norm):
    batch_shifting_axes(_op, "axis")


# l2_normalize ---------------------------------------------------------------------
# TFLite's L2_NORMALIZATION: float32, and int8 with the output fixed at scale 1/128, zero
# point 0 (TFLite Micro's kernel assumes them without checking; prepare refuses others).
L2_NORMALIZE_EPSILON = 1e-6  # TFLite Micro's, fixed in its float kernel
L2_NORMALIZE_OUTPUT_SCALE = 1.0 / 128
_L2_OUTPUT_SHIFT = 7  # the inverse norm is applied with this extra left shift: outputs in 1/128 steps

l2_normalize = defop(
    "l2_normalize",
    family="norm",
    inputs=("x",),
    attrs={"axis": Attr("int", -1, doc="normalized axis (negative counts from the end)")},
    int_dtypes=("i8",),  # TFLite Micro's L2_NORMALIZATION: float32 or int8
    doc="x / max(sqrt(sum(x^2)), 1e-6) along an axis (TFLite's L2_NORMALIZATION).",
)


@l2_normalize.infer
def _l2n_infer(x, *, axis):
    if not x.dtype.is_float and x.quant is None:
        fail(f"l2_normalize needs a float or quantized input, got {x.dtype}")
    if x.rank < 1:
        fail("l2_normalize: input must have rank >= 1")
    _axis(axis, x.rank, "l2_normalize")
    # a quantized output has fixed parameters of its own (TFLite: 1/128, 0)
    return TensorType(x.shape, x.dtype)


@l2_normalize.reference
def _l2n_ref(x, *, axis):
    ct = compute_dtype(x.dtype)
    xc = x.astype(ct)
    norm = np.sqrt(np.square(xc).sum(axis=axis, keepdims=True))
    return finish(xc / np.maximum(norm, ct.type(L2_NORMALIZE_EPSILON)), from_numpy(x.dtype))


@l2_normalize.sample
def _l2n_sample(rng):
    shape = rand_shape(rng, int(rng.integers(1, 5)))
    x = rand_float(rng, shape, _pick_float(rng), scale=float(rng.choice([0.1, 1.0, 10.0])))
    axis = int(rng.integers(-len(shape), len(shape)))
    if rng.random() < 0.2 and x.size:  # one all-zero slice along the axis: the epsilon keeps it 0
        rows = np.ascontiguousarray(np.moveaxis(x, axis, -1))
        rows.reshape(-1, rows.shape[-1])[0] = 0
        x = np.moveaxis(rows, -1, axis)
    return [x], {"axis": axis}


@l2_normalize.prepare
def _l2n_prepare(ctx, *, axis):
    """The input zero point; the output's parameters are checked, not computed (the kernel assumes 1/128, 0)."""
    xt, yt = ctx.in_types[0], ctx.out_types[0]
    if xt.dtype != DType.i8 or yt.dtype != DType.i8:
        raise ValueError(f"l2_normalize has an integer kernel for int8 only, not {xt.dtype} -> {yt.dtype}")
    _, zp_x = scalar_params(xt.quant, "l2_normalize input")
    s_y, zp_y = scalar_params(yt.quant, "l2_normalize output")
    if np.float32(s_y) != np.float32(L2_NORMALIZE_OUTPUT_SCALE) or zp_y != 0:
        raise ValueError(
            f"l2_normalize: int8 output must have scale 1/128 and zero point 0 (TFLite's), got {float(s_y)!r}, {zp_y}"
        )
    return {"in_zp": zp_x}


@l2_normalize.eval
def _l2n_eval(p, x, *, axis):
    """TFLite's int8 L2Normalization: the inverse square root of the slice's sum of squares as a
    multiplier and shift (GetInvSqrtQuantizedMultiplierExp), applied to each offset input."""
    xp = fp.namespace(x)
    a = _axis(axis, x.ndim, "l2_normalize")
    d = x.astype(xp.int64) - p.in_zp
    acc = fp.wrap_int32((d * d).sum(axis=a, keepdims=True))
    mult, shift = fp.inv_sqrt_quantized_multiplier_exp(acc, -1)
    y = fp.multiply_by_quantized_multiplier(d, mult, shift + _L2_OUTPUT_SHIFT)
    return xp.clip(y, -128, 127).astype(xp.int8)


# derivatives: J = (I - y y^T) / n where the norm n passes epsilon, I / epsilon where it does
# not; symmetric, so one formula gives the tangent and the cotangent
def _l2n_lin(e, x, y, t, axis: int):
    ax = _axis(axis, len(e.static_shape(x)), "l2_normalize")
    norm = e.sqrt(e.sum(e.mul(x, x), axes=(ax,), keepdims=True))
    along = e.mul(y, e.mul(e.sum(e.mul(y, t), axes=(ax,), keepdims=True), e.greater(norm, L2_NORMALIZE_EPSILON)))
    return e.div(e.sub(t, along), e.maximum(norm, e.const(L2_NORMALIZE_EPSILON, x)))


@l2_normalize.jvp
def _l2n_jvp(e, primals, outputs, tangents, *, axis):
    return [_l2n_lin(e, primals[0], outputs[0], tangents[0], axis)]


@l2_normalize.vjp
def _l2n_vjp(e, primals, outputs, cotangents, *, axis):
    return [_l2n_lin(e, primals[0], outputs[0], cotangents[0], axis)]


batch_shifting_axes(l2_normalize, "axis")
