"""Shared bits of the benchmark scripts: model paths and result records."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "models"  # the checkout's own model files (models/README.md)
MLPERF_INT8 = {
    "kws": MODELS / "mlperf-tiny" / "kws_ref_model.tflite",
    "vww": MODELS / "mlperf-tiny" / "vww_96_int8.tflite",
    "ic": MODELS / "mlperf-tiny" / "pretrainedResnet_quant.tflite",
    "ad": MODELS / "mlperf-tiny" / "ad01_int8.tflite",
}


def record(bench: str, payload: dict) -> dict:
    """Print one JSON line and append it to bench/results/<bench>.jsonl."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
        ).stdout.strip()
    except OSError:
        commit = ""
    # a copy of a checkout without its .git (a remote host) says which commit it is
    commit = commit or os.environ.get("RLX_BENCH_COMMIT", "")
    rec = {
        "bench": bench,
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "commit": commit,
        # the code measured is HEAD only when nothing but results differs from it
        "dirty": _dirty(),
        "host": platform.node(),
        **payload,
    }
    line = json.dumps(rec, sort_keys=True)
    print(line)
    out = ROOT / "bench" / "results" / f"{bench}.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("a") as f:
        f.write(line + "\n")
    return rec


def _dirty() -> bool | None:
    """Whether files other than bench/results differ from HEAD (None outside a git checkout)."""
    try:
        out = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":!bench/results"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return bool(out.strip())
