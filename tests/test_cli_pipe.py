"""A closed reader on stdout (``rlx-edge inspect M | head -1``): quiet exit 141, no traceback."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from modelfiles import MLPERF

RLX_EDGE = Path(sys.executable).with_name("rlx-edge")  # the installed console script
MODEL = MLPERF / "vww_96_int8.tflite"


def shell(pipeline: str, **env: str) -> subprocess.CompletedProcess:
    assert RLX_EDGE.is_file(), f"{RLX_EDGE}: console script missing (pip install -e .)"
    return subprocess.run(
        ["bash", "-o", "pipefail", "-c", pipeline],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONWARNINGS": "ignore", **env},
        timeout=120,
    )


def test_inspect_into_head_prints_the_first_line_quietly():
    r = shell(f"{shlex.quote(str(RLX_EDGE))} inspect {shlex.quote(str(MODEL))} | head -1")
    assert r.stdout.startswith("vww_96_int8: ") and r.stdout.count("\n") == 1
    assert "Traceback" not in r.stderr and "Exception ignored" not in r.stderr
    assert r.returncode in (0, 141)  # 0 when head read everything before it quit


# Buffered, the closed pipe shows when main() flushes; unbuffered, at the first print inside the command.
@pytest.mark.parametrize("unbuffered", ["", "1"])
def test_reader_gone_before_any_output_exits_141_quietly(unbuffered):
    # `true` exits at once, long before Python has started: every write meets a closed pipe
    r = shell(f"{shlex.quote(str(RLX_EDGE))} inspect {shlex.quote(str(MODEL))} | true", PYTHONUNBUFFERED=unbuffered)
    assert r.stderr == ""
    assert r.returncode == 141
