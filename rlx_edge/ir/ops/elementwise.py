"""Elementwise ops: binary ones with numpy broadcasting, and unary math (abs, sqrt, exp, rounding...)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from rlx_edge.errors import UnsupportedOpError
from rlx_edge.ir import fixedpoint as fp
from rlx_edge.ir.dtype import DType, from_numpy
from rlx_edge.ir.ops._common import (
    ACTIVATION,
    FLOAT_SAMPLE_DTYPES,
    apply_activation,
    broadcastable_pair,
    compute_dtype,
    derivative,
    elementwise_dtype,
    fail,
    finish,
    rand_float,
    rand_shape,
)
from rlx_edge.ir.ops._quantized import (
    activation_clamp,
    bind_byte_pairs,
    byte_table,
    clamp_cast,
    onto_output,
    onto_output_prepare,
    scalar_params,
    storage_range,
)
from rlx_edge.ir.ops._registry import OpDef, defop
from rlx_edge.ir.shape import broadcast
from rlx_edge.ir.types import TensorType


def _binary(
    name: str, fn, *, fused_activation: bool, int_dtypes=("i8", "i16"), shared_quant: bool = False, doc: str
) -> OpDef:
    """Declare one broadcasting binary op; each is one row of this family."""
    op = defop(
        name,
        family="elementwise",
        inputs=("a", "b"),
        attrs={"activation": ACTIVATION} if fused_activation else {},
        inplace=True,
        int_dtypes=int_dtypes,
        shared_quant=shared_quant,
        elementwise=True,
        doc=doc,
    )

    @op.infer
    def _infer(a, b, **attrs):
        return TensorType(broadcast(a.shape, b.shape), elementwise_dtype(a, b))

    @op.reference
    def _ref(a, b, activation="none"):
        dt = elementwise_dtype(TensorType(a.shape, a.dtype), TensorType(b.shape, b.dtype))
        if dt.is_float:
            ct = compute_dtype(dt.numpy)
            return finish(apply_activation(fn(a.astype(ct), b.astype(ct)), activation), dt)
        y = fn(a.astype(np.int64), b.astype(np.int64))
        return apply_activation(y, activation).astype(dt.numpy)

    @op.sample
    def _sample(rng):
        a_shape, b_shape = broadcastable_pair(rng, int(rng.integers(0, 5)))
        if rng.random() < 0.5:
            a_shape, b_shape = b_shape, a_shape
        if rng.random() < 0.2:  # integer operands (index math in ONNX graphs)
            dt = np.int32
            a = rng.integers(-50, 50, a_shape).astype(dt)
            b = rng.integers(1, 20, b_shape).astype(dt)
            if name in _FLOORED:  # both signs: where floored and truncated results differ
                b = (b * rng.choice(np.array([-1, 1], dt), b_shape)).astype(dt)
        else:
            dt = FLOAT_SAMPLE_DTYPES[int(rng.integers(len(FLOAT_SAMPLE_DTYPES)))]
            a, b = rand_float(rng, a_shape, dt), rand_float(rng, b_shape, dt)
            if name in _FLOORED and rng.random() < 0.5:  # halves over quarters: exact multiples occur
                a, b = (np.round(a * 8) / 2).astype(dt), (np.round(b * 4) / 4).astype(dt)
            if name == "div" or name in _FLOORED:
                b = np.where(np.abs(b) < 0.1, 1, b).astype(dt)
        attrs = {"activation": str(rng.choice(["none", "relu", "relu6"]))} if fused_activation else {}
        return [a, b], attrs

    return op


_FLOORED = ("floor_div", "floor_mod")


def _floor_div(a, b):
    """TFLite's FLOOR_DIV: floor(a / b) for floats; integers divide exactly (0 for b == 0)."""
    if a.dtype.kind == "f":
        return np.floor(a / b)
    return np.floor_divide(a, np.where(b == 0, 1, b)) * (b != 0)


def _floor_mod(a, b):
    """TFLite's FLOOR_MOD: the C remainder (fmod for floats), moved to b's sign where they differ.
    Integers take 0 for b == 0."""
    if a.dtype.kind == "f":
        r = np.fmod(a, b)
    else:
        r = np.fmod(a, np.where(b == 0, 1, b)) * (b != 0)
    return np.where((r != 0) & ((b < 0) != (r < 0)), r + b, r)


def _int_div(a, b):
    if a.dtype.kind == "f":
        return a / b
    # integer division truncates toward zero, as in C and ONNX
    return np.trunc(a / np.where(b == 0, 1, b)).astype(np.int64)


add = _binary("add", np.add, fused_activation=True, doc="a + b")
sub = _binary("sub", np.subtract, fused_activation=True, doc="a - b")
mul = _binary("mul", np.multiply, fused_activation=True, doc="a * b")
# TFLite Micro's DIV has an int8 kernel only (and a fused activation, as ADD)
div = _binary(
    "div", _int_div, fused_activation=True, int_dtypes=("i8",), doc="a / b (integers truncate toward zero; TFLite DIV)"
)
maximum = _binary("maximum", np.maximum, fused_activation=False, shared_quant=True, doc="elementwise max(a, b)")
minimum = _binary("minimum", np.minimum, fused_activation=False, shared_quant=True, doc="elementwise min(a, b)")
floor_div = _binary("floor_div", _floor_div, fused_activation=False, doc="floor(a / b), broadcast (TFLite FLOOR_DIV)")
floor_mod = _binary(
    "floor_mod", _floor_mod, fused_activation=False, doc="a - floor(a / b) * b, broadcast (TFLite FLOOR_MOD)"
)
squared_difference = _binary(
    "squared_difference",
    lambda a, b: np.square(a - b),
    fused_activation=False,
    doc="(a - b) ** 2, broadcast (TFLite SQUARED_DIFFERENCE)",
)


