"""jax.numpy mirrors of :mod:`rlx_edge.quant.fixedpoint`'s integer primitives.

The numpy module is the one definition of rounding (ARCHITECTURE.md); these
functions transcribe the same integer formulas, one for one and under the
same names, into ``jnp`` so that they trace under ``jit``. They compute on
``int64`` holding values of the emulated C type, exactly as the numpy
versions do, so they need 64-bit types: lowering runs them inside
``jax.enable_x64(True)`` (see :mod:`rlx_edge.targets.jax.lower`).
``tests/targets/jax/test_fixedpoint.py`` pins every function here against
its numpy original on random and edge-case integers.

Things computed once per model from real-valued scales (multipliers,
shifts, activation ranges) are not mirrored: lowering calls the numpy
module for them and bakes the integers into the traced function.
"""

from __future__ import annotations

from typing import Any

from rlx_edge.quant import fixedpoint as fp
from rlx_edge.targets.jax._lazy import jnp

INT32_MIN = fp.INT32_MIN
INT32_MAX = fp.INT32_MAX
INT16_MIN = fp.INT16_MIN
INT16_MAX = fp.INT16_MAX

Array = Any


def i64(x) -> Array:
    return jnp.asarray(x, dtype=jnp.int64)


def wrap_int32(x) -> Array:
    """Reduce int64 values modulo 2**32 into int32's range (C's conversion)."""
    return ((i64(x) + 2**31) & 0xFFFFFFFF) - 2**31


def _trunc_div_pot(x: Array, bits: int) -> Array:
    return jnp.where(x >= 0, x >> bits, -((-x) >> bits))


def saturating_rounding_doubling_high_mul(a, b) -> Array:
    """``round(a * b / 2**31)``, ties away from zero; ``INT32_MIN * INT32_MIN`` saturates."""
    a, b = i64(a), i64(b)
    ab = a * b
    nudge = jnp.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    high = _trunc_div_pot(ab + nudge, 31)
    overflow = (a == b) & (a == INT32_MIN)
    return jnp.where(overflow, INT32_MAX, high)


def rounding_divide_by_pot(x, exponent) -> Array:
    """``x / 2**exponent`` rounded, ties away from zero; ``exponent`` may broadcast (per channel)."""
    x, e = i64(x), i64(exponent)
    mask = (jnp.int64(1) << e) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (x < 0).astype(jnp.int64)
    return (x >> e) + (remainder > threshold).astype(jnp.int64)


def multiply_by_quantized_multiplier(x, multiplier, shift) -> Array:
    """TFLite's int32 ``MultiplyByQuantizedMultiplier`` (double rounding), per-channel arrays allowed."""
    x, shift = i64(x), i64(shift)
    left = jnp.maximum(shift, 0)
    right = jnp.maximum(-shift, 0)
    shifted = wrap_int32(x << left)
    return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(shifted, multiplier), right)


def multiply_by_quantized_multiplier_int64(x, multiplier, shift) -> Array:
    """TFLite's 64-bit-accumulator form (16x8): Q15 multiplier, one rounding shift, int32 truncation."""
    x, m, shift = i64(x), i64(multiplier), i64(shift)
    reduced = jnp.where(m < 0x7FFF0000, (m + (1 << 15)) >> 16, 0x7FFF)
    total = 15 - shift
    rnd = jnp.int64(1) << (total - 1)
    return wrap_int32((x * reduced + rnd) >> total)


def multiply_by_quantized_multiplier_smaller_than_one_exp(x, multiplier, left_shift) -> Array:
    return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(x, multiplier), -i64(left_shift))


def multiply_by_quantized_multiplier_greater_than_one(x, multiplier, left_shift) -> Array:
    return saturating_rounding_doubling_high_mul(wrap_int32(i64(x) << i64(left_shift)), multiplier)


def saturating_rounding_multiply_by_pot(x, exponent: int) -> Array:
    """gemmlowp's ``SaturatingRoundingMultiplyByPOT<exponent>`` (``exponent`` is static)."""
    x = i64(x)
    if exponent == 0:
        return x
    if exponent < 0:
        return rounding_divide_by_pot(x, -exponent)
    threshold = (1 << (31 - exponent)) - 1
    y = wrap_int32(x << exponent)
    y = jnp.where(x > threshold, INT32_MAX, y)
    return jnp.where(x < -threshold, INT32_MIN, y)


