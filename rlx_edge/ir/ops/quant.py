"""Conversions between float, quantized integer and plain integer tensors.

``quantize``, ``dequantize`` and ``requantize`` are typed ops: their
references read quantization parameters off the node's types (a
:class:`~rlx_edge.ir.ops.QContext`), and the output quantization of quantize
and requantize comes from the builder's ``out_quant``::

    q = g.quantize(x, dtype="i8", out_quant=QuantParams(0.05, -3))

Their integer semantics are split as TFLite Micro's kernels: ``prepare``
turns the quantization parameters into plain numbers (per tensor) or arrays
shaped to broadcast (per channel), ``eval`` computes with them in numpy or
jax.numpy. For quantize and dequantize the float reference is that same
computation (TFLite computes them in float too); requantize's float
reference is the real-valued composition, its integer semantics TFLite's
Requantize with a Q31 multiplier.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlx_edge.errors import OpError
from rlx_edge.ir import fixedpoint as fp
from rlx_edge.ir.dtype import DType, from_numpy
from rlx_edge.ir.ops._common import FLOAT_SAMPLE_DTYPES, fail, finish, rand_float, rand_shape
from rlx_edge.ir.ops._quantized import byte_table, channel_broadcast, clamp_cast
from rlx_edge.ir.ops._registry import Attr, OpDef, QContext, defop
from rlx_edge.ir.prepared import Prepared
from rlx_edge.ir.shape import along_axis
from rlx_edge.ir.types import QuantParams, TensorType

_QUANT_DTYPES = (DType.i8, DType.i16, DType.u8, DType.i4, DType.i32)


# helpers ------------------------------------------------------------------------
def _plain(a: np.ndarray) -> Any:
    """A 0-d array as a Python number (a per-tensor parameter), else the array (per channel)."""
    return a.item() if a.ndim == 0 else a


def _affine_params(qp: QuantParams, shape: tuple) -> tuple[Any, Any]:
    """Scale (float32 values) and zero point (int64): numbers per tensor, arrays broadcasting against ``shape``."""
    if qp.axis is not None:
        axis = qp.axis % len(shape)
        if isinstance(shape[axis], int) and qp.scale.size != shape[axis]:
            raise OpError(
                f"per-channel quantization has {qp.scale.size} scales but axis {qp.axis} has size {shape[axis]}"
            )
    scale, zp = channel_broadcast(qp, len(shape))
    return _plain(scale.astype(np.float32)), _plain(zp.astype(np.int64))


def _output_quant(ctx: QContext, op: str) -> QuantParams:
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


def _input_quant(ctx: QContext, op: str) -> QuantParams:
    t = ctx.in_types[0]
    if t is None or t.quant is None:
        raise OpError(f"node {ctx.node!r} ({op}): input has no quantization parameters")
    return t.quant


def _quantize_params(qp: QuantParams, shape: tuple, dtype: DType) -> dict:
    scale, zp = _affine_params(qp, shape)
    return {"scale": scale, "zp": zp, "qmin": dtype.min, "qmax": dtype.max, "dtype": dtype.numpy.name}


def _quantize_eval(p: Prepared, x: Any, **attrs: Any) -> Any:
    """TFLite's reference quantize: ``clamp(round(x / scale) + zero_point)``.

    ``x / scale`` is a float32 division and the rounding is half away from
    zero, as ``static_cast<int32>(TfLiteRound(val / scale)) + zero_point``.
    Unlike C, out-of-range values and infinities saturate (the C cast is
    undefined there) and NaN quantizes to the zero point.
    """
    xp = fp.namespace(x)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        v = fp.round_half_away(x.astype(xp.float32) / xp.asarray(p.scale, dtype=xp.float32))
    v = xp.nan_to_num(v.astype(xp.float64), nan=0.0)
    # clip before the integer conversion so that huge values cannot wrap
    q = xp.clip(v, p.qmin - 2.0**32, p.qmax + 2.0**32).astype(xp.int64) + p.zp
    return xp.clip(q, p.qmin, p.qmax).astype(p.dtype)


def _dequantize_params(qp: QuantParams, shape: tuple, storage: DType) -> dict:
    scale, zp = _affine_params(qp, shape)
    # q - zp below 2**17 is exact in float32 and, times a float32 scale, exact in
    # double: then one float32 multiply rounds like the double product does
    narrow = storage.bits <= 16 and int(np.max(np.abs(qp.zero_point))) <= 2**16
    return {"scale": scale, "zp": zp, "narrow": narrow}


def _dequantize_real(p: Prepared, q: Any) -> Any:
    """TFLite's reference dequantize: ``float(double(scale) * (q - zero_point))``, as float32."""
    xp = fp.namespace(q)
    d = q.astype(xp.int64) - p.zp
    if p.narrow:  # no float64 (which TPUs lack), same rounding
        return d.astype(xp.float32) * xp.asarray(p.scale, dtype=xp.float32)
    return (d.astype(xp.float64) * xp.asarray(p.scale, dtype=xp.float64)).astype(xp.float32)