def _unary(name: str, fn, *, ints: bool = False, domain: str = "real", int_dtypes=("i8", "i16"), doc: str) -> OpDef:
    """Declare one shape-preserving unary math op (TFLite's elementwise builtins).

    Float inputs compute in f32 (f64 for f64) and round to their type; IEEE
    results outside the domain (NaN, infinities) are the result, not an
    error. ``ints``: plain (unquantized) integer inputs compute in int64 and
    wrap to their type, as C does. ``domain`` is what the sampler draws:
    "real" or "positive" (sqrt, rsqrt, log).
    """
    op = defop(
        name, family="elementwise", inputs=("x",), inplace=True, elementwise=True, int_dtypes=int_dtypes, doc=doc
    )

    @op.infer
    def _infer(x):
        if not x.dtype.is_float and x.quant is None and not (ints and x.dtype.is_int):
            kinds = "a float, integer or quantized" if ints else "a float or quantized"
            fail(f"{name} needs {kinds} input, got {x.dtype}")
        return TensorType(x.shape, x.dtype)

    @op.reference
    def _ref(x):
        if x.dtype.kind in "iu":
            return fn(x.astype(np.int64)).astype(x.dtype)
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            return finish(fn(x.astype(compute_dtype(x.dtype))), from_numpy(x.dtype))

    @op.sample
    def _sample(rng):
        shape = rand_shape(rng, int(rng.integers(0, 5)))
        if ints and rng.random() < 0.2:
            dt = (np.int8, np.int16, np.int32)[int(rng.integers(3))]
            info = np.iinfo(dt)
            return [rng.integers(info.min, int(info.max) + 1, shape).astype(dt)], {}
        dt = FLOAT_SAMPLE_DTYPES[int(rng.integers(len(FLOAT_SAMPLE_DTYPES)))]
        x = rand_float(rng, shape, dt, scale=4.0)
        if rng.random() < 0.3:  # halves, where the rounding ops choose (and floor/ceil of integers)
            x = (np.round(x * 2) / 2).astype(dt)
        if domain == "positive":
            x = (np.abs(x) + np.asarray(0.05, dt)).astype(dt)
        return [x], {}

    return op


abs_ = _unary("abs", np.abs, ints=True, doc="|x| (TFLite ABS)")
neg = _unary("neg", np.negative, ints=True, doc="-x (TFLite NEG)")
square = _unary("square", np.square, ints=True, doc="x * x (TFLite SQUARE)")
sqrt = _unary("sqrt", np.sqrt, domain="positive", doc="sqrt(x) (TFLite SQRT)")
rsqrt = _unary(
    "rsqrt", lambda x: 1 / np.sqrt(x), domain="positive", int_dtypes=("i8",), doc="1 / sqrt(x) (TFLite RSQRT)"
)
exp = _unary("exp", np.exp, doc="e**x (TFLite EXP)")
log = _unary("log", np.log, domain="positive", doc="natural logarithm (TFLite LOG)")
sin = _unary("sin", np.sin, doc="sin(x) (TFLite SIN)")
cos = _unary("cos", np.cos, doc="cos(x) (TFLite COS)")
floor = _unary("floor", np.floor, doc="largest integer <= x (TFLite FLOOR)")
ceil = _unary("ceil", np.ceil, doc="smallest integer >= x (TFLite CEIL)")
# np.round rounds half to even, as TFLite's ROUND (banker's rounding, like tf.round)
round_ = _unary("round", np.round, doc="nearest integer, halves to even (TFLite ROUND)")
# erf is gelu's derivative's building block (ONNX Erf; TFLite has no builtin)
erf = _unary("erf", np.vectorize(math.erf, otypes=[np.float64]), doc="Gauss error function (ONNX Erf)")


prelu = defop(
    "prelu",
    family="elementwise",
    inputs=("x", "alpha"),
    inplace=True,
    elementwise=True,
    doc="x if x >= 0 else alpha * x, alpha broadcast against x (TFLite PRELU, ONNX PRelu)",
)


@prelu.infer
def _prelu_infer(x, alpha):
    if x.dtype.is_float != alpha.dtype.is_float:
        fail(f"prelu: input {x.dtype} and alpha {alpha.dtype} must both be float or both quantized")
    return TensorType(broadcast(x.shape, alpha.shape), x.dtype)


@prelu.reference
def _prelu_ref(x, alpha):
    ct = compute_dtype(x.dtype)
    xf = x.astype(ct)
    return finish(np.where(xf >= 0, xf, xf * alpha.astype(ct)), from_numpy(x.dtype))


@prelu.sample
def _prelu_sample(rng):
    x_shape, a_shape = broadcastable_pair(rng, int(rng.integers(1, 5)))
    dt = FLOAT_SAMPLE_DTYPES[int(rng.integers(len(FLOAT_SAMPLE_DTYPES)))]
    return [rand_float(rng, x_shape, dt), (rng.uniform(-0.5, 1.5, a_shape)).astype(dt)], {}


