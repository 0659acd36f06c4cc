"""The hil/ suite under pytest-xdist, one worker per labgrid place of a 2-place QEMU farm.

Each worker acquires its own place through the coordinator, runs the tests of
that place's board, and releases the place when its session ends.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from rlx_edge.hil import _labgrid
from rlx_edge.hil.farm import QemuFarm

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def farm():
    with QemuFarm(["qemu-m4", "qemu-m3"], prefix="xd") as f:
        yield f


def _holders(farm: QemuFarm) -> dict[str, str | None]:
    s = _labgrid.Session(farm.coordinator)
    try:
        return {p.name: s.acquired_by(p.name) for p in farm.places}
    finally:
        s.close()


def _pytest_hil(*args: str) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_XDIST_WORKER", "PYTEST_ADDOPTS")}
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, env=env, timeout=300, check=False)


def _hil(farm: QemuFarm, junit: Path, *args: str) -> subprocess.CompletedProcess:
    places = ",".join(p.name for p in farm.places)
    return _pytest_hil(
        "hil/test_link.py",
        "-n",
        "2",
        "--places",
        places,
        "--lg-coordinator",
        farm.coordinator,
        f"--junitxml={junit}",
        *args,
    )


def test_each_worker_runs_its_boards_tests_on_its_own_place(tmp_path):
    # --farm: the run starts its own 2 places (while the workers start) and stops them at the end.
    junit = tmp_path / "hil.xml"
    proc = _pytest_hil("hil/test_link.py", "-n", "2", "--farm", "2", f"--junitxml={junit}", "-k", "identity or reset")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    cases = ET.parse(junit).getroot().iter("testcase")
    ran = {}
    for c in cases:
        assert c.find("failure") is None and c.find("error") is None and c.find("skipped") is None, c.get("name")
        props = {p.get("name"): p.get("value") for p in c.iter("property")}
        ran[c.get("name")] = (props["hil_worker"], props["hil_place"])
    m4, m3 = "rlx-qemu-m4-0", "rlx-qemu-m3-0"
    assert sorted(ran) == sorted(
        f"test_{t}[{b}]" for t in ("identity", "reset_command") for b in ("qemu-mps2-an386", "qemu-mps2-an385")
    )
    # Every test ran on the place of its board, and each worker held one place, not the other's.
    assert {n: place for n, (_, place) in ran.items()} == {n: m4 if "an386" in n else m3 for n in ran}
    workers = {place: {w for w, p in ran.values() if p == place} for place in (m4, m3)}
    assert len(workers[m4]) == len(workers[m3]) == 1 and workers[m4] != workers[m3], workers
    assert all(w.startswith("gw") for ws in workers.values() for w in ws)


def test_a_long_campaign_is_split_into_tests_of_consecutive_inputs():
    proc = _pytest_hil("hil/test_mlperf_campaigns.py", "--co", "--inputs", "20", "--board", "qemu-mps2-an386")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    ids = [line.partition("[")[2].rstrip("]") for line in proc.stdout.splitlines() if "::" in line]
    # VWW at 5 inputs a test, ResNet at 10: the places of a board share them; AD and KWS stay whole
    assert sorted(ids) == sorted(
        [f"vww_96_int8-{k}of4-qemu-mps2-an386" for k in range(1, 5)]
        + [f"pretrainedResnet_quant-{k}of2-qemu-mps2-an386" for k in range(1, 3)]
        + ["ad01_int8-qemu-mps2-an386", "kws_ref_model-qemu-mps2-an386"]
    ), ids
    proc = _pytest_hil("hil/test_mlperf_campaigns.py", "--co", "--inputs", "3")
    assert proc.returncode == 4 and "--inputs 3: give at least 4" in proc.stderr, proc.stderr[-2000:]


def test_a_worker_whose_place_is_taken_fails_and_leaves_it_alone(farm, tmp_path):
    m4 = farm.places[0].name
    other = _labgrid.Session(farm.coordinator)
    try:
        other.acquire(m4)
        proc = _hil(farm, tmp_path / "hil.xml", "-k", "identity and an386")
        assert proc.returncode == 1, proc.stdout[-3000:]
        assert f"place {m4} is acquired by" in proc.stdout
        assert other.acquired_by(m4) is not None
    finally:
        other.release(m4)
        other.close()
    assert _holders(farm) == {p.name: None for p in farm.places}


def test_places_and_workers_must_match(farm):
    proc = _hil(farm, Path(os.devnull), "-n", "3")
    assert proc.returncode == 4 and "2 places and 3 xdist workers" in proc.stderr, proc.stderr[-2000:]


CRASHING_TESTS = """
import importlib.util
import os
from pathlib import Path


