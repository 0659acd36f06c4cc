"""Every model file of a folder (not this repository's) through `rlx-edge compare`, one verdict each.

    .venv/bin/python bench/model_corpus.py DIR [--against tflm,jax,cortexm-host] [--inputs 3]
        [--timeout 300] [--name NAME]

"The first thing users do is try their own model": this runs a corpus of
real models that are not in the repository (for example every ``.tflite`` of
a tflite-micro checkout: ``git -C tflite-micro ls-files '*.tflite'``) through
the CLI exactly as a user would, one process per model and side, and sorts
the outcomes:

- ``exact`` / ``within_tolerance``: the comparison passed (integers equal,
  floats within compare's documented tolerance);
- ``mismatch``: both sides ran and differ (exit 1): a bug to fix;
- ``refused``: rlx-edge said it cannot (exit 2, one line naming what);
- ``oracle_failed``: TFLite Micro itself could not run the model (it lacks
  the op, or refuses the model): nothing to compare with;
- ``crashed`` / ``timeout``: exit 3 or a signal, or over ``--timeout`` s.

Prints each model's verdict as it goes, then one JSON line with the counts per
side and every non-passing model's message, appended to
``bench/results/model_corpus.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, record

SUFFIXES = (".tflite", ".onnx")


def verdict(model: Path, against: str, inputs: int, timeout: float) -> tuple[str, str]:
    """(outcome, message) of ``rlx-edge compare MODEL --against AGAINST``."""
    cmd = [sys.executable, "-m", "rlx_edge.cli", "compare", str(model), "--against", against]
    cmd += ["--inputs", str(inputs), "--json"]
    try:
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return "timeout", f"over {timeout:g} s"
    last = (proc.stderr.strip().splitlines() or [""])[-1][:400]
    if proc.returncode == 0:
        rep = json.loads(proc.stdout)
        return ("within_tolerance" if rep.get("float_tensors") else "exact"), ""
    if proc.returncode == 1:
        try:
            first = json.loads(proc.stdout).get("first_mismatch")
        except json.JSONDecodeError:
            first = None
        return "mismatch", json.dumps(first) if first else last
    if proc.returncode == 2:
        return ("oracle_failed" if "TFLite Micro failed" in last else "refused"), last
    return "crashed", f"exit {proc.returncode}: {last}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--against", default="tflm", help="comma-separated compare sides (default tflm)")
    ap.add_argument("--inputs", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--name", default=None, help="the corpus' name in the record (default: the folder's)")
    args = ap.parse_args()
    models = sorted(p for p in args.folder.rglob("*") if p.suffix in SUFFIXES and p.is_file())
    if not models:
        print(f"{args.folder}: no {' or '.join(SUFFIXES)} files", file=sys.stderr)
        return 2
    sides = [s.strip() for s in args.against.split(",") if s.strip()]
    counts: dict[str, Counter] = {s: Counter() for s in sides}
    problems: dict[str, dict[str, str]] = {s: {} for s in sides}
    t0 = time.perf_counter()
    for i, model in enumerate(models, 1):
        name = model.relative_to(args.folder).as_posix()
        for side in sides:
            outcome, message = verdict(model, side, args.inputs, args.timeout)
            counts[side][outcome] += 1
            if message:
                problems[side][name] = f"{outcome}: {message}"
            print(f"[{i}/{len(models)}] {side:<13} {outcome:<16} {name}", file=sys.stderr, flush=True)
    record(
        "model_corpus",
        {
            "corpus": args.name or args.folder.name,
            "models": len(models),
            "inputs": args.inputs,
            "counts": {s: dict(sorted(c.items())) for s, c in counts.items()},
            "not_passing": problems,
            "wall_s": round(time.perf_counter() - t0, 1),
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