# derivatives -------------------------------------------------------------------------
# Broadcast operands take the sum of their cotangent over the broadcast axes (sum_to);
# a fused activation masks the cotangent where it clamps (activation_grad).
def _bcast_tangent(e, t, out):
    return None if t is None else e.broadcast_to(t, out.shape)


def _binary_jvp(op: OpDef, combine) -> None:
    """``combine(e, a, b, y, ta, tb)`` is the tangent before the fused activation."""

    @op.jvp
    def _jvp(e, primals, outputs, tangents, activation="none"):
        a, b = primals
        t = combine(e, a, b, outputs[0], *tangents)
        return [e.activation_grad(_bcast_tangent(e, t, outputs[0]), outputs[0], activation)]


def _binary_vjp(op: OpDef, grads) -> None:
    """``grads(e, a, b, y, ct) -> (ct_a, ct_b)`` at the output's shape, then summed to each operand's."""

    @op.vjp
    def _vjp(e, primals, outputs, cotangents, activation="none"):
        a, b = primals
        ct = e.activation_grad(cotangents[0], outputs[0], activation)
        ga, gb = grads(e, a, b, outputs[0], ct)
        return [e.sum_to(ga, a.shape), e.sum_to(gb, b.shape)]


_binary_jvp(add, lambda e, a, b, y, ta, tb: e.add_maybe(ta, tb))
_binary_vjp(add, lambda e, a, b, y, ct: (ct, ct))
_binary_jvp(sub, lambda e, a, b, y, ta, tb: e.add_maybe(ta, None if tb is None else e.neg(tb)))
_binary_vjp(sub, lambda e, a, b, y, ct: (ct, e.neg(ct)))
_binary_jvp(
    mul,
    lambda e, a, b, y, ta, tb: e.add_maybe(None if ta is None else e.mul(ta, b), None if tb is None else e.mul(a, tb)),
)
_binary_vjp(mul, lambda e, a, b, y, ct: (e.mul(ct, b), e.mul(ct, a)))
# d(a/b) = (da - y db) / b
_binary_jvp(div, lambda e, a, b, y, ta, tb: e.div(e.add_maybe(ta, None if tb is None else e.neg(e.mul(tb, y))), b))
_binary_vjp(div, lambda e, a, b, y, ct: (lambda q: (q, e.neg(e.mul(q, y))))(e.div(ct, b)))


def _select_jvp(e, m, ta, tb):
    """m * ta + (1 - m) * tb for a 0/1 mask m."""
    if ta is None:
        return e.sub(tb, e.mul(m, tb))
    if tb is None:
        return e.mul(m, ta)
    return e.add(tb, e.mul(m, e.sub(ta, tb)))


# the larger operand takes the derivative (ties, a set of measure zero, go to b)
_binary_jvp(maximum, lambda e, a, b, y, ta, tb: _select_jvp(e, e.greater(e.sub(a, b), 0), ta, tb))
_binary_vjp(maximum, lambda e, a, b, y, ct: (lambda m: (m, e.sub(ct, m)))(e.mul(ct, e.greater(e.sub(a, b), 0))))
_binary_jvp(minimum, lambda e, a, b, y, ta, tb: _select_jvp(e, e.less(e.sub(a, b), 0), ta, tb))
_binary_vjp(minimum, lambda e, a, b, y, ct: (lambda m: (m, e.sub(ct, m)))(e.mul(ct, e.less(e.sub(a, b), 0))))


# floor_div is piecewise constant: a zero derivative (JAX's convention), not an error
@floor_div.jvp
def _floor_div_jvp(e, primals, outputs, tangents):
    return [None]


@floor_div.vjp
def _floor_div_vjp(e, primals, outputs, cotangents):
    return [None, None]


# floor_mod(a, b) = a - floor(a / b) b, floor(a / b) held constant
_binary_jvp(
    floor_mod,
    lambda e, a, b, y, ta, tb: e.add_maybe(ta, None if tb is None else e.neg(e.mul(tb, e.floor_div(a, b)))),
)
_binary_vjp(floor_mod, lambda e, a, b, y, ct: (ct, e.neg(e.mul(ct, e.floor_div(a, b)))))
# d(a - b)**2 = 2 (a - b) (da - db)
_binary_jvp(
    squared_difference,
    lambda e, a, b, y, ta, tb: e.mul(
        e.mul(e.sub(a, b), e.const(2, y)), e.add_maybe(ta, None if tb is None else e.neg(tb))
    ),
)
_binary_vjp(
    squared_difference,
    lambda e, a, b, y, ct: (lambda g: (g, e.neg(g)))(e.mul(ct, e.mul(e.sub(a, b), e.const(2, y)))),
)


def _prelu_slope(e, x, alpha):
    """1 where x > 0, alpha where x < 0 (output shape)."""
    return e.add(e.greater(x, 0), e.mul(e.less(x, 0), alpha))


@prelu.jvp
def _prelu_jvp(e, primals, outputs, tangents):
    x, alpha = primals
    tx, ta = tangents
    t = None if tx is None else e.mul(tx, _prelu_slope(e, x, alpha))
    # x - relu(x) is x where x < 0, else 0
    t = e.add_maybe(t, None if ta is None else e.mul(ta, e.sub(x, e.relu(x))))
    return [_bcast_tangent(e, t, outputs[0])]


