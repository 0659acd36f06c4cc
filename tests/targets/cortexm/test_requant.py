"""The kernels' fast requantization (rules.fast_requant) equals the reference double rounding.

A numpy model of the C (SMMLAR on a doubled accumulator, sign correction,
one arithmetic shift) against fixedpoint.multiply_by_quantized_multiplier on
edge cases: accumulators at the bound, around every rounding tie of the
high multiply and of the power-of-two division, zero, +-1; multipliers at
both ends of [2**30, 2**31); shifts 1..31; zero points at both ends.
The C itself is checked bit-exactly through the model and kernel tests.
"""

from __future__ import annotations

import numpy as np

from rlx_edge.ir import fixedpoint as fp
from rlx_edge.targets.cortexm.rules import _requant, constant_channels, fast_requant


def _model(acc, mult, add, e):
    acc = acc.astype(np.int64)
    t = ((np.int64(add) << 32) + (acc << 1) * np.int64(mult) + (1 << 31)) >> 32  # SMMLAR
    assert np.all(np.abs(t) < 2**31)
    t = t + np.where(acc < 0, -1, 0)  # + (acc >> 31)
    return t >> e


def _cases(rng, bound, mult, e):
    base = [0, 1, -1, bound, -bound, bound - 1, -bound + 1]
    # accumulators whose product lands on a rounding tie: x * m ~ k * 2**(30 + e) (+-1)
    ks = rng.integers(-(bound * mult >> (30 + e)) - 1, (bound * mult >> (30 + e)) + 2, 200)
    ties = []
    for k in ks:
        x = int((int(k) << (30 + e)) // mult) if mult else 0
        ties += [x - 1, x, x + 1]
    xs = np.array(base + ties + list(rng.integers(-bound, bound + 1, 300)), dtype=np.int64)
    return np.clip(xs, -bound, bound)


def test_fast_requant_is_exact():
    rng = np.random.default_rng(5)
    checked = 0
    for mult in [1 << 30, (1 << 31) - 1, 1 << 30 | 1, 1518500250, 1932735283]:
        for e in list(range(1, 32, 3)) + [31]:
            for zp in (-128, -1, 0, 5, 127):
                bound = (1 << 30) - 1 if e > 3 else 1 << 24
                mode, add, rshift = fast_requant(np.array([mult]), np.array([-e]), np.array([bound]), zp, -128, 127)
                if mode == 0:
                    continue  # the emitter keeps the reference formula
                assert mode == 2 and int(rshift[0]) == e
                xs = _cases(rng, bound, mult, e)
                want = fp.multiply_by_quantized_multiplier(xs, mult, -e) + zp
                got = _model(xs, mult, int(add[0]), e)
                assert np.array_equal(got, want), (mult, e, zp)
                checked += xs.size
    assert checked > 50_000


def test_fast_requant_refuses_what_it_cannot_prove():
    one = np.array([1 << 30])
    assert fast_requant(one, np.array([0]), np.array([100]), 0, -128, 127)[0] == 0  # e = 0
    assert fast_requant(one, np.array([2]), np.array([100]), 0, -128, 127)[0] == 0  # left shift
    assert fast_requant(one, np.array([-5]), np.array([1 << 30]), 0, -128, 127)[0] == 0  # |acc| may reach 2**30
    assert fast_requant(one, np.array([-31]), np.array([100]), 3, -128, 127)[0] == 0  # zp * 2**e overflows
    assert fast_requant(one, np.array([-5]), np.array([100]), 3, -10, 100)[0] == 1  # clamp, not SSAT


def test_constant_channels_keep_the_reference_values():
    """Channels with one output over their whole accumulator range (a huge
    bias, e up to 31, multiplier 0) become multiplier 0, e = 1, the value in
    rq_add: the fast formula then matches the reference at every accumulator
    of the range, and the other channels keep theirs."""
    rng = np.random.default_rng(9)
    mult = np.array([1320764593, 1569364972, 0, 1 << 30, 1932735283, 1171292447], np.int64)
    shift = np.array([-27, -31, 0, -8, -31, -20], np.int64)
    acc_lo = np.array([(1 << 30) - 5000, -4000, -(1 << 20), -3000, -(1 << 29), -(1 << 29)], np.int64)
    acc_hi = np.array([(1 << 30) + 5000, 4000, 1 << 20, 3000, (1 << 29) - 9, 1 << 29], np.int64)
    bound = np.maximum(np.abs(acc_lo), np.abs(acc_hi))
    const, value = constant_channels(mult, shift, acc_lo, acc_hi)
    assert const.tolist() == [True, True, True, False, True, False]
    assert int(value[0]) != 0  # the huge bias: a constant, but not the zero point
    for zp in (-128, 0, 17):
        mode, m2, add, e = _requant(mult, shift, bound, acc_lo, acc_hi, zp, -128, 127)
        assert mode == 2
        for c in range(mult.size):
            xs = np.concatenate([[acc_lo[c], acc_hi[c], 0, -1, 1], rng.integers(acc_lo[c], acc_hi[c] + 1, 500)])
            xs = xs[(xs >= acc_lo[c]) & (xs <= acc_hi[c])].astype(np.int64)
            want = np.clip(fp.multiply_by_quantized_multiplier(xs, int(mult[c]), int(shift[c])) + zp, -128, 127)
            got = np.clip(_model(np.clip(xs, -(2**30) + 1, 2**30 - 1), int(m2[c]), int(add[c]), int(e[c])), -128, 127)
            if const[c]:
                # the accumulator only enters through its sign: any in range
                got = np.clip(_model(np.sign(xs), 0, int(add[c]), int(e[c])), -128, 127)
            assert np.array_equal(got, want), (c, zp)


def test_fully_connected_needs_no_scratch(mlperf_graph):
    from rlx_edge.targets.cortexm import emit

    em = emit(mlperf_graph("ad"))
    assert em.program.scratch_bytes == 0
    assert em.arena_bytes <= 1195  # TFLite Micro's 3,984 B x 0.30
