"""Yosys counts of small single-layer FPGA designs: the data the fold's resource estimate is fitted on.

Builds each calibration design (one layer of a fixed shape at a few PE x SIMD)
with ``build_fpga(..., synth=FAMILY)`` and writes the counts, with the commit and
this command, to ``rlx_edge/targets/fpga/fold_calibration.json`` (merged by
family); :mod:`rlx_edge.targets.fpga.fold` fits its coefficients on them.

    .venv/bin/python tools/fpga_fold_calibrate.py --family ecp5 [--only fc conv]   # Yosys: 10-90 s a design
    .venv/bin/python tools/fpga_fold_calibrate.py --family ecp5 --fit --check      # refit, then the errors

``--fit`` refits the coefficients (least squares per kind, on the regressors
``fold.features`` computes for each rebuilt design) into the table; ``--check``
prints the estimate's error on every recorded design. Rerun the synthesis when
the datapath changes, then ``--fit``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from rlx_edge.ir.graph import Graph
from rlx_edge.ir.types import QuantParams
from rlx_edge.targets.fpga import build_fpga

TABLE = Path(__file__).resolve().parents[1] / "rlx_edge" / "targets" / "fpga" / "fold_calibration.json"


def _q(scale: float, zp: int) -> QuantParams:
    return QuantParams(scale, zp)


def _weights(rng, shape, axis: int | None):
    w = rng.integers(-127, 128, shape).astype(np.int8)
    if axis is None:  # per-tensor: the requantizer's multiplier is a constant
        return w, QuantParams(0.01, 0)
    n = shape[axis]
    return w, QuantParams(rng.uniform(0.002, 0.02, n).astype(np.float32), np.zeros(n, np.int64), axis=axis)


def fc(rng) -> Graph:
    g = Graph("cal_fc")
    x = g.input("x", (1, 64), "i8", quant=_q(0.1, -3))
    w, wq = _weights(rng, (64, 64), None)
    b = g.param("b", rng.integers(-3000, 3000, 64).astype(np.int32))
    g.output(g.fully_connected(x, g.param("w", w, quant=wq), b, activation="relu", out_quant=_q(0.05, -128)))
    return g


def conv(rng) -> Graph:
    g = Graph("cal_conv")
    x = g.input("x", (1, 10, 10, 8), "i8", quant=_q(0.1, -3))
    w, wq = _weights(rng, (16, 3, 3, 8), 0)
    b = g.param("b", rng.integers(-3000, 3000, 16).astype(np.int32))
    y = g.conv2d(x, g.param("w", w, quant=wq), b, strides=(1, 1), padding="same", activation="relu",
                 out_quant=_q(0.05, -128))  # fmt: skip
    g.output(y)
    return g


def depthwise(rng) -> Graph:
    g = Graph("cal_dw")
    x = g.input("x", (1, 10, 10, 16), "i8", quant=_q(0.1, -3))
    w, wq = _weights(rng, (1, 3, 3, 16), 3)
    b = g.param("b", rng.integers(-3000, 3000, 16).astype(np.int32))
    y = g.depthwise_conv2d(x, g.param("w", w, quant=wq), b, depth_multiplier=1, strides=(1, 1), padding="same",
                           activation="relu", out_quant=_q(0.05, -128))  # fmt: skip
    g.output(y)
    return g


def avg_pool(rng) -> Graph:
    g = Graph("cal_pool")
    x = g.input("x", (1, 10, 10, 16), "i8", quant=_q(0.1, -3))
    g.output(g.avg_pool2d(x, kernel=(2, 2), strides=(2, 2), padding="valid"))
    return g


def add(rng) -> Graph:
    g = Graph("cal_add")
    a = g.input("a", (1, 8, 8, 16), "i8", quant=_q(0.1, -3))
    b = g.input("b", (1, 8, 8, 16), "i8", quant=_q(0.07, 5))
    g.output(g.add(a, b, activation="relu", out_quant=_q(0.15, -128)))
    return g


def softmax(rng) -> Graph:
    g = Graph("cal_softmax")
    x = g.input("x", (1, 12), "i8", quant=_q(0.1, 0))
    g.output(g.softmax(x, out_quant=_q(1 / 256, -128)))
    return g


# design -> (graph builder, layer kind in the estimate, the PE x SIMD (or lanes) it is synthesized at)
DESIGNS: dict[str, tuple[Callable, str, list[tuple[int, int]]]] = {
    # (16, 16) and (8, 16): 4 taps a group, so 4 and 2 requantizer lanes; (16, 8) on the conv: 9 taps, 2 lanes
    "fc": (fc, "mac", [(1, 1), (2, 2), (4, 4), (8, 4), (8, 16), (16, 16)]),
    "conv": (conv, "mac", [(1, 1), (4, 2), (8, 4), (16, 8)]),
    "depthwise": (depthwise, "depthwise", [(1, 1), (4, 1), (16, 1), (8, 1)]),
    "avg_pool": (avg_pool, "lanes", [(1, 1), (8, 1)]),
    "add": (add, "add", [(1, 1), (8, 1)]),
    "softmax": (softmax, "softmax", [(1, 1)]),
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--family", default="ecp5", choices=("ecp5", "ice40"))
    ap.add_argument("--only", nargs="+", choices=list(DESIGNS))
    ap.add_argument("--fit", action="store_true", help="no synthesis: refit the coefficients on the recorded counts")
    ap.add_argument("--check", action="store_true", help="no synthesis: the estimate's error on the recorded designs")
    args = ap.parse_args(argv)
    if args.fit:
        print(json.dumps({"family": args.family, "coef": fit(args.family)}))
    if args.check:
        print(json.dumps({"family": args.family, "worst": check(args.family)}))
    if args.fit or args.check:
        return 0
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=TABLE.parent).stdout.strip() or "unknown"  # fmt: skip
    table = json.loads(TABLE.read_text()) if TABLE.is_file() else {}
    fam = table.setdefault(args.family, {"designs": []})
    fam["commit"] = commit
    fam["command"] = f".venv/bin/python tools/fpga_fold_calibrate.py --family {args.family}"
    for name in args.only or DESIGNS:
        build, kind, configs = DESIGNS[name]
        for pe, simd in configs:
            g = build(np.random.default_rng(0))
            with tempfile.TemporaryDirectory() as td:
                res = build_fpga(g, td, parallelism={"default": "area", _layer_name(g): (pe, simd)}, synth=args.family)
            r = res["resources"]
            row = {"design": name, "kind": kind, "pe": pe, "simd": simd, "layer": res["per_layer"][0]["name"],
                   "uniform": _uniform_weights(g),
                   **{k: r[k] for k in ("lut", "ff", "bram", "dsp", "lutram", "carry")},
                   "synth_wall_s": round(r["synth_wall_s"], 1), "commit": commit}  # fmt: skip
            fam["designs"] = [d for d in fam["designs"] if (d["design"], d["pe"], d["simd"]) != (name, pe, simd)]
            fam["designs"].append(row)
            print(json.dumps(row), flush=True)
            TABLE.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    return 0


def _layer_name(g: Graph) -> str:
    return g.nodes[-1].name


def _uniform_weights(g: Graph) -> bool:
    """Per-tensor weight scales (the requantizer's multiplier a constant), as the estimate reads them."""
    node = g.nodes[-1]
    q = g.types[node.inputs[1]].quant if len(node.inputs) > 1 else None
    return q is None or np.unique(np.asarray(q.scale)).size == 1


def _designs(family: str, rows: list[dict]):
    """Each recorded row with its design rebuilt (the same graph, seed and PE x SIMD) for the estimate."""
    from rlx_edge.targets.fpga import as_program
    from rlx_edge.targets.fpga.fold import plan

    for r in rows:
        g = DESIGNS[r["design"]][0](np.random.default_rng(0))
        yield r, plan(as_program(g), {r["layer"]: (r["pe"], r["simd"])})


def fit(family: str) -> dict:
    """Least-squares coefficients of LUT, FF and DSP per kind on the recorded counts (no synthesis)."""
    from rlx_edge.targets.fpga.fold import features

    table = json.loads(TABLE.read_text())
    by_kind: dict[str, list] = {}
    for r, design in _designs(family, table[family]["designs"]):
        by_kind.setdefault(r["kind"], []).append((r, features(design, design.layers[0], family)))
    coef = {}
    for kind, pairs in sorted(by_kind.items()):
        coef[kind] = {}
        for res, attr in (("lut", "logic"), ("ff", "logic"), ("dsp", "dsp")):
            a = np.array([getattr(f, attr) for _, f in pairs], dtype=float)
            b = np.array([float(r[res]) for r, _ in pairs])
            # relative errors: each design's row divided by its count, so that the large designs do not
            # swamp the small ones (the tolerance is relative)
            w = 1.0 / np.maximum(b, 1.0)
            x, *_ = np.linalg.lstsq(a * w[:, None], b * w, rcond=None)
            coef[kind][res] = [round(float(v), 4) for v in x]
    table[family]["coef"] = coef
    TABLE.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    return coef


def check(family: str) -> dict[str, float]:
    """Largest error of the estimate on the recorded designs: relative for LUT, FF and DSP, in blocks for BRAM."""
    from rlx_edge.targets.fpga.fold import calibration, estimate_design

    worst = {"lut": 0.0, "ff": 0.0, "dsp": 0.0, "bram": 0.0}
    for r, design in _designs(family, calibration(family)["designs"]):
        _, _, total = estimate_design(design, family)
        err = {k: abs(getattr(total, k) - r[k]) / max(r[k], 1) for k in ("lut", "ff", "dsp")}
        err["bram"] = abs(total.bram - r["bram"])
        print(json.dumps({"design": r["design"], "pe": r["pe"], "simd": r["simd"], **total.rounded(),
                          "measured": {k: r[k] for k in worst}, "error": err}))  # fmt: skip
        worst = {k: max(worst[k], err[k]) for k in worst}
    return worst


if __name__ == "__main__":
    sys.exit(main())