@prelu.vjp
def _prelu_vjp(e, primals, outputs, cotangents):
    x, alpha = primals
    ct = cotangents[0]
    return [
        e.sum_to(e.mul(ct, _prelu_slope(e, x, alpha)), x.shape),
        e.sum_to(e.mul(ct, e.sub(x, e.relu(x))), alpha.shape),
    ]


derivative(abs_)(lambda e, x, y: e.sub(e.greater(x, 0), e.less(x, 0)))
derivative(neg)(lambda e, x, y: e.const(-1, x))
derivative(square)(lambda e, x, y: e.mul(x, e.const(2, x)))
derivative(sqrt)(lambda e, x, y: e.div(e.const(0.5, y), y))
derivative(rsqrt)(lambda e, x, y: e.div(e.mul(y, e.const(-0.5, y)), x))
derivative(exp)(lambda e, x, y: y)
derivative(log)(lambda e, x, y: e.div(e.const(1, x), x))
derivative(sin)(lambda e, x, y: e.cos(x))
derivative(cos)(lambda e, x, y: e.neg(e.sin(x)))
derivative(erf)(lambda e, x, y: e.mul(e.exp(e.neg(e.square(x))), e.const(2 / math.sqrt(math.pi), x)))
# piecewise constant: zero derivative (JAX's convention), not an error
for _op in (floor, ceil, round_):
    derivative(_op)(lambda e, x, y: None)


# integer semantics ------------------------------------------------------------------
# TFLite Micro's quantized ADD / SUB / MUL, split as its kernels are: prepare
# computes the multipliers once from the scales, eval only does integer math.
def _binary_scales(ctx) -> tuple[tuple[float, int], tuple[float, int], tuple[float, int], np.dtype]:
    at, bt = ctx.in_types
    yt = ctx.out_types[0]
    return (
        scalar_params(at.quant, "first input"),
        scalar_params(bt.quant, "second input"),
        scalar_params(yt.quant, "output"),
        yt.dtype.numpy,
    )


def _scaled_input(v: Any, zp: int, left_shift: int, mult: int, shift: int) -> Any:
    """One input of add/sub on the common scale: (v - zp) << left_shift, times its multiplier (< 1)."""
    xp = fp.namespace(v)
    headroom = fp.wrap_int32((v.astype(xp.int64) - zp) << left_shift)
    return fp.multiply_by_quantized_multiplier_smaller_than_one_exp(headroom, mult, shift)


def _add_sub_prepare(subtract: bool):
    def prepare(ctx, activation="none") -> dict:
        """Both inputs go onto twice the larger input scale after 20 bits of headroom (15 for int16 output).

        For byte inputs it also tabulates each input's scaled value over its
        256 bit patterns (``a_table``, ``b_table``, int32; the second negated
        for sub, so that the raw sum is ``a_table[a] + b_table[b]`` either
        way): kernels look the two rescalings up instead of computing them.
        """
        (s1, zp1), (s2, zp2), (s_y, zp_y), dtype = _binary_scales(ctx)
        left_shift = 15 if dtype == np.int16 else 20
        twice_max = 2 * float(max(np.float32(s1), np.float32(s2)))
        m1, e1 = fp.quantize_multiplier_smaller_than_one_exp(float(s1) / twice_max)
        m2, e2 = fp.quantize_multiplier_smaller_than_one_exp(float(s2) / twice_max)
        mo, eo = fp.quantize_multiplier_smaller_than_one_exp(twice_max / ((1 << left_shift) * float(s_y)))
        lo, hi = activation_clamp(activation, ctx.out_types[0].quant, dtype)
        out = {
            "a_zp": zp1, "b_zp": zp2, "left_shift": left_shift,
            "a_mult": m1, "a_shift": e1, "b_mult": m2, "b_shift": e2,
            "out_mult": mo, "out_shift": eo, "out_zp": zp_y,
            "act_min": lo, "act_max": hi, "dtype": dtype.name,
        }  # fmt: skip
        a_dt, b_dt = (t.dtype.numpy for t in ctx.in_types[:2])
        if a_dt.itemsize == 1 and b_dt.itemsize == 1:
            a_bytes = np.arange(256, dtype=np.uint8).view(a_dt)
            b_bytes = np.arange(256, dtype=np.uint8).view(b_dt)
            b_scaled = _scaled_input(b_bytes, zp2, left_shift, m2, e2)
            out["a_table"] = np.asarray(_scaled_input(a_bytes, zp1, left_shift, m1, e1), np.int32)
            out["b_table"] = np.asarray(fp.wrap_int32(-b_scaled) if subtract else b_scaled, np.int32)
        return out

    return prepare


def _add_sub_eval(subtract: bool):
    def evaluate(p, a, b, activation="none"):
        sv1 = _scaled_input(a, p.a_zp, p.left_shift, p.a_mult, p.a_shift)
        sv2 = _scaled_input(b, p.b_zp, p.left_shift, p.b_mult, p.b_shift)
        raw = fp.wrap_int32(sv1 - sv2 if subtract else sv1 + sv2)
        y = fp.multiply_by_quantized_multiplier_smaller_than_one_exp(raw, p.out_mult, p.out_shift) + p.out_zp
        return clamp_cast(y, p.act_min, p.act_max, p.dtype)

    return evaluate


add.prepare(_add_sub_prepare(subtract=False))
sub.prepare(_add_sub_prepare(subtract=True))
add.eval(_add_sub_eval(subtract=False))
sub.eval(_add_sub_eval(subtract=True))


