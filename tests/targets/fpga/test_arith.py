"""The pipelined fixed-point pieces of the FPGA datapath against the numpy reference, in Amaranth's simulator.

The requantizer and the add reach 100 MHz on ECP5 by splitting TFLite's
arithmetic into stages (``arith.pipelined_srdhm``, ``rounding_masks`` /
``rounding_round_up``, ``clamp_offset`` / ``clamp_select``,
``pipelined_tree_sum``, and ``components.pipelined_rom``, deep weight ROMs in
banks); each split must equal the function it replaces bit for bit. The
rounding pieces are checked exhaustively on 8-bit values, the doubling high
multiply on its edges and random int32 / Q31 pairs, the banked ROM on every
word. Only valid bits reset; the requantizer is checked through a reset with
its pipeline full.
"""

from __future__ import annotations

import numpy as np
import pytest
from amaranth.hdl import Module, Signal, signed
from amaranth.sim import Simulator

from rlx_edge.ir import fixedpoint as fx
from rlx_edge.targets.fpga.arith import (
    SRDHM_STAGES,
    clamp_offset,
    clamp_select,
    count_leading_zeros32,
    pipelined_srdhm,
    pipelined_tree_sum,
    rounding_divide_by_pot_parts,
    rounding_masks,
    rounding_round_up,
    saturating_rounding_multiply_by_pot,
    tree_stages,
)
from rlx_edge.targets.fpga.components import pipelined_rom, rom_bank_depth, rom_latency


def _run(m: Module, bench) -> None:
    sim = Simulator(m)
    sim.add_clock(1e-6, if_exists=True)
    sim.add_testbench(bench)
    sim.run()


def test_rounding_round_up_is_rounding_divide_by_pot_exhaustively_on_8_bits():
    width = 8
    m = Module()
    x, e, up = Signal(signed(width)), Signal(range(width)), Signal()
    half, point = rounding_masks(e, width)
    m.d.comb += up.eq(rounding_round_up(x, half, point))
    xs = np.arange(-(1 << (width - 1)), 1 << (width - 1))
    seen = []

    async def bench(ctx):
        for ev in range(width):
            want = fx.rounding_divide_by_pot(xs, ev)
            for xv, w in zip(xs.tolist(), want.tolist()):
                ctx.set(x, xv)
                ctx.set(e, ev)
                seen.append((xv >> ev) + ctx.get(up) == w)

    _run(m, bench)
    assert len(seen) == 256 * width and all(seen)


def test_rounding_divide_by_pot_parts_with_a_constant_exponent_exhaustively_on_8_bits():
    """The constant-exponent form (the requantizer's and the add's) against the reference, every
    exponent and every 8-bit value."""
    xs = np.arange(-128, 128)
    seen = []
    for ev in range(8):
        m = Module()
        x, y = Signal(signed(8)), Signal(signed(9))
        quo, up = rounding_divide_by_pot_parts(x, ev)
        m.d.comb += y.eq(quo + up if up is not None else quo)

        async def bench(ctx, ev=ev, x=x, y=y):
            for xv, w in zip(xs.tolist(), fx.rounding_divide_by_pot(xs, ev).tolist()):
                ctx.set(x, xv)
                seen.append(ctx.get(y) == w)

        _run(m, bench)
    assert len(seen) == 256 * 8 and all(seen)


def test_clamp_offset_is_clamp_of_the_sum():
    m = Module()
    q, up = Signal(signed(32)), Signal()
    cases = [(zp, lo, hi) for zp in (-128, -5, 0, 17, 127) for lo, hi in ((-128, 127), (zp, 127), (-20, 30))]
    outs = []
    for zp, lo, hi in cases:
        o = Signal(signed(8))
        m.d.comb += o.eq(clamp_select(*clamp_offset(q, up, zp, lo, hi), lo, hi))
        outs.append(o)
    rng = np.random.default_rng(0)
    edges = [-1025, -1024, -1023, -513, -512, -511, 511, 512, 513, 1023, 1024, 1025]  # around less_than's split
    qs = [*range(-300, 300), *edges, 2**31 - 2, -(2**31), 2**30, -(2**30)]
    qs += rng.integers(-(2**31), 2**31 - 1, 100).tolist()
    bad, n = [], 0

    async def bench(ctx):
        nonlocal n
        for qv in qs:
            for uv in (0, 1):
                ctx.set(q, qv)
                ctx.set(up, uv)
                for (zp, lo, hi), o in zip(cases, outs):
                    n += 1
                    if ctx.get(o) != min(max(qv + uv + zp, lo), hi):
                        bad.append((qv, uv, zp, lo, hi))

    _run(m, bench)
    assert n == len(qs) * 2 * len(cases) and not bad, bad[:5]


