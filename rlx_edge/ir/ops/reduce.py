"""Reductions and normalizations along axes: mean, sum, argmax, softmax, log_softmax.

Axes may be negative (counted from the end). Float ops compute f16 in f32
and return the input dtype.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from rlx_edge.ir import fixedpoint as fp
from rlx_edge.ir.dtype import DType, from_numpy
from rlx_edge.ir.ops._common import (
    FLOAT_SAMPLE_DTYPES,
    batch_shifting_axes,
    compute_dtype,
    fail,
    finish,
    norm_axes,
    norm_axis,
    rand_float,
    rand_shape,
)
from rlx_edge.ir.ops._quantized import clamp_cast, scalar_params, storage_range
from rlx_edge.ir.ops._registry import Attr, OpDef, defop
from rlx_edge.ir.shape import Dim, static_dim
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
        return np.clip(fp.round_half_away(y), info.min, info.max).astype(x.dtype)
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


# argmax / argmin ------------------------------------------------------------------
def _arg_reduce(name: str, largest: bool) -> OpDef:
    """Declare argmax (``largest``) or argmin: TFLite's ARG_MAX / ARG_MIN, first index on ties."""
    op = defop(
        name,
        family="reduce",
        inputs=("x",),
        attrs={
            "axis": Attr("int", -1, doc="axis to search (negative counts from the end)"),
            "keepdims": Attr("bool", False, doc="keep the axis as size 1"),
            "dtype": Attr("dtype", "i32", doc="index type, i32 or i64"),
        },
        differentiable=False,
        int_dtypes=("i8",),  # TFLite Micro's ARG_MAX / ARG_MIN: float32 or int8 in, int32 out
        doc=f"Index of the {'largest' if largest else 'smallest'} value along an axis; ties give the first index.",
    )

    @op.infer
    def _infer(x, *, axis, keepdims, dtype):
        dtype = DType(dtype)  # defaults reach here uncoerced, as the string "i32"
        if x.rank == 0:
            fail(f"{name} needs an input of rank >= 1")
        if dtype not in (DType.i32, DType.i64):
            fail(f"{name}: dtype must be i32 or i64, got {dtype}")
        if x.dtype == DType.bool:
            fail(f"{name} needs a numeric input, got bool")
        a = norm_axis(axis, x.rank, name)
        if x.shape[a] == 0:
            fail(f"{name}: axis {a} of shape {list(x.shape)} is empty")
        return TensorType(_reduced_shape(x.shape, (a,), keepdims), dtype)

    def _search(x, *, axis, keepdims, dtype):
        # stored quantized values order like their real values (scale > 0), so one rule serves
        # both: the integer eval (numpy or jax.numpy) is the reference on stored values
        xp = fp.namespace(x)
        fn = xp.argmax if largest else xp.argmin
        return xp.asarray(fn(x, axis=axis, keepdims=keepdims)).astype(DType(dtype).numpy)

    op.reference(_search)
    op.eval(lambda p, x, **attrs: _search(x, **attrs))
    return op


argmax = _arg_reduce("argmax", largest=True)
argmin = _arg_reduce("argmin", largest=False)


# reduce_max / reduce_min ------------------------------------------------------------
def _extreme_reduce(name: str, largest: bool) -> OpDef:
    """Declare reduce_max or reduce_min: TFLite's REDUCE_MAX / REDUCE_MIN.

    Quantized, the output keeps the input's parameters (TFLite Micro requires
    equal scales and zero points) and the kernel picks stored values.
    """
    op = defop(
        name,
        family="reduce",
        inputs=("x",),
        attrs=dict(_REDUCE_ATTRS),
        passthrough_quant=True,
        # TFLite Micro's REDUCE_MAX / REDUCE_MIN: float32 or int8 (an int16 model fails its invoke:
        # "Only float32 and int8 types are supported")
        int_dtypes=("i8",),
        doc=f"{'Largest' if largest else 'Smallest'} value over axes.",
    )

    @op.infer
    def _infer(x, *, axes, keepdims):
        if x.dtype == DType.bool:
            fail(f"{name} needs a numeric input, got bool")
        ax = norm_axes(axes, x.rank, name)
        for a in ax:
            if x.shape[a] == 0:
                fail(f"{name}: axis {a} of shape {list(x.shape)} is empty; no {name[7:]}imum of no values is supported")
        return TensorType(_reduced_shape(x.shape, ax, keepdims), x.dtype, _per_tensor(x))

    def _pick(x, *, axes, keepdims):
        xp = fp.namespace(x)
        ax = norm_axes(axes, x.ndim, name)
        fn = xp.max if largest else xp.min
        return xp.asarray(fn(x, axis=ax, keepdims=keepdims))

    op.reference(_pick)
    op.eval(lambda p, x, **attrs: _pick(x, **attrs))

    # derivatives as JAX takes them: ties share the tangent / cotangent equally
    def _ties(e, x, y, axes):
        """1 where x holds its reduction's extreme, else 0, and how many do, per reduced slice."""
        shape = e.static_shape(x)
        ax = norm_axes(axes, len(shape), name)
        ye = e.expand(y, shape, ax)
        mask = e.sub(e.const(1, x), e.greater(e.sub(ye, x) if largest else e.sub(x, ye), 0))
        return mask, e.sum(mask, axes=ax, keepdims=True), ax

    @op.jvp
    def _jvp(e, primals, outputs, tangents, *, axes, keepdims):
        mask, count, ax = _ties(e, primals[0], outputs[0], axes)
        picked = e.div(e.sum(e.mul(tangents[0], mask), axes=ax, keepdims=True), count)
        return [picked if keepdims else e.reshape(picked, shape=e.static_shape(outputs[0]))]

    @op.vjp
    def _vjp(e, primals, outputs, cotangents, *, axes, keepdims):
        x = primals[0]
        mask, count, ax = _ties(e, x, outputs[0], axes)
        kept = e.reshape(cotangents[0], shape=e.static_shape(count))
        return [e.mul(e.expand(e.div(kept, count), e.static_shape(x), ax), mask)]

    return op


