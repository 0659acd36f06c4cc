"""Fixed-point arithmetic of the integer reference: the ONE place with rounding.

Every quantized kernel in rlx-edge (the numpy reference, the C emitter, the
Amaranth generator) derives its integer arithmetic from these functions, and
they follow TFLite Micro's *reference* kernels bit for bit (the default,
double-rounding build: ``TFLITE_SINGLE_ROUNDING`` off), which CMSIS-NN also
matches:

- :func:`quantize_multiplier` turns a real scale into a Q31 multiplier and a
  power-of-two shift exactly as TFLite's ``QuantizeMultiplier`` (``frexp`` in
  double precision, round half away from zero, the ``1 << 31`` carry, tiny
  scales flushed to zero);
- :func:`multiply_by_quantized_multiplier` applies it with two roundings:
  a saturating rounding doubling high multiply, then a rounding division by a
  power of two (ties away from zero);
- the gemmlowp fixed-point pieces (``exp_on_negative_values``,
  ``one_over_one_plus_x_for_x_in_0_1``, logistic, tanh, reciprocal, inverse
  square root) that TFLite's int8 softmax, logistic, tanh and rsqrt
  algorithms are written in;
- the table construction and interpolated lookup of TFLite's int16 softmax.

The array functions are written once against an array namespace
(:func:`namespace`): numpy arrays (and Python ints) compute in numpy, jax
arrays and tracers in ``jax.numpy``, so the numpy reference and the JAX
target run the same code. They work on ``int64`` holding values of the C
type they emulate (int32 or int16), so intermediate products never
overflow; where C wraps or saturates, these functions do the same
explicitly. Under jax they need 64-bit types (``jax.enable_x64``). The
functions that turn real scales into integers (``quantize_multiplier*``,
``activation_range``, ``gen_lut_int16``, ...) are prepare-time code: numpy
and Python only.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1
INT16_MIN = -(2**15)
INT16_MAX = 2**15 - 1

Array = Any  # an int64 numpy array or scalar, or a jax array / tracer (see namespace)

__all__ = [
    "INT16_MAX",
    "INT16_MIN",
    "INT32_MAX",
    "INT32_MIN",
    "activation_range",
    "calculate_input_radius",
    "checked_log2",
    "count_leading_sign_bits",
    "count_leading_zeros_u32",
    "down_scale_int32_to_int16_multiplier",
    "exp_on_interval_between_negative_one_quarter_and_0_excl",
    "exp_on_negative_values",
    "gen_lut_int16",
    "get_reciprocal",
    "int16_sigmoid_tanh_input_params",
    "int16_table_lookup",
    "inv_sqrt_quantized_multiplier_exp",
    "logistic_fixed",
    "logistic_int16",
    "multiply_by_quantized_multiplier",
    "multiply_by_quantized_multiplier_greater_than_one",
    "multiply_by_quantized_multiplier_int64",
    "multiply_by_quantized_multiplier_smaller_than_one_exp",
    "namespace",
    "one_minus_x_over_one_plus_x_for_x_in_0_1",
    "one_over_one_plus_x_for_x_in_0_1",
    "preprocess_softmax_scaling",
    "quantize_multiplier",
    "quantize_multiplier_array",
    "quantize_multiplier_greater_than_one",
    "quantize_multiplier_smaller_than_one_exp",
    "round_half_away",
    "rounding_divide_by_pot",
    "rounding_divide_by_pot_x86",
    "rounding_half_sum",
    "saturating_doubling_high_mul_int16",
    "saturating_left_shift_int16",
    "saturating_rounding_doubling_high_mul",
    "saturating_rounding_doubling_high_mul_int16",
    "saturating_rounding_multiply_by_pot",
    "tanh_fixed",
    "tanh_int16",
    "wrap_int32",
]


# array namespace -----------------------------------------------------------------
def namespace(*xs: Any) -> ModuleType:
    """The array namespace of the arguments: jax.numpy if any is a jax array or tracer, else numpy.

    Python ints and numpy arrays or scalars give numpy. jax is never imported
    here: a jax array can only exist once jax is.
    """
    jax = sys.modules.get("jax")
    if jax is not None and any(isinstance(x, jax.Array) for x in xs):
        return jax.numpy
    return np


# rounding of reals --------------------------------------------------------------
def round_half_away(x):
    """``std::round`` (TfLiteRound): nearest integer, ties away from zero, exactly.

    Works elementwise in the input's float precision (float32 stays float32;
    numpy or jax arrays, or Python/numpy scalars), returning the same kind.
    ``floor(|x| + 0.5)`` would be wrong just below a tie (0.49999997f + 0.5f
    rounds to 1.0f); ``x - trunc(x)`` is exact, so comparing the fraction is not.
    """
    xp = namespace(x)
    v = xp.asarray(x)
    if v.dtype.kind != "f":
        return v
    t = xp.trunc(v)
    out = t + xp.where(xp.abs(v - t) >= 0.5, xp.sign(v), 0).astype(v.dtype)
    return out if xp is not np or out.ndim else out[()]


# QuantizeMultiplier ----------------------------------------------------------------
def quantize_multiplier(scale: float) -> tuple[int, int]:
    """A real multiplier as ``(q, shift)`` with ``scale ~= q * 2**(shift - 31)``.

    ``q`` is a Q31 int32 in ``[2**30, 2**31 - 1]`` (or 0), ``shift`` the
    power of two (positive: left). Exactly TFLite's ``QuantizeMultiplier``:
    ``frexp`` in double, ``round(mantissa * 2**31)`` half away from zero, a
    mantissa that rounds up to ``2**31`` halves with ``shift + 1``, and shifts
    below -31 flush the multiplier to zero.
    """
    scale = float(scale)
    if scale == 0.0:
        return 0, 0
    if not math.isfinite(scale):
        raise ValueError(f"cannot quantize a non-finite multiplier {scale!r}")
    mant, shift = math.frexp(scale)
    q = int(round_half_away(np.float64(mant * 2.0**31)))
    if q == 2**31 or q == -(2**31):
        q //= 2
        shift += 1
    if q > INT32_MAX:  # cannot happen after the carry above; kept as TFLite checks it
        raise ValueError(f"multiplier {scale!r} overflows Q31")
    if shift < -31:
        return 0, 0
    return q, shift


def quantize_multiplier_array(scales) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel :func:`quantize_multiplier`: int64 arrays ``(multipliers, shifts)``."""
    flat = np.asarray(scales, dtype=np.float64).reshape(-1)
    pairs = [quantize_multiplier(float(s)) for s in flat]
    mult = np.array([p[0] for p in pairs], dtype=np.int64).reshape(np.shape(scales))
    shift = np.array([p[1] for p in pairs], dtype=np.int64).reshape(np.shape(scales))
    return mult, shift


