"""Upsampling layers: resize (TFLite's RESIZE_NEAREST_NEIGHBOR, RESIZE_BILINEAR) and transpose conv.

The resize layers, ``lanes`` channels per cycle, both walk the output in
element order (pixel, channel group) and read input pixels whose rows and
columns depend only on the output row and column: the per-axis choices (and,
for bilinear, the weights) are constant tables, indexed by the row and column
counters. Tables are Mux chains on plain expressions, not a ROM: they hold
one entry per output row or column, and a combinational read keeps the read
of the input word in the same cycle as the counters.

Nearest neighbour copies one input word per step. Bilinear reads the four
corners in four steps and accumulates ``v * wy * wx`` exactly (weights in
1/1024 pixel, at most 1536 each: the sum of four int8 products stays below
2**31), then divides by 2**20 rounding half away from zero, as the op's
integer eval (TFLite Micro's ``ResizeBilinearInteger``) does.

:class:`TransposeConv2d` (TRANSPOSE_CONV) is the conv datapath gathering, for
each output pixel, the taps of the input pixels that reach it: the same
products in the same int32 sums as the op's scatter, so exact.

See :class:`~rlx_edge.targets.fpga.components.LayerComponent` for the ports.
"""

from __future__ import annotations

from collections.abc import Sequence

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed

from rlx_edge.targets.fpga.arith import sharing
from rlx_edge.targets.fpga.components import (
    Conv2d,
    LayerComponent,
    Window,
    _by_index,
    _started_loop,
    _Writer,
    lane,
    pipelined_rom,
)


def _table(index, values: Sequence[int]):
    """``values[index]`` of constant ints, as a Mux chain (signed when any value is negative)."""
    lo, hi = min(values), max(values)
    shape = signed(max(lo.bit_length(), hi.bit_length()) + 1) if lo < 0 else range(max(hi, 1) + 1)
    return _by_index(index, [Const(int(v), shape) for v in values])


