"""TFLite fixed-point arithmetic as Amaranth expressions.

Each helper builds the hardware twin of one function of
:mod:`rlx_edge.quant.fixedpoint`, operating on Amaranth values that hold the
C type the numpy function emulates (int32 raws, Q31 multipliers). Shifts and
multipliers may be Python ints (constants, which Yosys folds into cheaper
logic) or signals (per-channel parameters read from a ROM).
"""

from __future__ import annotations

from amaranth.hdl import Array, Const, Mux, Value, signed

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1


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
    nudged = ab + Mux(ab >= 0, 1 << 30, 1 - (1 << 30))
    # C division truncates toward zero; an arithmetic shift floors, so bias negatives first
    return wrap32((nudged + Mux(nudged < 0, (1 << 31) - 1, 0)) >> 31)


def srdhm(a: Value, m: Value | int) -> Value:
    """gemmlowp's ``SaturatingRoundingDoublingHighMul`` of two int32 values (see :func:`srdhm_finish`)."""
    return srdhm_finish(srdhm_product(a, m))


def rounding_divide_by_pot(x: Value, exponent: Value | int, max_exponent: int = 31) -> Value:
    """gemmlowp's ``RoundingDivideByPOT``: ``x / 2**exponent`` rounded half away from zero.

    ``exponent`` is a constant or an unsigned signal up to ``max_exponent``;
    the remainder mask comes from a table so that no variable-width
    subtraction is needed.
    """
    x = Value.cast(x)
    if isinstance(exponent, int):
        if exponent == 0:
            return x
        mask = (1 << exponent) - 1
        remainder = x.as_unsigned() & mask
        threshold = (mask >> 1) + (x < 0)
        return (x >> exponent) + (remainder > threshold)
    width = max(len(x), max_exponent + 1)
    masks = Array(Const((1 << e) - 1, width) for e in range(max_exponent + 1))
    mask = masks[exponent]
    remainder = x.as_signed().as_unsigned() & mask if x.shape().signed else x & mask
    threshold = (mask >> 1) + (x < 0)
    return (x >> exponent) + (remainder > threshold)


def saturating_rounding_multiply_by_pot(x: Value, exponent: int) -> Value:
    """gemmlowp's ``SaturatingRoundingMultiplyByPOT`` for a constant exponent (int32 raws)."""
    if exponent <= 0:
        return rounding_divide_by_pot(x, -exponent)
    threshold = (1 << (31 - exponent)) - 1
    return Mux(x > threshold, INT32_MAX, Mux(x < -threshold, INT32_MIN, wrap32(x << exponent)))


def clamp(v: Value, lo: int, hi: int) -> Value:
    """``min(max(v, lo), hi)`` as an 8-bit signed result."""
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
