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

from amaranth.hdl import Cat, ClockSignal, Const, Instance, Module, Mux, Signal, Value, signed, unsigned

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


_DSP: contextvars.ContextVar[str | None] = contextvars.ContextVar("rlx_fpga_dsp", default=None)

#: cycles from the operands of :func:`dsp_product` to its product: the operands registered (a copy at
#: each multiplier), the product registered, and registered twice more
DSP_STAGES = 4

#: cycles from the operands of :func:`pipelined_srdhm` to its result: the partial products, their
#: sums, the high word
SRDHM_STAGES = DSP_STAGES + 2

#: the DSP primitives :func:`dsp_product` instantiates, by device family
DSP_FAMILIES = ("ecp5",)


def check_dsp_family(family: str | None) -> None:
    """Raise ``ValueError`` unless ``family`` is ``None`` or one of :data:`DSP_FAMILIES`."""
    if family is not None and family not in DSP_FAMILIES:
        raise ValueError(f"no DSP primitive for {family!r}; known: {', '.join(DSP_FAMILIES)}")


@contextlib.contextmanager
def dsp_primitives(family: str | None):
    """:func:`dsp_product` and :func:`register_copies` calls made in this block (elaboration included)
    instantiate ``family``'s DSP and flip-flop primitives (``None``: plain registers, for any device)."""
    check_dsp_family(family)
    token = _DSP.set(family)
    try:
        yield
    finally:
        _DSP.reset(token)


def dsp_product(m: Module, a: Value, b: Value, name: str = "prod") -> Value:
    """``a * b`` (signed or unsigned) :data:`DSP_STAGES` cycles later.

    Why four registers: with every DSP of a device in use, a layer's multipliers sit far from its
    logic. A ``*`` between fabric registers was a route in, the multiply and a route out in one
    cycle (17-21 ns on ECP5-85K); Yosys 0.23 does not move registers into the MULT18X18D. Inside
    :func:`dsp_primitives` ``("ecp5")`` the operands and the product are the MULT18X18D's own input
    and output registers (its data sheet's REG_INPUTA/B and REG_OUTPUT), and two fabric registers
    take the product on: with one, the route from the DSP to it was IC's and one KWS seed's critical
    path (9.8 ns of routing at 95 MHz); with two, the placer can put the first between the DSP and
    the logic. Elsewhere, and for operands wider than the DSP's 18 bits, four registers are in the
    fabric, the extra one on the operands (the simulation model of :data:`DSP_SIM_MODEL` computes
    the same).

    A :class:`Const` ``b`` of 0 gives a constant 0 and one that is a power of two a shift, in logic,
    as Yosys makes of them (no DSP); any other constant takes a DSP as a signal does."""
    a, b = Value.cast(a), Value.cast(b)
    cb = b.value if isinstance(b, Const) else None
    width = len(a) + len(b) + (0 if a.shape().signed and b.shape().signed else 1)
    signed_out = a.shape().signed or b.shape().signed
    shape = signed(width) if signed_out else unsigned(width)
    if cb == 0:
        return Const(0, shape)
    in_logic = cb is not None and abs(cb) & (abs(cb) - 1) == 0
    fits = all(len(v) + (0 if v.shape().signed else 1) <= 18 for v in (a, b))
    prod = Signal(shape, name=f"{name}_p", reset_less=True)
    if _DSP.get() == "ecp5" and fits and not in_logic:
        a18, b18 = _extend18(a), _extend18(b)
        p36 = Signal(36, name=f"{name}_p36")
        ports = {"i_CLK0": ClockSignal(), "i_CE0": Const(1, 1), "i_RST0": Const(0, 1)}
        ports |= {
            "i_SIGNEDA": Const(1, 1),
            "i_SIGNEDB": Const(1, 1),
            "i_SOURCEA": Const(0, 1),
            "i_SOURCEB": Const(0, 1),
        }
        ports |= {f"i_A{i}": a18[i] for i in range(18)} | {f"i_B{i}": b18[i] for i in range(18)}
        ports |= {f"o_P{i}": p36[i] for i in range(36)}
        m.submodules[f"{name}_dsp"] = Instance(
            "MULT18X18D",
            p_REG_INPUTA_CLK="CLK0",
            p_REG_INPUTB_CLK="CLK0",
            p_REG_PIPELINE_CLK="NONE",
            p_REG_OUTPUT_CLK="CLK0",
            p_GSR="DISABLED",
            p_RESETMODE="SYNC",
            **ports,
        )
        m.d.comb += prod.eq(p36[:width].as_signed() if signed_out else p36[:width])
        out = Signal(shape, name=f"{name}_q", reset_less=True)
        m.d.sync += out.eq(prod)
        return delay(m, out, DSP_STAGES - 3, f"{name}_r", data=True)
    # in the fabric the extra stage goes before the multiply: iCE40's SB_MAC16 takes the operand,
    # product and adder registers of a dot product in, which a register between product and adder
    # would prevent (the three-FC test design then needs 12 SB_MAC16 instead of 9)
    ar = delay(m, a, DSP_STAGES - 2, f"{name}_a", data=True)
    br = b if cb is not None else delay(m, b, DSP_STAGES - 2, f"{name}_b", data=True)  # a constant: no register
    m.d.sync += prod.eq(ar * br)
    out = Signal(shape, name=f"{name}_q", reset_less=True)
    m.d.sync += out.eq(prod)
    return out