class _ResizeBase(LayerComponent):
    """The output walk (n, row, column, input word, lane group, tap) and the input address of each step."""

    taps = 1

    def __init__(self, shape, out_hw, *, lanes: int, inp, out):
        super().__init__([inp], out)
        self.n, self.h, self.w, self.c = (int(d) for d in shape)
        self.oh, self.ow = (int(d) for d in out_hw)
        self.lanes = lanes

    def steps(self) -> int:
        return self.n * self.oh * self.ow * (self.c // self.lanes) * self.taps

    def _walk(self, m: Module):
        inp = self.in_ports[0]
        dims = [
            ("n", self.n),
            ("oy", self.oh),
            ("ox", self.ow),
            ("cw", self.c // inp.word_lanes),
            ("g", inp.word_lanes // self.lanes),
        ]
        if self.taps > 1:
            dims.append(("t", self.taps))
        return _started_loop(m, self.start, dims)

    def _read(self, m: Module, ctrs, iy, ix) -> None:
        inp = self.in_ports[0]
        words_per_pixel = self.c // inp.word_lanes
        addr = ((ctrs["n"] * self.h + iy) * self.w + ix) * words_per_pixel + ctrs["cw"]
        m.d.comb += self.rd0_addr.eq(addr[: inp.addr_bits])

    def _lane_group(self, m: Module, ctrs):
        """The registered lane group (stage 1) and the lanes of the word read for it."""
        ratio = self.in_ports[0].word_lanes // self.lanes
        g1 = Signal(range(max(ratio, 2)), name="g1")
        m.d.sync += g1.eq(ctrs["g"])
        word = self.rd0_data.word_select(g1, 8 * self.lanes) if ratio > 1 else self.rd0_data
        return word


class ResizeNearest(_ResizeBase):
    """Each output pixel a copy of input pixel ``(rows[oy], cols[ox])`` (the op's ``nearest_indices``)."""

    latency = 1 + 1

    def __init__(self, shape, rows: Sequence[int], cols: Sequence[int], *, lanes: int, inp, out):
        super().__init__(shape, (len(rows), len(cols)), lanes=lanes, inp=inp, out=out)
        self.rows, self.cols = [int(v) for v in rows], [int(v) for v in cols]

    def elaborate(self, platform):
        m = Module()
        run, ctrs, all_max = self._walk(m)
        self._read(m, ctrs, _table(ctrs["oy"], self.rows), _table(ctrs["ox"], self.cols))
        word = self._lane_group(m, ctrs)
        v1, f1 = Signal(), Signal()
        m.d.sync += [v1.eq(run), f1.eq(run & all_max)]
        _Writer(m, self, self.lanes, self.out_port, v1, word, f1)
        return m


class ResizeBilinear(_ResizeBase):
    """TFLite's integer bilinear resize from the prepared rows, columns and weights in 1/1024 pixel.

    Tap ``t`` (bit 0: lower/upper row, bit 1: left/right column) reads
    ``(y[t & 1][oy], x[t >> 1][ox])`` with weight ``wy * wx``; one multiplier
    per lane. Stage 1 accumulates, stage 2 rounds and writes.
    """

    taps = 4
    latency = 1 + 1 + 1

    def __init__(self, shape, y0, y1, dy, x0, x1, dx, *, lanes: int, inp, out):
        super().__init__(shape, (len(y0), len(x0)), lanes=lanes, inp=inp, out=out)
        as_ints = [[int(v) for v in t] for t in (y0, y1, dy, x0, x1, dx)]
        self.y0, self.y1, self.dy, self.x0, self.x1, self.dx = as_ints

    def elaborate(self, platform):
        m = Module()
        run, ctrs, all_max = self._walk(m)
        oy, ox, t = ctrs["oy"], ctrs["ox"], ctrs["t"]
        upper, right = t[0], t[1]
        full = 1 << 10
        iy = Mux(upper, _table(oy, self.y1), _table(oy, self.y0))
        ix = Mux(right, _table(ox, self.x1), _table(ox, self.x0))
        self._read(m, ctrs, iy, ix)
        wy = Mux(upper, _table(oy, self.dy), _table(oy, [full - d for d in self.dy]))
        wx = Mux(right, _table(ox, self.dx), _table(ox, [full - d for d in self.dx]))
        # stage 1: the word arrives with its tap's weight and the loop flags
        weight1 = Signal(signed(24), name="weight1")
        v1, first1, last1, final1 = (Signal(name=f"{k}1") for k in ("valid", "first", "last", "final"))
        m.d.sync += [
            weight1.eq(wy * wx),
            v1.eq(run),
            first1.eq(t == 0),
            last1.eq(ctrs["t_max"]),
            final1.eq(run & all_max),
        ]
        word = self._lane_group(m, ctrs)
        rounded = []
        for k in range(self.lanes):
            acc = Signal(signed(34), name=f"acc_{k}")
            total = Mux(first1, 0, acc) + lane(word, k) * weight1
            with m.If(v1):
                m.d.sync += acc.eq(total)
            total_w = Signal(signed(34), name=f"total_{k}")
            m.d.comb += total_w.eq(total)
            # divide by 2**20 with C's truncation after adding half away from zero: ties away from zero
            q = Signal(signed(35), name=f"q_{k}")
            m.d.comb += q.eq(total_w + Mux(total_w > 0, 1 << 19, -(1 << 19)))
            rounded.append(Mux(q >= 0, q >> 20, -((-q) >> 20))[:8])
        # stage 2: the rounded lanes of a finished pixel, written
        v2, f2 = Signal(), Signal()
        out2 = Signal(8 * self.lanes, name="out2")
        m.d.sync += [v2.eq(v1 & last1), f2.eq(final1)]
        with m.If(v1 & last1):
            m.d.sync += out2.eq(Cat(*rounded))
        _Writer(m, self, self.lanes, self.out_port, v2, out2, f2)
        return m


def _taps(out_size: int, kernel: int, stride: int, pad: int, size: int) -> list[tuple[int, int, int]]:
    """Per output index along one axis: the first flipped-kernel tap that reads an input pixel, that
    pixel's index, and how many taps do (stepping both), or ``(0, 0, 0)`` when none does.

    Output ``o`` takes input ``i`` through kernel index ``f`` where ``i * stride = o + pad - f``; with the
    kernel flipped (``k = kernel - 1 - f``): ``i * stride = o + k + pad - (kernel - 1)``. The taps that
    divide are ``k0, k0 + stride, ...`` (fewer than ``kernel``), reading inputs ``i0, i0 + 1, ...``, of
    which those inside ``[0, size)`` count.
    """
    out = []
    for o in range(out_size):
        k0 = (kernel - 1 - pad - o) % stride
        i0 = (o + k0 + pad - (kernel - 1)) // stride  # exact: k0 makes it a multiple
        j0, j1 = max(0, -i0), min(len(range(k0, kernel, stride)), size - i0)
        out.append((k0 + stride * j0, i0 + j0, j1 - j0) if j1 > j0 else (0, 0, 0))
    return out


def transpose_conv_steps(win: Window, o: int, pe: int, simd: int) -> int:
    """Loop steps of :class:`TransposeConv2d`: one per tap that reads an input pixel (one for a pixel none
    reaches, which gets the bias alone), per output-channel group and input-channel group."""
    rows = sum(max(t[2], 1) for t in _taps(win.oh, win.kh, win.stride[0], win.pads[0], win.h))
    cols = sum(max(t[2], 1) for t in _taps(win.ow, win.kw, win.stride[1], win.pads[2], win.w))
    return win.n * rows * cols * (o // pe) * (win.c // simd)


def _nest(m: Module, step, dims: list[tuple[str, int, object]]) -> tuple[dict, object]:
    """Nested counters like :func:`~.components._counters`, ``(name, largest count, count)`` outermost
    first, where a count may be a function of the counters (an inner loop's length by an outer index)."""
    ctrs: dict = {name: Signal(range(max(bound, 2)), name=f"c_{name}") for name, bound, _ in dims}
    carry = step
    all_max = Const(1, 1)
    for name, _, count in reversed(dims):
        c = ctrs[name]
        at_max = c == (count(ctrs) if callable(count) else count) - 1
        with m.If(carry):
            m.d.sync += c.eq(Mux(at_max, 0, c + 1))
        carry = carry & at_max
        all_max = all_max & at_max
        ctrs[f"{name}_max"] = at_max
    return ctrs, all_max


class TransposeConv2d(Conv2d):
    """Transposed 2-D convolution (TFLite's TRANSPOSE_CONV) on the :class:`Conv2d` datapath.

    ``win`` is over the input (``h``, ``w``, ``c``) and the output (``oh``,
    ``ow``) with the transpose conv's strides and its top and left padding
    (``pads[0]``, ``pads[2]``); ``weights`` [O, KH, KW, C] are the node's
    flipped along KH and KW. Each output pixel runs only the taps that read an
    input pixel: per axis, from the first one (a table by output row or
    column) the kernel steps by the stride and the input by one, as many
    times as the table says, so the zeros of a zero-inserted input and the
    taps past the input's edge cost no cycle. A pixel no tap reaches runs one
    tap of zero (its bias alone). Loop order: pixel, output-channel group, tap
    row, tap column, input-channel group; ``PE x SIMD`` as in :class:`Conv2d`.

    See :class:`~rlx_edge.targets.fpga.components.LayerComponent` for the ports.
    """

    def steps(self) -> int:
        return transpose_conv_steps(self.win, self.o, self.pe, self.simd)

    def _taps(self) -> int:
        # the fewest loop steps of a group of outputs: a pixel one tap reaches (or none: one tap of zero)
        return self.win.c // self.simd

    @property
    def latency(self) -> int:
        # its address is not from _window_run: no lag
        operands = self.operand_stage(8 * self.pe * self.simd, self._weight_depth())
        return self.mac_latency(self.simd, operands, self._serial())

    def elaborate(self, platform):
        m = Module()
        with sharing(m):
            w, pe, simd, inp = self.win, self.pe, self.simd, self.in_ports[0]
            ratio = inp.word_lanes // simd
            ys = _taps(w.oh, w.kh, w.stride[0], w.pads[0], w.h)
            xs_ = _taps(w.ow, w.kw, w.stride[1], w.pads[2], w.w)
            words = w.c // inp.word_lanes
            dims = [
                ("n", w.n, w.n),
                ("oy", w.oh, w.oh),
                ("ox", w.ow, w.ow),
                ("og", self.o // pe, self.o // pe),
                # the taps of the current row and column: tables by the output row and column
                ("ty", max(t[2] for t in ys) or 1, lambda c: _table(c["oy"], [max(t[2], 1) for t in ys])),
                ("tx", max(t[2] for t in xs_) or 1, lambda c: _table(c["ox"], [max(t[2], 1) for t in xs_])),
                ("cw", words, words),
                ("g", ratio, ratio),
            ]
            run, ctrs, all_max = _started_loop(m, self.start, dims, _nest)
            oy, ox = ctrs["oy"], ctrs["ox"]
            ky = Signal(range(w.kh + 1), name="ky")
            kx = Signal(range(w.kw + 1), name="kx")
            iy = Signal(range(max(w.h, 2)), name="iy")
            ix = Signal(range(max(w.w, 2)), name="ix")
            m.d.comb += [
                ky.eq(_table(oy, [t[0] for t in ys]) + ctrs["ty"] * w.stride[0]),
                kx.eq(_table(ox, [t[0] for t in xs_]) + ctrs["tx"] * w.stride[1]),
                iy.eq(_table(oy, [t[1] for t in ys]) + ctrs["ty"]),
                ix.eq(_table(ox, [t[1] for t in xs_]) + ctrs["tx"]),
            ]
            inside = Signal(name="inside")
            m.d.comb += inside.eq(_table(oy, [int(t[2] > 0) for t in ys]) & _table(ox, [int(t[2] > 0) for t in xs_]))
            addr = ((ctrs["n"] * w.h + iy) * w.w + ix) * words + ctrs["cw"]
            m.d.comb += self.rd0_addr.eq(addr[: inp.addr_bits])
            first = (ctrs["ty"] == 0) & (ctrs["tx"] == 0) & (ctrs["cw"] == 0) & (ctrs["g"] == 0)
            last = ctrs["ty_max"] & ctrs["tx_max"] & ctrs["cw_max"] & ctrs["g_max"]

            waddr_port, wdata = pipelined_rom(m, self, "weights", 8 * pe * simd, self._weight_words())
            waddr = ((ctrs["og"] * w.kh + ky) * w.kw + kx) * (w.c // simd) + ctrs["cw"] * ratio + ctrs["g"]
            # a pixel no tap reaches reads word 0 (its input is zero; a ROM read out of range is X)
            m.d.comb += waddr_port.eq(Mux(inside, waddr, 0))
            s2, xs = self._stage1(m, run, first, last, all_max, inside, ctrs["g"], ratio, simd)
            dots, lag = self._dots(m, xs, wdata, pe, simd)
            self._tail(m, self.q, pe, s2, dots, lag, ctrs["og"], self.o // pe)
            return m
