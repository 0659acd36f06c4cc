"""Layout ops for the jax target: they move elements, so float and integer data share one rule.

Quantized concat (whose inputs may be requantized) and quantized pad (whose
fill is a real value) run the op's own integer eval on the node's prepared
parameters.
"""

from __future__ import annotations

import numpy as np

from rlx_edge.ir.ops import get_op
from rlx_edge.targets.jax._lazy import jnp
from rlx_edge.targets.jax._table import RULES, LowerCtx


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
    if ctx.quantized:
        return ctx.shared_eval()
    pads, value = ctx.attrs["pads"], ctx.attrs["value"]
    fill = value if ctx.in_types[0].dtype.is_float else int(value)

    def pad(x):
        if x.ndim == 0:
            return x
        pairs = [(pads[2 * i], pads[2 * i + 1]) for i in range(x.ndim)]
        return jnp.pad(x, pairs, mode="constant", constant_values=jnp.asarray(fill, x.dtype))

    return pad


@RULES.rule("concat")
def _concat(ctx: LowerCtx):
    if ctx.quantized:
        return ctx.shared_eval()
    axis = ctx.attrs["axis"]
    return lambda *xs: jnp.concatenate(xs, axis=axis)


@RULES.rule(
    "stack",
    "unstack",
    "mirror_pad",
    "space_to_depth",
    "depth_to_space",
    "space_to_batch_nd",
    "batch_to_space_nd",
    "broadcast_to",
    "gather",
    "gather_nd",
    "resize_nearest_neighbor",
    "resize_bilinear",
)
def _movement(ctx: LowerCtx):
    # these ops' references are written against the array namespace (ir/ops/movement.py):
    # traced, they are the very code the numpy reference runs. Quantized, an op that
    # prepares parameters (stack's rescaling, space_to_batch_nd's fill) runs its eval on
    # them; the others' eval is that same reference on stored integers.
    opdef, attrs = get_op(ctx.node.op), ctx.attrs
    if ctx.quantized and opdef.has_prepare:
        return ctx.shared_eval()
    return lambda *xs: opdef.run_reference(xs, attrs)