def quantize_multiplier_smaller_than_one_exp(scale: float) -> tuple[int, int]:
    """TFLite's ``QuantizeMultiplierSmallerThanOneExp``: ``0 < scale < 1``, shift <= 0."""
    if not 0.0 < scale < 1.0:
        raise ValueError(f"multiplier {scale!r} must lie in (0, 1)")
    q, shift = quantize_multiplier(scale)
    if shift > 0:
        raise ValueError(f"multiplier {scale!r} gave a left shift {shift}")
    return q, shift


def quantize_multiplier_greater_than_one(scale: float) -> tuple[int, int]:
    """TFLite's ``QuantizeMultiplierGreaterThanOne``: ``scale > 1``, shift >= 0."""
    if not scale > 1.0:
        raise ValueError(f"multiplier {scale!r} must be greater than 1")
    q, shift = quantize_multiplier(scale)
    if shift < 0:
        raise ValueError(f"multiplier {scale!r} gave a right shift {shift}")
    return q, shift


def down_scale_int32_to_int16_multiplier(q: int) -> int:
    """A Q31 multiplier rounded to Q15 (TFLite's ``DownScaleInt32ToInt16Multiplier``), saturating."""
    if q < 0:
        raise ValueError("multiplier must be non-negative")
    if q >= INT32_MAX - (1 << 15):
        return INT16_MAX
    return (q + (1 << 15)) >> 16


# integer primitives ---------------------------------------------------------------------
def _i64(x, xp: ModuleType = np) -> Array:
    return xp.asarray(x, dtype=xp.int64)


def wrap_int32(x) -> Array:
    """Reduce int64 values modulo 2**32 into int32's range (what C's conversion does)."""
    x = _i64(x, namespace(x))
    return ((x + 2**31) & 0xFFFFFFFF) - 2**31


def _trunc_div_pot(x: Array, bits: int) -> Array:
    """``x / 2**bits`` truncating toward zero, as C's integer division does."""
    return namespace(x).where(x >= 0, x >> bits, -((-x) >> bits))


def saturating_rounding_doubling_high_mul(a, b) -> Array:
    """gemmlowp's int32 ``SaturatingRoundingDoublingHighMul``: ``round(a * b / 2**31)``.

    Ties round away from zero (a nudge of ±2**30 then C division); the one
    product that overflows, ``INT32_MIN * INT32_MIN``, saturates to ``INT32_MAX``.
    """
    xp = namespace(a, b)
    ab = _i64(a, xp) * _i64(b, xp)  # |a*b| <= 2**62: exact in int64
    # C: trunc((ab + nudge) / 2**31). For ab >= 0 that is floor((ab + 2**30) / 2**31). For ab < 0,
    # ab + 1 - 2**30 < 0, and trunc(v / 2**31) = ceil(v / 2**31) = floor((v + 2**31 - 1) / 2**31)
    # = floor((ab + 2**30) / 2**31) again: one arithmetic shift for both signs. The only result
    # above INT32_MAX is 2**31, from the one overflowing product INT32_MIN * INT32_MIN = 2**62
    # (the next largest, INT32_MIN * (INT32_MIN + 1), gives 2**31 - 1): the minimum saturates it.
    return xp.minimum((ab + (1 << 30)) >> 31, INT32_MAX)


