"""Quantization reports: SQNR per layer, output error, agreement, JSON."""

from __future__ import annotations

import json

import numpy as np

from rlx_edge.models import build_digits_cnn
from rlx_edge.quant.calibrate import calibrate
from rlx_edge.quant.ptq import quantize
from rlx_edge.quant.report import quantization_report, report_text, save_report

X = np.random.default_rng(0).random((24, 8, 8, 1), dtype=np.float32)


def test_report_int8_vs_int4(tmp_path):
    g = build_digits_cnn()
    rec = calibrate(g, X)
    r8 = quantization_report(g, quantize(g, rec), X, labels=np.arange(24) % 10)
    r4 = quantization_report(g, quantize(g, rec, scheme="int4w"), X)
    assert r8["samples"] == 24 and {row["value"] for row in r8["layers"]} >= {"conv1", "conv2", "fc", "probs"}
    sq8 = {row["value"]: row["sqnr_db"] for row in r8["layers"]}
    sq4 = {row["value"]: row["sqnr_db"] for row in r4["layers"]}
    assert all(v > 25 for v in sq8.values())
    assert sq4["conv2"] < sq8["conv2"] - 6  # four fewer weight bits cost SQNR
    out = r8["outputs"]["probs"]
    assert 0 < out["max_abs_error"] < 0.2 and out["top1_agreement"] >= 0.9
    assert set(r8["accuracy"]) == {"float", "quantized"}
    p = save_report(r8, tmp_path / "r.json")
    assert json.loads(p.read_text())["graph"] == "digits_cnn"
    assert "conv1" in report_text(r8)


def test_report_of_an_identical_graph_is_exact():
    g = build_digits_cnn()
    q = quantize(g, calibrate(g, X[:4]), keep_float=["conv1", "pool1", "conv2", "pool2", "flatten", "fc", "probs"])
    r = quantization_report(g, q, X[:4])
    assert r["outputs"]["probs"]["top1_agreement"] == 1.0
    assert len(r["float_nodes"]) == 7
