"""Calibration: data forms, batching, progress, records on disk."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

from rlx_edge.errors import RlxError
from rlx_edge.models import build_digits_cnn
from rlx_edge.quant.calibrate import Progress, calibrate
from rlx_edge.quant.record import CalibrationError, CalibrationRecord, TensorRange

RNG = np.random.default_rng(0)
X = RNG.random((40, 8, 8, 1), dtype=np.float32)


def test_data_forms_agree_and_cover_every_float_value():
    g = build_digits_cnn()
    a = calibrate(g, X)
    b = calibrate(g, {"image": X}, batch_size=7)
    c = calibrate(g, (X[i : i + 5] for i in range(0, 40, 5)))
    d = calibrate(build_digits_cnn(batch="N"), X, batch_size=16)
    assert a.samples == b.samples == c.samples == d.samples == 40
    assert set(a.ranges) == {"image", "conv1", "pool1", "conv2", "pool2", "flatten", "fc", "probs"}
    for r in (b, c, d):
        for k, v in a.ranges.items():
            np.testing.assert_allclose(r.ranges[k].lo, v.lo, rtol=1e-6, atol=1e-7)
            np.testing.assert_allclose(r.ranges[k].hi, v.hi, rtol=1e-6, atol=1e-7)
    assert a["image"].scalar() == (float(X.min()), float(X.max()))
    np.testing.assert_allclose(a["image"].mean, [X.mean()], rtol=1e-6)
    assert a["conv1"].lo[0] == 0.0  # after the fused relu


def test_per_channel_and_max_samples():
    g = build_digits_cnn()
    r = calibrate(g, X, per_channel=True, max_samples=10, method="percentile", percentile=99.0)
    assert r.samples == 10 and r["conv1"].axis == 3 and r["conv1"].lo.shape == (8,)
    assert r.options == {"per_channel": True, "percentile": 99.0}


def test_bad_data():
    g = build_digits_cnn()
    with pytest.raises(RlxError, match="shape"):
        calibrate(g, np.zeros((4, 8, 8), np.float32))
    with pytest.raises(RlxError, match="lacks input"):
        calibrate(g, {"a": X, "b": X})
    with pytest.raises(RlxError, match="empty"):
        calibrate(g, iter([]))


def test_progress_bar_plain_text():
    s = io.StringIO()
    p = Progress(100, stream=s)
    for _ in range(20):
        p.update(5)
    p.close()
    lines = s.getvalue().splitlines()
    assert len(lines) == 11 and lines[-1].startswith("calibrate [" + "#" * 30 + "] 100/100")


def test_record_roundtrip_and_validation(tmp_path):
    rec = calibrate(build_digits_cnn(), X[:5], method="mse")
    p = rec.save(tmp_path / "r.json")
    back = CalibrationRecord.load(p)
    assert back.to_json() == rec.to_json() and back.method == "mse"
    assert not list(tmp_path.glob(".*tmp"))  # atomic write leaves no temporary
    d = json.loads(p.read_text())
    d["ranges"]["conv1"]["lo"] = [5.0]
    d["ranges"]["conv1"]["hi"] = [1.0]
    (tmp_path / "bad.json").write_text(json.dumps(d))
    with pytest.raises(CalibrationError, match=r"conv1.*lo > hi"):
        CalibrationRecord.load(tmp_path / "bad.json")
    (tmp_path / "junk.json").write_text("{")
    with pytest.raises(CalibrationError, match="not valid JSON"):
        CalibrationRecord.load(tmp_path / "junk.json")
    with pytest.raises(CalibrationError, match="no range for value 'nope'"):
        rec["nope"]
    with pytest.raises(CalibrationError):
        TensorRange([0.0, 1.0], [1.0, 2.0])  # two values need an axis


def test_entropy_calibration_of_the_digits_cnn_keeps_relu_ranges_non_negative_and_clips_only_tails():
    from rlx_edge.models import digits_data

    g = build_digits_cnn(batch="N")
    x = digits_data("train")[0][:200]
    mm = calibrate(g, x, batch_size=40)
    en = calibrate(g, x, batch_size=40, method="entropy")
    for v in ("conv1", "conv2"):  # ReLU outputs: [0, T] with T a clipped but not crushed maximum
        lo, hi = en[v].scalar()
        assert lo == 0.0 and 0.6 * mm[v].scalar()[1] < hi <= mm[v].scalar()[1]
    assert en["image"].scalar() == mm["image"].scalar()  # 17 pixel levels: nothing to gain by clipping
    assert en.method == "entropy" and en.samples == 200