def _extend18(v: Value) -> Value:
    """``v`` as an 18-bit two's complement operand (sign- or zero-extended)."""
    pad = v[len(v) - 1] if v.shape().signed else Const(0, 1)
    return Cat(v, pad.replicate(18 - len(v)))


def _dsp_sim_model() -> str:
    a = ", ".join(f"A{i}" for i in range(18))
    b = ", ".join(f"B{i}" for i in range(18))
    p = ", ".join(f"P{i}" for i in range(36))
    return f"""
// MULT18X18D: a simulation model of the ECP5 DSP multiplier for the configuration rlx-edge
// instantiates (REG_INPUTA/B and REG_OUTPUT on CLK0, CE0 high, RST0 low, both operands signed):
// P is the signed product of A and B two clock edges after they are presented. Synthesis skips it
// (Yosys defines SYNTHESIS) and maps the instance to the device's primitive.
`ifndef SYNTHESIS
module MULT18X18D #(
    parameter REG_INPUTA_CLK = "NONE",
    parameter REG_INPUTB_CLK = "NONE",
    parameter REG_PIPELINE_CLK = "NONE",
    parameter REG_OUTPUT_CLK = "NONE",
    parameter GSR = "ENABLED",
    parameter RESETMODE = "SYNC"
) (
    input CLK0, CE0, RST0, SIGNEDA, SIGNEDB, SOURCEA, SOURCEB,
    input {a},
    input {b},
    output {p}
);
    generate
        if (REG_INPUTA_CLK != "CLK0" || REG_INPUTB_CLK != "CLK0" || REG_PIPELINE_CLK != "NONE"
            || REG_OUTPUT_CLK != "CLK0") begin : unsupported
            initial $fatal(1, "MULT18X18D model: only REG_INPUTA/B_CLK and REG_OUTPUT_CLK = CLK0");
        end
    endgenerate
    reg signed [17:0] a_r = 0, b_r = 0;
    reg signed [35:0] p_r = 0;
    always @(posedge CLK0) begin
        a_r <= {{{", ".join(f"A{i}" for i in reversed(range(18)))}}};
        b_r <= {{{", ".join(f"B{i}" for i in reversed(range(18)))}}};
        p_r <= a_r * b_r;
    end
    assign {{{", ".join(f"P{i}" for i in reversed(range(36)))}}} = p_r;
endmodule
`endif
"""


#: Verilog appended to a design that instantiates MULT18X18D (:func:`dsp_product` under
#: :func:`dsp_primitives` ``("ecp5")``), for Verilator and Icarus
DSP_SIM_MODEL = _dsp_sim_model()


