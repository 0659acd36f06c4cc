"""HIL link speed over QEMU: round trips per second and payload bytes per second.

    .venv/bin/python bench/hil.py [--board qemu-mps2-an386] [--seconds 3]

Uses the stand-in model firmware (16-byte input): round trips are HELLO
commands (an empty command, a 90-byte answer); payload throughput is
WRITE_INPUT frames of 640 bytes and whole inferences of the AD model
(640-byte input and output, one frame each way).
Appends one JSON line to bench/results/hil.jsonl.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import MLPERF_INT8, ROOT, record

from rlx_edge.frontends.tflite import load_tflite
from rlx_edge.hil.client import HilClient
from rlx_edge.hil.qemu import open_uart
from rlx_edge.targets.cortexm import QemuBoard, build_firmware, build_model_firmware


def _timed(seconds: float, step) -> tuple[int, float]:
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        step()
        n += 1
    return n, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--board", default="qemu-mps2-an386")
    ap.add_argument("--seconds", type=float, default=3.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        standin = build_firmware(ROOT / "tests" / "firmware" / "fixtures" / "standin", args.board, Path(tmp) / "s")
        ad, _ = build_model_firmware(load_tflite(MLPERF_INT8["ad"]), args.board, Path(tmp) / "ad")
        with QemuBoard(standin, args.board) as q, HilClient(open_uart(q)) as c:
            c.hello()
            n, dt = _timed(args.seconds, c.hello)
            rtt_per_s = n / dt
            x = np.arange(16, dtype=np.int8)
            n, dt = _timed(args.seconds, lambda: c.infer(x))
            small_infer_per_s = n / dt
        with QemuBoard(ad, args.board) as q, HilClient(open_uart(q), run_timeout=60) as c:
            c.hello()
            # One frame of the whole 640-byte input (a frame holds up to 1020).
            part = bytes(range(256)) * 2 + bytes(128)
            n, dt = _timed(args.seconds, lambda: c.write_input(part))
            write_bps = n * len(part) / dt
            x = np.zeros(640, np.int8)
            n, dt = _timed(args.seconds, lambda: c.infer(x))
            ad_infer_per_s = n / dt
            ad_bps = n * (640 + 640) / dt
    record(
        "hil",
        {
            "board": args.board,
            "transport": "qemu-tcp-uart",
            "round_trips_per_s": round(rtt_per_s, 1),
            "small_inferences_per_s": round(small_infer_per_s, 1),
            "write_payload_bytes_per_s": round(write_bps),
            "ad01_inferences_per_s": round(ad_infer_per_s, 2),
            "ad01_payload_bytes_per_s": round(ad_bps),
        },
    )


if __name__ == "__main__":
    main()
