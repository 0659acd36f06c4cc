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


def onto_output_prepare(operands: dict[str, Any], out: Any, label: str = "") -> dict[str, Any]:
    """Operands an op passes through unchanged (MAXIMUM / MINIMUM, SELECT_V2), each copied where it has
    the output's parameters (TFLite's case) or else requantized onto them with one multiplier s_in / s_out.

    ``operands`` maps each operand's key to its TensorType, ``out`` is the output's. Per key:
    ``<key>_rescale``, ``<key>_zp``, ``<key>_mult``, ``<key>_shift``; byte outputs also get
    ``<key>_table``, the value for each of the operand's 256 bit patterns (:func:`onto_output`).
    ``label`` starts each error message (the op's name).
    """
    s_y, zp_y = scalar_params(out.quant, f"{label}output")
    lo, hi = storage_range(out.dtype.numpy)
    p: dict[str, Any] = {"out_zp": zp_y, "act_min": lo, "act_max": hi, "dtype": out.dtype.numpy.name}
    for key, t in operands.items():
        s, zp = scalar_params(t.quant, f"{label}input {key}")
        rescale = not (np.float32(s) == np.float32(s_y) and zp == zp_y)
        mult, shift = fp.quantize_multiplier(float(s) / float(s_y)) if rescale else (0, 0)
        p.update({f"{key}_rescale": rescale, f"{key}_zp": zp, f"{key}_mult": mult, f"{key}_shift": shift})
    if out.dtype.numpy.itemsize == 1:
        bits = np.arange(256, dtype=np.uint8).view(out.dtype.numpy)
        for key in operands:
            p[f"{key}_table"] = np.asarray(onto_output(Prepared(p), key, bits), out.dtype.numpy)
    return p


# eval time ---------------------------------------------------------------------------------
def clamp_cast(v: Any, lo: int, hi: int, dtype: Any) -> Any:
    xp = fp.namespace(v)
    return xp.clip(v, lo, hi).astype(dtype)


def onto_output(p: Prepared, key: str, v: Any) -> Any:
    """Operand ``key`` in the output's parameters (:func:`onto_output_prepare`): as stored, or requantized."""
    if not p[f"{key}_rescale"]:
        return v
    xp = fp.namespace(v)
    y = fp.multiply_by_quantized_multiplier(v.astype(xp.int64) - p[f"{key}_zp"], p[f"{key}_mult"], p[f"{key}_shift"])
    return clamp_cast(y + p.out_zp, p.act_min, p.act_max, p.dtype)


def requantize_acc(acc: Any, mult: Any, shift: Any, wide: bool) -> Any:
    """Accumulators to the output scale: int32 double rounding, or TFLite's int64 form (16x8 with int64 bias)."""
    if wide:
        return fp.multiply_by_quantized_multiplier_int64(acc, mult, shift)
    return fp.multiply_by_quantized_multiplier(fp.wrap_int32(acc), mult, shift)


def finish_acc(acc: Any, mult: Any, shift: Any, wide: bool, out_zp: int, lo: int, hi: int, dtype: Any) -> Any:
    """The accumulator epilogue of conv / fully connected: requantize, add the zero point, clamp, cast."""
    return clamp_cast(requantize_acc(acc, mult, shift, wide) + out_zp, lo, hi, dtype)


