"""Pooling over NHWC activations.

Padded positions never take part in a window: ``avg_pool2d`` divides by the
number of real elements under each window (TFLite, and ONNX with
``count_include_pad=0``), and ``max_pool2d`` pads with -inf (the type's
minimum for integers), so padding can never be the maximum.
"""

from __future__ import annotations

import numpy as np

from rlx_edge.ir import fixedpoint as fp
from rlx_edge.ir.dtype import DType, from_numpy
from rlx_edge.ir.ops._common import (
    ACTIVATION,
    FLOAT_SAMPLE_DTYPES,
    PADDING,
    PADS,
    apply_activation,
    batch_into_leading,
    check_pair,
    compute_dtype,
    fail,
    finish,
    need_rank,
    patches,
    rand_float,
    window_shape,
)
from rlx_edge.ir.ops._quantized import activation_clamp, clamp_cast, storage_range
from rlx_edge.ir.ops._registry import Attr, QContext, defop
from rlx_edge.ir.ops.conv import conv_input_grad, transposed_kernel
from rlx_edge.ir.prepared import Prepared
from rlx_edge.ir.shape import static_dim
from rlx_edge.ir.types import TensorType

_NO_DILATION = (1, 1)

_POOL_ATTRS = {
    "kernel": Attr("ints", doc="(kernel_h, kernel_w)"),
    "strides": Attr("ints", (1, 1), doc="(stride_h, stride_w)"),
    "padding": PADDING,
    "pads": PADS,
    "activation": ACTIVATION,
}


def _need_float_or_quant(x: TensorType, what: str) -> None:
    if not x.dtype.is_float and x.quant is None:
        fail(f"{what} needs a float or quantized input, got {x.dtype}")


def _pool_infer(x: TensorType, what: str, kernel: tuple, strides: tuple, padding: str, pads: tuple) -> TensorType:
    need_rank(x, 4, f"{what} input")
    kh, kw = check_pair("kernel", kernel)
    if isinstance(x.shape[1], str) or isinstance(x.shape[2], str):
        fail(f"{what}: height and width of input {list(x.shape)} must be static; bind the symbols first")
    oh, ow, p = window_shape(x, kh, kw, strides, _NO_DILATION, padding, pads)
    # A window lying wholly in padding would average zero elements (and max
    # over nothing); ONNX forbids it the same way.
    if p[0] >= kh or p[1] >= kh or p[2] >= kw or p[3] >= kw:
        fail(f"{what}: pads {list(p)} (top, bottom, left, right) must each be smaller than kernel {list(kernel)}")
    # Pooling keeps channels and value range, so quantization passes through.
    return TensorType((x.shape[0], oh, ow, x.shape[3]), x.dtype, x.quant)


def _resolved_pads(x: np.ndarray, kernel: tuple, strides: tuple, padding: str, pads: tuple) -> tuple:
    _, _, p = window_shape(TensorType(x.shape, "f32"), kernel[0], kernel[1], strides, _NO_DILATION, padding, pads)
    return p


# avg_pool2d ---------------------------------------------------------------------
avg_pool2d = defop(
    "avg_pool2d",
    family="pool",
    inputs=("x",),
    passthrough_quant=True,
    attrs=dict(_POOL_ATTRS),
    doc="Average pooling: x [N,H,W,C] -> [N,OH,OW,C]; each window divides by its count of non-padding elements.",
)


@avg_pool2d.infer
def _avg_infer(x, *, kernel, strides, padding, pads, activation):
    _need_float_or_quant(x, "avg_pool2d")
    return _pool_infer(x, "avg_pool2d", kernel, strides, padding, pads)


@avg_pool2d.reference
def _avg_ref(x, *, kernel, strides, padding, pads, activation):
    kh, kw = kernel
    p = _resolved_pads(x, kernel, strides, padding, pads)
    ct = compute_dtype(x.dtype) if x.dtype.kind == "f" else np.dtype(np.float64)
    total = patches(x.astype(ct), kh, kw, strides, _NO_DILATION, p).sum(axis=(-2, -1))
    count = window_counts(x.shape[1], x.shape[2], kernel, strides, p).astype(ct)[None, :, :, None]
    y = apply_activation(total / count, activation)
    if x.dtype.kind in "iu":
        # integer data (a stored quantized tensor) rounds half away from zero, as TFLite's kernels do
        info = np.iinfo(x.dtype)
        return np.clip(fp.round_half_away(y), info.min, info.max).astype(x.dtype)
    return finish(y, from_numpy(x.dtype))