def register_copies(m: Module, d: Value, copies: int, name: str) -> list[Signal]:
    """``copies`` registers of ``m`` that each load ``d`` at every clock edge (no reset; 0 before the
    first edge): one source's fan-out split so that each copy drives a few loads beside it.

    Why: one register driving the selects of hundreds of flip-flops or the address pins of block RAMs
    across the chip was the critical path of several models on ECP5-85K (8-13 ns of routing). Yosys'
    ``opt_merge`` folds identical registers back into one (a ``keep`` on the wire does not stop it),
    so inside :func:`dsp_primitives` ``("ecp5")`` each bit of each copy is a TRELLIS_FF instance
    configured and connected as Yosys maps a plain flip-flop (no clock enable: a constant on CE
    kept the copies out of other flip-flops' slices), which it leaves alone (:data:`FF_SIM_MODEL`
    simulates it). Elsewhere they are plain registers: the same cycles, and copies Yosys may merge."""
    d = Value.cast(d)
    out = [Signal(d.shape(), name=f"{name}_c{c}", reset_less=True) for c in range(copies)]
    for c, q in enumerate(out):
        if _DSP.get() != "ecp5":
            m.d.sync += q.eq(d)
            continue
        for i in range(len(d)):
            m.submodules[f"{name}_c{c}_ff{i}"] = Instance(
                "TRELLIS_FF",
                p_GSR="DISABLED",
                p_CEMUX="1",
                p_CLKMUX="CLK",
                p_LSRMUX="LSR",
                p_REGSET="RESET",
                i_CLK=ClockSignal(),
                i_LSR=Const(0, 1),
                i_DI=d[i],
                o_Q=q[i],
            )
    return out


#: Verilog appended to a design built for ECP5 (:func:`register_copies` under :func:`dsp_primitives`
#: ``("ecp5")``), for Verilator and Icarus: the one TRELLIS_FF configuration rlx-edge instantiates
FF_SIM_MODEL = """
// TRELLIS_FF: a simulation model of the ECP5 flip-flop in the configuration rlx-edge instantiates
// (clocked on CLK's rising edge, no clock enable, LSR unused, initial value 0): Q takes DI at every edge.
// Synthesis skips it (Yosys defines SYNTHESIS) and keeps the instance as the device's primitive.
`ifndef SYNTHESIS
module TRELLIS_FF #(
    parameter GSR = "ENABLED",
    parameter CEMUX = "CE",
    parameter CLKMUX = "CLK",
    parameter LSRMUX = "LSR",
    parameter REGSET = "RESET",
    parameter SRMODE = "LSR_OVER_CE"
) (input CLK, LSR, DI, output reg Q);
    initial Q = 1'b0;
    generate
        if (CEMUX != "1" || CLKMUX != "CLK" || REGSET != "RESET") begin : unsupported
            initial $fatal(1, "TRELLIS_FF model: only CEMUX 1, CLKMUX CLK and REGSET RESET");
        end
    endgenerate
    always @(posedge CLK) Q <= DI;
endmodule
`endif
"""


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


def srdhm_round(ab: Value) -> Value:
    """:func:`srdhm_finish` as one increment: ``(ab + 2**30) >> 31``, wrapped to int32.

    Both of gemmlowp's nudges meet there: for ``ab >= 0`` the quotient is
    ``floor((ab + 2**30) / 2**31)``; for ``ab < 0`` the nudged value is negative and C's truncation of
    ``(ab + 1 - 2**30) / 2**31`` is ``floor((ab + 1 - 2**30 + 2**31 - 1) / 2**31)``, the same number.
    The low 30 bits of ``ab`` cannot carry into the result, so only the bits above them are added:
    one short carry chain instead of :func:`srdhm_finish`'s two 64-bit ones.
    """
    ab = Value.cast(ab)
    return wrap32((ab[30:].as_signed() + 1) >> 1)


#: the widest ``a`` (bits, sign included) :func:`pipelined_srdhm` multiplies with two DSPs: its bits
#: above the low 17 (at most 4) are multiplied in logic, a row per bit
NARROW_BITS = 21


def lut_product(ah: Value, b: Value) -> Value:
    """``ah * b`` for a short signed ``ah`` and an unsigned ``b`` as shifted rows of ``b`` summed in logic
    (Yosys maps a ``*`` to a DSP however short its operand is)."""
    h = len(ah)
    rows = [Mux(ah[i], b << i, 0) for i in range(h - 1)]
    top = Mux(ah[h - 1], b << (h - 1), 0)
    return tree_sum(rows) - top if rows else -top


