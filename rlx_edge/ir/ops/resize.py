"""Image resizing: TFLite's RESIZE_NEAREST_NEIGHBOR and RESIZE_BILINEAR.

Nearest-neighbour resizing picks input pixels, so, like the ops of
``movement.py``, its integer semantics are the float reference on stored
integers (TFLite Micro's int8 and int16 kernels copy the values) and its
quantized output keeps the input's parameters.

Which input pixel an output pixel takes is TFLite Micro's
``GetNearestNeighbor``, computed in float32 as its kernel does, so a scale
that float32 rounds lands on the same pixel. Bilinear resizing follows TFLite
Micro's two kernels: the float one in float32 (``ResizeBilinear``) and the
int8 one (``ResizeBilinearInteger``: positions in 1/1024 of a pixel, the
four products summed in int64 and divided by 2**20, rounding half away from
zero), which interpolates stored values, so its output keeps the input's
parameters too.
"""

from __future__ import annotations

import numpy as np

from rlx_edge.errors import OpError
from rlx_edge.ir import fixedpoint as fp
from rlx_edge.ir.ops._common import fail
from rlx_edge.ir.ops._registry import Attr, defop
from rlx_edge.ir.ops.layout import _channel_axis, _lost_channels
from rlx_edge.ir.ops.movement import _draw_x, _single, _static
from rlx_edge.ir.shape import format_shape
from rlx_edge.ir.types import TensorType

_ALIGN = Attr("bool", False, doc="map the corner pixels of input and output onto each other")
_HALF = Attr("bool", False, doc="sample at pixel centres (x + 0.5), as TensorFlow 2 does")

resize_nearest_neighbor = defop(
    "resize_nearest_neighbor",
    family="layout",
    inputs=("x",),
    passthrough_quant=True,
    # the gradient adds each output pixel into the input pixel it came from: a scatter-add,
    # which the IR does not have (as for gather)
    differentiable=False,
    attrs={
        "size": Attr("ints", doc="(height, width) of the output"),
        "align_corners": _ALIGN,
        "half_pixel_centers": _HALF,
    },
    doc="Resize NHWC images to (height, width), each output pixel a copy of the nearest input pixel"
    " (TFLite RESIZE_NEAREST_NEIGHBOR).",
)


def _resize_type(op: str, x: TensorType, size, align_corners: bool, half_pixel_centers: bool) -> TensorType:
    if x.rank != 4:
        fail(f"{op} needs an NHWC input of rank 4, got {format_shape(x.shape)}")
    n, _, _, c = _static(x, op)
    if len(size) != 2 or min(size) < 1:
        fail(f"{op}: size {list(size)} must be two positive numbers (height, width)")
    if align_corners and half_pixel_centers:
        fail(f"{op}: align_corners and half_pixel_centers cannot both be set (TensorFlow refuses it)")
    ch = _channel_axis(x)
    if ch is not None and ch != 3:
        _lost_channels(op, x, "is resized")
    return TensorType((n, int(size[0]), int(size[1]), c), x.dtype, x.quant)


def nearest_indices(in_size: int, out_size: int, align_corners: bool, half_pixel_centers: bool) -> np.ndarray:
    """The input index each output index takes along one axis (TFLite Micro's GetNearestNeighbor)."""
    if align_corners and out_size > 1:
        scale = np.float32(in_size - 1) / np.float32(out_size - 1)
    else:
        scale = np.float32(in_size) / np.float32(out_size)
    offset = np.float32(0.5 if half_pixel_centers else 0.0)
    v = (np.arange(out_size, dtype=np.float32) + offset) * scale  # float32 throughout, as the kernel
    picked = fp.round_half_away(v) if align_corners else np.floor(v)
    idx = np.minimum(picked.astype(np.int64), in_size - 1)
    return np.maximum(idx, 0) if half_pixel_centers else idx


@resize_nearest_neighbor.infer
def _nearest_infer(x, *, size, align_corners, half_pixel_centers):
    return _resize_type("resize_nearest_neighbor", x, size, align_corners, half_pixel_centers)


