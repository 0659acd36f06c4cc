"""Reductions and normalizations along axes: mean, sum, argmax, softmax, log_softmax.

Axes may be negative (counted from the end). Float ops compute f16 in f32
and return the input dtype.
"""

from __future__ import annotations

import math

import numpy as np

from rlx_edge.ir.dtype import DType, from_numpy
from rlx_edge.ir.ops._common import (
    FLOAT_SAMPLE_DTYPES,
    compute_dtype,
    fail,
    finish,
    norm_axes,
    norm_axis,
    rand_float,
    rand_shape,
)
from rlx_edge.ir.ops._registry import Attr, defop
from rlx_edge.ir.shape import Dim
from rlx_edge.ir.types import TensorType


def _reduced_shape(shape: tuple[Dim, ...], axes: tuple[int, ...], keepdims: bool) -> tuple[Dim, ...]:
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _need_float_or_quant(x: TensorType, what: str) -> None:
    if not x.dtype.is_float and x.quant is None:
        fail(f"{what} needs a float or quantized input, got {x.dtype}")


def _per_tensor(x: TensorType):
    return x.quant if x.quant is not None and not x.quant.per_channel else None


def _round_half_away(y: np.ndarray) -> np.ndarray:
    return np.sign(y) * np.floor(np.abs(y) + 0.5)


# mean / sum ---------------------------------------------------------------------
_REDUCE_ATTRS = {
    "axes": Attr("ints", doc="axes to reduce (negative counts from the end)"),
    "keepdims": Attr("bool", False, doc="keep reduced axes as size 1"),
}

mean = defop(
    "mean",
    family="reduce",
    inputs=("x",),
    attrs=dict(_REDUCE_ATTRS),
    doc="Arithmetic mean over axes.",
)


@mean.infer
def _mean_infer(x, *, axes, keepdims):
    _need_float_or_quant(x, "mean")
    ax = norm_axes(axes, x.rank, "mean")
    for a in ax:
        if x.shape[a] == 0:
            fail(f"mean: axis {a} of shape {list(x.shape)} is empty; there is nothing to average")
    # a mean stays in the input's range, so a per-tensor scale is a sound default
    return TensorType(_reduced_shape(x.shape, ax, keepdims), x.dtype, _per_tensor(x))


@mean.reference
def _mean_ref(x, *, axes, keepdims):
    ax = norm_axes(axes, x.ndim, "mean")
    if x.dtype.kind in "iu":
        y = np.asarray(x.astype(np.float64).mean(axis=ax, keepdims=keepdims))
        info = np.iinfo(x.dtype)
        return np.clip(_round_half_away(y), info.min, info.max).astype(x.dtype)
    y = x.astype(compute_dtype(x.dtype)).mean(axis=ax, keepdims=keepdims)
    return finish(y, from_numpy(x.dtype))


sum_ = defop(
    "sum",
    family="reduce",
    inputs=("x",),
    attrs=dict(_REDUCE_ATTRS),
    doc="Sum over axes (integers accumulate in int64 and wrap to the input type).",
)


@sum_.infer
def _sum_infer(x, *, axes, keepdims):
    if x.dtype == DType.bool:
        fail("sum needs a numeric input, got bool")
    ax = norm_axes(axes, x.rank, "sum")
    # a sum leaves the input's range, so quantized outputs need their own parameters
    return TensorType(_reduced_shape(x.shape, ax, keepdims), x.dtype)


@sum_.reference
def _sum_ref(x, *, axes, keepdims):
    ax = norm_axes(axes, x.ndim, "sum")
    if x.dtype.kind in "iu":
        return np.asarray(x.astype(np.int64).sum(axis=ax, keepdims=keepdims)).astype(x.dtype)
    y = x.astype(compute_dtype(x.dtype)).sum(axis=ax, keepdims=keepdims)
    return finish(y, from_numpy(x.dtype))


