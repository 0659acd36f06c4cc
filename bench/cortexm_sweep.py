"""Cortex-M kernels on a fixed, seeded sweep of layer shapes: instructions per MAC on M4 and M3.

The MLPerf Tiny models exercise a handful of shapes; this sweep covers the
rest of what models bring (issue #17): convolutions 1x1, 3x3, 5x5, 7x1,
1x7, 10x4 with strides 1-2, dilation 2 and channel counts 3-256 including
odd ones; depthwise 3x3, 5x5, 7x7, 1xK and Kx1 with depth multipliers 1-2;
fully connected layers with small, odd and large K; element-wise add;
average and max pooling.

Up to 8 cases share one firmware image as independent branches of one
graph; ``rlx_edge.hil.profile`` runs it once under QEMU, checks every output
bit-exact against the integer reference, and counts each kernel call from
its BL to its return (``kernel_instructions``: the input copies and argument
set-up around the calls are not the kernels' cost).
Each case prints instructions/MAC; the JSON line has every case, the median
per op family and the worst conv/depthwise/FC case.

Usage: ``python bench/cortexm_sweep.py [--cores m4,m3] [--only conv,dw,fc,add,pool]``
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import dataclass

import numpy as np
from _common import record  # bench/ is on sys.path when run as a script

from rlx_edge.hil.profile import profile
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.types import QuantParams

SEED = 17
PER_IMAGE = 8  # the firmware's model runner takes up to 8 inputs and 8 outputs


@dataclass(frozen=True)
class Case:
    """One layer: ``kind`` conv | dw | fc | add | avgpool | maxpool and its shape."""

    kind: str
    h: int = 1
    w: int = 1
    c: int = 1
    o: int = 1  # output channels (conv), depth multiplier (dw), outputs (fc)
    kh: int = 1
    kw: int = 1
    stride: int = 1
    dil: int = 1
    padding: str = "same"

    @property
    def label(self) -> str:
        if self.kind in ("conv", "dw"):
            extra = f" s{self.stride}" + (f" d{self.dil}" if self.dil > 1 else "") + f" {self.padding}"
            what = f"x{self.o}" if self.kind == "dw" and self.o > 1 else f"->{self.o}" if self.kind == "conv" else ""
            return f"{self.kind} {self.kh}x{self.kw} {self.h}x{self.w}x{self.c}{what}{extra}"
        if self.kind == "fc":
            return f"fc {self.c}->{self.o}"
        if self.kind == "add":
            return f"add {self.h}x{self.w}x{self.c}"
        return f"{self.kind} {self.kh}x{self.kw} {self.h}x{self.w}x{self.c} s{self.stride}"


def cases() -> list[Case]:
    conv = [
        Case("conv", 16, 16, 3, 16, 3, 3, 2),  # a first layer: 3 input channels
        Case("conv", 12, 12, 16, 32, 3, 3),
        Case("conv", 10, 10, 32, 32, 3, 3, 1, 2),  # dilation 2
        Case("conv", 10, 10, 17, 19, 3, 3),  # odd channels
        Case("conv", 8, 8, 64, 64, 3, 3, 2),
        Case("conv", 12, 12, 8, 16, 5, 5),
        Case("conv", 12, 12, 5, 7, 5, 5, 2),
        Case("conv", 16, 8, 8, 16, 7, 1),
        Case("conv", 8, 16, 8, 16, 1, 7),
        Case("conv", 25, 5, 1, 64, 10, 4, 2),  # KWS's first layer
        Case("conv", 24, 6, 3, 8, 10, 4, 1),
        Case("conv", 16, 16, 16, 32, 1, 1),
        Case("conv", 8, 8, 64, 128, 1, 1),
        Case("conv", 6, 6, 128, 256, 1, 1),
        Case("conv", 9, 9, 33, 15, 1, 1),  # odd, not multiples of 4
        Case("conv", 7, 7, 3, 5, 1, 1),
        Case("conv", 12, 12, 16, 16, 1, 1, 2),  # strided 1x1
        Case("conv", 6, 6, 256, 32, 3, 3, 1, 1, "valid"),
        Case("conv", 11, 11, 24, 24, 3, 3, 1, 1, "valid"),
        Case("conv", 14, 14, 6, 10, 3, 3, 2, 2),
    ]
    dw = [
        Case("dw", 16, 16, 16, 1, 3, 3),
        Case("dw", 16, 16, 32, 1, 3, 3, 2),
        Case("dw", 12, 12, 17, 1, 3, 3),
        Case("dw", 12, 12, 64, 1, 3, 3, 1, 2),
        Case("dw", 12, 12, 16, 1, 5, 5),
        Case("dw", 12, 12, 24, 1, 5, 5, 2),
        Case("dw", 14, 14, 8, 1, 7, 7),
        Case("dw", 14, 14, 12, 1, 7, 7, 2),
        Case("dw", 24, 4, 16, 1, 1, 9),
        Case("dw", 24, 4, 16, 1, 9, 1),
        Case("dw", 30, 1, 64, 1, 5, 1),  # a streaming 1-D layer
        Case("dw", 30, 1, 33, 1, 7, 1),
        Case("dw", 10, 10, 8, 2, 3, 3),
        Case("dw", 10, 10, 7, 2, 3, 3, 2),
        Case("dw", 10, 10, 16, 2, 5, 5),
        Case("dw", 49, 10, 1, 8, 10, 8, 2),  # micro_speech's first layer: one channel, multiplier 8
        Case("dw", 8, 8, 96, 1, 3, 3, 1, 1, "valid"),
        Case("dw", 6, 6, 128, 1, 3, 3, 2, 1, "valid"),
    ]
    fc = [
        Case("fc", c=16, o=8),
        Case("fc", c=7, o=3),
        Case("fc", c=33, o=17),
        Case("fc", c=64, o=64),
        Case("fc", c=250, o=10),
        Case("fc", c=640, o=128),
        Case("fc", c=1024, o=12),
        Case("fc", c=99, o=101),
    ]
    elementwise = [
        Case("add", 16, 16, 16),
        Case("add", 13, 7, 3),
        Case("add", 8, 8, 64),
        Case("add", 1, 1, 1000),
    ]
    pool = [
        Case("avgpool", 16, 16, 16, kh=2, kw=2, stride=2),
        Case("avgpool", 7, 7, 33, kh=7, kw=7, stride=1, padding="valid"),
        Case("avgpool", 12, 12, 8, kh=3, kw=3, stride=1),
        Case("maxpool", 16, 16, 16, kh=2, kw=2, stride=2),
        Case("maxpool", 15, 15, 7, kh=3, kw=3, stride=2),
        Case("maxpool", 10, 10, 32, kh=3, kw=3, stride=1),
    ]
    return conv + dw + fc + elementwise + pool


def _q(rng) -> QuantParams:
    return QuantParams(np.float32(rng.uniform(0.01, 0.1)), int(rng.integers(-100, 100)))


def _wq(rng, n: int, axis: int) -> QuantParams:
    return QuantParams(rng.uniform(0.002, 0.02, n).astype(np.float32), np.zeros(n, np.int64), axis=axis)


def _add_case(g: Graph, k: int, case: Case, rng) -> None:
    if case.kind == "fc":
        x = g.input(f"x{k}", (1, case.c), "i8", quant=_q(rng))
        w = g.param(f"w{k}", rng.integers(-127, 128, (case.o, case.c)).astype(np.int8), quant=_wq(rng, case.o, 0))
        b = g.param(f"b{k}", rng.integers(-5000, 5000, case.o).astype(np.int32))
        g.output(g.fully_connected(x, w, b, name=f"case{k}", out_quant=_q(rng)))
        return
    x = g.input(f"x{k}", (1, case.h, case.w, case.c), "i8", quant=_q(rng))
    if case.kind == "add":
        y = g.input(f"y{k}", (1, case.h, case.w, case.c), "i8", quant=_q(rng))
        g.output(g.add(x, y, name=f"case{k}", out_quant=_q(rng)))
        return
    window = {"strides": (case.stride, case.stride), "padding": case.padding}
    if case.kind in ("avgpool", "maxpool"):
        op = g.avg_pool2d if case.kind == "avgpool" else g.max_pool2d
        g.output(op(x, kernel=(case.kh, case.kw), name=f"case{k}", **window))
        return
    window["dilations"] = (case.dil, case.dil)
    if case.kind == "conv":
        shape = (case.o, case.kh, case.kw, case.c)
        w = g.param(f"w{k}", rng.integers(-127, 128, shape).astype(np.int8), quant=_wq(rng, case.o, 0))
        b = g.param(f"b{k}", rng.integers(-5000, 5000, case.o).astype(np.int32))
        g.output(g.conv2d(x, w, b, name=f"case{k}", activation="relu", out_quant=_q(rng), **window))
        return
    n = case.c * case.o
    w = g.param(f"w{k}", rng.integers(-127, 128, (1, case.kh, case.kw, n)).astype(np.int8), quant=_wq(rng, n, 3))
    b = g.param(f"b{k}", rng.integers(-5000, 5000, n).astype(np.int32))
    g.output(
        g.depthwise_conv2d(
            x, w, b, name=f"case{k}", depth_multiplier=case.o, activation="relu6", out_quant=_q(rng), **window
        )
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cores", default="m4,m3")
    ap.add_argument("--only", default="", help="comma-separated kinds to run (default: all)")
    args = ap.parse_args()
    only = set(filter(None, args.only.split(",")))
    todo = [c for c in cases() if not only or c.kind in only or (c.kind.endswith("pool") and "pool" in only)]
    rng = np.random.default_rng(SEED)
    images: list[tuple[Graph, list[tuple[str, Case]]]] = []
    pending, k = list(todo), 0
    while pending:
        g, chunk, inputs = Graph(f"sweep{len(images)}"), [], 0
        # an add takes two inputs: each image stays within the runner's 8 inputs
        while pending and inputs + (2 if pending[0].kind == "add" else 1) <= PER_IMAGE:
            case = pending.pop(0)
            inputs += 2 if case.kind == "add" else 1
            _add_case(g, k, case, rng)
            chunk.append((f"case{k}", case))
            k += 1
        images.append((g, chunk))
    rows = []
    for core in args.cores.split(","):
        for g, chunk in images:
            prof = profile(g, core, seed=SEED)
            by_name = {layer.name: layer for layer in prof.layers}
            for node_name, case in chunk:
                layer = by_name[node_name]
                n = layer.kernel_instructions
                ipm = n / layer.macs if layer.macs else None
                per_elem = n / max(1, case.h * case.w * case.c) if case.kind == "add" else None
                rows.append(
                    {
                        "core": core,
                        "case": case.label,
                        "kind": case.kind,
                        "kernel": layer.kernel,
                        "macs": layer.macs,
                        "instructions": n,
                        "instr_per_mac": None if ipm is None else round(ipm, 3),
                        "instr_per_element": None if per_elem is None else round(per_elem, 2),
                        "bit_exact": prof.bit_exact,
                    }
                )
                shown = f"{ipm:.3f}/MAC" if ipm is not None else f"{n:,} instructions"
                if per_elem is not None:
                    shown += f" ({per_elem:.1f}/element)"
                print(f"{core} {case.label:<40} {layer.kernel:<28} {shown}", file=sys.stderr)
    summary = {}
    for core in args.cores.split(","):
        mine = [r for r in rows if r["core"] == core]
        mac = [r for r in mine if r["kind"] in ("conv", "dw", "fc")]
        per_kind = {
            k: statistics.median(r["instr_per_mac"] for r in mac if r["kind"] == k)
            for k in ("conv", "dw", "fc")
            if any(r["kind"] == k for r in mac)
        }
        worst = max(mac, key=lambda r: r["instr_per_mac"]) if mac else None
        summary[core] = {
            "median_instr_per_mac": statistics.median(r["instr_per_mac"] for r in mac) if mac else None,
            "median_by_kind": per_kind,
            "worst": None if worst is None else {k: worst[k] for k in ("case", "kernel", "instr_per_mac")},
            "all_bit_exact": all(r["bit_exact"] for r in mine),
            "cases": len(mine),
        }
    record("cortexm_sweep", {"seed": SEED, "summary": summary, "cases": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