def rounding_divide_by_pot(x, exponent) -> Array:
    """gemmlowp's ``RoundingDivideByPOT``: ``x / 2**exponent`` rounded, ties away from zero.

    ``exponent`` (0..31) may be an array broadcasting against ``x`` (per-channel shifts).
    """
    xp = namespace(x, exponent)
    x, e = _i64(x, xp), _i64(exponent, xp)
    # gemmlowp adds 1 to floor(x / 2**e) when the remainder r = x mod 2**e exceeds
    # 2**(e-1) - 1 + (x < 0), i.e. when r >= 2**(e-1) (x >= 0) or r >= 2**(e-1) + 1 (x < 0):
    # that is floor((x + 2**(e-1) - (x < 0)) / 2**e) for e >= 1, and x itself for e = 0.
    half = (xp.int64(1) << e) >> 1
    return (x + half - ((x < 0) & (e > 0))) >> e


def rounding_divide_by_pot_x86(x, exponent) -> Array:
    """``RoundingDivideByPOT`` as TFLite Micro's x86-64 build computes it for ``exponent`` 0..63.

    Past 31, outside what gemmlowp asserts (TFLite Micro's DIV reaches it for small dividends),
    its int32 mask ``(1ll << exponent) - 1`` truncates to -1 and the x86 shift takes the count
    modulo 32: ``(x >> (exponent - 32)) + (x >= 0)``. The reference pins that build, so do we.
    """
    xp = namespace(x, exponent)
    x, e = _i64(x, xp), _i64(exponent, xp)
    wide = (x >> (e & 31)) + (x >= 0)
    return xp.where(e > 31, wide, rounding_divide_by_pot(x, xp.minimum(e, 31)))


def multiply_by_quantized_multiplier(x, multiplier, shift) -> Array:
    """TFLite's int32 ``MultiplyByQuantizedMultiplier`` (double rounding).

    A positive ``shift`` is applied first as a left shift of ``x`` (wrapping in
    int32 like the C code), then the doubling high multiply rounds once, and a
    negative ``shift`` divides by a power of two rounding again. ``multiplier``
    and ``shift`` may be per-channel arrays that broadcast against ``x``.
    """
    xp = namespace(x, multiplier, shift)
    x, shift = _i64(x, xp), _i64(shift, xp)
    left = xp.maximum(shift, 0)
    right = xp.maximum(-shift, 0)
    shifted = wrap_int32(x << left)
    return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(shifted, multiplier), right)


def multiply_by_quantized_multiplier_int64(x, multiplier, shift) -> Array:
    """TFLite's ``MultiplyByQuantizedMultiplier(int64_t x, ...)`` used with 64-bit accumulators (16x8).

    The Q31 multiplier is first reduced to Q15 (rounded, saturating at
    0x7FFF), then one rounding shift by ``15 - shift``; the result is
    truncated to int32 as the C code's conversion does.
    """
    xp = namespace(x, multiplier, shift)
    x, m, shift = _i64(x, xp), _i64(multiplier, xp), _i64(shift, xp)
    reduced = xp.where(m < 0x7FFF0000, (m + (1 << 15)) >> 16, 0x7FFF)
    total = 15 - shift
    rnd = xp.int64(1) << (total - 1)
    return wrap_int32((x * reduced + rnd) >> total)


def multiply_by_quantized_multiplier_smaller_than_one_exp(x, multiplier, left_shift) -> Array:
    """TFLite's ``MultiplyByQuantizedMultiplierSmallerThanOneExp``: high multiply, then divide by 2**-left_shift."""
    xp = namespace(x, multiplier, left_shift)
    return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(x, multiplier), -_i64(left_shift, xp))


def multiply_by_quantized_multiplier_greater_than_one(x, multiplier, left_shift) -> Array:
    """TFLite's ``MultiplyByQuantizedMultiplierGreaterThanOne``: left shift (int32 wrap), then high multiply."""
    xp = namespace(x, multiplier, left_shift)
    return saturating_rounding_doubling_high_mul(wrap_int32(_i64(x, xp) << _i64(left_shift, xp)), multiplier)


def saturating_rounding_multiply_by_pot(x, exponent: int) -> Array:
    """gemmlowp's ``SaturatingRoundingMultiplyByPOT<exponent>`` on int32 raws (``exponent`` a Python int)."""
    xp = namespace(x)
    x = _i64(x, xp)
    if exponent == 0:
        return x
    if exponent < 0:
        return rounding_divide_by_pot(x, -exponent)
    threshold = (1 << (31 - exponent)) - 1
    y = wrap_int32(x << exponent)
    y = xp.where(x > threshold, INT32_MAX, y)
    return xp.where(x < -threshold, INT32_MIN, y)