@mul.prepare
def _mul_prepare(ctx, activation="none") -> dict:
    """One multiplier s_a * s_b / s_y for the product of the offset inputs."""
    (s1, zp1), (s2, zp2), (s_y, zp_y), dtype = _binary_scales(ctx)
    m, e = fp.quantize_multiplier(float(s1) * float(s2) / float(s_y))
    lo, hi = activation_clamp(activation, ctx.out_types[0].quant, dtype)
    return {
        "a_zp": zp1, "b_zp": zp2, "out_mult": m, "out_shift": e, "out_zp": zp_y,
        "act_min": lo, "act_max": hi, "dtype": dtype.name,
    }  # fmt: skip


@mul.eval
def _mul_eval(p, a, b, activation="none"):
    xp = fp.namespace(a, b)
    prod = fp.wrap_int32((a.astype(xp.int64) - p.a_zp) * (b.astype(xp.int64) - p.b_zp))
    y = fp.multiply_by_quantized_multiplier(prod, p.out_mult, p.out_shift) + p.out_zp
    return clamp_cast(y, p.act_min, p.act_max, p.dtype)


def _byte_pair_bind(eval_fn):
    """The numpy fast path of add, sub and mul: byte inputs looked up in a table of ``eval_fn`` (the eval)."""

    def bind(p, consts, **attrs):
        return bind_byte_pairs(eval_fn, p, **attrs)

    return bind


add.bind(_byte_pair_bind(_add_sub_eval(subtract=False)))
sub.bind(_byte_pair_bind(_add_sub_eval(subtract=True)))
mul.bind(_byte_pair_bind(_mul_eval))


# squared_difference: TFLite Micro's squared_difference.cc. Both inputs go onto twice the larger
# input scale after ``left_shift`` bits of headroom (7 for int8, so that 255**2 << 14 still fits
# 32 bits; 0 for int16, whose zero points must be 0), the difference is squared in int32 and one
# multiplier (2 max(s_a, s_b))**2 / (2**(2 left_shift) s_y) takes it to the output.
_SQDIFF_LEFT_SHIFT = {np.dtype(np.int8): 7, np.dtype(np.int16): 0}


@squared_difference.prepare
def _sqdiff_prepare(ctx) -> dict:
    """The kernel's multipliers; byte inputs also tabulate each input's scaled value (``a_table``,
    ``b_table`` negated, int32), so that the raw difference is ``a_table[a] + b_table[b]``."""
    (s1, zp1), (s2, zp2), (s_y, zp_y), dtype = _binary_scales(ctx)
    if dtype not in _SQDIFF_LEFT_SHIFT:
        raise UnsupportedOpError(
            f"node {ctx.node!r} (squared_difference): TFLite Micro takes int8 or int16, not {dtype}"
        )
    if dtype == np.int16 and (zp1, zp2, zp_y) != (0, 0, 0):
        raise UnsupportedOpError(
            f"node {ctx.node!r} (squared_difference): int16 needs zero points 0, got {zp1}, {zp2} and {zp_y}"
        )
    left_shift = _SQDIFF_LEFT_SHIFT[dtype]
    twice_max = 2 * float(max(np.float32(s1), np.float32(s2)))
    m1, e1 = fp.quantize_multiplier_smaller_than_one_exp(float(s1) / twice_max)
    m2, e2 = fp.quantize_multiplier_smaller_than_one_exp(float(s2) / twice_max)
    # the kernel's (1 << 2 left_shift) * scale is a float product: exact, a power of two
    mo, eo = fp.quantize_multiplier(twice_max * twice_max / (float(np.float32(s_y)) * (1 << 2 * left_shift)))
    lo, hi = storage_range(dtype)
    out = {
        "a_zp": zp1, "b_zp": zp2, "left_shift": left_shift,
        "a_mult": m1, "a_shift": e1, "b_mult": m2, "b_shift": e2,
        "out_mult": mo, "out_shift": eo, "out_zp": zp_y,
        "act_min": lo, "act_max": hi, "dtype": dtype.name,
    }  # fmt: skip
    if dtype.itemsize == 1:
        bits = np.arange(256, dtype=np.uint8).view(dtype)
        out["a_table"] = np.asarray(_scaled_input(bits, zp1, left_shift, m1, e1), np.int32)
        out["b_table"] = np.asarray(-_scaled_input(bits, zp2, left_shift, m2, e2), np.int32)
    return out


@squared_difference.eval
def _sqdiff_eval(p, a, b):
    sv1 = _scaled_input(a, p.a_zp, p.left_shift, p.a_mult, p.a_shift)
    sv2 = _scaled_input(b, p.b_zp, p.left_shift, p.b_mult, p.b_shift)
    diff = fp.wrap_int32(sv1 - sv2)
    y = fp.multiply_by_quantized_multiplier(fp.wrap_int32(diff * diff), p.out_mult, p.out_shift) + p.out_zp
    return clamp_cast(y, p.act_min, p.act_max, p.dtype)


squared_difference.bind(_byte_pair_bind(_sqdiff_eval))


# maximum / minimum: TFLite Micro's maximum_minimum.cc compares stored values: both inputs carry
# the output's parameters (PTQ quantizes them alike). An operand whose parameters differ is
# requantized to the output's first (one multiplier s_in / s_out), which a TFLite export refuses.
def _extreme_prepare(ctx) -> dict:
    """Per operand (a, b): whether it is requantized, its zero point and multiplier. Byte operands
    also get ``a_table`` / ``b_table``: the output-parameter value of each of their 256 bit patterns."""
    yt = ctx.out_types[0]
    for key, t in zip("ab", ctx.in_types):
        if t.dtype != yt.dtype:
            raise ValueError(f"input {key} is {t.dtype} but the output is {yt.dtype}; quantize them alike")
    return onto_output_prepare(dict(zip("ab", ctx.in_types)), yt)


