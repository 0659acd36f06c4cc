"""SIGKILL at any moment never leaves a partial output at its final name (issue #14).

``convert`` and ``compile --firmware`` are killed at seeded random moments
spread over their measured duration. After each kill the output either does
not exist or is complete: byte for byte what an uninterrupted run writes.
Temporary leftovers (``DIR.tmp-*``, ``.NAME.*.tmp``) may remain: they never
carry the final name. Half the runs start with a complete earlier output in
place, so replacing one is checked too.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from modelfiles import TFLM

SEED = 14
PROBE = ".rlx-probe-"  # the output path check tries creating a file; killed then, it stays
ENV = {**os.environ, "PYTHONWARNINGS": "ignore"}
# gcc names its temporary objects at random and the map lists them, with the
# directory the image was linked in: the only bytes two good runs differ in.
_MAP_NOISE = [
    (re.compile(rb"/cc[A-Za-z0-9]{6}\.o\b"), b"/ccXXXXXX.o"),
    (re.compile(rb"\.tmp-[A-Za-z0-9_]+"), b".tmp-X"),
]


def _argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "rlx_edge.cli", *args]


def _state(folder: Path) -> frozenset:
    """What is in ``folder``, so that a change shows (the output path check's probe file does not count)."""
    state = set()
    for p in folder.iterdir():
        try:
            st = p.stat()
        except FileNotFoundError:  # renamed or removed meanwhile
            continue
        if not p.name.startswith(PROBE):
            state.add((p.name, st.st_ino, st.st_size, st.st_mtime_ns))
    return frozenset(state)


def _reference_run(argv: list[str], watch: Path) -> tuple[float, float]:
    """Runs ``argv`` to the end; its duration, and when its first output (a
    temporary) appeared in ``watch``: where the writing starts."""
    before = _state(watch)
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=ENV)
    first = None
    while proc.poll() is None:
        if first is None and _state(watch) != before:
            first = time.monotonic() - t0
        time.sleep(0.001)
    duration = time.monotonic() - t0
    assert proc.returncode == 0, proc.stderr.read().decode()
    return duration, duration if first is None else first


def _contents(root: Path) -> dict[str, bytes]:
    files = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            data = p.read_bytes()
            if p.suffix == ".map":
                for pattern, fixed in _MAP_NOISE:
                    data = pattern.sub(fixed, data)
            files[str(p.relative_to(root))] = data
    return files


def _kill_at_random_moments(
    argv: list[str],
    runs: int,
    timing: tuple[float, float],
    rng: random.Random,
    watch: Path,
    prepare: Callable[[int], None],
    check: Callable[[int], None],
) -> list[str]:
    """Starts ``argv`` ``runs`` times and kills it (its whole process group: gcc too) at a random moment.

    A third of the kills come at a random time over the whole run; the
    others a random time after the command started writing (``watch``
    changed), within the time the reference took from then to the end. A
    convert writes for a few milliseconds; with start-up jitter of tens,
    only the second kind reliably lands while it writes.
    """
    duration, writing = timing
    moments = []
    for k in range(runs):
        prepare(k)
        before = _state(watch)
        proc = subprocess.Popen(
            argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV, start_new_session=True
        )
        t0 = time.monotonic()
        if k % 3 == 0:
            delay = rng.uniform(0.0, 1.1 * duration)
            moment = f"{delay:.2f} s"
        else:
            while proc.poll() is None and _state(watch) == before and time.monotonic() - t0 < 2 * duration + 5:
                time.sleep(0.0005)
            delay = time.monotonic() - t0 + rng.random() ** 2 * (duration - writing)
            moment = f"{delay:.3f} s (writing)"
        try:
            proc.wait(timeout=max(0.0, delay - (time.monotonic() - t0)))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        check(k)
        moments.append(moment)
    return moments


def test_killed_convert_leaves_no_partial_file(tmp_path):
    model = TFLM / "mobilenet_v2_quantized_1x3x224x224.tflite"  # 4 MB: writing takes a while
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "m.rlx"
    timing = _reference_run(_argv("convert", str(model), "-o", str(out)), out_dir)
    want = out.read_bytes()
    ref = tmp_path / "m.rlx"
    shutil.copyfile(out, ref)
    outcomes = {"absent": 0, "complete": 0}

    def prepare(k: int) -> None:
        if k % 2:
            shutil.copyfile(ref, out)  # an earlier, complete output to replace
        else:
            out.unlink(missing_ok=True)

    def check(k: int) -> None:
        for p in out_dir.iterdir():
            temporary = re.fullmatch(r"\.m\.rlx\..+\.tmp", p.name) or p.name.startswith(PROBE)
            assert p == out or temporary, f"run {k}: {p.name} left over"
        if out.exists():
            assert out.read_bytes() == want, f"run {k}: {out} is not the complete output"
            outcomes["complete"] += 1
        else:
            outcomes["absent"] += 1

    moments = _kill_at_random_moments(
        _argv("convert", str(model), "-o", str(out)), 25, timing, random.Random(SEED), out_dir, prepare, check
    )
    print(
        f"convert: {timing[0]:.2f} s uninterrupted, writing from {timing[1]:.2f} s; "
        f"kills at {', '.join(moments)}; {outcomes}"
    )


def test_killed_compile_leaves_no_partial_project(tmp_path):
    model = TFLM / "hello_world_int8.tflite"
    work = tmp_path / "work"
    out = work / "proj"
    # The reference is built at the same path: the ELF's debug info names it.
    work.mkdir()
    timing = _reference_run(_argv("compile", str(model), "-o", str(out), "--firmware"), work)
    want = _contents(out)
    assert "firmware/firmware.elf" in want and "weights.h" in want
    ref = tmp_path / "ref"
    shutil.copytree(out, ref)
    outcomes = {"absent": 0, "complete": 0}

    def prepare(k: int) -> None:
        shutil.rmtree(out, ignore_errors=True)
        if k % 2:
            shutil.copytree(ref, out)  # an earlier, complete project to replace

    def check(k: int) -> None:
        for p in work.iterdir():
            assert p == out or p.name.startswith(("proj.tmp-", PROBE)), f"run {k}: {p.name} left over"
        if out.exists():
            assert _contents(out) == want, f"run {k}: {out} is not the complete project"
            outcomes["complete"] += 1
        else:
            outcomes["absent"] += 1

    moments = _kill_at_random_moments(
        _argv("compile", str(model), "-o", str(out), "--firmware"),
        15,
        timing,
        random.Random(SEED + 1),
        work,
        prepare,
        check,
    )
    print(
        f"compile: {timing[0]:.2f} s uninterrupted, writing from {timing[1]:.2f} s; "
        f"kills at {', '.join(moments)}; {outcomes}"
    )
