"""Reductions and normalizations for the jax target: mean, sum, cumsum, reduce_all, argmax/argmin, reduce_max/min,
softmax, norms.

Quantized softmax (int8 and int16), log_softmax and l2_normalize (int8), layer_norm and rms_norm
(int8 and int16), mean and sum
run the op's own integer eval (the reference's code, traced in jax.numpy) on the node's
prepared parameters.
"""

from __future__ import annotations

from rlx_edge.ir.ops import compute_dtype, finish, norm_axes
from rlx_edge.ir.ops.norm import L2_NORMALIZE_EPSILON
from rlx_edge.ir.shape import along_axis
from rlx_edge.targets.jax._lazy import jnp
from rlx_edge.targets.jax._table import RULES, LowerCtx


# mean / sum ------------------------------------------------------------------------------------
@RULES.rule("mean")
def _mean(ctx: LowerCtx):
    if ctx.quantized:
        return ctx.shared_eval()
    xt = ctx.in_types[0]
    ax = norm_axes(ctx.attrs["axes"], xt.rank, "mean")
    keep = ctx.attrs["keepdims"]

    def mean_float(x):
        if xt.dtype.is_int:  # unreachable for valid graphs (infer wants float or quantized)
            raise ctx.unsupported("mean of plain integers")
        return finish(x.astype(compute_dtype(x.dtype)).mean(axis=ax, keepdims=keep), xt.dtype)

    return mean_float


@RULES.rule("sum")
def _sum(ctx: LowerCtx):
    xt = ctx.in_types[0]
    if ctx.quantized:
        return ctx.shared_eval()
    ax = norm_axes(ctx.attrs["axes"], xt.rank, "sum")
    keep = ctx.attrs["keepdims"]

    def sum_(x):
        if xt.dtype.is_int:  # int64 accumulation, wrapped to the input type
            return x.astype(jnp.int64).sum(axis=ax, keepdims=keep).astype(x.dtype)
        return finish(x.astype(compute_dtype(x.dtype)).sum(axis=ax, keepdims=keep), xt.dtype)

    return sum_


@RULES.rule("cumsum")
def _cumsum(ctx: LowerCtx):
    if ctx.quantized:
        return ctx.shared_eval()
    xt = ctx.in_types[0]
    a = ctx.attrs
    axis = a["axis"] % xt.rank

    def cumsum(x):
        v = x.astype(jnp.int64) if xt.dtype.is_int else x.astype(compute_dtype(x.dtype))
        if a["reverse"]:
            v = jnp.flip(v, axis)
        c = jnp.cumsum(v, axis=axis, dtype=v.dtype)
        if a["exclusive"]:
            c = jnp.moveaxis(c, axis, 0)
            c = jnp.moveaxis(jnp.concatenate([jnp.zeros_like(c[:1]), c[:-1]], axis=0), 0, axis)
        if a["reverse"]:
            c = jnp.flip(c, axis)
        return c.astype(x.dtype) if xt.dtype.is_int else finish(c, xt.dtype)

    return cumsum


@RULES.rule("reduce_all")
def _reduce_all(ctx: LowerCtx):
    ax = norm_axes(ctx.attrs["axes"], ctx.in_types[0].rank, "reduce_all")
    keep = ctx.attrs["keepdims"]
    return lambda x: jnp.all(x, axis=ax, keepdims=keep)


@RULES.rule("argmax", "argmin")
def _argmax(ctx: LowerCtx):
    a = ctx.attrs
    out_dt = ctx.out_types[0].dtype.numpy
    search = jnp.argmax if ctx.node.op == "argmax" else jnp.argmin

    def argmax(x):
        # first index wins ties, as numpy; stored quantized values order like their real values
        return search(x, axis=a["axis"], keepdims=a["keepdims"]).astype(out_dt)

    return argmax


@RULES.rule("reduce_max", "reduce_min")
def _reduce_extreme(ctx: LowerCtx):
    ax = norm_axes(ctx.attrs["axes"], ctx.in_types[0].rank, ctx.node.op)
    keep = ctx.attrs["keepdims"]
    pick = jnp.max if ctx.node.op == "reduce_max" else jnp.min

    def reduce_extreme(x):
        # picks a value, float or stored quantized (the output keeps the input's parameters)
        return pick(x, axis=ax, keepdims=keep)

    return reduce_extreme


