"""The CLI on hundreds of mutated ``.tflite`` files: exit 0, 1 or 2, never a traceback or a signal (issue #14).

Mutants of four small int8 models (``_mutants``: byte-level and object-API
edits) that ``load_model`` accepts go through ``rlx-edge compare M --against
tflm --inputs 1`` and ``rlx-edge compile M --target cortex-m4 -o DIR``. Two
worker processes call ``rlx_edge.cli.main`` in-process on their share (a
process per call would spend ~1 s a call starting Python); that still proves
"no signal", since TFLite Micro runs in a child process of its own, and a
worker that dies fails the test. A few true ``rlx-edge`` subprocesses check
the crash, hybrid and TFLite-Micro-refusal messages end to end.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import _mutants
import pytest

from modelfiles import MLPERF, TFLM
from rlx_edge.frontends import load_model

# (model, accepted mutants wanted, seed) per worker; ad01 (276 kB) and kws cost the most per mutant
WORKERS = [
    [(MLPERF / "ad01_int8.tflite", 30, 1), (TFLM / "hello_world_int8.tflite", 125, 2)],
    [(MLPERF / "kws_ref_model.tflite", 50, 3), (TFLM / "simple_add_model.tflite", 125, 4)],
]
TOTAL = sum(quota for jobs in WORKERS for _, quota, _ in jobs)


def _start_worker(jobs: list[tuple[Path, int, int]], where: Path) -> tuple[subprocess.Popen, Path]:
    where.mkdir()
    results = where / "results.jsonl"
    spec = json.dumps([{"model": str(m), "quota": q, "seed": s} for m, q, s in jobs])
    log = (where / "worker.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, _mutants.__file__, str(results), str(where), spec], stdout=log, stderr=subprocess.STDOUT
    )
    return proc, results


@pytest.fixture(scope="module")
def mutants_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the workers keep their mutants: worker<i>/<model stem>/*.tflite."""
    return tmp_path_factory.mktemp("mutants")


@pytest.fixture(scope="module")
def campaign(mutants_root: Path) -> tuple[list[dict], list[dict]]:
    """(mutant counts per model, one record per CLI call) from both workers."""
    root = mutants_root
    started = [_start_worker(jobs, root / f"worker{i}") for i, jobs in enumerate(WORKERS)]
    jobs, calls = [], []
    for i, (proc, results) in enumerate(started):
        code = proc.wait(timeout=600)
        log = (root / f"worker{i}" / "worker.log").read_text()[-2000:]
        assert code == 0, f"worker {i} ended with {code} (negative: a signal): {log}"
        for line in results.read_text().splitlines():
            rec = json.loads(line)
            (jobs if "job" in rec else calls).append(rec.get("job", rec))
    return jobs, calls


def test_enough_mutants_of_each_model_and_kind(campaign) -> None:
    jobs, calls = campaign
    assert {j["model"]: j["structural"] + j["byte"] for j in jobs} == {m.name: q for w in WORKERS for m, q, _ in w}
    assert sum(j["structural"] for j in jobs) >= 60 and sum(j["byte"] for j in jobs) >= 60
    assert Counter(c["command"] for c in calls) == {"compare": TOTAL, "compile": TOTAL}


def test_every_call_ends_in_0_1_or_2_without_a_traceback(campaign) -> None:
    _, calls = campaign
    bad = [c for c in calls if c["code"] not in (0, 1, 2) or c["traceback"]]
    assert not bad, bad[:5]
    # a user error is one line on stderr
    long = [c for c in calls if c["code"] == 2 and c["stderr_lines"] != 1]
    assert not long, long[:5]
    outcomes = Counter((c["command"], c["code"]) for c in calls)
    # Most mutants only change numbers and run through; the rest must not all vanish into one bucket.
    assert outcomes["compare", 0] >= TOTAL // 2 and outcomes["compile", 0] >= TOTAL // 2, outcomes


def test_tflite_micro_refusals_name_the_file(campaign) -> None:
    # Mutants our loader accepts but TFLite Micro refuses (its Python loader raising,
    # a kernel's Prepare failing): each one clear line naming the mutant.
    _, calls = campaign
    refused = [c for c in calls if c["command"] == "compare" and c["code"] == 2 and "TFLite Micro" in c["stderr"][-1]]
    assert len(refused) >= 10, Counter(c["stderr"][-1][:60] for c in calls if c["code"] == 2)
    assert all(f"error: {c['model']}: TFLite Micro " in c["stderr"][-1] for c in refused)


# true subprocesses ---------------------------------------------------------------------------------
def _cli(*args: str | Path) -> subprocess.Popen:
    argv = [sys.executable, "-m", "rlx_edge.cli", *(str(a) for a in args)]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_crash_hybrid_and_refusal_through_the_real_cli(tmp_path: Path) -> None:
    crash = tmp_path / "empty_subgraph.tflite"
    crash.write_bytes(_mutants.empty_subgraph((TFLM / "simple_add_model.tflite").read_bytes()))
    refused = tmp_path / "bias_scale_off.tflite"
    refused.write_bytes(_mutants.bias_scale_off((TFLM / "hello_world_int8.tflite").read_bytes()))
    for p in (crash, refused):
        load_model(p)  # our loader accepts both: only TFLite Micro fails on them
    hybrid = MLPERF / "kws_ref_model_float32.tflite"
    runs = {
        "crash": (crash, _cli("compare", crash, "--against", "tflm", "--inputs", "1")),
        "refused": (refused, _cli("compare", refused, "--against", "tflm", "--inputs", "1")),
        "hybrid": (hybrid, _cli("compare", hybrid, "--against", "tflm", "--inputs", "1")),
    }
    said = {}
    for what, (path, proc) in runs.items():
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 2 and out == "", (what, proc.returncode, out, err)
        assert len(err.splitlines()) == 1 and "Traceback" not in err, (what, err)
        assert path.name in err, (what, err)  # the CLI may shorten a long path in the middle
        said[what] = err
    assert "TFLite Micro crashed with SIGSEGV while loading the model" in said["crash"]
    assert "TFLite Micro failed while loading the model" in said["refused"] and "FULLY_CONNECTED" in said["refused"]
    assert "TFLite Micro cannot run hybrid models" in said["hybrid"] and "--against jax" in said["hybrid"]


def test_real_firmware_link_on_accepted_mutants(campaign, mutants_root: Path) -> None:
    """The workers stub out compile's firmware link (arm-none-eabi-gcc, seconds a model); here the real
    ``rlx-edge compile`` links the first compiled mutant of each model: exit 0 or 2, never a traceback."""
    _, calls = campaign
    picked: dict[str, Path] = {}
    for rec in calls:
        stem = rec["model"].rsplit("_", 1)[0]
        if rec["command"] == "compile" and rec["code"] == 0 and stem not in picked:
            found = sorted(mutants_root.glob(f"worker*/*/{rec['model']}"))
            assert len(found) == 1, rec["model"]
            picked[stem] = found[0]
    assert len(picked) == len([m for jobs in WORKERS for m in jobs]), sorted(picked)
    for stem, mutant in sorted(picked.items()):
        proc = _cli("compile", mutant, "--target", "cortex-m4", "-o", mutant.with_suffix(".project"), "--json")
        out, err = proc.communicate(timeout=300)
        assert proc.returncode in (0, 2) and "Traceback" not in err, (stem, proc.returncode, err[-2000:])
        if proc.returncode == 0:
            assert json.loads(out)["flash_bytes"] > 0, stem
