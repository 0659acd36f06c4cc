"""Conversions between float, quantized integer and plain integer tensors.

``quantize``, ``dequantize`` and ``requantize`` are typed ops: their
references read quantization parameters off the node's types (a
:class:`~rlx_edge.ir.ops.QContext`), and the output quantization of quantize
and requantize comes from the builder's ``out_quant``::

    q = g.quantize(x, dtype="i8", out_quant=QuantParams(0.05, -3))

Their float references are also registered as integer references, since the
interpreter sends every node that touches a quantized tensor to the integer
reference: for quantize and dequantize the two are the same computation
(TFLite computes them in float too).
"""

from __future__ import annotations

import numpy as np

from rlx_edge.errors import OpError
from rlx_edge.ir.dtype import DType, from_numpy
from rlx_edge.ir.ops._common import FLOAT_SAMPLE_DTYPES, fail, finish, rand_float, rand_shape
from rlx_edge.ir.ops._registry import Attr, QContext, defop
from rlx_edge.ir.types import QuantParams, TensorType

_QUANT_DTYPES = (DType.i8, DType.i16, DType.u8, DType.i4, DType.i32)


# helpers ------------------------------------------------------------------------
def _broadcast_params(qp: QuantParams, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Scale (float32) and zero point (int64) shaped to broadcast against ``shape``."""
    if qp.axis is None:
        return qp.scale.reshape(()), qp.zero_point.reshape(())
    axis = qp.axis % len(shape)
    if qp.scale.size != shape[axis]:
        raise OpError(f"per-channel quantization has {qp.scale.size} scales but axis {qp.axis} has size {shape[axis]}")
    bshape = [1] * len(shape)
    bshape[axis] = -1
    return qp.scale.reshape(bshape), qp.zero_point.reshape(bshape)


def _out_quant(ctx: QContext, op: str) -> QuantParams:
    t = ctx.out_types[0]
    if t.quant is None:
        raise OpError(
            f"node {ctx.node!r} ({op}): output has no quantization parameters; pass out_quant=QuantParams(...)"
        )
    if t.quant.storage != t.dtype:
        raise OpError(
            f"node {ctx.node!r} ({op}): output dtype {t.dtype} disagrees with its quantization storage"
            f" {t.quant.storage}; give QuantParams(..., storage={t.dtype.value!r})"
        )
    return t.quant


def _in_quant(ctx: QContext, op: str) -> QuantParams:
    t = ctx.in_types[0]
    if t is None or t.quant is None:
        raise OpError(f"node {ctx.node!r} ({op}): input has no quantization parameters")
    return t.quant


def round_half_away(v: np.ndarray) -> np.ndarray:
    """Round to nearest, ties away from zero (C's ``round``), exactly, in v's float type.

    ``floor(|v| + 0.5)`` is wrong just below 0.5 (0.49999997f + 0.5f rounds up
    to 1.0f); ``v - trunc(v)`` is exact, so comparing the fraction is not.
    """
    t = np.trunc(v)
    frac = v - t
    return t + np.where(np.abs(frac) >= 0.5, np.sign(v), 0).astype(v.dtype)


def affine_quantize(x: np.ndarray, qp: QuantParams, dtype: DType) -> np.ndarray:
    """TFLite's reference quantize: ``clamp(round(x / scale) + zero_point)``.

    ``x / scale`` is a float32 division and the rounding is half away from
    zero, as ``static_cast<int32>(TfLiteRound(val / scale)) + zero_point``.
    Unlike C, out-of-range values and infinities saturate (the C cast is
    undefined there) and NaN quantizes to the zero point.
    """
    scale, zp = _broadcast_params(qp, x.shape)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        v = round_half_away(x.astype(np.float32) / scale)
    v = np.nan_to_num(v.astype(np.float64), nan=0.0)
    # clip before the integer conversion so that huge values cannot wrap
    lo, hi = dtype.min, dtype.max
    q = np.clip(v, lo - 2.0**32, hi + 2.0**32).astype(np.int64) + zp
    return np.asarray(np.clip(q, lo, hi), dtype=dtype.numpy)


def affine_dequantize(q: np.ndarray, qp: QuantParams) -> np.ndarray:
    """TFLite's reference dequantize: ``float(double(scale) * (q - zero_point))``, as float32."""
    scale, zp = _broadcast_params(qp, q.shape)
    return np.asarray(scale.astype(np.float64) * (q.astype(np.int64) - zp), dtype=np.float32)


def _quant_dtype(op: str, dtype: DType) -> None:
    if dtype not in _QUANT_DTYPES:
        fail(f"{op}: dtype must be one of {', '.join(map(str, _QUANT_DTYPES))}, got {dtype}")


def _rand_quant(rng: np.random.Generator, shape: tuple[int, ...], storage: DType, per_channel: bool) -> QuantParams:
    """Random quantization parameters; per-channel ones are symmetric (the weight convention)."""
    if per_channel and shape:
        axis = int(rng.integers(-len(shape), len(shape)))
        n = shape[axis]
        scale = rng.uniform(0.005, 0.2, n).astype(np.float32)
        return QuantParams(scale, np.zeros(n, np.int64), axis=axis, storage=storage)
    zp = int(rng.integers(max(storage.min, -128), min(storage.max, 127) + 1))
    return QuantParams(float(rng.uniform(0.005, 0.2)), zp, storage=storage)


def _rand_ints(rng: np.random.Generator, shape: tuple[int, ...], dtype: DType) -> np.ndarray:
    lo, hi = max(dtype.min, -(2**20)), min(dtype.max, 2**20)
    return rng.integers(lo, hi + 1, shape).astype(dtype.numpy)


# quantize -------------------------------------------------------------------------
quantize = defop(
    "quantize",
    family="quant",
    inputs=("x",),
    attrs={"dtype": Attr("dtype", DType.i8, doc="integer storage type of the output")},
    typed=True,
    doc="Float to quantized integer: clamp(round_half_away(x / scale) + zero_point), per tensor or channel.",
)


@quantize.infer
def _quantize_infer(x, *, dtype):
    _quant_dtype("quantize", dtype)
    if not x.dtype.is_float:
        fail(f"quantize input must be float, got {x.dtype} (use requantize for quantized inputs)")
    return TensorType(x.shape, dtype)


@quantize.reference
@quantize.int_reference
def _quantize_ref(ctx: QContext, x, *, dtype):
    return affine_quantize(x, _out_quant(ctx, "quantize"), dtype)


@quantize.sample
def _quantize_sample(rng):
    dtype = (DType.i8, DType.i8, DType.i16, DType.u8, DType.i4)[int(rng.integers(5))]
    shape = rand_shape(rng, int(rng.integers(0, 5)))
    x = rand_float(rng, shape, FLOAT_SAMPLE_DTYPES[int(rng.integers(3))], scale=float(rng.choice([0.5, 4.0, 40.0])))
    qp = _rand_quant(rng, shape, dtype, per_channel=rng.random() < 0.3)
    if x.size and rng.random() < 0.3 and qp.axis is None:  # near-ties, where the rounding rule shows
        x.flat[0] = 2.5 * float(qp.scale[0])
        x.flat[-1] = -2.5 * float(qp.scale[0])
    return [x], {"dtype": dtype.value}, [qp], [None]


# dequantize ---------------------------------------------------------------------------
dequantize = defop(
    "dequantize",
    family="quant",
    inputs=("x",),
    attrs={"dtype": Attr("dtype", DType.f32, doc="float type of the output")},
    typed=True,
    doc="Quantized integer to float: scale * (q - zero_point), per tensor or channel.",
)


@dequantize.infer
def _dequantize_infer(x, *, dtype):
    if not dtype.is_float:
        fail(f"dequantize: dtype must be a float type, got {dtype}")
    if not x.dtype.is_int or x.quant is None:
        fail(f"dequantize input must be a quantized integer tensor, got {x}")
    return TensorType(x.shape, dtype)


@dequantize.reference
@dequantize.int_reference
def _dequantize_ref(ctx: QContext, x, *, dtype):
    with np.errstate(over="ignore"):  # beyond f16's range is inf, as a float16 conversion gives
        return finish(affine_dequantize(x, _in_quant(ctx, "dequantize")), dtype)


@dequantize.sample
def _dequantize_sample(rng):
    storage = (DType.i8, DType.i8, DType.i16, DType.u8, DType.i32)[int(rng.integers(5))]
    shape = rand_shape(rng, int(rng.integers(0, 5)))
    qp = _rand_quant(rng, shape, storage, per_channel=rng.random() < 0.3)
    dtype = ("f32", "f32", "f16", "f64")[int(rng.integers(4))]
    return [_rand_ints(rng, shape, storage)], {"dtype": dtype}, [None], [qp]


# requantize -----------------------------------------------------------------------------
requantize = defop(
    "requantize",
    family="quant",
    inputs=("x",),
    attrs={"dtype": Attr("dtype", DType.i8, doc="integer storage type of the output")},
    typed=True,
    doc="Quantized to quantized with new parameters (out_quant): quantize(dequantize(x)).",
)


@requantize.infer
def _requantize_infer(x, *, dtype):
    _quant_dtype("requantize", dtype)
    if not x.dtype.is_int or x.quant is None:
        fail(f"requantize input must be a quantized integer tensor, got {x}")
    return TensorType(x.shape, dtype)


@requantize.reference
@requantize.int_reference
def _requantize_ref(ctx: QContext, x, *, dtype):
    # Float semantics: dequantize, then quantize, both as TFLite's float
    # reference does. The bit-exact integer semantics (TFLite's Requantize with
    # a Q31 multiplier and shift) come from the fixed-point module in
    # rlx_edge.quant, which replaces this int_reference when it is added.
    real = affine_dequantize(x, _in_quant(ctx, "requantize"))
    return affine_quantize(real, _out_quant(ctx, "requantize"), dtype)


@requantize.sample
def _requantize_sample(rng):
    src = (DType.i8, DType.i16, DType.u8)[int(rng.integers(3))]
    dst = (DType.i8, DType.i8, DType.i16, DType.u8)[int(rng.integers(4))]
    shape = rand_shape(rng, int(rng.integers(0, 5)))
    in_q = _rand_quant(rng, shape, src, per_channel=False)
    out_q = _rand_quant(rng, shape, dst, per_channel=rng.random() < 0.2)
    return [_rand_ints(rng, shape, src)], {"dtype": dst.value}, [out_q], [in_q]


# cast ---------------------------------------------------------------------------------------
cast = defop(
    "cast",
    family="quant",
    inputs=("x",),
    attrs={"dtype": Attr("dtype", doc="element type of the output")},
    doc=(
        "Element type conversion with numpy astype semantics, except: float to integer truncates"
        " toward zero and saturates to the target range (NaN gives 0); integer to integer wraps"
        " (i4 wraps to [-8, 7]); anything to bool is x != 0; bool gives 0/1."
    ),
)


@cast.infer
def _cast_infer(x, *, dtype):
    if x.quant is not None:
        fail(
            f"cast of a quantized tensor ({x}) would change stored integers, not real values;"
            " use dequantize or requantize"
        )
    return TensorType(x.shape, dtype)


def _float_to_int(x: np.ndarray, dtype: DType) -> np.ndarray:
    t = np.trunc(x.astype(np.float64))
    lo, hi = dtype.min, dtype.max
    # float(hi) rounds up for i64 (2**63): compare in float, saturate explicitly
    big = t >= float(hi)
    small = t <= float(lo)
    safe = np.where(big | small | np.isnan(t), 0, t).astype(np.int64)
    return np.where(big, hi, np.where(small, lo, safe)).astype(dtype.numpy)


@cast.reference
def _cast_ref(x, *, dtype):
    src = from_numpy(x.dtype)
    if dtype == DType.bool:
        return x != 0
    if dtype.is_float:
        return finish(x.astype(np.float64 if dtype == DType.f64 else np.float32), dtype)
    if src.is_float:
        return _float_to_int(x, dtype)
    y = x.astype(np.int64)
    if dtype == DType.i4:
        return (((y + 8) & 15) - 8).astype(np.int8)
    return y.astype(dtype.numpy)  # wraps modulo 2**bits, like C's conversion


@cast.sample
def _cast_sample(rng):
    shape = rand_shape(rng, int(rng.integers(0, 4)))
    kind = int(rng.integers(4))
    if kind == 0:  # float, with values that saturate small integer types and NaN/inf
        x = rand_float(rng, shape, FLOAT_SAMPLE_DTYPES[int(rng.integers(3))], scale=300.0)
        if x.size and rng.random() < 0.3:
            x.flat[0] = [np.nan, np.inf, -np.inf, 1e30][int(rng.integers(4))]
    elif kind == 1:
        x = rng.integers(-40000, 40000, shape).astype(np.int32)
    elif kind == 2:
        x = rng.integers(-128, 128, shape).astype(np.int8)
    else:
        x = rng.random(shape) < 0.5
    dtype = ("f32", "f16", "f64", "i8", "i16", "i32", "i64", "u8", "i4", "bool")[int(rng.integers(10))]
    return [x], {"dtype": dtype}


# integer semantics ------------------------------------------------------------------
# Integer-to-integer requantization is TFLite's QUANTIZE on an integer input
# (reference_ops::Requantize): a Q31 multiplier s_in/s_out with double
# rounding, replacing the float composition above.
@requantize.int_reference
def _requantize_int(ctx: QContext, x, *, dtype):
    from rlx_edge.quant import intkernels

    return intkernels.requantize(
        x,
        x_q=_in_quant(ctx, "requantize"),
        y_q=_out_quant(ctx, "requantize"),
        out_dtype=dtype.numpy,
        out_range=(dtype.min, dtype.max),
    )