def _narrow_srdhm(m: Module, a: Value, b: Value, a_bits: int, name: str, cb: int | None = None) -> Value:
    """:func:`pipelined_srdhm` of an ``a`` of ``a_bits`` bits and a non-negative 31-bit ``b`` with two DSPs:
    ``a = ah * 2**17 + al`` and ``b = bh * 2**17 + bl`` (``al``, ``bl`` 17 bits unsigned: 18-bit signed DSP
    operands), ``al * bl`` and ``al * bh`` on DSPs, ``ah * bl`` and ``ah * bh`` in logic. Then as there,
    with the split at 17 bits: ``(ab + 2**30) >> 31 = 8 * ah * bh + (ah * bl + al * bh + (al * bl >> 17)
    + 2**13) >> 14``, the low 17 bits of ``al * bl`` unable to carry. ``cb``: ``b``'s value when it is a
    constant (its halves then constants too: a zero half takes no DSP)."""
    al, ah = a[:17], a[17:a_bits].as_signed()
    if cb is not None:  # the halves as constants: dsp_product and Yosys see them
        bl, bh = Const(cb & 0x1FFFF, 17), Const((cb >> 17) & 0x3FFF, 14)
    else:
        bl, bh = b[:17], b[17:31]
    pp_ll, pp_lh = dsp_product(m, al, bl, f"{name}_pp_ll"), dsp_product(m, al, bh, f"{name}_pp_lh")
    # the products in logic take as many stages: operands, product, and delays to match
    ah1, bl1, bh1 = (
        v if isinstance(v, Const) else delay(m, v, 1, f"{name}_{n}", data=True)
        for v, n in ((ah, "ah"), (bl, "bl"), (bh, "bh"))
    )
    pp_hl = Signal(signed(a_bits - 17 + 17 + 1), name=f"{name}_pp_hl", reset_less=True)
    pp_hh = Signal(signed(a_bits - 17 + 14 + 1), name=f"{name}_pp_hh", reset_less=True)
    m.d.sync += [pp_hl.eq(lut_product(ah1, bl1)), pp_hh.eq(lut_product(ah1, bh1))]
    pp_hl, pp_hh = (delay(m, v, DSP_STAGES - 2, f"{v.name}_q", data=True) for v in (pp_hl, pp_hh))
    ll_hi = Cat(pp_ll[17:30], pp_ll[30:34] + 1)  # (al * bl >> 17) + 2**13: a 4-bit increment
    mid = Signal(signed(36), name=f"{name}_mid", reset_less=True)
    top = Signal(signed(len(pp_hh)), name=f"{name}_top", reset_less=True)
    m.d.sync += [mid.eq(pp_hl + pp_lh + ll_hi), top.eq(pp_hh)]
    high = Signal(signed(32), name=f"{name}_high", reset_less=True)
    m.d.sync += high.eq(wrap32((top << 3) + (mid >> 14)))
    return high


