"""The checkout is self-contained: a fresh clone with nothing beside it passes a representative subset.

A user's `git clone` has no folder beside it, so nothing tracked may reach
outside the checkout, and every model file a test reads must be inside it
(models/, with its README table of sources, licences and sha256 sums).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from modelfiles import MODELS

ROOT = Path(__file__).resolve().parents[1]
OUTSIDE = ".." + "/shared"  # spelled in two parts so this file does not match its own grep

# One test per area the issue names: import, integer reference vs TFLite Micro,
# Cortex-M host build, arena planning. Each is small but touches real model files.
SUBSET = [
    "tests/frontends/test_onnx.py",
    "tests/targets/reference/test_tflm_bitexact.py::test_model_bitexact_with_tflm[ad01_int8]",
    "tests/targets/reference/test_tflm_bitexact.py::test_model_bitexact_with_tflm[kws_ref_model]",
    "tests/ir/plan/test_arena_tflm.py::test_arena_execution_is_bit_exact_with_tflm[ad01_int8]",
    "tests/targets/cortexm/test_models.py::test_mlperf_bit_exact[ad]",
]


def _tracked() -> list[str]:
    r = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True)
    return r.stdout.split()


def test_no_tracked_file_reaches_outside_the_checkout():
    offenders = []
    for name in _tracked():
        if name.startswith("docs/") or not (ROOT / name).is_file():
            continue
        data = (ROOT / name).read_bytes()
        if OUTSIDE.encode() in data:
            offenders.append(name)
    assert offenders == []


def test_models_readme_lists_every_file_with_its_sha256():
    table = (MODELS / "README.md").read_text()
    rows = dict(re.findall(r"^\| `([^`]+)` \|.*\| `([0-9a-f]{64})` \|$", table, re.M))
    files = {
        p.relative_to(MODELS).as_posix()
        for p in MODELS.rglob("*")
        if p.is_file() and p.name != "README.md" and "LICENSE" not in p.name
    }
    assert set(rows) == files
    for name, digest in rows.items():
        assert hashlib.sha256((MODELS / name).read_bytes()).hexdigest() == digest, name
    for licence in ("mlperf-tiny/LICENSE.md", "onnx/mnist_MIT_LICENSE.txt", "tflm/LICENSE"):
        assert (MODELS / licence).stat().st_size > 500, licence


def test_fresh_clone_passes_a_representative_subset(tmp_path):
    alone = tmp_path / "alone"  # the clone's parent holds nothing else
    alone.mkdir()
    clone = alone / "rlx-edge"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True, timeout=120)
    assert sorted(os.listdir(alone)) == ["rlx-edge"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "RLX_EDGE_MODELS"))}
    env["PYTHONPATH"] = str(clone)  # the clone's package, not the editable install of this checkout
    where = subprocess.run(
        [sys.executable, "-c", "import rlx_edge; print(rlx_edge.__file__)"],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert Path(where).is_relative_to(clone), where
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *SUBSET],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    tail = "\n".join(r.stdout.splitlines()[-15:])
    assert r.returncode == 0, tail + r.stderr[-2000:]
    passed = int(re.search(r"(\d+) passed", tail).group(1))
    assert passed >= 8, tail
    assert "failed" not in tail and "error" not in tail, tail
    shutil.rmtree(clone, ignore_errors=True)
