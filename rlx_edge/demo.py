"""``rlx-edge demo``: the main job on the bundled default model.

Each capability joins this path once it works; today: build with the Python
API, lower HIR -> MIR, save and reload the .rlx file, inspect, and run the
reference, proving the reloaded file computes bit-identical outputs.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np


def _step(i: int, n: int, what: str) -> None:
    print(f"[{i}/{n}] {what}", file=sys.stderr, flush=True)


def run_demo(out_dir: Path, as_json: bool = False) -> int:
    from rlx_edge.ir import inspect
    from rlx_edge.ir.passes.lower_hir import lower_hir
    from rlx_edge.ir.serialize import load, save
    from rlx_edge.ir.verify import verify
    from rlx_edge.models import build_digits_cnn
    from rlx_edge.targets.reference import run

    t0 = time.perf_counter()
    n = 4
    report: dict = {}
    out_dir.mkdir(parents=True, exist_ok=True)

    _step(1, n, "build the default model (digits_cnn) with the Python API")
    hir = build_digits_cnn()
    verify(hir)
    hir_path = out_dir / "digits_cnn.hir.rlx"
    save(hir, hir_path)
    report["hir"] = inspect.one_line(hir)

    _step(2, n, "lower HIR -> MIR and save")
    mir = lower_hir(hir)
    verify(mir)
    mir_path = out_dir / "digits_cnn.rlx"
    save(mir, mir_path)
    report["mir"] = inspect.one_line(mir)
    report["files"] = {str(hir_path): hir_path.stat().st_size, str(mir_path): mir_path.stat().st_size}

    _step(3, n, "inspect")
    reloaded = load(mir_path)
    if not as_json:
        print(inspect.dump(reloaded))

    _step(4, n, "run the float reference; reloaded file vs in-memory graph")
    rng = np.random.default_rng(0)
    xs = rng.random((8, 1, 8, 8, 1), dtype=np.float32)
    ref = [run(hir, x)["probs"] for x in xs]
    got = [run(reloaded, x)["probs"] for x in xs]
    identical = all(np.array_equal(a, b) for a, b in zip(ref, got))
    report["inputs"] = len(xs)
    report["bit_identical_after_reload"] = identical
    report["seconds"] = round(time.perf_counter() - t0, 3)
    if as_json:
        print(json.dumps(report, sort_keys=True))
    else:
        print(f"HIR : {report['hir']}")
        print(f"MIR : {report['mir']}")
        for f, size in report["files"].items():
            print(f"file: {f} ({size} bytes)")
        print(f"run : {len(xs)} inputs, reloaded .rlx bit-identical to the built graph: {identical}")
    return 0 if identical else 1