# max_pool2d ---------------------------------------------------------------------
max_pool2d = defop(
    "max_pool2d",
    family="pool",
    inputs=("x",),
    passthrough_quant=True,
    attrs=dict(_POOL_ATTRS),
    doc="Max pooling: x [N,H,W,C] -> [N,OH,OW,C]; padding never wins.",
)


@max_pool2d.infer
def _max_infer(x, *, kernel, strides, padding, pads, activation):
    if x.dtype == DType.bool:
        fail("max_pool2d needs a numeric input, got bool")
    return _pool_infer(x, "max_pool2d", kernel, strides, padding, pads)


@max_pool2d.reference
def _max_ref(x, *, kernel, strides, padding, pads, activation):
    kh, kw = kernel
    p = _resolved_pads(x, kernel, strides, padding, pads)
    low = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    # max is exact in any precision, so no widening is needed
    y = patches(x, kh, kw, strides, _NO_DILATION, p, pad_value=low).max(axis=(-2, -1))
    return apply_activation(y, activation).astype(x.dtype, copy=False)


# global_avg_pool ----------------------------------------------------------------
global_avg_pool = defop(
    "global_avg_pool",
    family="pool",
    inputs=("x",),
    passthrough_quant=True,
    doc="Mean over height and width: x [N,H,W,C] -> [N,1,1,C].",
)


@global_avg_pool.infer
def _gap_infer(x):
    need_rank(x, 4, "global_avg_pool input")
    _need_float_or_quant(x, "global_avg_pool")
    if 0 in (x.shape[1], x.shape[2]):
        fail(f"global_avg_pool input {list(x.shape)} has no pixels to average")
    return TensorType((x.shape[0], 1, 1, x.shape[3]), x.dtype, x.quant)


@global_avg_pool.reference
def _gap_ref(x):
    if x.dtype.kind in "iu":
        y = x.astype(np.float64).mean(axis=(1, 2), keepdims=True)
        info = np.iinfo(x.dtype)
        return np.clip(fp.round_half_away(y), info.min, info.max).astype(x.dtype)
    y = x.astype(compute_dtype(x.dtype)).mean(axis=(1, 2), keepdims=True)
    return finish(y, from_numpy(x.dtype))


# samplers -----------------------------------------------------------------------
def _pool_sample(rng: np.random.Generator) -> tuple[list, dict]:
    dt = FLOAT_SAMPLE_DTYPES[int(rng.integers(len(FLOAT_SAMPLE_DTYPES)))]
    kh, kw = (int(k) for k in rng.integers(1, 4, 2))
    padding = str(rng.choice(["valid", "same", "explicit"]))
    attrs: dict = {
        "kernel": (kh, kw),
        "strides": tuple(int(s) for s in rng.integers(1, 4, 2)),
        "padding": padding,
        "activation": str(rng.choice(["none", "relu", "relu6", "relu_n1_to_1"])),
    }
    pads = (0, 0, 0, 0)
    if padding == "explicit":
        pads = (int(rng.integers(0, kh)), int(rng.integers(0, kh)), int(rng.integers(0, kw)), int(rng.integers(0, kw)))
        attrs["pads"] = pads
    if rng.random() < 0.15:  # the whole image is one window
        h, w = kh, kw
    else:
        # the padded image must hold one window; SAME padding fits any size, size-1 images included
        lo_h, lo_w = (1, 1) if padding == "same" else (max(kh - pads[0] - pads[1], 1), max(kw - pads[2] - pads[3], 1))
        h, w = int(rng.integers(lo_h, 9)), int(rng.integers(lo_w, 9))
    x = rand_float(rng, (int(rng.integers(1, 3)), h, w, int(rng.integers(1, 5))), dt, scale=3.0)
    return [x], attrs


avg_pool2d.sample(_pool_sample)
max_pool2d.sample(_pool_sample)


