"""Normalization ops: batch, layer, RMS and L2 normalization.

batch_norm is float only: it is folded into the preceding convolution before
quantization. layer_norm and rms_norm have integer semantics of our own for
int8 and int16 activations (see "integer layer_norm / rms_norm" below);
l2_normalize follows TFLite's int8 L2_NORMALIZATION.
"""

from __future__ import annotations

import math

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
    if x.rank < 1:
        fail("layer_norm: input must have rank >= 1")
    ax = _axis(axis, x.rank, "layer_norm")
    _check_trailing("layer_norm", x, ax, "gamma", gamma)
    _check_trailing("layer_norm", x, ax, "beta", beta)
    if _check_norm_types("layer_norm", x, gamma, beta):
        return TensorType(x.shape, x.dtype)
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
    if x.rank < 1:
        fail("rms_norm: input must have rank >= 1")
    ax = _axis(axis, x.rank, "rms_norm")
    _check_trailing("rms_norm", x, ax, "gamma", gamma)
    if _check_norm_types("rms_norm", x, gamma, None):
        return TensorType(x.shape, x.dtype)
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


# integer layer_norm / rms_norm ------------------------------------------------------
# Our own semantics (TFLite has no LAYER_NORM builtin; ARCHITECTURE.md, "Integer semantics of
# transformer ops"), split like a TFLite Micro kernel: prepare turns every scale into a
# multiplier and shift once, eval is integer arithmetic only. Per row of N = prod(dims
# axis..end) offset inputs d = x - zp_x, with S1 = sum(d) and S2 = sum(d^2):
#   layer norm: a = N*d - S1, V = N*S2 - S1^2 + E      (N^2 times the centred value / variance)
#   RMS norm:   a = N*d,      V = N*S2 + E
# where E = round(N^2 * epsilon / s_x^2) is epsilon in the same units; xhat = a / sqrt(V)
# exactly, so the mean is never rounded. 1/sqrt(V) comes from TFLite's
# GetInvSqrtQuantizedMultiplierExp on V brought below 2**31 by pairs of bits, and gives xhat
# in Q22. The output is zp_y + (xhat * (q_g - zp_g)) * s_g / (s_y * 2**22) (TFLite's int64
# requantization, as its 16x8 kernels) + (q_b - zp_b) * s_b / s_y (int32 requantization).
NORM_FRAC_BITS = 22  # |xhat| <= sqrt(N) <= 2**7: Q22 keeps it below 2**29
# |a| <= 2 * N * 2**16 and the Q31 multiplier keep a * mult below 2**62, and N * S2 + E below 2**61
NORM_MAX_DEPTH = 2**14
_NORM_MAX_EPS = 2**60
_NORM_IN = (DType.i8, DType.i16)
_NORM_PARAM = {"gamma": (DType.i8, DType.i16), "beta": (DType.i8, DType.i16, DType.i32)}


def _check_norm_types(op: str, x: TensorType, gamma: TensorType, beta: TensorType | None) -> bool:
    """True for the integer form (quantized int8 / int16 input, quantized integer gamma and beta);
    for the float form, checks that every tensor is float."""
    if x.dtype.is_float:
        _check_float(op, input=x, gamma=gamma, beta=beta)
        return False
    if x.dtype not in _NORM_IN or x.quant is None:
        fail(f"{op}: input must be float or quantized int8 / int16, got {x.dtype}")
    for what, t in (("gamma", gamma), ("beta", beta)):
        if t is not None and (t.dtype not in _NORM_PARAM[what] or t.quant is None):
            kinds = " / ".join(str(d) for d in _NORM_PARAM[what])
            fail(f"{op}: with a quantized input, {what} must be quantized {kinds}, got {t.dtype}")
    return True