def rounding_half_sum(a, b) -> Array:
    """gemmlowp's int32 ``RoundingHalfSum``: ``(a + b) / 2`` rounded away from zero."""
    xp = namespace(a, b)
    s = _i64(a, xp) + _i64(b, xp)
    sign = xp.where(s >= 0, 1, -1)
    t = s + sign
    return xp.where(t >= 0, t // 2, -((-t) // 2))


def count_leading_zeros_u32(x) -> Array:
    """Leading zero bits of ``x`` as a uint32 (32 for zero)."""
    xp = namespace(x)
    x = _i64(x, xp) & 0xFFFFFFFF
    # below 2**53 float64 holds x exactly, and frexp's exponent is then its bit length (0 for 0)
    _, bit_length = xp.frexp(x.astype(xp.float64))
    return 32 - bit_length.astype(xp.int64)


def count_leading_sign_bits(x) -> Array:
    """TFLite's ``CountLeadingSignBits`` of an int32: the redundant sign bits (31 for 0 and -1)."""
    xp = namespace(x)
    x = _i64(x, xp)
    # INT32_MIN has none; its 2 * -x - 1 would not fit the uint32 the C code computes in
    return xp.where(
        x >= 0, count_leading_zeros_u32(x) - 1, xp.where(x == INT32_MIN, 0, count_leading_zeros_u32(-2 * x - 1))
    )


# activation range -----------------------------------------------------------------------
def activation_range(activation: str, scale: float, zero_point: int, qmin: int, qmax: int) -> tuple[int, int]:
    """TFLite's ``CalculateActivationRangeQuantized`` for a fused activation.

    The bounds 0, 6, -1, 1 are quantized in float32 (``f / scale``, rounded
    half away from zero) and clipped to the storage range ``[qmin, qmax]``.
    """

    def q(f: float) -> int:
        v = np.float32(f) / np.float32(scale)
        return int(zero_point) + int(round_half_away(v))

    if activation == "none":
        return qmin, qmax
    if activation == "relu":
        return max(qmin, q(0.0)), qmax
    if activation == "relu6":
        return max(qmin, q(0.0)), min(qmax, q(6.0))
    if activation == "relu_n1_to_1":
        return max(qmin, q(-1.0)), min(qmax, q(1.0))
    raise ValueError(f"unknown fused activation {activation!r}")


# softmax / logistic / tanh scaling ----------------------------------------------------------
def calculate_input_radius(input_integer_bits: int, input_left_shift: int, total_signed_bits: int = 31) -> int:
    """TFLite's ``CalculateInputRadius``: the largest input difference that does not saturate."""
    v = (
        1.0
        * ((1 << input_integer_bits) - 1)
        * (1 << (total_signed_bits - input_integer_bits))
        / (1 << input_left_shift)
    )
    return math.floor(v)


def preprocess_softmax_scaling(beta: float, input_scale: float, input_integer_bits: int) -> tuple[int, int]:
    """TFLite's ``PreprocessSoftmaxScaling`` (double rounding): ``(multiplier, left_shift)``."""
    real = min(float(beta) * float(input_scale) * (1 << (31 - input_integer_bits)), (1 << 31) - 1.0)
    return quantize_multiplier_greater_than_one(real)


# gemmlowp fixed point ------------------------------------------------------------------------
# A FixedPoint<int32, k> holds raw / 2**(31 - k). Products of two fixed-point
# values are saturating rounding doubling high multiplies of the raws.
_mul = saturating_rounding_doubling_high_mul


def exp_on_interval_between_negative_one_quarter_and_0_excl(a) -> Array:
    """exp(a) for Q0.31 ``a`` in [-1/4, 0): a 4th-order Taylor expansion around -1/8, Q0.31 result."""
    a = _i64(a, namespace(a))
    constant_term = 1895147668  # exp(-1/8) in Q0.31
    constant_1_over_3 = 715827883
    x = a + (1 << 28)  # a + 1/8
    x2 = _mul(x, x)
    x3 = _mul(x2, x)
    x4 = _mul(x2, x2)
    x4_over_4 = saturating_rounding_multiply_by_pot(x4, -2)
    poly = saturating_rounding_multiply_by_pot(_mul(x4_over_4 + x3, constant_1_over_3) + x2, -1)
    return constant_term + _mul(constant_term, x + poly)


# exp(-2**k) in Q0.31 for the barrel shifter over the integer bits of the input
_EXP_BARREL = ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308), (2, 39332535), (3, 720401), (4, 242))


def exp_on_negative_values(a, integer_bits: int) -> Array:
    """gemmlowp's ``exp_on_negative_values``: exp of a Q(integer_bits).(31-integer_bits) value <= 0, in Q0.31.

    The fractional part modulo 1/4 goes through the Taylor polynomial; each
    set bit of the remainder multiplies by a constant exp(-2**k).
    """
    xp = namespace(a)
    a = _i64(a, xp)
    frac_bits = 31 - integer_bits
    one_quarter = 1 << (frac_bits - 2)
    mask = one_quarter - 1
    a_mod_quarter_minus_one_quarter = (a & mask) - one_quarter
    result = exp_on_interval_between_negative_one_quarter_and_0_excl(
        saturating_rounding_multiply_by_pot(a_mod_quarter_minus_one_quarter, integer_bits)
    )
    remainder = a_mod_quarter_minus_one_quarter - a
    for exponent, multiplier in _EXP_BARREL:
        if integer_bits > exponent:
            bit = 1 << (frac_bits + exponent)
            result = xp.where((remainder & bit) != 0, _mul(result, multiplier), result)
    if integer_bits > 5:
        clamp = -(1 << (36 - integer_bits))  # -32 in the input format
        result = xp.where(a < clamp, 0, result)
    return xp.where(a == 0, INT32_MAX, result)


