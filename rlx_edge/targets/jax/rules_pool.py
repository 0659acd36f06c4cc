"""avg_pool2d, max_pool2d and global_avg_pool for the jax target.

Window sums and maxima are ``lax.reduce_window``; the number of real
(unpadded) elements under each window is a numpy constant computed at
lowering, as padding never counts. Integer sums are exact in any order, so
the quantized average is the reference's integer division bit for bit.
"""

from __future__ import annotations

import numpy as np

from rlx_edge.ir.ops._common import window_shape
from rlx_edge.ir.types import TensorType
from rlx_edge.targets.jax._lazy import jnp, lax
from rlx_edge.targets.jax._table import RULES, LowerCtx
from rlx_edge.targets.jax._util import act_range, activation, clamp_cast, compute_dtype, finish

_NO_DILATION = (1, 1)


def _window(ctx: LowerCtx, kernel: tuple, strides: tuple, padding: str, pads: tuple):
    """Resolved pads, reduce_window arguments and the per-window element counts (OH, OW)."""
    xt: TensorType = ctx.in_types[0]
    kh, kw = kernel
    _, _, p = window_shape(xt, kh, kw, strides, _NO_DILATION, padding, pads)
    h, w = int(xt.shape[1]), int(xt.shape[2])
    ones = np.pad(np.ones((h, w), np.int64), ((p[0], p[1]), (p[2], p[3])))
    oh = (h + p[0] + p[1] - kh) // strides[0] + 1
    ow = (w + p[2] + p[3] - kw) // strides[1] + 1
    count = np.array(
        [
            [ones[i * strides[0] : i * strides[0] + kh, j * strides[1] : j * strides[1] + kw].sum() for j in range(ow)]
            for i in range(oh)
        ],
        dtype=np.int64,
    )
    dims = (1, kh, kw, 1)
    wstrides = (1, strides[0], strides[1], 1)
    wpads = ((0, 0), (p[0], p[1]), (p[2], p[3]), (0, 0))
    return dims, wstrides, wpads, count


def _avg(ctx: LowerCtx, kernel: tuple, strides: tuple, padding: str, pads: tuple, act: str):
    dims, wstrides, wpads, count = _window(ctx, kernel, strides, padding, pads)
    xt, yt = ctx.in_types[0], ctx.out_types[0]
    if not ctx.quantized:

        def avg_float(x):
            ct = compute_dtype(x.dtype)
            total = lax.reduce_window(x.astype(ct), jnp.asarray(0, ct), lax.add, dims, wstrides, wpads)
            y = total / jnp.asarray(count[None, :, :, None], ct)
            return finish(activation(y, act), xt.dtype)

        return avg_float

    out_dt = yt.dtype.numpy
    lo, hi = act_range(act, yt.quant, out_dt)
    cnt = count[None, :, :, None]
    half = cnt // 2

    def avg_int(x):
        # intkernels.avg_pool2d: integer sum, +-count/2, C's truncating division
        acc = lax.reduce_window(x.astype(jnp.int32), jnp.int32(0), lax.add, dims, wstrides, wpads)
        num = jnp.where(acc > 0, acc + half, acc - half)
        q = jnp.where(num >= 0, num // cnt, -((-num) // cnt))
        return clamp_cast(q, lo, hi, out_dt)

    return avg_int


@RULES.rule("avg_pool2d")
def _avg_pool2d(ctx: LowerCtx):
    a = ctx.attrs
    return _avg(ctx, a["kernel"], a["strides"], a["padding"], a["pads"], a["activation"])


@RULES.rule("global_avg_pool")
def _global_avg_pool(ctx: LowerCtx):
    xt = ctx.in_types[0]
    if ctx.quantized:
        kernel = (int(xt.shape[1]), int(xt.shape[2]))
        return _avg(ctx, kernel, kernel, "valid", (0, 0, 0, 0), "none")

    def gap_float(x):
        return finish(x.astype(compute_dtype(x.dtype)).mean(axis=(1, 2), keepdims=True), xt.dtype)

    return gap_float


@RULES.rule("max_pool2d")
def _max_pool2d(ctx: LowerCtx):
    a = ctx.attrs
    dims, wstrides, wpads, _ = _window(ctx, a["kernel"], a["strides"], a["padding"], a["pads"])
    xt, yt = ctx.in_types[0], ctx.out_types[0]
    if not ctx.quantized:
        x_dt = xt.dtype.numpy
        low = -np.inf if x_dt.kind == "f" else np.iinfo(x_dt).min

        def max_float(x):
            # the init value pads, so padding can never be the maximum; max is exact in any precision
            y = lax.reduce_window(x, jnp.asarray(low, x.dtype), lax.max, dims, wstrides, wpads)
            return activation(y, a["activation"]).astype(x.dtype)

        return max_float

    out_dt = yt.dtype.numpy
    lo, hi = act_range(a["activation"], yt.quant, out_dt)

    def max_int(x):
        y = lax.reduce_window(x.astype(jnp.int32), jnp.int32(np.iinfo(np.int32).min), lax.max, dims, wstrides, wpads)
        return clamp_cast(y, lo, hi, out_dt)

    return max_int