def _extreme_eval(largest: bool):
    def evaluate(p, a, b):
        xp = fp.namespace(a, b)
        pick = xp.maximum if largest else xp.minimum
        return pick(onto_output(p, "a", a), onto_output(p, "b", b)).astype(p.dtype)

    return evaluate


maximum.prepare(_extreme_prepare)
minimum.prepare(_extreme_prepare)
maximum.eval(_extreme_eval(largest=True))
minimum.eval(_extreme_eval(largest=False))


# div: TFLite Micro's div.cc (reference_ops::DivElementwise). The divisor's offset value goes
# positive (both signs flipped), its reciprocal is GetReciprocal's normalized Q0.31, the dividend
# is shifted up by its redundant sign bits before the high multiply, and one multiplier
# s_a / (s_b s_y) takes the quotient out. That multiplier is computed in double: div.cc writes a
# float32 expression, but the TFLite Micro build we pin computes it in double (measured on all
# byte pairs, tests/frontends/test_tflite_ops_div.py).
@div.prepare
def _div_prepare(ctx, activation="none") -> dict:
    """The multiplier and clamps; per divisor bit pattern, its reciprocal (``b_inv``, Q0.31), the
    reciprocal's shift (``b_shift``) and whether it was negated (``b_neg``), which kernels look up."""
    (s1, zp1), (s2, zp2), (s_y, zp_y), dtype = _binary_scales(ctx)
    if dtype != np.int8 or any(t.dtype.numpy != np.int8 for t in ctx.in_types):
        raise UnsupportedOpError(f"node {ctx.node!r} (div): TFLite Micro's DIV takes int8 only, not {dtype}")
    real = float(np.float32(s1)) / (float(np.float32(s2)) * float(np.float32(s_y)))
    m, e = fp.quantize_multiplier(real)
    # the kernel's right shift, out_shift - reciprocal shift (-1..7) - dividend headroom (23..31),
    # must stay in 0..63, where the reference knows what TFLite Micro computes
    if not -24 <= e <= 22:
        raise UnsupportedOpError(
            f"node {ctx.node!r} (div): scale ratio s_a / (s_b s_y) = {real:.3g} is outside 2**-25 .. 2**22; "
            "requantize an operand or the output"
        )
    lo, hi = activation_clamp(activation, ctx.out_types[0].quant, dtype)
    b_val = np.arange(-128, 128, dtype=np.int64)[np.arange(256) ^ 128] - zp2  # by bit pattern: 0..127, -128..-1
    b_inv, b_shift = fp.get_reciprocal(np.abs(b_val), 31)
    return {
        "a_zp": zp1, "b_zp": zp2, "out_mult": m, "out_shift": e, "out_zp": zp_y,
        "act_min": lo, "act_max": hi, "dtype": dtype.name,
        "b_inv": np.asarray(b_inv, np.int32), "b_shift": np.asarray(b_shift, np.int8),
        "b_neg": np.asarray(b_val < 0, np.int8),
    }  # fmt: skip


@div.eval
def _div_eval(p, a, b, activation="none"):
    xp = fp.namespace(a, b)
    av = a.astype(xp.int64) - p.a_zp
    bv = b.astype(xp.int64) - p.b_zp
    av, bv = xp.where(bv < 0, -av, av), xp.abs(bv)
    inv, recip_shift = fp.get_reciprocal(bv, 31)
    headroom = fp.count_leading_sign_bits(av)
    quotient = fp.multiply_by_quantized_multiplier_greater_than_one(av, inv, headroom)
    # MultiplyByQuantizedMultiplierSmallerThanOneExp, whose shift passes 31 for small dividends
    total_shift = p.out_shift - recip_shift - headroom
    high = fp.saturating_rounding_doubling_high_mul(quotient, p.out_mult)
    y = fp.rounding_divide_by_pot_x86(high, -total_shift) + p.out_zp
    return clamp_cast(y, p.act_min, p.act_max, p.dtype)


div.bind(_byte_pair_bind(_div_eval))


# add_n -----------------------------------------------------------------------------------------
add_n = defop(
    "add_n",
    family="elementwise",
    inputs=("*xs",),
    int_dtypes=("i8",),
    doc="the sum of two or more tensors of one shape and type, no broadcasting (TFLite ADD_N)",
)


@add_n.infer
def _add_n_infer(*xs):
    if len(xs) < 2:
        fail(f"add_n needs at least 2 inputs, got {len(xs)}")
    first = xs[0]
    if first.dtype == DType.bool:
        fail("add_n adds numbers, got bool inputs")
    for i, t in enumerate(xs[1:], 1):
        if t.shape != first.shape:
            fail(f"add_n: input {i} has shape {t.shape} but input 0 has {first.shape}; ADD_N does not broadcast")
        if t.dtype != first.dtype or (t.quant is None) != (first.quant is None):
            fail(f"add_n: input {i} is {t} but input 0 is {first}")
    return TensorType(first.shape, first.dtype)


