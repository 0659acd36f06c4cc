"""The jnp fixed-point mirrors against rlx_edge.quant.fixedpoint, bit for bit."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from rlx_edge.quant import fixedpoint as fp
from rlx_edge.targets.jax import fixedpoint as jfp

I32_EDGES = np.array([fp.INT32_MIN, fp.INT32_MIN + 1, -(2**30), -1, 0, 1, 2**30, fp.INT32_MAX - 1, fp.INT32_MAX])


def _i32(rng: np.random.Generator, n: int = 4000) -> np.ndarray:
    """Random int32 values of every magnitude (log-uniform), signs mixed, with the edges."""
    mag = np.exp2(rng.uniform(0, 31, n)).astype(np.int64)
    vals = np.clip(mag * rng.choice([-1, 1], n), fp.INT32_MIN, fp.INT32_MAX)
    return np.concatenate([vals, I32_EDGES])


def _same(ours, theirs) -> None:
    with jax.enable_x64(True):
        got = np.asarray(ours)
    np.testing.assert_array_equal(got, np.asarray(theirs))


def _jit(fn, *args):
    with jax.enable_x64(True):
        return np.asarray(jax.jit(fn, static_argnums=tuple(i for i, a in enumerate(args) if isinstance(a, int)))(*args))


@pytest.mark.parametrize("seed", [0, 1])
def test_binary_primitives(seed: int) -> None:
    rng = np.random.default_rng(seed)
    a, b = _i32(rng), _i32(rng)[::-1].copy()
    with jax.enable_x64(True):
        _same(jax.jit(jfp.saturating_rounding_doubling_high_mul)(a, b), fp.saturating_rounding_doubling_high_mul(a, b))
        _same(jax.jit(jfp.rounding_half_sum)(a, b), fp.rounding_half_sum(a, b))
        e = rng.integers(0, 32, a.shape)
        _same(jax.jit(jfp.rounding_divide_by_pot)(a, e), fp.rounding_divide_by_pot(a, e))
        _same(jax.jit(jfp.wrap_int32)(a * 7 + b), fp.wrap_int32(a * 7 + b))
        _same(jax.jit(jfp.count_leading_zeros_u32)(a), fp.count_leading_zeros_u32(a))


@pytest.mark.parametrize("seed", [0, 1])
def test_quantized_multipliers(seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = _i32(rng)
    scales = np.exp2(rng.uniform(-20, 8, x.size))
    mult, shift = fp.quantize_multiplier_array(scales)
    with jax.enable_x64(True):
        _same(
            jax.jit(jfp.multiply_by_quantized_multiplier)(x, mult, shift),
            fp.multiply_by_quantized_multiplier(x, mult, shift),
        )
        acc = x * rng.integers(1, 1000, x.size)  # 64-bit accumulators (16x8)
        sh = np.minimum(shift, 14)
        _same(
            jax.jit(jfp.multiply_by_quantized_multiplier_int64)(acc, mult, sh),
            fp.multiply_by_quantized_multiplier_int64(acc, mult, sh),
        )
        small = rng.integers(-31, 1, x.size)
        _same(
            jax.jit(jfp.multiply_by_quantized_multiplier_smaller_than_one_exp)(x, mult, small),
            fp.multiply_by_quantized_multiplier_smaller_than_one_exp(x, mult, small),
        )
        left = rng.integers(0, 8, x.size)
        _same(
            jax.jit(jfp.multiply_by_quantized_multiplier_greater_than_one)(x, mult, left),
            fp.multiply_by_quantized_multiplier_greater_than_one(x, mult, left),
        )


@pytest.mark.parametrize("exponent", [-31, -5, -1, 0, 1, 2, 7, 30])
def test_saturating_rounding_multiply_by_pot(exponent: int) -> None:
    x = _i32(np.random.default_rng(exponent + 40))
    got = _jit(lambda v: jfp.saturating_rounding_multiply_by_pot(v, exponent), x)
    np.testing.assert_array_equal(got, fp.saturating_rounding_multiply_by_pot(x, exponent))


@pytest.mark.parametrize("integer_bits", [0, 1, 4, 5, 6, 12])
def test_exp_logistic_tanh(integer_bits: int) -> None:
    rng = np.random.default_rng(integer_bits)
    neg = -np.abs(_i32(rng))
    neg = np.where(neg == fp.INT32_MIN, fp.INT32_MIN + 1, neg)
    anyv = _i32(rng)
    cases = [
        (lambda v: jfp.exp_on_negative_values(v, integer_bits), fp.exp_on_negative_values(neg, integer_bits), neg),
        (lambda v: jfp.logistic_fixed(v, integer_bits), fp.logistic_fixed(anyv, integer_bits), anyv),
        (lambda v: jfp.tanh_fixed(v, integer_bits), fp.tanh_fixed(anyv, integer_bits), anyv),
    ]
    for ours, want, arg in cases:
        np.testing.assert_array_equal(_jit(ours, arg), want)


def test_reciprocal_and_one_over() -> None:
    rng = np.random.default_rng(7)
    pos = np.abs(_i32(rng)) + 1
    pos = np.minimum(pos, fp.INT32_MAX)
    s_ours, b_ours = _jit(lambda v: jfp.get_reciprocal(v, 12), pos)
    s_want, b_want = fp.get_reciprocal(pos, 12)
    np.testing.assert_array_equal(s_ours, s_want)
    np.testing.assert_array_equal(b_ours, b_want)
    frac = np.abs(_i32(rng))
    np.testing.assert_array_equal(
        _jit(jfp.one_over_one_plus_x_for_x_in_0_1, frac), fp.one_over_one_plus_x_for_x_in_0_1(frac)
    )
    np.testing.assert_array_equal(
        _jit(jfp.one_minus_x_over_one_plus_x_for_x_in_0_1, frac), fp.one_minus_x_over_one_plus_x_for_x_in_0_1(frac)
    )


def test_int16_primitives() -> None:
    rng = np.random.default_rng(3)
    a = np.concatenate([rng.integers(fp.INT16_MIN, fp.INT16_MAX + 1, 3000), [fp.INT16_MIN, fp.INT16_MAX, 0, -1]])
    b = np.concatenate([rng.integers(fp.INT16_MIN, fp.INT16_MAX + 1, 3000), [fp.INT16_MIN, 1, 0, fp.INT16_MIN]])
    with jax.enable_x64(True):
        _same(
            jfp.saturating_rounding_doubling_high_mul_int16(a, b), fp.saturating_rounding_doubling_high_mul_int16(a, b)
        )
        _same(jfp.saturating_doubling_high_mul_int16(a, b), fp.saturating_doubling_high_mul_int16(a, b))
        _same(jfp.saturating_left_shift_int16(a, 3), fp.saturating_left_shift_int16(a, 3))
        lut = fp.gen_lut_int16(lambda v: np.exp(v, dtype=np.float32), -10.0, 0.0)
        _same(jfp.int16_table_lookup(a, lut), fp.int16_table_lookup(a, lut))


def test_round_half_away() -> None:
    x = np.array([0.5, -0.5, 1.5, -2.5, 0.49999997, -0.49999997, 2.4999998, 1e9, -7.0], np.float32)
    with jax.enable_x64(True):
        _same(jfp.round_half_away(jax.numpy.asarray(x)), fp.round_half_away(x))


def test_a_wrong_mirror_is_caught() -> None:
    # the comparison is sensitive: rounding the high multiply toward zero breaks it
    rng = np.random.default_rng(0)
    a, b = _i32(rng), _i32(rng)
    with jax.enable_x64(True):
        truncating = np.asarray((jax.numpy.asarray(a) * jax.numpy.asarray(b)) >> 31)
    assert not np.array_equal(truncating, fp.saturating_rounding_doubling_high_mul(a, b))
