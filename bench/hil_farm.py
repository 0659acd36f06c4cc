"""The hil/ suite serially and under pytest-xdist over a local labgrid farm of QEMU places, in one run.

    .venv/bin/python bench/hil_farm.py [--places 4] [--inputs N] [-k EXPR]

First ``pytest hil/`` as it runs by default (serially, one QEMU per test,
boards qemu-mps2-an386 and qemu-mps2-an385), then ``pytest hil/ -n N --farm N``
(N QEMU places, the two boards in turn: 2 x M4 + 2 x M3 for N = 4, one xdist
worker per place, the farm started and stopped by the run), then the same on
places that are up before the run starts (``--places``, as a lab's
coordinator and exporters are). Each run starts from an empty firmware cache (its own
basetemp), so both build the same firmware. ``--inputs N`` runs N inputs per
model in both (a nightly campaign's size; hil/ splits the long campaigns into
tests that the places of a board share). Records the wall time of each, their
ratio, pass counts, which place ran how many tests, and the CPU time of
each run (user + system of every process it started, QEMU included): CPU time
close to wall time x cores means the run was CPU-bound, and more workers
cannot make it faster on this host. Appends one JSON line to
bench/results/hil_farm.jsonl.

``--firmware-cache DIR`` runs both with the firmware already built in DIR
(``$RLX_EDGE_CACHE``, which the hil/ suite then reads): for a farm host
without the ARM toolchain, and to time the campaigns alone.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, record

from rlx_edge.hil.farm import QemuFarm

# hil/'s default boards (hil/conftest.py), the places of the farm runs in turn
BOARDS = ("qemu-mps2-an386", "qemu-mps2-an385")
PYTEST_ENV = ("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "PYTEST_PLUGINS", "PYTEST_ADDOPTS")


def _why(case: ET.Element) -> str:
    bad = case.find("failure")
    bad = case.find("error") if bad is None else bad
    return (bad.get("message") or "")[:300] if bad is not None else ""


def _run(argv: list[str], junit: Path, env: dict[str, str]) -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "hil/", f"--junitxml={junit}", *argv]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False, env=env)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    out = {"argv": " ".join(["pytest", "hil/", *argv]), "rc": proc.returncode, "wall_s": round(wall, 1)}
    out["cpu_s"] = round(cpu, 1)
    out["cpu_per_wall"] = round(cpu / wall, 2)
    if junit.exists():
        suite = ET.parse(junit).getroot().find("testsuite")
        suite = suite if suite is not None else ET.parse(junit).getroot()
        cases = suite.findall("testcase")
        bad = sum(1 for c in cases if c.find("failure") is not None or c.find("error") is not None)
        skipped = sum(1 for c in cases if c.find("skipped") is not None)
        out.update(tests=len(cases), passed=len(cases) - bad - skipped, failed=bad, skipped=skipped)
        places = Counter(p.get("value") for c in cases for p in c.iter("property") if p.get("name") == "hil_place")
        if places:
            out["tests_by_place"] = dict(sorted(places.items()))
        failed = [c for c in cases if c.find("failure") is not None or c.find("error") is not None]
        if failed:  # the tail below is often warnings: keep which tests failed and why
            out["failed_tests"] = {c.get("name"): _why(c) for c in failed}
        slowest = max(cases, key=lambda c: float(c.get("time", 0)), default=None)
        if slowest is not None:
            out["slowest_test"] = {"name": slowest.get("name"), "s": round(float(slowest.get("time", 0)), 1)}
    if proc.returncode != 0:
        out["tail"] = proc.stdout[-2000:] + proc.stderr[-1000:]
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--places", type=int, default=4, help="QEMU places and xdist workers of the farm run")
    ap.add_argument("-k", default=None, help="pytest -k expression (both runs): a quick check of the script")
    ap.add_argument("--firmware-cache", type=Path, default=None, help="firmware built beforehand (both runs read it)")
    ap.add_argument(
        "--inputs",
        type=int,
        default=None,
        help="inputs per model campaign (hil/'s --inputs; default: the suite's own, 5 for VWW and ResNet, "
        "20 for AD and KWS; 20 is the nightly size the records since ecea746 ran)",
    )
    args = ap.parse_args()
    extra = ["-k", args.k] if args.k else []
    if args.inputs is not None:
        extra += ["--inputs", str(args.inputs)]
    env = {k: v for k, v in os.environ.items() if k != "RLX_EDGE_CACHE"}
    if args.firmware_cache is not None:
        env["RLX_EDGE_CACHE"] = str(args.firmware_cache.resolve())
    load_before = os.getloadavg()
    n = str(args.places)
    with tempfile.TemporaryDirectory(prefix="hil-farm-bench-") as tmp:
        serial = _run(extra, Path(tmp) / "serial.xml", env)
        farm = _run(["-n", n, "--farm", n, *extra], Path(tmp) / "farm.xml", env)
        # As a lab runs it: the coordinator, exporter and places are up before the suite starts.
        with QemuFarm([BOARDS[i % len(BOARDS)] for i in range(args.places)]) as up:
            places = ",".join(p.name for p in up.places)
            argv = ["-n", n, "--places", places, "--lg-coordinator", up.coordinator, *extra]
            farm_up = _run(argv, Path(tmp) / "farm_up.xml", env)
    cores = os.cpu_count() or 1
    ratio = farm["wall_s"] / serial["wall_s"]
    ratio_up = farm_up["wall_s"] / serial["wall_s"]
    ok = all(r["rc"] == 0 and r.get("tests") == r.get("passed") == serial.get("tests") for r in (serial, farm, farm_up))
    record(
        "hil_farm",
        {
            "places": args.places,
            "k": args.k,
            "inputs": args.inputs,
            "cores": cores,
            "firmware": "prebuilt" if args.firmware_cache is not None else "built in each run",
            "loadavg_1m_before": round(load_before[0], 2),
            # Which pytest plugins the runs loaded: every worker loads them too, so they weigh on the farm.
            "pytest_env": {k: env[k] for k in PYTEST_ENV if k in env},
            "serial": serial,
            "farm": farm,
            "farm_up": farm_up,
            "ratio": round(ratio, 3),
            "ratio_places_up": round(ratio_up, 3),
            "target_ratio": 0.4,
            "meets_target": ratio <= 0.4,
            "meets_target_places_up": ratio_up <= 0.4,
            # With CPU-bound work, wall time cannot drop below CPU time / cores.
            "ratio_floor_from_cpu": round(farm["cpu_s"] / cores / serial["wall_s"], 3),
            "ok": ok,
        },
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
