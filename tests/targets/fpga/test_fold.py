"""Folding to a device: PE x SIMD per layer from the calibrated estimate (no Yosys here)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from modelfiles import model_path
from rlx_edge.cli import main
from rlx_edge.frontends.tflite import load_tflite
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.serialize import save
from rlx_edge.targets.fpga import as_program
from rlx_edge.targets.fpga.devices import DEVICES
from rlx_edge.targets.fpga.fold import (
    FoldError,
    _build,
    _knapsack,
    _ladder,
    _raise,
    calibration,
    cycles,
    estimate_design,
    fold,
    plan,
    usable,
)

from ._graphs import fc_chain


def _chain() -> Graph:
    """fc 64 -> 32 (2,048 MACs) then fc 32 -> 8 (256): the first layer is the slow one."""
    return fc_chain("fold_chain", 7, ((64, 32), (32, 8)))


@pytest.fixture(scope="module")
def program():
    return as_program(_chain())


def _names(program) -> list[str]:
    return [layer.name for layer in plan(program, "area").layers]


def test_first_raise_goes_to_the_slowest_layer(program):
    slow, fast = _names(program)
    c0 = cycles(plan(program, "area"))
    # a target just under PE = SIMD = 1's latency: one raise is enough, and it must be the slow layer's
    res = fold(program, "ecp5-25k", latency_us=(c0 - 1) / 100.0)
    assert res.report["raised"] == 1
    pe, simd = res.parallelism[slow]
    assert pe * simd == 2 and res.parallelism[fast] == (1, 1)


def test_fit_is_the_most_parallel_design_within_the_device(program):
    dev = DEVICES["ecp5-25k"]
    res = fold(program, dev.name)
    est = res.report["estimate"]
    cap = usable(dev)
    assert cap["lut"] == int(0.85 * dev.lut)  # the routing margin the docs state
    assert all(est[k] <= cap[k] for k in cap)
    assert est["cycles"] < cycles(plan(program, "area"))
    assert res.report["layers"][0]["pe"] * res.report["layers"][0]["simd"] > 1
    # maximal: every layer's next legal PE x SIMD would not fit
    design = plan(program, res.parallelism)
    for layer in design.layers:
        ladder = _ladder(design, layer)
        for nxt in ladder[ladder.index((layer.pe, layer.simd)) + 1 :]:
            bigger = _build(program, {**res.parallelism, layer.name: nxt})
            if bigger is None:
                continue  # not a legal design: the fold skips it too
            _, _, total = estimate_design(bigger, dev.family)
            assert any(getattr(total, k) > cap[k] for k in cap), (layer.name, nxt)
            break
    assert res.report["stopped_by"]["dsp"]  # multipliers run out first on this part


def test_latency_target_met_with_a_smaller_design_than_fit(program):
    fastest = fold(program, "ecp5-25k").report["estimate"]
    slowest = cycles(plan(program, "area")) / 100.0
    target = (fastest["latency_us"] + slowest) / 2
    rep = fold(program, "ecp5-25k", latency_us=target).report
    assert rep["estimate"]["latency_us"] <= target
    assert rep["estimate"]["dsp"] < fastest["dsp"]
    # a clock of half the device's doubles the latency: the same target needs more lanes
    half = fold(program, "ecp5-25k", latency_us=target, clock_mhz=50.0).report
    assert half["estimate"]["latency_us"] <= target and half["estimate"]["cycles"] < rep["estimate"]["cycles"]


def test_unreachable_latency_is_a_clear_error(program):
    with pytest.raises(
        FoldError,
        match=r"no fold meets 0\.5 µs on ecp5-25k at 100 MHz: the fastest that fits takes [\d.]+ µs "
        r"\(\d+ cycles, DSP exhausted",
    ):
        fold(program, "ecp5-25k", latency_us=0.5)


def test_fit_on_a_device_too_small_names_the_layer_and_resources(tmp_path: Path, capsys):
    """Three fc layers need ~9 DSP (a multiplier and a two-DSP requantizer each, their accumulators narrow)
    even at PE = SIMD = 1; UP5K has 8."""
    chain = fc_chain("fold_chain3", 7, ((64, 32), (32, 16), (16, 8)))
    model = tmp_path / "m.rlx"
    save(chain, model)
    out = tmp_path / "f"
    assert main(["fpga", str(model), "-o", str(out), "--device", "up5k", "--fit"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    line = err.strip().splitlines()[-1]
    slow = _names(as_program(chain))[0]
    assert line == (
        f"rlx-edge: error: fold_chain3 does not fit up5k even at PE = SIMD = 1: needs ~9 DSP, 8 usable; "
        f"layer {slow!r} (fully_connected) alone ~3; choose a larger --device"
    )
    assert not out.exists()


def test_cli_fit_json_and_the_folded_design_is_bit_exact_on_icarus(tmp_path: Path, capsys):
    model = tmp_path / "m.rlx"
    save(_chain(), model)
    args = ["fpga", str(model), "-o", str(tmp_path / "f"), "--device", "ecp5-25k", "--fit", "--json"]
    assert main([*args, "--simulate", "--simulator", "icarus"]) == 0
    res = json.loads(capsys.readouterr().out)
    f = res["fold"]
    assert res["mismatches"] == 0 and res["inferences"] == 5
    assert set(f) >= {"layers", "estimate", "device", "buffers", "usable", "margin"}
    assert f["device"]["name"] == "ecp5-25k" and f["estimate"]["clock_mhz"] == 100.0
    assert [(r["pe"], r["simd"]) for r in f["layers"]] == [(r["pe"], r["simd"]) for r in res["per_layer"]]
    assert max(r["pe"] * r["simd"] for r in f["layers"]) > 1
    # the cycle model the fold used, next to what the simulation measured (pipeline fill per layer on top)
    assert f["estimate"]["cycles"] <= res["cycles"] <= f["estimate"]["cycles"] + 50


def test_fold_flags_are_checked(tmp_path: Path, capsys):
    model = tmp_path / "m.rlx"
    save(_chain(), model)
    base = ["fpga", str(model), "-o", str(tmp_path / "f")]
    assert main([*base, "--fit"]) == 2
    assert "--fit needs --device" in capsys.readouterr().err
    assert main([*base, "--device", "up5k", "--fit", "--parallelism", "8"]) == 2
    assert "drop --parallelism" in capsys.readouterr().err
    assert main([*base, "--device", "up5k", "--fit", "--latency-us", "5"]) == 2
    assert "not both" in capsys.readouterr().err


def _calibration_tool():
    path = Path(__file__).resolve().parents[3] / "tools" / "fpga_fold_calibrate.py"
    spec = importlib.util.spec_from_file_location("fpga_fold_calibrate", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize(
    ("family", "lut", "ff", "dsp", "bram"), [("ecp5", 0.12, 0.14, 0.0, 0), ("ice40", 0.11, 0.07, 0.025, 4)]
)
def test_estimate_error_on_the_calibration_designs(family, lut, ff, dsp, bram, capsys):
    """The errors the fold module's docstring states, on the committed Yosys counts."""
    worst = _calibration_tool().check(family)
    assert worst["dsp"] <= dsp and worst["bram"] <= bram
    assert worst["lut"] <= lut and worst["ff"] <= ff