@global_avg_pool.sample
def _gap_sample(rng):
    dt = FLOAT_SAMPLE_DTYPES[int(rng.integers(len(FLOAT_SAMPLE_DTYPES)))]
    shape = (int(rng.integers(1, 3)), int(rng.integers(1, 8)), int(rng.integers(1, 8)), int(rng.integers(1, 6)))
    return [rand_float(rng, shape, dt)], {}


# derivatives ------------------------------------------------------------------------
# A pool is a depthwise convolution with a fixed kernel: ones over the counts (average),
# or a 0/1 kernel picking the maximum's tap (max). Cotangents go back through the
# transposed convolution of the conv family.
def _pool_window(e, x, kernel, strides, padding, pads):
    _, _, p = window_shape(x.type, kernel[0], kernel[1], strides, _NO_DILATION, padding, pads)
    return p


@avg_pool2d.jvp
def _avg_jvp(e, primals, outputs, tangents, **attrs):
    t = e.avg_pool2d(tangents[0], **{**attrs, "activation": "none"})
    return [e.activation_grad(t, outputs[0], attrs["activation"])]


@avg_pool2d.vjp
def _avg_vjp(e, primals, outputs, cotangents, *, kernel, strides, padding, pads, activation):
    x = primals[0]
    n, h, w, c = e.static_shape(x)
    p = _pool_window(e, x, kernel, strides, padding, pads)
    ct = e.activation_grad(cotangents[0], outputs[0], activation)
    count = window_counts(h, w, kernel, strides, p)[None, :, :, None]
    ct = e.mul(ct, e.const(1 / count, x, count.shape))
    ones = e.const(1, x, (c, kernel[0], kernel[1], 1))
    return [conv_input_grad(e, ct, ones, (n, h, w, c), strides, _NO_DILATION, p, c)]


def _graph_taps(e, v, kernel, strides, pads, fill: float, out_hw):
    """Every tap's pixels at each output position, [N, OH, OW, taps, C] (row-major taps)."""
    n, _, _, c = e.static_shape(v)
    (kh, kw), (sh, sw), (oh, ow) = kernel, strides, out_hw
    if any(pads):
        pt, pb, pl, pr = pads
        v = e.pad(v, pads=(0, 0, pt, pb, pl, pr, 0, 0), value=fill)
    taps = []
    for i in range(kh):
        for j in range(kw):
            end = (n, i + (oh - 1) * sh + 1, j + (ow - 1) * sw + 1, c)
            taps.append(e.unsqueeze(e.slice(v, begin=(0, i, j, 0), end=end, strides=(1, sh, sw, 1)), axes=(3,)))
    return taps[0] if len(taps) == 1 else e.concat(*taps, axis=3)


def _max_mask(e, x, y, attrs):
    """1 at the taps holding their window's maximum (padding, -inf, never does), [N, OH, OW, taps, C]."""
    a = attrs
    p = _pool_window(e, x, a["kernel"], a["strides"], a["padding"], a["pads"])
    m = y if a["activation"] == "none" else e.max_pool2d(x, **{**a, "activation": "none"})
    out_hw = e.static_shape(y)[1:3]
    taps = _graph_taps(e, x, a["kernel"], a["strides"], p, -np.inf, out_hw)
    below = e.greater(e.sub(e.unsqueeze(m, axes=(3,)), taps), 0)
    return e.sub(e.const(1, x), below), p


@max_pool2d.jvp
def _max_jvp(e, primals, outputs, tangents, **attrs):
    x, y = primals[0], outputs[0]
    mask, p = _max_mask(e, x, y, attrs)
    t = _graph_taps(e, tangents[0], attrs["kernel"], attrs["strides"], p, 0.0, e.static_shape(y)[1:3])
    t = e.sum(e.mul(mask, t), axes=(3,))
    return [e.activation_grad(t, y, attrs["activation"])]


