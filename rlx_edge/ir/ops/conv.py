"""Convolutions and matrix products (NHWC activations).

Weight layouts follow TFLite, the MCU convention:

- conv2d: ``w`` is [O, KH, KW, I/groups], bias [O];
- depthwise_conv2d: ``w`` is [1, KH, KW, C*depth_multiplier], bias [C*M];
- fully_connected: ``w`` is [O, I], ``x`` is [..., I], output [..., O].
"""

from __future__ import annotations

import numpy as np

from rlx_edge.ir.dtype import from_numpy, promote
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
from rlx_edge.ir.ops._registry import Attr, defop
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
    if b is not None and (b.rank != 1 or b.shape[0] != o):
        fail(f"bias shape {list(b.shape)} must be [{o}]")
    oh, ow, _ = window_shape(x, kh, kw, strides, dilations, padding, pads)
    return TensorType((x.shape[0], oh, ow, o), dt)


@conv2d.reference
def _conv2d_ref(x, w, b, *, strides, padding, pads, dilations, activation, groups):
    o, kh, kw, ig = w.shape
    _, _, p = window_shape(TensorType(x.shape, "f32"), kh, kw, strides, dilations, padding, pads)
    ct = compute_dtype(x.dtype)
    win = patches(x.astype(ct), kh, kw, strides, dilations, p)  # N,OH,OW,C,KH,KW
    n, oh, ow = win.shape[:3]
    # im2col + one matrix product per group: einsum's path search costs more than the
    # product itself on the small tensors of MCU models
    cols = win.reshape(n * oh * ow, groups, ig * kh * kw)
    wg = w.astype(ct).reshape(groups, o // groups, kh, kw, ig).transpose(0, 1, 4, 2, 3).reshape(groups, o // groups, -1)
    y = np.concatenate([cols[:, g] @ wg[g].T for g in range(groups)], axis=1).reshape(n, oh, ow, o)
    if b is not None:
        y = y + b.astype(ct)
    return finish(apply_activation(y, activation), _out_dtype(x, w))


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
    if b is not None and (b.rank != 1 or b.shape[0] != cm):
        fail(f"bias shape {list(b.shape)} must be [{cm}]")
    oh, ow, _ = window_shape(x, kh, kw, strides, dilations, padding, pads)
    return TensorType((x.shape[0], oh, ow, cm), dt)


@depthwise_conv2d.reference
def _dw_ref(x, w, b, *, strides, padding, pads, dilations, activation, depth_multiplier):
    _, kh, kw, cm = w.shape
    _, _, p = window_shape(TensorType(x.shape, "f32"), kh, kw, strides, dilations, padding, pads)
    ct = compute_dtype(x.dtype)
    win = patches(x.astype(ct), kh, kw, strides, dilations, p)  # N,OH,OW,C,KH,KW
    wk = w.astype(ct)[0].reshape(kh, kw, -1, depth_multiplier)  # KH,KW,C,M
    n, oh, ow = win.shape[:3]
    y = np.zeros((n, oh, ow, wk.shape[2], depth_multiplier), dtype=ct)
    for i in range(kh):  # one multiply-add per tap keeps every product vectorized
        for j in range(kw):
            y += win[..., i, j, None] * wk[i, j]
    y = y.reshape(n, oh, ow, cm)
    if b is not None:
        y = y + b.astype(ct)
    return finish(apply_activation(y, activation), _out_dtype(x, w))


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
    if b is not None and (b.rank != 1 or b.shape[0] != w.shape[0]):
        fail(f"bias shape {list(b.shape)} must be [{w.shape[0]}]")
    return TensorType(tuple(x.shape[:-1]) + (w.shape[0],), dt)


@fully_connected.reference
def _fc_ref(x, w, b, *, activation):
    ct = compute_dtype(x.dtype)
    y = x.astype(ct) @ w.astype(ct).T
    if b is not None:
        y = y + b.astype(ct)
    return finish(apply_activation(y, activation), _out_dtype(x, w))


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


def _out_dtype(x: np.ndarray, w: np.ndarray):
    return promote(from_numpy(x.dtype), from_numpy(w.dtype))


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
# TFLite Micro reference-kernel arithmetic lives in rlx_edge.quant.intkernels
# (imported lazily: the quant package builds on the IR types).
def _conv_int_args(ctx, x, w, strides, padding, pads, dilations) -> dict:
    xt, wt = ctx.in_types[0], ctx.in_types[1]
    yt = ctx.out_types[0]
    _, _, p = window_shape(TensorType(x.shape, "f32"), w.shape[1], w.shape[2], strides, dilations, padding, pads)
    return {
        "x_q": xt.quant,
        "w_q": wt.quant,
        "y_q": yt.quant,
        "out_dtype": yt.dtype.numpy,
        "strides": strides,
        "dilations": dilations,
        "pads": p,
    }


@conv2d.int_reference
def _conv2d_int(ctx, x, w, b, *, strides, padding, pads, dilations, activation, groups):
    from rlx_edge.quant import intkernels

    args = _conv_int_args(ctx, x, w, strides, padding, pads, dilations)
    return intkernels.conv2d(x, w, b, groups=groups, activation=activation, **args)


@depthwise_conv2d.int_reference
def _dw_int(ctx, x, w, b, *, strides, padding, pads, dilations, activation, depth_multiplier):
    from rlx_edge.quant import intkernels

    args = _conv_int_args(ctx, x, w, strides, padding, pads, dilations)
    return intkernels.depthwise_conv2d(x, w, b, depth_multiplier=depth_multiplier, activation=activation, **args)


@fully_connected.int_reference
def _fc_int(ctx, x, w, b, *, activation):
    from rlx_edge.quant import intkernels

    xt, wt = ctx.in_types[0], ctx.in_types[1]
    yt = ctx.out_types[0]
    return intkernels.fully_connected(
        x, w, b, x_q=xt.quant, w_q=wt.quant, y_q=yt.quant, out_dtype=yt.dtype.numpy, activation=activation
    )
