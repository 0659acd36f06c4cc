"""Integer-semantics helpers shared by the op families' ``prepare`` / ``eval``.

Written once here (ARCHITECTURE.md, "The Program is the contract"): the
per-tensor parameter checks, storage ranges, the fused-activation clamp,
per-channel requantization multipliers and their broadcasting, and the
accumulator epilogue. Prepare-time helpers run in numpy on float scales;
eval-time helpers take arrays of the inputs' namespace (numpy or jax.numpy).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from rlx_edge.ir import fixedpoint as fp
from rlx_edge.ir.prepared import Prepared
from rlx_edge.ir.shape import along_axis
from rlx_edge.ir.types import QuantParams


# prepare time ------------------------------------------------------------------------------
def scalar_params(q: QuantParams | None, what: str) -> tuple[float, int]:
    """The (scale, zero point) of a per-tensor quantized tensor."""
    if q is None:
        raise ValueError(f"{what} has no quantization parameters")
    if q.scale.size != 1:
        raise ValueError(f"{what} must be quantized per tensor, it has {q.scale.size} scales")
    return float(q.scale[0]), int(q.zero_point[0])


def storage_range(dtype: Any) -> tuple[int, int]:
    info = np.iinfo(np.dtype(dtype))
    return int(info.min), int(info.max)


def activation_clamp(activation: str, out_q: QuantParams, dtype: Any) -> tuple[int, int]:
    """The quantized (min, max) of a fused activation on an output of ``dtype``."""
    s, zp = scalar_params(out_q, "output")
    lo, hi = storage_range(dtype)
    return fp.activation_range(activation, s, zp, lo, hi)


def channel_multipliers(in_scale: float, w_scales: np.ndarray, out_scale: float, n: int) -> tuple[np.ndarray, ...]:
    """Per-output-channel (multiplier, shift) as TFLite's PopulateConvolutionQuantizationParams.

    effective = double(s_in) * double(s_w[c]) / double(s_out); a per-tensor
    weight scale is broadcast to every channel.
    """
    ws = np.asarray(w_scales, dtype=np.float32).reshape(-1)
    if ws.size == 1:
        ws = np.repeat(ws, n)
    if ws.size != n:
        raise ValueError(f"{ws.size} weight scales for {n} output channels")
    eff = [float(in_scale) * float(s) / float(out_scale) for s in ws]
    return fp.quantize_multiplier_array(np.array(eff, dtype=np.float64))


def channel_broadcast(q: QuantParams, rank: int) -> tuple[np.ndarray, np.ndarray]:
    """Scales (float32) and zero points (int64) shaped to broadcast against a rank-``rank`` array."""
    if q.axis is None or q.scale.size == 1:
        return q.scale.reshape(()), q.zero_point.reshape(())
    return along_axis(q.scale, q.axis, rank), along_axis(q.zero_point, q.axis, rank)


def quantize_bound(f: float, s: float, zp: int) -> int:
    """A real bound on the quantized grid (TFLite rounds half away from zero in float32)."""
    return zp + int(fp.round_half_away(np.float32(f) / np.float32(s)))


def byte_table(eval_fn: Callable[..., Any], params: dict, in_dtype: Any, **attrs: Any) -> np.ndarray | None:
    """A unary op's ``eval`` on every value of a one-byte input, indexed by bit pattern (uint8).

    Prepare stores it for kernels that look the op up instead of computing
    it; None where the input is wider than a byte.
    """
    dt = np.dtype(in_dtype)
    if dt.kind not in "iu" or dt.itemsize != 1:
        return None
    values = np.arange(256, dtype=np.uint8).view(dt)
    return np.asarray(eval_fn(Prepared(params), values, **attrs)).reshape(256)


# eval time ---------------------------------------------------------------------------------
def clamp_cast(v: Any, lo: int, hi: int, dtype: Any) -> Any:
    xp = fp.namespace(v)
    return xp.clip(v, lo, hi).astype(dtype)


def requantize_acc(acc: Any, mult: Any, shift: Any, wide: bool) -> Any:
    """Accumulators to the output scale: int32 double rounding, or TFLite's int64 form (16x8 with int64 bias)."""
    if wide:
        return fp.multiply_by_quantized_multiplier_int64(acc, mult, shift)
    return fp.multiply_by_quantized_multiplier(fp.wrap_int32(acc), mult, shift)


def finish_acc(acc: Any, mult: Any, shift: Any, wide: bool, out_zp: int, lo: int, hi: int, dtype: Any) -> Any:
    """The accumulator epilogue of conv / fully connected: requantize, add the zero point, clamp, cast."""
    return clamp_cast(requantize_acc(acc, mult, shift, wide) + out_zp, lo, hi, dtype)


__all__ = [
    "activation_clamp",
    "byte_table",
    "channel_broadcast",
    "channel_multipliers",
    "clamp_cast",
    "finish_acc",
    "quantize_bound",
    "requantize_acc",
    "scalar_params",
    "storage_range",
]