def affine_quantize(x: np.ndarray, qp: QuantParams, dtype: DType) -> np.ndarray:
    """Quantize ``x`` with ``qp`` into ``dtype`` exactly as a quantize node does (TFLite's reference)."""
    return np.asarray(_quantize_eval(Prepared(_quantize_params(qp, x.shape, dtype)), x))


def affine_dequantize(q: np.ndarray, qp: QuantParams) -> np.ndarray:
    """Dequantize ``q`` to float32 exactly as a dequantize node does (TFLite's reference)."""
    params = Prepared(_dequantize_params(qp, q.shape, from_numpy(q.dtype)))
    return np.asarray(_dequantize_real(params, q), dtype=np.float32)


def _float_reference_is_eval(op: OpDef) -> None:
    """The typed float reference of ``op`` is its integer semantics (TFLite computes it in float too)."""

    @op.reference
    def _ref(ctx: QContext, x, **attrs):
        return op.run_int_reference(ctx, [x], attrs)[0]


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
    differentiable=False,
    doc="Float to quantized integer: clamp(round_half_away(x / scale) + zero_point), per tensor or channel.",
)


@quantize.infer
def _quantize_infer(x, *, dtype):
    _quant_dtype("quantize", dtype)
    if not x.dtype.is_float:
        fail(f"quantize input must be float, got {x.dtype} (use requantize for quantized inputs)")
    return TensorType(x.shape, dtype)


@quantize.prepare
def _quantize_prepare(ctx: QContext, *, dtype: DType) -> dict:
    return _quantize_params(_output_quant(ctx, "quantize"), ctx.in_types[0].shape, dtype)


quantize.eval(_quantize_eval)
_float_reference_is_eval(quantize)


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
    differentiable=False,
    doc="Quantized integer to float: scale * (q - zero_point), per tensor or channel.",
)


@dequantize.infer
def _dequantize_infer(x, *, dtype):
    if not dtype.is_float:
        fail(f"dequantize: dtype must be a float type, got {dtype}")
    if not x.dtype.is_int or x.quant is None:
        fail(f"dequantize input must be a quantized integer tensor, got {x}")
    return TensorType(x.shape, dtype)


@dequantize.prepare
def _dequantize_prepare(ctx: QContext, *, dtype: DType) -> dict:
    xt = ctx.in_types[0]
    p = _dequantize_params(_input_quant(ctx, "dequantize"), xt.shape, xt.dtype)
    p["table"] = byte_table(_dequantize_eval, p, xt.dtype.numpy, dtype=dtype) if isinstance(p["scale"], float) else None
    return p


@dequantize.eval
def _dequantize_eval(p: Prepared, x: Any, *, dtype: DType) -> Any:
    with np.errstate(over="ignore"):  # beyond f16's range is inf, as a float16 conversion gives
        return finish(_dequantize_real(p, x), dtype)


