"""Layout ops for the jax target: they move elements, so float and integer data share one rule.

Quantized concat of inputs on other parameters than the output's and
quantized pad (whose fill is a real value) follow the numpy kernels.
"""

from __future__ import annotations

import numpy as np

from rlx_edge.quant import fixedpoint as fp
from rlx_edge.quant import intkernels
from rlx_edge.targets.jax import fixedpoint as jfp
from rlx_edge.targets.jax._lazy import jnp
from rlx_edge.targets.jax._table import RULES, LowerCtx
from rlx_edge.targets.jax._util import clamp_cast, storage_range
from rlx_edge.targets.jax.rules_reduce import f32_mul


@RULES.rule("reshape")
def _reshape(ctx: LowerCtx):
    # per sample (vmapped), a literal batch of 1 in the target shape is exactly what the graph says
    shape = ctx.attrs["shape"]
    return lambda x: x.reshape(shape)


@RULES.rule("transpose")
def _transpose(ctx: LowerCtx):
    perm = ctx.attrs["perm"]
    return lambda x: jnp.transpose(x, perm)


@RULES.rule("squeeze")
def _squeeze(ctx: LowerCtx):
    axes = ctx.attrs["axes"]
    return lambda x: jnp.squeeze(x, axis=tuple(a % x.ndim for a in axes))


@RULES.rule("unsqueeze")
def _unsqueeze(ctx: LowerCtx):
    axes = ctx.attrs["axes"]
    return lambda x: jnp.expand_dims(x, axis=tuple(a % (x.ndim + len(axes)) for a in axes))


@RULES.rule("split")
def _split(ctx: LowerCtx):
    axis, sizes = ctx.attrs["axis"], ctx.attrs["sizes"]
    cuts = [int(c) for c in np.cumsum(sizes)[:-1]]
    return lambda x: tuple(jnp.split(x, cuts, axis=axis))


@RULES.rule("slice")
def _slice(ctx: LowerCtx):
    begin, end, strides = ctx.attrs["begin"], ctx.attrs["end"], ctx.attrs["strides"]

    def slice_(x):
        st = strides if strides is not None else (1,) * x.ndim
        # static python slices: jax resolves and clamps them exactly as numpy does
        return x[tuple(slice(b, e, s) for b, e, s in zip(begin, end, st))]

    return slice_


@RULES.rule("pad")
def _pad(ctx: LowerCtx):
    pads, value = ctx.attrs["pads"], ctx.attrs["value"]
    xt = ctx.in_types[0]
    if ctx.quantized:
        # the fill is a real value: 0.0 pads with the zero point, as TFLite's PAD does
        q = ctx.out_types[0].quant
        fill = int(q.zero_point[0]) + int(fp.round_half_away(np.float32(value) / np.float32(q.scale[0])))
        lo, hi = storage_range(xt.dtype.numpy)
        fill = min(max(fill, lo), hi)
    else:
        fill = value if xt.dtype.is_float else int(value)

    def pad(x):
        if x.ndim == 0:
            return x
        pairs = [(pads[2 * i], pads[2 * i + 1]) for i in range(x.ndim)]
        return jnp.pad(x, pairs, mode="constant", constant_values=jnp.asarray(fill, x.dtype))

    return pad


@RULES.rule("concat")
def _concat(ctx: LowerCtx):
    axis = ctx.attrs["axis"]
    if not ctx.quantized:
        return lambda *xs: jnp.concatenate(xs, axis=axis)
    yt = ctx.out_types[0]
    out_dt = yt.dtype.numpy
    s_y, zp_y = intkernels.scalar_params(yt.quant, "concat output")
    lo, hi = storage_range(out_dt)
    f32 = np.float32
    plans: list[tuple[np.float32, np.float32] | None] = []
    for t in ctx.in_types:
        s, zp = intkernels.scalar_params(t.quant, "concat input")
        if f32(s) == f32(s_y) and zp == zp_y:
            plans.append(None)
        else:  # TFLite's ConcatenationWithScaling, every step in float32
            scale = f32(s) * (f32(1.0) / f32(s_y))
            plans.append((scale, f32(-zp) * scale))

    def concat(*xs):
        parts = []
        for x, plan in zip(xs, plans):
            if plan is None:
                parts.append(x.astype(out_dt))
                continue
            scale, bias = plan
            r = jfp.round_half_away(f32_mul(x.astype(jnp.float32), scale) + bias).astype(jnp.int64) + zp_y
            parts.append(clamp_cast(r, lo, hi, out_dt))
        return jnp.concatenate(parts, axis=axis)

    return concat