reduce_max = _extreme_reduce("reduce_max", largest=True)
reduce_min = _extreme_reduce("reduce_min", largest=False)


# softmax / log_softmax ------------------------------------------------------------
softmax = defop(
    "softmax",
    family="reduce",
    inputs=("x", "mask?"),
    attrs={
        "axis": Attr("int", -1, doc="normalized axis (negative counts from the end)"),
        "beta": Attr("float", 1.0, doc="inverse temperature: exp(beta * x) is normalized"),
        # TFLite Micro's int8 kernel also writes int16 (keyword_scrambled's last layer)
        "out_dtype": Attr("str", "same", choices=("same", "i16"), doc="quantized: i16 output of an i8 input"),
    },
    doc=(
        "exp(beta * (x - max)) / sum(exp(beta * (x - max))) along an axis; with a bool mask (True = keep, "
        "broadcast to x) over the kept positions only, masked positions (and rows with none kept) are 0."
    ),
)


def _check_mask(x: TensorType, mask: TensorType | None) -> None:
    if mask is None:
        return
    if mask.dtype != DType.bool:
        fail(f"softmax: mask must be bool (True = keep), got {mask.dtype}")
    if mask.rank > x.rank or any(m != 1 and m != d for m, d in zip(mask.shape[::-1], x.shape[::-1])):
        fail(f"softmax: mask of shape {list(mask.shape)} does not broadcast to the input's {list(x.shape)}")


@softmax.infer
def _softmax_infer(x, mask, *, axis, beta, out_dtype):
    _need_float_or_quant(x, "softmax")
    if x.rank == 0:
        fail("softmax needs an input of rank >= 1")
    if not math.isfinite(beta):
        fail(f"softmax: beta must be finite, got {beta}")
    norm_axis(axis, x.rank, "softmax")
    _check_mask(x, mask)
    # quantized softmax outputs have fixed parameters of their own (TFLite: 1/256, -128)
    if out_dtype == "same":
        return TensorType(x.shape, x.dtype)
    if x.dtype not in (DType.i8, DType.i16):
        fail(f"softmax: out_dtype={out_dtype} needs a quantized i8 or i16 input, got {x.dtype}")
    return TensorType(x.shape, DType.i16)


@softmax.reference
def _softmax_ref(x, mask, *, axis, beta, out_dtype):
    z = beta * x.astype(compute_dtype(x.dtype))
    if mask is None:
        if z.size:
            # subtracting the max of beta*x keeps exp in range for either sign of beta
            z = z - z.max(axis=axis, keepdims=True)
        e = np.exp(z)
        return finish(e / e.sum(axis=axis, keepdims=True), from_numpy(x.dtype))
    keep = np.broadcast_to(mask, x.shape)
    # the max over kept positions only (0 for a row with none: its exps are all masked anyway)
    top = np.where(keep, z, -np.inf).max(axis=axis, keepdims=True, initial=-np.inf)
    top = np.where(np.isfinite(top), top, 0)
    e = np.where(keep, np.exp(np.where(keep, z - top, 0)), 0)
    total = e.sum(axis=axis, keepdims=True)
    return finish(e / np.where(total > 0, total, 1), from_numpy(x.dtype))