_float_reference_is_eval(dequantize)


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
    differentiable=False,
    doc="Quantized to quantized with new parameters (out_quant): quantize(dequantize(x)).",
)


@requantize.infer
def _requantize_infer(x, *, dtype):
    _quant_dtype("requantize", dtype)
    if not x.dtype.is_int or x.quant is None:
        fail(f"requantize input must be a quantized integer tensor, got {x}")
    return TensorType(x.shape, dtype)


@requantize.reference
def _requantize_ref(ctx: QContext, x, *, dtype):
    # The real-valued meaning: dequantize, then quantize, in float. Quantized
    # nodes run the integer semantics below instead (TFLite's Requantize), which
    # can differ from this in the last unit.
    real = affine_dequantize(x, _input_quant(ctx, "requantize"))
    return affine_quantize(real, _output_quant(ctx, "requantize"), dtype)


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
# (reference_ops::Requantize): a Q31 multiplier s_in/s_out with double rounding.
@requantize.prepare
def _requantize_prepare(ctx: QContext, *, dtype: DType) -> dict:
    """One multiplier per tensor, or per channel (either side) as arrays shaped to broadcast.

    The clamp is the output type's range (int4 held in int8 clamps to [-8, 7]).
    """
    xt = ctx.in_types[0]
    s_x, zp_x = channel_broadcast(_input_quant(ctx, "requantize"), xt.rank)
    s_y, zp_y = channel_broadcast(_output_quant(ctx, "requantize"), xt.rank)
    mult, shift = fp.quantize_multiplier_array(s_x.astype(np.float64) / s_y.astype(np.float64))
    p = {
        "in_zp": _plain(zp_x.astype(np.int64)), "mult": _plain(mult), "shift": _plain(shift),
        "out_zp": _plain(zp_y.astype(np.int64)), "act_min": dtype.min, "act_max": dtype.max,
        "dtype": dtype.numpy.name,
    }  # fmt: skip
    p["table"] = byte_table(_requantize_eval, p, xt.dtype.numpy) if mult.ndim == 0 else None
    return p


@requantize.eval
def _requantize_eval(p: Prepared, x: Any, **attrs: Any) -> Any:
    xp = fp.namespace(x)
    y = fp.multiply_by_quantized_multiplier(x.astype(xp.int64) - p.in_zp, p.mult, p.shift) + p.out_zp
    return clamp_cast(y, p.act_min, p.act_max, p.dtype)


# cast between float types is differentiable (the derivative casts back); a cast to an
# integer type ends every derivative path (the transforms refuse integer values).
@cast.jvp
def _cast_jvp(e, primals, outputs, tangents, *, dtype):
    return [e.cast(tangents[0], dtype=dtype)]


@cast.vjp
def _cast_vjp(e, primals, outputs, cotangents, *, dtype):
    return [e.cast(cotangents[0], dtype=primals[0].dtype)]


# fake_quant -------------------------------------------------------------------------------
# Quantization-aware training simulates the integer model in float: values snap to the grid
# they will be stored on. The division and rounding are those of PTQ's weight quantization
# (ptq.quantize_weights_at: float64 quotient of the float32 scale, round half away from zero),
# so trained weights quantized by PTQ at the same scales give the integers training saw.
fake_quant = defop(
    "fake_quant",
    family="quant",
    inputs=("x", "scale"),
    attrs={
        "zero_point": Attr("ints", (0,), doc="one zero point, or one per channel along axis"),
        "qmin": Attr("int", -128, doc="smallest stored integer"),
        "qmax": Attr("int", 127, doc="largest stored integer"),
        "axis": Attr("int?", None, doc="channel axis of per-channel scales; None: per tensor"),
    },
    surrogate_grad=True,
    doc=(
        "Quantize then dequantize in float (quantization-aware training): (clamp(round_half_away(x / scale)"
        " + zero_point, qmin, qmax) - zero_point) * scale; scale per tensor or per channel along axis."
        " Its gradient is the straight-through estimator: the incoming gradient where x / scale + zero_point"
        " rounds into [qmin, qmax], 0 where the clamp holds it; the scale is a constant."
    ),
)