def pipelined_srdhm(m: Module, a: Value, mult: Value | int, name: str = "srdhm", a_bits: int = 32) -> Value:
    """:func:`srdhm` of two int32 values (``mult`` a constant, or a signal in step with ``a``; a Q31
    multiplier or any signed one), :data:`SRDHM_STAGES` cycles later, at most one multiplier or one
    carry chain a stage.

    With each operand split in a signed high and an unsigned low 16-bit half,
    ``a * b = ah * bh * 2**32 + (ah * bl + al * bh) * 2**16 + al * bl``: four 16 x 16 partial products
    (at most 17 x 17 bits signed: one DSP each on ECP5 and iCE40, :func:`dsp_product`), then the middle ones
    summed with the high half of the low one and the rounding constant, then one add gives the
    rounded high word (``(ab + 2**30) >> 31``, :func:`srdhm_round`). The saturating case (both
    operands INT32_MIN) is not handled: no caller reaches it.

    ``a_bits``: the bits (sign included) that hold every value ``a`` takes; up to :data:`NARROW_BITS`, with
    a non-negative multiplier, two DSPs do (:func:`_narrow_srdhm`) where four are needed otherwise.
    """
    a = Value.cast(a)
    cb = mult if isinstance(mult, int) else (mult.value if isinstance(mult, Const) else None)
    if isinstance(mult, int):
        nonneg = mult >= 0
    else:
        nonneg = not Value.cast(mult).shape().signed
    if a_bits <= NARROW_BITS and nonneg:
        b = Const(mult, 31) if isinstance(mult, int) else Value.cast(mult)
        if len(b) > 31:
            raise ValueError(f"an unsigned multiplier of {len(b)} bits does not fit int32")
        return _narrow_srdhm(m, a, Cat(b, Const(0, 31 - len(b))), max(a_bits, 18), name, cb)
    b = Const(mult, signed(32)) if isinstance(mult, int) else Value.cast(mult)
    if not b.shape().signed:
        if len(b) > 31:
            raise ValueError(f"an unsigned multiplier of {len(b)} bits does not fit int32")
        b = Cat(b, Const(0, 32 - len(b))).as_signed()
    if len(b) < 32:
        b = Cat(b, b[len(b) - 1].replicate(32 - len(b))).as_signed()
    al, ah, bl, bh = a[:16], a[16:32].as_signed(), b[:16], b[16:32].as_signed()
    if cb is not None:  # the halves as constants: dsp_product and Yosys see them
        bl, bh = Const(cb & 0xFFFF, 16), Const(((cb >> 16) & 0xFFFF) - ((cb >> 15) & 0x10000), signed(16))
    pairs = {"ll": (al, bl), "lh": (al, bh), "hl": (ah, bl), "hh": (ah, bh)}
    pp = {k: dsp_product(m, x, y, f"{name}_pp_{k}") for k, (x, y) in pairs.items()}
    # srdhm_round's 2**30 goes in here, a stage early: ``ab + 2**30 = (hh * 2**16 + mid + (ll >> 16)
    # + 2**14) * 2**16 + (ll & 0xFFFF)`` and the low 16 bits cannot carry, so the result is
    # ``2 * hh + (mid + (ll >> 16) + 2**14) >> 15``. Adding 2**14 to the 16 bits ``ll >> 16`` is a
    # 2-bit increment of their top two bits (no carry chain); the last stage is then one 34-bit add
    # where it was a three-input 65-bit add and an increment.
    ll_hi = Cat(pp["ll"][16:30], pp["ll"][30:32] + 1)
    mid = Signal(signed(35), name=f"{name}_mid", reset_less=True)
    top = Signal(signed(32), name=f"{name}_top", reset_less=True)
    m.d.sync += [mid.eq(pp["lh"] + pp["hl"] + ll_hi), top.eq(pp["hh"])]
    high = Signal(signed(32), name=f"{name}_high", reset_less=True)
    m.d.sync += high.eq(wrap32((top << 1) + (mid >> 15)))
    return high


def srdhm(a: Value, m: Value | int) -> Value:
    """gemmlowp's ``SaturatingRoundingDoublingHighMul`` of two int32 values (see :func:`srdhm_finish`)."""
    return srdhm_finish(srdhm_product(a, m))


def rounding_divide_by_pot(x: Value, exponent: Value | int, max_exponent: int = 31) -> Value:
    """gemmlowp's ``RoundingDivideByPOT``: ``x / 2**exponent`` rounded half away from zero.

    ``exponent`` is a constant or an unsigned signal up to ``max_exponent``;
    the remainder mask is a shifted constant (no subtraction, no table).
    """
    quotient, round_up = rounding_divide_by_pot_parts(x, exponent, max_exponent)
    return quotient + round_up if round_up is not None else quotient


def rounding_divide_by_pot_parts(x: Value, exponent: Value | int, max_exponent: int = 31) -> tuple[Value, Value | None]:
    """:func:`rounding_divide_by_pot` as ``(x >> exponent, round_up)`` (``None`` for a zero exponent),
    so that a pipeline can register them before the increment."""
    x = Value.cast(x)
    if isinstance(exponent, int):
        if exponent == 0:
            return x, None
        # the remainder against a threshold is a compare behind an increment, two carry chains (the
        # critical path of AD on ECP5-85K, 13.3 ns); the round-up bit from constant masks is OR trees
        x = share(x, "rdp_x")
        point = 1 << (exponent - 1)
        return x >> exponent, rounding_round_up(x, Const(point - 1, len(x)), Const(point, len(x)))
    x = share(x, "rdp_x")
    width = max(len(x), max_exponent + 1)
    ones = Const((1 << width) - 1, unsigned(width))
    mask = share((~(ones << exponent))[:width], "rdp_mask")  # the low ``exponent`` bits set
    remainder = x.as_signed().as_unsigned() & mask if x.shape().signed else x & mask
    threshold = (mask >> 1) + (x < 0)
    return x >> exponent, remainder > threshold