log_softmax = defop(
    "log_softmax",
    family="reduce",
    inputs=("x",),
    attrs={"axis": Attr("int", -1, doc="normalized axis (negative counts from the end)")},
    int_dtypes=("i8",),  # TFLite Micro's LOG_SOFTMAX: float32 or int8
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


# derivatives ----------------------------------------------------------------------
# sum and mean are linear (the tangent takes the op itself); their cotangent is spread back
# over the reduced axes. softmax's Jacobian beta * (diag(y) - y y^T) is symmetric, so one
# formula serves both modes.
@sum_.jvp
def _sum_jvp(e, primals, outputs, tangents, *, axes, keepdims):
    return [e.sum(tangents[0], axes=axes, keepdims=keepdims)]


@sum_.vjp
def _sum_vjp(e, primals, outputs, cotangents, *, axes, keepdims):
    x = primals[0]
    return [e.expand(cotangents[0], x.shape, norm_axes(axes, x.type.rank, "sum"))]


@mean.jvp
def _mean_jvp(e, primals, outputs, tangents, *, axes, keepdims):
    return [e.mean(tangents[0], axes=axes, keepdims=keepdims)]


@mean.vjp
def _mean_vjp(e, primals, outputs, cotangents, *, axes, keepdims):
    x = primals[0]
    ax = norm_axes(axes, x.type.rank, "mean")
    count = math.prod(static_dim(x.shape[a], "mean axis") for a in ax)
    return [e.mul(e.expand(cotangents[0], x.shape, ax), e.const(1 / count, x))]


def _softmax_lin(e, y, t, axis: int, beta: float):
    """beta * y * (t - sum(t * y)): softmax's Jacobian applied to t."""
    s = e.sum(e.mul(t, y), axes=(axis,), keepdims=True)
    out = e.mul(y, e.sub(t, s))
    return out if beta == 1 else e.mul(out, e.const(beta, y))


# With a mask the same formula holds: y is 0 at masked positions (a constant output), so their
# tangents and cotangents vanish and sum(t * y) runs over the kept ones. The mask has none.
@softmax.jvp
def _softmax_jvp(e, primals, outputs, tangents, *, axis, beta, out_dtype):
    return [_softmax_lin(e, outputs[0], tangents[0], axis, beta)]


@softmax.vjp
def _softmax_vjp(e, primals, outputs, cotangents, *, axis, beta, out_dtype):
    return [_softmax_lin(e, outputs[0], cotangents[0], axis, beta), None]


@log_softmax.jvp
def _log_softmax_jvp(e, primals, outputs, tangents, *, axis):
    t = tangents[0]
    return [e.sub(t, e.sum(e.mul(t, e.exp(outputs[0])), axes=(axis,), keepdims=True))]


@log_softmax.vjp
def _log_softmax_vjp(e, primals, outputs, cotangents, *, axis):
    ct = cotangents[0]
    return [e.sub(ct, e.mul(e.exp(outputs[0]), e.sum(ct, axes=(axis,), keepdims=True)))]


# vmap: the batch axis goes first, the reduced axes move up by one
for _op, _attr in ((sum_, "axes"), (mean, "axes"), (softmax, "axis"), (log_softmax, "axis"), (argmax, "axis"),
                   (argmin, "axis"), (reduce_max, "axes"), (reduce_min, "axes")):  # fmt: skip
    batch_shifting_axes(_op, _attr)


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
        x = rng.integers(-100, 100, shape).astype(rng.choice([np.int32, np.int16, np.int8]))
    else:
        x = rand_float(rng, shape, _pick_float(rng))
    return [x], {"axes": _rand_axes(rng, len(shape)), "keepdims": bool(rng.random() < 0.5)}


mean.sample(lambda rng: _reduce_sample(rng, with_int=False))
sum_.sample(lambda rng: _reduce_sample(rng, with_int=True))
reduce_max.sample(lambda rng: _reduce_sample(rng, with_int=True))
reduce_min.sample(lambda rng: _reduce_sample(rng, with_int=True))


@argmax.sample
@argmin.sample
def _argmax_sample(rng):
    shape = rand_shape(rng, int(rng.integers(1, 5)))
    if rng.random() < 0.3:
        # small integer range makes ties common, exercising first-index-wins
        x = rng.integers(-3, 3, shape).astype(rng.choice([np.int8, np.int16, np.int32]))
    else:
        x = rand_float(rng, shape, _pick_float(rng))
    attrs = {
        "axis": _rand_axis(rng, len(shape)),
        "keepdims": bool(rng.random() < 0.5),
        "dtype": str(rng.choice(["i32", "i64"])),
    }
    return [x], attrs


def _rand_mask(rng: np.random.Generator, shape: tuple[int, ...], axis: int) -> np.ndarray:
    """A bool mask broadcasting to ``shape`` (some dims 1, leading ones dropped), with a fully masked row."""
    drop = int(rng.integers(0, len(shape)))
    full = tuple(1 if rng.random() < 0.3 else d for d in shape)[drop:]
    mask = rng.random(full) < 0.6
    # one row with no kept position (softmax over nothing is all 0): position 0 of every other axis, all of
    # the normalized one (a single element where the mask broadcasts along it)
    a = axis % len(shape) - drop
    rows = mask.size // (full[a] if a >= 0 else 1)
    if rows > 1 or rng.random() < 0.2:  # not always, where that row is the whole mask
        mask[tuple(slice(None) if i == a else 0 for i in range(len(full)))] = False
    return mask


@softmax.sample
def _softmax_sample(rng):
    shape = rand_shape(rng, int(rng.integers(1, 5)))
    x = rand_float(rng, shape, _pick_float(rng), scale=float(rng.choice([1.0, 10.0])))
    beta = float(rng.choice([1.0, 0.5, 2.0, -1.0]))
    axis = _rand_axis(rng, len(shape))
    # masked mostly: the unmasked kernel is TFLite Micro's, pinned by its own tests
    ins = [x, _rand_mask(rng, shape, axis)] if rng.random() < 0.75 else [x]
    return ins, {"axis": axis, "beta": beta}


@log_softmax.sample
def _log_softmax_sample(rng):
    shape = rand_shape(rng, int(rng.integers(1, 5)))
    x = rand_float(rng, shape, _pick_float(rng), scale=float(rng.choice([1.0, 10.0])))
    return [x], {"axis": _rand_axis(rng, len(shape))}


# integer semantics ------------------------------------------------------------------
# TFLite Micro's quantized Softmax (int8 and int16) and Mean, split as its
# kernels are: prepare computes multipliers, shifts and tables once from the
# scales; eval is integer only, in the input's array namespace (numpy, or
# jax.numpy on the jax target). Softmax normalizes the innermost axis, as
# TFLite's kernels do; eval moves the op's axis there and back.
_SCALED_DIFF_INTEGER_BITS = 5  # int8 softmax: differences to the row max in Q5.26
_ACCUMULATION_INTEGER_BITS = 12  # the sum of exps in Q12.19


def _softmax_exps(diff, mult: int, left_shift: int):
    """exp of (non-positive) differences to the row max, scaled by beta * s_x into Q5.26; Q0.31 results."""
    rescaled = fp.multiply_by_quantized_multiplier_greater_than_one(diff, mult, left_shift)
    return fp.exp_on_negative_values(rescaled, _SCALED_DIFF_INTEGER_BITS)


@functools.cache
def _softmax_int16_luts() -> tuple[np.ndarray, np.ndarray]:
    """exp on [-10, 0] (exp(-10) no longer matters to the sum) and 1/(1+x) on [0, 1]: the same for every node."""
    exp_lut = fp.gen_lut_int16(lambda v: np.exp(v, dtype=np.float32), -10.0, 0.0)
    recip_lut = fp.gen_lut_int16(lambda v: np.float32(1) / (np.float32(1) + v), 0.0, 1.0)
    return exp_lut, recip_lut


def int8_softmax_refusal(beta: float, input_scale: float) -> str | None:
    """Why TFLite Micro's int8 SOFTMAX cannot take ``beta`` on this input scale, else None.

    Its PreprocessSoftmaxScaling needs the Q5.26 input multiplier beta * s_x * 2**26 above 1 and
    aborts otherwise (TFLITE_CHECK_GT): a negative, zero or tiny beta has no int8 kernel.
    """
    if float(beta) * float(input_scale) * (1 << (31 - _SCALED_DIFF_INTEGER_BITS)) > 1.0:
        return None
    return (
        f"int8 softmax needs beta * input scale > 2**-26 (TFLite Micro's kernel aborts otherwise), "
        f"got beta={float(beta)} on input scale {float(input_scale):.6g}"
    )


@softmax.prepare
def _softmax_prepare(ctx, *, axis, beta, out_dtype):
    """int8 input: the Q5.26 input multiplier, diff_min and the exp of every byte difference.

    int16 (TFLite's SoftmaxInt16): the multiplier mapping differences so that
    [-10, 0] spans [-65535, 0], and the exp and 1/(1+x) tables.
    """
    xt, yt = ctx.in_types[0], ctx.out_types[0]
    s_x, _ = scalar_params(xt.quant, "softmax input")
    in_dt, out_dt = xt.dtype.numpy, yt.dtype.numpy
    if in_dt == np.int8:
        why = int8_softmax_refusal(beta, s_x)
        if why is not None:
            raise ValueError(why)
        mult, left_shift = fp.preprocess_softmax_scaling(beta, s_x, _SCALED_DIFF_INTEGER_BITS)
        diff_min = -fp.calculate_input_radius(_SCALED_DIFF_INTEGER_BITS, left_shift)
        diffs = -np.arange(256, dtype=np.int64)
        # what a Cortex-M or FPGA kernel looks up instead: exp_table[k] is the exp of difference -k
        exp_table = np.where(diffs >= diff_min, _softmax_exps(diffs, mult, left_shift), 0).astype(np.int32)
        lo, hi = storage_range(out_dt)
        return {
            "kind": "int8", "mult": mult, "left_shift": left_shift, "diff_min": diff_min, "exp_table": exp_table,
            "out_bits": out_dt.itemsize * 8, "out_min": lo, "out_max": hi, "dtype": out_dt.name,
        }  # fmt: skip
    if in_dt == np.int16 and out_dt == np.int16:
        mult, shift = fp.quantize_multiplier(float(np.float32(s_x) * np.float32(beta)) / (10.0 / 65535.0))
        exp_lut, recip_lut = _softmax_int16_luts()
        return {"kind": "int16", "mult": mult, "shift": shift, "exp_lut": exp_lut, "recip_lut": recip_lut}
    raise ValueError(f"softmax has no integer kernel for {xt.dtype} input and {yt.dtype} output")


def _softmax_int8(p, x, keep):
    """TFLite's int8 Softmax (int8 or int16 output), gemmlowp fixed point.

    Exps of the differences are summed in Q12.19 and each multiplied by the
    reciprocal of the sum; differences below ``diff_min`` contribute 0. The
    output is [0, 1) on 2**-8 (int8, zero point -128) or 2**-16 / zero point
    -32768 (int16) steps, as the kernel assumes. ``keep`` (bool, x's shape, or
    None): the max and the sum run over kept positions only and masked ones
    give the output's 0 (``out_min``); with every position kept it is TFLite's.
    """
    xp = fp.namespace(x)
    xi = x.astype(xp.int64)
    if keep is None:
        diff = xi - xi.max(axis=-1, keepdims=True)
        use = diff >= p.diff_min
    else:
        # a row with nothing kept: max -128, every position masked below
        diff = xi - xp.where(keep, xi, -128).max(axis=-1, keepdims=True)
        use = keep & (diff >= p.diff_min)
        diff = xp.where(keep, diff, 0)  # masked differences may be positive: keep the table index in range
    # int8 differences lie in [-255, 0]: prepare's table holds _softmax_exps of each (0 below
    # diff_min, where `use` masks every exp anyway), so looking it up is computing it
    exps = xp.asarray(p.exp_table, dtype=xp.int64)[-diff]
    acc_terms = fp.rounding_divide_by_pot(exps, _ACCUMULATION_INTEGER_BITS)  # Q0.31 -> Q12.19
    sum_of_exps = xp.where(use, acc_terms, 0).sum(axis=-1, keepdims=True)
    if keep is not None:  # exp(0) of a kept row max is never 0: only an empty row sums to 0 (its output is masked)
        sum_of_exps = xp.where(sum_of_exps > 0, sum_of_exps, 1)
    shifted_scale, bits_over_unit = fp.get_reciprocal(sum_of_exps, _ACCUMULATION_INTEGER_BITS)
    unsat = fp.rounding_divide_by_pot(
        fp.saturating_rounding_doubling_high_mul(shifted_scale, exps), bits_over_unit + 31 - p.out_bits
    )
    y = xp.clip(unsat + p.out_min, p.out_min, p.out_max)
    return xp.where(use, y, p.out_min).astype(p.dtype)


def _softmax_int16(p, x, keep):
    """TFLite's int16 Softmax: table lookups for exp and 1/(1+x).

    Rescaled differences are recentred into int16 for the exp table (Q0.15
    results), summed, normalized by the count of leading zeros and inverted
    through the 1/(1+x) table. ``keep`` as for int8: masked positions give 0
    (the output's zero point).
    """
    xp = fp.namespace(x)
    xi = x.astype(xp.int64)
    if keep is None:
        diff = xi - xi.max(axis=-1, keepdims=True)
    else:
        diff = xp.where(keep, xi - xp.where(keep, xi, fp.INT16_MIN).max(axis=-1, keepdims=True), 0)
    scaled = fp.multiply_by_quantized_multiplier(diff, p.mult, p.shift)
    sym = xp.clip(scaled + 32767, fp.INT16_MIN, fp.INT16_MAX)
    exps = fp.int16_table_lookup(sym, p.exp_lut)
    if keep is not None:
        exps = xp.where(keep, exps, 0)
    total = exps.sum(axis=-1, keepdims=True)
    if keep is not None:  # a kept row max's exp is 32767: only an empty row sums to 0 (its output is 0)
        total = xp.where(total > 0, total, 1)
    headroom_plus_one = fp.count_leading_zeros_u32(total)
    shifted_sum = ((total << (headroom_plus_one - 1)) + (1 << 13)) >> 14
    sym_sum = xp.clip(shifted_sum - ((1 << 15) + (1 << 16)), fp.INT16_MIN, fp.INT16_MAX)
    recip = fp.int16_table_lookup(sym_sum, p.recip_lut)
    right_shift = 31 - headroom_plus_one
    y = (exps * recip + (xp.int64(1) << (right_shift - 1))) >> right_shift
    return xp.clip(y, 0, fp.INT16_MAX).astype(xp.int16)


@softmax.eval
def _softmax_eval(p, x, mask, *, axis, beta, out_dtype):
    xp = fp.namespace(x)
    a = norm_axis(axis, x.ndim, "softmax")
    keep = None if mask is None else xp.moveaxis(xp.broadcast_to(xp.asarray(mask, dtype=bool), x.shape), a, -1)
    kernel = _softmax_int8 if p.kind == "int8" else _softmax_int16
    return xp.moveaxis(kernel(p, xp.moveaxis(x, a, -1), keep), -1, a)


def _mean_or_sum_prepare(ctx, axes, what: str) -> dict:
    """TFLite Micro's integer QuantizedMeanOrSum: one multiplier of s_x/s_y, for mean with 1/count folded in.

    For mean the Q31 multiplier is shifted left by floor(log2(count)) (at
    most 32, keeping the total shift >= -31) and divided by count with
    truncation; the input zero point becomes one offset of the sum. Sum
    keeps the plain multiplier (TFLite Micro's SUM, compute_sum).
    """
    xt, yt = ctx.in_types[0], ctx.out_types[0]
    s_x, zp_x = scalar_params(xt.quant, f"{what} input")
    s_y, zp_y = scalar_params(yt.quant, f"{what} output")
    count = math.prod(static_dim(xt.shape[a], "a reduced dimension") for a in norm_axes(axes, xt.rank, what))
    m, e = fp.quantize_multiplier(float(s_x) / float(s_y))
    if what == "mean" and count > 0:
        shift = min(count.bit_length() - 1, 32, 31 + e)
        m = (m << shift) // count
        e = e - shift
    lo, hi = storage_range(yt.dtype.numpy)
    return {
        "sum_offset": int(fp.wrap_int32(-zp_x * count)), "mult": m, "shift": e, "out_zp": zp_y,
        "out_min": lo, "out_max": hi, "dtype": yt.dtype.numpy.name,
    }  # fmt: skip


mean.prepare(lambda ctx, *, axes, keepdims: _mean_or_sum_prepare(ctx, axes, "mean"))
sum_.prepare(lambda ctx, *, axes, keepdims: _mean_or_sum_prepare(ctx, axes, "sum"))


@mean.eval
@sum_.eval
def _mean_eval(p, x, *, axes, keepdims):
    xp = fp.namespace(x)
    ax = norm_axes(axes, x.ndim, "sum or mean")
    total = fp.wrap_int32(x.astype(xp.int64).sum(axis=ax, keepdims=keepdims) + p.sum_offset)
    y = fp.multiply_by_quantized_multiplier(total, p.mult, p.shift) + p.out_zp
    return clamp_cast(y, p.out_min, p.out_max, p.dtype)


# TFLite Micro's int8 LogSoftmax: the output is fixed at scale 16/256 and zero point 127
# (log-probabilities in [-255/16, 0]); differences to the row max in Q5.26 as for softmax,
# their exps summed in Q12.19, and the sum's log (Q5.26) subtracted from each difference.
_LOG_SOFTMAX_OUTPUT_INTEGER_BITS = 4
LOG_SOFTMAX_OUTPUT_SCALE = 16.0 / 256
LOG_SOFTMAX_OUTPUT_ZERO_POINT = 127


@log_softmax.prepare
def _log_softmax_prepare(ctx, *, axis):
    """The Q5.26 input multiplier, its inverse (for the row's cut-off), diff_min, each byte difference's exp."""
    xt, yt = ctx.in_types[0], ctx.out_types[0]
    if xt.dtype != DType.i8 or yt.dtype != DType.i8:
        raise ValueError(f"log_softmax has an integer kernel for int8 only, not {xt.dtype} -> {yt.dtype}")
    s_x, _ = scalar_params(xt.quant, "log_softmax input")
    s_y, zp_y = scalar_params(yt.quant, "log_softmax output")
    if np.float32(s_y) != np.float32(LOG_SOFTMAX_OUTPUT_SCALE) or zp_y != LOG_SOFTMAX_OUTPUT_ZERO_POINT:
        raise ValueError(
            f"log_softmax: int8 output must have scale 16/256 and zero point 127 (TFLite Micro's), "
            f"got {float(s_y)!r}, {zp_y}"
        )
    mult, left_shift = fp.preprocess_softmax_scaling(1.0, s_x, _SCALED_DIFF_INTEGER_BITS)
    reverse_mult, reverse_shift = fp.quantize_multiplier_smaller_than_one_exp((1 << (31 - left_shift)) / mult)
    diff_min = -fp.calculate_input_radius(_SCALED_DIFF_INTEGER_BITS, left_shift)
    diffs = -np.arange(256, dtype=np.int64)
    scaled = fp.multiply_by_quantized_multiplier(diffs, mult, left_shift)
    # per byte difference -k: its Q5.26 value and its exp as a Q12.19 term of the sum (0 below
    # diff_min, which the kernel skips): what a Cortex-M kernel looks up instead of computing
    exp_terms = fp.rounding_divide_by_pot(fp.exp_on_negative_values(scaled, _SCALED_DIFF_INTEGER_BITS),
                                          _ACCUMULATION_INTEGER_BITS)  # fmt: skip
    return {
        "mult": mult, "left_shift": left_shift, "reverse_mult": reverse_mult, "reverse_shift": reverse_shift,
        "diff_min": diff_min, "scaled_table": scaled.astype(np.int32),
        "exp_table": np.where(diffs >= diff_min, exp_terms, 0).astype(np.int32),
    }  # fmt: skip


def _log_softmax_int8(p, x):
    xp = fp.namespace(x)
    xi = x.astype(xp.int64)
    diff = xi - xi.max(axis=-1, keepdims=True)
    # int8 differences lie in [-255, 0]: prepare tabulated each one's Q5.26 value and exp term
    scaled = xp.asarray(p.scaled_table, dtype=xp.int64)[-diff]
    terms = xp.asarray(p.exp_table, dtype=xp.int64)[-diff]
    sum_of_exps = xp.where(diff >= p.diff_min, terms, 0).sum(axis=-1, keepdims=True)
    log_sum = fp.log_x_for_x_greater_than_or_equal_to_1(
        sum_of_exps, _ACCUMULATION_INTEGER_BITS, _SCALED_DIFF_INTEGER_BITS
    )
    # differences whose log-probability lies below Q5.26's range give the lowest output
    cut = fp.multiply_by_quantized_multiplier(fp.wrap_int32(log_sum + fp.INT32_MIN), p.reverse_mult, p.reverse_shift)
    adjusted_diff_min = xp.maximum(p.diff_min - 1, cut)
    to_output = 31 - _SCALED_DIFF_INTEGER_BITS - _LOG_SOFTMAX_OUTPUT_INTEGER_BITS
    out = fp.rounding_divide_by_pot(fp.wrap_int32(scaled - log_sum), to_output) + LOG_SOFTMAX_OUTPUT_ZERO_POINT
    y = xp.clip(out, -128, 127)
    return xp.where(diff > adjusted_diff_min, y, -128).astype(xp.int8)


@log_softmax.eval
def _log_softmax_eval(p, x, *, axis):
    xp = fp.namespace(x)
    a = norm_axis(axis, x.ndim, "log_softmax")
    return xp.moveaxis(_log_softmax_int8(p, xp.moveaxis(x, a, -1)), -1, a)


# cumsum -----------------------------------------------------------------------------------------
cumsum = defop(
    "cumsum",
    family="reduce",
    inputs=("x",),
    attrs={
        "axis": Attr("int", doc="the axis summed along (negative counts from the end)"),
        "exclusive": Attr("bool", False, doc="each output leaves its own element out"),
        "reverse": Attr("bool", False, doc="sum from the axis' end"),
    },
    int_dtypes=("i8",),
    doc="Running sum along one axis (TFLite CUMSUM; integers accumulate in int64 and wrap to the input type).",
)


def _running(xp, v, axis: int, exclusive: bool, reverse: bool):
    """Running sums of ``v`` along ``axis`` in its own dtype: numpy and jax.numpy add in order."""
    if reverse:
        v = xp.flip(v, axis)
    c = xp.cumsum(v, axis=axis, dtype=v.dtype)
    if exclusive:
        c = xp.moveaxis(c, axis, 0)
        c = xp.concatenate([xp.zeros_like(c[:1]), c[:-1]], axis=0)
        c = xp.moveaxis(c, 0, axis)
    return xp.flip(c, axis) if reverse else c


@cumsum.infer
def _cumsum_infer(x, *, axis, exclusive, reverse):
    if x.dtype == DType.bool:
        fail("cumsum needs a numeric input, got bool")
    if x.rank < 1:
        fail("cumsum needs an input of rank >= 1")
    norm_axis(axis, x.rank, "cumsum")
    # running sums leave the input's range: quantized outputs need their own parameters
    return TensorType(x.shape, x.dtype)


@cumsum.reference
def _cumsum_ref(x, *, axis, exclusive, reverse):
    a = norm_axis(axis, x.ndim, "cumsum")
    if x.dtype.kind in "iu":
        return _running(np, x.astype(np.int64), a, exclusive, reverse).astype(x.dtype)
    y = _running(np, x.astype(compute_dtype(x.dtype)), a, exclusive, reverse)
    return finish(y, from_numpy(x.dtype))


@cumsum.sample
def _cumsum_sample(rng):
    shape = rand_shape(rng, int(rng.integers(1, 5)))
    if rng.random() < 0.2:
        x = rng.integers(-100, 100, shape).astype(rng.choice([np.int32, np.int64]))
    else:
        x = rand_float(rng, shape, _pick_float(rng))
    attrs = {"axis": _rand_axis(rng, len(shape)), "exclusive": bool(rng.random() < 0.5)}
    return [x], {**attrs, "reverse": bool(rng.random() < 0.5)}


# linear: its transpose runs the other way along the axis, exclusive as it was
@cumsum.jvp
def _cumsum_jvp(e, primals, outputs, tangents, *, axis, exclusive, reverse):
    return [e.cumsum(tangents[0], axis=axis, exclusive=exclusive, reverse=reverse)]


@cumsum.vjp
def _cumsum_vjp(e, primals, outputs, cotangents, *, axis, exclusive, reverse):
    return [e.cumsum(cotangents[0], axis=axis, exclusive=exclusive, reverse=not reverse)]


batch_shifting_axes(cumsum, "axis")


# TFLite Micro's int8 CUMSUM (cumsum.cc): as ADD, each input's offset value is shifted up 20 bits
# and rescaled by s_x / (2 s_x) (the "twice the larger input scale" of ADD with one input); the
# int32 running sum starts at the rescaled -zero_point (where the kernel starts it, though its
# comment says 0) and each running sum is requantized by 2 s_x / (2**20 s_y).
_CUMSUM_LEFT_SHIFT = 20


@cumsum.prepare
def _cumsum_prepare(ctx, *, axis, exclusive, reverse):
    """The multipliers, the running sum's start and each byte's rescaled value (``table``, int32),
    which the Cortex-M kernel looks up."""
    xt, yt = ctx.in_types[0], ctx.out_types[0]
    if xt.dtype != DType.i8 or yt.dtype != DType.i8:
        raise ValueError(f"cumsum has an integer kernel for int8 only (TFLite Micro's), not {xt.dtype} -> {yt.dtype}")
    s_x, zp_x = scalar_params(xt.quant, "cumsum input")
    s_y, zp_y = scalar_params(yt.quant, "cumsum output")
    twice = 2 * float(s_x)
    in_m, in_e = fp.quantize_multiplier_smaller_than_one_exp(float(s_x) / twice)
    out_m, out_e = fp.quantize_multiplier_smaller_than_one_exp(twice / ((1 << _CUMSUM_LEFT_SHIFT) * float(s_y)))
    p = {"in_zp": zp_x, "in_mult": in_m, "in_shift": in_e, "out_mult": out_m, "out_shift": out_e, "out_zp": zp_y}
    bits = np.arange(256, dtype=np.uint8).view(np.int8)
    p["table"] = np.asarray(_cumsum_scaled(p, bits.astype(np.int64) - zp_x), np.int32)
    p["start"] = int(_cumsum_scaled(p, np.asarray(-zp_x, np.int64)))
    lo, hi = storage_range(np.dtype(np.int8))
    return {**p, "out_min": lo, "out_max": hi, "dtype": "int8"}


def _cumsum_scaled(p, v):
    """Offset input values ``v`` (int64) rescaled: shifted up 20 bits, times the input multiplier."""
    shifted = fp.wrap_int32(v << _CUMSUM_LEFT_SHIFT)
    return fp.multiply_by_quantized_multiplier_smaller_than_one_exp(shifted, p["in_mult"], p["in_shift"])


@cumsum.eval
def _cumsum_eval(p, x, *, axis, exclusive, reverse):
    xp = fp.namespace(x)
    a = norm_axis(axis, x.ndim, "cumsum")
    scaled = _cumsum_scaled(p, x.astype(xp.int64) - p.in_zp)
    total = fp.wrap_int32(_running(xp, scaled, a, exclusive, reverse) + p.start)  # int32 sums wrap, in any order
    y = fp.multiply_by_quantized_multiplier_smaller_than_one_exp(total, p.out_mult, p.out_shift) + p.out_zp
    return clamp_cast(y, p.out_min, p.out_max, p.dtype)


# reduce_all -------------------------------------------------------------------------------------
reduce_all = defop(
    "reduce_all",
    family="reduce",
    inputs=("x",),
    attrs=dict(_REDUCE_ATTRS),
    differentiable=False,
    doc="Logical and over axes of a bool tensor (TFLite REDUCE_ALL).",
)


@reduce_all.infer
def _reduce_all_infer(x, *, axes, keepdims):
    if x.dtype != DType.bool:
        fail(f"reduce_all needs a bool input, got {x.dtype}")
    return TensorType(_reduced_shape(x.shape, norm_axes(axes, x.rank, "reduce_all"), keepdims), DType.bool)


@reduce_all.reference
def _reduce_all_ref(x, *, axes, keepdims):
    return np.asarray(np.all(x, axis=norm_axes(axes, x.ndim, "reduce_all"), keepdims=keepdims))


@reduce_all.sample
def _reduce_all_sample(rng):
    shape = rand_shape(rng, int(rng.integers(1, 5)), hi=3)
    # mostly true, so that whole rows of true (an all of True) occur
    return [rng.random(shape) < 0.85], {"axes": _rand_axes(rng, len(shape)), "keepdims": bool(rng.random() < 0.5)}


batch_shifting_axes(reduce_all, "axes")