def _fake_quant_axis(x: TensorType, axis: int | None) -> int | None:
    if axis is None:
        return None
    if not -x.rank <= axis < x.rank:
        fail(f"fake_quant: axis {axis} is out of range for input shape {list(x.shape)}")
    return axis % x.rank


def fake_quant_check(x: TensorType, scale: TensorType, zero_point: tuple, qmin: int, qmax: int, axis: int | None):
    """The checks fake_quant and its gradient share: float input, scale shape, zero points, range."""
    if not x.dtype.is_float or x.quant is not None:
        fail(f"fake_quant input must be a plain float tensor, got {x}")
    if scale.dtype != DType.f32 or scale.quant is not None:
        fail(f"fake_quant scale must be f32, got {scale}")
    if not qmin < qmax:
        fail(f"fake_quant: qmin {qmin} must be below qmax {qmax}")
    ax = _fake_quant_axis(x, axis)
    if ax is None:
        if scale.rank > 1 or scale.shape not in ((), (1,)):
            fail(f"fake_quant: a per-tensor scale has shape [] or [1], got {list(scale.shape)}; give axis=")
        if len(zero_point) != 1:
            fail(f"fake_quant: per tensor takes one zero point, got {len(zero_point)}")
    else:
        n = x.shape[ax]
        if scale.rank != 1 or (isinstance(n, int) and isinstance(scale.shape[0], int) and scale.shape[0] != n):
            fail(f"fake_quant: per-channel scale must have shape [{n}] (axis {axis}), got {list(scale.shape)}")
        if len(zero_point) != 1 and len(zero_point) != n:
            fail(f"fake_quant: {len(zero_point)} zero points for {n} channels (axis {axis})")
    if any(not qmin <= z <= qmax for z in zero_point):
        fail(f"fake_quant: zero points {list(zero_point)} must lie in [{qmin}, {qmax}]")


@fake_quant.infer
def _fake_quant_infer(x, scale, *, zero_point, qmin, qmax, axis):
    fake_quant_check(x, scale, zero_point, qmin, qmax, axis)
    return TensorType(x.shape, x.dtype)


def fake_quant_grid(x: Any, scale: Any, zero_point: tuple, qmin: int, qmax: int, axis: int | None):
    """``(v, s, zp)``: the unclamped grid index ``round_half_away(x / s) + zp`` and the broadcast s, zp (float64).

    numpy or jax.numpy (under ``jax.enable_x64``), so the JAX target runs this very code.
    """
    xp = fp.namespace(x, scale)
    s = xp.asarray(scale).astype(xp.float32).astype(xp.float64)
    zp = np.asarray(zero_point, np.float64)
    if axis is None:
        s, zp = s.reshape(()), zp.reshape(())
    else:
        s = along_axis(s, axis, x.ndim)
        zp = along_axis(zp, axis, x.ndim) if zp.size > 1 else zp.reshape(())
    if xp is np and not (np.all(np.isfinite(s)) and np.all(s > 0)):
        raise OpError(f"fake_quant: scales must be positive and finite, got {np.ravel(s)[:4].tolist()}")
    with np.errstate(over="ignore", invalid="ignore"):
        v = fp.round_half_away(x.astype(xp.float64) / s) + zp
    return v, s, zp


@fake_quant.reference
def _fake_quant_ref(x, scale, *, zero_point, qmin, qmax, axis):
    v, s, zp = fake_quant_grid(x, scale, zero_point, qmin, qmax, axis)
    xp = fp.namespace(v)
    return finish((xp.clip(v, qmin, qmax) - zp) * s, from_numpy(x.dtype))


