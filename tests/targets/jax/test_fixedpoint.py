"""Every array primitive of rlx_edge.ir.fixedpoint runs on jax.numpy under jit, bit for bit as on numpy.

The primitives are written once against an array namespace; the JAX target
traces the same functions the numpy reference runs. The list of primitives
is read from the module, so a new one without a case here fails
:func:`test_every_primitive_has_a_case`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlx_edge.ir import fixedpoint as fp

# computed once from real scales (prepare time, numpy / Python only), or not arithmetic at all
NOT_ARRAY_PRIMITIVES = {
    fp.activation_range,
    fp.calculate_input_radius,
    fp.checked_log2,
    fp.down_scale_int32_to_int16_multiplier,
    fp.int16_sigmoid_tanh_input_params,
    fp.gen_lut_int16,
    fp.namespace,
    fp.preprocess_softmax_scaling,
    fp.quantize_multiplier,
    fp.quantize_multiplier_array,
    fp.quantize_multiplier_greater_than_one,
    fp.quantize_multiplier_smaller_than_one_exp,
}


def _primitives() -> list[str]:
    """The public functions defined in the module that are not prepare-time."""
    return sorted(
        name
        for name, obj in vars(fp).items()
        if inspect.isfunction(obj)
        and obj.__module__ == fp.__name__
        and not name.startswith("_")
        and obj not in NOT_ARRAY_PRIMITIVES
    )


# inputs ---------------------------------------------------------------------------------------
def _edges32() -> np.ndarray:
    """int32 edges, small values and powers of two around them (ties of the rounding steps)."""
    pots = np.array([1 << k for k in range(31)], dtype=np.int64)
    near = np.concatenate([pots - 1, pots, pots + 1, 3 * pots[:29]])
    vals = np.concatenate([[fp.INT32_MIN, fp.INT32_MIN + 1, fp.INT32_MAX - 1, fp.INT32_MAX, 0], near, -near])
    return np.unique(np.clip(vals, fp.INT32_MIN, fp.INT32_MAX))


def _i32(rng: np.random.Generator, n: int = 2000) -> np.ndarray:
    """Random int32 values of every magnitude (log-uniform), signs mixed, then the edges."""
    mag = np.exp2(rng.uniform(0, 31, n)).astype(np.int64)
    vals = np.clip(mag * rng.choice([-1, 1], n), fp.INT32_MIN, fp.INT32_MAX)
    return np.concatenate([vals, _edges32()])


def _pairs32(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Random pairs plus every pair of a few edges (INT32_MIN * INT32_MIN, 2**30 * +-1 ties, ...)."""
    few = np.array([fp.INT32_MIN, fp.INT32_MIN + 1, -(2**30), -3, -1, 0, 1, 3, 2**30, fp.INT32_MAX], np.int64)
    ea, eb = np.meshgrid(few, few)
    a, b = _i32(rng), _i32(rng)[::-1]
    return np.concatenate([a, ea.ravel()]), np.concatenate([b, eb.ravel()])