# argmax -------------------------------------------------------------------------
argmax = defop(
    "argmax",
    family="reduce",
    inputs=("x",),
    attrs={
        "axis": Attr("int", -1, doc="axis to search (negative counts from the end)"),
        "keepdims": Attr("bool", False, doc="keep the axis as size 1"),
        "dtype": Attr("dtype", "i32", doc="index type, i32 or i64"),
    },
    doc="Index of the largest value along an axis; ties give the first index.",
)


@argmax.infer
def _argmax_infer(x, *, axis, keepdims, dtype):
    dtype = DType(dtype)  # defaults reach here uncoerced, as the string "i32"
    if x.rank == 0:
        fail("argmax needs an input of rank >= 1")
    if dtype not in (DType.i32, DType.i64):
        fail(f"argmax: dtype must be i32 or i64, got {dtype}")
    if x.dtype == DType.bool:
        fail("argmax needs a numeric input, got bool")
    a = norm_axis(axis, x.rank, "argmax")
    if x.shape[a] == 0:
        fail(f"argmax: axis {a} of shape {list(x.shape)} is empty")
    return TensorType(_reduced_shape(x.shape, (a,), keepdims), dtype)


@argmax.reference
def _argmax_ref(x, *, axis, keepdims, dtype):
    # stored quantized values order like their real values (scale > 0), so one rule serves both
    return np.asarray(np.argmax(x, axis=axis, keepdims=keepdims)).astype(DType(dtype).numpy)


# softmax / log_softmax ------------------------------------------------------------
softmax = defop(
    "softmax",
    family="reduce",
    inputs=("x",),
    attrs={
        "axis": Attr("int", -1, doc="normalized axis (negative counts from the end)"),
        "beta": Attr("float", 1.0, doc="inverse temperature: exp(beta * x) is normalized"),
    },
    doc="exp(beta * (x - max)) / sum(exp(beta * (x - max))) along an axis.",
)


@softmax.infer
def _softmax_infer(x, *, axis, beta):
    _need_float_or_quant(x, "softmax")
    if x.rank == 0:
        fail("softmax needs an input of rank >= 1")
    if not math.isfinite(beta):
        fail(f"softmax: beta must be finite, got {beta}")
    norm_axis(axis, x.rank, "softmax")
    # quantized softmax outputs have fixed parameters of their own (TFLite: 1/256, -128)
    return TensorType(x.shape, x.dtype)


@softmax.reference
def _softmax_ref(x, *, axis, beta):
    z = beta * x.astype(compute_dtype(x.dtype))
    if z.size:
        # subtracting the max of beta*x keeps exp in range for either sign of beta
        z = z - z.max(axis=axis, keepdims=True)
    e = np.exp(z)
    return finish(e / e.sum(axis=axis, keepdims=True), from_numpy(x.dtype))


log_softmax = defop(
    "log_softmax",
    family="reduce",
    inputs=("x",),
    attrs={"axis": Attr("int", -1, doc="normalized axis (negative counts from the end)")},
    doc="x - max - log(sum(exp(x - max))) along an axis.",
)


@log_softmax.infer
def _log_softmax_infer(x, *, axis):
    _need_float_or_quant(x, "log_softmax")
    if x.rank == 0:
        fail("log_softmax needs an input of rank >= 1")
    norm_axis(axis, x.rank, "log_softmax")
    return TensorType(x.shape, x.dtype)


@log_softmax.reference
def _log_softmax_ref(x, *, axis):
    z = x.astype(compute_dtype(x.dtype))
    if z.size:
        z = z - z.max(axis=axis, keepdims=True)
    return finish(z - np.log(np.exp(z).sum(axis=axis, keepdims=True)), from_numpy(x.dtype))


# samplers -----------------------------------------------------------------------
def _pick_float(rng: np.random.Generator):
    return FLOAT_SAMPLE_DTYPES[int(rng.integers(len(FLOAT_SAMPLE_DTYPES)))]