@add_n.reference
def _add_n_ref(*xs):
    dt = from_numpy(xs[0].dtype)
    ct = compute_dtype(dt.numpy) if dt.is_float else np.int64
    acc = np.zeros(xs[0].shape, ct)
    for x in xs:  # in input order, as TFLite's loop (float sums depend on it)
        acc = acc + x.astype(ct)
    return finish(acc, dt) if dt.is_float else acc.astype(dt.numpy)


@add_n.sample
def _add_n_sample(rng):
    n = int(rng.integers(2, 5))
    shape = rand_shape(rng, int(rng.integers(0, 5)))
    if rng.random() < 0.2:
        return [rng.integers(-50, 50, shape).astype(np.int32) for _ in range(n)], {}
    dt = FLOAT_SAMPLE_DTYPES[int(rng.integers(len(FLOAT_SAMPLE_DTYPES)))]
    # inputs of different ranges: quantized, each gets its own scale
    return [rand_float(rng, shape, dt, scale=float(rng.choice([0.3, 1.0, 3.0]))) for _ in range(n)], {}


@add_n.jvp
def _add_n_jvp(e, primals, outputs, tangents):
    t = None
    for ti in tangents:
        t = e.add_maybe(t, ti)
    return [t]


@add_n.vjp
def _add_n_vjp(e, primals, outputs, cotangents):
    return [cotangents[0]] * len(primals)


_ADD_N_LEFT_SHIFT = 20  # add_n.cc's kAddNIntegerShift


@add_n.prepare
def _add_n_prepare(ctx) -> dict:
    """TFLite Micro's ADD_N (int8, every input on one scale and zero point): each input onto twice the
    largest input scale after 20 bits of headroom, summed, one multiplier (below one) to the output.

    TFLite Micro's sum starts from the first input's scaled ``-zero_point`` (its ``x = 0`` is
    ``input1_offset``), not from 0; ``start`` is that term, kept for bit-exactness. Inputs on
    different scales (which TFLite Micro refuses and the exporter does not write) get a multiplier
    each. ``tables``: each input's scaled value by bit pattern (n x 256, int32).
    """
    yt = ctx.out_types[0]
    if any(t.dtype not in add_n.int_dtypes for t in (*ctx.in_types, yt)):
        raise UnsupportedOpError(f"node {ctx.node!r} (add_n): TFLite Micro's ADD_N takes int8, not {yt.dtype}")
    ins = [scalar_params(t.quant, f"add_n input {i}") for i, t in enumerate(ctx.in_types)]
    s_y, zp_y = scalar_params(yt.quant, "add_n output")
    twice_max = 2 * float(max(np.float32(s) for s, _ in ins))
    mults = [fp.quantize_multiplier_smaller_than_one_exp(float(s) / twice_max) for s, _ in ins]
    mo, eo = fp.quantize_multiplier_smaller_than_one_exp(twice_max / ((1 << _ADD_N_LEFT_SHIFT) * float(s_y)))
    dtype = yt.dtype.numpy
    lo, hi = storage_range(dtype)
    zps = np.array([zp for _, zp in ins], np.int32)
    m_in = np.array([m for m, _ in mults], np.int32)
    e_in = np.array([e for _, e in mults], np.int32)
    start = int(_scaled_input(np.zeros((), np.int8), int(zps[0]), _ADD_N_LEFT_SHIFT, int(m_in[0]), int(e_in[0])))
    bits = np.arange(256, dtype=np.uint8).view(np.int8)
    tables = np.stack(
        [_scaled_input(bits, int(z), _ADD_N_LEFT_SHIFT, int(m), int(e)) for z, m, e in zip(zps, m_in, e_in)]
    )
    return {
        "zps": zps, "mults": m_in, "shifts": e_in, "start": start, "tables": tables.astype(np.int32),
        "out_mult": mo, "out_shift": eo, "out_zp": zp_y, "act_min": lo, "act_max": hi, "dtype": dtype.name,
    }  # fmt: skip


@add_n.eval
def _add_n_eval(p, *xs):
    acc = p.start
    for x, zp, m, e in zip(xs, p.zps, p.mults, p.shifts):
        acc = fp.wrap_int32(acc + _scaled_input(x, int(zp), _ADD_N_LEFT_SHIFT, int(m), int(e)))
    y = fp.multiply_by_quantized_multiplier_smaller_than_one_exp(acc, p.out_mult, p.out_shift) + p.out_zp
    return clamp_cast(y, p.act_min, p.act_max, p.dtype)


@prelu.prepare
def _prelu_prepare(ctx) -> dict:
    """TFLite Micro's Prelu Prepare: s_x / s_y for x >= 0, s_x * s_alpha / s_y for the product, in double."""
    (s_x, zp_x), (s_a, zp_a), (s_y, zp_y), dtype = _binary_scales(ctx)
    m1, e1 = fp.quantize_multiplier(float(s_x) / float(s_y))
    m2, e2 = fp.quantize_multiplier(float(s_x) * float(s_a) / float(s_y))
    lo, hi = activation_clamp("none", ctx.out_types[0].quant, dtype)
    return {
        "x_zp": zp_x, "alpha_zp": zp_a, "id_mult": m1, "id_shift": e1, "alpha_mult": m2, "alpha_shift": e2,
        "out_zp": zp_y, "act_min": lo, "act_max": hi, "dtype": dtype.name,
    }  # fmt: skip


