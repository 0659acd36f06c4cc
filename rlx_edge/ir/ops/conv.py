"""Convolutions and matrix products (NHWC activations).

Weight layouts follow TFLite, the MCU convention:

- conv2d: ``w`` is [O, KH, KW, I/groups], bias [O];
- depthwise_conv2d: ``w`` is [1, KH, KW, C*depth_multiplier], bias [C*M];
- fully_connected: ``w`` is [O, I], ``x`` is [..., I], output [..., O].
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlx_edge.ir import fixedpoint as fp
from rlx_edge.ir.dtype import DType, from_numpy, promote
from rlx_edge.ir.ops._common import (
    ACTIVATION,
    FLOAT_SAMPLE_DTYPES,
    PADDING,
    PADS,
    apply_activation,
    broadcastable_pair,
    compute_dtype,
    elementwise_dtype,
    fail,
    finish,
    need_rank,
    patches,
    rand_float,
    rand_shape,
    rand_window_attrs,
    weighted_dtype,
    window_shape,
)
from rlx_edge.ir.ops._quantized import activation_clamp, channel_multipliers, finish_acc, scalar_params
from rlx_edge.ir.ops._registry import Attr, QContext, defop
from rlx_edge.ir.prepared import Prepared
from rlx_edge.ir.shape import broadcast, static_dim, unify
from rlx_edge.ir.types import TensorType

_WINDOW_ATTRS = {
    "strides": Attr("ints", (1, 1), doc="(stride_h, stride_w)"),
    "padding": PADDING,
    "pads": PADS,
    "dilations": Attr("ints", (1, 1), doc="(dilation_h, dilation_w)"),
    "activation": ACTIVATION,
}

# conv2d -------------------------------------------------------------------
conv2d = defop(
    "conv2d",
    family="conv",
    inputs=("x", "w", "b?"),
    attrs={**_WINDOW_ATTRS, "groups": Attr("int", 1, doc="input channel groups")},
    doc="2-D convolution: x [N,H,W,C], w [O,KH,KW,C/groups], b [O] -> [N,OH,OW,O].",
)


@conv2d.infer
def _conv2d_infer(x, w, b, *, strides, padding, pads, dilations, activation, groups):
    need_rank(x, 4, "conv2d input")
    need_rank(w, 4, "conv2d weight")
    dt = weighted_dtype(x, w, b)
    o, kh, kw, ig = (static_dim(d, "conv2d weight dimension") for d in w.shape)
    c = static_dim(x.shape[3], "conv2d input channels")
    if groups < 1 or c % groups or o % groups:
        fail(f"groups={groups} must divide input channels {c} and output channels {o}")
    if ig * groups != c:
        fail(f"weight expects {ig * groups} input channels ({ig} x {groups} groups), input has {c}")
    _check_bias(b, o)
    oh, ow, _ = window_shape(x, kh, kw, strides, dilations, padding, pads)
    return TensorType((x.shape[0], oh, ow, o), dt)


@conv2d.reference
def _conv2d_ref(x, w, b, *, strides, padding, pads, dilations, activation, groups):
    return _window_ref(_conv_sum, x, w, b, strides, padding, pads, dilations, activation, groups)


@conv2d.macs
def _conv2d_macs(ins, outs, **attrs):
    w = ins[1]
    return int(np.prod(outs[0].shape)) * int(np.prod(w.shape[1:]))


# depthwise_conv2d -----------------------------------------------------------
depthwise_conv2d = defop(
    "depthwise_conv2d",
    family="conv",
    inputs=("x", "w", "b?"),
    attrs={**_WINDOW_ATTRS, "depth_multiplier": Attr("int", 1, doc="output channels per input channel")},
    doc="Depthwise 2-D convolution: x [N,H,W,C], w [1,KH,KW,C*M], b [C*M] -> [N,OH,OW,C*M].",
)


@depthwise_conv2d.infer
def _dw_infer(x, w, b, *, strides, padding, pads, dilations, activation, depth_multiplier):
    need_rank(x, 4, "depthwise_conv2d input")
    need_rank(w, 4, "depthwise_conv2d weight")
    dt = weighted_dtype(x, w, b)
    one, kh, kw, cm = (static_dim(d, "depthwise weight dimension") for d in w.shape)
    c = static_dim(x.shape[3], "depthwise input channels")
    if one != 1:
        fail(f"depthwise weight must be [1,KH,KW,C*M], got {list(w.shape)}")
    if depth_multiplier < 1 or cm != c * depth_multiplier:
        fail(f"weight has {cm} channels but input {c} x depth_multiplier {depth_multiplier} = {c * depth_multiplier}")
    _check_bias(b, cm)
    oh, ow, _ = window_shape(x, kh, kw, strides, dilations, padding, pads)
    return TensorType((x.shape[0], oh, ow, cm), dt)


@depthwise_conv2d.reference
def _dw_ref(x, w, b, *, strides, padding, pads, dilations, activation, depth_multiplier):
    return _window_ref(_depthwise_sum, x, w, b, strides, padding, pads, dilations, activation, depth_multiplier)


@depthwise_conv2d.macs
def _dw_macs(ins, outs, **attrs):
    w = ins[1]
    return int(np.prod(outs[0].shape)) * int(w.shape[1]) * int(w.shape[2])


# fully_connected --------------------------------------------------------------
fully_connected = defop(
    "fully_connected",
    family="conv",
    inputs=("x", "w", "b?"),
    attrs={"activation": ACTIVATION},
    doc="Fully connected layer: x [..., I], w [O, I], b [O] -> [..., O].",
)


@fully_connected.infer
def _fc_infer(x, w, b, *, activation):
    need_rank(w, 2, "fully_connected weight")
    if x.rank < 1:
        fail("fully_connected input must have rank >= 1")
    dt = weighted_dtype(x, w, b)
    unify(x.shape[-1], w.shape[1], "fully_connected input features vs weight columns")
    _check_bias(b, w.shape[0])
    return TensorType(tuple(x.shape[:-1]) + (w.shape[0],), dt)


@fully_connected.reference
def _fc_ref(x, w, b, *, activation):
    ct = compute_dtype(x.dtype)
    return _float_layer_end(x.astype(ct) @ w.astype(ct).T, b, ct, activation, x, w)


@fully_connected.macs
def _fc_macs(ins, outs, **attrs):
    return int(np.prod(outs[0].shape)) * int(ins[1].shape[1])


# matmul -------------------------------------------------------------------------
matmul = defop(
    "matmul",
    family="conv",
    inputs=("a", "b"),
    doc="Matrix product with numpy semantics (batched, broadcasting leading dims).",
)


@matmul.infer
def _matmul_infer(a, b):
    if a.rank < 1 or b.rank < 1:
        fail("matmul operands must have rank >= 1")
    if not (a.dtype.is_float and b.dtype.is_float):
        if a.dtype.is_float or b.dtype.is_float:
            fail(f"matmul operands must both be float or both be integer, got {a.dtype} and {b.dtype}")
    ash = a.shape if a.rank > 1 else (1,) + a.shape
    bsh = b.shape if b.rank > 1 else b.shape + (1,)
    unify(ash[-1], bsh[-2], "matmul inner dimensions")
    lead = broadcast(ash[:-2], bsh[:-2])
    out = lead + (ash[-2], bsh[-1])
    if a.rank == 1:
        out = out[:-2] + out[-1:]
    if b.rank == 1:
        out = out[:-1]
    return TensorType(out, elementwise_dtype(a, b))


@matmul.reference
def _matmul_ref(a, b):
    out_dt = promote(from_numpy(a.dtype), from_numpy(b.dtype))
    if not out_dt.is_float:
        return np.matmul(a.astype(np.int64), b.astype(np.int64)).astype(out_dt.numpy)
    ct = compute_dtype(out_dt.numpy)
    return finish(np.matmul(a.astype(ct), b.astype(ct)), out_dt)


@matmul.macs
def _matmul_macs(ins, outs, **attrs):
    a = ins[0]
    return int(np.prod(outs[0].shape)) * int(a.shape[-1])


def _check_bias(b: TensorType | None, channels) -> None:
    if b is not None and (b.rank != 1 or b.shape[0] != channels):
        fail(f"bias shape {list(b.shape)} must be [{channels}]")


def _float_layer_end(y: np.ndarray, b: np.ndarray | None, ct: np.dtype, activation: str, x, w) -> np.ndarray:
    """The float layers' end: the bias and the fused activation in the compute dtype ``ct``, then the output dtype."""
    if b is not None:
        y = y + b.astype(ct)
    return finish(apply_activation(y, activation), promote(from_numpy(x.dtype), from_numpy(w.dtype)))