def numpy_finish_acc(
    p: Prepared, bias: np.ndarray, raw_bound: np.ndarray, acc_bound: np.ndarray
) -> Callable[[np.ndarray], np.ndarray]:
    """:func:`finish_acc` of ``raw + bias`` with ``p``'s constants, for numpy int64 ``raw`` it may overwrite.

    What a bound kernel (``OpDef.bind``) calls once per inference: ``raw``
    holds sums before the (folded) ``bias``, per output channel on the last
    axis, ``|raw| <= raw_bound`` and ``|raw + bias| <= acc_bound``. Where
    those bounds prove the form below exact, it is a few passes over
    ``raw``; otherwise ``finish_acc`` itself.

    With ``|acc| << left < 2**31`` (``acc = raw + bias``) neither int32 wrap
    of ``finish_acc`` does anything, and ``acc << left`` times ``m`` is
    ``acc`` times ``m << left``. With ``m >= 0`` the doubling high multiply
    cannot saturate (that needs both factors INT32_MIN) and is
    ``v = floor(T / 2**31)``, ``T = acc * m + 2**30``, for either sign (see
    :func:`fixedpoint.saturating_rounding_doubling_high_mul`). The rounding
    division by 2**r is ``floor((v + h - s) / 2**r)``, ``h = 2**(r-1)`` and
    ``s = [v < 0]`` for r >= 1, ``h = s = 0`` for r = 0 (see
    :func:`fixedpoint.rounding_divide_by_pot`), and ``v < 0`` iff ``T < 0``.
    Since ``floor((floor(x / A) + k) / B) = floor((x + k A) / (A B))`` for
    integers x, k and A, B > 0, the output before its clamp is
    ``(raw * m + K - s * 2**31) >> R`` with ``R = 31 + r`` and
    ``K = bias * m + 2**30 + h * 2**31 + out_zp * 2**R``: one shift.
    ``T < 0`` iff ``acc < -floor(2**30 / m)`` (``acc * m >= -2**30`` iff
    ``acc >= -2**30 / m``), i.e. ``raw < N``, ``N = -floor(2**30 / m) - bias``,
    and ``-s * 2**31`` is ``((raw - N) >> 63) & -2**31``. Every intermediate
    stays below 2**63 in magnitude where ``raw_bound * m + |K| + 2**31``
    does (checked per channel).
    """
    per_channel = (p.mult, p.shift, bias, raw_bound, acc_bound)
    columns = np.broadcast_arrays(*(np.asarray(v, np.int64).reshape(-1) for v in per_channel))

    def fallback(raw: np.ndarray) -> np.ndarray:
        raw += bias
        return finish_acc(raw, p.mult, p.shift, p.wide, p.out_zp, p.act_min, p.act_max, p.dtype)

    if p.wide or (columns[0] < 0).any():
        return fallback
    m_eff, ks, ns, cs, rs = [], [], [], [], []
    for m, e, b, raw_b, acc_b in zip(*(c.tolist() for c in columns)):
        left, r = max(e, 0), max(-e, 0)
        if acc_b << left >= 2**31:  # finish_acc would wrap: keep it
            return fallback
        m <<= left
        big_r = 31 + r
        k = b * m + 2**30 + (((1 << r) >> 1) << 31) + p.out_zp * 2**big_r
        if raw_b * m + abs(k) + 2**31 >= 2**63:
            return fallback
        m_eff.append(m)
        ks.append(k)
        ns.append((-(2**30 // m) if m > 0 else -(2**62)) - b)  # m = 0: T = 2**30 > 0 for every acc
        cs.append(-(2**31) if r > 0 else 0)
        rs.append(big_r)
    # shaped [1, O]: a batch-1 fully connected output has that very shape, which numpy's
    # elementwise loops take without setting up broadcasting (several times faster on 100s of values)
    m_arr, k_arr, n_arr, c_arr, r_arr = (np.array(v, np.int64).reshape(1, -1) for v in (m_eff, ks, ns, cs, rs))
    lo, hi, dtype = np.array(p.act_min, np.int64), np.array(p.act_max, np.int64), np.dtype(p.dtype)

    def finish(raw: np.ndarray) -> np.ndarray:
        s = np.subtract(raw, n_arr)
        s >>= 63
        s &= c_arr
        raw *= m_arr
        raw += k_arr
        raw += s
        raw >>= r_arr
        np.maximum(raw, lo, out=raw)
        np.minimum(raw, hi, out=raw)
        return raw.astype(dtype)

    return finish


def bind_byte_pairs(eval_fn: Callable[..., Any], params: Prepared, **attrs: Any) -> Callable[[Any, Any], Any]:
    """A binary op's numpy kernel (``OpDef.bind``) that looks byte inputs up in a table of its ``eval``.

    For two one-byte inputs the table holds ``eval`` on all 65536 pairs of
    bit patterns, made on first use for those input types, so a lookup is
    computing it; other inputs run ``eval``.
    """
    tables: dict[tuple[np.dtype, np.dtype], np.ndarray] = {}

    def kernel(a: Any, b: Any) -> Any:
        if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype.itemsize == b.dtype.itemsize == 1):
            return eval_fn(params, a, b, **attrs)
        key = (a.dtype, b.dtype)
        table = tables.get(key)
        if table is None:
            bits = np.arange(256, dtype=np.uint8)
            table = np.asarray(eval_fn(params, bits.view(a.dtype)[:, None], bits.view(b.dtype)[None, :], **attrs))
            table = tables.setdefault(key, table.reshape(-1))
        index = a.view(np.uint8).astype(np.intp)
        index <<= 8
        return table[index + b.view(np.uint8)]

    return kernel


__all__ = [
    "activation_clamp",
    "bind_byte_pairs",
    "byte_table",
    "channel_broadcast",
    "channel_multipliers",
    "clamp_cast",
    "finish_acc",
    "numpy_finish_acc",
    "quantize_bound",
    "requantize_acc",
    "scalar_params",
    "storage_range",
]