_F2_ONE = 1 << 29
_C48_OVER_17 = 1515870810  # Q2.29
_CNEG32_OVER_17 = -1010580540  # Q2.29


def _newton_reciprocal_half(a: Array) -> Array:
    """Q2.29 approximation of 1 / ((1 + a) / 2) by three Newton-Raphson steps (a in Q0.31)."""
    half_denominator = rounding_half_sum(a, INT32_MAX)
    x = _C48_OVER_17 + _mul(half_denominator, _CNEG32_OVER_17)
    for _ in range(3):
        # gemmlowp's FixedPoint + and - wrap in int32: never inside a in [0, 1), but a = -1 (the
        # reciprocal of 0 TFLite Micro's DIV takes for a zero divisor) overflows
        one_minus = wrap_int32(_F2_ONE - _mul(half_denominator, x))
        x = wrap_int32(x + saturating_rounding_multiply_by_pot(_mul(x, one_minus), 2))
    return x


def one_over_one_plus_x_for_x_in_0_1(a) -> Array:
    """gemmlowp's ``one_over_one_plus_x_for_x_in_0_1``: 1 / (1 + a) for Q0.31 ``a`` in [0, 1), Q0.31."""
    x = _newton_reciprocal_half(_i64(a, namespace(a)))
    return saturating_rounding_multiply_by_pot(x, 1)  # x / 2 as Q1.30, rescaled to Q0.31


def one_minus_x_over_one_plus_x_for_x_in_0_1(a) -> Array:
    """gemmlowp's ``one_minus_x_over_one_plus_x_for_x_in_0_1``: (1 - a) / (1 + a), Q0.31."""
    x = _newton_reciprocal_half(_i64(a, namespace(a)))
    return saturating_rounding_multiply_by_pot(x - _F2_ONE, 2)


def logistic_fixed(a, integer_bits: int) -> Array:
    """gemmlowp's ``logistic`` of a Q(integer_bits) value, Q0.31 result."""
    xp = namespace(a)
    a = _i64(a, xp)
    positive = a > 0
    abs_a = xp.where(positive, a, -a)
    r_pos = one_over_one_plus_x_for_x_in_0_1(exp_on_negative_values(-abs_a, integer_bits))
    r_neg = INT32_MAX - r_pos
    return xp.where(a == 0, 1 << 30, xp.where(positive, r_pos, r_neg))


def tanh_fixed(a, integer_bits: int) -> Array:
    """gemmlowp's ``tanh`` of a Q(integer_bits) value, Q0.31 result."""
    xp = namespace(a)
    a = _i64(a, xp)
    negative = a < 0
    n = xp.where(negative, a, -a)
    # exp(2n): doubling the value is reinterpreting the raw with one more integer bit
    t = one_minus_x_over_one_plus_x_for_x_in_0_1(exp_on_negative_values(n, integer_bits + 1))
    return xp.where(a == 0, 0, xp.where(negative, -t, t))


def get_reciprocal(x, x_integer_digits: int) -> tuple[Array, Array]:
    """TFLite's ``GetReciprocal``: 1/x for a positive Q(x_integer_digits) ``x``.

    Returns ``(shifted_scale, num_bits_over_unit)``: a Q0.31 reciprocal of x
    normalized into [1, 2), and how many bits x lay above 1.
    """
    x = _i64(x, namespace(x))
    headroom_plus_one = count_leading_zeros_u32(x)
    num_bits_over_unit = x_integer_digits - headroom_plus_one
    shifted_sum_minus_one = wrap_int32(((x << headroom_plus_one) & 0xFFFFFFFF) - (1 << 31))
    return one_over_one_plus_x_for_x_in_0_1(shifted_sum_minus_one), num_bits_over_unit


# ln(2), 2**-1/4, 2**-1/2 and the rational approximation's coefficients, Q0.31 (TFLite's values)
_LN_2 = 1488522236
_SQRT_SQRT_HALF = 1805811301
_SQRT_HALF = 1518500250
_LOG_ALPHA_N = 117049297  # 11/240 * 2**(1/4)
_LOG_ALPHA_D = 127690142  # 1/20 * 2**(1/4)
_LOG_ALPHA_I = 1057819769  # 2 / 2**(1/4) - 2**(1/4)
_LOG_ALPHA_F = 638450708  # 1/4 * 2**(1/4)


def _saturating_shift_left(x, exponent) -> Array:
    """gemmlowp's ``SaturatingRoundingMultiplyByPOTParam`` for exponents >= 0 that may be arrays."""
    xp = namespace(x, exponent)
    x, e = _i64(x, xp), _i64(exponent, xp)
    threshold = (xp.int64(1) << (31 - e)) - 1
    y = wrap_int32(x << e)
    y = xp.where(x > threshold, INT32_MAX, y)
    return xp.where(x < -threshold, INT32_MIN, y)