# softmax ---------------------------------------------------------------------------------------
@RULES.rule("softmax")
def _softmax(ctx: LowerCtx):
    if ctx.quantized:
        return ctx.shared_eval()
    xt = ctx.in_types[0]
    axis, beta = ctx.attrs["axis"], ctx.attrs["beta"]

    def softmax_float(x, mask=None):
        z = beta * x.astype(compute_dtype(x.dtype))
        if mask is None:
            if z.size:
                z = z - z.max(axis=axis, keepdims=True)
            e = jnp.exp(z)
            return finish(e / e.sum(axis=axis, keepdims=True), xt.dtype)
        # the reference's masked form: max and sum over kept positions, masked ones and empty rows 0
        keep = jnp.broadcast_to(mask, x.shape)
        top = jnp.where(keep, z, -jnp.inf).max(axis=axis, keepdims=True, initial=-jnp.inf)
        top = jnp.where(jnp.isfinite(top), top, 0)
        e = jnp.where(keep, jnp.exp(jnp.where(keep, z - top, 0)), 0)
        total = e.sum(axis=axis, keepdims=True)
        return finish(e / jnp.where(total > 0, total, 1), xt.dtype)

    return softmax_float


@RULES.rule("log_softmax")
def _log_softmax(ctx: LowerCtx):
    if ctx.quantized:
        return ctx.shared_eval()
    xt = ctx.in_types[0]
    axis = ctx.attrs["axis"]

    def log_softmax(x):
        z = x.astype(compute_dtype(x.dtype))
        if z.size:
            z = z - z.max(axis=axis, keepdims=True)
        return finish(z - jnp.log(jnp.exp(z).sum(axis=axis, keepdims=True)), xt.dtype)

    return log_softmax


@RULES.rule("l2_normalize")
def _l2_normalize(ctx: LowerCtx):
    if ctx.quantized:
        return ctx.shared_eval()
    xt = ctx.in_types[0]
    axis = ctx.attrs["axis"]

    def l2_normalize(x):
        xc = x.astype(compute_dtype(x.dtype))
        norm = jnp.sqrt(jnp.square(xc).sum(axis=axis, keepdims=True))
        return finish(xc / jnp.maximum(norm, L2_NORMALIZE_EPSILON), xt.dtype)

    return l2_normalize


# normalization (batch_norm float only) ----------------------------------------------------------
def _float_only(ctx: LowerCtx) -> None:
    if ctx.quantized:
        raise ctx.unsupported(f"quantized {ctx.node.op} (run it in float between dequantize and quantize)")


@RULES.rule("batch_norm")
def _batch_norm(ctx: LowerCtx):
    _float_only(ctx)
    dt = ctx.out_types[0].dtype
    axis, eps = ctx.attrs["axis"], ctx.attrs["epsilon"]

    def batch_norm(x, scale, bias, mean, var):
        ct = compute_dtype(dt.numpy)

        def p(v):  # parameters broadcast along the channel axis only
            return along_axis(v.astype(ct), axis, x.ndim)

        inv = 1 / jnp.sqrt(p(var) + jnp.asarray(eps, ct))
        return finish((x.astype(ct) - p(mean)) * inv * p(scale) + p(bias), dt)

    return batch_norm


@RULES.rule("layer_norm")
def _layer_norm(ctx: LowerCtx):
    if ctx.quantized:  # our integer semantics (norm.py), traced
        return ctx.shared_eval()
    dt = ctx.out_types[0].dtype
    axis, eps = ctx.attrs["axis"], ctx.attrs["epsilon"]

    def layer_norm(x, gamma, beta=None):
        ct = compute_dtype(dt.numpy)
        dims = tuple(range(axis % x.ndim, x.ndim))
        xc = x.astype(ct)
        mean = xc.mean(axis=dims, keepdims=True)
        var = jnp.square(xc - mean).mean(axis=dims, keepdims=True)
        y = (xc - mean) / jnp.sqrt(var + jnp.asarray(eps, ct)) * gamma.astype(ct)
        if beta is not None:
            y = y + beta.astype(ct)
        return finish(y, dt)

    return layer_norm


@RULES.rule("rms_norm")
def _rms_norm(ctx: LowerCtx):
    if ctx.quantized:  # our integer semantics (norm.py), traced
        return ctx.shared_eval()
    dt = ctx.out_types[0].dtype
    axis, eps = ctx.attrs["axis"], ctx.attrs["epsilon"]

    def rms_norm(x, gamma):
        ct = compute_dtype(dt.numpy)
        dims = tuple(range(axis % x.ndim, x.ndim))
        xc = x.astype(ct)
        ms = jnp.square(xc).mean(axis=dims, keepdims=True)
        return finish(xc / jnp.sqrt(ms + jnp.asarray(eps, ct)) * gamma.astype(ct), dt)

    return rms_norm
