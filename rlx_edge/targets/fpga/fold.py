"""Folding to a device: PE x SIMD per layer, FINN-style, from a resource estimate before synthesis.

``fold(program, "ecp5-85k")`` starts from PE = SIMD = 1 on every layer and
repeatedly raises the layer with the most cycles to its next legal PE x SIMD
(the next product ``_pick_pe_simd`` reaches; lanes that divide the channels
for elementwise layers; a choice the design refuses — a buffer word no view
can hold — is skipped) while the estimate fits the device. With
``latency_us`` it stops as soon as the latency is met; without (``--fit``) it
goes on until no layer can be raised within the device: the fastest design
the greedy finds. Latency follows the design's execution, which is
layer-sequential (:mod:`.design`): the sum of every layer's loop steps plus the
beats that stream inputs in and outputs out, at the device's default clock
(or ``clock_mhz``) — the cycle model ``build_fpga`` reports without simulation.

The margin: LUTs and FFs may use 85 % of the device (:data:`MARGIN`), the rest
left to the router and the packer; block RAMs and multipliers are counted
against 100 % (hard blocks, placed whole).

Resource estimate (:func:`estimate_design`): per layer, LUT and FF linear in
its lanes (PE x SIMD, and PE — one accumulator and requantizer each — for the
MAC layers), DSP per multiplier lane and per requantizer (Yosys maps every
8x9 product to one MULT18X18D on ECP5 / SB_MAC16 on iCE40, and a requantizer's
32x31 product to several), BRAM from the geometry of every ROM (weights:
``8 x lanes`` bits wide, ``weights / lanes`` deep; per-channel parameters) and
every activation buffer of the design (:class:`~.design.Buffer`) packed into
the device's block RAM shapes. The linear coefficients are fitted (least
squares) on Yosys counts of single-layer designs recorded in
``fold_calibration.json`` (written by ``tools/fpga_fold_calibrate.py``, with
the commit and command); layer kinds not calibrated use the nearest one
(:data:`_KIND_OF`). Error of the estimate on the calibration designs, ECP5
(Yosys 0.23 ``synth_ecp5``): LUT within 8 %, FF within 6 %, DSP exact, BRAM
within 1 block; iCE40 UP5K: see ``tools/fpga_fold_calibrate.py --check``. The estimate counts
Yosys' LUT4s (a CCU2C carry cell as two), not nextpnr's packed slices;
``--pnr`` gives the routed figures.
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
from rlx_edge.targets.fpga.design import FpgaConfigError, FpgaDesign, Layer, _divisors, _pick_pe_simd
from rlx_edge.targets.fpga.devices import Device, device

MARGIN = 0.85  # share of LUTs and FFs the fold may fill: the rest is the router's and packer's slack
RESOURCES = ("lut", "ff", "bram", "dsp")
_TABLE = Path(__file__).with_name("fold_calibration.json")

# block RAM shapes (depth, width) per family: ECP5 DP16KD (and PDPW16KD, 512 x 36), iCE40 SB_RAM40_4K
_BRAM_SHAPES = {
    "ecp5": ((16384, 1), (8192, 2), (4096, 4), (2048, 9), (1024, 18), (512, 36)),
    "ice40": ((2048, 2), (1024, 4), (512, 8), (256, 16)),
}
# memories below this many bits Yosys leaves in logic (LUT RAM / LUTs), per family
_BRAM_MIN_BITS = {"ecp5": 1024, "ice40": 512}

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
def _features(kind: str, lanes: int, pe: int, uniform: bool) -> list[float]:
    """Regressors of LUT and FF for one layer (the first is the intercept)."""
    if kind == "mac":
        return [1.0, lanes, pe if uniform else 0.0, 0.0 if uniform else pe]
    if kind == "softmax":
        return [1.0]
    return [1.0, lanes]


def _dsp_features(kind: str, lanes: int, pe: int, uniform: bool) -> list[float]:
    """Regressors of DSPs: multiplier lanes, and requantizers (constant or per-channel multiplier)."""
    if kind == "mac":
        return [lanes, pe if uniform else 0.0, 0.0 if uniform else pe]
    if kind == "softmax":
        return [1.0]
    return [lanes]


@functools.cache
def calibration(family: str) -> dict[str, Any]:
    """The recorded Yosys counts of ``family`` and the coefficients fitted on them, per calibrated kind."""
    table = json.loads(_TABLE.read_text())
    if family not in table:
        raise FoldError(
            f"{_TABLE.name} has no {family} calibration: run tools/fpga_fold_calibrate.py --family {family}"
        )
    rows = table[family]["designs"]
    coef: dict[str, dict[str, list[float]]] = {}
    for kind in sorted({r["kind"] for r in rows}):
        mine = [r for r in rows if r["kind"] == kind]
        fit = {}
        for res, feats in (("lut", _features), ("ff", _features), ("dsp", _dsp_features)):
            a = np.array([feats(kind, r["pe"] * r["simd"], r["pe"], r.get("uniform", True)) for r in mine])
            b = np.array([float(r[res]) for r in mine])
            # memories' logic is in the measured counts too: the BRAM-mapped part is modelled apart
            x, *_ = np.linalg.lstsq(a, b, rcond=None)
            fit[res] = [float(v) for v in x]
        coef[kind] = fit
    return {"commit": table[family]["commit"], "command": table[family]["command"], "rows": rows, "coef": coef}


def _linear(family: str, kind: str, lanes: int, pe: int, uniform: bool) -> Estimate:
    coef = calibration(family)["coef"]
    c = coef.get(kind) or coef["lanes"]
    f, fd = _features(kind, lanes, pe, uniform), _dsp_features(kind, lanes, pe, uniform)
    lut = max(float(np.dot(c["lut"], f)), 0.0)
    ff = max(float(np.dot(c["ff"], f)), 0.0)
    return Estimate(lut, ff, 0, round(max(float(np.dot(c["dsp"], fd)), 0.0)))


def bram_blocks(family: str, width: int, depth: int) -> int:
    """Block RAMs of ``family`` holding a ``width`` x ``depth`` memory (0: small enough for logic)."""
    if width * depth < _BRAM_MIN_BITS[family]:
        return 0
    return min(math.ceil(depth / d) * math.ceil(width / w) for d, w in _BRAM_SHAPES[family])


def _uniform(design: FpgaDesign, layer: Layer) -> bool:
    """Whether the requantizer multiplies by one constant: per-tensor weights (per-channel scales differ)."""
    if len(layer.node.inputs) < 2:
        return True
    q = design.graph.types[layer.node.inputs[1]].quant
    return q is None or np.unique(np.asarray(q.scale)).size == 1


def _memories(design: FpgaDesign, layer: Layer, kind: str, uniform: bool) -> list[tuple[int, int]]:
    """(width, depth) of the layer's ROMs that the estimate places in block RAM."""
    lanes = layer.pe * layer.simd
    if kind in ("mac", "depthwise"):
        w = design.graph.params[layer.node.inputs[1]]
        groups = layer.out_lanes
        params = (32 if uniform else 73) * groups
        channels = w.shape[0] if kind == "mac" and layer.node.op != "depthwise_conv2d" else w.shape[-1]
        return [(8 * lanes, max(w.size // lanes, 1)), (params, max(channels // groups, 1))]
    if kind == "softmax":
        return [(32, 256)]
    return []


def estimate_layer(design: FpgaDesign, layer: Layer, family: str) -> Estimate:
    """One layer's LUT, FF, DSP (fitted) and block RAMs (its ROMs' geometry)."""
    kind = _layer_kind(layer)
    uniform = _uniform(design, layer)
    est = _linear(family, kind, layer.pe * layer.simd, layer.pe, uniform)
    est.bram = sum(bram_blocks(family, w, d) for w, d in _memories(design, layer, kind, uniform))
    return est


def _layer_kind(layer: Layer) -> str:
    if layer.kind == "depthwise_conv2d" and layer.node.attrs.get("depth_multiplier", 1) != 1:
        return "mac"  # on the conv datapath (design._dw_multiplier_rule)
    return _KIND_OF.get(layer.kind, "lanes")


def estimate_buffers(design: FpgaDesign, family: str) -> Estimate:
    """Block RAMs of the activation buffers (the single-layer calibration designs' fits hold their logic)."""
    return Estimate(bram=sum(bram_blocks(family, 8 * b.word_lanes, b.depth) for b in design.buffers))


def cycles(design: FpgaDesign) -> int:
    """The cycle model of ``build_fpga``'s report: every layer's loop steps (layers run in sequence) and
    the beats streaming the inputs in and the outputs out."""
    streams = design.stream_info()
    beats = sum(s["beats"] for s in (*streams["inputs"], *streams["outputs"]))
    return sum(layer.steps for layer in design.layers) + beats


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


def _build(program, choice: dict[str, tuple[int, int]]) -> FpgaDesign | None:
    try:
        return FpgaDesign(program, dict(choice))
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

    Without ``latency_us``: the fastest design the greedy finds within the device. With it: the
    first design (the least parallel the greedy reaches) whose estimated latency at ``clock_mhz``
    (default: the device's) is at most ``latency_us``. Raises :class:`FoldError` when even
    PE = SIMD = 1 does not fit (naming the layers with the largest need), or when the latency
    cannot be met within the device.
    """
    dev = device(device_name)
    mhz = clock_mhz or dev.default_mhz
    cap = usable(dev)
    choice = {layer.name: (1, 1) for layer in FpgaDesign(program, "area").layers}
    design = FpgaDesign(program, dict(choice))
    per, bufs, total = estimate_design(design, dev.family)
    over = _over(total, cap)
    if over:
        raise FoldError(_too_small(design, dev, per, total, cap, over))
    ladders = {layer.name: _ladder(design, layer) for layer in design.layers}
    rung = {name: 0 for name in choice}
    maxed: set[str] = set()
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
            c_per, c_bufs, c_total = estimate_design(cand, dev.family)
            if _over(c_total, cap):
                break  # more lanes cost more: this layer is done
            choice, design, rung[slow.name] = trial, cand, r
            per, bufs, total = c_per, c_bufs, c_total
            accepted, raised = True, raised + 1
            break
        if not accepted:
            maxed.add(slow.name)
    report = _report(design, dev, mhz, per, bufs, total, cap, latency_us, raised)
    if latency_us is not None and report["estimate"]["latency_us"] > latency_us:
        slow = max(design.layers, key=lambda layer: layer.steps)
        raise FoldError(
            f"{design.top_name}: no fold of PE x SIMD meets {latency_us:g} µs on {dev.name} at {mhz:g} MHz; "
            f"the fastest within the device takes {report['estimate']['latency_us']:,.2f} µs "
            f"({report['estimate']['cycles']:,} cycles; slowest layer {slow.name!r} ({slow.kind}) "
            f"{slow.steps:,} cycles at PE={slow.pe} SIMD={slow.simd}); choose a larger --device or a longer "
            "--latency-us"
        )
    return FoldResult(choice, design, report)


def _too_small(design: FpgaDesign, dev: Device, per, total: Estimate, cap, over: list[str]) -> str:
    parts = []
    for k in over:
        i = max(range(len(per)), key=lambda j: getattr(per[j], k))
        layer, need = design.layers[i], getattr(per[i], k)
        parts.append(
            f"~{getattr(total, k):,.0f} {k.upper()} of {cap[k]:,} usable; layer {layer.name!r} ({layer.kind}) "
            f"alone needs ~{need:,.0f} {k.upper()}"
        )
    margin = f" ({MARGIN:.0%} of LUT/FF)" if {"lut", "ff"} & set(over) else ""
    return (
        f"{design.top_name} does not fit {dev.name} ({dev.part}) even at PE = SIMD = 1{margin}: "
        + "; ".join(parts)
        + "; choose a larger --device"
    )


def _report(design, dev: Device, mhz: float, per, bufs, total, cap, latency_us, raised: int) -> dict[str, Any]:
    cyc = cycles(design)
    layers = [
        {"name": layer.name, "op": layer.kind, "pe": layer.pe, "simd": layer.simd, "cycles": layer.steps, **e.rounded()}
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


__all__ = ["MARGIN", "Estimate", "FoldError", "FoldResult", "estimate_design", "fold", "usable"]