def test_dies_once(hil_board, hil_place):
    marker = Path(os.environ["RLX_TEST_CRASH_MARKER"])
    if not marker.exists():
        marker.write_text("died holding its place")
        os._exit(3)  # the worker dies with its place acquired


def test_after_the_crash(hil_board, hil_place):
    assert hil_place is not None
"""


def test_a_worker_that_dies_gives_its_place_to_the_one_that_replaces_it(farm, tmp_path):
    # hil/'s conftest with two tests of its own: the first kills its worker once, the second then runs
    # on a new worker, which must be able to acquire the same place.
    shutil.copy(ROOT / "hil" / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_crash.py").write_text(CRASHING_TESTS)
    m4 = farm.places[0].name
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path), str(tmp_path)]
    argv += ["-n", "1", "--places", m4, "--lg-coordinator", farm.coordinator, "-k", "dies or after"]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_XDIST_WORKER", "PYTEST_ADDOPTS")}
    env["RLX_TEST_CRASH_MARKER"] = str(tmp_path / "crashed")
    proc = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300, check=False)
    out = proc.stdout + proc.stderr
    assert (tmp_path / "crashed").exists(), out[-3000:]
    assert "1 failed, 1 passed" in out and "test_dies_once" in out and "crashed" in out, out[-3000:]
    assert _holders(farm)[m4] is None


def test_places_from_a_labgrid_environment(farm, tmp_path):
    # --lg-env: the places (RemotePlace resources) and the coordinator come from a labgrid environment file
    m4 = farm.places[0].name
    env = tmp_path / "lab.yaml"
    env.write_text(
        f"targets:\n  main:\n    resources:\n      RemotePlace:\n        name: {m4}\n"
        f"options:\n  coordinator_address: {farm.coordinator}\n"
    )
    junit = tmp_path / "hil.xml"
    proc = _pytest_hil("hil/test_link.py", "-n", "1", "--lg-env", str(env), f"--junitxml={junit}", "-k", "reset")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    places = {p.get("value") for p in ET.parse(junit).getroot().iter("property") if p.get("name") == "hil_place"}
    assert places == {m4}
    assert _holders(farm)[m4] is None


class _Config:
    """What xdist's LoadScheduling reads of a pytest config: 2 workers, no chunk limit; reports kept."""

    def __init__(self):
        self.reports: list = []
        self.hook = type("Hook", (), {"pytest_collectreport": lambda _, report: self.reports.append(report)})()

    def getvalue(self, name):
        return {"tx": ["2*popen"]}[name]

    def getoption(self, name, default=None):
        return None


class _Worker:
    """A worker as the scheduler sees it: its place, and the test indices sent to it."""

    def __init__(self, name: str, place: str):
        self.gateway = type("Gateway", (), {"id": name})()
        self.workerinput = {"hil_farm": {"mine": place}}
        self.shutting_down = False
        self.sent: list[int] = []

    def send_runtest_some(self, indices):
        self.sent.extend(indices)

    def shutdown(self):
        self.shutting_down = True


def test_a_worker_starts_on_its_own_collection_and_only_on_its_boards_tests():
    # hil/conftest.py's scheduler, driven as xdist's controller drives it, without processes.
    spec = importlib.util.spec_from_file_location("hil_conftest_under_test", ROOT / "hil" / "conftest.py")
    conftest = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = conftest  # its dataclasses look their module up
    try:
        spec.loader.exec_module(conftest)
    finally:
        del sys.modules[spec.name]
    farm = conftest._Farm("", {"p-m4": "qemu-mps2-an386", "p-m3": "qemu-mps2-an385"}, ("p-m4", "p-m3"))
    config = _Config()
    sched = conftest._place_scheduler(config, None, farm)
    m4, m3 = _Worker("gw0", "p-m4"), _Worker("gw1", "p-m3")
    sched.add_node(m4)
    sched.add_node(m3)
    ids = [f"hil/t.py::test_{k}[qemu-mps2-{b}]" for k in range(3) for b in ("an386", "an385")]
    sched.add_node_collection(m4, ids)
    assert sched.collection_is_completed  # the M4 worker need not wait for the M3 worker's collection
    sched.schedule()
    assert m4.sent == [0, 2] and m3.sent == []  # its board's tests only, one to run and one next
    sched.add_node_collection(m3, ids)
    sched.schedule()
    assert m3.sent == [1, 3]
    # A worker that collected something else gets nothing, and is told to stop.
    odd = _Worker("gw2", "p-m3")
    sched.add_node(odd)
    sched.add_node_collection(odd, ids[:-1])
    sched.schedule()
    assert odd.sent == [] and odd.shutting_down
    assert [r.outcome for r in config.reports] == ["failed"] and "gw2" in str(config.reports[0].longrepr)
