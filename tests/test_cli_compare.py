"""``rlx-edge compare``: float tolerance and error figures, exact input counts, edge inputs reported apart."""

from __future__ import annotations

import json

import numpy as np
import pytest

from modelfiles import MLPERF, model_path
from rlx_edge.cli import main
from rlx_edge.targets.reference.compare import DEFAULT_ATOL, DEFAULT_RTOL, EDGE_INPUTS

VWW_FLOAT = MLPERF / "vww_96_float.tflite"


def compare_json(capsys, *args: str) -> tuple[int, dict]:
    code = main(["compare", *args, "--json"])
    out = capsys.readouterr().out
    assert out.count("\n") == 1  # exactly one JSON object
    return code, json.loads(out)


@pytest.mark.parametrize("model", ["vww_96_float.tflite", "pretrainedResnet.tflite"])
def test_float_model_passes_against_tflm_within_tolerance(capsys, model):
    code, obj = compare_json(capsys, str(MLPERF / model), "--against", "tflm", "--inputs", "2")
    assert code == 0, obj["first_mismatch"]
    assert obj["atol"] == DEFAULT_ATOL and obj["rtol"] == DEFAULT_RTOL
    assert obj["float_tensors"] == obj["tensors"] > 0  # a float model: every tensor compared is float
    # the two sides really differ (so the tolerance is needed), and by less than atol
    assert 0 < obj["max_abs_error"] < DEFAULT_ATOL
    assert obj["max_rel_error"] > 0


def test_float_figures_are_printed(capsys):
    assert main(["compare", str(VWW_FLOAT), "--against", "tflm", "--inputs", "1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("within tolerance: 1 inputs + 3 edge inputs, 31 tensors each (reference)")
    assert (
        "max abs error " in out and "max rel error " in out and f"atol {DEFAULT_ATOL:g}, rtol {DEFAULT_RTOL:g}" in out
    )


def test_tolerance_below_the_measured_error_fails(capsys):
    args = [str(VWW_FLOAT), "--against", "tflm", "--inputs", "1", "--rtol", "0"]
    code, obj = compare_json(capsys, *args)
    err = obj["max_abs_error"]
    assert code == 0 and err > 0
    # exactly the largest difference is allowed: still passes, so the figure is the one the check uses
    code, obj = compare_json(capsys, *args, "--atol", repr(err))
    assert code == 0 and obj["mismatches"] == 0
    code, obj = compare_json(capsys, *args, "--atol", repr(err / 2))
    assert code == 1 and obj["mismatches"] > 0
    m = obj["first_mismatch"]
    assert abs(m["ours"] - m["theirs"]) > err / 2  # the element reported is really out of tolerance
    assert main(["compare", *args, "--atol", repr(err / 2)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("MISMATCH: ") and f"max abs error {err:.3g}" in out


def test_float_model_against_jax_target_within_tolerance(capsys):
    code, obj = compare_json(capsys, str(VWW_FLOAT), "--against", "jax", "--inputs", "1", "--no-edge")
    assert code == 0, obj["first_mismatch"]
    assert obj["ours"] == "jax" and obj["inputs"] == 1 and obj["edge_inputs"] == 0
    assert obj["float_tensors"] == obj["tensors"] == 1
    assert obj["max_abs_error"] is not None and obj["max_abs_error"] <= DEFAULT_ATOL


def test_integer_model_has_no_float_figures(capsys):
    code, obj = compare_json(capsys, str(MLPERF / "ad01_int8.tflite"), "--against", "tflm", "--inputs", "1")
    assert code == 0 and obj["float_tensors"] == 0
    assert obj["max_abs_error"] is None and obj["max_rel_error"] is None


@pytest.mark.parametrize("edge", [True, False])
def test_inputs_n_runs_exactly_n_plus_reported_edge_inputs(capsys, monkeypatch, edge):
    from rlx_edge.frontends.tflm import TflmModel

    calls = []
    run_many = TflmModel.run_many
    monkeypatch.setattr(
        TflmModel, "run_many", lambda self, samples, idx: calls.extend(samples) or run_many(self, samples, idx)
    )
    flag = "--edge" if edge else "--no-edge"
    code, obj = compare_json(capsys, str(MLPERF / "ad01_int8.tflite"), "--against", "tflm", "--inputs", "4", flag)
    n_edge = len(EDGE_INPUTS) if edge else 0
    assert code == 0
    assert len(calls) == 4 + n_edge  # TFLite Micro runs each input once
    assert obj["inputs"] == 4 and obj["edge_inputs"] == n_edge
    assert obj["compared"] == (4 + n_edge) * obj["tensors"]


def test_edge_input_mismatch_is_reported_as_an_edge_input(capsys, monkeypatch):
    """A target wrong only on the all-maximum input: counted among the edge inputs, named in the report."""
    from rlx_edge import runners as registry

    real_prepare = registry.prepare
    runs = []

    def prepare(target, graph, *args, **kwargs):
        run = real_prepare("reference", graph)  # the target under test: the reference, broken on one input

        def wrong_on_all_maximum(sample):
            runs.append(1)
            out = run(sample)
            if all(np.all(x == np.iinfo(x.dtype).max) for x in sample.values()):
                name = graph.outputs[0]
                out = {**out, name: out[name] ^ np.int8(1)}
            return out

        return wrong_on_all_maximum

    monkeypatch.setattr(registry, "prepare", prepare)
    args = [str(MLPERF / "ad01_int8.tflite"), "--against", "jax", "--inputs", "2"]
    code, obj = compare_json(capsys, *args)
    assert code == 1 and len(runs) == 5
    assert obj["inputs"] == 2 and obj["edge_inputs"] == 3
    assert obj["mismatched_inputs"] == 0 and obj["mismatched_edge_inputs"] == 1 and obj["mismatches"] == 1
    m = obj["first_mismatch"]
    assert m["edge"] == "all-maximum" and m["input"] == EDGE_INPUTS.index("all-maximum")
    assert m["ours"] == m["theirs"] ^ 1
    assert main(["compare", *args]) == 1
    out = capsys.readouterr().out
    assert out.startswith("MISMATCH: 0/2 inputs and 1/3 edge inputs differ;") and "edge input all-maximum" in out


def test_nothing_to_compare_is_a_usage_error(capsys):
    assert main(["compare", str(MLPERF / "ad01_int8.tflite"), "--against", "tflm", "--inputs", "0", "--no-edge"]) == 2
    assert "nothing to compare" in capsys.readouterr().err
    assert main(["compare", str(MLPERF / "ad01_int8.tflite"), "--against", "tflm", "--atol", "-1"]) == 2
    assert "--atol must be" in capsys.readouterr().err


def test_stateful_model_threads_its_state_against_tflm(capsys):
    """keyword_scrambled's SVDF states start at their zero points and carry over: 13 invokes, one sequence."""
    path = model_path("tflm/keyword_scrambled.tflite")
    code, obj = compare_json(capsys, str(path), "--against", "tflm", "--inputs", "10")
    assert code == 0, obj["first_mismatch"]
    assert obj["mismatches"] == 0 and obj["inputs"] == 10 and obj["edge_inputs"] == 3
    assert obj["tensors"] == 22  # the 7 state updates among them, checked against TFLite Micro's variable tensors
