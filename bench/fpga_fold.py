"""FPGA folding: the PE x SIMD per layer the fold picks for MLPerf Tiny models on a device, from the estimate.

For each model: ``rlx_edge.targets.fpga.fold.fold`` on the device (``--fit``:
the fastest design within 85 % of its LUTs/FFs and all its block RAMs and
multipliers; or ``--latency-us``), and one JSON line with every layer's
PE x SIMD, loop cycles and estimated LUT/FF/BRAM/DSP, the design's estimate
and its latency at the device's default clock (the cycle model: layers in
sequence plus the stream beats). No synthesis or routing: ``bench/fpga_pnr.py``
measures those.

    python bench/fpga_fold.py --models ad kws --device ecp5-85k
"""

from __future__ import annotations

import argparse
import sys
import time

from _common import MLPERF_INT8, record  # bench/ is on sys.path when run as a script

from rlx_edge.frontends.tflite import load_tflite
from rlx_edge.targets.fpga import as_program
from rlx_edge.targets.fpga.fold import fold


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["ad", "kws"], choices=sorted(MLPERF_INT8))
    ap.add_argument("--device", default="ecp5-85k")
    ap.add_argument("--latency-us", type=float, default=None, help="the smallest fold meeting L (default: --fit)")
    ap.add_argument("--clock-mhz", type=float, default=None)
    args = ap.parse_args(argv)
    for key in args.models:
        program = as_program(load_tflite(MLPERF_INT8[key]))
        t0 = time.perf_counter()
        res = fold(program, args.device, latency_us=args.latency_us, clock_mhz=args.clock_mhz)
        wall = time.perf_counter() - t0
        rep = res.report
        record(
            "fpga_fold",
            {
                "model": key,
                "device": args.device,
                "goal": rep["goal"],
                "target_latency_us": rep["target_latency_us"],
                "layers": rep["layers"],
                "buffers": rep["buffers"],
                "estimate": rep["estimate"],
                "usable": rep["usable"],
                "raised": rep["raised"],
                "stopped_by": rep["stopped_by"],
                "calibration": rep["calibration"],
                "fold_wall_s": round(wall, 2),
            },
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