def _norm_prepare(ctx, axis: int, epsilon: float, op: str) -> dict:
    xt, gt = ctx.in_types[0], ctx.in_types[1]
    bt = ctx.in_types[2] if len(ctx.in_types) > 2 else None
    yt = ctx.out_types[0]
    if xt.dtype not in _NORM_IN or yt.dtype != xt.dtype:
        raise ValueError(f"{op} has integer kernels for int8 and int16 activations only, not {xt.dtype} -> {yt.dtype}")
    s_x, zp_x = scalar_params(xt.quant, f"{op} input")
    s_g, zp_g = scalar_params(gt.quant, f"{op} gamma")
    s_y, zp_y = scalar_params(yt.quant, f"{op} output")
    depth = math.prod(int(d) for d in xt.shape[_axis(axis, xt.rank, op) :])
    if depth > NORM_MAX_DEPTH:
        raise ValueError(f"{op}: the integer kernel normalizes at most {NORM_MAX_DEPTH} elements, got {depth}")
    eps = min(float(fp.round_half_away(np.float64(depth) ** 2 * epsilon / np.float64(s_x) ** 2)), _NORM_MAX_EPS)
    g_mult, g_shift = fp.quantize_multiplier(s_g / (s_y * 2.0**NORM_FRAC_BITS))
    if g_shift > 14:  # TFLite's int64 requantization shifts right by 15 - shift >= 1
        raise ValueError(f"{op}: gamma scale {s_g!r} is too large for output scale {s_y!r}")
    if g_shift < -47:  # |xhat * gamma| < 2**45: the product rounds to 0
        g_mult, g_shift = 0, 0
    b_mult = b_shift = zp_b = 0
    if bt is not None:
        s_b, zp_b = scalar_params(bt.quant, f"{op} beta")
        b_mult, b_shift = fp.quantize_multiplier(s_b / s_y)
        if b_shift > 30:
            raise ValueError(f"{op}: beta scale {s_b!r} is too large for output scale {s_y!r}")
        if b_shift < -31:  # |q_b - zp_b| < 2**32: rounds to 0
            b_mult, b_shift = 0, 0
    lo, hi = (int(v) for v in (np.iinfo(yt.dtype.numpy).min, np.iinfo(yt.dtype.numpy).max))
    return {"depth": depth, "in_zp": zp_x, "gamma_zp": zp_g, "beta_zp": zp_b, "eps": int(eps), "g_mult": g_mult,
            "g_shift": g_shift, "b_mult": b_mult, "b_shift": b_shift, "out_zp": zp_y, "act_min": lo,
            "act_max": hi}  # fmt: skip


def _norm_eval(p, x, gamma, beta, centered: bool):
    """The arithmetic of the comment above; numpy or jax.numpy (the jax target traces it)."""
    xp = fp.namespace(x)
    n = p.depth
    d = x.reshape(-1, n).astype(xp.int64) - p.in_zp
    s2 = (d * d).sum(axis=1, keepdims=True)
    if centered:
        s1 = d.sum(axis=1, keepdims=True)
        a, v = n * d - s1, n * s2 - s1 * s1 + p.eps
    else:
        a, v = n * d, n * s2 + p.eps
    k = xp.zeros_like(v)
    for _ in range(16):  # V < 2**62: pairs of bits off until it is an int32 (sqrt(4**k) is exact)
        big = v >= 2**31
        v, k = xp.where(big, v >> 2, v), k + big
    mult, shift = fp.inv_sqrt_quantized_multiplier_exp(v, -1)  # 1/sqrt(v) = mult * 2**(shift - 31)
    xh = fp.rounding_divide_by_pot(a * mult, 31 + k - shift - NORM_FRAC_BITS)
    g = gamma.reshape(1, n).astype(xp.int64) - p.gamma_zp
    y = fp.multiply_by_quantized_multiplier_int64(xh * g, p.g_mult, p.g_shift)
    if beta is not None:
        b = beta.reshape(1, n).astype(xp.int64) - p.beta_zp
        y = y + fp.multiply_by_quantized_multiplier(fp.wrap_int32(b), p.b_mult, p.b_shift)
    return xp.clip(y + p.out_zp, p.act_min, p.act_max).astype(x.dtype).reshape(x.shape)


@layer_norm.prepare
def _ln_prepare(ctx, *, axis, epsilon):
    return _norm_prepare(ctx, axis, epsilon, "layer_norm")


@layer_norm.eval
def _ln_eval(p, x, gamma, beta, *, axis, epsilon):
    return _norm_eval(p, x, gamma, beta, centered=True)


@rms_norm.prepare
def _rms_prepare(ctx, *, axis, epsilon):
    return _norm_prepare(ctx, axis, epsilon, "rms_norm")


@rms_norm.eval
def _rms_eval(p, x, gamma, *, axis, epsilon):
    return _norm_eval(p, x, gamma, None, centered=False)


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
