"""Folding to a device: PE x SIMD per layer, FINN-style, from a resource estimate before synthesis.

``fold(program, "ecp5-85k")`` starts from PE = SIMD = 1 on every layer and
repeatedly raises the layer with the most cycles to its next legal PE x SIMD
(the next product ``_pick_pe_simd`` reaches; lanes that divide the channels
for elementwise layers; a choice the design refuses — a buffer word no view
can hold — is skipped) while the estimate fits the device. With
``latency_us`` it stops as soon as the latency is met; without (``--fit``) it
goes on until no layer can be raised within the device. Raising the slowest
layer is FINN's rule for a pipeline whose layers run at once; here they run
one after another, so ``--fit`` also solves the knapsack of the multipliers
(each layer's cycles against its DSPs, :func:`_knapsack`), raises that
choice further the same way, and keeps whichever of the two designs takes
fewer cycles. Latency follows the design's execution, which is
layer-sequential (:mod:`.design`): the sum of every layer's loop steps and
pipeline fill plus the beats that stream inputs in and outputs out, at the
device's default clock (or ``clock_mhz``) — the cycle model ``build_fpga`` reports without simulation.

The margin: LUTs and FFs may use 85 % of the device (:data:`MARGIN`), the rest
left to the router and the packer; block RAMs and multipliers are counted
against 100 % (hard blocks, placed whole).

Resource estimate (:func:`estimate_design`): per layer, LUT and FF linear in
its lanes (PE x SIMD; for the MAC layers also PE — an accumulator each, and its
latch where they share requantizer lanes — and the requantizer lanes,
:meth:`~.design.FpgaDesign.requant_lanes`), DSP per multiplier lane and per
requantizer lane (Yosys maps every 8x9 product to one MULT18X18D on ECP5 /
SB_MAC16 on iCE40, and a requantizer's 32x31 product to four, or two for
narrow accumulators, :meth:`~.design.FpgaDesign.requant_narrow`), BRAM from the geometry of every ROM (weights:
``8 x lanes`` bits wide, ``weights / lanes`` deep; per-channel parameters) and
every activation buffer of the design (:class:`~.design.Buffer`) packed into
the device's block RAM shapes. The linear coefficients are fitted (least
squares) on Yosys counts of single-layer designs recorded in
``fold_calibration.json`` (written by ``tools/fpga_fold_calibrate.py``, with
the commit and command); layer kinds not calibrated use the nearest one
(:data:`_KIND_OF`). Error of the estimate on the calibration designs
(``tools/fpga_fold_calibrate.py --check``; Yosys 0.23; the fit minimizes
relative errors): ECP5 (``synth_ecp5``) LUT within 12 %, FF within 14 %, DSP
and BRAM exact; iCE40 (``synth_ice40 -dsp``) LUT within 11 %, FF within 7 %,
DSP within 2.5 %, BRAM within 4 blocks. Those errors come from the MAC layers
(10 designs, 7 coefficients); depthwise (4 designs, 3), add, pool and softmax
have as many designs as coefficients, so their fit is exact there and
untested elsewhere. On whole models, out of sample (the ``validation`` rows:
AD and KWS at PE x SIMD 8, ``synth_ecp5``), LUT +13.6 % / +0.1 %, FF -5.9 % /
-11.3 %, BRAM and DSP exact. The estimate counts Yosys' LUT4s (an ECP5
CCU2C carry cell as two; LUT RAM and iCE40 carry cells apart), not nextpnr's
packed slices; ``--pnr`` gives the routed figures.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rlx_edge.errors import RlxError
from rlx_edge.targets.fpga.components import BRAM_MODES
from rlx_edge.targets.fpga.design import (
    REGISTER_BUFFER_DEPTH,
    FpgaConfigError,
    FpgaDesign,
    Layer,
    _divisors,
    _pick_pe_simd,
)
from rlx_edge.targets.fpga.devices import Device, device

MARGIN = 0.85  # share of LUTs and FFs the fold may fill: the rest is the router's and packer's slack
RESOURCES = ("lut", "ff", "bram", "dsp")
_TABLE = Path(__file__).with_name("fold_calibration.json")

# block RAM shapes (depth, width) per family: ECP5 DP16KD (and PDPW16KD, 512 x 36; the modes deep ROMs
# are banked by), iCE40 SB_RAM40_4K
_BRAM_SHAPES = {
    "ecp5": tuple((depth, bits) for bits, depth in BRAM_MODES),
    "ice40": ((2048, 2), (1024, 4), (512, 8), (256, 16)),
}
# Yosys' cost of one block RAM (ecp5/brams.txt, ice40/brams.txt)
_BRAM_COST = {"ecp5": 128, "ice40": 64}

# layer kind -> calibrated kind: the datapath it shares (or, uncalibrated, resembles most)
_KIND_OF = {
    "conv2d": "mac",
    "fully_connected": "mac",
    "transpose_conv2d": "mac",
    "depthwise_conv2d": "depthwise",
    "add": "add",
    "requantize": "add",  # a requantizer per lane, as add's output stage
    "relu": "add",
    "relu6": "add",
    "clamp": "add",
    "softmax": "softmax",
}  # everything else (pools, lookups, pad, concat, resize): "lanes", a pool's counters and lane registers


class FoldError(RlxError):
    """No choice of PE x SIMD meets the request on the device."""


@dataclass
class Estimate:
    lut: float = 0.0
    ff: float = 0.0
    bram: int = 0
    dsp: int = 0

    def __add__(self, other: Estimate) -> Estimate:
        return Estimate(*(getattr(self, k) + getattr(other, k) for k in RESOURCES))

    def rounded(self) -> dict[str, int]:
        return {k: round(getattr(self, k)) for k in RESOURCES}


def usable(dev: Device) -> dict[str, int]:
    """What the fold may fill: :data:`MARGIN` of LUTs and FFs, every block RAM and multiplier."""
    return {"lut": int(dev.lut * MARGIN), "ff": int(dev.ff * MARGIN), "bram": dev.bram, "dsp": dev.dsp}


# the model ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Features:
    """What the estimate of one layer reads: its calibrated kind, the regressors of LUT/FF and of DSP
    (multiplied by the fitted coefficients), and its ROMs' block RAMs (counted, not fitted)."""

    kind: str
    logic: tuple[float, ...]
    dsp: tuple[float, ...]
    bram: int