def _pairs16(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    few = np.array([fp.INT16_MIN, fp.INT16_MIN + 1, -(2**14), -1, 0, 1, 2, 2**14, fp.INT16_MAX], np.int64)
    ea, eb = np.meshgrid(few, few)
    a, b = rng.integers(fp.INT16_MIN, fp.INT16_MAX + 1, (2, 2000))
    return np.concatenate([a, ea.ravel()]), np.concatenate([b, eb.ravel()])


def _multipliers(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    return fp.quantize_multiplier_array(np.exp2(rng.uniform(-24, 10, n)))


@dataclass(frozen=True)
class Case:
    """One call: ``fn(*arrays, *static)``; the arrays become jax values, the Python ints stay static."""

    arrays: tuple[np.ndarray, ...]
    static: tuple[int, ...] = ()


def _divide_by_pot_cases(rng: np.random.Generator) -> list[Case]:
    x = _i32(rng)
    e = np.arange(32)
    ties = ((2 * rng.integers(0, 2**10, (32, 8)) + 1) << np.maximum(e - 1, 0)[:, None]) * rng.choice([-1, 1], (32, 8))
    tie_x = np.clip(ties, fp.INT32_MIN, fp.INT32_MAX).ravel()
    return [
        Case((x, rng.integers(0, 32, x.size))),
        Case((tie_x, np.repeat(e, 8))),
        Case((np.tile(_edges32(), 32), np.repeat(e, _edges32().size))),
    ]


def _quantized_multiplier_cases(rng: np.random.Generator, shifts: Callable[[int], np.ndarray]) -> list[Case]:
    x = _i32(rng)
    mult, _ = _multipliers(rng, x.size)
    channels = rng.integers(fp.INT32_MIN, fp.INT32_MAX, (100, 8))  # per-channel (last axis) broadcasting
    cmult, _ = _multipliers(rng, 8)
    return [Case((x, mult, shifts(x.size))), Case((channels, cmult, shifts(8)))]


def _nonneg(rng: np.random.Generator) -> np.ndarray:
    x = _i32(rng)
    return np.concatenate([np.abs(x[x > fp.INT32_MIN]), [0, 1, fp.INT32_MAX]])


def _int64_accumulator_cases(rng: np.random.Generator) -> list[Case]:
    x = _i32(rng)
    big = np.array([2**40, -(2**40), 0, 1, -1])
    saturating = np.array([0x7FFF0000, 0x7FFEFFFF, 2**30, 2**31 - 1, 1])  # around the Q15 reduction's clamp
    acc = x * rng.integers(1, 1000, x.size)  # 16x8 accumulators beyond int32
    return [Case((acc, _multipliers(rng, x.size)[0], rng.integers(-20, 15, x.size))), Case((big, saturating), (14,))]


def _round_half_away_cases(rng: np.random.Generator) -> list[Case]:
    ties = np.array([0.5, -0.5, 1.5, -2.5, 0.49999997, -0.49999997, 2.4999998, 1e9, -7.0, 0.0, -0.0])
    noise = rng.normal(0, 300, 2000)
    return [Case((ties.astype(np.float32),)), Case((ties,)), Case((noise.astype(np.float32),)), Case((_i32(rng),))]


def _lut_cases(rng: np.random.Generator) -> list[Case]:
    lut = fp.gen_lut_int16(lambda v: np.exp(v, dtype=np.float32), -10.0, 0.0)
    a, _ = _pairs16(rng)
    return [Case((a, lut))]


# the calls each array primitive is checked on: name -> (rng -> cases)
CASES: dict[str, Callable[[np.random.Generator], list[Case]]] = {
    "wrap_int32": lambda rng: [
        Case((_i32(rng) * 7 + _i32(rng),)),
        Case((np.array([2**31, 2**32, -(2**31) - 1, 2**40 + 5, -(2**47)]),)),
    ],
    "saturating_rounding_doubling_high_mul": lambda rng: [Case(_pairs32(rng))],
    "rounding_half_sum": lambda rng: [Case(_pairs32(rng))],
    "rounding_divide_by_pot": _divide_by_pot_cases,
    "multiply_by_quantized_multiplier": lambda rng: _quantized_multiplier_cases(rng, lambda n: rng.integers(-31, 8, n)),
    "multiply_by_quantized_multiplier_int64": _int64_accumulator_cases,
    "multiply_by_quantized_multiplier_smaller_than_one_exp": lambda rng: _quantized_multiplier_cases(
        rng, lambda n: rng.integers(-31, 1, n)
    ),
    "multiply_by_quantized_multiplier_greater_than_one": lambda rng: _quantized_multiplier_cases(
        rng, lambda n: rng.integers(0, 8, n)
    ),
    "saturating_rounding_multiply_by_pot": lambda rng: [
        Case((_i32(rng),), (e,)) for e in (-31, -5, -1, 0, 1, 2, 7, 30)
    ],
    "count_leading_zeros_u32": lambda rng: [Case((_i32(rng),))],
    "count_leading_sign_bits": lambda rng: [Case((np.concatenate([_i32(rng), _edges32(), np.arange(-300, 300)]),))],
    # exponents past 31 (TFLite Micro's DIV on x86-64) and the ordinary ones
    "rounding_divide_by_pot_x86": lambda rng: [Case((x := _i32(rng), rng.integers(0, 64, x.size)))],
    "exp_on_interval_between_negative_one_quarter_and_0_excl": lambda rng: [
        Case((np.concatenate([rng.integers(-(2**29), 0, 2000), [-(2**29), -(2**28), -1]]),))
    ],
    # integer_bits 12 takes every barrel-shifter step and the clamp below -32, 0 and 5 take few
    "exp_on_negative_values": lambda rng: [Case((-_nonneg(rng),), (bits,)) for bits in (0, 1, 5, 6, 12)],
    "one_over_one_plus_x_for_x_in_0_1": lambda rng: [Case((_nonneg(rng),))],
    "one_minus_x_over_one_plus_x_for_x_in_0_1": lambda rng: [Case((_nonneg(rng),))],
    "logistic_fixed": lambda rng: [Case((_i32(rng),), (bits,)) for bits in (0, 5, 12)],
    "tanh_fixed": lambda rng: [Case((_i32(rng),), (bits,)) for bits in (0, 4, 12)],
    "get_reciprocal": lambda rng: [Case((_nonneg(rng)[1:],), (digits,)) for digits in (0, 12)],
    # raws of values >= 1: log_softmax's Q12.19 sums to Q5.26, and a narrower input
    "log_x_for_x_greater_than_or_equal_to_1": lambda rng: [
        Case((np.maximum(_nonneg(rng), 1 << (31 - bits)),), (bits, out)) for bits, out in ((12, 5), (3, 2))
    ],
    # negative inputs too: rsqrt's eval passes them to the special case of 0 and 1
    "inv_sqrt_quantized_multiplier_exp": lambda rng: [Case((_i32(rng),), (-1,)), Case((_nonneg(rng),), (1,))],
    "saturating_rounding_doubling_high_mul_int16": lambda rng: [Case(_pairs16(rng))],
    "saturating_doubling_high_mul_int16": lambda rng: [Case(_pairs16(rng))],
    "saturating_left_shift_int16": lambda rng: [Case((_pairs16(rng)[0],), (amount,)) for amount in (0, 1, 3, 15)],
    "int16_table_lookup": _lut_cases,
    # every int16 input; the power-of-two form (multiplier 0), LSTM's multiplier 3, a general scale
    "logistic_int16": lambda rng: [Case((np.arange(-(2**15), 2**15),), ms) for ms in ((0, 0), (3, 1), (25165, 11))],
    "tanh_int16": lambda rng: [Case((np.arange(-(2**15), 2**15),), ms) for ms in ((0, 1), (3, 2), (19660, 3))],
    "round_half_away": _round_half_away_cases,
}


# the check --------------------------------------------------------------------------------------
def _as_tuple(v) -> tuple:
    return v if isinstance(v, tuple) else (v,)


def _check_on_jax(fn: Callable, case: Case, each_traced_alone: bool = True) -> None:
    """``fn`` jitted with every array traced (and, if asked, each alone, the rest numpy) equals ``fn`` on numpy."""
    want = _as_tuple(fn(*case.arrays, *case.static))
    n = len(case.arrays)
    traced_sets = [tuple(range(n))] + ([(i,) for i in range(n)] if n > 1 and each_traced_alone else [])
    with jax.enable_x64(True):
        for traced in traced_sets:

            def call(*vals, traced=traced):
                args = list(case.arrays)
                for i, v in zip(traced, vals, strict=True):
                    args[i] = v
                return fn(*args, *case.static)

            got = _as_tuple(jax.jit(call)(*(jnp.asarray(case.arrays[i]) for i in traced)))
            assert len(got) == len(want)
            for g, w in zip(got, want, strict=True):
                assert isinstance(g, jax.Array), f"{fn.__name__} left jax (traced args {traced})"
                g = np.asarray(g)
                assert g.dtype == np.asarray(w).dtype, f"{fn.__name__}: {g.dtype} on jax, {np.asarray(w).dtype}"
                assert np.array_equal(g, w), f"{fn.__name__} differs on jax (traced args {traced})"


@pytest.mark.parametrize("name", _primitives())
def test_primitive_is_bit_exact_on_jax(name: str) -> None:
    assert name in CASES, f"array primitive {name} has no jax case in CASES"
    rng = np.random.default_rng(sum(map(ord, name)))
    for i, case in enumerate(CASES[name](rng)):
        _check_on_jax(getattr(fp, name), case, each_traced_alone=i == 0)


def test_every_primitive_has_a_case() -> None:
    primitives = set(_primitives())
    assert len(primitives) >= 20  # the discovery itself works
    assert primitives - CASES.keys() == set(), "array primitives without a jax case"
    assert CASES.keys() - primitives == set(), "cases of functions that are no array primitives"


def test_a_primitive_that_breaks_on_jax_is_caught() -> None:
    # truncating the high multiply only under jax: the check must see it
    def broken(a, b):
        if fp.namespace(a, b) is np:
            return fp.saturating_rounding_doubling_high_mul(a, b)
        return (jnp.asarray(a) * jnp.asarray(b)) >> 31

    a, b = _pairs32(np.random.default_rng(0))
    with pytest.raises(AssertionError, match="differs on jax"):
        _check_on_jax(broken, Case((a, b)))


def test_namespace() -> None:
    assert fp.namespace(1, np.int64(2), np.zeros(3), 2.5) is np
    assert fp.namespace() is np
    assert fp.namespace(np.zeros(2), jnp.zeros(2)) is jnp
    seen = []

    def record(v):
        seen.append(fp.namespace(1, v))  # v is a tracer here
        return v

    jax.jit(record)(jnp.zeros(2))
    assert seen == [jnp]
