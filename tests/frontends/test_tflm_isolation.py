"""TFLite Micro in its own process: crashes, refusals and hybrid models become one TflmError naming the model."""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

import _mutants
import numpy as np
import pytest

from modelfiles import MLPERF, TFLM
from rlx_edge.errors import RlxError
from rlx_edge.frontends import tflm
from rlx_edge.frontends.tflm import HYBRID_MESSAGE, TflmError, TflmModel, find_hybrid_operator, run_tflm

AD01 = MLPERF / "ad01_int8.tflite"


def _mutant(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_a_native_crash_while_loading_is_one_error_and_the_next_model_runs(tmp_path: Path) -> None:
    bad = _mutant(tmp_path, "buffer_past_list.tflite", _mutants.activation_buffer_past_list(AD01.read_bytes()))
    with pytest.raises(TflmError) as e:
        TflmModel(bad)
    assert str(e.value) == f"{bad}: TFLite Micro crashed with SIGSEGV while loading the model"
    assert isinstance(e.value, RlxError)
    x = np.zeros((1, 640), np.int8)
    assert np.array_equal(run_tflm(AD01, x)[0], run_tflm(AD01.read_bytes(), x)[0])  # fresh children still run


def test_a_crash_while_invoking_is_one_error_and_the_model_stays_dead() -> None:
    with TflmModel(AD01, name="ad01") as m:
        x = m.zero_inputs()
        first = m(x)[0]
        assert np.array_equal(m(x)[0], first)  # one child serves every inference
        os.kill(m._child.pid, signal.SIGSEGV)  # what a kernel reading past its tensor does
        for _ in range(2):
            with pytest.raises(TflmError, match=r"^ad01: TFLite Micro crashed with SIGSEGV while invoking the model$"):
                m(x)


def test_tflite_micro_refusing_a_model_says_why_and_prints_nothing_here(
    tmp_path: Path, capfd: pytest.CaptureFixture
) -> None:
    bad = _mutant(
        tmp_path, "bias_scale_off.tflite", _mutants.bias_scale_off((TFLM / "hello_world_int8.tflite").read_bytes())
    )
    with pytest.raises(TflmError) as e:
        TflmModel(bad)
    msg = str(e.value)
    assert msg.startswith(f"{bad}: TFLite Micro failed while loading the model: RuntimeError: ")
    assert "Node FULLY_CONNECTED (number 2) failed to prepare" in msg  # what TFLite Micro printed
    out, err = capfd.readouterr()
    assert out == err == ""  # its prints went to the child's log, not to our stdout/stderr


def test_hybrid_models_are_found_up_front() -> None:
    hybrid = (MLPERF / "kws_ref_model_float32.tflite").read_bytes()
    assert find_hybrid_operator(hybrid) == "operator 0 (CONV_2D)"
    assert find_hybrid_operator((MLPERF / "kws_ref_model.tflite").read_bytes()) is None
    assert find_hybrid_operator((MLPERF / "vww_96_float.tflite").read_bytes()) is None
    with pytest.raises(TflmError, match=f"^hyb: {re.escape(HYBRID_MESSAGE)} \\(operator 0 \\(CONV_2D\\) has float"):
        TflmModel(hybrid, name="hyb")


def test_tflite_micros_own_hybrid_refusal_gets_the_same_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tflm, "find_hybrid_operator", lambda data, source: None)
    with pytest.raises(TflmError, match=f"^hyb: {re.escape(HYBRID_MESSAGE)}$"):
        TflmModel((MLPERF / "kws_ref_model_float32.tflite").read_bytes(), name="hyb")


def test_close_ends_the_child() -> None:
    m = TflmModel(AD01)
    pid = m._child.pid
    os.kill(pid, 0)  # alive
    m.close()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # ended and reaped
    with pytest.raises(ValueError, match="closed"):
        m(np.zeros((1, 640), np.int8))


def test_a_default_arena_too_small_grows_by_what_tflite_micro_says_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    # simple_add's file is ~1 KB and its three int8 tensors 48 KB: with a 4 KB floor the default arena is short
    # (as a 13 MB-activation detector's is with the real 1 MiB floor: retinaface, 570 KB of weights)
    model = TFLM / "simple_add_model.tflite"
    monkeypatch.setattr(tflm, "_MIN_ARENA", 4096)
    x = [np.full((1, 128, 128, 1), v, np.int8) for v in (3, -7)]
    with TflmModel(model) as m:
        got = m(x)[0]
    assert np.array_equal(got, run_tflm(model, x, arena_size=1 << 20)[0])
    # an arena the caller chose is not grown: its shortfall is the caller's to see
    with pytest.raises(TflmError, match=r"missing: \d+"):
        TflmModel(model, arena_size=8192)