def _fake_quant_draw(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, dict]:
    """x, scale and attributes of fake_quant: per tensor or channel, ties and values past the range."""
    shape = rand_shape(rng, int(rng.integers(1, 5)))
    x = rand_float(rng, shape, FLOAT_SAMPLE_DTYPES[int(rng.integers(3))], scale=float(rng.choice([0.5, 4.0])))
    qmin, qmax = ((-128, 127), (-127, 127), (-7, 7), (-8, 7), (0, 255), (-32768, 32767))[int(rng.integers(6))]
    attrs: dict[str, Any] = {"qmin": qmin, "qmax": qmax}
    if rng.random() < 0.5:
        axis = int(rng.integers(-len(shape), len(shape)))
        scale = rng.uniform(0.01, 0.5, shape[axis]).astype(np.float32)
        attrs["axis"] = axis
        if rng.random() < 0.5:
            attrs["zero_point"] = tuple(int(z) for z in rng.integers(max(qmin, -3), min(qmax, 3) + 1, shape[axis]))
        else:
            attrs["zero_point"] = (0,) if qmin <= 0 else (qmin,)
    else:
        scale = np.asarray(rng.uniform(0.01, 0.5), np.float32).reshape(() if rng.random() < 0.5 else (1,))
        attrs["zero_point"] = (int(rng.integers(max(qmin, -5), min(qmax, 5) + 1)),)
    if x.size and rng.random() < 0.5:  # exact ties, where the rounding rule shows
        s0 = float(np.ravel(scale)[0])
        x.flat[0] = np.asarray(2.5 * s0, x.dtype)
        x.flat[-1] = np.asarray(-2.5 * s0, x.dtype)
    return x, scale, attrs


@fake_quant.sample
def _fake_quant_sample(rng):
    x, scale, attrs = _fake_quant_draw(rng)
    return [x, scale], attrs


def _ste_mask(e, x, scale, zero_point: tuple, qmin: int, qmax: int, axis: int | None):
    """1 where ``x`` lands inside [qmin, qmax] before the clamp, else 0: the straight-through estimator's gate.

    round_half_away(u) + zp lies in [qmin, qmax] exactly when qmin - zp - 0.5 < u < qmax - zp + 0.5
    (up to the half-integer bounds themselves). ``u = x / scale`` is computed in ``x``'s type here,
    not in float64 as the forward pass does: the two can disagree only within one unit of the last
    place of a bound, where the gradient is cut either way.
    """
    s = scale if x.dtype == DType.f32 else e.cast(scale, dtype=x.dtype)
    rank = len(x.shape)
    if axis is not None:
        bshape = [1] * rank
        bshape[axis % rank] = -1
        s = e.reshape(s, shape=tuple(bshape))
    elif len(s.shape):
        s = e.reshape(s, shape=())
    u = e.div(x, s)
    zp = np.asarray(zero_point, np.float64)
    if zp.size > 1:  # per-channel zero points: shift u, then the bounds are the same for every channel
        bshape = [1] * rank
        bshape[axis % rank] = zp.size
        u = e.add(u, e.const(zp.reshape(bshape), like=x, shape=bshape))
        z = 0.0
    else:
        z = float(zp[0])
    return e.between(u, qmin - z - 0.5, qmax - z + 0.5)


# The straight-through estimator (Bengio et al. 2013; TFLite's FakeQuantWithMinMaxVars gradient):
# rounding counts as the identity, the clamp does not, so the gradient reaches x where x is inside
# the quantization range and is 0 where the clamp holds it. The scale is a constant under
# differentiation (ranges are fixed during training, or set from the weights outside the graph).
@fake_quant.vjp
def _fake_quant_vjp(e, primals, outputs, cotangents, *, zero_point, qmin, qmax, axis):
    x, scale = primals
    return [e.mul(cotangents[0], _ste_mask(e, x, scale, zero_point, qmin, qmax, axis)), None]


@fake_quant.jvp
def _fake_quant_jvp(e, primals, outputs, tangents, *, zero_point, qmin, qmax, axis):
    x, scale = primals
    if tangents[0] is None:
        return [None]
    return [e.mul(tangents[0], _ste_mask(e, x, scale, zero_point, qmin, qmax, axis))]
