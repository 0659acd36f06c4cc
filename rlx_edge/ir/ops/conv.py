"""Convolutions and matrix products (NHWC activations).

Weight layouts follow TFLite, the MCU convention:

- conv2d: ``w`` is [O, KH, KW, I/groups], bias [O];
- depthwise_conv2d: ``w`` is [1, KH, KW, C*depth_multiplier], bias [C*M];
- fully_connected: ``w`` is [O, I], ``x`` is [..., I], output [..., O].
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlx_edge.errors import UnsupportedOpError
from rlx_edge.ir import fixedpoint as fp
from rlx_edge.ir.dtype import DType, from_numpy, promote
from rlx_edge.ir.ops._common import (
    ACTIVATION,
    FLOAT_SAMPLE_DTYPES,
    PADDING,
    PADS,
    apply_activation,
    batch_into_leading,
    broadcastable_pair,
    check_pair,
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
from rlx_edge.ir.ops._quantized import (
    activation_clamp,
    channel_multipliers,
    finish_acc,
    numpy_finish_acc,
    scalar_params,
    storage_range,
)
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


# derivatives ----------------------------------------------------------------------
# The layers are bilinear in (x, w): a tangent is the layer applied to each tangent in
# turn. Cotangents use the layers themselves: the input's is a convolution of the
# spread-out cotangent with the flipped kernel (a transposed convolution), the weight's
# a convolution of the input with the cotangent as kernel (stride and dilation swapped).
def _no_act(attrs: dict[str, Any]) -> dict[str, Any]:
    return {**attrs, "activation": "none"}


def _layer_jvp(e, op: str, primals, outputs, tangents, attrs: dict[str, Any]):
    x, w, _ = primals
    tx, tw, tb = tangents
    t = None if tx is None else e.op(op, tx, w, **_no_act(attrs))
    t = e.add_maybe(t, None if tw is None else e.op(op, x, tw, **_no_act(attrs)))
    t = e.add_maybe(t, tb)
    if tuple(t.shape) != tuple(outputs[0].shape):  # only a bias tangent
        t = e.broadcast_to(t, e.static_shape(outputs[0]))
    return [e.activation_grad(t, outputs[0], attrs["activation"])]


def _resolved_pads(x, w, attrs: dict[str, Any]) -> tuple[int, int, int, int]:
    _, kh, kw, _ = (static_dim(d, "kernel dimension") for d in w.shape)
    a = attrs
    return window_shape(x.type, kh, kw, a["strides"], a.get("dilations", (1, 1)), a["padding"], a["pads"])[2]


def transposed_kernel(w: np.ndarray, groups: int) -> np.ndarray:
    """A conv2d weight [O, KH, KW, I/g] as the kernel of its transposed convolution: [I, KH, KW, O/g],
    flipped in space (numpy; :func:`conv_input_grad` builds the same from a graph value)."""
    o, kh, kw, ig = w.shape
    t = w.reshape(groups, o // groups, kh, kw, ig).transpose(0, 4, 2, 3, 1).reshape(groups * ig, kh, kw, o // groups)
    return np.ascontiguousarray(t[:, ::-1, ::-1, :])


def conv_input_grad(e, ct, wt, x_shape, strides, dilations, pads, groups: int):
    """The cotangent of a convolution's input [N, H, W, C] from its output's ``ct`` [N, OH, OW, O].

    ``wt`` is the transposed kernel [C, KH, KW, O/groups] (see :func:`transposed_kernel`).
    The cotangent is spread by the strides, padded by the kernel's reach, convolved at
    stride 1, and cropped to the input (the forward pass's padding taken back).
    """
    _, h, w_, _ = x_shape
    _, kh, kw, _ = e.static_shape(wt)
    oh, ow = e.static_shape(ct)[1:3]
    pt, pb, pl, pr = pads
    d = e.interior_pad(e.interior_pad(ct, 1, strides[0]), 2, strides[1])
    after_h = h + pt + pb - (oh - 1) * strides[0] - 1
    after_w = w_ + pl + pr - (ow - 1) * strides[1] - 1
    reach_h, reach_w = (kh - 1) * dilations[0], (kw - 1) * dilations[1]
    d = e.pad(d, pads=(0, 0, reach_h, after_h, reach_w, after_w, 0, 0))
    full = e.conv2d(d, wt, dilations=dilations, groups=groups)
    n, fh, fw, c = e.static_shape(full)
    if (pt, pl, fh, fw) == (0, 0, h, w_):
        return full
    return e.slice(full, begin=(0, pt, pl, 0), end=(n, pt + h, pl + w_, c))


def _graph_transposed_kernel(e, w, groups: int):
    """:func:`transposed_kernel` as graph nodes (the weight is a value of the graph)."""
    o, kh, kw, ig = e.static_shape(w)
    t = e.reshape(w, shape=(groups, o // groups, kh, kw, ig))
    t = e.reshape(e.transpose(t, perm=(0, 4, 2, 3, 1)), shape=(groups * ig, kh, kw, o // groups))
    return e.slice(t, begin=(0, -1, -1, 0), end=(_OPEN, -_OPEN, -_OPEN, _OPEN), strides=(1, -1, -1, 1))


_OPEN = 2**31 - 1  # slice bounds meaning "to the end" (layout.slice's convention)


def _window_input(e, x, pads, extent: tuple[int, int]):
    """``x`` padded with zeros and cut to exactly the rows and columns the windows read."""
    n, h, w, c = e.static_shape(x)
    pt, pb, pl, pr = pads
    if any(pads):
        x = e.pad(x, pads=(0, 0, pt, pb, pl, pr, 0, 0))
    if extent != (h + pt + pb, w + pl + pr):
        x = e.slice(x, begin=(0, 0, 0, 0), end=(n, extent[0], extent[1], c))
    return x


def _conv_weight_grad(e, x, ct, w_shape, strides, dilations, pads, groups: int):
    """sum over batch and positions of x-window * ct: a convolution of x (channels as batch) with ct
    (batch as input channels) at stride = dilation and dilation = stride, per group."""
    o, kh, kw, ig = w_shape
    oh, ow = e.static_shape(ct)[1:3]
    extent = ((oh - 1) * strides[0] + (kh - 1) * dilations[0] + 1, (ow - 1) * strides[1] + (kw - 1) * dilations[1] + 1)
    xp = _window_input(e, x, pads, extent)
    n = e.static_shape(xp)[0]
    og = o // groups
    parts = []
    for g in range(groups):
        xg, cg = xp, ct
        if groups > 1:
            xg = e.slice(xp, begin=(0, 0, 0, g * ig), end=(n, extent[0], extent[1], (g + 1) * ig))
            cg = e.slice(ct, begin=(0, 0, 0, g * og), end=(n, oh, ow, (g + 1) * og))
        k = e.conv2d(e.transpose(xg, perm=(3, 1, 2, 0)), e.transpose(cg, perm=(3, 1, 2, 0)),
                     strides=dilations, dilations=strides)  # fmt: skip
        parts.append(e.transpose(k, perm=(3, 1, 2, 0)))
    return parts[0] if groups == 1 else e.concat(*parts, axis=0)


def _depthwise_weight_grad(e, x, ct, w_shape, strides, dilations, pads, m: int):
    """Batch moved into channels: one depthwise convolution of x by ct per (image, channel), summed over images."""
    _, kh, kw, cm = w_shape
    n, oh, ow, _ = e.static_shape(ct)
    extent = ((oh - 1) * strides[0] + (kh - 1) * dilations[0] + 1, (ow - 1) * strides[1] + (kw - 1) * dilations[1] + 1)
    xp = _window_input(e, x, pads, extent)
    c = cm // m
    xs = e.reshape(e.transpose(xp, perm=(1, 2, 0, 3)), shape=(1, extent[0], extent[1], n * c))
    ks = e.reshape(e.transpose(ct, perm=(1, 2, 0, 3)), shape=(1, oh, ow, n * cm))
    k = e.depthwise_conv2d(xs, ks, strides=dilations, dilations=strides, depth_multiplier=m)
    k = e.sum(e.reshape(k, shape=(kh, kw, n, cm)), axes=(2,))
    return e.reshape(k, shape=w_shape)


@conv2d.jvp
def _conv2d_jvp(e, primals, outputs, tangents, **attrs):
    return _layer_jvp(e, "conv2d", primals, outputs, tangents, attrs)


@conv2d.vjp
def _conv2d_vjp(e, primals, outputs, cotangents, *, strides, padding, pads, dilations, activation, groups):
    x, w, b = primals
    ct = e.activation_grad(cotangents[0], outputs[0], activation)
    p = _resolved_pads(x, w, {"strides": strides, "dilations": dilations, "padding": padding, "pads": pads})
    wt = _graph_transposed_kernel(e, w, groups)
    dx = conv_input_grad(e, ct, wt, e.static_shape(x), strides, dilations, p, groups)
    dw = _conv_weight_grad(e, x, ct, e.static_shape(w), strides, dilations, p, groups)
    return [dx, dw, None if b is None else e.sum(ct, axes=(0, 1, 2))]


@depthwise_conv2d.jvp
def _dw_jvp(e, primals, outputs, tangents, **attrs):
    return _layer_jvp(e, "depthwise_conv2d", primals, outputs, tangents, attrs)


@depthwise_conv2d.vjp
def _dw_vjp(e, primals, outputs, cotangents, *, strides, padding, pads, dilations, activation, depth_multiplier):
    x, w, b = primals
    ct = e.activation_grad(cotangents[0], outputs[0], activation)
    p = _resolved_pads(x, w, {"strides": strides, "dilations": dilations, "padding": padding, "pads": pads})
    c = e.static_shape(x)[3]
    # a depthwise convolution is conv2d with one group per input channel and weight [C*M, KH, KW, 1]
    wt = _graph_transposed_kernel(e, e.transpose(w, perm=(3, 1, 2, 0)), c)
    dx = conv_input_grad(e, ct, wt, e.static_shape(x), strides, dilations, p, c)
    dw = _depthwise_weight_grad(e, x, ct, e.static_shape(w), strides, dilations, p, depth_multiplier)
    return [dx, dw, None if b is None else e.sum(ct, axes=(0, 1, 2))]


@fully_connected.jvp
def _fc_jvp(e, primals, outputs, tangents, **attrs):
    return _layer_jvp(e, "fully_connected", primals, outputs, tangents, attrs)


@fully_connected.vjp
def _fc_vjp(e, primals, outputs, cotangents, *, activation):
    x, w, b = primals
    ct = e.activation_grad(cotangents[0], outputs[0], activation)
    o, i = e.static_shape(w)
    dx = e.fully_connected(ct, e.transpose(w, perm=(1, 0)))
    ct2 = ct if len(ct.shape) == 2 else e.reshape(ct, shape=(-1, o))
    x2 = x if len(x.shape) == 2 else e.reshape(x, shape=(-1, i))
    dw = e.matmul(e.transpose(ct2, perm=(1, 0)), x2)
    db = None if b is None else e.sum_to(ct, (o,))
    return [dx, dw, db]


def _swap_last(e, t):
    r = len(t.shape)
    return e.transpose(t, perm=tuple(range(r - 2)) + (r - 1, r - 2))


@matmul.jvp
def _matmul_jvp(e, primals, outputs, tangents):
    a, b = primals
    ta, tb = tangents
    return [e.add_maybe(None if ta is None else e.matmul(ta, b), None if tb is None else e.matmul(a, tb))]


@matmul.vjp
def _matmul_vjp(e, primals, outputs, cotangents):
    """Vectors become matrices ([k] -> [1, k] or [k, 1]) so that one pair of products covers every case."""
    a, b = primals
    ct = cotangents[0]
    a2 = a if len(a.shape) > 1 else e.reshape(a, shape=(1, a.shape[0]))
    b2 = b if len(b.shape) > 1 else e.reshape(b, shape=(b.shape[0], 1))
    lead = e.static_shape(outputs[0])[: max(len(a2.shape), len(b2.shape)) - 2]
    full = lead + (a2.shape[-2], b2.shape[-1])
    ct2 = ct if tuple(ct.shape) == full else e.reshape(ct, shape=full)
    da = e.sum_to(e.matmul(ct2, _swap_last(e, b2)), a2.shape)
    db = e.sum_to(e.matmul(_swap_last(e, a2), ct2), b2.shape)
    return [e.reshape(da, shape=a.shape) if da.shape != a.shape else da,
            e.reshape(db, shape=b.shape) if db.shape != b.shape else db]  # fmt: skip


# vmap: the batch folds into N (the weights shared); fully_connected maps over any leading dims
for _op in (conv2d, depthwise_conv2d):
    batch_into_leading(_op)


@fully_connected.batch
def _fc_batch(e, inputs, batched, **attrs):
    return None if any(batched[1:]) else [e.fully_connected(*inputs, **attrs)]


@matmul.batch
def _matmul_batch(e, inputs, batched):
    """Matrices broadcast over leading dims: the batched operand gets ones up to the other's rank."""
    ranks = [len(t.shape) - bt for t, bt in zip(inputs, batched)]
    if min(ranks) < 2:
        return None  # a vector operand changes which axes multiply
    rank = max(ranks)
    args = []
    for t, bt in zip(inputs, batched):
        if bt and len(t.shape) - 1 < rank:
            shape = e.static_shape(t)
            t = e.reshape(t, shape=(shape[0],) + (1,) * (rank + 1 - len(shape)) + shape[1:])
        args.append(t)
    return [e.matmul(*args)]


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
        # TFLite's 16x8 scheme: an int64 bias makes the accumulators and their requantization 64-bit;
        # without a bias TFLite Micro takes that path for any int16 input (checked against it)
        "wide": bt.dtype == DType.i64 if bt is not None else xt.dtype == DType.i16,
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


# matmul: TFLite Micro's BATCH_MATMUL (reference_ops::BatchMatMul with FullyConnectedParams). Both
# operands are activations, per tensor, of the output's type; sum (a - zp_a) * (b - zp_b) in int32
# (int8) or int64 (int16, zero points 0), one multiplier s_a s_b / s_y, clamped to the type only.
@matmul.prepare
def _matmul_prepare(ctx: QContext) -> dict[str, Any]:
    (at, bt), yt = ctx.in_types, ctx.out_types[0]
    dtype = yt.dtype.numpy
    if dtype not in (np.int8, np.int16) or at.dtype != yt.dtype or bt.dtype != yt.dtype:
        raise UnsupportedOpError(
            f"node {ctx.node!r} (matmul): TFLite Micro's BATCH_MATMUL takes two int8 or two int16 operands "
            f"of the output's type, got {at.dtype} and {bt.dtype} to {yt.dtype}"
        )
    s_a, zp_a = scalar_params(at.quant, "matmul first operand")
    s_b, zp_b = scalar_params(bt.quant, "matmul second operand")
    s_y, zp_y = scalar_params(yt.quant, "matmul output")
    if dtype == np.int16 and (zp_a, zp_b, zp_y) != (0, 0, 0):
        raise UnsupportedOpError(
            f"node {ctx.node!r} (matmul): int16 needs zero points 0, got {zp_a}, {zp_b} and {zp_y}"
        )
    mult, shift = channel_multipliers(s_a, np.array([s_b]), s_y, 1)
    lo, hi = storage_range(dtype)
    return {
        "a_zp": zp_a, "b_zp": zp_b, "out_zp": zp_y, "mult": int(mult[0]), "shift": int(shift[0]),
        "act_min": lo, "act_max": hi, "wide": dtype == np.int16, "dtype": dtype.name,
    }  # fmt: skip


@matmul.eval
def _matmul_eval(p, a, b):
    xp = fp.namespace(a, b)
    acc = xp.matmul(a.astype(xp.int64) - p.a_zp, b.astype(xp.int64) - p.b_zp)
    return finish_acc(acc, p.mult, p.shift, p.wide, p.out_zp, p.act_min, p.act_max, p.dtype)


# numpy fast paths ------------------------------------------------------------------------
# The reference interpreter binds each node once (OpDef.bind): the weights become the float
# matrix of one BLAS product, the input zero point moves into the bias (folded_bias; padding
# then holds the zero point, so a padded tap adds (zp - zp) * w = 0 as TFLite's skip does),
# the requantization constants are laid out per channel (numpy_finish_acc). Each kernel
# computes exactly what the op's eval computes; tests/ir/ops/test_conv_bind.py holds them equal.
#
# Why the float sums are exact: the inputs are taken raw, |x| <= X (the largest magnitude of
# the input type; the padding value, the zero point, is one of its values), the weights as
# integers, so each product is an integer and every partial sum, in whatever order and
# blocking the BLAS adds them (fused multiply-adds included), is a sum of some products of
# one output channel c: its magnitude is at most X * sum_k |w[c, k]| = B[c]. float32 holds
# every integer of magnitude <= 2**24, float64 <= 2**53, and an IEEE operation whose exact
# result is representable returns it; so while max B <= 2**24 (float32) or 2**53 (float64)
# every step is exact and the result is the integer sum. A node beyond both keeps eval.
_EXACT_FLOATS = ((np.dtype(np.float32), 24), (np.dtype(np.float64), 53))


@dataclass(frozen=True)
class _Accumulation:
    """A bound node's float sums to its output: the folded bias added, then requantized."""

    p: Prepared
    ct: np.dtype  # the float type the sums are exact in
    x_dtype: np.dtype  # the input type the bound was proved for
    bias: np.ndarray  # int64 per output channel: b - in_zp * sum w (b: the constant bias, else 0)
    finish_raw: Callable[[np.ndarray], np.ndarray]  # numpy_finish_acc: the requantization of raw + bias

    def finish(self, sums: np.ndarray, runtime_bias: np.ndarray | None) -> np.ndarray:
        raw = sums.astype(np.int64)
        if runtime_bias is None:
            return self.finish_raw(raw)
        raw += self.bias
        return finish_accumulators(self.p, raw, runtime_bias)


def _accumulation(p: Prepared, w: np.ndarray, b: np.ndarray | None) -> _Accumulation | None:
    """The constants of a bound node whose output channel ``c`` sums over ``w[c]`` (int64, [O, taps]).

    ``b`` is the constant bias, if any. Activations keep their type through conv and FC
    (int8 -> int8, int16 -> int16), so the input type is the output's; a kernel given
    another input type runs eval instead.
    """
    x_dtype = np.dtype(p.dtype)
    lo, hi = storage_range(x_dtype)
    abs_sums = np.abs(w).sum(axis=1)
    raw_bound = max(-lo, hi) * abs_sums
    ct = next((t for t, bits in _EXACT_FLOATS if int(raw_bound.max(initial=0)) <= 2**bits), None)
    if ct is None:
        return None
    bias = folded_bias(p, w.sum(axis=1), b)
    # what TFLite accumulates, |sum (x - zp) * w + b|, bounds the accumulators
    acc_bound = max(hi - p.in_zp, p.in_zp - lo) * abs_sums + np.abs(folded_bias(p, 0, b))
    return _Accumulation(p, ct, x_dtype, bias, numpy_finish_acc(p, bias, raw_bound, acc_bound))


def _zero_point_padded(x: np.ndarray, ct: np.dtype, pads: tuple, zp: int) -> np.ndarray:
    """``x`` in the float type ``ct``, padded (top, bottom, left, right) with its zero point."""
    pt, pb, pl, pr = pads
    if not any(pads):
        return x.astype(ct)
    n, h, w, c = x.shape
    out = np.full((n, h + pt + pb, w + pl + pr, c), zp, dtype=ct)
    out[:, pt : pt + h, pl : pl + w] = x
    return out


def _bound_inputs(consts: tuple) -> tuple[np.ndarray | None, np.ndarray | None]:
    return consts[1], consts[2]


@conv2d.bind
def _conv2d_bind(p, consts, *, strides, padding, pads, dilations, activation, groups):
    """One matrix product per group over the (KH, KW, C)-ordered columns of the padded input."""
    w, b = _bound_inputs(consts)
    if w is None:
        return None
    o, kh, kw, ig = w.shape
    wi = w.astype(np.int64).reshape(o, kh * kw * ig)  # taps in (KH, KW, C) order, as the columns
    acc = _accumulation(p, wi, b)
    if acc is None:
        return None
    og = o // groups
    wm = np.ascontiguousarray(wi.reshape(groups, og, -1).transpose(0, 2, 1).astype(acc.ct))  # [G, K, O/G]
    attrs = {"strides": strides, "padding": padding, "pads": pads, "dilations": dilations}

    def kernel(x, w_in, b_in):
        if x.dtype != acc.x_dtype:
            return _conv2d_eval(p, x, w_in, b_in, **attrs, activation=activation, groups=groups)
        padded = _zero_point_padded(x, acc.ct, p.pads, p.in_zp)
        win = patches(padded, kh, kw, strides, dilations, (0, 0, 0, 0))  # N, OH, OW, C, KH, KW (a view)
        n, oh, ow = win.shape[:3]
        cols = win.transpose(0, 1, 2, 4, 5, 3)  # channels innermost: the copy below moves runs of C
        if groups == 1:
            sums = cols.reshape(n * oh * ow, -1) @ wm[0]
        else:
            g_cols = cols.reshape(n * oh * ow, kh * kw, groups, ig).transpose(2, 0, 1, 3)
            sums = np.matmul(g_cols.reshape(groups, n * oh * ow, -1), wm).transpose(1, 0, 2)
        return acc.finish(sums.reshape(n, oh, ow, o), b_in if b is None else None)

    return kernel


@depthwise_conv2d.bind
def _dw_bind(p, consts, *, strides, padding, pads, dilations, activation, depth_multiplier):
    """One multiply-add per tap over every output position, in the exact float type."""
    w, b = _bound_inputs(consts)
    if w is None:
        return None
    _, kh, kw, cm = w.shape
    wi = w[0].astype(np.int64).reshape(kh * kw, cm)
    acc = _accumulation(p, wi.T, b)
    if acc is None:
        return None
    m = depth_multiplier
    wt = wi.reshape(kh * kw, cm // m, m).astype(acc.ct)
    (sh, sw), (dh, dw) = strides, dilations
    attrs = {"strides": strides, "padding": padding, "pads": pads, "dilations": dilations}

    def kernel(x, w_in, b_in):
        if x.dtype != acc.x_dtype:
            return _dw_eval(p, x, w_in, b_in, **attrs, activation=activation, depth_multiplier=m)
        padded = _zero_point_padded(x, acc.ct, p.pads, p.in_zp)[..., None]  # N, H, W, C, 1
        n, c = x.shape[0], x.shape[3]
        oh = (padded.shape[1] - (kh - 1) * dh - 1) // sh + 1
        ow = (padded.shape[2] - (kw - 1) * dw - 1) // sw + 1
        sums = np.zeros((n, oh, ow, c, m), acc.ct)
        product = np.empty_like(sums)
        for t in range(kh * kw):
            i, j = divmod(t, kw)
            tap = padded[:, i * dh : i * dh + (oh - 1) * sh + 1 : sh, j * dw : j * dw + (ow - 1) * sw + 1 : sw]
            np.multiply(tap, wt[t], out=product)
            sums += product
        return acc.finish(sums.reshape(n, oh, ow, c * m), b_in if b is None else None)

    return kernel


@fully_connected.bind
def _fc_bind(p, consts, *, activation):
    """One matrix product of the inputs (rows) with the transposed weights."""
    w, b = _bound_inputs(consts)
    if w is None:
        return None
    wi = w.astype(np.int64) - p.w_zp  # [O, I]
    acc = _accumulation(p, wi, b)
    if acc is None:
        return None
    wt = np.ascontiguousarray(wi.T.astype(acc.ct))  # [I, O]
    finish_raw = acc.finish_raw

    def kernel(x, w_in, b_in):
        if x.dtype != acc.x_dtype:
            return _fc_eval(p, x, w_in, b_in, activation=activation)
        if x.ndim == 2 and b is not None:  # the usual case, without a call more than needed
            return finish_raw((x.astype(acc.ct) @ wt).astype(np.int64))
        sums = x.reshape(-1, wt.shape[0]).astype(acc.ct) @ wt
        return acc.finish(sums, b_in if b is None else None).reshape(x.shape[:-1] + (wt.shape[1],))

    return kernel


# transpose_conv2d ---------------------------------------------------------------------------
# TFLite's TRANSPOSE_CONV. Each input pixel (iy, ix) adds x[iy, ix] * w[:, fy, fx, :] to the
# output pixel (iy * sh - pad_top + fy, ix * sw - pad_left + fx); contributions outside the
# given output shape are dropped. The padding is TFLite Micro's: computed as for a
# convolution from the *output* size (ComputePaddingHeightWidth with the output as its
# input), only its top and left parts used, so it does not depend on the input's size.
transpose_conv2d = defop(
    "transpose_conv2d",
    family="conv",
    inputs=("x", "w", "b?"),
    attrs={
        "output_shape": Attr("ints", doc="the output's shape [N, OH, OW, O], as TFLite's first input gives it"),
        "strides": Attr("ints", (1, 1), doc="(stride_h, stride_w)"),
        "padding": Attr("str", "valid", choices=("valid", "same"), doc="TFLite padding, from the output size"),
        "activation": ACTIVATION,
    },
    doc="Transposed 2-D convolution: x [N,H,W,I], w [O,KH,KW,I], b [O] -> output_shape [N,OH,OW,O].",
)


def transpose_conv_pads(out_hw: tuple[int, int], kernel: tuple[int, int], strides, padding: str) -> tuple[int, int]:
    """(top, left) padding of a transpose conv, as TFLite Micro computes it from the output size."""
    if padding == "valid":  # a valid window never needs padding: (out - 1) * s + k <= size
        return 0, 0
    pads = []
    for size, k, s in zip(out_hw, kernel, strides):
        windows = (size + s - 1) // s
        pads.append(max(0, (windows - 1) * s + k - size) // 2)
    return pads[0], pads[1]


@transpose_conv2d.infer
def _tconv_infer(x, w, b, *, output_shape, strides, padding, activation):
    need_rank(x, 4, "transpose_conv2d input")
    need_rank(w, 4, "transpose_conv2d weight")
    check_pair("strides", strides)
    if len(output_shape) != 4 or any(int(d) < 1 for d in output_shape):
        fail(f"output_shape {list(output_shape)} must be 4 positive sizes [N, OH, OW, O]")
    dt = weighted_dtype(x, w, b)
    o, _, _, i = (static_dim(d, "transpose_conv2d weight dimension") for d in w.shape)
    unify(x.shape[3], i, "transpose_conv2d input channels vs weight dimension 3")
    unify(x.shape[0], output_shape[0], "transpose_conv2d batch vs output_shape[0]")
    if output_shape[3] != o:
        fail(f"output_shape has {output_shape[3]} channels, the weight {o} (dimension 0)")
    _check_bias(b, o)
    return TensorType((x.shape[0], int(output_shape[1]), int(output_shape[2]), o), dt)


def _tconv_scatter(x: np.ndarray, w: np.ndarray, out_shape, strides, pads: tuple[int, int]) -> np.ndarray:
    """sum of every input pixel's contributions to the output pixels it reaches: [N, OH, OW, O].

    One product per kernel tap over all input pixels, added onto a canvas that holds every
    position a tap reaches ((H - 1) * s + K rows), then the output's rows and columns cut out.
    """
    n, h, wd, _ = x.shape
    o, kh, kw, _ = w.shape
    sh, sw = strides
    canvas = np.zeros((n, (h - 1) * sh + kh, (wd - 1) * sw + kw, o), dtype=x.dtype)
    for fy in range(kh):
        for fx in range(kw):
            canvas[:, fy : fy + (h - 1) * sh + 1 : sh, fx : fx + (wd - 1) * sw + 1 : sw] += x @ w[:, fy, fx, :].T
    out = np.zeros((n, int(out_shape[1]), int(out_shape[2]), o), dtype=x.dtype)
    pt, pl = pads
    rows, cols = min(out.shape[1], canvas.shape[1] - pt), min(out.shape[2], canvas.shape[2] - pl)
    out[:, : max(rows, 0), : max(cols, 0)] = canvas[:, pt : pt + max(rows, 0), pl : pl + max(cols, 0)]
    return out


def _tconv_pads_of(w_shape, output_shape, strides, padding) -> tuple[int, int]:
    kh, kw = int(w_shape[1]), int(w_shape[2])
    return transpose_conv_pads((int(output_shape[1]), int(output_shape[2])), (kh, kw), strides, padding)


@transpose_conv2d.reference
def _tconv_ref(x, w, b, *, output_shape, strides, padding, activation):
    ct = compute_dtype(x.dtype)
    pads = _tconv_pads_of(w.shape, output_shape, strides, padding)
    y = _tconv_scatter(x.astype(ct), w.astype(ct), output_shape, strides, pads)
    return _float_layer_end(y, b, ct, activation, x, w)


@transpose_conv2d.macs
def _tconv_macs(ins, outs, **attrs):
    """Every input value times every tap of its output channels (taps that leave the output included)."""
    x, w = ins[0], ins[1]
    return int(np.prod(x.shape)) * int(w.shape[0]) * int(w.shape[1]) * int(w.shape[2])


@transpose_conv2d.sample
def _tconv_sample(rng):
    dt = _pick_float(rng)
    i, o = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    kh, kw = (int(k) for k in rng.integers(1, 4, 2))
    strides = tuple(int(s) for s in rng.integers(1, 3, 2))
    padding = str(rng.choice(["valid", "same"]))
    n, h, wd = int(rng.integers(1, 3)), int(rng.integers(2, 5)), int(rng.integers(2, 5))
    # every output size TensorFlow's conv2d_transpose accepts for this input: the convolution
    # of the output (same or valid) would give back the input's size
    extra_h, extra_w = (int(rng.integers(0, s)) for s in strides)
    if padding == "same":
        oh, ow = h * strides[0] - extra_h, wd * strides[1] - extra_w
    else:
        oh, ow = (h - 1) * strides[0] + kh + extra_h, (wd - 1) * strides[1] + kw + extra_w
    x = rand_float(rng, (n, h, wd, i), dt)
    w = rand_float(rng, (o, kh, kw, i), dt)
    b = rand_float(rng, (o,), dt) if rng.random() < 0.7 else None
    attrs = {"output_shape": (n, oh, ow, o), "strides": strides, "padding": padding,
             "activation": str(rng.choice(["none", "relu", "relu6"]))}  # fmt: skip
    return [x, w, b], attrs


@transpose_conv2d.prepare
def _tconv_prepare(ctx: QContext, *, output_shape, strides, padding, activation) -> dict[str, Any]:
    """TFLite Micro's TransposeConv: per-channel multipliers; int8 accumulates in int32, int16 in int64
    (with any bias, or none: its 16x8 kernel always takes the int64 path) and ignores the zero points."""
    wt = ctx.in_types[1]
    out = _mac_prepare(ctx, "transpose_conv2d", static_dim(wt.shape[0], "transpose_conv2d output channels"), activation)
    if ctx.in_types[0].dtype == DType.i16:
        if out["in_zp"] or out["out_zp"]:
            raise ValueError("transpose_conv2d with int16 activations needs zero points 0 (TFLite's 16x8 kernel)")
        out["wide"] = True
    out["tpads"] = _tconv_pads_of(wt.shape, output_shape, strides, padding)
    return out


@transpose_conv2d.eval
def _tconv_eval(p, x, w, b, *, output_shape, strides, padding, activation):
    """acc = sum (x - zp_x) * w over the input pixels that reach each output pixel (exact in float64:
    int16 x int8 products summed stay far below 2**53); numpy only, as conv2d's eval."""
    xs = x.astype(np.float64) - p.in_zp
    acc = _exact_int(_tconv_scatter(xs, w.astype(np.float64), output_shape, strides, tuple(p.tpads)))
    return finish_accumulators(p, acc, b)


# transpose_conv2d's derivatives: it is the adjoint of conv2d(u, w^T) (w^T = w as [I, KH, KW, O]) in
# u, with the same strides and the output's padding, so the input's cotangent is that convolution of
# the cotangent and the weight's is conv2d's weight cotangent with the roles of input and output swapped.
def _tconv_conv_pads(x_hw, out_hw, kernel, strides, pads: tuple[int, int]) -> tuple[int, int, int, int]:
    """(top, bottom, left, right) pads of the convolution over the output whose windows are the input pixels."""
    (h, wd), (oh, ow), (kh, kw), (sh, sw), (pt, pl) = x_hw, out_hw, kernel, strides, pads
    return pt, max(0, (h - 1) * sh + kh - oh - pt), pl, max(0, (wd - 1) * sw + kw - ow - pl)


@transpose_conv2d.jvp
def _tconv_jvp(e, primals, outputs, tangents, **attrs):
    return _layer_jvp(e, "transpose_conv2d", primals, outputs, tangents, attrs)


@transpose_conv2d.vjp
def _tconv_vjp(e, primals, outputs, cotangents, *, output_shape, strides, padding, activation):
    x, w, b = primals
    ct = e.activation_grad(cotangents[0], outputs[0], activation)
    o, kh, kw, i = e.static_shape(w)
    n, h, wd, _ = e.static_shape(x)
    top_left = _tconv_pads_of((o, kh, kw, i), output_shape, strides, padding)
    pads = _tconv_conv_pads((h, wd), tuple(output_shape[1:3]), (kh, kw), strides, top_left)
    dx = e.conv2d(ct, e.transpose(w, perm=(3, 1, 2, 0)), strides=strides, padding="explicit", pads=pads)
    if tuple(e.static_shape(dx)[1:3]) != (h, wd):
        dx = e.slice(dx, begin=(0, 0, 0, 0), end=(n, h, wd, i))
    dwt = _conv_weight_grad(e, ct, x, (i, kh, kw, o), strides, (1, 1), pads, 1)
    dw = e.transpose(dwt, perm=(3, 1, 2, 0))
    return [dx, dw, None if b is None else e.sum(ct, axes=(0, 1, 2))]


@transpose_conv2d.batch
def _tconv_batch(e, inputs, batched, **attrs):
    """The vmap axis folds into the batch, which output_shape names too."""
    if any(batched[1:]):
        return None
    x = inputs[0]
    shape = e.static_shape(x)
    out = tuple(attrs["output_shape"])
    folded = e.reshape(x, shape=(shape[0] * shape[1], *shape[2:]))
    y = e.op("transpose_conv2d", folded, *inputs[1:], **{**attrs, "output_shape": (shape[0] * shape[1], *out[1:])})
    return [e.reshape(y, shape=(shape[0], shape[1], *out[1:]))]