def _window_ref(window_sum, x, w, b, strides, padding, pads, dilations, activation, group_arg: int) -> np.ndarray:
    """The float reference of conv2d and depthwise_conv2d: ``window_sum`` (:func:`_conv_sum` with its groups,
    :func:`_depthwise_sum` with its depth multiplier) in the compute dtype, then :func:`_float_layer_end`."""
    _, kh, kw, _ = w.shape
    _, _, p = window_shape(TensorType(x.shape, "f32"), kh, kw, strides, dilations, padding, pads)
    ct = compute_dtype(x.dtype)
    y = window_sum(x.astype(ct), w.astype(ct), strides, dilations, p, group_arg)
    return _float_layer_end(y, b, ct, activation, x, w)


def _conv_sum(x: np.ndarray, w: np.ndarray, strides, dilations, pads, groups: int) -> np.ndarray:
    """sum x * w over every window, in x's dtype (padding contributes 0): [N, OH, OW, O].

    im2col + one matrix product per group: einsum's path search costs more
    than the product itself on the small tensors of MCU models.
    """
    o, kh, kw, ig = w.shape
    win = patches(x, kh, kw, strides, dilations, pads)  # N,OH,OW,C,KH,KW
    n, oh, ow = win.shape[:3]
    cols = win.reshape(n * oh * ow, groups, ig * kh * kw)
    wg = w.reshape(groups, o // groups, kh, kw, ig).transpose(0, 1, 4, 2, 3).reshape(groups, o // groups, -1)
    return np.concatenate([cols[:, g] @ wg[g].T for g in range(groups)], axis=1).reshape(n, oh, ow, o)


def _depthwise_sum(x: np.ndarray, w: np.ndarray, strides, dilations, pads, depth_multiplier: int) -> np.ndarray:
    """sum x * w per channel over every window, in x's dtype: output channel c*M + m reads input channel c."""
    _, kh, kw, cm = w.shape
    win = patches(x, kh, kw, strides, dilations, pads)  # N,OH,OW,C,KH,KW
    wk = w[0].reshape(kh, kw, -1, depth_multiplier)  # KH,KW,C,M
    n, oh, ow = win.shape[:3]
    y = np.zeros((n, oh, ow, wk.shape[2], depth_multiplier), dtype=x.dtype)
    for i in range(kh):  # one multiply-add per tap keeps every product vectorized
        for j in range(kw):
            y += win[..., i, j, None] * wk[i, j]
    return y.reshape(n, oh, ow, cm)


# samplers ----------------------------------------------------------------------
def _pick_float(rng):
    return FLOAT_SAMPLE_DTYPES[int(rng.integers(len(FLOAT_SAMPLE_DTYPES)))]


@conv2d.sample
def _conv2d_sample(rng):
    dt = _pick_float(rng)
    groups = int(rng.choice([1, 1, 2]))
    ig, og = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    kh, kw = (int(k) for k in rng.integers(1, 4, 2))
    attrs = rand_window_attrs(rng)
    attrs.update(groups=groups, dilations=tuple(int(d) for d in rng.integers(1, 3, 2)))
    attrs["activation"] = str(rng.choice(["none", "relu", "relu6"]))
    x = rand_float(rng, (int(rng.integers(1, 3)), int(rng.integers(5, 9)), int(rng.integers(5, 9)), ig * groups), dt)
    w = rand_float(rng, (og * groups, kh, kw, ig), dt)
    b = rand_float(rng, (og * groups,), dt) if rng.random() < 0.7 else None
    return [x, w, b], attrs


@depthwise_conv2d.sample
def _dw_sample(rng):
    dt = _pick_float(rng)
    c, m = int(rng.integers(1, 5)), int(rng.integers(1, 3))
    kh, kw = (int(k) for k in rng.integers(1, 4, 2))
    attrs = rand_window_attrs(rng)
    attrs.update(depth_multiplier=m, dilations=tuple(int(d) for d in rng.integers(1, 3, 2)))
    x = rand_float(rng, (1, int(rng.integers(5, 9)), int(rng.integers(5, 9)), c), dt)
    w = rand_float(rng, (1, kh, kw, c * m), dt)
    b = rand_float(rng, (c * m,), dt) if rng.random() < 0.7 else None
    return [x, w, b], attrs


@fully_connected.sample
def _fc_sample(rng):
    dt = _pick_float(rng)
    i, o = int(rng.integers(1, 9)), int(rng.integers(1, 9))
    lead = rand_shape(rng, int(rng.integers(0, 3)))
    x = rand_float(rng, lead + (i,), dt)
    w = rand_float(rng, (o, i), dt)
    b = rand_float(rng, (o,), dt) if rng.random() < 0.7 else None
    return [x, w, b], {"activation": str(rng.choice(["none", "relu", "relu6", "relu_n1_to_1"]))}


@matmul.sample
def _matmul_sample(rng):
    dt = _pick_float(rng)
    m, k, n = (int(v) for v in rng.integers(1, 6, 3))
    lead_a, lead_b = broadcastable_pair(rng, int(rng.integers(0, 3)))
    a_shape = (k,) if rng.random() < 0.15 else lead_a + (m, k)
    b_shape = (k,) if rng.random() < 0.15 else lead_b + (k, n)
    return [rand_float(rng, a_shape, dt), rand_float(rng, b_shape, dt)], {}


# integer semantics ------------------------------------------------------------------
# TFLite Micro's ConvPerChannel, DepthwiseConvPerChannel and FullyConnected(PerChannel),
# split as its kernels are: prepare computes the per-channel multipliers, the zero points
# and the clamp once from the types; eval accumulates exactly and ends in
# finish_accumulators. Targets that accumulate their own way (JAX, Cortex-M, FPGA) read
# the same parameters, and fold the input zero point into the bias with folded_bias.
def _mac_prepare(ctx: QContext, what: str, channels: int, activation: str) -> dict[str, Any]:
    xt, wt = ctx.in_types[0], ctx.in_types[1]
    bt = ctx.in_types[2] if len(ctx.in_types) > 2 else None
    yt = ctx.out_types[0]
    s_x, zp_x = scalar_params(xt.quant, f"{what} input")
    s_y, zp_y = scalar_params(yt.quant, f"{what} output")
    if wt.quant is None:
        raise ValueError(f"{what} weight has no quantization parameters")
    mult, shift = channel_multipliers(s_x, wt.quant.scale, s_y, channels)
    lo, hi = activation_clamp(activation, yt.quant, yt.dtype.numpy)
    return {
        "in_zp": zp_x, "out_zp": zp_y, "mult": mult, "shift": shift, "act_min": lo, "act_max": hi,
        # TFLite's 16x8 scheme: an int64 bias makes the accumulators and their requantization 64-bit
        "wide": bt is not None and bt.dtype == DType.i64,
        "dtype": yt.dtype.numpy.name,
    }  # fmt: skip


def _window_prepare(ctx: QContext, what: str, channels: int, attrs: dict[str, Any]) -> dict[str, Any]:
    """:func:`_mac_prepare` plus the resolved (top, bottom, left, right) padding."""
    wt = ctx.in_types[1]
    kh, kw = static_dim(wt.shape[1], f"{what} kernel height"), static_dim(wt.shape[2], f"{what} kernel width")
    a = attrs
    _, _, pads = window_shape(ctx.in_types[0], kh, kw, a["strides"], a["dilations"], a["padding"], a["pads"])
    return {**_mac_prepare(ctx, what, channels, a["activation"]), "pads": pads}


def finish_accumulators(p: Prepared, acc: Any, b: Any) -> Any:
    """The end of conv2d, depthwise_conv2d and fully_connected, after the accumulation.

    ``acc`` (integers, numpy or jax) holds sum (x - in_zp) * (w - w_zp) with
    output channels on the last axis; ``b`` is the bias, a :func:`folded_bias`
    or None. Adds it, requantizes (int32 double rounding, or TFLite's int64
    form where ``p.wide``), adds the output zero point, clamps and casts.
    """
    xp = fp.namespace(acc)
    acc = acc.astype(xp.int64)
    if b is not None:
        acc = acc + xp.asarray(b, dtype=xp.int64)
    return finish_acc(acc, p.mult, p.shift, p.wide, p.out_zp, p.act_min, p.act_max, p.dtype)


def folded_bias(p: Prepared, w_sums: Any, b: np.ndarray | None) -> np.ndarray:
    """``b - in_zp * w_sums`` (int64): the bias of an accumulation over the raw inputs.

    sum (x - zp) * w + b = sum x * w + (b - zp * sum w), so kernels that take
    the inputs as they are (Cortex-M, JAX's int8 products) add this instead
    of offsetting every input. ``w_sums`` holds, per output channel, the sum
    of the weights (less their zero point) that the accumulation covers; it
    broadcasts against ``b``. It depends on the weights, which prepare never
    sees, so targets call it with theirs.
    """
    bias = np.zeros((), np.int64) if b is None else np.asarray(b, dtype=np.int64)
    return bias - np.int64(p.in_zp) * np.asarray(w_sums, dtype=np.int64)


def _exact_int(y: np.ndarray) -> np.ndarray:
    """float64 sums of integer products back to int64.

    They are exact: int8 (or int16) x int8 products summed in float64 stay far
    below 2**53, so the accumulation can run as a BLAS product.
    """
    return np.rint(y).astype(np.int64)


@conv2d.prepare
def _conv2d_prepare(ctx: QContext, **attrs: Any) -> dict[str, Any]:
    return _window_prepare(ctx, "conv2d", static_dim(ctx.in_types[1].shape[0], "conv2d output channels"), attrs)


@conv2d.eval
def _conv2d_eval(p, x, w, b, *, strides, padding, pads, dilations, activation, groups):
    """acc[c] = sum (x - zp_x) * w[c]: padded taps contribute nothing, as TFLite skips them.

    numpy only: the JAX target runs its own exact product and then
    :func:`finish_accumulators`.
    """
    xs = x.astype(np.float64) - p.in_zp
    acc = _exact_int(_conv_sum(xs, w.astype(np.float64), strides, dilations, p.pads, groups))
    return finish_accumulators(p, acc, b)


@depthwise_conv2d.prepare
def _dw_prepare(ctx: QContext, **attrs: Any) -> dict[str, Any]:
    channels = static_dim(ctx.in_types[1].shape[3], "depthwise_conv2d output channels")
    return _window_prepare(ctx, "depthwise_conv2d", channels, attrs)


@depthwise_conv2d.eval
def _dw_eval(p, x, w, b, *, strides, padding, pads, dilations, activation, depth_multiplier):
    xs = x.astype(np.int64) - p.in_zp
    acc = _depthwise_sum(xs, w.astype(np.int64), strides, dilations, p.pads, depth_multiplier)
    return finish_accumulators(p, acc, b)


@fully_connected.prepare
def _fc_prepare(ctx: QContext, *, activation: str) -> dict[str, Any]:
    """The per-tensor kernel honours a weight zero point; per-channel weights are symmetric."""
    wt = ctx.in_types[1]
    out = _mac_prepare(ctx, "fully_connected", static_dim(wt.shape[0], "fully_connected outputs"), activation)
    out["w_zp"] = int(wt.quant.zero_point[0]) if wt.quant.scale.size == 1 else 0
    return out


@fully_connected.eval
def _fc_eval(p, x, w, b, *, activation):
    acc = _exact_int((x.astype(np.float64) - p.in_zp) @ (w.astype(np.float64) - p.w_zp).T)
    return finish_accumulators(p, acc, b)
