"""TFLite fixed-point arithmetic as Amaranth expressions.

Each helper builds the hardware twin of one function of
:mod:`rlx_edge.ir.fixedpoint`, operating on Amaranth values that hold the
C type the numpy function emulates (int32 raws, Q31 multipliers). Shifts and
multipliers may be Python ints (constants, which Yosys folds into cheaper
logic) or signals (per-channel parameters read from a ROM).

Amaranth does not share common subexpressions: a value used three times is
emitted three times, and nested helpers multiply that (``clamp`` of a
``rounding_divide_by_pot`` was nine copies of its input). Inside
``with sharing(m):`` every helper first puts a reused operand on a wire of
``m`` (a combinational signal), which keeps the Verilog, and the simulator's
C++ compiled from it, linear in the size of the datapath.
"""

from __future__ import annotations

import contextlib
import contextvars

from amaranth.hdl import Const, Module, Mux, Signal, Value, signed, unsigned

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1

_MODULE: contextvars.ContextVar[Module | None] = contextvars.ContextVar("rlx_fpga_module", default=None)


@contextlib.contextmanager
def sharing(m: Module):
    """Helpers called in this block put reused operands on wires of ``m`` (see the module docstring)."""
    token = _MODULE.set(m)
    try:
        yield m
    finally:
        _MODULE.reset(token)


def share(v: Value, name: str = "t") -> Value:
    """``v`` on a combinational wire of the active :func:`sharing` module (``v`` itself outside one)."""
    m = _MODULE.get()
    v = Value.cast(v)
    if m is None or isinstance(v, (Signal, Const)):
        return v
    w = Signal(v.shape(), name=name)
    m.d.comb += w.eq(v)
    return w


def wrap32(v: Value) -> Value:
    """The low 32 bits of ``v`` as a signed value: C's conversion to int32."""
    return Value.cast(v)[:32].as_signed()


def srdhm_product(a: Value, m: Value | int) -> Value:
    """The exact product ``a * m`` of the doubling high multiply; a separate pipeline stage."""
    return a * m


def srdhm_finish(ab: Value) -> Value:
    """``SaturatingRoundingDoublingHighMul`` from the exact product: nudge, then C division by 2**31.

    The saturating case (both operands INT32_MIN) cannot occur: Q31 multipliers
    are non-negative, and the softmax operands never reach it either.
    """
    ab = share(ab, "srdhm_ab")
    nudged = share(ab + Mux(ab >= 0, 1 << 30, 1 - (1 << 30)), "srdhm_nudged")
    # C division truncates toward zero; an arithmetic shift floors, so bias negatives first
    return wrap32((nudged + Mux(nudged < 0, (1 << 31) - 1, 0)) >> 31)


def srdhm(a: Value, m: Value | int) -> Value:
    """gemmlowp's ``SaturatingRoundingDoublingHighMul`` of two int32 values (see :func:`srdhm_finish`)."""
    return srdhm_finish(srdhm_product(a, m))


def rounding_divide_by_pot(x: Value, exponent: Value | int, max_exponent: int = 31) -> Value:
    """gemmlowp's ``RoundingDivideByPOT``: ``x / 2**exponent`` rounded half away from zero.

    ``exponent`` is a constant or an unsigned signal up to ``max_exponent``;
    the remainder mask is a shifted constant (no subtraction, no table).
    """
    x = Value.cast(x)
    if isinstance(exponent, int):
        if exponent == 0:
            return x
        x = share(x, "rdp_x")
        mask = (1 << exponent) - 1
        remainder = x.as_unsigned() & mask
        threshold = (mask >> 1) + (x < 0)
        return (x >> exponent) + (remainder > threshold)
    x = share(x, "rdp_x")
    width = max(len(x), max_exponent + 1)
    ones = Const((1 << width) - 1, unsigned(width))
    mask = share((~(ones << exponent))[:width], "rdp_mask")  # the low ``exponent`` bits set
    remainder = x.as_signed().as_unsigned() & mask if x.shape().signed else x & mask
    threshold = (mask >> 1) + (x < 0)
    return (x >> exponent) + (remainder > threshold)


def saturating_rounding_multiply_by_pot(x: Value, exponent: int) -> Value:
    """gemmlowp's ``SaturatingRoundingMultiplyByPOT`` for a constant exponent (int32 raws)."""
    if exponent <= 0:
        return rounding_divide_by_pot(x, -exponent)
    threshold = (1 << (31 - exponent)) - 1
    x = share(x, "srmp_x")
    return Mux(x > threshold, INT32_MAX, Mux(x < -threshold, INT32_MIN, wrap32(x << exponent)))


def clamp(v: Value, lo: int, hi: int) -> Value:
    """``min(max(v, lo), hi)`` as an 8-bit signed result."""
    v = share(v, "clamp_in")
    return Mux(v < lo, lo, Mux(v > hi, hi, v))[:8].as_signed()


def tree_sum(values: list[Value]) -> Value:
    """A balanced adder tree (log depth instead of a ripple chain of adders)."""
    values = list(values)
    if not values:
        return Const(0, signed(2))
    while len(values) > 1:
        nxt = [values[i] + values[i + 1] for i in range(0, len(values) - 1, 2)]
        if len(values) % 2:
            nxt.append(values[-1])
        values = nxt
    return values[0]


def count_leading_zeros32(x: Value) -> Value:
    """Leading zero bits of a 32-bit value (32 for zero): a priority encoder."""
    result = Const(32, 6)
    for bit in range(32):  # later (higher) bits take priority
        result = Mux(x[bit], 31 - bit, result)
    return result
