"""Elementwise binary ops, unary activations and math, and cast for the jax target (one table row per op).

Float semantics follow the references: f16/bf16 compute in f32 and round
at the end, integer operands compute in int64 and wrap to the result type.
Quantized nodes run their op's own integer ``eval`` (written once, against
the array namespace) on the prepared parameters of the Program.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from rlx_edge.ir.dtype import DType
from rlx_edge.ir.ops import apply_activation, compute_dtype, elementwise_dtype, finish
from rlx_edge.targets.jax._lazy import jnp
from rlx_edge.targets.jax._table import RULES, LowerCtx


# binary --------------------------------------------------------------------------------------
def _int_div(a, b):
    # the reference divides in float64 and truncates toward zero (C and ONNX integer division)
    return jnp.trunc(a / jnp.where(b == 0, 1, b)).astype(jnp.int64)


def _floor_div(a, b):
    # as the reference: floor(a / b) for floats, exact integer division with 0 for b == 0
    if jnp.issubdtype(a.dtype, jnp.floating):
        return jnp.floor(a / b)
    return jnp.floor_divide(a, jnp.where(b == 0, 1, b)) * (b != 0)


def _floor_mod(a, b):
    # TFLite's FloorMod: the C remainder, moved to b's sign where the two differ
    if jnp.issubdtype(a.dtype, jnp.floating):
        r = jnp.fmod(a, b)
    else:
        r = jnp.fmod(a, jnp.where(b == 0, 1, b)) * (b != 0)
    return jnp.where((r != 0) & ((b < 0) != (r < 0)), r + b, r)


_BINARY: dict[str, Callable] = {
    "floor_div": _floor_div,
    "floor_mod": _floor_mod,
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "maximum": lambda a, b: jnp.maximum(a, b),
    "minimum": lambda a, b: jnp.minimum(a, b),
    "squared_difference": lambda a, b: jnp.square(a - b),
    "prelu": lambda a, b: jnp.where(a >= 0, a, a * b),
}


def _float_binary(ctx: LowerCtx, name: str):
    dt = elementwise_dtype(*ctx.in_types)
    act = ctx.attrs.get("activation", "none")
    fn = _BINARY[name]

    def binary(a, b):
        if dt.is_float:
            ct = compute_dtype(dt.numpy)
            return finish(apply_activation(fn(a.astype(ct), b.astype(ct)), act), dt)
        a64, b64 = a.astype(jnp.int64), b.astype(jnp.int64)
        y = _int_div(a64, b64) if name == "div" else fn(a64, b64)
        return apply_activation(y, act).astype(dt.numpy)

    return binary


def _binary_rule(name: str) -> None:
    @RULES.rule(name)
    def rule(ctx: LowerCtx):
        if not ctx.quantized:
            return _float_binary(ctx, name)
        return ctx.shared_eval()


for _name in _BINARY:
    _binary_rule(_name)


@RULES.rule("add_n")
def _add_n(ctx: LowerCtx):
    if ctx.quantized:
        return ctx.shared_eval()
    dt = ctx.in_types[0].dtype
    ct = compute_dtype(dt.numpy) if dt.is_float else jnp.int64

    def add_n(*xs):
        acc = jnp.zeros(xs[0].shape, ct)
        for x in xs:  # in input order, as the reference
            acc = acc + x.astype(ct)
        return finish(acc, dt) if dt.is_float else acc.astype(dt.numpy)

    return add_n


# unary ----------------------------------------------------------------------------------------
def _gelu(x, approximate="none"):
    if approximate == "tanh":
        return 0.5 * x * (1 + jnp.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))
    from jax.scipy.special import erf

    return 0.5 * x * (1 + erf(x / np.sqrt(2)))


def _erf(x):
    from jax.scipy.special import erf

    return erf(x)


_UNARY: dict[str, Callable] = {
    "relu": lambda x: jnp.maximum(x, 0),
    "relu6": lambda x: jnp.clip(x, 0, 6),
    "clamp": lambda x, min, max: jnp.clip(x, min, max),
    "sigmoid": lambda x: 1 / (1 + jnp.exp(-x)),
    "tanh": lambda x: jnp.tanh(x),
    "gelu": _gelu,
    "silu": lambda x: x / (1 + jnp.exp(-x)),
    "hard_swish": lambda x: x * jnp.clip(x + 3, 0, 6) / 6,
    "leaky_relu": lambda x, alpha: jnp.where(x > 0, x, x * alpha),
    "elu": lambda x: jnp.where(x < 0, jnp.expm1(jnp.minimum(x, 0)), x),
    "abs": lambda x: jnp.abs(x),
    "neg": lambda x: jnp.negative(x),
    "square": lambda x: jnp.square(x),
    "sqrt": lambda x: jnp.sqrt(x),
    "rsqrt": lambda x: 1 / jnp.sqrt(x),
    "exp": lambda x: jnp.exp(x),
    "log": lambda x: jnp.log(x),
    "sin": lambda x: jnp.sin(x),
    "cos": lambda x: jnp.cos(x),
    "floor": lambda x: jnp.floor(x),
    "ceil": lambda x: jnp.ceil(x),
    "round": lambda x: jnp.round(x),  # halves to even, as the reference and TFLite
    "erf": _erf,
}


def _float_unary(ctx: LowerCtx, name: str):
    fn = _UNARY[name]
    attrs = dict(ctx.attrs)
    xt = ctx.in_types[0]

    def unary(x):
        if xt.dtype.is_int:
            if name == "clamp":  # numpy clips integers against float bounds, then truncates back
                return jnp.clip(x.astype(jnp.float64), attrs["min"], attrs["max"]).astype(x.dtype)
            return fn(x, **attrs).astype(x.dtype)
        return finish(fn(x.astype(compute_dtype(x.dtype)), **attrs), xt.dtype)

    return unary


def _unary_rule(name: str) -> None:
    @RULES.rule(name)
    def rule(ctx: LowerCtx):
        if not ctx.quantized:
            return _float_unary(ctx, name)
        return ctx.shared_eval()


for _name in _UNARY:
    _unary_rule(_name)


# cast -------------------------------------------------------------------------------------------
@RULES.rule("cast")
def _cast(ctx: LowerCtx):
    src = ctx.in_types[0].dtype
    dst: DType = ctx.attrs["dtype"]

    def cast(x):
        if dst == DType.bool:
            return x != 0
        if dst.is_float:
            return finish(x.astype(jnp.float64 if dst == DType.f64 else jnp.float32), dst)
        if src.is_float:  # truncate toward zero, saturate, NaN -> 0 (comparisons in float64, as the reference)
            t = jnp.trunc(x.astype(jnp.float64))
            big, small = t >= float(dst.max), t <= float(dst.min)
            safe = jnp.where(big | small | jnp.isnan(t), 0, t).astype(jnp.int64)
            return jnp.where(big, dst.max, jnp.where(small, dst.min, safe)).astype(dst.numpy)
        y = x.astype(jnp.int64)
        if dst == DType.i4:
            return (((y + 8) & 15) - 8).astype(jnp.int8)
        return y.astype(dst.numpy)  # wraps modulo 2**bits like C

    return cast
