"""``rlx-edge quantize`` ends with a summary: output SQNR, the five worst layers by SQNR and PTQ's numerics counts."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from rlx_edge.cli import main

BUNDLED = Path(__file__).resolve().parents[1] / "rlx_edge" / "models" / "digits_cnn.rlx"


@pytest.fixture(scope="module")
def calib(tmp_path_factory) -> Path:
    from rlx_edge.models.digits import digits_data

    x, _ = digits_data("train")
    p = tmp_path_factory.mktemp("calib") / "calib.npz"
    np.savez(p, image=x[:64])
    return p


def _db(v: float | None) -> str:
    return "exact" if v is None else f"{v:.2f} dB"


def test_summary_shows_output_sqnr_and_the_five_worst_layers(tmp_path, calib, capsys):
    rep_path = tmp_path / "r.json"
    assert (
        main(["quantize", str(BUNDLED), "--data", str(calib), "-o", str(tmp_path / "q.rlx"), "--report", str(rep_path)])
        == 0
    )
    lines = capsys.readouterr().out.splitlines()
    report = json.loads(rep_path.read_text())
    assert len(report["layers"]) > 5  # so "five worst" is a choice
    ((out_name, out_stats),) = report["outputs"].items()
    assert lines[0] == f"output SQNR over 64 samples: {out_name} {_db(out_stats['sqnr_db'])}"
    assert lines[1] == "5 worst layers by SQNR:"
    assert len(lines) == 8
    assert lines[7].startswith("PTQ numerics: 0 silent clips, ") and report["numerics"]["silent_clips"] == 0
    # the five lowest SQNRs of the full report, worst first
    ranked = sorted(report["layers"], key=lambda r: math.inf if r["sqnr_db"] is None else r["sqnr_db"])[:5]
    assert [line.split() for line in lines[2:7]] == [
        [*_db(r["sqnr_db"]).split(), r["value"], f"({r['op']})"] for r in ranked
    ]
    assert all(r["sqnr_db"] is not None and 20 < r["sqnr_db"] < 60 for r in ranked)  # int8 range, not exact


def test_summary_as_json(tmp_path, calib, capsys):
    assert main(["quantize", str(BUNDLED), "--data", str(calib), "-o", str(tmp_path / "q.rlx"), "--json"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    obj = json.loads(out)
    assert obj["output"] == str(tmp_path / "q.rlx") and obj["scheme"] == "int8" and obj["report"] is None
    s = obj["summary"]
    assert s["samples"] == 64 and len(s["outputs"]) == 1 and len(s["worst_layers"]) == 5
    sqnrs = [r["sqnr_db"] for r in s["worst_layers"]]
    assert sqnrs == sorted(sqnrs)


def test_record_only_says_there_is_no_summary(tmp_path, calib, capsys):
    rec = tmp_path / "rec.json"
    assert main(["calibrate", str(BUNDLED), "--data", str(calib), "-o", str(rec)]) == 0
    capsys.readouterr()
    assert main(["quantize", str(BUNDLED), "--record", str(rec), "-o", str(tmp_path / "q.rlx")]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and out.startswith("no SQNR summary:") and "--data" in out
    assert main(["quantize", str(BUNDLED), "--record", str(rec), "-o", str(tmp_path / "q2.rlx"), "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["summary"] is None and "--data" in obj["reason"]