def _rand_axes(rng: np.random.Generator, rank: int) -> tuple[int, ...]:
    k = int(rng.integers(1, rank + 1))
    axes = rng.permutation(rank)[:k]
    # written either way round: negative axes are part of the contract
    return tuple(int(a) - rank if rng.random() < 0.4 else int(a) for a in axes)


def _rand_axis(rng: np.random.Generator, rank: int) -> int:
    a = int(rng.integers(0, rank))
    return a - rank if rng.random() < 0.4 else a


def _reduce_sample(rng: np.random.Generator, with_int: bool) -> tuple[list, dict]:
    shape = rand_shape(rng, int(rng.integers(1, 5)))
    if with_int and rng.random() < 0.2:
        x = rng.integers(-100, 100, shape).astype(rng.choice([np.int32, np.int8]))
    else:
        x = rand_float(rng, shape, _pick_float(rng))
    return [x], {"axes": _rand_axes(rng, len(shape)), "keepdims": bool(rng.random() < 0.5)}


mean.sample(lambda rng: _reduce_sample(rng, with_int=False))
sum_.sample(lambda rng: _reduce_sample(rng, with_int=True))


@argmax.sample
def _argmax_sample(rng):
    shape = rand_shape(rng, int(rng.integers(1, 5)))
    if rng.random() < 0.3:
        # small integer range makes ties common, exercising first-index-wins
        x = rng.integers(-3, 3, shape).astype(rng.choice([np.int8, np.int32]))
    else:
        x = rand_float(rng, shape, _pick_float(rng))
    attrs = {
        "axis": _rand_axis(rng, len(shape)),
        "keepdims": bool(rng.random() < 0.5),
        "dtype": str(rng.choice(["i32", "i64"])),
    }
    return [x], attrs


@softmax.sample
def _softmax_sample(rng):
    shape = rand_shape(rng, int(rng.integers(1, 5)))
    x = rand_float(rng, shape, _pick_float(rng), scale=float(rng.choice([1.0, 10.0])))
    beta = float(rng.choice([1.0, 0.5, 2.0, -1.0]))
    return [x], {"axis": _rand_axis(rng, len(shape)), "beta": beta}


@log_softmax.sample
def _log_softmax_sample(rng):
    shape = rand_shape(rng, int(rng.integers(1, 5)))
    x = rand_float(rng, shape, _pick_float(rng), scale=float(rng.choice([1.0, 10.0])))
    return [x], {"axis": _rand_axis(rng, len(shape))}


# integer semantics ------------------------------------------------------------------
# TFLite Micro's quantized softmax and mean (rlx_edge.quant.intkernels, imported
# lazily: the quant package builds on the IR types).
@softmax.int_reference
def _softmax_int(ctx, x, *, axis, beta):
    from rlx_edge.quant import intkernels

    a = norm_axis(axis, x.ndim, "softmax")
    xs = np.moveaxis(x, a, -1)  # the kernels normalize the innermost axis, as TFLite does
    out_dt = ctx.out_types[0].dtype.numpy
    xq = ctx.in_types[0].quant
    if x.dtype == np.int8:
        y = intkernels.softmax_int8(xs, x_q=xq, beta=beta, out_dtype=out_dt)
    elif x.dtype == np.int16 and out_dt == np.int16:
        y = intkernels.softmax_int16(xs, x_q=xq, beta=beta)
    else:
        raise NotImplementedError(f"softmax: no integer reference for {x.dtype} -> {out_dt}")
    return np.moveaxis(y, -1, a)


@mean.int_reference
def _mean_int(ctx, x, *, axes, keepdims):
    from rlx_edge.quant import intkernels

    ax = norm_axes(axes, x.ndim, "mean")
    yt = ctx.out_types[0]
    return intkernels.mean(
        x, x_q=ctx.in_types[0].quant, y_q=yt.quant, axes=ax, keepdims=keepdims, out_dtype=yt.dtype.numpy
    )
