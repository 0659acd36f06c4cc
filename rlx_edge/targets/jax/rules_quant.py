"""quantize, dequantize and requantize for the jax target.

quantize and dequantize are TFLite's float reference formulas (as in
``rlx_edge.ir.ops.quant``); requantize between integer tensors is
``intkernels.requantize`` (a Q31 multiplier with double rounding).
"""

from __future__ import annotations

import numpy as np

from rlx_edge.errors import OpError
from rlx_edge.ir.ops.quant import _in_quant, _out_quant
from rlx_edge.ir.types import QuantParams
from rlx_edge.quant import fixedpoint as fp
from rlx_edge.quant import intkernels
from rlx_edge.targets.jax import fixedpoint as jfp
from rlx_edge.targets.jax._lazy import jnp
from rlx_edge.targets.jax._table import RULES, LowerCtx
from rlx_edge.targets.jax._util import clamp_cast, finish, storage_range


def _params(qp: QuantParams, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Scale (float32) and zero point (int64) shaped to broadcast against ``shape`` (the traced shape)."""
    if qp.axis is None:
        return qp.scale.reshape(()), qp.zero_point.reshape(())
    axis = qp.axis % len(shape)
    if qp.scale.size != shape[axis]:
        raise OpError(f"per-channel quantization has {qp.scale.size} scales but axis {qp.axis} has size {shape[axis]}")
    bshape = [1] * len(shape)
    bshape[axis] = -1
    return qp.scale.reshape(bshape), qp.zero_point.reshape(bshape)


def round_half_away_exact(v):
    """``rlx_edge.ir.ops.quant.round_half_away``: exact, unlike ``floor(|v| + 0.5)`` just below ties."""
    t = jnp.trunc(v)
    frac = v - t
    return t + jnp.where(jnp.abs(frac) >= 0.5, jnp.sign(v), 0).astype(v.dtype)


@RULES.rule("quantize")
def _quantize(ctx: LowerCtx):
    qp = _out_quant(ctx.qctx, "quantize")
    dtype = ctx.attrs["dtype"]
    lo, hi = dtype.min, dtype.max

    def quantize(x):
        scale, zp = _params(qp, x.shape)
        v = round_half_away_exact(x.astype(jnp.float32) / scale)
        v = jnp.nan_to_num(v.astype(jnp.float64), nan=0.0)
        # clip before the integer conversion so that huge values cannot wrap
        q = jnp.clip(v, lo - 2.0**32, hi + 2.0**32).astype(jnp.int64) + zp
        return jnp.clip(q, lo, hi).astype(dtype.numpy)

    return quantize


@RULES.rule("dequantize")
def _dequantize(ctx: LowerCtx):
    qp = _in_quant(ctx.qctx, "dequantize")
    dtype = ctx.attrs["dtype"]
    # float(double(scale) * (q - zp)): the double product is exact, so one float32 multiply rounds
    # identically whenever q - zp is exact in float32 (storage of 16 bits or less); this keeps
    # float64 (missing on TPUs) out of the common case
    narrow = ctx.in_types[0].dtype.bits <= 16

    def dequantize(q):
        scale, zp = _params(qp, q.shape)
        d = q.astype(jnp.int64) - zp
        if narrow:
            y = d.astype(jnp.float32) * scale
        else:
            y = (d.astype(jnp.float64) * scale.astype(np.float64)).astype(jnp.float32)
        return finish(y, dtype)

    return dequantize


@RULES.rule("requantize")
def _requantize(ctx: LowerCtx):
    x_q = _in_quant(ctx.qctx, "requantize")
    y_q = _out_quant(ctx.qctx, "requantize")
    s_x, zp_x = intkernels.scalar_params(x_q, "requantize input")
    s_y, zp_y = intkernels.scalar_params(y_q, "requantize output")
    m, e = fp.quantize_multiplier(float(s_x) / float(s_y))
    out_dt = ctx.attrs["dtype"].numpy
    lo, hi = storage_range(out_dt)

    def requantize(x):
        y = jfp.multiply_by_quantized_multiplier(x.astype(jnp.int64) - zp_x, m, e) + zp_y
        return clamp_cast(y, lo, hi, out_dt)

    return requantize
