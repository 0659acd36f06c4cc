"""FPGA datapaths: measured cycles, Yosys resources and simulation time per model and parallelism.

For each int8 MLPerf Tiny model and PE x SIMD target: generate the design,
simulate it on Verilator (bit-exact check included), synthesize it with Yosys
for one family, and print/append one JSON line per run to
bench/results/fpga.jsonl. Cycles are quoted against the anchor
sum(MACs / (PE x SIMD)) of the same design.

    python bench/fpga.py --models ad kws --parallelism 16 64 --synth ice40
    python bench/fpga.py --models person_detect --parallelism 8 --synth none --inferences 1
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time

from _common import MLPERF_INT8, MODELS, record  # bench/ is on sys.path when run as a script

from rlx_edge.frontends.tflite import load_tflite
from rlx_edge.targets.fpga import build_fpga

# the MLPerf Tiny models, and TFLite Micro's person_detect (31 layers; its Verilator run left the CI
# suite, where micro_speech, KWS and IC cover its layer kinds, for taking three minutes)
FILES = {**MLPERF_INT8, "person_detect": MODELS / "tflm" / "person_detect.tflite"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["ad", "kws", "ic"], choices=[*FILES])
    ap.add_argument("--parallelism", nargs="+", type=int, default=[64])
    ap.add_argument("--synth", default="ice40", choices=["ice40", "ecp5", "xilinx", "none"])
    ap.add_argument("--inferences", type=int, default=2)
    ap.add_argument("--simulator", default="verilator", choices=["verilator", "icarus"])
    args = ap.parse_args(argv)
    for key in args.models:
        graph = load_tflite(FILES[key])
        for p in args.parallelism:
            with tempfile.TemporaryDirectory() as td:
                t0 = time.perf_counter()
                res = build_fpga(
                    graph,
                    td,
                    parallelism=p,
                    simulate=True,
                    synth=None if args.synth == "none" else args.synth,
                    inferences=args.inferences,
                    simulator=args.simulator,
                )
                wall = time.perf_counter() - t0
            resources = res["resources"] or {}
            record(
                "fpga",
                {
                    "model": key,
                    "parallelism": p,
                    "simulator": args.simulator,
                    "inferences": res["inferences"],
                    "mismatches": res["mismatches"],
                    "cycles": res["cycles"],
                    "compute_cycles": res["compute_cycles"],
                    "macs": res["macs"],
                    "ideal_cycles": res["ideal_cycles"],
                    "cycles_over_ideal": res["cycles"] / res["ideal_cycles"],
                    "per_layer": [
                        {k: r[k] for k in ("name", "op", "pe", "simd", "macs", "ideal_cycles", "cycles")}
                        for r in res["per_layer"]
                    ],
                    "family": resources.get("family"),
                    "lut": resources.get("lut"),
                    "ff": resources.get("ff"),
                    "bram": resources.get("bram"),
                    "dsp": resources.get("dsp"),
                    "synth_wall_s": resources.get("synth_wall_s"),
                    "sim_wall_s": res["sim_wall_s"],
                    "sim_cycles_per_s": res["cycles"] * res["inferences"] / res["sim_wall_s"],
                    "build_wall_s": res["build_wall_s"],
                    "total_wall_s": wall,
                },
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