@resize_nearest_neighbor.reference
def _nearest_ref(x, *, size, align_corners, half_pixel_centers):
    xp = fp.namespace(x)
    rows = nearest_indices(x.shape[1], size[0], align_corners, half_pixel_centers)
    cols = nearest_indices(x.shape[2], size[1], align_corners, half_pixel_centers)
    return xp.take(xp.take(x, xp.asarray(rows), axis=1), xp.asarray(cols), axis=2)


@resize_nearest_neighbor.eval
def _nearest_eval(p, x, *, size, align_corners, half_pixel_centers):
    return _nearest_ref(x, size=size, align_corners=align_corners, half_pixel_centers=half_pixel_centers)


def _flags(rng: np.random.Generator) -> dict:
    mode = int(rng.integers(3))  # neither, align_corners, half_pixel_centers (never both)
    return {"align_corners": mode == 1, "half_pixel_centers": mode == 2}


@resize_nearest_neighbor.sample
def _nearest_sample(rng):
    shape = (int(rng.integers(1, 3)), int(rng.integers(1, 6)), int(rng.integers(1, 6)), int(rng.integers(1, 4)))
    # up, down, the same size and size 1, where align_corners falls back to the plain scale
    size = tuple(int(rng.choice([1, max(1, d // 2), d, 2 * d, 3 * d + 1])) for d in shape[1:3])
    x, q = _draw_x(rng, shape)
    return _single(x, q, {"size": size, **_flags(rng)})


resize_bilinear = defop(
    "resize_bilinear",
    family="layout",
    inputs=("x",),
    passthrough_quant=True,
    int_dtypes=("i8",),  # TFLite Micro's kernel takes float32 and int8
    # the gradient scatters each output pixel's weights back onto four input pixels, which the IR
    # cannot say without a scatter-add (as for gather)
    differentiable=False,
    attrs={
        "size": Attr("ints", doc="(height, width) of the output"),
        "align_corners": _ALIGN,
        "half_pixel_centers": _HALF,
    },
    doc="Resize NHWC images to (height, width), each output pixel interpolated from the four nearest input"
    " pixels (TFLite RESIZE_BILINEAR).",
)


@resize_bilinear.infer
def _bilinear_infer(x, *, size, align_corners, half_pixel_centers):
    if not x.dtype.is_float and x.quant is None:
        fail(f"resize_bilinear: input of type {x.dtype} must be float or quantized int8")
    return _resize_type("resize_bilinear", x, size, align_corners, half_pixel_centers)


def _float_positions(in_size: int, out_size: int, align_corners: bool, half_pixel_centers: bool):
    """Per output index: the input position (float32), its lower and upper pixel (TFLite Micro's float kernel)."""
    if align_corners and out_size > 1:
        scale = np.float32(in_size - 1) / np.float32(out_size - 1)
    else:
        scale = np.float32(in_size) / np.float32(out_size)
    i = np.arange(out_size, dtype=np.float32)
    half = np.float32(0.5)
    pos = (i + half) * scale - half if half_pixel_centers else i * scale
    lo = np.maximum(np.floor(pos).astype(np.int64), 0)
    hi = np.minimum(np.ceil(pos).astype(np.int64), in_size - 1)
    return pos, lo, hi


@resize_bilinear.reference
def _bilinear_ref(x, *, size, align_corners, half_pixel_centers):
    xp = fp.namespace(x)
    py, y0, y1 = _float_positions(x.shape[1], size[0], align_corners, half_pixel_centers)
    px, x0, x1 = _float_positions(x.shape[2], size[1], align_corners, half_pixel_centers)
    one = np.float32(1)
    dy = (py - y0.astype(np.float32)).reshape(1, -1, 1, 1)
    dx = (px - x0.astype(np.float32)).reshape(1, 1, -1, 1)
    wy0, wy1 = xp.asarray((one - dy).astype(x.dtype)), xp.asarray(dy.astype(x.dtype))
    wx0, wx1 = xp.asarray((one - dx).astype(x.dtype)), xp.asarray(dx.astype(x.dtype))
    r0, r1 = xp.take(x, xp.asarray(y0), axis=1), xp.take(x, xp.asarray(y1), axis=1)

    def at(r, cols):
        return xp.take(r, xp.asarray(cols), axis=2)

    # the kernel's order of operations: ((v * wy) * wx) summed left to right
    return at(r0, x0) * wy0 * wx0 + at(r1, x0) * wy1 * wx0 + at(r0, x1) * wy0 * wx1 + at(r1, x1) * wy1 * wx1


def _c_div(a: np.ndarray, b: int) -> np.ndarray:
    """C's integer division (toward zero) of int64 ``a`` by a positive ``b``."""
    return np.where(a >= 0, a // b, -(-a // b))


def _integer_positions(in_size: int, out_size: int, align_corners: bool, half_pixel_centers: bool):
    """Per output index: the lower and upper input pixel and the position past the lower one in 1/1024
    pixel (TFLite Micro's ComputeInterpolationValuesInteger; C's division truncates)."""
    if align_corners and out_size > 1:
        scale = ((1 << 10) * (in_size - 1) + (out_size - 1) // 2) // (out_size - 1)
    else:
        scale = ((1 << 10) * in_size + out_size // 2) // out_size
    i = np.arange(out_size, dtype=np.int64)
    pos = i * scale + scale // 2 - (1 << 9) if half_pixel_centers else i * scale
    lo = np.maximum(_c_div(pos, 1 << 10), 0)
    hi = np.minimum(_c_div(pos + (1 << 10) - 1, 1 << 10), in_size - 1)
    return lo, hi, pos - (lo << 10)


@resize_bilinear.prepare
def _bilinear_prepare(ctx, *, size, align_corners, half_pixel_centers) -> dict:
    """The rows and columns each output pixel reads and their weights in 1/1024 (shapes only)."""
    xt, yt = ctx.in_types[0], ctx.out_types[0]
    if yt.quant != xt.quant:
        raise OpError("resize_bilinear: a quantized output must keep its input's parameters (TFLite's kernel"
                      " interpolates stored values); quantize them alike")  # fmt: skip
    p = {}
    for key, n, m in (("y", xt.shape[1], size[0]), ("x", xt.shape[2], size[1])):
        lo, hi, frac = _integer_positions(int(n), int(m), align_corners, half_pixel_centers)
        if lo.max() > n - 1:  # TFLite Micro would read past the image
            raise OpError(f"resize_bilinear: resizing {n} to {m} reads past the input in TFLite Micro's kernel")
        p.update({f"{key}0": lo.astype(np.int32), f"{key}1": hi.astype(np.int32), f"d{key}": frac.astype(np.int32)})
    return p


@resize_bilinear.eval
def _bilinear_eval(p, x, *, size, align_corners, half_pixel_centers):
    xp = fp.namespace(x)
    dy = np.asarray(p["dy"], np.int64).reshape(1, -1, 1, 1)
    dx = np.asarray(p["dx"], np.int64).reshape(1, 1, -1, 1)
    v = xp.asarray(x).astype(xp.int64)
    r0, r1 = xp.take(v, xp.asarray(p["y0"]), axis=1), xp.take(v, xp.asarray(p["y1"]), axis=1)

    def at(r, cols):
        return xp.take(r, xp.asarray(cols), axis=2)

    full = 1 << 10
    ly, hy, lx, hx = (xp.asarray(w) for w in (full - dy, dy, full - dx, dx))
    total = at(r0, p["x0"]) * ly * lx + at(r1, p["x0"]) * hy * lx + at(r0, p["x1"]) * ly * hx
    total = total + at(r1, p["x1"]) * hy * hx
    half = xp.where(total > 0, 1 << 19, -(1 << 19))
    # C's division truncates toward zero: with the half added away from zero, a tie rounds away
    q = total + half
    out = xp.where(q >= 0, q >> 20, -((-q) >> 20))
    return out.astype(x.dtype)


@resize_bilinear.sample
def _bilinear_sample(rng):
    shape = (int(rng.integers(1, 3)), int(rng.integers(1, 6)), int(rng.integers(1, 6)), int(rng.integers(1, 4)))
    size = tuple(int(rng.choice([1, max(1, d // 2), d, 2 * d, 3 * d + 1])) for d in shape[1:3])
    return [rng.standard_normal(shape).astype(np.float32)], {"size": size, **_flags(rng)}