def _logic_cost(width: int, depth: int) -> int:
    """Yosys' cost of a memory in LUTs (``memory_libmap``: a 16 x 4 LUT RAM costs 4)."""
    return math.ceil(depth / 16) * math.ceil(width / 4) * 4


def bram_blocks(family: str, width: int, depth: int, *, rom: bool = True) -> int:
    """Block RAMs of ``family`` holding a ``width`` x ``depth`` memory; 0 where Yosys' cheaper choice is logic
    (its ``memory_libmap`` costs: 128 a DP16KD, 64 an SB_RAM40_4K, against :func:`_logic_cost`). iCE40 has
    no LUT RAM: a writable buffer always takes block RAM there."""
    blocks = min(math.ceil(depth / d) * math.ceil(width / w) for d, w in _BRAM_SHAPES[family])
    if not rom and family == "ice40":
        return blocks
    bram, logic = _BRAM_COST[family] * blocks, _logic_cost(width, depth)
    # on a tie Yosys 0.23 kept a ROM in logic and put a buffer in block RAM (calibration designs)
    return blocks if bram < logic or (bram == logic and not rom) else 0


def _uniform(design: FpgaDesign, layer: Layer) -> bool:
    """Whether the requantizer multiplies by one constant: per-tensor weights (per-channel scales differ)."""
    if len(layer.node.inputs) < 2 or layer.node.inputs[1] not in design.graph.params:
        return True
    q = design.graph.types[layer.node.inputs[1]].quant
    return q is None or np.unique(np.asarray(q.scale)).size == 1


