"""Amaranth components, one per layer kind, and the requantizer they share.

Every layer component runs once per ``start`` pulse and pulses ``done`` after
its last output is written. It reads its input tensor(s) through synchronous
read ports of on-chip buffers and writes its output through one write port
with per-lane write enables; the top level (:mod:`.design`) owns the buffers
and multiplexes their ports between layers.

Buffers hold NHWC tensors in words of ``word_lanes`` int8 lanes. A layer
reads ``lanes`` elements per cycle: word ``e // word_lanes``, lane group
``(e % word_lanes) // lanes``; it writes its results as groups of lanes in
increasing element order, so every writer is a word/lane-group counter and no
layer ever stalls on a buffer port.

Pipelines carry a ``valid`` bit per stage; loop counters advance one step per
cycle, so a layer with ``T`` steps finishes in ``T`` plus its pipeline depth
cycles (see :attr:`LayerComponent.latency`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from amaranth.hdl import Cat, ClockSignal, Const, Instance, Module, Mux, ResetSignal, Signal, signed, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from rlx_edge.ir.ops import window_counts
from rlx_edge.targets.fpga.arith import (
    DSP_STAGES,
    INT32_MAX,
    NARROW_BITS,
    SRDHM_STAGES,
    clamp,
    clamp_offset,
    clamp_select,
    const_product,
    count_leading_zeros32,
    delay,
    dsp_product,
    pipelined_srdhm,
    pipelined_tree_sum,
    register_copies,
    rounding_divide_by_pot,
    rounding_divide_by_pot_parts,
    rounding_masks,
    rounding_round_up,
    saturating_rounding_multiply_by_pot,
    share,
    sharing,
    tree_stages,
    wrap32,
)


# helpers -----------------------------------------------------------------------------
def pack_words(values: np.ndarray, lane_bits: int) -> list[int]:
    """Rows of ``values`` (one word per row, lane 0 first) as little-endian integers."""
    rows = np.asarray(values, dtype=np.int64)
    mask = (1 << lane_bits) - 1
    words = []
    for row in rows.reshape(rows.shape[0], -1):
        w = 0
        for i, v in enumerate(row.tolist()):
            w |= (int(v) & mask) << (i * lane_bits)
        words.append(w)
    return words


def lane(v, i: int, bits: int = 8):
    """Lane ``i`` of a packed word as a signed value."""
    return v[i * bits : (i + 1) * bits].as_signed()


def _addr_bits(depth: int) -> int:
    return max(1, (max(depth, 1) - 1).bit_length())


def _counters(m: Module, step, dims: list[tuple[str, int]]) -> tuple[dict, object]:
    """Nested loop counters (outermost first) advancing on ``step``.

    Returns the counter signals by name and a signal-expression that is true
    on the last step of the whole nest. Counters wrap to zero after their last
    value, so a finished nest is ready for the next run without a reset.
    """
    ctrs: dict = {}
    carry = step
    all_max = Const(1, 1)
    for name, count in reversed(dims):
        if count == 1:
            # a loop of one step is a constant 0, not a register: the address arithmetic and the flags
            # built on it fold away (a fully connected layer's window loops, a pool's batch)
            ctrs[name], ctrs[f"{name}_max"] = Const(0, 1), Const(1, 1)
            continue
        c = Signal(range(max(count, 2)), name=f"c_{name}")
        at_max = c == count - 1
        with m.If(carry):
            m.d.sync += c.eq(Mux(at_max, 0, c + 1))
        carry = carry & at_max
        all_max = all_max & at_max
        ctrs[name] = c
        ctrs[f"{name}_max"] = at_max
    return ctrs, all_max


class _RomPort:
    """The address and data signals of one ROM (the fields of an Amaranth read port that layers use)."""

    def __init__(self, abits: int, width: int, name: str):
        self.addr = Signal(abits, name=f"{name}_addr")
        self.data = Signal(width, name=f"{name}_data")


class RomSink:
    """Collects the ROMs of a design as ``$readmemh`` files instead of inline Verilog constants.

    Amaranth turns every bit of a ``Memory`` initializer into netlist constants
    (tens of seconds for a model's weights) and Verilator compiles them into
    megabytes of C++; a ROM instance reading a hex file costs neither. Files
    are named ``<prefix>_rom<N>.hex`` in elaboration order, so the Verilog
    does not depend on the weights and a simulator build is reused when only
    they change. ``roms`` holds ``(file name, width, words)``.
    """

    def __init__(self, prefix: str):
        self.prefix = prefix
        self.module = f"{prefix}_rom"
        self.roms: list[tuple[str, int, list[int]]] = []

    def port(self, m: Module, name: str, width: int, words: list[int]) -> _RomPort:
        words = list(words) or [0]
        abits = _addr_bits(len(words))
        fname = f"{self.prefix}_rom{len(self.roms)}.hex"
        self.roms.append((fname, width, words))
        port = _RomPort(abits, width, name)
        m.submodules[name] = Instance(
            self.module,
            p_WIDTH=width,
            p_DEPTH=len(words),
            p_ABITS=abits,
            p_FILE=fname,
            i_clk=ClockSignal(),
            i_addr=port.addr,
            o_data=port.data,
        )
        return port


def hex_lines(width: int, words: list[int]) -> str:
    """``$readmemh`` text: one word per line, most significant digit first."""
    digits = (width + 3) // 4
    return "".join(f"{w:0{digits}x}\n" for w in words)


def rom_port(m: Module, owner, name: str, width: int, words: list[int]):
    """A synchronous-read ROM holding ``words``: a ``$readmemh`` instance when ``owner.rom_sink``
    is set (by :class:`~rlx_edge.targets.fpga.design.FpgaDesign`), else an Amaranth ``Memory``."""
    sink = getattr(owner, "rom_sink", None)
    if sink is not None:
        return sink.port(m, name, width, words)
    mem = Memory(shape=unsigned(width), depth=max(len(words), 1), init=list(words) or [0])
    m.submodules[name] = mem
    return mem.read_port()


#: ECP5 block RAM (DP16KD, and PDPW16KD for 36-bit words; 18 kbit) modes: (bits a word, words)
BRAM_MODES = ((1, 16384), (2, 8192), (4, 4096), (9, 2048), (18, 1024), (36, 512))


def rom_bank_depth(width: int, depth: int) -> int:
    """Words in one bank of a deep ROM of ``depth`` words of ``width`` bits: the deepest block RAM mode
    that needs no more block RAMs for the whole ROM than the best mode does (a bank is then a row of
    block RAMs side by side, ``width`` bits wide, that Yosys maps without a multiplexer of its own).

    The deeper the bank, the fewer banks the fabric multiplexes: a 40,960 x 16-bit ROM is 40 block
    RAMs either way, but 5 banks of 8,192 words (x2 mode) instead of 40 of 1,024 (x18), so 80 bank
    registers and a two-level multiplexer instead of 640 and three levels.
    """

    def brams(mode: tuple[int, int]) -> int:
        bits, words = mode
        return -(-max(depth, 1) // words) * -(-width // bits)

    best = min(brams(mode) for mode in BRAM_MODES)
    return max(words for bits, words in BRAM_MODES if brams((bits, words)) == best)


#: banks one stage of a deep ROM's bank multiplexer chooses among: two LUT4s and a PFUMX, one ECP5
#: slice, per bit
ROM_MUX_WAYS = 4


def rom_latency(width: int, depth: int) -> int:
    """Cycles from the address of :func:`pipelined_rom` to its registered data: the read, its register,
    and for a ROM of several banks, the banks' address registers and one stage per level of the bank
    multiplexer."""
    banks, levels = -(-max(depth, 1) // rom_bank_depth(width, depth)), 0
    if banks == 1:
        return 2 + (len(_rom_columns(width, depth)) > 1)
    while banks > 1:
        banks, levels = -(-banks // ROM_MUX_WAYS), levels + 1
    return 2 + levels + (levels > 0)


#: block RAMs side by side that one copy of a ROM's address register drives (:func:`pipelined_rom`)
ROM_COLUMN_BRAMS = 2


def _rom_columns(width: int, depth: int) -> list[tuple[int, int]]:
    """``(first bit, bits)`` of the columns a one-bank ROM is split into, each :data:`ROM_COLUMN_BRAMS`
    block RAMs wide in the mode :func:`rom_bank_depth` chose; one column when that is all of it."""
    bank = rom_bank_depth(width, depth)
    step = ROM_COLUMN_BRAMS * max(bits for bits, words in BRAM_MODES if words == bank)
    return [(lo, min(step, width - lo)) for lo in range(0, width, step)]


def pipelined_rom(m: Module, owner, name: str, width: int, words: list[int]) -> tuple[Signal, Signal]:
    """A ROM whose data is registered :func:`rom_latency` cycles after its address.

    A ROM deeper than one bank (:func:`rom_bank_depth`: block RAMs side by side in their deepest
    mode that wastes none) is split into banks, every bank's output registered beside it, then the
    banks chosen :data:`ROM_MUX_WAYS` at a time, a register after each level: left whole, a deep
    ROM is a chain of block RAMs behind one wide multiplexer whose clock-to-out and routing alone
    take more than a 10 ns cycle on ECP5. Each bank has its own copy of the address register.
    Returns ``(address, data)``.
    """
    words = list(words) or [0]
    bank = rom_bank_depth(width, len(words))
    addr = Signal(_addr_bits(len(words)), name=f"{name}_addr")
    if len(words) <= bank:
        columns = _rom_columns(width, len(words))
        if len(columns) == 1:
            port = rom_port(m, owner, name, width, words)
            m.d.comb += port.addr.eq(addr)
            return addr, delay(m, port.data, 1, f"{name}_q", data=True)
        # a wide ROM in columns of a few block RAMs, each with its own copy of the address register: one
        # register driving them all took 12.9 ns of routing on ECP5-85K (AD's critical path)
        data = []
        for c, (lo, bits) in enumerate(columns):
            mask = (1 << bits) - 1
            port = rom_port(m, owner, f"{name}_c{c}", bits, [(w >> lo) & mask for w in words])
            m.d.comb += port.addr.eq(register_copies(m, addr, 1, f"{name}_c{c}_addr")[0])
            data.append(port.data)
        return addr, delay(m, Cat(*data), 1, f"{name}_q", data=True)
    bits = _addr_bits(bank)
    level = []
    for b in range(-(-len(words) // bank)):
        port = rom_port(m, owner, f"{name}_b{b}", width, words[b * bank : (b + 1) * bank])
        # each bank its own copy of the address, loaded only while the address is in that bank (which
        # is all its output is used for): one register driving every bank's block RAMs took 11.5 ns
        # of routing on the 85K; the enables differ, so Yosys cannot merge the copies back into one
        baddr = Signal(bits, name=f"{name}_b{b}_addr", reset_less=True)  # its word is data
        with m.If(addr[bits:] == b):
            m.d.sync += baddr.eq(addr[:bits])
        m.d.comb += port.addr.eq(baddr)
        level.append(delay(m, port.data, 1, f"{name}_b{b}_q", data=True))
    which = delay(m, addr[bits:], 3, f"{name}_bank", data=True)  # the bank index, in step with the registered outputs
    depth = 0
    while len(level) > 1:
        sel_bits = _addr_bits(ROM_MUX_WAYS)
        sel = which[sel_bits * depth : sel_bits * (depth + 1)]
        nxt = []
        for i in range(0, len(level), ROM_MUX_WAYS):
            group = level[i : i + ROM_MUX_WAYS]
            r = Signal(width, name=f"{name}_m{depth}_{i // ROM_MUX_WAYS}", reset_less=True)
            m.d.sync += r.eq(Cat(*group).word_select(sel, width) if len(group) > 1 else group[0])
            nxt.append(r)
        which = delay(m, which, 1, f"{name}_bank{depth}", data=True)
        level, depth = nxt, depth + 1
    return addr, level[0]


@dataclass
class BufferPort:
    """Geometry of one buffer as a layer sees it: word width in lanes and depth in words."""

    word_lanes: int
    depth: int

    @property
    def addr_bits(self) -> int:
        return _addr_bits(self.depth)


class _Writer:
    """Writes groups of ``lanes`` results in element order into a buffer of ``word_lanes``-lane words."""

    def __init__(self, m: Module, comp, lanes: int, port: BufferPort, valid, data, final):
        ratio = port.word_lanes // lanes
        word = Signal(range(max(port.depth, 2)), name="wr_word")
        group = Signal(range(max(ratio, 2)), name="wr_group")
        m.d.comb += [
            comp.wr_addr.eq(word),
            comp.wr_data.eq(data.replicate(ratio) if ratio > 1 else data),
        ]
        lane_mask = (1 << lanes) - 1
        with m.If(valid):
            m.d.comb += comp.wr_en.eq(Const(lane_mask, port.word_lanes) << (group * lanes))
            with m.If((group == ratio - 1) | final):
                m.d.sync += [group.eq(0), word.eq(Mux(final, 0, word + 1))]
            with m.Else():
                m.d.sync += group.eq(group + 1)
        # done is registered so that the last write has landed when the next layer starts
        m.d.sync += comp.done.eq(valid & final)


class _Reader:
    """Sequential reads of ``lanes``-element groups from a buffer (elementwise layers)."""

    def __init__(self, m: Module, addr, lanes: int, port: BufferPort, step, name: str):
        ratio = port.word_lanes // lanes
        self.word = Signal(range(max(port.depth, 2)), name=f"{name}_word")
        self.group = Signal(range(max(ratio, 2)), name=f"{name}_group")
        m.d.comb += addr.eq(self.word)
        with m.If(step):
            with m.If(self.group == ratio - 1):
                m.d.sync += [self.group.eq(0), self.word.eq(self.word + 1)]
            with m.Else():
                m.d.sync += self.group.eq(self.group + 1)
        self.ratio = ratio

    def reset(self, m: Module) -> None:
        m.d.sync += [self.word.eq(0), self.group.eq(0)]


def _word2(m: Module, data, g1, ratio: int, lanes: int, name: str = "word2"):
    """Stage 2 of a read: the word that arrived in stage 1 registered as it came (no logic behind a block
    RAM's clock-to-out, which takes half of a 10 ns cycle on ECP5), then the lane group ``g1`` (stage 1)
    selected from it."""
    w2 = delay(m, data, 1, name, data=True)
    return w2.word_select(delay(m, g1, 1, f"{name}_g", data=True), 8 * lanes) if ratio > 1 else w2


def _stream_run(m: Module, comp: LayerComponent, n: int, lanes: int) -> tuple[Signal, object, list[_Reader]]:
    """The control of an elementwise layer: ``n`` steps from ``start``, a :class:`_Reader` per input.

    Returns ``run``, the last-step flag and the readers (rewound after the last step).
    """
    run = Signal()
    count = Signal(range(max(n, 2)))
    last = count == n - 1
    ports = enumerate(comp.in_ports)
    readers = [_Reader(m, getattr(comp, f"rd{k}_addr"), lanes, port, run, f"r{k}") for k, port in ports]
    with m.If(comp.start):
        m.d.sync += run.eq(1)
    with m.Elif(run):
        m.d.sync += count.eq(Mux(last, 0, count + 1))
        with m.If(last):
            m.d.sync += run.eq(0)
            for r in readers:
                r.reset(m)
    return run, last, readers


# requantizer --------------------------------------------------------------------------
class Requantizer(wiring.Component):
    """Lane-parallel TFLite requantization: int32 accumulators to int8.

    ``y = clamp(MultiplyByQuantizedMultiplier(acc, m, shift) + zero_point, lo, hi)``
    with TFLite's double rounding (saturating rounding doubling high multiply,
    then rounding divide by a power of two), bit-exact with
    :func:`rlx_edge.ir.fixedpoint.multiply_by_quantized_multiplier`.

    :attr:`latency` pipeline stages, each at most one carry chain or one multiplier deep
    so that the unit closes 100 MHz on ECP5:

    1. the left shift;
    2. the doubling high multiply (:func:`~rlx_edge.targets.fpga.arith.pipelined_srdhm`:
       partial products, their sums, the high word), :data:`~rlx_edge.targets.fpga.arith.SRDHM_STAGES`
       stages;
    3. the rounding right shift: the quotient and its round-up bit;
    4. round up and zero point, compared with the clamp bounds;
    5. the clamped result.

    Parameters
    ----------
    lanes:
        Accumulators processed per cycle.
    zero_point, lo, hi:
        Output zero point and clamp bounds (activation range).
    const_params:
        ``(multiplier, shift)`` shared by every lane and channel; ``None`` to
        take per-lane parameters from the ``i_mult``/``i_left``/``i_right`` ports.
    tag_bits:
        Width of a side-band tag carried through the pipeline unchanged.
    acc_bits:
        Bits (sign included) that hold every accumulator after its left shift: up to
        :data:`~rlx_edge.targets.fpga.arith.NARROW_BITS`, each lane's multiply takes two DSPs, not four.

    Ports
    -----
    i_valid : In(1)
        An input group is present this cycle.
    i_acc : In(32 * lanes)
        Signed int32 accumulators, lane 0 in the low bits.
    i_mult : In(31 * lanes)
        Per-lane Q31 multipliers (non-negative); unused with ``const_params``.
    i_left, i_right : In(5 * lanes)
        Per-lane left shift ``max(shift, 0)`` and right shift ``max(-shift, 0)``.
    i_tag : In(tag_bits)
        Side band (for example "last group of the layer").
    o_valid : Out(1)
        The group entered :attr:`latency` cycles earlier is on ``o_data``.
    o_data : Out(8 * lanes)
        Signed int8 results, meaningful only while ``o_valid``: the data stages have no reset.
    o_tag : Out(tag_bits)
        The tag that entered with the group.
    """

    latency = 1 + SRDHM_STAGES + 3

    def __init__(
        self, lanes: int, *, zero_point: int, lo: int, hi: int, const_params=None, tag_bits: int = 1, acc_bits: int = 32
    ):
        self.lanes, self.acc_bits = lanes, acc_bits
        self.zero_point, self.lo, self.hi = int(zero_point), int(lo), int(hi)
        self.const_params = const_params
        super().__init__(
            {
                "i_valid": In(1),
                "i_acc": In(32 * lanes),
                "i_mult": In(31 * lanes),
                "i_left": In(5 * lanes),
                "i_right": In(5 * lanes),
                "i_tag": In(tag_bits),
                "o_valid": Out(1),
                "o_data": Out(8 * lanes),
                "o_tag": Out(tag_bits),
            }
        )

    def elaborate(self, platform):
        m = Module()
        with sharing(m):
            stages = self.latency
            m.d.comb += [
                self.o_valid.eq(delay(m, self.i_valid, stages, "v")),
                self.o_tag.eq(delay(m, self.i_tag, stages, "t")),
            ]
            outs = []
            for k in range(self.lanes):
                acc = self.i_acc[32 * k : 32 * (k + 1)].as_signed()
                if self.const_params is not None:
                    mult, shift = self.const_params
                    left, right = max(shift, 0), max(-shift, 0)
                    s_left = wrap32(acc << left) if left else acc
                    m_1 = Const(mult, 31)
                    r_4 = right
                else:
                    s_left = wrap32(acc << self.i_left[5 * k : 5 * (k + 1)])
                    m_1 = delay(m, self.i_mult[31 * k : 31 * (k + 1)], 1, f"m_{k}", data=True)
                    r_3 = delay(m, self.i_right[5 * k : 5 * (k + 1)], SRDHM_STAGES, f"r_{k}", data=True)
                    r_4 = delay(m, r_3, 1, f"r4_{k}", data=True)
                    # the rounding masks a stage ahead of the shift that uses them
                    half4 = Signal(32, name=f"half4_{k}", reset_less=True)
                    point4 = Signal(32, name=f"point4_{k}", reset_less=True)
                    m.d.sync += Cat(half4, point4).eq(Cat(*rounding_masks(r_3)))
                # 1: the left shift
                # the data stages have no reset: only o_valid (and o_tag beside it) must start at 0
                x1 = Signal(signed(32), name=f"x1_{k}", reset_less=True)
                m.d.sync += x1.eq(s_left)
                # 2-4: the doubling high multiply
                hi4 = pipelined_srdhm(m, x1, m_1, f"srdhm_{k}", a_bits=self.acc_bits)
                # 5: the rounding right shift, its round-up bit apart
                if isinstance(r_4, int):
                    quo, up = rounding_divide_by_pot_parts(hi4, r_4)
                else:
                    quo, up = hi4 >> r_4, rounding_round_up(hi4, half4, point4)
                q5 = Signal(signed(32), name=f"q5_{k}", reset_less=True)
                up5 = Signal(name=f"up5_{k}", reset_less=True)
                m.d.sync += [q5.eq(quo), up5.eq(up if up is not None else 0)]
                # 6: round up and zero point, compared with the bounds; 7: the clamped result
                below6, above6 = (
                    Signal(name=f"below6_{k}", reset_less=True),
                    Signal(name=f"above6_{k}", reset_less=True),
                )
                in6 = Signal(8, name=f"in6_{k}", reset_less=True)
                m.d.sync += Cat(below6, above6, in6).eq(Cat(*clamp_offset(q5, up5, self.zero_point, self.lo, self.hi)))
                y7 = Signal(signed(8), name=f"y7_{k}", reset_less=True)
                m.d.sync += y7.eq(clamp_select(below6, above6, in6, self.lo, self.hi))
                outs.append(y7)

            m.d.comb += self.o_data.eq(Cat(*outs))
            return m


# layer components -----------------------------------------------------------------------
@dataclass
class Window:
    """The loop geometry of a windowed layer over an NHWC tensor."""

    n: int
    h: int
    w: int
    c: int
    oh: int
    ow: int
    kh: int = 1
    kw: int = 1
    stride: tuple[int, int] = (1, 1)
    dilation: tuple[int, int] = (1, 1)
    pads: tuple[int, int, int, int] = (0, 0, 0, 0)  # top, bottom, left, right


@dataclass
class ChannelQuant:
    """Per-output-channel integer quantization of a MAC layer (from the fixed-point module)."""

    bias: np.ndarray  # int32 [O]
    mult: np.ndarray  # Q31 [O]
    shift: np.ndarray  # [O], positive = left
    zp_in: int
    zp_out: int
    lo: int
    hi: int

    @property
    def uniform(self) -> bool:
        return bool(np.all(self.mult == self.mult[0]) and np.all(self.shift == self.shift[0]))


def _layer_signature(inputs: list[BufferPort], output: BufferPort) -> dict:
    sig = {"start": In(1), "done": Out(1)}
    for k, p in enumerate(inputs):
        sig[f"rd{k}_addr"] = Out(p.addr_bits)
        sig[f"rd{k}_data"] = In(8 * p.word_lanes)
    sig["wr_addr"] = Out(output.addr_bits)
    sig["wr_en"] = Out(output.word_lanes)
    sig["wr_data"] = Out(8 * output.word_lanes)
    return sig


class LayerComponent(wiring.Component):
    """Common ports of every layer.

    Ports
    -----
    start : In(1)
        One-cycle pulse: run the layer once.
    done : Out(1)
        One-cycle pulse after the last output word has been written.
    rd{k}_addr : Out(addr bits of input buffer k)
        Word address of input buffer ``k`` (synchronous read, one cycle latency).
    rd{k}_data : In(8 * word lanes of input buffer k)
        The word read in the previous cycle.
    wr_addr : Out(addr bits of the output buffer)
        Word address written when any ``wr_en`` bit is set.
    wr_en : Out(word lanes of the output buffer)
        Per-lane (byte) write enables.
    wr_data : Out(8 * word lanes of the output buffer)
        Data, the layer's lane group replicated across the word.
    """

    #: cycles from the last loop step to ``done`` (for cycle estimates)
    latency = 0

    def __init__(self, inputs: list[BufferPort], output: BufferPort):
        self.in_ports = inputs
        self.out_port = output
        super().__init__(_layer_signature(inputs, output))

    def steps(self) -> int:  # pragma: no cover - overridden
        raise NotImplementedError


class _MacLayer(LayerComponent):
    """What the MAC layers share: the weight ROM, stage 1, the multiplier pipeline and the tail.

    The pipeline, one stage a cycle (register to register, each stage at most
    one multiplier or two levels of adders deep):

    - 0: loop counters; buffer, weight ROM and (delayed) parameter ROM addresses
      (a window over an image registers its input address first and runs the
      rest :func:`window_lag` cycles behind its counters);
    - 1: the words arrive from the block RAMs;
    - 2: the words registered as they came (a block RAM's clock-to-out is half a
      10 ns cycle on ECP5); the tap's inputs less the input zero point;
    - 3: inputs registered (9 bits);
    - 4: the multipliers' operands: inputs copied, a copy per :data:`OPERAND_FANOUT` multipliers, and
      weights (8 bits) registered;
    - 5: the operands registered again, a copy for each multiplier (in the DSP where it can);
    - 6: the products registered, and 7 once more (:func:`~rlx_edge.targets.fpga.arith.dsp_product`);
    - 7 + t: the adder tree, :func:`~rlx_edge.targets.fpga.arith.tree_stages` stages;
    - then accumulate (the bias loaded at a window's first tap), and the
      :class:`Requantizer` from the accumulator of a window's last tap.

    :meth:`mac_latency` is the cycles from the last loop step to ``done`` (plus the window's lag).
    """

    @staticmethod
    def operand_stage(width: int, depth: int) -> int:
        """The stage the multipliers' operands are registered in: 4, or later when the weight ROM
        (``width`` bits, ``depth`` words) takes longer (:func:`rom_latency`). An input is registered in
        stage 3, then copied (:data:`OPERAND_FANOUT`)."""
        return max(4, rom_latency(width, depth))

    #: multipliers one copy of a dense layer's input operand feeds: one register feeding a row of PE
    #: DSPs spread over the chip was AD's critical path on ECP5-85K (11.3 ns of routing)
    OPERAND_FANOUT = 4

    @staticmethod
    def mac_latency(terms: int, operand_stage: int = 3, serial: int = 1) -> int:
        """Cycles from the last loop step to ``done`` for adder trees of ``terms`` products, with the
        accumulators requantized in ``serial`` turns (:meth:`requant_lanes`; the latch is one cycle more)."""
        stages = operand_stage + DSP_STAGES + tree_stages(terms)
        return stages + Requantizer.latency + 1 + (serial if serial > 1 else 0)

    @staticmethod
    def requant_lanes(pe: int, taps: int) -> int:
        """Requantizer lanes for ``pe`` accumulators that complete together at most every ``taps`` loop
        steps: the fewest (a divisor of ``pe``) that take them all, ``pe / lanes`` a cycle, before the
        next group completes. A requantizer lane is four multipliers (32 x 31 bits), an int8 product
        one: with a lane per PE the requantizers took most of the DSPs of KWS at PE x SIMD 8 on ECP5,
        while a group of outputs completes only every few taps."""
        return next(r for r in range(1, pe + 1) if pe % r == 0 and pe // r <= max(taps, 1))

    def _acc_lanes(self) -> int:  # pragma: no cover - overridden
        """Accumulators: outputs completed together."""
        raise NotImplementedError

    def _taps(self) -> int:  # pragma: no cover - overridden
        """The fewest loop steps between two completed groups of outputs."""
        raise NotImplementedError

    @property
    def rq_lanes(self) -> int:
        """This layer's requantizer lanes (:meth:`requant_lanes`)."""
        return self.requant_lanes(self._acc_lanes(), self._taps())

    def _serial(self) -> int:
        """Turns through the requantizer per completed group."""
        return self._acc_lanes() // self.rq_lanes

    @property
    def rq_narrow(self) -> bool:
        """Whether each requantizer lane multiplies on two DSPs (its accumulators narrow enough), not four."""
        return self._acc_bits(self.q) <= NARROW_BITS

    def _weight_rom(self, m: Module, run, words: list[int], width: int):
        """The weight ROM, read in order: the next word every loop step, wrapping after the last.
        Returns the word of each step, at stage :func:`rom_latency`."""
        addr, data = pipelined_rom(m, self, "weights", width, words)
        waddr = Signal(range(max(len(words), 2)))
        with m.If(run):
            m.d.sync += waddr.eq(Mux(waddr == len(words) - 1, 0, waddr + 1))
        m.d.comb += addr.eq(waddr)
        return data

    def _stage1(self, m: Module, run, first, last, final, inside, group, ratio: int, lanes: int):
        """Stages 1 and 2: the word read for this tap arrives (1) and is registered as it came (2: a block
        RAM's clock-to-out takes half of a 10 ns cycle on ECP5, so no logic follows it in the same
        cycle). Returns the loop flags as of stage 2 and the tap's ``lanes`` input values less the
        input zero point, 0 for a padded tap (as TFLite skips it)."""
        s1 = {k: Signal(name=f"{k}1") for k in ("valid", "first", "last", "final", "inside")}
        g1 = Signal(range(max(ratio, 2)))
        m.d.sync += [
            s1["valid"].eq(run),
            s1["first"].eq(first),
            s1["last"].eq(last),
            s1["final"].eq(final),
            s1["inside"].eq(inside),
            g1.eq(group),
        ]
        s2 = {k: delay(m, v, 1, f"{k}2") for k, v in s1.items()}
        xword = _word2(m, self.rd0_data, g1, ratio, lanes)
        # each lane's padding flag a copy of its own (only read with valid data: no reset): one register
        # selecting every lane's operand was AD's critical path on ECP5-85K at SIMD 8 (11.3 ns of routing)
        inside = register_copies(m, s1["inside"], lanes, "inside_lane") if lanes > 1 else [s2["inside"]]
        return s2, [Mux(inside[k], lane(xword, k) - self.q.zp_in, 0) for k in range(lanes)]

    def _dots(self, m: Module, xs: list, wdata, pe: int, simd: int, *, shared: bool = True) -> tuple[list, int]:
        """``pe`` dot products of ``simd`` terms from the stage-2 inputs ``xs`` and the weight word
        ``wdata`` (from :meth:`_weight_rom`, lane ``p * simd + s``): ``xs[s]`` for every output when
        ``shared`` (dense), ``xs[p]`` else (depthwise, ``simd`` 1). Returns them and the stages they lag
        stage 2 by."""
        operands = self.operand_stage(len(wdata), self._weight_depth())
        copies = -(-pe // self.OPERAND_FANOUT) if shared else 1
        x3 = []
        for i, x in enumerate(xs):
            r = Signal(signed(9), name=f"x3_{i}", reset_less=True)  # an int8 less a zero point: 9 bits
            m.d.sync += r.eq(x)
            late = delay(m, r, operands - 4, f"x{i}", data=True)  # in step with a deep ROM's words
            x3.append(register_copies(m, late, copies, f"x4_{i}"))
        w3 = delay(m, wdata, operands - rom_latency(len(wdata), self._weight_depth()), "w", data=True)
        dots = []
        for p in range(pe):
            prods = []
            for s_ in range(simd):
                x = x3[s_][p // self.OPERAND_FANOUT] if shared else x3[p][0]
                prods.append(dsp_product(m, x, lane(w3, p * simd + s_), f"prod_{p}_{s_}"))
            dots.append(pipelined_tree_sum(m, prods, f"dot_{p}"))
        return dots, operands - 2 + DSP_STAGES + tree_stages(simd)

    def _params_rom(self, m: Module, q: ChannelQuant, groups: int, lanes: int, index, lag: int):
        """ROM of per-group bias (and multiplier/shift when per-channel), its ``index`` given at stage 0
        and delayed so that the registered word meets the dot products ``lag`` stages after stage 2.
        Returns the word, the bits per lane and whether the multipliers are uniform."""
        uniform = q.uniform
        fields = 32 if uniform else 32 + 31 + 5 + 5
        rows = []
        for g in range(groups):
            row = 0
            for k in range(lanes):
                ch = g * lanes + k
                v = int(q.bias[ch]) & 0xFFFFFFFF
                if not uniform:
                    sh = int(q.shift[ch])
                    v |= int(q.mult[ch]) << 32
                    v |= max(sh, 0) << 63
                    v |= max(-sh, 0) << 68
                row |= v << (k * fields)
            rows.append(row)
        port = rom_port(m, self, "params", fields * lanes, rows)
        # an index is a few bits, a word up to 73 per lane: delay the address, register the word twice, so
        # that the placer can put one register by the ROM and one by the accumulators (with one, its route
        # to the bias multiplexers was the critical path of KWS and AD on ECP5-85K: 6-6.5 ns of routing).
        # Both as register_copies: as plain registers Yosys merged the bits that equal layers' ROMs share,
        # and one layer's register drove eight others' accumulators (KWS at seed 1: 79.5 MHz)
        m.d.comb += port.addr.eq(delay(m, index, lag - 1, "pidx", data=True))
        word1 = register_copies(m, port.data, 1, "params_word1")[0]
        return register_copies(m, word1, 1, "params_word")[0], fields, uniform

    def _acc_bits(self, q: ChannelQuant) -> int:
        """Bits (sign included) of the largest accumulator after the requantizer's left shift: every weight of a
        channel times the largest input less its zero point, plus the bias (padded taps add nothing)."""
        w = np.abs(np.asarray(self.weights, dtype=np.int64))
        per_channel = w.reshape(-1, w.shape[-1]).sum(0) if w.ndim == 3 else w.reshape(w.shape[0], -1).sum(1)
        x = max(abs(-128 - q.zp_in), abs(127 - q.zp_in))
        bound = int((per_channel * x + np.abs(np.asarray(q.bias, dtype=np.int64))).max())
        return bound.bit_length() + 1 + max(int(np.max(q.shift)), 0)

    def _tail(self, m: Module, q: ChannelQuant, lanes: int, s2, dots, lag: int, pindex, groups: int):
        """Accumulate, requantize and write: the stage-2 flags ``s2`` (valid, first, last, final) delayed
        ``lag`` stages to meet ``dots``; ``pindex`` the parameter ROM's row at stage 0.

        With fewer requantizer lanes than accumulators (:meth:`requant_lanes`), a completed group is
        latched and shifted through the requantizer a few lanes a cycle, with its parameters."""
        params, fields, uniform = self._params_rom(m, q, groups, lanes, pindex, lag)
        v, last, final = (delay(m, s2[n], lag, f"{n}_d") for n in ("valid", "last", "final"))
        r, serial = self.rq_lanes, self._serial()
        rq = Requantizer(
            r,
            zero_point=q.zp_out,
            lo=q.lo,
            hi=q.hi,
            const_params=(int(q.mult[0]), int(q.shift[0])) if uniform else None,
            acc_bits=self._acc_bits(q),
        )
        m.submodules.requant = rq
        accs = []
        # each lane's first-tap flag a copy of its own (only read while valid: no reset): one register
        # selecting every lane's bias was KWS's critical path on ECP5-85K (5.9 ns of routing)
        firsts = register_copies(m, delay(m, s2["first"], lag - 1, "first_e", data=True), lanes, "first_c")
        for k in range(lanes):
            p = params[k * fields : (k + 1) * fields]
            acc = Signal(signed(32), name=f"acc_{k}", reset_less=True)  # the first valid step loads it
            # the bias starts the sum (int32 wraps, so the order of the additions does not matter)
            acc_next = share(wrap32(Mux(firsts[k], p[:32].as_signed(), acc) + dots[k]), f"acc_next_{k}")
            with m.If(v):
                m.d.sync += acc.eq(acc_next)
            accs.append(acc_next)
        if serial == 1:
            send, rq_accs, rq_params, tag = v & last, accs, params, final
        else:
            # the group's accumulators (and parameters) latched, then shifted down r lanes a turn: the
            # requantizer always reads the first r
            hold = [Signal(signed(32), name=f"hold_{k}", reset_less=True) for k in range(lanes)]
            hold_params = Signal(0 if uniform else len(params), name="hold_params", reset_less=True)
            turns = Signal(range(serial + 1), name="rq_turns")  # turns left, the current one included
            hold_final = Signal(name="hold_final")
            load = v & last
            with m.If(load):
                m.d.sync += [turns.eq(serial), hold_final.eq(final)]
            with m.Elif(turns != 0):
                m.d.sync += turns.eq(turns - 1)
            # each lane's load and shift enables are copies of their own (load one stage early, shifting
            # from the turns): one pair drove every hold register across the chip, the critical path
            # of KWS and IC on ECP5-85K (6-7 ns of routing)
            early = delay(m, s2["valid"], lag - 1, "valid_e") & delay(m, s2["last"], lag - 1, "last_e")
            loads = register_copies(m, early & ~ResetSignal(), lanes, "hold_load")
            shifts = register_copies(m, (load | (turns > 1)) & ~ResetSignal(), lanes, "hold_shift")
            for k in range(lanes):
                lane_params = slice(k * fields, (k + 1) * fields)
                with m.If(loads[k]):
                    m.d.sync += hold[k].eq(accs[k])
                    if not uniform:
                        m.d.sync += hold_params[lane_params].eq(params[lane_params])
                with m.Elif(shifts[k] if k < lanes - r else Const(0, 1)):  # the last r lanes are not read again
                    m.d.sync += hold[k].eq(hold[min(k + r, lanes - 1)])
                    if not uniform:
                        m.d.sync += hold_params[lane_params].eq(hold_params[(k + r) * fields : (k + r + 1) * fields])
            send, rq_accs, rq_params, tag = turns != 0, hold[:r], hold_params, hold_final & (turns == 1)
        if not uniform:
            for k in range(r):
                p = rq_params[k * fields : (k + 1) * fields]
                m.d.comb += [
                    rq.i_mult[31 * k : 31 * (k + 1)].eq(p[32:63]),
                    rq.i_left[5 * k : 5 * (k + 1)].eq(p[63:68]),
                    rq.i_right[5 * k : 5 * (k + 1)].eq(p[68:73]),
                ]
        m.d.comb += [rq.i_valid.eq(send), rq.i_acc.eq(Cat(*rq_accs)), rq.i_tag.eq(tag)]
        _Writer(m, self, r, self.out_port, rq.o_valid, rq.o_data, rq.o_tag[0])


def _window_addresses(m: Module, win: Window, ctrs: dict, in_port: BufferPort, lanes: int):
    """Input word address (two cycles after the counters) and in-bounds flag (one cycle after) of the
    current tap: the tap's row and column are registered first (their products and sums with the
    counters and the image's sizes in one cycle were 11 ns on ECP5), then the image row's first word,
    then the address. Products by the image's sizes are adders (:func:`const_product`), never a DSP."""
    # a row or column of the image, or a tap of the padding around it: 16 bits hold any of them
    iy, ix = Signal(signed(16), name="tap_y", reset_less=True), Signal(signed(16), name="tap_x", reset_less=True)
    m.d.sync += [
        iy.eq(const_product(ctrs["oy"], win.stride[0]) + const_product(ctrs["ky"], win.dilation[0]) - win.pads[0]),
        ix.eq(const_product(ctrs["ox"], win.stride[1]) + const_product(ctrs["kx"], win.dilation[1]) - win.pads[2]),
    ]
    n, cw = (delay(m, ctrs[k], 1, f"{k}_tap", data=True) for k in ("n", "cw"))
    inside = (iy >= 0) & (iy < win.h) & (ix >= 0) & (ix < win.w)
    words_per_pixel = win.c // in_port.word_lanes
    # the row's first pixel, registered (an image of any size: the address register's width and a sign)
    row = Signal(signed(in_port.addr_bits + 18), name="tap_row", reset_less=True)
    m.d.sync += row.eq(const_product(const_product(n, win.h) + iy, win.w))
    ix2, cw2 = delay(m, ix, 1, "tap_x2", data=True), delay(m, cw, 1, "cw_tap2", data=True)
    addr = const_product(row + ix2, words_per_pixel) + cw2
    addr_sig = Signal(in_port.addr_bits, name="in_addr")
    m.d.comb += addr_sig.eq(addr.as_unsigned()[: in_port.addr_bits])
    return addr_sig, inside


def _started_loop(m: Module, start, dims: list, nest=None) -> tuple[object, dict, object]:
    """A loop nest that runs from ``start`` through its last step: ``run``, the counters and the last-step flag.

    ``nest`` builds the counters (default :func:`_counters`; variable trip counts pass their own).
    """
    run = Signal()
    ctrs, all_max = (nest or _counters)(m, run, dims)
    with m.If(start):
        m.d.sync += run.eq(1)
    with m.Elif(run & all_max):
        m.d.sync += run.eq(0)
    return run, ctrs, all_max


def window_lag(win: Window) -> int:
    """Cycles :func:`_window_run` registers the input address for: 3 where it takes arithmetic (a window
    over an image: the tap's row and column, the row's first word, then the address and the bounds
    compares; :func:`_window_addresses`), 0 for a window
    of one tap over one pixel (fully connected), whose address is a counter."""
    trivial = win.h == win.w == win.kh == win.kw == 1 and not any(win.pads)
    return 0 if trivial else 3


def _window_run(m: Module, comp: LayerComponent, dims: list[tuple[str, int]], lanes: int):
    """The loop nest of a windowed layer over ``dims``, from ``start`` to its last step, reading the current tap.

    Returns ``run``, the counters, the last-step flag and whether the tap is inside the image, all as
    of the cycle the address reaches the buffer: :func:`window_lag` cycles after the counters, so the
    address arithmetic and the bounds compares have a cycle of their own.
    """
    run, ctrs, all_max = _started_loop(m, comp.start, dims)
    lag = window_lag(comp.win)
    if not lag:
        # one tap over one pixel: the address is the counters' (no row or column arithmetic)
        words = comp.win.c // comp.in_ports[0].word_lanes
        m.d.comb += comp.rd0_addr.eq((const_product(ctrs["n"], words) + ctrs["cw"])[: comp.in_ports[0].addr_bits])
        return run, ctrs, all_max, Const(1, 1)
    addr, inside = _window_addresses(m, comp.win, ctrs, comp.in_ports[0], lanes)
    m.d.sync += comp.rd0_addr.eq(addr)
    ctrs = {k: v if isinstance(v, Const) else delay(m, v, lag, f"{k}_lag") for k, v in ctrs.items()}
    # inside is one cycle behind the counters (the tap registered), so one more register meets the others
    return delay(m, run, lag, "run_lag"), ctrs, delay(m, all_max, lag, "last_lag"), delay(m, inside, lag - 1, "in_lag")


class _ChannelWindow:
    """The loop of the per-channel window layers (depthwise, pooling): ``lanes`` channels and one kernel tap
    a cycle, in the order pixel, channel group, kernel row, kernel column."""

    win: Window
    lanes: int
    in_ports: list[BufferPort]

    def steps(self) -> int:
        w = self.win
        return w.n * w.oh * w.ow * (w.c // self.lanes) * w.kh * w.kw

    def _window_loop(self, m: Module):
        """:func:`_window_run` over this loop order, plus the first and the last tap of each window."""
        w, lanes, inp = self.win, self.lanes, self.in_ports[0]
        dims = [
            ("n", w.n),
            ("oy", w.oh),
            ("ox", w.ow),
            ("cw", w.c // inp.word_lanes),
            ("g", inp.word_lanes // lanes),
            ("ky", w.kh),
            ("kx", w.kw),
        ]
        run, ctrs, all_max, inside = _window_run(m, self, dims, lanes)
        first = (ctrs["ky"] == 0) & (ctrs["kx"] == 0)
        last = ctrs["ky_max"] & ctrs["kx_max"]
        return run, ctrs, all_max, inside, first, last


class Conv2d(_MacLayer):
    """Dense 2-D convolution (and fully connected), FINN-style PE x SIMD.

    Per cycle, ``simd`` input channels of one kernel tap meet the weights of
    ``pe`` output channels: ``pe * simd`` int8 multiplies, ``pe`` adder trees,
    ``pe`` int32 accumulators. Loop order: pixel, output-channel group, kernel
    row, kernel column, input-channel group; a pixel group of ``pe`` outputs
    takes ``KH*KW*C/simd`` cycles and the next one starts right behind it.
    Padded taps contribute zero, as TFLite skips them. Weights live in a ROM
    of ``pe*simd`` lanes; biases (and per-channel multipliers) in a ROM
    indexed by output-channel group.

    See :class:`LayerComponent` for the ports.
    """

    def __init__(self, win: Window, weights: np.ndarray, q: ChannelQuant, *, pe: int, simd: int, inp, out):
        super().__init__([inp], out)
        self.win, self.q, self.pe, self.simd = win, q, pe, simd
        self.o = weights.shape[0]
        self.weights = np.asarray(weights, dtype=np.int8)  # [O, KH, KW, C]

    def steps(self) -> int:
        w = self.win
        return w.n * w.oh * w.ow * (self.o // self.pe) * w.kh * w.kw * (w.c // self.simd)

    def _weight_depth(self) -> int:
        w = self.win
        return (self.o // self.pe) * w.kh * w.kw * (w.c // self.simd)

    def _acc_lanes(self) -> int:
        return self.pe

    def _taps(self) -> int:
        w = self.win
        return w.kh * w.kw * (w.c // self.simd)

    @property
    def latency(self) -> int:
        operands = self.operand_stage(8 * self.pe * self.simd, self._weight_depth())
        return self.mac_latency(self.simd, operands, self._serial()) + window_lag(self.win)

    def _weight_words(self) -> list[int]:
        w, pe, simd = self.win, self.pe, self.simd
        arr = self.weights.reshape(self.o // pe, pe, w.kh, w.kw, w.c // simd, simd)
        arr = arr.transpose(0, 2, 3, 4, 1, 5).reshape(-1, pe * simd)  # (og, ky, kx, icg) x (pe, simd)
        return pack_words(arr, 8)

    def elaborate(self, platform):
        m = Module()
        with sharing(m):
            w, pe, simd, inp = self.win, self.pe, self.simd, self.in_ports[0]
            ratio = inp.word_lanes // simd
            dims = [
                ("n", w.n),
                ("oy", w.oh),
                ("ox", w.ow),
                ("og", self.o // pe),
                ("ky", w.kh),
                ("kx", w.kw),
                ("cw", w.c // inp.word_lanes),
                ("g", ratio),
            ]
            run, ctrs, all_max, inside = _window_run(m, self, dims, simd)
            inner = ("ky", "kx", "cw", "g")
            first = Const(1, 1)
            last = Const(1, 1)
            for name in inner:
                first = first & (ctrs[name] == 0)
                last = last & ctrs[f"{name}_max"]

            wdata = self._weight_rom(m, run, self._weight_words(), 8 * pe * simd)
            s2, xs = self._stage1(m, run, first, last, all_max, inside, ctrs["g"], ratio, simd)
            dots, lag = self._dots(m, xs, wdata, pe, simd)
            self._tail(m, self.q, pe, s2, dots, lag, ctrs["og"], self.o // pe)
            return m


class FullyConnected(Conv2d):
    """Fully connected layer: a 1x1 convolution over ``N`` "pixels" of ``I`` channels.

    ``x`` [N, I] times ``w`` [O, I]; ``pe`` outputs per cycle group, ``simd``
    input features per cycle. See :class:`Conv2d` for the datapath and
    :class:`LayerComponent` for the ports.
    """

    def __init__(self, batch: int, weights: np.ndarray, q: ChannelQuant, *, pe: int, simd: int, inp, out):
        o, i = weights.shape
        win = Window(n=batch, h=1, w=1, c=i, oh=1, ow=1)
        super().__init__(win, np.asarray(weights).reshape(o, 1, 1, i), q, pe=pe, simd=simd, inp=inp, out=out)


class DepthwiseConv2d(_ChannelWindow, _MacLayer):
    """Depthwise 2-D convolution (depth multiplier 1), ``lanes`` channels per cycle.

    One kernel tap per cycle for ``lanes`` channels (FINN's vector unit with
    SIMD over channels): loop order pixel, channel group, kernel row, kernel
    column. Weights in a ROM of ``lanes`` lanes indexed by (group, tap).

    See :class:`LayerComponent` for the ports.
    """

    def __init__(self, win: Window, weights: np.ndarray, q: ChannelQuant, *, lanes: int, inp, out):
        super().__init__([inp], out)
        self.win, self.q, self.lanes = win, q, lanes
        self.weights = np.asarray(weights, dtype=np.int8).reshape(win.kh, win.kw, win.c)

    def _weight_depth(self) -> int:
        w = self.win
        return w.kh * w.kw * (w.c // self.lanes)

    def _acc_lanes(self) -> int:
        return self.lanes

    def _taps(self) -> int:
        return self.win.kh * self.win.kw

    @property
    def latency(self) -> int:
        operands = self.operand_stage(8 * self.lanes, self._weight_depth())
        return self.mac_latency(1, operands, self._serial()) + window_lag(self.win)

    def elaborate(self, platform):
        m = Module()
        with sharing(m):
            w, lanes, inp = self.win, self.lanes, self.in_ports[0]
            ratio = inp.word_lanes // lanes
            run, ctrs, all_max, inside, first, last = self._window_loop(m)
            groups = w.c // lanes
            arr = self.weights.reshape(w.kh * w.kw, groups, lanes).transpose(1, 0, 2).reshape(-1, lanes)
            wdata = self._weight_rom(m, run, pack_words(arr, 8), 8 * lanes)
            s2, xs = self._stage1(m, run, first, last, all_max, inside, ctrs["g"], ratio, lanes)
            dots, lag = self._dots(m, xs, wdata, lanes, 1, shared=False)
            self._tail(m, self.q, lanes, s2, dots, lag, const_product(ctrs["cw"], ratio) + ctrs["g"], groups)
            return m


def _division_magic(counts: set[int], max_abs: int) -> tuple[int, dict[int, int]]:
    """A shift ``k`` and per-divisor multipliers with ``(x * magic[d]) >> k == x // d`` for 0 <= x <= max_abs:
    the smallest ``k`` that serves every divisor, so that the multipliers are as narrow as they can be
    (one DSP for the product where it fits 18 x 18 bits).

    Checked exhaustively here, so the hardware division is exact by construction.
    """
    bits = max(max_abs, 1).bit_length()
    xs = np.arange(max_abs + 1, dtype=np.int64)
    for k in range(bits, 2 * bits + 3):  # 2 * bits + 2 always works (the classic bound)
        magic = {d: -(-(1 << k) // d) for d in counts}
        # (x * magic) stays below 2**63: magic < 2**(k+1), x < 2**bits, k + 1 + bits <= 3 * bits + 3
        if all(np.array_equal((xs * mg) >> k, xs // d) for d, mg in magic.items()):
            return k, magic
    raise AssertionError("no exact division magic")  # pragma: no cover - the bound above always holds


class Pool2d(_ChannelWindow, LayerComponent):
    """Average or max pooling, ``lanes`` channels per cycle, one window tap per cycle.

    Average: the integer sum of the in-bounds taps divided by their count,
    rounded half away from zero (TFLite's AveragePool); the division is a
    multiply by a reciprocal chosen per count and verified exact over the
    whole input range when the design is built. Max: the largest in-bounds
    tap. Both clamp to the fused activation range.

    See :class:`LayerComponent` for the ports.
    """

    def __init__(self, win: Window, *, kind: str, lo: int, hi: int, lanes: int, inp, out):
        super().__init__([inp], out)
        if kind not in ("avg", "max"):
            raise ValueError(f"pool kind must be avg or max, not {kind!r}")
        self.win, self.kind, self.lo, self.hi, self.lanes = win, kind, int(lo), int(hi), lanes

    #: the average's stages after the window's sum: the rounding offset, the magnitude, the product
    #: (:data:`~rlx_edge.targets.fpga.arith.DSP_STAGES`), the quotient with its sign, the clamp
    AVG_STAGES = 4 + DSP_STAGES

    @property
    def latency(self) -> int:
        # the read and its register, the window's sum or max (its candidate registered first), the divide
        # (AVG_STAGES) or clamp, done
        return 2 + 2 + (self.AVG_STAGES if self.kind == "avg" else 2) + window_lag(self.win)

    def elaborate(self, platform):

        m = Module()
        with sharing(m):
            w, lanes, inp = self.win, self.lanes, self.in_ports[0]
            ratio = inp.word_lanes // lanes
            run, ctrs, all_max, inside, first, last = self._window_loop(m)
            v1, first1, last1, final1, in1 = (Signal(name=n) for n in ("v1", "first1", "last1", "final1", "in1"))
            g1 = Signal(range(max(ratio, 2)))
            m.d.sync += [v1.eq(run), first1.eq(first), last1.eq(last), final1.eq(all_max), in1.eq(inside)]
            m.d.sync += g1.eq(ctrs["g"])
            xword = _word2(m, self.rd0_data, g1, ratio, lanes)
            v1, first1, last1, final1, in1 = (
                delay(m, s_, 1, n) for s_, n in ((v1, "v1r"), (first1, "first1r"), (last1, "last1r"),
                                                  (final1, "final1r"), (in1, "in1r"))
            )  # fmt: skip
            in_x = in1  # in step with xword
            if self.kind == "max":
                # the tap's candidate is registered before the compare (below): the padding's select, the
                # compare's carry chain and the max's select in one cycle took 10.4 ns on ECP5
                v1, first1, last1, final1, in1 = (
                    delay(m, s_, 1, n) for s_, n in ((v1, "v1c"), (first1, "first1c"), (last1, "last1c"),
                                                      (final1, "final1c"), (in1, "in1c"))
                )  # fmt: skip

            taps = w.kh * w.kw
            cnt = Signal(range(taps + 1))
            cnt_next = Mux(first1, 0, cnt) + in1
            with m.If(v1):
                m.d.sync += cnt.eq(cnt_next)
            # stage 2: the finished window (sum or max) and its count
            v2, final2 = Signal(), Signal()
            cnt2 = Signal(range(taps + 1))
            m.d.sync += [v2.eq(v1 & last1), final2.eq(final1 & last1), cnt2.eq(cnt_next)]
            # then the rounded quotient (avg, AVG_STAGES) or the max, clamped (one stage)
            out_stages = self.AVG_STAGES if self.kind == "avg" else 1
            v3, final3 = delay(m, v2, out_stages, "v_out"), delay(m, final2, out_stages, "final_out")
            # the divisors: the op's own window counts (TFLite's, padding never counts)
            divisors = window_counts(w.h, w.w, (w.kh, w.kw), w.stride, w.pads)
            counts = {int(c) for c in np.unique(divisors) if c > 0}
            max_abs = 128 * taps + taps
            k, magic = _division_magic(counts, max_abs) if self.kind == "avg" else (0, {})
            # the rounding half and reciprocal of this window's count, shared by every lane; only the
            # counts that occur get a case (one, a constant, for unpadded pools)
            half2 = Signal(16, name="half2")
            magic2 = Signal(max(max(magic.values(), default=1).bit_length(), 1), name="magic2")
            if self.kind == "avg":
                with m.Switch(cnt2):
                    for c in sorted(counts):
                        with m.Case(c):
                            m.d.comb += [half2.eq(c // 2), magic2.eq(magic[c])]
            outs = []
            # the sum's width: |sum| <= 128 * taps (32 bits made the rounding's compare and add two 32-bit
            # carry chains in one cycle, KWS's critical path at one seed on ECP5-85K)
            sw = max_abs.bit_length() + 1
            for i in range(lanes):
                x = lane(xword, i)
                if self.kind == "avg":
                    acc = Signal(signed(sw), name=f"acc_{i}")
                    acc_next = Mux(first1, 0, acc) + Mux(in1, x, 0)
                else:
                    acc = Signal(signed(9), name=f"acc_{i}")
                    cand = Signal(signed(9), name=f"cand_{i}", reset_less=True)
                    m.d.sync += cand.eq(Mux(in_x, x, -128))
                    acc_next = Mux(first1 | (cand > acc), cand, acc)
                with m.If(v1):
                    m.d.sync += acc.eq(acc_next)
                acc2 = Signal(signed(sw if self.kind == "avg" else 9), name=f"win_{i}")
                m.d.sync += acc2.eq(acc_next)
                y3 = Signal(signed(8), name=f"y_{i}")
                if self.kind == "avg":
                    # one carry chain or one multiplier a stage: in one cycle the divide was KWS's
                    # critical path on ECP5-85K (44 ns)
                    num = Signal(signed(sw + 1), name=f"num_{i}", reset_less=True)
                    m.d.sync += num.eq(Mux(acc2 > 0, acc2 + half2, acc2 - half2))
                    # |num| <= 128 * taps + taps // 2 <= max_abs: the magic division is exact up to there
                    mag = Signal(max_abs.bit_length(), name=f"mag_{i}", reset_less=True)
                    m.d.sync += mag.eq(Mux(num < 0, -num, num).as_unsigned()[: len(mag)])
                    neg = delay(m, num[-1], 1 + DSP_STAGES, f"neg_{i}", data=True)
                    prod = dsp_product(m, mag, delay(m, magic2, 2, f"magic_{i}", data=True), f"prod_{i}")
                    quo = prod[k:]  # unsigned: as narrow as the multiplier, a sign bit would flip its top
                    q = Signal(signed(16), name=f"q_{i}", reset_less=True)
                    m.d.sync += q.eq(Mux(neg, -quo, quo))
                    m.d.sync += y3.eq(clamp(q, self.lo, self.hi))
                else:
                    m.d.sync += y3.eq(clamp(acc2, self.lo, self.hi))
                outs.append(y3)
            _Writer(m, self, lanes, self.out_port, v3, Cat(*outs), final3)
            return m


@dataclass
class AddQuant:
    """TFLite quantized ADD parameters (from the fixed-point module)."""

    zp_a: int
    zp_b: int
    m_a: int
    e_a: int
    m_b: int
    e_b: int
    m_out: int
    e_out: int
    zp_out: int
    lo: int
    hi: int
    left_shift: int = 20


class Add(LayerComponent):
    """Quantized elementwise add (TFLite's ADD), ``lanes`` elements per cycle.

    Both inputs are offset, shifted left 20 bits, rescaled onto twice the
    larger input scale by Q31 multipliers (double rounding each), summed and
    rescaled to the output, with constant multipliers; fourteen pipeline
    stages to the write, each at most one multiplier or one carry chain deep.

    ``const`` makes one operand a constant: ``(side, words)``, side 0 (a) or
    1 (b), its int8 values broadcast over the output in ``lanes``-lane words
    of a ROM read in order and wrapping (one period of the broadcast); the
    layer then has one input port, the other operand's.

    See :class:`LayerComponent` for the ports (two inputs, or one with ``const``).
    """

    # read and register, offset, (rescale, rounded shift) for the inputs then for the sum, the sum,
    # compare and clamp, done
    latency = 2 + 1 + 2 * (SRDHM_STAGES + 1) + 1 + 2 + 1

    def __init__(self, size: int, q: AddQuant, *, lanes: int, in_a, in_b, out, const=None):
        super().__init__([port for port in (in_a, in_b) if port is not None], out)
        self.size, self.q, self.lanes, self.const = size, q, lanes, const

    def steps(self) -> int:
        return self.size // self.lanes

    def elaborate(self, platform):

        m = Module()
        with sharing(m):
            q, lanes = self.q, self.lanes
            run, last, readers = _stream_run(m, self, self.steps(), lanes)
            stages = self.latency - 1  # to the write; done follows it
            valid, final = delay(m, run, stages, "v"), delay(m, run & last, stages, "f")
            g1 = [Signal(range(max(r.ratio, 2)), name=f"g1_{k}") for k, r in enumerate(readers)]
            m.d.sync += [g1[k].eq(r.group) for k, r in enumerate(readers)]
            words = [getattr(self, f"rd{k}_data") for k in range(len(readers))]
            if self.const is not None:
                side, cwords = self.const
                cport = rom_port(m, self, "const", 8 * lanes, cwords)
                caddr = Signal(range(max(len(cwords), 2)), name="const_addr")
                with m.If(run):  # in step with the buffer reads: the word arrives in stage 1 as theirs do
                    m.d.sync += caddr.eq(Mux(last | (caddr == len(cwords) - 1), 0, caddr + 1))
                m.d.comb += cport.addr.eq(caddr)
                words.insert(side, cport.data)
                g1.insert(side, None)
            # 2: the words registered as they came from the block RAMs (no logic behind a clock-to-out)
            words2 = []
            for k, (word, g) in enumerate(zip(words, g1)):
                w2 = delay(m, word, 1, f"word{k}")
                words2.append(
                    w2 if g is None or len(w2) == 8 * lanes else w2.word_select(delay(m, g, 1, f"g{k}"), 8 * lanes)
                )
            outs = []
            for i in range(lanes):
                # 3: offset and shifted; 4-6: rescaled onto twice the larger input scale; 7: rounded shifts
                parts = []
                for word, zp, mult, e, name in (
                    (words2[0], q.zp_a, q.m_a, q.e_a, "a"),
                    (words2[1], q.zp_b, q.m_b, q.e_b, "b"),
                ):
                    x3 = Signal(signed(32), name=f"{name}3_{i}")
                    m.d.sync += x3.eq(wrap32((lane(word, i) - zp) << q.left_shift))
                    h6 = pipelined_srdhm(m, x3, mult, f"{name}_srdhm_{i}")
                    quo, up = rounding_divide_by_pot_parts(h6, -e)
                    q7, up7 = Signal(signed(32), name=f"{name}q7_{i}"), Signal(name=f"{name}up7_{i}")
                    m.d.sync += [q7.eq(quo), up7.eq(up if up is not None else 0)]
                    parts += [q7, up7]
                # 8: the sum; 9-11: rescaled to the output; 12: rounded shift; 13: compared; 14: clamped
                raw8 = Signal(signed(32), name=f"raw8_{i}")
                m.d.sync += raw8.eq(wrap32(parts[0] + parts[1] + parts[2] + parts[3]))
                h11 = pipelined_srdhm(m, raw8, q.m_out, f"o_srdhm_{i}")
                quo, up = rounding_divide_by_pot_parts(h11, -q.e_out)
                q12, up12 = Signal(signed(32), name=f"q12_{i}"), Signal(name=f"up12_{i}")
                m.d.sync += [q12.eq(quo), up12.eq(up if up is not None else 0)]
                below, above, in13 = (
                    Signal(name=f"below13_{i}"),
                    Signal(name=f"above13_{i}"),
                    Signal(8, name=f"in13_{i}"),
                )
                m.d.sync += Cat(below, above, in13).eq(Cat(*clamp_offset(q12, up12, q.zp_out, q.lo, q.hi)))
                y = Signal(signed(8), name=f"y14_{i}")
                m.d.sync += y.eq(clamp_select(below, above, in13, q.lo, q.hi))
                outs.append(y)
            _Writer(m, self, lanes, self.out_port, valid, Cat(*outs), final)
            return m


class Requantize(LayerComponent):
    """Elementwise requantization (TFLite's QUANTIZE int8 -> int8, and quantized relu/clamp).

    ``y = clamp(zp_out + MultiplyByQuantizedMultiplier(x - zp_in, m, shift), lo, hi)``
    through a :class:`Requantizer`, ``lanes`` elements per cycle.

    See :class:`LayerComponent` for the ports.
    """

    latency = 2 + Requantizer.latency + 1

    def __init__(self, size: int, *, zp_in: int, mult: int, shift: int, zp_out: int, lo: int, hi: int, lanes, inp, out):
        super().__init__([inp], out)
        self.size, self.lanes = size, lanes
        self.zp_in, self.mult, self.shift, self.zp_out, self.lo, self.hi = zp_in, mult, shift, zp_out, lo, hi

    def steps(self) -> int:
        return self.size // self.lanes

    def elaborate(self, platform):

        m = Module()
        with sharing(m):
            lanes = self.lanes
            run, last, (reader,) = _stream_run(m, self, self.steps(), lanes)
            v1, f1 = Signal(), Signal()
            g1 = Signal(range(max(reader.ratio, 2)))
            m.d.sync += [v1.eq(run), f1.eq(run & last), g1.eq(reader.group)]
            word = _word2(m, self.rd0_data, g1, reader.ratio, lanes)
            v2, f2 = delay(m, v1, 1, "v2"), delay(m, f1, 1, "f2")
            rq = Requantizer(
                lanes, zero_point=self.zp_out, lo=self.lo, hi=self.hi, const_params=(self.mult, self.shift)
            )
            m.submodules.requant = rq
            offsets = []
            for i in range(lanes):
                # a 32-bit signal sign-extends the narrow difference (a slice would zero-extend it)
                d = Signal(signed(32), name=f"x_{i}")
                m.d.comb += d.eq(lane(word, i) - self.zp_in)
                offsets.append(d)
            m.d.comb += [rq.i_valid.eq(v2), rq.i_tag.eq(f2), rq.i_acc.eq(Cat(*offsets))]
            _Writer(m, self, lanes, self.out_port, rq.o_valid, rq.o_data, rq.o_tag[0])
            return m


class Lookup(LayerComponent):
    """Elementwise map of int8 values through a 256-entry table: any unary op of a byte type.

    ``table`` is the op's prepared table (``Program.quant``), indexed by the
    input's bit pattern; each lane reads its own copy of the ROM, so
    ``lanes`` elements go through per cycle.

    See :class:`LayerComponent` for the ports.
    """

    latency = 2 + 1 + 1

    def __init__(self, size: int, table: np.ndarray, *, lanes: int, inp, out):
        super().__init__([inp], out)
        self.size, self.lanes = size, lanes
        self.table = [int(v) & 0xFF for v in np.asarray(table).reshape(-1)]
        if len(self.table) != 256:
            raise ValueError(f"a lookup table has 256 entries, not {len(self.table)}")

    def steps(self) -> int:
        return self.size // self.lanes

    def elaborate(self, platform):
        m = Module()
        lanes = self.lanes
        run, last, (reader,) = _stream_run(m, self, self.steps(), lanes)
        v1, f1 = Signal(), Signal()
        g1 = Signal(range(max(reader.ratio, 2)))
        m.d.sync += [v1.eq(run), f1.eq(run & last), g1.eq(reader.group)]
        word = _word2(m, self.rd0_data, g1, reader.ratio, lanes)
        v3, f3 = delay(m, v1, 2, "v"), delay(m, f1, 2, "f")  # the table's word arrives in stage 3
        outs = []
        for i in range(lanes):
            rom = Memory(shape=unsigned(8), depth=256, init=self.table)
            m.submodules[f"table_{i}"] = rom
            port = rom.read_port()
            m.d.comb += port.addr.eq(word[8 * i : 8 * i + 8])
            outs.append(port.data)
        _Writer(m, self, lanes, self.out_port, v3, Cat(*outs), f3)
        return m


class Softmax(LayerComponent):
    """TFLite's int8 softmax over rows of ``length`` elements, a sequential unit.

    Per row: a pass for the maximum; a pass summing ``exp`` of the scaled
    differences, looked up in a 256-entry ROM computed from the reference's
    integer math (differences below ``diff_min`` hold 0, which the reference
    masks the same way); the sum normalized (its leading zeros, then the
    shift); the reciprocal of the sum by gemmlowp's three Newton-Raphson steps
    on one shared, pipelined 32x32 doubling high multiply; a pass writing
    ``exp * reciprocal`` rounded to the 1/256 output grid.

    A softmax runs once per inference over a few elements (KWS: 12), so its
    cycles cost nothing next to the MAC layers' while its arithmetic set the
    clock of the whole design (KWS on ECP5-85K: 13.8 MHz with the output pass
    in one cycle). Every stage is therefore at most one multiplier or one carry
    chain deep, like :class:`Requantizer`'s: the element and the table's word
    are registered as they leave their block RAMs; the exp's rounding and the
    sum's add are two stages; the leading zeros and the normalizing shift two
    states; the multiplies take :data:`SRDHM_STAGES`; the output's rounding
    shift, its clamp compares and the clamped result one stage each. Alone on
    ECP5-85K the unit routes at 100 MHz (19 MHz before).

    See :class:`LayerComponent` for the ports.
    """

    def __init__(self, rows: int, length: int, exp_table: np.ndarray, *, lo: int, hi: int, inp, out):
        super().__init__([inp], out)
        self.rows, self.length, self.lo, self.hi = rows, length, int(lo), int(hi)
        self.exp_table = np.asarray(exp_table, dtype=np.int64)  # index: max - x (0..255)

    #: the done pulse after the last write
    latency = 1

    #: output pass stages after the table's word: the product, the rounding shift, the clamp compares,
    #: the clamped result
    OUT_STAGES = SRDHM_STAGES + 3

    @staticmethod
    def row_steps(length: int) -> int:
        # three passes over the row: max (the buffer read and its word registered: 3), sum (then the
        # table, its word registered, its rounding, the add: 6), output (then the table, its word
        # registered, OUT_STAGES); and the control states: leading zeros, normalize, seed, three
        # Newton-Raphson steps (two multiplies and a saturating shift each), scale; each multiply
        # 1 + 1 + SRDHM_STAGES + 1 cycles (the operands registered twice)
        mul = SRDHM_STAGES + 3
        passes = (length + 3) + (length + 6) + (length + 4 + Softmax.OUT_STAGES)
        return passes + 2 + mul + 3 * (2 * mul + 1) + 1

    def steps(self) -> int:
        return self.rows * self.row_steps(self.length)

    def elaborate(self, platform):
        m = Module()
        with sharing(m):
            inp, n = self.in_ports[0], self.length
            eport = rom_port(m, self, "exp", 32, [int(v) & 0xFFFFFFFF for v in self.exp_table])
            row = Signal(range(max(self.rows, 2)))
            idx = Signal(range(n + 4))  # element being addressed in a pass
            rd_word = Signal(inp.addr_bits)
            rd_group = Signal(range(max(inp.word_lanes, 2)))
            base_word = Signal(inp.addr_bits)
            base_group = Signal(range(max(inp.word_lanes, 2)))
            m.d.comb += self.rd0_addr.eq(rd_word)
            g_rd = Signal.like(rd_group)
            m.d.sync += g_rd.eq(rd_group)
            # the element registered: a block RAM's output into the max compare took 14 ns on ECP5
            x = Signal(signed(8), reset_less=True)
            m.d.sync += x.eq(self.rd0_data.word_select(g_rd, 8) if inp.word_lanes > 1 else self.rd0_data[:8])
            vmax = Signal(signed(8))
            total = Signal(32)
            e_sum = Signal(signed(21), reset_less=True)  # a table word rounded for the sum
            headroom = Signal(6)
            scale = Signal(signed(32))
            shift = Signal(range(64))
            half, point = Signal(32, reset_less=True), Signal(32, reset_less=True)  # the shift's masks
            hd = Signal(signed(32))  # half denominator
            xr = Signal(signed(32))  # Newton iterate
            t = Signal(signed(32))
            it = Signal(range(4))
            wait = Signal(range(SRDHM_STAGES + 2))
            # valid bits of the passes' stages: v[k] is an element read issued k cycles ago
            depth = 3 + self.OUT_STAGES  # the output register's stage
            v = [Const(1)] + [Signal(name=f"v{k}") for k in range(1, depth + 1)]
            m.d.sync += [v[1].eq(0), *(v[k + 1].eq(v[k]) for k in range(1, depth))]
            out_valid = Signal()  # an output in the output register (set in the output pass only)
            out_final = Signal()
            out_data = Signal(signed(8), reset_less=True)

            def advance_read():
                with m.If(rd_group == inp.word_lanes - 1):
                    m.d.sync += [rd_group.eq(0), rd_word.eq(rd_word + 1)]
                with m.Else():
                    m.d.sync += rd_group.eq(rd_group + 1)

            def rewind():
                m.d.sync += [rd_word.eq(base_word), rd_group.eq(base_group), idx.eq(0)]

            def read_pass():
                with m.If(idx < n):
                    m.d.sync += [idx.eq(idx + 1), v[1].eq(1)]
                    advance_read()

            def drained(k: int):
                """The pass' last read is issued and no element is in its first ``k`` stages."""
                return (idx == n) & ~Cat(*v[1 : k + 1]).any()

            m.d.comb += eport.addr.eq((vmax - x).as_unsigned()[:8])
            # the output pass: the table's word (registered at v3), its product with the scale (at
            # v3 + SRDHM_STAGES), the rounding shift (+1), the clamp compares (+2), the clamped result (+3)
            e_q = Signal(signed(32), reset_less=True)
            m.d.sync += e_q.eq(eport.data.as_signed())
            ab = pipelined_srdhm(m, scale, e_q, "out_srdhm")
            q_r, up_r = Signal(signed(32), reset_less=True), Signal(reset_less=True)
            # the product of a non-negative scale and table word is non-negative: its shift by up to 35
            # is x >> e, and the round-up bit comes from the masks computed once per row
            m.d.sync += [q_r.eq(ab >> shift), up_r.eq(rounding_round_up(ab, half, point))]
            below, above, inside = (Signal(reset_less=True), Signal(reset_less=True), Signal(8, reset_less=True))
            m.d.sync += Cat(below, above, inside).eq(Cat(*clamp_offset(q_r, up_r, self.lo, self.lo, self.hi)))
            m.d.sync += out_data.eq(clamp_select(below, above, inside, self.lo, self.hi))
            # the Newton-Raphson multiplier: operands registered by the issuing state, then once more (the
            # state's operand multiplexer to the far DSPs was IC's critical path on ECP5-85K: 9.2 ns of routing)
            mul_a = Signal(signed(32), reset_less=True)
            mul_b = Signal(signed(32), reset_less=True)
            prod = pipelined_srdhm(m, delay(m, mul_a, 1, "mul_a", data=True), delay(m, mul_b, 1, "mul_b", data=True),
                                   "nr_srdhm")  # fmt: skip
            srmp = Signal(signed(32), reset_less=True)

            def multiply(state: str, a, b, then) -> None:
                """State ``state`` issues ``a * b``; ``then`` runs when :func:`srdhm` of them is ``prod``."""
                with m.State(state):
                    m.d.sync += [mul_a.eq(a), mul_b.eq(b), wait.eq(SRDHM_STAGES + 1)]
                    m.next = f"{state}_P"
                with m.State(f"{state}_P"):
                    with m.If(wait == 0):
                        then()
                    with m.Else():
                        m.d.sync += wait.eq(wait - 1)

            with m.FSM():
                with m.State("IDLE"):
                    with m.If(self.start):
                        m.d.sync += [rd_word.eq(0), rd_group.eq(0), base_word.eq(0), base_group.eq(0), idx.eq(0)]
                        m.d.sync += [row.eq(0), vmax.eq(-128)]
                        m.next = "MAX"
                with m.State("MAX"):
                    read_pass()
                    with m.If(v[2] & (x > vmax)):
                        m.d.sync += vmax.eq(x)
                    with m.If(drained(2)):
                        rewind()
                        # the last element's valid bit walks on: the sum pass must not add it
                        m.d.sync += [total.eq(0), v[4].eq(0), v[5].eq(0)]
                        m.next = "SUM"
                with m.State("SUM"):
                    read_pass()
                    with m.If(v[4]):
                        m.d.sync += e_sum.eq(rounding_divide_by_pot(e_q, 12))
                    with m.If(v[5]):
                        m.d.sync += total.eq(total + e_sum)
                    with m.If(drained(5)):
                        m.next = "CLZ"
                with m.State("CLZ"):
                    m.d.sync += headroom.eq(count_leading_zeros32(total))
                    m.next = "NORM"
                with m.State("NORM"):
                    # the sum normalized into [1, 2) as Q1.31 (top bit set); gemmlowp's half denominator
                    # ((x - 1) + 1) / 2 with x - 1 wrapped to 32 bits is that word shifted right once, its
                    # top bit flipped back (set only for a zero sum, which cannot occur)
                    xn = (total << headroom)[:32]
                    m.d.sync += [hd.eq(Cat(xn[1:32], ~xn[31]).as_signed()), shift.eq(35 - headroom)]
                    m.next = "SEED"

                def seed():
                    m.d.sync += [xr.eq(wrap32(1515870810 + prod)), it.eq(0)]
                    m.next = "NR_A"

                def nr_a():
                    m.d.sync += t.eq(wrap32((1 << 29) - prod))
                    m.next = "NR_B"

                def nr_b():
                    m.d.sync += srmp.eq(saturating_rounding_multiply_by_pot(prod, 2))
                    m.next = "NR_ADD"

                multiply("SEED", hd, -1010580540, seed)
                multiply("NR_A", hd, xr, nr_a)
                multiply("NR_B", xr, t, nr_b)
                with m.State("NR_ADD"):
                    m.d.sync += [xr.eq(wrap32(xr + srmp)), it.eq(it + 1)]
                    with m.If(it == 2):
                        m.next = "SCALE"
                    with m.Else():
                        m.next = "NR_A"
                with m.State("SCALE"):
                    m.d.sync += scale.eq(saturating_rounding_multiply_by_pot(xr, 1))
                    m.d.sync += Cat(half, point).eq(Cat(*rounding_masks(shift)))
                    rewind()
                    m.next = "OUT"
                with m.State("OUT"):
                    read_pass()
                    # the element entering the output register is the row's last when none is behind it
                    m.d.sync += out_valid.eq(v[depth])
                    m.d.sync += out_final.eq(v[depth] & drained(depth - 1) & (row == self.rows - 1))
                    with m.If(drained(depth)):  # the last result is in the output register
                        with m.If(row == self.rows - 1):
                            m.next = "IDLE"
                        with m.Else():
                            m.d.sync += [row.eq(row + 1), base_word.eq(rd_word), base_group.eq(rd_group), idx.eq(0)]
                            m.d.sync += vmax.eq(-128)
                            m.next = "MAX"
            _Writer(m, self, 1, self.out_port, out_valid, out_data, out_final)
            return m


class Pad(LayerComponent):
    """Constant padding (TFLite's PAD, PADV2), ``lanes`` elements per cycle.

    Walks the output in element order: a lane group inside the input's region
    takes the input's next group (the input is read in order, one group per
    inside step), any other the fill, the prepared fill value (the zero point
    for a real 0). ``lanes`` divides the innermost input size and both of its
    pads, so a group is all inside or all outside.

    See :class:`LayerComponent` for the ports.
    """

    latency = 2 + 1

    def __init__(self, in_shape, pads, fill: int, *, lanes: int, inp, out):
        super().__init__([inp], out)
        self.in_shape = tuple(int(d) for d in in_shape) or (1,)  # a scalar is one element, never padded
        self.pads = tuple(int(v) for v in pads) or (0, 0)
        self.fill, self.lanes = int(fill), lanes
        self.out_shape = tuple(d + self.pads[2 * i] + self.pads[2 * i + 1] for i, d in enumerate(self.in_shape))

    def steps(self) -> int:
        return int(np.prod(self.out_shape)) // self.lanes

    def elaborate(self, platform):
        m = Module()
        lanes, rank = self.lanes, len(self.out_shape)
        dims = [(f"d{i}", d) for i, d in enumerate(self.out_shape[:-1])] + [("inner", self.out_shape[-1] // lanes)]
        run = Signal()
        step = Signal()
        ctrs, all_max = _counters(m, run, dims)
        with m.If(self.start):
            m.d.sync += run.eq(1)
        with m.Elif(run & all_max):
            m.d.sync += run.eq(0)
        inside = Const(1, 1)
        for i in range(rank):
            before, size = self.pads[2 * i], self.in_shape[i]
            pos = ctrs[dims[i][0]] * lanes if i == rank - 1 else ctrs[dims[i][0]]
            if before:
                inside = inside & (pos >= before)
            if before + size < self.out_shape[i]:
                inside = inside & (pos < before + size)
        m.d.comb += step.eq(run & inside)
        reader = _Reader(m, self.rd0_addr, lanes, self.in_ports[0], step, "r0")
        with m.If(run & all_max):
            reader.reset(m)
        v1, f1, in1 = Signal(), Signal(), Signal()
        g1 = Signal(range(max(reader.ratio, 2)))
        m.d.sync += [v1.eq(run), f1.eq(run & all_max), in1.eq(inside), g1.eq(reader.group)]
        word = _word2(m, self.rd0_data, g1, reader.ratio, lanes)
        v2, f2, in2 = (delay(m, x, 1, n) for x, n in ((v1, "v2"), (f1, "f2"), (in1, "in2")))
        fill = Const(self.fill & 0xFF, 8).replicate(lanes)
        _Writer(m, self, lanes, self.out_port, v2, Mux(in2, word, fill), f2)
        return m


def _by_index(index, values, default=None):
    """``values[index]`` as one expression (a Mux chain); ``values`` a list, or a dict of index -> value
    with ``default`` elsewhere."""
    items = sorted(values.items()) if isinstance(values, dict) else list(enumerate(values))
    if not items:
        return Const(default or 0)
    expr = items[-1][1] if default is None else default
    for i, v in reversed(items if default is not None else items[:-1]):
        expr = Mux(index == i, v, expr)
    return expr


@dataclass
class ConcatPart:
    """One input's place in a concatenation: its read port, the lane groups of one slab, its table row."""

    port: int
    groups: int
    row: int


class Concat(LayerComponent):
    """Concatenation (TFLite's CONCATENATION), ``lanes`` elements per cycle.

    Walks the output in element order: for each index of the axes before the
    joined one, each part's slab (its extent along the joined axis times the
    axes after it) in turn. Each part reads its input in order through a
    pointer of its own, so an input that appears twice is read twice. With
    ``tables`` (one 256-entry row per input of the node: the prepared
    requantization of each input onto the output's parameters, a copy for an
    input that shares them) every element goes through a per-lane ROM
    addressed by (row, byte); without, the bytes are copied.

    See :class:`LayerComponent` for the ports (one per distinct input).
    """

    latency = 2 + 1 + 1

    def __init__(self, outer: int, parts: list[ConcatPart], tables, *, lanes: int, inputs, out):
        super().__init__(list(inputs), out)
        self.outer, self.parts, self.lanes = outer, list(parts), lanes
        self.tables = None if tables is None else np.asarray(tables, dtype=np.int64).reshape(-1, 256)

    def steps(self) -> int:
        return self.outer * sum(part.groups for part in self.parts)

    def elaborate(self, platform):
        m = Module()
        lanes, parts, n = self.lanes, self.parts, len(self.parts)
        run = Signal()
        outer = Signal(range(max(self.outer, 2)), name="outer")
        k = Signal(range(max(n, 2)), name="part")
        j = Signal(range(max(max(p.groups for p in parts), 2)), name="group_in_slab")
        # selections by part are Mux chains on plain assignments, not Switch blocks: an event-driven
        # simulator (Icarus) evaluates a combinational block only when an input changes, and these
        # inputs may hold their initial values until the layer runs
        slab_end = Signal()
        m.d.comb += slab_end.eq(_by_index(k, [j == part.groups - 1 for part in parts]))
        final = (outer == self.outer - 1) & (k == n - 1) & slab_end
        with m.If(self.start):
            m.d.sync += run.eq(1)
        with m.Elif(run):
            with m.If(slab_end):
                m.d.sync += j.eq(0)
                with m.If(k == n - 1):
                    m.d.sync += [k.eq(0), outer.eq(Mux(outer == self.outer - 1, 0, outer + 1))]
                with m.Else():
                    m.d.sync += k.eq(k + 1)
            with m.Else():
                m.d.sync += j.eq(j + 1)
            with m.If(final):
                m.d.sync += run.eq(0)
        # a read pointer (word, lane group) per part; the active part's drives its input's port
        words, groups = [], []
        for i, part in enumerate(parts):
            port = self.in_ports[part.port]
            ratio = port.word_lanes // lanes
            word = Signal(range(max(port.depth, 2)), name=f"p{i}_word")
            group = Signal(range(max(ratio, 2)), name=f"p{i}_group")
            with m.If(run & (k == i)):
                with m.If(group == ratio - 1):
                    m.d.sync += [group.eq(0), word.eq(word + 1)]
                with m.Else():
                    m.d.sync += group.eq(group + 1)
            with m.If(run & final):  # rewound for the next inference
                m.d.sync += [word.eq(0), group.eq(0)]
            words.append(word)
            groups.append(group)
        for q in range(len(self.in_ports)):
            mine = [(i, words[i]) for i, part in enumerate(parts) if part.port == q]
            m.d.comb += getattr(self, f"rd{q}_addr").eq(_by_index(k, dict(mine), default=0))
        group_now = Signal(range(max(*(p.word_lanes // lanes for p in self.in_ports), 2)), name="group_now")
        m.d.comb += group_now.eq(_by_index(k, groups))
        # stage 1: the words arrive; stage 2: registered as they came (no logic behind a block RAM's
        # clock-to-out), the active part's lane group selected
        v1, f1 = Signal(), Signal()
        k1 = Signal.like(k)
        g1 = Signal.like(group_now)
        m.d.sync += [v1.eq(run), f1.eq(run & final), k1.eq(k), g1.eq(group_now)]
        k2, g2 = delay(m, k1, 1, "k2"), delay(m, g1, 1, "g2")
        data2 = [delay(m, getattr(self, f"rd{q}_data"), 1, f"word{q}") for q in range(len(self.in_ports))]
        picked = []
        for part in parts:
            ratio = self.in_ports[part.port].word_lanes // lanes
            picked.append(data2[part.port].word_select(g2, 8 * lanes) if ratio > 1 else data2[part.port])
        sel = Signal(8 * lanes, name="sel")
        row2 = Signal(range(max(len(self.tables) if self.tables is not None else 1, 2)), name="row2")
        m.d.comb += [sel.eq(_by_index(k2, picked)), row2.eq(_by_index(k2, [part.row for part in parts]))]
        # stage 3: the table lookup (a synchronous ROM per lane), or the bytes registered
        v3, f3 = delay(m, v1, 2, "v"), delay(m, f1, 2, "f")
        if self.tables is None:
            out3 = Signal(8 * lanes, name="out3")
            m.d.sync += out3.eq(sel)
        else:
            words = [int(v) & 0xFF for v in self.tables.reshape(-1)]
            outs = []
            for i in range(lanes):
                port = rom_port(m, self, f"table_{i}", 8, words)
                m.d.comb += port.addr.eq(Cat(sel[8 * i : 8 * i + 8], row2))
                outs.append(port.data)
            out3 = Cat(*outs)
        _Writer(m, self, lanes, self.out_port, v3, out3, f3)
        return m


__all__ = [
    "BRAM_MODES",
    "INT32_MAX",
    "Add",
    "AddQuant",
    "BufferPort",
    "ChannelQuant",
    "Concat",
    "ConcatPart",
    "Conv2d",
    "DepthwiseConv2d",
    "FullyConnected",
    "LayerComponent",
    "Pad",
    "Pool2d",
    "Requantize",
    "Requantizer",
    "RomSink",
    "Softmax",
    "Window",
    "hex_lines",
    "pack_words",
    "pipelined_rom",
    "rom_bank_depth",
    "rom_latency",
    "rom_port",
]
