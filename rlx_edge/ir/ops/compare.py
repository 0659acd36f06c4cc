"""Comparisons, logical ops and selection: elementwise ops with bool results or conditions.

TFLite's EQUAL, NOT_EQUAL, GREATER, GREATER_EQUAL, LESS, LESS_EQUAL (numbers
in, bool out, numpy broadcasting), LOGICAL_AND, LOGICAL_OR, LOGICAL_NOT (bool
only) and SELECT_V2 (a bool condition picks between two broadcast operands).

Quantized comparisons follow TFLite Micro's comparisons.cc: each int8 input
is rescaled on its own to ``round(real * 256)`` (its offset value shifted
left by 8, times its scale as a multiplier below one) and the two integers
are compared. That is coarser than comparing real values: two inputs within
1/512 of each other may compare equal. TFLite Micro takes int16 inputs in
GREATER only and then compares without rescaling parameters (its Prepare
computes them for int8 alone), so int16 comparisons have no integer
semantics here.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from rlx_edge.errors import UnsupportedOpError
from rlx_edge.ir import fixedpoint as fp
from rlx_edge.ir.dtype import DType, from_numpy
from rlx_edge.ir.ops._common import (
    FLOAT_SAMPLE_DTYPES,
    broadcastable_pair,
    elementwise_dtype,
    fail,
)
from rlx_edge.ir.ops._quantized import bind_byte_pairs, onto_output, onto_output_prepare, scalar_params
from rlx_edge.ir.ops._registry import OpDef, defop
from rlx_edge.ir.shape import broadcast
from rlx_edge.ir.types import TensorType

_LEFT_SHIFT = 8  # comparisons.cc's kLeftShift: offset inputs are compared in units of 1/256


def _common_dtype(a: np.ndarray, b: np.ndarray) -> np.dtype:
    """The storage type both operands are compared in (the binary ops' promotion)."""
    return elementwise_dtype(TensorType(a.shape, from_numpy(a.dtype)), TensorType(b.shape, from_numpy(b.dtype))).numpy


# comparisons -----------------------------------------------------------------------------------
def _compare(name: str, fn: Callable[[Any, Any], Any], *, bools: bool, doc: str) -> OpDef:
    """Declare one comparison; ``bools``: it also takes bool operands (TFLite's EQUAL and NOT_EQUAL)."""
    op = defop(
        name,
        family="compare",
        inputs=("a", "b"),
        elementwise=True,
        differentiable=False,
        int_dtypes=("i8",),
        doc=doc,
    )

    @op.infer
    def _infer(a, b):
        if (a.quant is None) != (b.quant is None):
            fail(f"{name}: operands must both be quantized or both not, got {a} and {b}")
        if not bools and DType.bool in (a.dtype, b.dtype):
            fail(f"{name} compares numbers, got {a.dtype} and {b.dtype} operands (bool only in equal, not_equal)")
        elementwise_dtype(a, b)  # quantized operands must share their storage type
        return TensorType(broadcast(a.shape, b.shape), DType.bool)

    @op.reference
    def _ref(a, b):
        dt = _common_dtype(a, b)
        return np.asarray(fn(a.astype(dt), b.astype(dt)))

    @op.sample
    def _sample(rng):
        a_shape, b_shape = broadcastable_pair(rng, int(rng.integers(0, 5)))
        if rng.random() < 0.5:
            a_shape, b_shape = b_shape, a_shape
        r = rng.random()
        if bools and r < 0.15:
            return [rng.random(a_shape) < 0.5, rng.random(b_shape) < 0.5], {}
        if r < 0.3:  # integer operands (index math), ties common
            dt = (np.int32, np.int64)[int(rng.integers(2))]
            return [rng.integers(-3, 4, a_shape).astype(dt), rng.integers(-3, 4, b_shape).astype(dt)], {}
        dt = FLOAT_SAMPLE_DTYPES[int(rng.integers(len(FLOAT_SAMPLE_DTYPES)))]
        # on a grid of halves, so that equal values (the boundary of every comparison) occur
        a = (np.round(rng.standard_normal(a_shape) * 4) / 2).astype(dt)
        b = (np.round(rng.standard_normal(b_shape) * 4) / 2).astype(dt)
        return [a, b], {}

    @op.prepare
    def _prepare(ctx) -> dict:
        """comparisons.cc's Prepare: each input's offset and its scale as a multiplier below one;
        byte inputs also get each of their 256 values rescaled (``a_table``, ``b_table``, int32)."""
        for t in ctx.in_types:
            if t.dtype not in op.int_dtypes:
                raise UnsupportedOpError(
                    f"node {ctx.node!r} ({name}): TFLite Micro compares quantized int8 inputs only, not {t.dtype}"
                )
        p: dict[str, Any] = {"left_shift": _LEFT_SHIFT}
        for key, t in zip("ab", ctx.in_types):
            s, zp = scalar_params(t.quant, f"{name} input {key}")
            if not s < 1.0:
                # QuantizeMultiplierSmallerThanOneExp (TFLITE_CHECK_LT: TFLite Micro aborts)
                raise ValueError(f"{name} needs input scales below 1, input {key} has {s}")
            mult, shift = fp.quantize_multiplier_smaller_than_one_exp(s)
            p.update({f"{key}_zp": zp, f"{key}_mult": mult, f"{key}_shift": shift})
            p[f"{key}_table"] = np.asarray(
                _rescaled(np.arange(256, dtype=np.uint8).view(np.int8), zp, mult, shift), np.int32
            )
        return p

    @op.eval
    def _eval(p, a, b):
        xp = fp.namespace(a, b)
        return xp.asarray(fn(_rescaled(a, p.a_zp, p.a_mult, p.a_shift), _rescaled(b, p.b_zp, p.b_mult, p.b_shift)))

    op.bind(lambda p, consts: bind_byte_pairs(_eval, p))
    return op


def _rescaled(v: Any, zp: int, mult: int, shift: int) -> Any:
    """One quantized input as comparisons.cc compares it: ((v - zp) << 8) times its scale, in Q31."""
    xp = fp.namespace(v)
    shifted = fp.wrap_int32((v.astype(xp.int64) - zp) << _LEFT_SHIFT)
    return fp.multiply_by_quantized_multiplier_smaller_than_one_exp(shifted, mult, shift)


equal = _compare("equal", operator.eq, bools=True, doc="a == b, broadcast (TFLite EQUAL)")
not_equal = _compare("not_equal", operator.ne, bools=True, doc="a != b, broadcast (TFLite NOT_EQUAL)")
greater = _compare("greater", operator.gt, bools=False, doc="a > b, broadcast (TFLite GREATER)")
greater_equal = _compare("greater_equal", operator.ge, bools=False, doc="a >= b (TFLite GREATER_EQUAL)")
less = _compare("less", operator.lt, bools=False, doc="a < b, broadcast (TFLite LESS)")
less_equal = _compare("less_equal", operator.le, bools=False, doc="a <= b, broadcast (TFLite LESS_EQUAL)")


# logical ops ----------------------------------------------------------------------------------
def _logical(name: str, fn: Callable[..., Any], inputs: tuple[str, ...], doc: str) -> OpDef:
    """Declare one logical op: bool operands (broadcast), a bool result."""
    op = defop(name, family="compare", inputs=inputs, elementwise=True, differentiable=False, doc=doc)

    @op.infer
    def _infer(*xs):
        if any(x.dtype != DType.bool for x in xs):
            fail(f"{name} needs bool operands, got {', '.join(str(x.dtype) for x in xs)}")
        shape = xs[0].shape
        for x in xs[1:]:
            shape = broadcast(shape, x.shape)
        return TensorType(shape, DType.bool)

    @op.reference
    def _ref(*xs):
        return np.asarray(fn(*xs))

    @op.sample
    def _sample(rng):
        a_shape, b_shape = broadcastable_pair(rng, int(rng.integers(0, 5)))
        if rng.random() < 0.5:
            a_shape, b_shape = b_shape, a_shape
        return [rng.random(s) < 0.5 for s in (a_shape, b_shape)[: len(inputs)]], {}

    return op


logical_and = _logical("logical_and", np.logical_and, ("a", "b"), "a and b, broadcast (TFLite LOGICAL_AND)")
logical_or = _logical("logical_or", np.logical_or, ("a", "b"), "a or b, broadcast (TFLite LOGICAL_OR)")
logical_not = _logical("logical_not", np.logical_not, ("x",), "not x (TFLite LOGICAL_NOT)")


# select_v2 -------------------------------------------------------------------------------------
select_v2 = defop(
    "select_v2",
    family="compare",
    inputs=("condition", "x", "y"),
    elementwise=True,
    shared_quant=True,
    # differentiable in x and y, but the autodiff tests draw float operands only and cannot feed its
    # bool condition yet: declared non-differentiable until they can
    differentiable=False,
    doc="x where condition else y, the three broadcast together (TFLite SELECT_V2, ONNX Where)",
)


@select_v2.infer
def _select_infer(condition, x, y):
    if condition.dtype != DType.bool:
        fail(f"select_v2: the condition must be bool, got {condition.dtype}")
    if (x.quant is None) != (y.quant is None):
        fail(f"select_v2: x and y must both be quantized or both not, got {x} and {y}")
    dtype = elementwise_dtype(x, y)
    return TensorType(broadcast(broadcast(condition.shape, x.shape), y.shape), dtype)


@select_v2.reference
def _select_ref(condition, x, y):
    dt = _common_dtype(x, y)
    return np.asarray(np.where(condition, x.astype(dt), y.astype(dt)))


@select_v2.sample
def _select_sample(rng):
    x_shape, c_shape = broadcastable_pair(rng, int(rng.integers(0, 5)))
    y_shape = tuple(1 if rng.random() < 0.3 else d for d in x_shape)[int(rng.integers(0, len(x_shape) + 1)) :]
    if rng.random() < 0.5:
        x_shape, c_shape = c_shape, x_shape
    cond = rng.random(c_shape) < 0.5
    if rng.random() < 0.2:
        dt = (np.int32, np.int8)[int(rng.integers(2))]
        return [cond, rng.integers(-50, 50, x_shape).astype(dt), rng.integers(-50, 50, y_shape).astype(dt)], {}
    dt = FLOAT_SAMPLE_DTYPES[int(rng.integers(len(FLOAT_SAMPLE_DTYPES)))]
    # operands of different ranges: quantized (shared_quant), one set of parameters covers both
    y_scale = float(rng.choice([0.3, 3.0]))
    return [cond, rng.standard_normal(x_shape).astype(dt), (rng.standard_normal(y_shape) * y_scale).astype(dt)], {}


@select_v2.prepare
def _select_prepare(ctx) -> dict:
    """TFLite Micro's SELECT_V2 copies stored values: x and y carry the output's parameters. An operand
    whose parameters differ is requantized to the output's first (TFLite's requantization: one
    multiplier s_in / s_out), which a TFLite export refuses. Byte operands also get ``x_table`` and
    ``y_table``: the value stored for each of their 256 bit patterns."""
    return onto_output_prepare(dict(zip("xy", ctx.in_types[1:])), ctx.out_types[0], "select_v2 ")


@select_v2.eval
def _select_eval(p, condition, x, y):
    xp = fp.namespace(x, y)
    return xp.where(condition, onto_output(p, "x", x), onto_output(p, "y", y))