def log_x_for_x_greater_than_or_equal_to_1(x, input_integer_bits: int, output_integer_bits: int) -> Array:
    """TFLite's ``log_x_for_x_greater_than_or_equal_to_1``: ln of a Q(input_integer_bits) raw >= 1.0.

    x = 2**k * r with the mantissa r normalized into [2**-1/2, 1) (taking the
    better of two normalizations, one pre-multiplied by 2**-1/2); ln(x) is then
    k * ln(2) plus a rational approximation of ln(r) around 2**-1/4. Sums are
    formed with one spare integer bit (k * ln 2 alone may saturate) and
    rescaled to Q(output_integer_bits) at the end.
    """
    xp = namespace(x)
    z = _i64(x, xp)
    accum_bits = output_integer_bits + 1
    quarter = rounding_divide_by_pot(1 << 29, accum_bits)  # 1/4 in Q(accum_bits)
    to_accum = 31 - accum_bits  # an integer k as a Q(accum_bits) raw

    headroom_a = count_leading_zeros_u32(z)
    r_a = _saturating_shift_left(_mul(_saturating_shift_left(z, headroom_a - 1), _SQRT_HALF), 1)
    k_a = xp.clip(saturating_rounding_multiply_by_pot(input_integer_bits - headroom_a, to_accum) + quarter,
                  INT32_MIN, INT32_MAX)  # fmt: skip
    headroom_b = count_leading_zeros_u32(_mul(z, _SQRT_HALF)) - 1
    r_b = _saturating_shift_left(z, headroom_b)
    k_b = xp.clip(saturating_rounding_multiply_by_pot(input_integer_bits - headroom_b, to_accum) - quarter,
                  INT32_MIN, INT32_MAX)  # fmt: skip
    r = xp.minimum(r_a, r_b)
    k = xp.maximum(k_a, k_b)

    p = rounding_half_sum(r, _SQRT_SQRT_HALF)
    q = wrap_int32(2 * (r - _SQRT_SQRT_HALF))  # int32 adds wrap, as gemmlowp's do
    sq = _mul(q, q)
    num = wrap_int32(_mul(q, r) + _mul(_mul(q, sq), _LOG_ALPHA_N))
    denom_minus_one = wrap_int32(_mul(p, wrap_int32(_LOG_ALPHA_I + q + _mul(_LOG_ALPHA_D, sq))) + _mul(_LOG_ALPHA_F, q))
    recip = one_over_one_plus_x_for_x_in_0_1(denom_minus_one)
    total = wrap_int32(_mul(k, _LN_2) + _mul(rounding_divide_by_pot(num, accum_bits), recip))
    return saturating_rounding_multiply_by_pot(total, accum_bits - output_integer_bits)


_F3_ONE = 1 << 28  # 1.0 in Q3.28
_F3_THREE_HALVES = (1 << 28) + (1 << 27)
_HALF_SQRT_2 = 1518500250  # sqrt(2) / 2 in Q0.31


def inv_sqrt_quantized_multiplier_exp(x, reverse_shift: int) -> tuple[Array, Array]:
    """TFLite's ``GetInvSqrtQuantizedMultiplierExp``: 1/sqrt(x) of a non-negative int32 as (multiplier, shift).

    ``x`` is normalized by pairs of bits into [2**27, 2**29) (the square root
    of a power of four is exact), then five Newton-Raphson steps in Q3.28
    starting from 1 give 1/sqrt; a negative exponent is folded into the
    multiplier. The shift is multiplied by ``reverse_shift`` (-1: a left
    shift for ``multiply_by_quantized_multiplier``). 0 and 1 both give
    (INT32_MAX, 0), as the C code special-cases them.
    """
    xp = namespace(x)
    x = _i64(x, xp)
    small = x <= 1
    v = xp.where(small, 2, x)
    big = v >= (1 << 29)  # an int32 needs at most one division by 4 to get below 2**29
    v = xp.where(big, v >> 2, v)
    shift = 11 + big.astype(xp.int64)
    left_pairs = (count_leading_zeros_u32(v) - 1) // 2 - 1
    shift = shift - left_pairs
    v = v << (2 * left_pairs)
    half_input = rounding_divide_by_pot(v >> 1, 1)  # Q3.28 input / 2
    est = xp.full(v.shape, _F3_ONE, dtype=xp.int64)
    for _ in range(5):
        cube = saturating_rounding_multiply_by_pot(_mul(_mul(est, est), est), 6)  # Q9 -> Q3
        est = saturating_rounding_multiply_by_pot(
            wrap_int32(_mul(_F3_THREE_HALVES, est) - _mul(half_input, cube)), 3
        )  # Q6 -> Q3
    est = _mul(est, _HALF_SQRT_2)
    est = xp.where(shift < 0, wrap_int32(est << xp.maximum(-shift, 0)), est)
    shift = xp.maximum(shift, 0) * reverse_shift
    return xp.where(small, INT32_MAX, est), xp.where(small, 0, shift)


