"""FPGA place and route: routed Fmax, utilization, cycles and latency (µs) of MLPerf Tiny models on ECP5-85K.

For each model, the parallelisms are tried in the order given (the default
first: the current ``latency`` preset, 64) until one fits the device: each
design is simulated on Verilator (bit-exact check, measured cycles), then
synthesized by Yosys and placed and routed by nextpnr (rlx_edge.targets.fpga.pnr).
A design that does not fit is recorded too (with Yosys' LUT and DSP counts).
One JSON line per attempt goes to bench/results/fpga_pnr.jsonl, with the
published hls4ml/FINN latencies beside it (other models, other device).

    python bench/fpga_pnr.py --models ad kws --parallelism 64 8 4 --device ecp5-85k
    python bench/fpga_pnr.py --models ad kws ic --fit --seeds 1 2 3   # the fold's choice for the device
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time

from _common import MLPERF_INT8, record  # bench/ is on sys.path when run as a script

from rlx_edge.errors import RlxError
from rlx_edge.frontends.tflite import load_tflite
from rlx_edge.targets.fpga import as_program, build_fpga
from rlx_edge.targets.fpga.fold import fold
from rlx_edge.targets.fpga.pnr import FitError
from rlx_edge.targets.fpga.synth import categorize

# MLPerf Tiny v0.7 closed division, hls4ml and FINN on a Pynq-Z2 (Zynq XC7Z020) at 100 MHz, as quoted in
# issue #21 (Borras et al., "Open-source FPGA-ML codesign for the MLPerf Tiny Benchmark", arXiv:2206.11791).
# Their models are quantization-aware trained (few-bit weights and activations) and differ from the
# int8 reference models here; the device is a Xilinx 7-series part, not an ECP5.
PUBLISHED = {
    "ad": {"latency_us": 18.7, "device": "Pynq-Z2 (XC7Z020)", "clock_mhz": 100, "flow": "hls4ml/FINN"},
    "kws": {"latency_us": 17.5, "device": "Pynq-Z2 (XC7Z020)", "clock_mhz": 100, "flow": "hls4ml/FINN"},
}


# the MLPerf Tiny models and TFLite Micro's person detection example (the fourth model)
MODELS = {**MLPERF_INT8, "person_detect": MLPERF_INT8["vww"].parents[1] / "tflm" / "person_detect.tflite"}


def _progress(line: str) -> None:
    print(f"fpga_pnr: {line}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["ad", "kws"], choices=[*MODELS])
    ap.add_argument("--parallelism", nargs="+", type=int, default=[64, 8, 4, 2, 1])
    ap.add_argument("--device", default="ecp5-85k")
    ap.add_argument("--clock-mhz", type=float, default=None, help="nextpnr's target (default: the device's)")
    ap.add_argument("--inferences", type=int, default=5)
    ap.add_argument("--timeout", type=float, default=1200, help="seconds for each of Yosys and nextpnr")
    ap.add_argument("--all", action="store_true", help="route every parallelism, not only the first that fits")
    ap.add_argument("--seeds", nargs="+", type=int, default=[1], help="nextpnr placement seeds, one route each")
    ap.add_argument("--fit", action="store_true", help="the fold's PE x SIMD per layer for --device (fpga --fit)")
    args = ap.parse_args(argv)
    for key in args.models:
        graph = load_tflite(MODELS[key])
        choices: list = args.parallelism
        if args.fit:
            choices = [fold(as_program(graph), args.device).parallelism]
        for p, seed in ((p, s) for p in choices for s in args.seeds):
            label = "the fold's choice" if args.fit else f"PE x SIMD {p}"
            _progress(f"{key} at {label} on {args.device}, seed {seed}")
            base = {"model": key, "parallelism": "fit" if args.fit else p, "device": args.device, "seed": seed}
            base["published"] = PUBLISHED.get(key)
            t0 = time.perf_counter()
            opts = dict(
                parallelism=p,
                pnr=args.device,
                clock_mhz=args.clock_mhz,
                progress=_progress,
                pnr_timeout=args.timeout,
                pnr_seed=seed,
            )
            with tempfile.TemporaryDirectory() as td:
                try:
                    # route first: a design that does not fit is not worth simulating
                    build_fpga(graph, td, **opts)
                except FitError as e:
                    counts = categorize(e.cells) if e.cells else {}
                    record("fpga_pnr", {**base, "fits": False, "error": str(e), "yosys": counts,
                                        "total_wall_s": time.perf_counter() - t0})  # fmt: skip
                    continue
                except RlxError as e:  # a tool ran past --timeout
                    record("fpga_pnr", {**base, "fits": None, "error": str(e),
                                        "total_wall_s": time.perf_counter() - t0})  # fmt: skip
                    continue
                # the routed result is cached: this adds the simulation (bit-exact check, measured cycles)
                res = build_fpga(graph, td, simulate=True, inferences=args.inferences, **opts)
            pnr = res["pnr"]
            record(
                "fpga_pnr",
                {
                    **base,
                    "fits": True,
                    "inferences": res["inferences"],
                    "mismatches": res["mismatches"],
                    "fmax_mhz": res["fmax_mhz"],
                    "target_mhz": pnr["target_mhz"],
                    "cycles": res["cycles"],
                    "cycles_source": res["cycles_source"],
                    "macs": res["macs"],
                    "ideal_cycles": res["ideal_cycles"],
                    "latency_us": res["latency_us"],
                    "latency_vs_published": (
                        res["latency_us"] / PUBLISHED[key]["latency_us"] if key in PUBLISHED else None
                    ),
                    "utilization": res["utilization"],
                    "shell_ff": pnr["shell_ff"],
                    "critical_path": pnr["critical_path"],
                    "per_layer": [
                        {k: r.get(k) for k in ("name", "op", "pe", "simd", "macs", "cycles", "latency_us")}
                        for r in res["per_layer"]
                    ],
                    "synth_wall_s": pnr["synth_wall_s"],
                    "pnr_wall_s": pnr["pnr_wall_s"],
                    "cached": pnr["cached"],
                    "tools": pnr["tools"],
                    "total_wall_s": time.perf_counter() - t0,
                },
            )
            if not args.all and seed == args.seeds[-1]:
                break
    return 0


if __name__ == "__main__":
    sys.exit(main())