def rounding_masks(exponent: Value, width: int = 32) -> tuple[Value, Value]:
    """For a signal ``exponent`` e: ``(2**(e-1) - 1, 2**(e-1))`` as ``width``-bit masks, ``(0, 0)`` for
    e = 0; they depend on the exponent alone, so a pipeline computes them a stage ahead of
    :func:`rounding_round_up`."""
    exponent = Value.cast(exponent)
    point = Mux(exponent == 0, 0, (Const(1, width + 1) << exponent) >> 1)[:width]
    return (point - 1)[:width] & ~Mux(exponent == 0, (1 << width) - 1, 0), point


def rounding_round_up(x: Value, half: Value, point: Value) -> Value:
    """The round-up bit of :func:`rounding_divide_by_pot` (``remainder > threshold``) from
    :func:`rounding_masks`, without a compare: the remainder exceeds half (``mask >> 1``) exactly when
    bit e-1 is set, and a negative ``x`` must exceed half plus one, so its tie (bit e-1 alone) stays
    down. Two OR reductions instead of a 32-bit carry chain."""
    x = Value.cast(x)
    neg = x[len(x) - 1] if x.shape().signed else Const(0, 1)
    return (x & point).any() & (~neg | (x & half).any())


def saturating_rounding_multiply_by_pot(x: Value, exponent: int) -> Value:
    """gemmlowp's ``SaturatingRoundingMultiplyByPOT`` for a constant exponent (int32 raws)."""
    if exponent <= 0:
        return rounding_divide_by_pot(x, -exponent)
    # x > 2**(31-e) - 1 and x < -(2**(31-e) - 1) without compares (32-bit carry chains): the bits
    # above bit 30-e are not all copies of the sign. x = -2**(31-e) is below the threshold but not
    # caught so; its shifted value is INT32_MIN, the saturated one, all the same.
    x = share(x, "srmp_x")
    sign, top = x[31], x[31 - exponent : 31]
    return Mux(~sign & top.any(), INT32_MAX, Mux(sign & ~top.all(), INT32_MIN, wrap32(x << exponent)))


def clamp(v: Value, lo: int, hi: int) -> Value:
    """``min(max(v, lo), hi)`` as an 8-bit signed result."""
    v = share(v, "clamp_in")
    return Mux(v < lo, lo, Mux(v > hi, hi, v))[:8].as_signed()


def less_than(q: Value, c: int) -> Value:
    """``q < c`` for a signed ``q`` and a constant ``c`` of 10 bits (-512..511), as the sign, AND and OR
    reductions of the bits above the low 9 and a 9-bit compare: a 32-bit compare is a carry chain
    that took 11 ns with its routing on ECP5-85K. Other operands fall back to ``q < c``."""
    q = Value.cast(q)
    n = len(q)
    if not q.shape().signed or n <= 10 or not -512 <= c < 512:
        return q < c
    top, low, cl = q[9:], q[:9], c & 511
    if c >= 0:  # below c: negative, or the top bits all zero and the low ones below c
        return q[n - 1] | (~top.any() & (low < cl))
    # below a negative c (top bits all ones, -1): below -512, or in -512..-1 with the low bits below c's
    return (q[n - 1] & ~top.all()) | (top.all() & (low < cl))


def clamp_offset(q: Value, up: Value, offset: int, lo: int, hi: int) -> tuple[Value, Value, Value]:
    """``clamp(q + up + offset, lo, hi)`` (``up`` one bit) as three parts for :func:`clamp_select`, with
    no carry chain in front of the compares: ``q`` is compared with the bounds less the offset (in
    parallel, for either ``up``; :func:`less_than`), and the sum, used only when in range, needs its
    low 8 bits alone. Returns ``(below, above, low 8 bits of the sum)``."""
    q = share(q, "clamp_q")
    below = Mux(up, less_than(q, lo - offset - 1), less_than(q, lo - offset))
    above = ~Mux(up, less_than(q, hi - offset), less_than(q, hi - offset + 1))
    return below, above, (q[:8] + up + (offset & 0xFF))[:8]