@prelu.eval
def _prelu_eval(p, x, alpha):
    xp = fp.namespace(x, alpha)
    v = x.astype(xp.int64) - p.x_zp
    a = alpha.astype(xp.int64) - p.alpha_zp
    pos = fp.multiply_by_quantized_multiplier(v, p.id_mult, p.id_shift)
    neg = fp.multiply_by_quantized_multiplier(fp.wrap_int32(v * a), p.alpha_mult, p.alpha_shift)
    return clamp_cast(xp.where(v >= 0, pos, neg) + p.out_zp, p.act_min, p.act_max, p.dtype)


# abs / rsqrt: TFLite Micro's elementwise kernels (elementwise.cc). The other unary
# math builtins (NEG, SQUARE, SQRT, EXP, LOG, SIN, COS, FLOOR, CEIL, ROUND) are
# float32 only in TFLite Micro, so they have no integer semantics here either.
def _unary_scales(ctx, op: OpDef) -> tuple[float, int, float, int, np.dtype]:
    """The per-tensor (scale, zero point) of input and output; the input type must be one the kernel takes."""
    dtype = ctx.in_types[0].dtype
    if dtype not in op.int_dtypes:
        have = ", ".join(map(str, op.int_dtypes))
        raise UnsupportedOpError(f"node {ctx.node!r} ({op.name}): the integer kernel takes {have} inputs, not {dtype}")
    s_x, zp_x = scalar_params(ctx.in_types[0].quant, f"{op.name} input")
    s_y, zp_y = scalar_params(ctx.out_types[0].quant, f"{op.name} output")
    return s_x, zp_x, s_y, zp_y, ctx.out_types[0].dtype.numpy


def _tabulated(eval_fn, ctx, dtype, **params) -> dict:
    """``params`` with the storage range as the clamp and the dtype, plus ``eval_fn`` tabulated over
    every byte input (None for wider inputs)."""
    lo, hi = storage_range(dtype)
    p = {**params, "act_min": lo, "act_max": hi, "dtype": dtype.name}
    p["table"] = byte_table(eval_fn, p, ctx.in_types[0].dtype.numpy)
    return p


@abs_.prepare
def _abs_prepare(ctx) -> dict:
    """TFLite Micro's PrepareAbsRsqrt for ABS: a rescale by s_x / s_y (divided in float32) unless the
    float32 scales are equal; int16 needs zero points 0 on both sides."""
    s_x, zp_x, s_y, zp_y, dtype = _unary_scales(ctx, abs_)
    if dtype == np.int16 and (zp_x != 0 or zp_y != 0):
        raise UnsupportedOpError(f"node {ctx.node!r} (abs): int16 needs zero points 0, got {zp_x} and {zp_y}")
    f32 = np.float32
    rescale = bool(f32(s_x) != f32(s_y))
    mult, shift = fp.quantize_multiplier(float(f32(s_x) / f32(s_y))) if rescale else (1 << 30, 1)
    return _tabulated(_abs_eval, ctx, dtype, in_zp=zp_x, out_zp=zp_y, rescale=rescale, mult=mult, shift=shift)


@abs_.eval
def _abs_eval(p, x):
    """|x - zp_x|, rescaled where the scales differ, plus zp_y, clamped to the storage range."""
    xp = fp.namespace(x)
    v = xp.abs(x.astype(xp.int64) - p.in_zp)
    if p.rescale:
        v = fp.multiply_by_quantized_multiplier(v, p.mult, p.shift)
    return clamp_cast(v + p.out_zp, p.act_min, p.act_max, p.dtype)


_RSQRT_SHIFT = 20  # the kernel's headroom: 1/sqrt(v) is first scaled by 2**20 to stay an integer


@rsqrt.prepare
def _rsqrt_prepare(ctx) -> dict:
    """TFLite Micro's PrepareAbsRsqrt for RSQRT (int8 only): one multiplier for
    1 / (sqrt(s_x) * s_y), the square root and product in float32, the division in double."""
    s_x, zp_x, s_y, zp_y, dtype = _unary_scales(ctx, rsqrt)
    f32 = np.float32
    mult, shift = fp.quantize_multiplier(1.0 / float(np.sqrt(f32(s_x)) * f32(s_y)))
    return _tabulated(_rsqrt_eval, ctx, dtype, in_zp=zp_x, out_zp=zp_y, mult=mult, shift=shift)


@rsqrt.eval
def _rsqrt_eval(p, x):
    """v = x - zp_x; 0 gives the largest output. Otherwise 1/sqrt(v) as a multiplier and shift
    (TFLite's GetInvSqrtQuantizedMultiplierExp) applied to 1 with 20 bits of headroom, then the
    output multiplier with the headroom taken back, plus zp_y, clamped.

    TFLite Micro refuses to run on an input below the zero point ("Rsqrt is only defined
    for positive values"); here such a value gets what the kernel's arithmetic gives
    without that check (the result for v = 1). Calibrated on positive data, the input's
    zero point is the storage minimum and no such value exists.
    """
    xp = fp.namespace(x)
    v = x.astype(xp.int64) - p.in_zp
    inv_mult, inv_shift = fp.inv_sqrt_quantized_multiplier_exp(v, -1)
    data = fp.multiply_by_quantized_multiplier(xp.ones_like(v), inv_mult, inv_shift + _RSQRT_SHIFT)
    y = fp.multiply_by_quantized_multiplier(data, p.mult, p.shift - _RSQRT_SHIFT) + p.out_zp
    return clamp_cast(xp.where(v == 0, p.act_max, y), p.act_min, p.act_max, p.dtype)