def test_estimate_error_on_whole_models():
    """AD and KWS, synthesized whole (the table's validation rows): the out-of-sample error the docstring states."""
    for row in calibration("ecp5")["validation"]:
        design = plan(as_program(load_tflite(model_path(row["model"]))), row["parallelism"])
        _, _, est = estimate_design(design, "ecp5")
        assert abs(est.lut - row["lut"]) <= 0.14 * row["lut"]
        assert abs(est.ff - row["ff"]) <= 0.12 * row["ff"]
        assert est.bram == row["bram"] and est.dsp == row["dsp"]


def test_designs_the_fold_builds_are_legal_for_every_layer(program):
    design = plan(program, "area")
    for layer in design.layers:
        for pe, simd in _ladder(design, layer):
            plan(program, {layer.name: (pe, simd)})  # raises on a PE x SIMD the layer cannot take


def test_fit_solves_the_knapsack_where_raising_the_slowest_layer_falls_short():
    """AD's ten FC layers run one after another on ECP5-85K's 156 DSPs: the greedy evens their cycles out
    (17,9xx cycles in all), the knapsack over the multipliers spends them where they save the most."""
    program = as_program(load_tflite(model_path("mlperf-tiny/ad01_int8.tflite")))
    dev = DEVICES["ecp5-85k"]
    cap = usable(dev)
    start = {layer.name: (1, 1) for layer in plan(program, "area").layers}
    greedy = cycles(_raise(program, dev.family, cap, dev.default_mhz, None, start)[1])
    res = fold(program, dev.name)
    est = res.report["estimate"]
    assert all(est[k] <= cap[k] for k in cap)
    assert est["cycles"] <= 0.95 * greedy, (est["cycles"], greedy)
    # the knapsack's choice is the optimum over the DSPs: no layer's next rung fits beside it
    assert est["dsp"] == cap["dsp"]
    assert _knapsack(program, plan(program, "area"), dev.family, cap) is not None
