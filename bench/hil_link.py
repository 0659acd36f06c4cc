"""HIL link under injected faults: the `rlx-edge hil --faults RATE` campaign, recorded.

    .venv/bin/python bench/hil_link.py [--model ad] [--rate 0.2] [--count 50] [--timeout 2]

A fault-injection proxy between host and QEMU corrupts, drops, duplicates,
truncates, delays or resets messages with probability RATE. The figures that
matter: wrong results accepted (must be 0), inputs answered (goal >= 96 %),
retries and wall time. Appends one JSON line to bench/results/hil_link.jsonl.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import MLPERF_INT8, record

from rlx_edge.hil.campaign import run_campaign


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="ad", choices=sorted(MLPERF_INT8))
    ap.add_argument("--board", default="qemu-mps2-an386")
    ap.add_argument("--rate", type=float, default=0.2)
    ap.add_argument("--count", type=int, default=50)
    ap.add_argument("--timeout", type=float, default=2.0, help="per-command timeout of the client (s)")
    args = ap.parse_args()
    rep = run_campaign(
        MLPERF_INT8[args.model], args.board, count=args.count, progress=False, timeout=args.timeout, faults=args.rate
    ).to_json()
    record(
        "hil_link",
        {
            "model": args.model,
            "board": args.board,
            "rate": args.rate,
            "timeout_s": args.timeout,
            "requested": rep["requested"],
            "answered": rep["answered"],
            "answered_fraction": rep["answered"] / rep["requested"],
            "wrong_accepted": rep["wrong_accepted"],
            "faults_injected": rep["faults_injected"],
            "faults_by_kind": rep["faults"]["by_kind"],
            "retries": rep["retries"],
            "wall_s": rep["wall_s"],
        },
    )


if __name__ == "__main__":
    main()