def _roms(design: FpgaDesign, layer: Layer, kind: str, uniform: bool) -> list[tuple[int, int]]:
    """(width, depth) of the layer's ROMs: weights ``8 x lanes`` bits wide, per-channel parameters
    (bias; multiplier and shifts when per-channel: 73 bits) a row per output-lane group, softmax's table."""
    lanes = layer.pe * layer.simd
    if kind in ("mac", "depthwise"):
        w = design.graph.params[layer.node.inputs[1]]
        groups = layer.out_lanes
        channels = w.shape[-1] if layer.node.op == "depthwise_conv2d" else w.shape[0]
        params = (32 if uniform else 73) * groups
        return [(8 * lanes, max(w.size // lanes, 1)), (params, max(channels // groups, 1))]
    if kind == "softmax":
        return [(32, 256)]
    return []


def features(design: FpgaDesign, layer: Layer, family: str) -> Features:
    """The regressors of one layer of ``design`` (also what ``tools/fpga_fold_calibrate.py`` fits on)."""
    kind = _layer_kind(layer)
    uniform = _uniform(design, layer)
    lanes, pe = layer.pe * layer.simd, layer.pe
    roms = _roms(design, layer, kind, uniform)
    bram = sum(bram_blocks(family, w, d) for w, d in roms)
    rom_luts = sum(_logic_cost(w, d) for w, d in roms if not bram_blocks(family, w, d))
    if kind == "mac":
        # lanes (multipliers, adder tree), PE (accumulators, and the latches where requantizer lanes are
        # shared), the latched parameters, requantizer lanes (per-tensor or per-channel), ROMs left in logic
        r = design.requant_lanes(layer)
        # per-channel parameters are latched and shifted with the accumulators (73 bits a lane)
        held = 0.0 if uniform or r == pe else pe
        logic = (1.0, lanes, pe, held, r if uniform else 0.0, 0.0 if uniform else r, rom_luts)
        # a requantizer lane's multiply: 4 DSPs, 2 for narrow accumulators; a per-channel shift one more
        dsp = (lanes, r * _rq_dsps(design, layer) / 4, 0.0 if uniform else 1.0)
    elif kind == "depthwise":
        r = design.requant_lanes(layer)
        logic, dsp = (1.0, lanes, r), (lanes, r * _rq_dsps(design, layer) / 4, 1.0)
    elif kind == "softmax":
        logic, dsp = (1.0,), (1.0,)
    else:  # a requantizer (or divider) per lane, and the layer's own constant multiplies
        logic, dsp = (1.0, lanes), (lanes, 1.0)
    return Features(kind, logic, dsp, bram)


def _rq_dsps(design: FpgaDesign, layer: Layer) -> int:
    """DSPs of one requantizer lane's multiply (:func:`~.arith.pipelined_srdhm`)."""
    return 2 if design.requant_narrow(layer) else 4


@functools.cache
def calibration(family: str) -> dict[str, Any]:
    """The recorded Yosys counts of ``family``, the coefficients fitted on them per kind, commit and command."""
    table = json.loads(_TABLE.read_text())
    if family not in table or "coef" not in table[family]:
        raise FoldError(
            f"{_TABLE.name} has no {family} calibration: run tools/fpga_fold_calibrate.py --family {family}"
        )
    return table[family]


def estimate_layer(design: FpgaDesign, layer: Layer, family: str) -> Estimate:
    """One layer's LUT, FF and DSP (fitted coefficients times its regressors) and block RAMs (its ROMs)."""
    f = features(design, layer, family)
    coef = calibration(family)["coef"]
    c = coef.get(f.kind) or coef["lanes"]  # kinds not calibrated (yet) on this family: a pool's

    def dot(k: str, x: tuple[float, ...]) -> float:
        return max(float(np.dot(c[k], x)), 0.0)

    return Estimate(dot("lut", f.logic), dot("ff", f.logic), f.bram, round(dot("dsp", f.dsp)))


def _layer_kind(layer: Layer) -> str:
    if layer.kind == "depthwise_conv2d" and layer.node.attrs.get("depth_multiplier", 1) != 1:
        return "mac"  # on the conv datapath (design._dw_multiplier_rule)
    return _KIND_OF.get(layer.kind, "lanes")


def estimate_buffers(design: FpgaDesign, family: str) -> Estimate:
    """Block RAMs of the activation buffers: every buffer deeper than ``REGISTER_BUFFER_DEPTH`` is block RAM
    (the Verilog asks for it, ``emit.py``), the shallower ones flip-flops (in the layers' fits: every
    calibration design has its input and output buffers)."""
    blocks = 0
    for b in design.buffers:
        if b.depth > REGISTER_BUFFER_DEPTH:
            blocks += min(math.ceil(b.depth / d) * math.ceil(8 * b.word_lanes / w) for d, w in _BRAM_SHAPES[family])
    return Estimate(bram=blocks)


def cycles(design: FpgaDesign) -> int:
    """The cycle model of ``build_fpga``'s report: every layer's loop steps and pipeline fill (layers run
    in sequence; :meth:`FpgaDesign.fill`) and the beats streaming the inputs in and the outputs out."""
    streams = design.stream_info()
    beats = sum(s["beats"] for s in (*streams["inputs"], *streams["outputs"]))
    return sum(layer.steps + design.fill(layer) for layer in design.layers) + beats


# the fold ----------------------------------------------------------------------------------
@dataclass
class FoldResult:
    """The chosen parallelism (``FpgaDesign``'s dict form) and the report of the estimate."""

    parallelism: dict[str, tuple[int, int]]
    design: FpgaDesign
    report: dict[str, Any] = field(default_factory=dict)


def _ladder(design: FpgaDesign, layer: Layer) -> list[tuple[int, int]]:
    """The PE x SIMD a layer may take, by increasing lanes; the design checks each choice when built."""
    g, node = design.graph, layer.node
    if layer.kind == "softmax":
        return [(1, 1)]
    if _layer_kind(layer) == "mac":
        w = g.params[node.inputs[1]]
        o, c = (w.shape[-1], 1) if node.op == "depthwise_conv2d" else (w.shape[0], w.shape[-1])
        products = sorted({pe * simd for pe in _divisors(o) for simd in _divisors(c)})
        return list(dict.fromkeys(_pick_pe_simd(o, c, p) for p in products))
    inner = int(g.types[layer.output].shape[-1]) if g.types[layer.output].rank else 1
    return [(d, 1) for d in _divisors(inner)]


def plan(program, parallelism: Any) -> FpgaDesign:
    """``FpgaDesign(program, parallelism)`` for its plan only (layers, buffers), never elaborated."""
    design = FpgaDesign(program, parallelism)
    design._MustUse__silence = True  # Amaranth warns about a component never elaborated; this one is not meant to be
    return design


def _build(program, choice: dict[str, tuple[int, int]]) -> FpgaDesign | None:
    try:
        return plan(program, dict(choice))
    except FpgaConfigError:
        return None  # a lane count some buffer view cannot hold: not a legal fold


def estimate_design(design: FpgaDesign, family: str) -> tuple[list[Estimate], Estimate, Estimate]:
    """Per layer, the buffers, and the total."""
    per = [estimate_layer(design, layer, family) for layer in design.layers]
    bufs = estimate_buffers(design, family)
    total = bufs
    for e in per:
        total = total + e
    return per, bufs, total


def _over(total: Estimate, cap: dict[str, int]) -> list[str]:
    return [k for k in RESOURCES if getattr(total, k) > cap[k]]


def fold(program, device_name: str, *, latency_us: float | None = None, clock_mhz: float | None = None) -> FoldResult:
    """Choose PE x SIMD per layer of ``program`` (a Program, as ``build_fpga`` builds) for ``device_name``.

    Without ``latency_us``: the fastest design found within the device (the greedy's, or a knapsack's over
    the multipliers raised further by the greedy, whichever takes fewer cycles). With it: the
    first design (the least parallel the greedy reaches) whose estimated latency at ``clock_mhz``
    (default: the device's) is at most ``latency_us``. Raises :class:`FoldError` when even
    PE = SIMD = 1 does not fit (naming the layers with the largest need), or when the latency
    cannot be met within the device.
    """
    dev = device(device_name)
    mhz = clock_mhz or dev.default_mhz
    cap = usable(dev)
    choice = {layer.name: (1, 1) for layer in plan(program, "area").layers}
    design = plan(program, dict(choice))
    per, bufs, total = estimate_design(design, dev.family)
    over = _over(total, cap)
    if over:
        raise FoldError(_too_small(design, dev, per, total, cap, over))
    state = _raise(program, dev.family, cap, mhz, latency_us, choice)
    if latency_us is None:
        # the greedy raises the slowest layer (FINN's rule, right for a pipeline of layers); the layers
        # here run one after another, so the latency is their sum: a knapsack over the multipliers finds
        # what the greedy can miss (AD on ECP5-85K: 16,842 cycles, not 17,881). Raised further from there,
        # the better of the two is kept.
        start = _knapsack(program, design, dev.family, cap)
        if start is not None:
            other = _raise(program, dev.family, cap, mhz, None, start)
            if cycles(other[1]) < cycles(state[1]):
                state = other
    choice, design, per, bufs, total, raised, stopped = state
    report = _report(design, dev, mhz, per, bufs, total, cap, latency_us, raised)
    report["stopped_by"] = {k: sorted(n for n, over in stopped.items() if k in over) for k in RESOURCES}
    if latency_us is not None and report["estimate"]["latency_us"] > latency_us:
        slow = max(design.layers, key=lambda layer: layer.steps)
        limits = "/".join(k.upper() for k, v in report["stopped_by"].items() if v) or "legal PE x SIMD"
        est = report["estimate"]
        raise FoldError(
            f"{design.top_name}: no fold meets {latency_us:g} µs on {dev.name} at {mhz:g} MHz: the fastest that "
            f"fits takes {est['latency_us']:,.2f} µs ({est['cycles']:,} cycles, {limits} exhausted; slowest layer "
            f"{slow.name!r} {slow.steps:,} cycles); choose a larger --device or a longer --latency-us"
        )
    return FoldResult(choice, design, report)


def _raise(program, family: str, cap, mhz: float, latency_us: float | None, choice: dict[str, tuple[int, int]]):
    """The greedy from ``choice``: raise the slowest layer that can still take its next legal PE x SIMD within
    ``cap``, until ``latency_us`` is met or nothing can be raised. Returns (choice, design, per, buffers,
    total, raises, the resources that stopped each layer)."""
    design = plan(program, dict(choice))
    per, bufs, total = estimate_design(design, family)
    ladders = {layer.name: _ladder(design, layer) for layer in design.layers}
    rung = {name: ladders[name].index(pe_simd) for name, pe_simd in choice.items()}
    maxed: set[str] = set()
    stopped: dict[str, list[str]] = {}  # layer -> the resources its next choice would exceed
    raised = 0
    while latency_us is None or cycles(design) / mhz > latency_us:
        open_ = [layer for layer in design.layers if layer.name not in maxed]
        if not open_:
            break
        slow = max(open_, key=lambda layer: layer.steps)
        accepted = False
        for r in range(rung[slow.name] + 1, len(ladders[slow.name])):
            trial = {**choice, slow.name: ladders[slow.name][r]}
            cand = _build(program, trial)
            if cand is None:
                continue  # illegal here; a larger choice may be legal
            c_per, c_bufs, c_total = estimate_design(cand, family)
            if _over(c_total, cap):
                stopped[slow.name] = _over(c_total, cap)
                break  # more lanes cost more: this layer is done
            choice, design, rung[slow.name] = trial, cand, r
            per, bufs, total = c_per, c_bufs, c_total
            accepted, raised = True, raised + 1
            break
        if not accepted:
            maxed.add(slow.name)
    return choice, design, per, bufs, total, raised, stopped


def _knapsack(program, design: FpgaDesign, family: str, cap) -> dict[str, tuple[int, int]] | None:
    """The PE x SIMD per layer with the fewest cycles in all whose multipliers fit ``cap``'s DSPs, each layer's
    cycles and DSPs taken from a design with only that layer raised; the first such choice (by cycles) whose
    whole estimate fits. None without DSPs to share."""
    if not cap["dsp"]:
        return None
    base = {layer.name: (1, 1) for layer in design.layers}
    options = []
    for i, layer in enumerate(design.layers):
        rungs = []
        for pe_simd in _ladder(design, layer):
            cand = _build(program, {**base, layer.name: pe_simd})
            if cand is not None:
                new = cand.layers[i]
                rungs.append((new.steps + cand.fill(new), int(estimate_layer(cand, new, family).dsp), pe_simd))
        options.append(rungs)
    best: dict[int, tuple[int, tuple]] = {0: (0, ())}  # DSPs used -> (fewest cycles, the choices)
    for rungs in options:
        nxt: dict[int, tuple[int, tuple]] = {}
        for used, (cyc, picks) in best.items():
            for c, d, pe_simd in rungs:
                if used + d <= cap["dsp"] and (used + d not in nxt or cyc + c < nxt[used + d][0]):
                    nxt[used + d] = (cyc + c, (*picks, pe_simd))
        best = nxt
    for _, picks in sorted(best.values())[:16]:
        choice = {layer.name: p for layer, p in zip(design.layers, picks)}
        cand = _build(program, choice)
        if cand is not None and not _over(estimate_design(cand, family)[2], cap):
            return choice
    return None


def _too_small(design: FpgaDesign, dev: Device, per, total: Estimate, cap, over: list[str]) -> str:
    """One line (the CLI bounds errors to 280 characters): the most overrun resource in full, with the
    layer that needs most of it, then the other resources over."""
    over = sorted(over, key=lambda k: getattr(total, k) / cap[k], reverse=True)
    k = over[0]
    i = max(range(len(per)), key=lambda j: getattr(per[j], k))
    layer = design.layers[i]
    share = f" ({MARGIN:.0%} of {getattr(dev, k):,})" if k in ("lut", "ff") else ""
    also = f"; also over: {', '.join(r.upper() for r in over[1:])}" if len(over) > 1 else ""
    return (
        f"{design.top_name} does not fit {dev.name} even at PE = SIMD = 1: needs ~{getattr(total, k):,.0f} "
        f"{k.upper()}, {cap[k]:,} usable{share}; layer {layer.name!r} ({layer.kind}) alone ~{getattr(per[i], k):,.0f}"
        f"{also}; choose a larger --device"
    )


def _report(design, dev: Device, mhz: float, per, bufs, total, cap, latency_us, raised: int) -> dict[str, Any]:
    cyc = cycles(design)
    layers = [
        {
            "name": layer.name,
            "op": layer.kind,
            "pe": layer.pe,
            "simd": layer.simd,
            "cycles": layer.steps + design.fill(layer),
            **e.rounded(),
        }
        for layer, e in zip(design.layers, per)
    ]
    cal = calibration(dev.family)
    return {
        "goal": "fit" if latency_us is None else "latency",
        "target_latency_us": latency_us,
        "layers": layers,
        "buffers": bufs.rounded(),
        "estimate": {**total.rounded(), "cycles": cyc, "clock_mhz": mhz, "latency_us": cyc / mhz},
        "device": {"name": dev.name, "part": dev.part, **{k: getattr(dev, k) for k in RESOURCES}},
        "usable": dict(cap),
        "margin": MARGIN,
        "raised": raised,
        "calibration": {"commit": cal["commit"], "command": cal["command"]},
    }


__all__ = ["MARGIN", "Estimate", "FoldError", "FoldResult", "estimate_design", "fold", "plan", "usable"]