# 16-bit helpers (hard swish) ---------------------------------------------------------------------
def saturating_rounding_doubling_high_mul_int16(a, b) -> Array:
    """gemmlowp's int16 ``SaturatingRoundingDoublingHighMul``: round(a * b / 2**15), ties away from zero."""
    xp = namespace(a, b)
    a, b = _i64(a, xp), _i64(b, xp)
    ab = a * b
    nudge = xp.where(ab >= 0, 1 << 14, 1 - (1 << 14))
    high = _trunc_div_pot(ab + nudge, 15)
    high = ((high + 2**15) & 0xFFFF) - 2**15  # static_cast<int16_t>
    return xp.where((a == b) & (a == INT16_MIN), INT16_MAX, high)


def saturating_doubling_high_mul_int16(a, b) -> Array:
    """TFLite's int16 ``SaturatingDoublingHighMul``: a * b / 2**15 truncated toward zero (no rounding)."""
    xp = namespace(a, b)
    a, b = _i64(a, xp), _i64(b, xp)
    high = _trunc_div_pot(a * b, 15)
    high = ((high + 2**15) & 0xFFFF) - 2**15
    return xp.where((a == b) & (a == INT16_MIN), INT16_MAX, high)


def saturating_left_shift_int16(x, amount: int) -> Array:
    """``x * 2**amount`` saturated to int16."""
    xp = namespace(x)
    return xp.clip(_i64(x, xp) << amount, INT16_MIN, INT16_MAX)


# int16 lookup tables (TFLite's int16 softmax) --------------------------------------------------
def gen_lut_int16(func: Callable[[float], float], input_min: float, input_max: float) -> np.ndarray:
    """The 513-entry int16 table TFLite builds for interpolated lookup of ``func``.

    ``func`` maps [input_min, input_max] into [-1, 1]; entries are Q0.15 samples
    at 512 steps, each biased by half the error that linear interpolation
    makes at the step's midpoint; the last entry is ``func(input_max)``.
    Computed in float32, as TFLite's ``gen_lut<float, int16_t, int16_t>``.
    """
    f32 = np.float32
    nb_steps = 512
    lo, hi = f32(input_min), f32(input_max)
    step = (hi - lo) / f32(nb_steps)
    half_step = step / f32(2)
    scaling = f32(65536) / (f32(1) - f32(-1))
    tmin, tmax = f32(INT16_MIN), f32(INT16_MAX)

    def fn(v) -> np.float32:
        return f32(func(f32(v)))

    def rnd(v) -> np.float32:
        return f32(round_half_away(f32(v)))

    table = np.zeros(nb_steps + 1, dtype=np.int16)
    for i in range(nb_steps):
        fi = f32(i)
        val = fn(lo + fi * step)
        val_mid = fn(lo + fi * step + half_step)
        val_next = fn(lo + f32(i + 1) * step)
        sample = rnd(val * scaling)
        mid_interp = rnd((val_next * scaling + rnd(val * scaling)) / f32(2))
        mid_val = rnd(val_mid * scaling)
        bias = rnd((mid_interp - mid_val) / f32(2))
        table[i] = np.int16(min(max(sample - bias, tmin), tmax))
    table[nb_steps] = np.int16(min(max(rnd(fn(hi) * scaling), tmin), tmax))
    return table


def int16_table_lookup(value, lut: Array) -> Array:
    """TFLite's ``lut_lookup`` for int16 inputs: 512 segments, linear interpolation in Q0.15.

    ``lut`` (from :func:`gen_lut_int16`) may be numpy with a jax ``value``.
    """
    xp = namespace(value, lut)
    v, table = _i64(value, xp), _i64(lut, xp)
    index = 256 + (v >> 7)
    offset = v & 0x7F
    base = table[index]
    slope = table[index + 1] - base
    delta = (slope * offset + 64) >> 7
    return base + delta


# int16 logistic / tanh (TFLite's reference_integer_ops Logistic / Tanh for int16) ----------------
def _sigmoid_table_uint16() -> np.ndarray:
    """TFLite's ``sigmoid_table_uint16``: sigmoid(i / 24) in unsigned Q0.16 for i = 0..255.

    Like :func:`gen_lut_int16`'s entries, each sample is biased by half the
    error linear interpolation makes at the step's midpoint, then rounded (in
    double: no entry lies within 0.004 of a tie). The last entry is the
    uint16 maximum (its biased sample would round to 65534): TFLite's table
    ends there, and the kernels interpolate towards it above 254 / 24.
    """
    i = np.arange(255, dtype=np.float64)

    def sig(v: np.ndarray) -> np.ndarray:
        return 65536.0 / (1.0 + np.exp(-v / 24.0))

    sample, mid, nxt = sig(i), sig(i + 0.5), sig(i + 1.0)
    biased = sample - ((sample + nxt) / 2.0 - mid) / 2.0
    table = np.empty(256, dtype=np.int64)
    table[:255] = round_half_away(biased).astype(np.int64)
    table[255] = 0xFFFF
    return table


SIGMOID_TABLE_UINT16 = _sigmoid_table_uint16()
SIGMOID_TABLE_UINT16.flags.writeable = False


