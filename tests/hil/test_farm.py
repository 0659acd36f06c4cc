"""HIL across a labgrid farm: a coordinator and an exporter on loopback serving 4 QEMU places.

`rlx-edge hil --farm` runs 4 bundled int8 models x 20 inputs across the places,
every output bit-exact; a place whose QEMU dies mid-campaign hands its
remaining inputs to the others (none lost, none wrong); places are released
also when the campaign fails; without labgrid, --farm says how to install it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from modelfiles import MLPERF, TFLM
from rlx_edge.frontends import load_model
from rlx_edge.hil import _labgrid
from rlx_edge.hil.farm import QemuFarm, run_farm_campaign

# Small models: a QEMU inference of each takes well under a second.
MODELS = [TFLM / "hello_world_int8.tflite", TFLM / "micro_speech_quantized.tflite",
          MLPERF / "kws_ref_model.tflite", MLPERF / "ad01_int8.tflite"]  # fmt: skip
BOARDS = ["qemu-m4", "qemu-m4", "qemu-m3", "qemu-m3"]
# Seconds per command attempt: four QEMUs share the CI machine's cores with the compiler,
# and a place that misses its deadline is (rightly) dropped.
TIMEOUT = "10"


@pytest.fixture(scope="module")
def farm():
    with QemuFarm(BOARDS) as f:
        yield f


@pytest.fixture(scope="module")
def fw(tmp_path_factory):
    # The directory the other HIL tests build into: a firmware built there is not built again.
    return tmp_path_factory.getbasetemp() / "fw"


def _released(farm: QemuFarm) -> dict[str, str | None]:
    s = _labgrid.Session(farm.coordinator)
    try:
        return {p.name: s.acquired_by(p.name) for p in farm.places}
    finally:
        s.close()


def test_farm_cli_runs_4_models_x_20_inputs_bit_exact(farm, fw, tmp_path):
    junit = tmp_path / "farm.xml"
    env = {**os.environ, "LG_COORDINATOR": farm.coordinator, "RLX_EDGE_CACHE": str(fw)}
    argv = [sys.executable, "-m", "rlx_edge.cli", "hil", *map(str, MODELS), "--farm", "--count", "20"]
    argv += ["--timeout", TIMEOUT, "--json", "--junit", str(junit)]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rep = json.loads(proc.stdout)
    assert (rep["requested"], rep["count"], rep["mismatches"], rep["errors"], rep["lost"]) == (80, 80, 0, 0, 0)
    assert rep["ok"]
    assert [m["model"] for m in rep["models"]] == [load_model(m).name for m in MODELS]
    for m in rep["models"]:
        assert m["count"] == 20 and sum(m["by_place"].values()) == 20, m
    places = {p["place"]: p for p in rep["places"]}
    assert sorted(places) == sorted(p.name for p in farm.places)
    # The work was shared: every place ran inputs, and the per-place counts add up.
    assert all(p["inputs"] > 0 and p["dropped"] is None for p in places.values()), places
    assert sum(p["inputs"] for p in places.values()) == 80
    for p in places.values():
        lat = p["latency"]["ticks"]
        assert 0 < lat["p50"] <= lat["p90"] <= lat["max"]
    suite = ET.parse(junit).getroot()
    cases = suite.findall("testcase")
    assert len(cases) == 80 and suite.get("failures") == "0" and suite.get("errors") == "0"
    assert not suite.findall(".//failure") and not suite.findall(".//error")
    assert all(c.find("properties/property[@name='place']").get("value") in places for c in cases)
    assert all(v is None for v in _released(farm).values())


def test_a_place_that_dies_hands_its_work_to_the_others(farm, fw):
    victim = farm.places[0].name
    killed = []

    def on_result(place: str, model: str, k: int) -> None:
        if place == victim and not killed:
            killed.append(k)
            farm.kill(victim)

    report = run_farm_campaign(
        MODELS[:2], coordinator=farm.coordinator, count=20, workdir=fw, timeout=float(TIMEOUT), on_result=on_result
    )
    rep = report.to_json()
    assert killed
    assert (rep["count"], rep["mismatches"], rep["errors"], rep["lost"]) == (40, 0, 0, 0), rep["models"]
    places = {p["place"]: p for p in rep["places"]}
    assert places[victim]["dropped"] and places[victim]["failures"] == 1
    assert places[victim]["inputs"] < 40
    assert sum(p["inputs"] for p in places.values()) == 40
    assert all(v is None for v in _released(farm).values())


def test_places_are_released_when_the_campaign_fails(farm, fw):
    def on_result(place: str, model: str, k: int) -> None:
        # While every place is held: the campaign dies half-way (as on an interrupt).
        assert all(v is not None for v in _released(farm).values())
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_farm_campaign(MODELS[:1], coordinator=farm.coordinator, count=8, workdir=fw, on_result=on_result)
    assert all(v is None for v in _released(farm).values())


def test_without_labgrid_farm_says_how_to_install_it():
    code = (
        "import sys; sys.modules['labgrid'] = None\n"
        "from rlx_edge.cli import main\n"
        f"sys.exit(main(['hil', {str(MODELS[0])!r}, '--farm']))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2, proc.stderr
    hint = "rlx-edge: error: board farms need labgrid: pip install 'rlx-edge[farm]'"
    assert proc.stderr.strip().splitlines() == [hint]
