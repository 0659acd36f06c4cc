"""The fixed-point primitives against known TFLite values and a scalar transcription of the C rules."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

from rlx_edge.ir import fixedpoint as fp

I32_MIN, I32_MAX = -(2**31), 2**31 - 1


# scalar C semantics (Python ints, C division truncates toward zero) -----------------------
def c_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def srdhm_scalar(a: int, b: int) -> int:
    if a == b == I32_MIN:
        return I32_MAX
    ab = a * b
    nudge = (1 << 30) if ab >= 0 else 1 - (1 << 30)
    return c_div(ab + nudge, 1 << 31)


def rdbpot_scalar(x: int, e: int) -> int:
    mask = (1 << e) - 1
    rem = x & mask
    thr = (mask >> 1) + (1 if x < 0 else 0)
    return (x >> e) + (1 if rem > thr else 0)


def mbqm_scalar(x: int, m: int, shift: int) -> int:
    left, right = max(shift, 0), max(-shift, 0)
    return rdbpot_scalar(srdhm_scalar(x * (1 << left), m), right)


# QuantizeMultiplier -------------------------------------------------------------------------
@pytest.mark.parametrize(
    "scale, expected",
    [
        (0.0, (0, 0)),
        (0.5, (1 << 30, 0)),
        (1.0, (1 << 30, 1)),
        (0.25, (1 << 30, -1)),
        (0.75, (1610612736, 0)),
        (0.1, (1717986918, -3)),  # 0.8 * 2**31 = 1717986918.4 rounds down
        (3.0, (1610612736, 2)),
        (1.0 - 2.0**-40, (1 << 30, 1)),  # the mantissa rounds up to 2**31: halve, shift + 1
        (2.0**-32, (1 << 30, -31)),  # the smallest shift kept
        (2.0**-33, (0, 0)),  # below: flushed to zero
        (-0.5, (-(1 << 30), 0)),
    ],
)
def test_quantize_multiplier_known_values(scale, expected):
    assert fp.quantize_multiplier(scale) == expected


def test_quantize_multiplier_ties_round_away_from_zero():
    # mantissa * 2**31 ending in exactly .5 rounds up, as std::round does
    scale = (1610612736 + 0.5) / 2**31
    assert fp.quantize_multiplier(scale) == (1610612737, 0)
    scale = (1610612736 + 0.49999) / 2**31
    assert fp.quantize_multiplier(scale) == (1610612736, 0)


def test_quantize_multiplier_reconstructs_the_scale():
    rng = np.random.default_rng(0)
    for s in rng.uniform(1e-6, 100, 200):
        q, shift = fp.quantize_multiplier(float(s))
        assert 1 << 30 <= q <= I32_MAX
        assert abs(q * 2.0 ** (shift - 31) - s) <= s * 2**-30


def test_quantize_multiplier_array_matches_scalar():
    scales = np.array([[0.5, 0.1], [1e-12, 2.5]])
    m, s = fp.quantize_multiplier_array(scales)
    assert m.shape == s.shape == (2, 2)
    for i in range(2):
        for j in range(2):
            assert (int(m[i, j]), int(s[i, j])) == fp.quantize_multiplier(float(scales[i, j]))


def test_smaller_than_one_and_greater_than_one_checks():
    assert fp.quantize_multiplier_smaller_than_one_exp(0.3)[1] <= 0
    assert fp.quantize_multiplier_greater_than_one(3.7)[1] >= 0
    with pytest.raises(ValueError):
        fp.quantize_multiplier_smaller_than_one_exp(1.5)
    with pytest.raises(ValueError):
        fp.quantize_multiplier_greater_than_one(0.5)
    with pytest.raises(ValueError):
        fp.quantize_multiplier(float("inf"))


# rounding primitives -------------------------------------------------------------------------------
def test_srdhm_ties_and_saturation():
    assert fp.saturating_rounding_doubling_high_mul(3, 1 << 30) == 2  # 1.5 -> 2
    assert fp.saturating_rounding_doubling_high_mul(-3, 1 << 30) == -1  # the nudge rounds -1.5 to -1
    assert fp.saturating_rounding_doubling_high_mul(I32_MIN, I32_MIN) == I32_MAX  # the one overflow
    assert fp.saturating_rounding_doubling_high_mul(I32_MIN, I32_MAX) == -I32_MAX
    assert fp.saturating_rounding_doubling_high_mul(I32_MAX, I32_MAX) == I32_MAX - 1


@pytest.mark.parametrize(
    "x, e, expected",
    [(5, 1, 3), (-5, 1, -3), (6, 2, 2), (-6, 2, -2), (-7, 2, -2), (-10, 2, -3), (7, 0, 7), (I32_MIN, 31, -1)],
)
def test_rounding_divide_by_pot_ties_away_from_zero(x, e, expected):
    assert fp.rounding_divide_by_pot(x, e) == expected


def test_vectorized_primitives_match_the_scalar_c_rules():
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.integers(I32_MIN, I32_MAX, 3000, endpoint=True), [I32_MIN, I32_MAX, 0, -1, 1]])
    m = np.concatenate([rng.integers(I32_MIN, I32_MAX, 3000, endpoint=True), [I32_MIN, I32_MAX, 0, 7, 1 << 30]])
    got = fp.saturating_rounding_doubling_high_mul(x, m)
    assert got.tolist() == [srdhm_scalar(int(a), int(b)) for a, b in zip(x, m)]
    e = rng.integers(0, 32, x.size)
    got = fp.rounding_divide_by_pot(x, e)
    assert got.tolist() == [rdbpot_scalar(int(a), int(b)) for a, b in zip(x, e)]
    # realistic requantization: accumulators, positive multipliers, shifts -31..2
    acc = rng.integers(-(2**24), 2**24, 3000)
    mult = rng.integers(1 << 30, I32_MAX, 3000, endpoint=True)
    shift = rng.integers(-31, 3, 3000)
    got = fp.multiply_by_quantized_multiplier(acc, mult, shift)
    assert got.tolist() == [mbqm_scalar(int(a), int(b), int(c)) for a, b, c in zip(acc, mult, shift)]


def test_multiply_by_quantized_multiplier_per_channel_broadcast():
    acc = np.arange(-12, 12).reshape(2, 3, 4) * 1000
    mult, shift = fp.quantize_multiplier_array(np.array([0.5, 0.01, 1.5, 0.003]))
    got = fp.multiply_by_quantized_multiplier(acc, mult, shift)
    for c in range(4):
        expected = [mbqm_scalar(int(a), int(mult[c]), int(shift[c])) for a in acc[..., c].ravel()]
        assert got[..., c].ravel().tolist() == expected


def test_multiply_by_quantized_multiplier_int64():
    # Q31 reduced to Q15 first: 0.5 -> 2**14; one rounding shift by 15 - shift
    assert fp.multiply_by_quantized_multiplier_int64(2**20, 1 << 30, 0) == 2**19
    assert fp.multiply_by_quantized_multiplier_int64(3, 1 << 30, 0) == 2  # 1.5 rounds up
    assert fp.multiply_by_quantized_multiplier_int64(-3, 1 << 30, 0) == -1  # -1.5 rounds up too
    # a multiplier near 1 saturates at Q15 0x7FFF (not 0x8000): 2**40 * 32767 / 2**35
    assert fp.multiply_by_quantized_multiplier_int64(1 << 40, I32_MAX, -20) == 32 * 32767
    m, s = fp.quantize_multiplier(0.000123)
    x = np.array([-(2**40), -12345678901, 0, 98765432100, 2**40 - 1])  # results fit int32
    want = np.round(x * 0.000123)
    assert np.all(np.abs(fp.multiply_by_quantized_multiplier_int64(x, m, s) - want) <= want.__abs__() * 2**-14 + 1)


def test_wrap_and_clz():
    assert fp.wrap_int32([2**31, -(2**31) - 1, 5]).tolist() == [I32_MIN, I32_MAX, 5]
    assert fp.count_leading_zeros_u32([0, 1, 2**31, 2**31 - 1, 255]).tolist() == [32, 31, 0, 1, 24]


# activation range ------------------------------------------------------------------------------------
def test_activation_range():
    assert fp.activation_range("none", 0.05, -128, -128, 127) == (-128, 127)
    assert fp.activation_range("relu", 0.05, -10, -128, 127) == (-10, 127)
    assert fp.activation_range("relu6", 0.05, -128, -128, 127) == (-128, -8)
    assert fp.activation_range("relu6", 0.01, 0, -128, 127) == (0, 127)  # 600 clips to the storage max
    assert fp.activation_range("relu_n1_to_1", 0.25, 3, -128, 127) == (-1, 7)
    # a bound exactly halfway rounds away from zero, in float32: 0.5/1.0 -> 1
    assert fp.activation_range("relu6", 12.0, 0, -128, 127) == (0, 1)
    with pytest.raises(ValueError):
        fp.activation_range("gelu", 1.0, 0, -128, 127)


# gemmlowp fixed point ----------------------------------------------------------------------------------
def test_exp_on_negative_values_is_close_to_exp():
    bits = 5
    xs = np.linspace(-31.9, -0.001, 997)
    raw = np.round(xs * 2 ** (31 - bits)).astype(np.int64)
    got = fp.exp_on_negative_values(raw, bits) / 2**31
    want = np.exp(raw / 2 ** (31 - bits))
    assert np.max(np.abs(got - want)) < 2e-8 * 2**4
    assert fp.exp_on_negative_values(0, bits) == I32_MAX


def test_reciprocal_logistic_tanh_are_close():
    x = np.linspace(0, 0.999, 101)
    raw = np.round(x * 2**31).astype(np.int64)
    assert np.max(np.abs(fp.one_over_one_plus_x_for_x_in_0_1(raw) / 2**31 - 1 / (1 + raw / 2**31))) < 1e-8
    assert np.max(np.abs(fp.one_minus_x_over_one_plus_x_for_x_in_0_1(raw) / 2**31 - (1 - x) / (1 + x))) < 1e-8
    v = np.linspace(-7.9, 7.9, 301)
    q4 = np.round(v * 2**27).astype(np.int64)
    assert np.max(np.abs(fp.logistic_fixed(q4, 4) / 2**31 - 1 / (1 + np.exp(-q4 / 2**27)))) < 1e-7
    assert np.max(np.abs(fp.tanh_fixed(q4, 4) / 2**31 - np.tanh(q4 / 2**27))) < 1e-7
    assert fp.logistic_fixed(0, 4) == 1 << 30
    assert fp.tanh_fixed(0, 4) == 0


def test_get_reciprocal():
    # x = 3.0 in Q12.19: 1/3 = (2/3) / 2**1 -> scale ~ 2/3 in Q0.31, one bit over unit
    scale, bits = fp.get_reciprocal(3 << 19, 12)
    assert int(bits) == 1
    assert abs(int(scale) / 2**31 - 2 / 3) < 1e-8


def test_log_x_for_x_greater_than_or_equal_to_1_is_close_to_log():
    # an approximation of ln by design: within a few Q5.26 quanta (2**-26) over the whole input range
    x = np.unique(np.concatenate([np.geomspace(1 << 19, fp.INT32_MAX, 3000).astype(np.int64), [1 << 19, fp.INT32_MAX]]))
    got = fp.log_x_for_x_greater_than_or_equal_to_1(x, 12, 5) / 2.0**26
    assert got[0] == 0
    assert np.max(np.abs(got - np.log(x / 2.0**19))) < 8 * 2.0**-26


def test_inv_sqrt_quantized_multiplier_exp():
    # 0 and 1 are special-cased to the largest multiplier; others give 1/sqrt(x) = m * 2**shift / 2**31
    m, shift = fp.inv_sqrt_quantized_multiplier_exp(np.array([0, 1]), -1)
    assert m.tolist() == [fp.INT32_MAX] * 2 and shift.tolist() == [0, 0]
    x = np.concatenate([np.arange(2, 300), [2**27, 2**29 - 1, 2**29, fp.INT32_MAX]])
    m, shift = fp.inv_sqrt_quantized_multiplier_exp(x, -1)
    assert np.all((m > 0) & (m <= fp.INT32_MAX))
    np.testing.assert_allclose(m * np.exp2(shift - 31.0), 1 / np.sqrt(x), rtol=2e-6)
    # reverse_shift 1 gives the exponent as a right shift
    assert np.array_equal(fp.inv_sqrt_quantized_multiplier_exp(x, 1)[1], -shift)


def test_preprocess_softmax_scaling_and_radius():
    m, shift = fp.preprocess_softmax_scaling(1.0, 0.1, 5)
    assert (m, shift) == fp.quantize_multiplier(0.1 * 2**26)
    # capped at 2**31 - 1 for huge scales
    assert fp.preprocess_softmax_scaling(1.0, 1e6, 5) == fp.quantize_multiplier(2**31 - 1.0)
    assert fp.calculate_input_radius(5, 22) == math.floor(31 * 2**26 / 2**22)


def test_int16_helpers():
    assert fp.saturating_rounding_doubling_high_mul_int16(-(2**15), -(2**15)) == 2**15 - 1
    assert fp.saturating_rounding_doubling_high_mul_int16(3, 2**14) == 2
    assert fp.saturating_doubling_high_mul_int16(3, 2**14) == 1  # truncates
    assert fp.saturating_doubling_high_mul_int16(-3, 2**14) == -1
    assert fp.saturating_left_shift_int16([1000, -1000, 3], 6).tolist() == [32767, -32768, 192]
    assert fp.down_scale_int32_to_int16_multiplier(1 << 30) == 1 << 14
    assert fp.down_scale_int32_to_int16_multiplier(I32_MAX) == 32767


def test_int16_lut_interpolates():
    lut = fp.gen_lut_int16(lambda v: np.exp(v, dtype=np.float32), -10.0, 0.0)
    assert lut.shape == (513,) and lut.dtype == np.int16
    assert lut[-1] == 32767  # exp(0) = 1 saturates
    v = np.arange(-32768, 32768, 37)
    got = fp.int16_table_lookup(v, lut) / 32768
    want = np.exp(-10 + (v + 32768) * 10 / 65536)
    assert np.max(np.abs(got - want)) < 2e-3


def test_numpy_inputs_stay_numpy_without_importing_jax():
    # the reference must not pay for (or need) jax: namespace() only looks at jax once it is loaded
    code = (
        "import sys\n"
        "import numpy as np\n"
        "from rlx_edge.ir import fixedpoint as fp\n"
        "assert fp.namespace(1, np.int64(2), np.zeros(3), 2.5) is np\n"
        "assert isinstance(fp.tanh_fixed(np.arange(-5, 5) << 20, 4), np.ndarray)\n"
        "assert 'jax' not in sys.modules, 'rlx_edge.ir.fixedpoint imported jax'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