def _comb_values(fn, in_shape, out_shape, values: list[int]) -> list[int]:
    """``fn`` of a signal of ``in_shape`` (combinational, into ``out_shape``) at each of ``values``."""
    m = Module()
    x, y = Signal(in_shape), Signal(out_shape)
    m.d.comb += y.eq(fn(x))
    got = []

    async def bench(ctx):
        for v in values:
            ctx.set(x, v)
            got.append(ctx.get(y))

    _run(m, bench)
    return got


def _pipelined_srdhm_results(
    pairs: list[tuple[int, int]], b_shape, const: int, a_bits: int = 32, built: list | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`pipelined_srdhm` of each pair (``b`` a signal of ``b_shape``), and of each ``a`` and ``const``,
    read SRDHM_STAGES cycles after the operands; ``built`` gets the module."""
    m = Module()
    a, b = Signal(signed(32)), Signal(b_shape)
    by_signal = pipelined_srdhm(m, a, b, "s", a_bits=a_bits)
    by_const = pipelined_srdhm(m, a, const, "c", a_bits=a_bits)
    if built is not None:
        built.append(m)
    got_s, got_c = [], []

    async def bench(ctx):
        for i in range(len(pairs) + SRDHM_STAGES):
            if i < len(pairs):
                ctx.set(a, pairs[i][0])
                ctx.set(b, pairs[i][1])
            await ctx.tick()
            if i + 1 >= SRDHM_STAGES and len(got_s) < len(pairs):
                got_s.append(ctx.get(by_signal))
                got_c.append(ctx.get(by_const))

    _run(m, bench)
    assert len(got_s) == len(pairs)
    return np.array(got_s), np.array(got_c)


def _srdhm_reference(pairs: list[tuple[int, int]], const: int) -> tuple[np.ndarray, np.ndarray]:
    xs = np.array([p[0] for p in pairs], dtype=np.int64)
    bs = np.array([p[1] for p in pairs], dtype=np.int64)
    return (
        fx.saturating_rounding_doubling_high_mul(xs, bs),
        fx.saturating_rounding_doubling_high_mul(xs, np.full_like(xs, const)),
    )


def test_pipelined_srdhm_is_the_doubling_high_multiply():
    """Signal and constant Q31 multipliers, SRDHM_STAGES cycles after the operands."""
    rng = np.random.default_rng(1)
    edges = [0, 1, -1, 2**31 - 1, -(2**31), 2**30, -(2**30), 12345, -12345]
    a_vals = edges + rng.integers(-(2**31), 2**31, 300).tolist()
    m_vals = [0, 1, 2**30, 2**31 - 1, *rng.integers(2**30, 2**31, 5).tolist()]
    const = 1518500250  # a typical Q31 multiplier (sqrt(2)/2 * 2**31)
    pairs = [(int(x), int(y)) for y in m_vals for x in a_vals]
    got, want = _pipelined_srdhm_results(pairs, 31, const), _srdhm_reference(pairs, const)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


def test_pipelined_srdhm_of_two_signed_operands():
    """The softmax's Newton-Raphson multiplies both signs (a negative constant, iterates of either sign)."""
    rng = np.random.default_rng(2)
    edges = [0, 1, -1, 2**31 - 1, -(2**31), 2**30, -(2**30), 65535, -65536, 32768, -32769]
    pairs = [(x, y) for x in edges for y in edges if (x, y) != (-(2**31), -(2**31))]
    pairs += [tuple(int(v) for v in rng.integers(-(2**31), 2**31, 2)) for _ in range(600)]
    const = -1010580540  # the reciprocal's seed slope
    got, want = _pipelined_srdhm_results(pairs, signed(32), const), _srdhm_reference(pairs, const)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


def test_count_leading_zeros32():
    values = [0, 1, 2, 3, 2**31, 2**32 - 1, 0x00010000, 0x0000FFFF, 0x00800000, 0x7FFFFFFF]
    values += [1 << k for k in range(32)] + [int(v) for v in np.random.default_rng(3).integers(0, 2**32, 200)]
    assert _comb_values(count_leading_zeros32, 32, 6, values) == [32 - v.bit_length() for v in values]


def test_pipelined_tree_sum_registers_every_two_levels():
    assert [tree_stages(n) for n in (1, 2, 3, 4, 5, 8, 9, 16, 17, 64)] == [0, 1, 1, 1, 2, 2, 2, 2, 3, 3]
    for terms in (1, 2, 5, 16):
        m = Module()
        ins = [Signal(signed(17), name=f"x{i}") for i in range(terms)]
        out = pipelined_tree_sum(m, ins)
        rng = np.random.default_rng(terms)
        draws = rng.integers(-(2**16), 2**16, (20, terms)).tolist()
        got = []

        async def bench(ctx, ins=ins, out=out, draws=draws, got=got, terms=terms):
            lag = tree_stages(terms)
            for i in range(len(draws) + lag):
                if i < len(draws):
                    for s, v in zip(ins, draws[i]):
                        ctx.set(s, v)
                if i >= lag:
                    got.append(ctx.get(out))
                await (ctx.tick() if lag else ctx.delay(1e-6))  # one term: no register, no clock

        _run(m, bench)
        assert got == [sum(d) for d in draws], terms


@pytest.mark.parametrize(
    ("width", "depth", "bank", "latency"),
    [
        (16, 512, 1024, 2),  # one block RAM: x18, not 16 side by side in x1
        (16, 3000, 1024, 4),  # 3 x18 block RAMs, not 2 x 2 in x9
        (16, 4096, 4096, 3),  # 4 block RAMs either way: one bank of 4 x4 ones, in 2 columns of 2
        (16, 40960, 8192, 5),  # AD's 640 x 128 layer: 5 banks of 8 x2 block RAMs, not 40 of one
        (32, 1500, 512, 4),  # 3 PDPW16KD in their 36-bit mode, not 4 in x18 or x9
        (72, 300, 512, 2),  # one column: two 36-bit block RAMs share an address register
        (100, 300, 512, 3),  # two columns (72 + 28 bits), each with its address register's copy
    ],
)
def test_rom_bank_depth_is_the_deepest_mode_that_wastes_no_block_ram(width, depth, bank, latency):
    """Deeper banks, fewer bank registers and multiplexer inputs, for the same block RAMs."""
    assert rom_bank_depth(width, depth) == bank
    assert rom_latency(width, depth) == latency


@pytest.mark.parametrize(
    ("width", "depth"), [(16, 700), (16, 4096), (100, 300), (16, 3000), (16, 5000), (16, 16 * 1024 + 1), (16, 20000)]
)
def test_pipelined_rom_reads_every_word_at_its_latency(width: int, depth: int):
    """One bank (in one column, and in two of two block RAMs: 16 x 4,096 in x4 mode, 100 x 300 in x36), one,
    two and three levels of the bank multiplexer (1,024-word banks), and 5 banks of
    4,096 words (x4 mode): sequential reads across every bank boundary, then random ones, each word
    distinct."""
    words = [(i * 7919) % (1 << width) for i in range(depth)]
    assert len(set(words)) == depth
    m = Module()
    addr, data = pipelined_rom(m, None, "w", width, words)
    lat = rom_latency(width, depth)
    rng = np.random.default_rng(depth)
    addrs = list(range(depth)) + rng.integers(0, depth, 200).tolist()
    got = []

    async def bench(ctx):
        for i in range(len(addrs) + lat):
            if i < len(addrs):
                ctx.set(addr, addrs[i])
            await ctx.tick()
            if i + 1 >= lat and len(got) < len(addrs):
                got.append(ctx.get(data))

    _run(m, bench)
    assert got == [words[a] for a in addrs]


@pytest.mark.parametrize("const_params", [None, (1518500250, -3)], ids=["per_channel", "constant"])
def test_requantizer_data_stages_have_no_reset_and_valid_does(const_params):
    """Only o_valid (and the tag beside it) resets: data registers without a reset keep the reset net off
    them (on the ECP5-85K it was the critical path). A reset with a full pipeline drops every group in
    flight; the data keeps flowing through it; the groups given afterwards come out bit-exact."""
    from amaranth.hdl import ClockDomain

    from rlx_edge.targets.fpga.components import Requantizer

    lanes, zp, lo, hi = 2, -5, -128, 127
    rq = Requantizer(lanes, zero_point=zp, lo=lo, hi=hi, const_params=const_params)
    m = Module()
    m.domains.sync = cd = ClockDomain()
    m.submodules.rq = rq
    rng = np.random.default_rng(7)
    n = 60
    accs = rng.integers(-(2**16), 2**16, (n, lanes))
    if const_params is None:
        mults = rng.integers(2**30, 2**31, (n, lanes))
        shifts = rng.integers(-10, 2, (n, lanes))
    else:
        mults, shifts = np.full((n, lanes), const_params[0]), np.full((n, lanes), const_params[1])
    want = np.clip(fx.multiply_by_quantized_multiplier(accs, mults, shifts) + zp, lo, hi)
    valid = rng.integers(0, 2, n).astype(bool)
    valid[0] = True  # group 0 also fills the pipeline before the reset
    lat = Requantizer.latency

    def put(ctx, i: int, v: bool) -> None:
        ctx.set(rq.i_valid, v)
        ctx.set(rq.i_acc, sum((int(accs[i, k]) & 0xFFFFFFFF) << (32 * k) for k in range(lanes)))
        ctx.set(rq.i_mult, sum(int(mults[i, k]) << (31 * k) for k in range(lanes)))
        ctx.set(rq.i_left, sum(max(int(shifts[i, k]), 0) << (5 * k) for k in range(lanes)))
        ctx.set(rq.i_right, sum(max(-int(shifts[i, k]), 0) << (5 * k) for k in range(lanes)))

    def lanes_of(word: int) -> list[int]:
        return [((word >> (8 * k)) & 0xFF) - (((word >> (8 * k)) & 0x80) << 1) for k in range(lanes)]

    after_reset, got = [], []

    async def bench(ctx):
        for _ in range(lat + 2):  # the pipeline full of valid group 0
            put(ctx, 0, True)
            await ctx.tick()
        ctx.set(cd.rst, 1)
        await ctx.tick()
        ctx.set(cd.rst, 0)
        put(ctx, 0, False)
        for _ in range(lat):
            after_reset.append((ctx.get(rq.o_valid), lanes_of(ctx.get(rq.o_data))))
            await ctx.tick()
        for i in range(n + lat):
            if i < n:
                put(ctx, i, bool(valid[i]))
            else:
                ctx.set(rq.i_valid, 0)
            await ctx.tick()
            if i + 1 >= lat and len(got) < n:
                got.append((ctx.get(rq.o_valid), lanes_of(ctx.get(rq.o_data))))

    _run(m, bench)
    # the groups in flight are gone; their data is not: no reset reached the data registers
    assert [v for v, _ in after_reset] == [0] * lat
    assert after_reset[0][1] == want[0].tolist() != [0] * lanes
    assert len(got) == n
    assert [v for v, _ in got] == valid.astype(int).tolist()
    assert all(d == want[i].tolist() for i, (v, d) in enumerate(got) if v)


@pytest.mark.parametrize("exponent", [1, 2, 5])
def test_saturating_rounding_multiply_by_pot_at_its_thresholds(exponent):
    """The OR/AND form of the saturation tests equals gemmlowp's compares, at and around both thresholds."""
    t = (1 << (31 - exponent)) - 1
    edges = [0, 1, -1, t, t + 1, t - 1, -t, -t - 1, -t + 1, -t - 2, 2**31 - 1, -(2**31)]
    values = edges + [int(v) for v in np.random.default_rng(exponent).integers(-(2**31), 2**31, 300)]
    got = _comb_values(lambda x: saturating_rounding_multiply_by_pot(x, exponent), signed(32), signed(32), values)
    want = fx.saturating_rounding_multiply_by_pot(np.array(values, dtype=np.int64), exponent)
    assert np.array_equal(np.array(got), want)


@pytest.mark.parametrize("a_bits", [18, 19, 21])
def test_pipelined_srdhm_of_a_narrow_operand_on_two_dsps(a_bits):
    """An ``a`` of at most NARROW_BITS bits: two DSP products and two in logic, the same results."""
    rng = np.random.default_rng(a_bits)
    lo, hi = -(2 ** (a_bits - 1)), 2 ** (a_bits - 1) - 1
    a_vals = [lo, hi, 0, 1, -1, lo + 1, 2**17 - 1, -(2**17), 2**16, *rng.integers(lo, hi + 1, 200).tolist()]
    m_vals = [0, 1, 2**30, 2**31 - 1, 2**17 - 1, 2**17, *rng.integers(2**30, 2**31, 3).tolist()]
    pairs = [(int(x), int(y)) for y in m_vals for x in a_vals]
    const = 1518500250
    built: list[Module] = []
    got = _pipelined_srdhm_results(pairs, 31, const, a_bits=a_bits, built=built)
    want = _srdhm_reference(pairs, const)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    # the narrow form was built: its products in logic have registers of their own
    assert "s_pp_hl" in _register_names(built[0]) and "c_pp_hh" in _register_names(built[0])


def _register_names(m: Module) -> set[str]:
    from amaranth.hdl import Fragment

    frag = Fragment.get(m, None)
    return {st.lhs.name for stmts in frag.statements.values() for st in stmts if hasattr(st.lhs, "name")}