@max_pool2d.vjp
def _max_vjp(e, primals, outputs, cotangents, **attrs):
    x, y = primals[0], outputs[0]
    n, h, w, c = e.static_shape(x)
    kh, kw = attrs["kernel"]
    mask, p = _max_mask(e, x, y, attrs)
    ct = e.activation_grad(cotangents[0], y, attrs["activation"])
    per_tap = e.mul(mask, e.unsqueeze(ct, axes=(3,)))  # N, OH, OW, taps, C
    _, oh, ow, _ = e.static_shape(y)
    per_tap = e.reshape(e.transpose(per_tap, perm=(0, 1, 2, 4, 3)), shape=(n, oh, ow, c * kh * kw))
    # depthwise weight [C*taps, KH, KW, 1] with a 1 at each tap's own position
    pick = np.zeros((c, kh * kw, kh, kw, 1))
    for t in range(kh * kw):
        pick[:, t, t // kw, t % kw, 0] = 1
    wt = transposed_kernel(pick.reshape(c * kh * kw, kh, kw, 1), c)
    return [conv_input_grad(e, per_tap, e.const(wt, x, wt.shape), (n, h, w, c), attrs["strides"], _NO_DILATION, p, c)]


@global_avg_pool.jvp
def _gap_jvp(e, primals, outputs, tangents):
    return [e.global_avg_pool(tangents[0])]


@global_avg_pool.vjp
def _gap_vjp(e, primals, outputs, cotangents):
    x = primals[0]
    _, h, w, _ = e.static_shape(x)
    return [e.mul(e.expand(cotangents[0], x.shape, (1, 2)), e.const(1 / (h * w), x))]


for _op in (avg_pool2d, max_pool2d, global_avg_pool):
    batch_into_leading(_op)


# integer semantics ------------------------------------------------------------------
# TFLite Micro's quantized AveragePool and MaxPool, split as its kernels are.
# Pooling keeps the input's quantization parameters, so nothing is rescaled:
# prepare resolves the window and the activation clamp once; eval is integer
# only, in the input's array namespace (numpy, or jax.numpy on the jax target).
def _pool_prepare(ctx: QContext, kernel: tuple, strides: tuple, pads: tuple, activation: str) -> dict:
    yt = ctx.out_types[0]
    lo, hi = activation_clamp(activation, yt.quant, yt.dtype.numpy)
    return {
        "kernel": tuple(kernel), "strides": tuple(strides), "pads": tuple(pads),
        "act_min": lo, "act_max": hi, "dtype": yt.dtype.numpy.name,
    }  # fmt: skip


def _window_prepare(ctx, *, kernel, strides, padding, pads, activation):
    _, _, p = window_shape(ctx.in_types[0], kernel[0], kernel[1], strides, _NO_DILATION, padding, pads)
    return _pool_prepare(ctx, kernel, strides, p, activation)


avg_pool2d.prepare(_window_prepare)
max_pool2d.prepare(_window_prepare)


@global_avg_pool.prepare
def _gap_prepare(ctx):
    h, w = (static_dim(d, what) for d, what in zip(ctx.in_types[0].shape[1:3], ("input height", "input width")))
    return _pool_prepare(ctx, (h, w), (h, w), (0, 0, 0, 0), "none")


def _whole_image(p: Prepared, x) -> bool:
    """One window covers the unpadded image (global pooling): reduce over H and W at once, not tap by tap."""
    return tuple(p.kernel) == (x.shape[1], x.shape[2]) and not any(p.pads)


def _window_taps(x, kernel: tuple, strides: tuple, pads: tuple, fill: int) -> list:
    """For each kernel tap (row-major), the padded input pixels it meets at every output position."""
    xp = fp.namespace(x)
    pt, pb, pl, pr = pads
    if any(pads):
        x = xp.pad(x, ((0, 0), (pt, pb), (pl, pr), (0, 0)), constant_values=fill)
    (kh, kw), (sh, sw) = kernel, strides
    oh, ow = (x.shape[1] - kh) // sh + 1, (x.shape[2] - kw) // sw + 1
    rows = [slice(i, i + (oh - 1) * sh + 1, sh) for i in range(kh)]
    cols = [slice(j, j + (ow - 1) * sw + 1, sw) for j in range(kw)]
    return [x[:, r, c, :] for r in rows for c in cols]


def window_counts(h: int, w: int, kernel: tuple, strides: tuple, pads: tuple) -> np.ndarray:
    """The number of real (unpadded) elements under each window of an ``h`` x ``w`` image, (OH, OW):
    what the average pool divides by (a constant of the shapes; every target's divisor)."""
    ones = np.ones((1, h, w, 1), dtype=np.int64)
    return sum(_window_taps(ones, kernel, strides, pads, 0))[0, :, :, 0]


def _avg_divide(acc, count: np.ndarray, p: Prepared):
    """The average pool's epilogue: window sums over counts (OH, OW) as C's truncating division of sum +- count/2."""
    xp = fp.namespace(acc)
    cnt = count[None, :, :, None]
    half = cnt // 2
    num = xp.where(acc > 0, acc + half, acc - half)
    q = xp.where(num >= 0, num // cnt, -((-num) // cnt))
    return clamp_cast(q, p.act_min, p.act_max, p.dtype)


def _avg_eval(p, x, **attrs):
    xi = x.astype(fp.namespace(x).int64)
    if _whole_image(p, x):
        return _avg_divide(xi.sum(axis=(1, 2), keepdims=True), np.full((1, 1), x.shape[1] * x.shape[2]), p)
    acc = sum(_window_taps(xi, p.kernel, p.strides, p.pads, 0))  # padded taps hold 0
    return _avg_divide(acc, window_counts(x.shape[1], x.shape[2], p.kernel, p.strides, p.pads), p)


@max_pool2d.eval
def _max_eval(p, x, **attrs):
    xp = fp.namespace(x)
    xi = x.astype(xp.int64)
    if _whole_image(p, x):
        y = xi.max(axis=(1, 2), keepdims=True)
    else:
        below = storage_range(x.dtype)[0] - 1  # padding never wins
        taps = _window_taps(xi, p.kernel, p.strides, p.pads, below)
        y = taps[0]
        for t in taps[1:]:
            y = xp.maximum(y, t)
    return clamp_cast(y, p.act_min, p.act_max, p.dtype)


avg_pool2d.eval(_avg_eval)
global_avg_pool.eval(_avg_eval)


# l2_pool2d --------------------------------------------------------------------------
# TFLite's L2_POOL_2D, float only as in TFLite Micro: per window the square root of the mean
# square of its real (unpadded) elements. The reference sums the squares tap by tap in the
# kernel's order (rows, then columns) in the input's float type, then divides by the count and
# takes the square root, as TFLite Micro's reference kernel does; padded taps add 0, which is exact.
l2_pool2d = defop(
    "l2_pool2d",
    family="pool",
    inputs=("x",),
    attrs=dict(_POOL_ATTRS),
    doc="L2 pooling: x [N,H,W,C] -> [N,OH,OW,C]; sqrt of the mean square of each window's non-padding elements.",
)


@l2_pool2d.infer
def _l2_infer(x, *, kernel, strides, padding, pads, activation):
    if not x.dtype.is_float or x.quant is not None:
        fail(f"l2_pool2d needs a float input (TFLite Micro has no integer kernel), got {x.dtype}")
    return _pool_infer(x, "l2_pool2d", kernel, strides, padding, pads)


@l2_pool2d.reference
def _l2_ref(x, *, kernel, strides, padding, pads, activation):
    xp = fp.namespace(x)
    p = _resolved_pads(x, kernel, strides, padding, pads)
    ct = compute_dtype(x.dtype)
    taps = _window_taps(x.astype(ct), kernel, strides, p, 0)
    total = taps[0] * taps[0]
    for t in taps[1:]:
        total = total + t * t
    count = window_counts(x.shape[1], x.shape[2], kernel, strides, p).astype(ct)[None, :, :, None]
    return finish(apply_activation(xp.sqrt(total / count), activation), from_numpy(np.dtype(x.dtype)))


l2_pool2d.sample(_pool_sample)
batch_into_leading(l2_pool2d)


# y = sqrt(mean(x**2)) per window: dy = mean(x * dx) / y; the cotangent goes back as x times the
# average pool's cotangent of ct / y (where y is 0 the derivative is undefined, as sqrt's at 0)
@l2_pool2d.jvp
def _l2_jvp(e, primals, outputs, tangents, **attrs):
    t = e.avg_pool2d(e.mul(primals[0], tangents[0]), **{**attrs, "activation": "none"})
    return [e.activation_grad(e.div(t, outputs[0]), outputs[0], attrs["activation"])]


@l2_pool2d.vjp
def _l2_vjp(e, primals, outputs, cotangents, **attrs):
    ct = e.div(e.activation_grad(cotangents[0], outputs[0], attrs["activation"]), outputs[0])
    (back,) = _avg_vjp(e, primals, outputs, [ct], **{**attrs, "activation": "none"})
    return [e.mul(primals[0], back)]