def rounding_half_sum(a, b) -> Array:
    s = i64(a) + i64(b)
    sign = jnp.where(s >= 0, 1, -1)
    t = s + sign
    return jnp.where(t >= 0, t // 2, -((-t) // 2))


def count_leading_zeros_u32(x) -> Array:
    """Leading zero bits of ``x`` as a uint32 (32 for zero), by the same binary search."""
    x = i64(x) & 0xFFFFFFFF
    zero = x == 0
    n = jnp.zeros(x.shape, dtype=jnp.int64)
    for bits in (16, 8, 4, 2, 1):
        small = x < (1 << (32 - bits))
        n = n + jnp.where(small, bits, 0)
        x = jnp.where(small, x << bits, x)
    return jnp.where(zero, 32, n)


_mul = saturating_rounding_doubling_high_mul


def exp_on_interval_between_negative_one_quarter_and_0_excl(a) -> Array:
    a = i64(a)
    constant_term = 1895147668
    constant_1_over_3 = 715827883
    x = a + (1 << 28)
    x2 = _mul(x, x)
    x3 = _mul(x2, x)
    x4 = _mul(x2, x2)
    x4_over_4 = saturating_rounding_multiply_by_pot(x4, -2)
    poly = saturating_rounding_multiply_by_pot(_mul(x4_over_4 + x3, constant_1_over_3) + x2, -1)
    return constant_term + _mul(constant_term, x + poly)


def exp_on_negative_values(a, integer_bits: int) -> Array:
    """gemmlowp's ``exp_on_negative_values`` (Q(integer_bits) input <= 0, Q0.31 result)."""
    a = i64(a)
    frac_bits = 31 - integer_bits
    one_quarter = 1 << (frac_bits - 2)
    mask = one_quarter - 1
    a_mod_quarter_minus_one_quarter = (a & mask) - one_quarter
    result = exp_on_interval_between_negative_one_quarter_and_0_excl(
        saturating_rounding_multiply_by_pot(a_mod_quarter_minus_one_quarter, integer_bits)
    )
    remainder = a_mod_quarter_minus_one_quarter - a
    for exponent, multiplier in fp._EXP_BARREL:
        if integer_bits > exponent:
            bit = 1 << (frac_bits + exponent)
            result = jnp.where((remainder & bit) != 0, _mul(result, multiplier), result)
    if integer_bits > 5:
        clamp = -(1 << (36 - integer_bits))
        result = jnp.where(a < clamp, 0, result)
    return jnp.where(a == 0, INT32_MAX, result)


def _newton_reciprocal_half(a: Array) -> Array:
    half_denominator = rounding_half_sum(a, INT32_MAX)
    x = fp._C48_OVER_17 + _mul(half_denominator, fp._CNEG32_OVER_17)
    for _ in range(3):
        one_minus = fp._F2_ONE - _mul(half_denominator, x)
        x = x + saturating_rounding_multiply_by_pot(_mul(x, one_minus), 2)
    return x


def one_over_one_plus_x_for_x_in_0_1(a) -> Array:
    return saturating_rounding_multiply_by_pot(_newton_reciprocal_half(i64(a)), 1)


def one_minus_x_over_one_plus_x_for_x_in_0_1(a) -> Array:
    return saturating_rounding_multiply_by_pot(_newton_reciprocal_half(i64(a)) - fp._F2_ONE, 2)


def logistic_fixed(a, integer_bits: int) -> Array:
    a = i64(a)
    positive = a > 0
    abs_a = jnp.where(positive, a, -a)
    r_pos = one_over_one_plus_x_for_x_in_0_1(exp_on_negative_values(-abs_a, integer_bits))
    r_neg = INT32_MAX - r_pos
    return jnp.where(a == 0, 1 << 30, jnp.where(positive, r_pos, r_neg))


def tanh_fixed(a, integer_bits: int) -> Array:
    a = i64(a)
    negative = a < 0
    n = jnp.where(negative, a, -a)
    t = one_minus_x_over_one_plus_x_for_x_in_0_1(exp_on_negative_values(n, integer_bits + 1))
    return jnp.where(a == 0, 0, jnp.where(negative, -t, t))


def get_reciprocal(x, x_integer_digits: int) -> tuple[Array, Array]:
    x = i64(x)
    headroom_plus_one = count_leading_zeros_u32(x)
    num_bits_over_unit = x_integer_digits - headroom_plus_one
    shifted_sum_minus_one = wrap_int32(((x << headroom_plus_one) & 0xFFFFFFFF) - (1 << 31))
    return one_over_one_plus_x_for_x_in_0_1(shifted_sum_minus_one), num_bits_over_unit


def _wrap16(x: Array) -> Array:
    return ((x + 2**15) & 0xFFFF) - 2**15


def saturating_rounding_doubling_high_mul_int16(a, b) -> Array:
    a, b = i64(a), i64(b)
    ab = a * b
    nudge = jnp.where(ab >= 0, 1 << 14, 1 - (1 << 14))
    high = _wrap16(_trunc_div_pot(ab + nudge, 15))
    return jnp.where((a == b) & (a == INT16_MIN), INT16_MAX, high)


def saturating_doubling_high_mul_int16(a, b) -> Array:
    a, b = i64(a), i64(b)
    high = _wrap16(_trunc_div_pot(a * b, 15))
    return jnp.where((a == b) & (a == INT16_MIN), INT16_MAX, high)


def saturating_left_shift_int16(x, amount: int) -> Array:
    return jnp.clip(i64(x) << amount, INT16_MIN, INT16_MAX)


def int16_table_lookup(value, lut) -> Array:
    """TFLite's ``lut_lookup`` for int16 inputs (``lut`` is the numpy table from the numpy module)."""
    v = i64(value)
    table = jnp.asarray(lut, dtype=jnp.int64)
    index = 256 + (v >> 7)
    offset = v & 0x7F
    base = table[index]
    slope = table[index + 1] - base
    return base + ((slope * offset + 64) >> 7)


def round_half_away(x) -> Array:
    """``std::round`` in the input's float precision (the numpy module's formula)."""
    return jnp.copysign(jnp.floor(jnp.abs(x) + jnp.asarray(0.5, x.dtype)), x)