def clamp_select(below: Value, above: Value, inside: Value, lo: int, hi: int) -> Value:
    """The clamped int8 from :func:`clamp_offset`'s parts."""
    return Mux(below, lo, Mux(above, hi, inside))[:8].as_signed()


def const_product(v: Value, c: int) -> Value:
    """``v * c`` for a constant ``c >= 0`` as a sum of shifted copies of ``v``: adders in logic. Yosys maps
    a ``*`` by any constant that is not a power of two to a DSP, and a window's address arithmetic on
    a DSP without its registers was KWS's critical path on ECP5-85K (a route in, the multiply and a
    route out: 15.8 ns)."""
    if c < 0:
        raise ValueError(f"const_product takes a non-negative constant, not {c}")
    v = Value.cast(v)
    terms = [v << i for i in range(c.bit_length()) if c >> i & 1]
    return tree_sum(terms) if terms else Const(0, 1)


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


def delay(m: Module, v: Value, cycles: int, name: str = "d", *, data: bool = False) -> Value:
    """``v`` as it was ``cycles`` clock cycles ago: a chain of registers of ``m`` (``v`` for 0).

    ``data``: registers without a reset, for values that are only used while a valid bit (which does
    reset) says so. A synchronous reset on every register is one more input on each and a net that
    reaches every corner of the chip: nextpnr does not put it on a global network, and on the ECP5-85K
    it was the critical path. Never for a valid or control bit.
    """
    v = Value.cast(v)
    for i in range(cycles):
        r = Signal(v.shape(), name=f"{name}_{i + 1}", reset_less=data)
        m.d.sync += r.eq(v)
        v = r
    return v


#: adder-tree levels between two pipeline registers of :func:`pipelined_tree_sum`: two levels of short
#: (10 to 20 bit) carry chains stay well inside 10 ns on ECP5 with their routing
TREE_LEVELS_PER_STAGE = 2


def tree_stages(terms: int) -> int:
    """Register stages :func:`pipelined_tree_sum` puts in a tree of ``terms`` values."""
    levels = max(terms - 1, 0).bit_length()
    return -(-levels // TREE_LEVELS_PER_STAGE)


def pipelined_tree_sum(m: Module, values: list[Value], name: str = "sum") -> Value:
    """:func:`tree_sum` with a register after every :data:`TREE_LEVELS_PER_STAGE` levels and after the
    last: the sum of the values of :func:`tree_stages` cycles ago (the value itself for one term)."""
    values = list(values)
    if not values:
        return Const(0, signed(2))
    level = 0
    while len(values) > 1:
        nxt = [values[i] + values[i + 1] for i in range(0, len(values) - 1, 2)]
        if len(values) % 2:
            nxt.append(values[-1])
        level += 1
        if level % TREE_LEVELS_PER_STAGE == 0 or len(nxt) == 1:
            regs = []
            for i, v in enumerate(nxt):
                r = Signal(Value.cast(v).shape(), name=f"{name}_l{level}_{i}", reset_less=True)  # data
                m.d.sync += r.eq(v)
                regs.append(r)
            nxt = regs
        values = nxt
    return values[0]


def count_leading_zeros32(x: Value) -> Value:
    """Leading zero bits of a 32-bit value (32 for zero): a tree of halves, five levels of 2-way
    multiplexers behind OR reductions, where a priority chain over the 32 bits is 32 levels deep."""

    def clz(v: Value, n: int) -> Value:
        if n == 1:
            return ~v[0]
        hi, lo = v[n // 2 :], v[: n // 2]
        upper = clz(hi, n // 2)
        lower = clz(lo, n // 2)
        # an all-zero upper half adds its width to the lower half's count (n // 2 on a zero lower half)
        return Mux(hi.any(), upper, (n // 2) + lower)

    return Value.cast(clz(Value.cast(x)[:32], 32))[:6]
