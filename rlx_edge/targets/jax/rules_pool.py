"""avg_pool2d, max_pool2d and global_avg_pool for the jax target.

Float window sums and maxima are ``lax.reduce_window``; the number of real
(unpadded) elements under each window is a numpy constant computed at
lowering, as padding never counts. Quantized pools run the op's own integer
eval (the reference's code, traced in jax.numpy) on the node's prepared
parameters.
"""

from __future__ import annotations

import numpy as np

from rlx_edge.ir.ops import apply_activation, compute_dtype, finish, get_op, window_counts, window_shape
from rlx_edge.ir.types import TensorType
from rlx_edge.targets.jax._lazy import jnp, lax
from rlx_edge.targets.jax._table import RULES, LowerCtx

_NO_DILATION = (1, 1)


def _window(ctx: LowerCtx, kernel: tuple, strides: tuple, padding: str, pads: tuple):
    """Resolved pads, reduce_window arguments and the per-window element counts (OH, OW)."""
    xt: TensorType = ctx.in_types[0]
    kh, kw = kernel
    _, _, p = window_shape(xt, kh, kw, strides, _NO_DILATION, padding, pads)
    count = window_counts(int(xt.shape[1]), int(xt.shape[2]), kernel, strides, p)
    dims = (1, kh, kw, 1)
    wstrides = (1, strides[0], strides[1], 1)
    wpads = ((0, 0), (p[0], p[1]), (p[2], p[3]), (0, 0))
    return dims, wstrides, wpads, count


def _avg_float(ctx: LowerCtx, kernel: tuple, strides: tuple, padding: str, pads: tuple, act: str):
    dims, wstrides, wpads, count = _window(ctx, kernel, strides, padding, pads)
    xt = ctx.in_types[0]

    def avg_float(x):
        ct = compute_dtype(x.dtype)
        # a numpy init stays concrete under jit, so jax differentiates the window sum (reduce_window_sum)
        total = lax.reduce_window(x.astype(ct), np.asarray(0, ct), lax.add, dims, wstrides, wpads)
        y = total / jnp.asarray(count[None, :, :, None], ct)
        return finish(apply_activation(y, act), xt.dtype)

    return avg_float


@RULES.rule("avg_pool2d")
def _avg_pool2d(ctx: LowerCtx):
    if ctx.quantized:
        return ctx.shared_eval()
    a = ctx.attrs
    return _avg_float(ctx, a["kernel"], a["strides"], a["padding"], a["pads"], a["activation"])


@RULES.rule("global_avg_pool")
def _global_avg_pool(ctx: LowerCtx):
    if ctx.quantized:
        return ctx.shared_eval()
    xt = ctx.in_types[0]

    def gap_float(x):
        return finish(x.astype(compute_dtype(x.dtype)).mean(axis=(1, 2), keepdims=True), xt.dtype)

    return gap_float


@RULES.rule("max_pool2d")
def _max_pool2d(ctx: LowerCtx):
    if ctx.quantized:
        return ctx.shared_eval()
    a = ctx.attrs
    dims, wstrides, wpads, _ = _window(ctx, a["kernel"], a["strides"], a["padding"], a["pads"])
    x_dt = ctx.in_types[0].dtype.numpy
    low = -np.inf if x_dt.kind == "f" else np.iinfo(x_dt).min

    def max_float(x):
        # the init value pads, so padding can never be the maximum; max is exact in any precision
        y = lax.reduce_window(x, np.asarray(low, x.dtype), lax.max, dims, wstrides, wpads)
        return apply_activation(y, a["activation"]).astype(x.dtype)

    return max_float


@RULES.rule("l2_pool2d")
def _l2_pool2d(ctx: LowerCtx):
    # float only (the op has no integer semantics); its reference is written against the array
    # namespace and sums the squares tap by tap, so traced it is the reference's arithmetic
    opdef, attrs = get_op("l2_pool2d"), ctx.attrs
    return lambda x: opdef.run_reference([x], attrs)[0]