def _int16_lut_input(x, input_multiplier: int, input_left_shift: int) -> tuple[Array, ModuleType]:
    """The input rescaled to units of 1 / (3 * 4096) (the table's step, 1/24, is 512 of them), as both kernels do.

    A multiplier of 0 is the power-of-two case: the input is multiplied by
    ``3 << input_left_shift`` with no shift. The product wraps in int32 as
    the C code's does (only reachable with shifts the kernels never get).
    """
    if input_left_shift < 0:
        raise ValueError(f"input_left_shift must be >= 0, got {input_left_shift}")
    if input_multiplier == 0:
        input_multiplier, input_left_shift = 3 << input_left_shift, 0
    xp = namespace(x)
    rnd = (1 << (input_left_shift - 1)) if input_left_shift > 0 else 0
    return wrap_int32(_i64(x, xp) * input_multiplier + rnd) >> input_left_shift, xp


def _sigmoid_lut_interpolate(a: Array, frac_bits: int, xp: ModuleType) -> tuple[Array, Array]:
    """The table interpolated at ``a / 2**frac_bits`` (a >= 0), scaled by ``2**frac_bits``, and where that
    passes the table's last step (the kernels saturate there)."""
    uh = a >> frac_bits
    idx = xp.minimum(uh, 254)
    table = xp.asarray(SIGMOID_TABLE_UINT16)
    ua, ub = table[idx], table[idx + 1]
    ut = a & ((1 << frac_bits) - 1)
    return (ua << frac_bits) + ut * (ub - ua), uh >= 255


def logistic_int16(x, input_multiplier: int, input_left_shift: int) -> Array:
    """TFLite's int16 ``reference_integer_ops::Logistic(input_multiplier, input_left_shift, ...)``.

    ``x`` holds int16 values; the result (int16 values in int64, scale
    2**-15) is sigmoid interpolated in ``SIGMOID_TABLE_UINT16`` on the
    rescaled input's magnitude (9 fractional bits: the 1/(3*4096) grid is
    1/24 per 512), mirrored for negative inputs as 1 - sigmoid(|x|).
    ``(0, 0)`` is an input of scale 2**-12 (what TFLite Micro's LSTM gates pass).
    """
    v, xp = _int16_lut_input(x, input_multiplier, input_left_shift)
    interp, saturated = _sigmoid_lut_interpolate(xp.abs(v), 9, xp)
    r = xp.where(saturated, 0x7FFF << 10, interp)
    r = xp.where(v >= 0, r + (1 << 9), (1 << 25) - r + (1 << 9) - 1)
    return (((r >> 10) + 2**15) & 0xFFFF) - 2**15  # static_cast<int16_t>


def tanh_int16(x, input_multiplier: int, input_left_shift: int) -> Array:
    """TFLite's int16 ``reference_integer_ops::Tanh(input_multiplier, input_left_shift, ...)``.

    tanh(x) = 2 sigmoid(2x) - 1: the same table read with 8 fractional bits
    (twice the argument), recentred and mirrored for negative inputs; int16
    values in int64, scale 2**-15.
    """
    v, xp = _int16_lut_input(x, input_multiplier, input_left_shift)
    interp, saturated = _sigmoid_lut_interpolate(xp.abs(v), 8, xp)
    r = xp.where(saturated, 0xFFFF << 8, interp)
    r = xp.where(v >= 0, r - (1 << 23) + (1 << 7), -r + (1 << 23) + (1 << 7) - 1)
    return (((r >> 8) + 2**15) & 0xFFFF) - 2**15


def checked_log2(x: float) -> tuple[int, bool]:
    """TFLite's ``CheckedLog2`` in float32: ``(round(log2 x), whether log2 x lies within 1e-3 of that integer)``."""
    f32 = np.float32
    log2 = f32(np.log(f32(x))) * (f32(1.0) / f32(np.log(f32(2.0))))
    rounded = f32(round_half_away(f32(log2)))
    return int(rounded), bool(abs(f32(log2 - rounded)) < f32(1e-3))


def int16_sigmoid_tanh_input_params(input_scale: float, *, tanh: bool) -> tuple[int, int]:
    """``(input_multiplier, input_left_shift)`` of TFLite Micro's int16 LOGISTIC / TANH Prepare.

    A power-of-two input scale that the table's grid takes with a shift of 0
    (logistic: 2**-12) or 0 or 1 (tanh: 2**-12, 2**-11) gives multiplier 0;
    any other scale a 15-bit multiplier of ``input_scale * 3 * 4096``
    doubled (with the shift counting the doublings) until it passes
    32767 / 2, truncated. ``input_scale`` is the tensor's float32 scale.
    """
    log2, pot = checked_log2(input_scale)
    shift = (15 - 3) + log2
    if pot and (shift == 0 or (tanh and shift == 1)):
        return 0, shift
    multiplier = float(np.float32(input_scale)) * 4096.0 * 3.0
    shift = 0
    while multiplier <= 32767.0 / 2.0 and shift <= 30:
        shift += 1
        multiplier *= 2.0
    return int(multiplier), shift
