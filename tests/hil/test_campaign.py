"""run_campaign: data files, labels and accuracy, mismatch reports, progress, wrong firmware, bad arguments."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from modelfiles import MLPERF
from rlx_edge.boards import get_board
from rlx_edge.errors import RlxError
from rlx_edge.frontends.tflite import load_tflite
from rlx_edge.hil.campaign import CampaignReport, load_data, run_campaign
from rlx_edge.hil.transport import HilError
from rlx_edge.targets.cortexm import QemuBoard, build_firmware
from rlx_edge.targets.reference import run

MODEL = MLPERF / "ad01_int8.tflite"
FIXTURES = Path(__file__).resolve().parents[1] / "firmware" / "fixtures"
BOARD = "qemu-mps2-an386"


@pytest.fixture(scope="module")
def graph():
    return load_tflite(MODEL)


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.getbasetemp() / "fw"


def test_campaign_with_data_labels_and_a_mismatch(graph, cache, tmp_path):
    t = graph.types[graph.inputs[0]]
    scale, zp = float(t.quant.scale[0]), int(t.quant.zero_point[0])
    rng = np.random.default_rng(4)
    xq = rng.integers(-128, 128, size=(6, 640), dtype=np.int8)
    # Float data, as a user has it: the campaign quantizes it with the input's parameters.
    xf = ((xq.astype(np.float32) - zp) * scale).astype(np.float32)
    refs = [run(graph, {graph.inputs[0]: x.reshape(1, 640)})[graph.outputs[0]] for x in xq]
    labels = np.array([int(np.argmax(r)) for r in refs])
    labels[[1, 4]] = (labels[[1, 4]] + 1) % 640  # two wrong labels: accuracy 4/6
    np.savez(tmp_path / "d.npz", x=xf, y=labels)

    def reference(x):
        y = run(graph, {graph.inputs[0]: x})[graph.outputs[0]].copy()
        if np.array_equal(x.reshape(-1), xq[2]):
            y.reshape(-1)[5] ^= 1  # a reference that disagrees with the board on input 2, element 5
        return y

    stream = io.StringIO()
    report = run_campaign(
        graph, BOARD, data=tmp_path / "d.npz", workdir=cache, reference=reference, stream=stream, progress=True
    )
    rec = json.loads(json.dumps(report.to_json()))
    assert rec["count"] == 6 and rec["requested"] == 6 and rec["errors"] == 0
    assert rec["mismatches"] == 1
    got = int(refs[2].reshape(-1)[5])
    assert rec["first_mismatch"] == {"input_index": 2, "element_index": 5, "got": got, "expected": got ^ 1}
    assert rec["accuracy"] == pytest.approx(4 / 6)
    assert not rec["ok"]
    lat = rec["latency"]
    assert lat["tick_source"] == "systick" and lat["clock_hz"] == 25_000_000
    assert lat["seconds"]["max"] == pytest.approx(lat["ticks"]["max"] / 25e6)
    assert rec["board_info"]["model_hash"] and rec["link"]["commands"] >= 6 * 3
    assert "6/6" in stream.getvalue() and "mismatches 1" in stream.getvalue()


def test_generated_inputs_and_count(graph, cache):
    report = run_campaign(graph, BOARD, count=4, workdir=cache, progress=False)
    assert report.ok and report.count == 4 and len(report.ticks) == 4


def test_wrong_firmware_on_the_port_is_detected(graph, cache, tmp_path):
    elf = build_firmware(FIXTURES / "standin", BOARD, tmp_path / "standin")
    with QemuBoard(elf, BOARD) as qemu, pytest.raises(HilError, match=r"not ad01_int8 .*another firmware is running"):
        run_campaign(graph, BOARD, port=qemu.url, count=1, workdir=cache, progress=False)


def test_argument_errors(graph, tmp_path):
    with pytest.raises(RlxError, match="needs a serial port"):
        nucleo = get_board("nucleo-l4r5zi")
        run_campaign(graph, replace(nucleo, console=replace(nucleo.console, port=None)), count=1)
    with pytest.raises(RlxError, match=r"missing\.npz: no such file"):
        run_campaign(graph, BOARD, data=tmp_path / "missing.npz")
    np.save(tmp_path / "bad.npy", np.zeros((2, 10), np.int8))
    with pytest.raises(RlxError, match="sample 0 has 10 elements"):
        run_campaign(graph, BOARD, data=tmp_path / "bad.npy")
    with pytest.raises(RlxError, match="2 labels for 3 inputs"):
        run_campaign(graph, BOARD, data=np.zeros((3, 640), np.int8), labels=[1, 2])


def test_load_data_forms(tmp_path):
    np.savez(tmp_path / "a.npz", inputs=np.ones((3, 4)), labels=np.arange(3))
    xs, ys = load_data(tmp_path / "a.npz")
    assert len(xs) == 3 and list(ys) == [0, 1, 2]
    np.savez(tmp_path / "b.npz", foo=np.ones((2, 4)), bar=np.ones(2))
    with pytest.raises(RlxError, match="no array named x"):
        load_data(tmp_path / "b.npz")


def test_latency_takes_any_u64_tick_count():
    # The wire's ticks are a u64: a board whose counter went wrong (end < start, near 2^64) must
    # show in the report, not end the campaign with an OverflowError.
    report = CampaignReport("m", "b", "", ticks=[2**64 - 5, 100, 200], clock_hz=25_000_000)
    lat = report.latency()["ticks"]
    assert (lat["p50"], lat["max"]) == (200, 2**64 - 5)
