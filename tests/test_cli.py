"""The command-line contract: exit codes, one-line errors, outputs."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from modelfiles import MLPERF
from rlx_edge.cli import main
from rlx_edge.ir.serialize import load, save
from rlx_edge.models import build_digits_cnn

ENV = {**os.environ, "PYTHONWARNINGS": "ignore"}


def cli(*args: str) -> subprocess.CompletedProcess:
    """Run the real console entry point in a subprocess (checks the traceback-free contract)."""
    return subprocess.run(
        [sys.executable, "-m", "rlx_edge.cli", *args], capture_output=True, text=True, env=ENV, timeout=120
    )


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    from rlx_edge.ir.passes.lower_hir import lower_hir

    p = tmp_path_factory.mktemp("m") / "digits.rlx"
    save(lower_hir(build_digits_cnn()), p)
    return p


def test_version():
    r = cli("--version")
    assert r.returncode == 0 and r.stdout.startswith("rlx-edge ")


@pytest.mark.parametrize("command", ["inspect", "convert", "run"])
def test_missing_file_is_one_line_exit_2(tmp_path, command):
    extra = {"inspect": [], "convert": ["-o", str(tmp_path / "o.rlx")], "run": ["--input", "x.npy", "-o", "y.npy"]}
    r = cli(command, str(tmp_path / "nope.rlx"), *extra[command])
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert "nope.rlx" in r.stderr


@pytest.mark.parametrize("content", [b"", b"garbage" * 10, b"RLXEDGE\0" + b"\xff" * 40])
def test_malformed_file_is_one_line_exit_2(tmp_path, content):
    p = tmp_path / "bad.rlx"
    p.write_bytes(content)
    r = cli("inspect", str(p))
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr and "bad.rlx" in r.stderr


def test_unknown_format_and_bad_usage(tmp_path):
    p = tmp_path / "model.pt"
    p.write_bytes(b"x")
    r = cli("inspect", str(p))
    assert r.returncode == 2 and "unknown model format .pt" in r.stderr
    r = cli("inspect")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "MODEL" in r.stderr


def test_inspect_json_is_one_object(model):
    r = cli("inspect", str(model), "--json")
    assert r.returncode == 0, r.stderr
    obj = json.loads(r.stdout)
    assert r.stdout.count("\n") == 1
    assert obj["ops"]["conv2d"] == 2 and obj["macs"] == 8 * 8 * 8 * 9 + 4 * 4 * 16 * 72 + 64 * 10
    assert obj["inputs"][0]["name"] == "image" and obj["inputs"][0]["shape"] == [1, 8, 8, 1]
    assert obj["param_bytes"] == sum(a.nbytes for a in load(model).params.values())


def test_run_single_batch_and_trace(model, tmp_path):
    x = np.random.default_rng(0).random((1, 8, 8, 1), dtype=np.float32)
    np.save(tmp_path / "x.npy", x)
    assert main([
        "run", str(model), "--input", str(tmp_path / "x.npy"), "-o", str(tmp_path / "y.npy"),
        "--trace", str(tmp_path / "tr"),
    ]) == 0  # fmt: skip
    y = np.load(tmp_path / "y.npy")
    assert y.shape == (1, 10) and abs(float(y.sum()) - 1) < 1e-5
    traced = {p.stem for p in (tmp_path / "tr").glob("*.npy")}
    assert {"conv1", "pool1", "conv2", "pool2", "flatten", "fc", "probs"} <= traced
    np.testing.assert_array_equal(np.load(tmp_path / "tr" / "probs.npy"), y)
    # a leading batch axis runs many; each row equals its own single run
    xs = np.random.default_rng(1).random((3, 8, 8, 1), dtype=np.float32)
    np.save(tmp_path / "xs.npy", xs)
    assert main(["run", str(model), "--input", str(tmp_path / "xs.npy"), "-o", str(tmp_path / "ys.npy")]) == 0
    ys = np.load(tmp_path / "ys.npy")
    assert ys.shape == (3, 10)
    np.save(tmp_path / "x1.npy", xs[1:2])
    main(["run", str(model), "--input", str(tmp_path / "x1.npy"), "-o", str(tmp_path / "y1.npy")])
    np.testing.assert_array_equal(np.load(tmp_path / "y1.npy"), ys[1:2])


def test_run_wrong_dtype_is_a_user_error(model, tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((1, 8, 8, 1), np.float64))
    r = cli("run", str(model), "--input", str(tmp_path / "x.npy"), "-o", str(tmp_path / "y.npy"))
    assert r.returncode == 2 and "must be f32" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "y.npy").exists()


def test_convert_round_trips_bytes(model, tmp_path):
    out = tmp_path / "copy.rlx"
    assert main(["convert", str(model), "-o", str(out)]) == 0
    assert out.read_bytes() == model.read_bytes()
    assert [p.name for p in tmp_path.iterdir()] == ["copy.rlx"]  # no temporary left behind


def test_demo_json(tmp_path):
    # cli()'s 120 s is too short for the demo: four firmware builds, QEMU runs, QAT and the FPGA
    # simulation take about a minute of CPU, several on a shared, loaded machine
    argv = [sys.executable, "-m", "rlx_edge.cli", "demo", "-o", str(tmp_path), "--json"]
    r = subprocess.run(argv, capture_output=True, text=True, env=ENV, timeout=600)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    verdicts = {v["stage"]: v["verdict"] for v in report["verdicts"]}
    stages_run = {"build", "quantize", "tflm", "plan", "examples", "int4", "mixed", "qat", "autodiff", "transformer"}
    assert stages_run | {"qemu", "hil", "farm"} <= set(verdicts)
    assert set(verdicts.values()) == {"PASS"}
    stages = report["stages"]
    assert stages["tflm"]["mismatches"] == 0 and stages["tflm"]["inputs"] == 359
    tt = stages["transformer"]
    assert tt["jax_bit_exact"] and tt["jax_inputs"] == 200
    assert tt["float_accuracy"] >= 90.0 and tt["float_accuracy"] - tt["int8_accuracy"] <= 1.5
    assert stages["plan"]["arena_bytes"] < stages["plan"]["tflm_arena_bytes"]
    int4 = stages["int4"]
    assert int4["mismatches"] == 0 and int4["inputs"] == 20
    assert int4["weight_flash_bytes"] <= 0.55 * int4["int8_weight_flash_bytes"]
    mixed = stages["mixed"]
    assert mixed["sqnr_db"] >= mixed["target_sqnr_db"] and mixed["target_sqnr_db"] < mixed["int8_sqnr_db"]
    assert set(mixed["schemes"]) == {"int4w", "int8"}  # a real mix, of schemes Cortex-M runs
    assert mixed["flash_bytes"] < mixed["int8_flash_bytes"] and mixed["mismatches"] == 0 and mixed["inputs"] == 359
    qat = stages["qat"]
    assert qat["accuracy"]["qat_int4w"] >= qat["accuracy"]["ptq_int4w"] and qat["loss_after"] < qat["loss_before"]
    assert qat["mismatches"] == 0 and qat["inputs"] == 359
    farm = stages["farm"]["places"]  # the 20 inputs shared by both places of the labgrid farm
    assert sum(farm.values()) == 20 and len(farm) == 2 and all(farm.values()), farm
    examples = stages["examples"]["models"]  # every TFLite Micro example model but the audio preprocessors
    assert len(examples) == 9 and all(m["ok"] for m in examples.values())
    assert stages["autodiff"]["jax_rel_error"] <= 1e-5 and stages["autodiff"]["fd_rel_error"] <= 1e-3
    for f in ("digits_cnn.rlx", "digits_cnn_int8.rlx", "digits_cnn_int8.tflite", "arena.png", "digits_cnn_int4w.rlx",
              "digits_cnn_mixed.rlx", "digits_cnn_qat_int4w.rlx", "digits_cnn_grad.rlx"):  # fmt: skip
        assert (tmp_path / f).exists()


@pytest.mark.parametrize(
    "model,macs",
    [
        ("kws_ref_model.tflite", 2_656_768),
        ("vww_96_int8.tflite", 7_489_664),
        ("pretrainedResnet_quant.tflite", 12_501_632),
        ("ad01_int8.tflite", 264_192),
    ],
)
def test_inspect_tflite_reports_macs(model, macs):
    r = cli("inspect", str(MLPERF / model), "--json")
    assert r.returncode == 0, r.stderr
    obj = json.loads(r.stdout)
    assert obj["macs"] == macs
    assert obj["inputs"][0]["dtype"] == "i8" and obj["inputs"][0]["quant"] is not None


def test_export_then_inspect(tmp_path):
    out = tmp_path / "kws.tflite"
    assert main(["export", str(MLPERF / "kws_ref_model.tflite"), "-o", str(out)]) == 0
    r = cli("inspect", str(out), "--json")
    assert json.loads(r.stdout)["macs"] == 2_656_768
    r = cli("export", str(MLPERF / "kws_ref_model.tflite"), "-o", str(tmp_path / "kws.bin"))
    assert r.returncode == 2 and ".tflite" in r.stderr


def test_compare_against_tflm_passes_and_reports_json():
    r = cli("compare", str(MLPERF / "kws_ref_model.tflite"), "--against", "tflm", "--inputs", "3")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("bit-exact: 3 inputs + 3 edge inputs")
    r = cli("compare", str(MLPERF / "ad01_int8.tflite"), "--against", "reference", "--inputs", "2", "--json")
    obj = json.loads(r.stdout)
    assert r.returncode == 0 and obj["inputs"] == 2 and obj["edge_inputs"] == 3
    assert obj["mismatches"] == 0 and obj["first_mismatch"] is None


def test_compare_exits_1_on_a_mismatch(monkeypatch, capsys):
    from rlx_edge.ir.ops import get_op

    softmax = get_op("softmax")
    good = softmax._eval

    def off_by_one(p, *inputs, **attrs):
        y = np.array(good(p, *inputs, **attrs))
        y.flat[0] = np.int8(int(y.flat[0]) ^ 1)
        return y

    monkeypatch.setattr(softmax, "_eval", off_by_one)
    code = main(["compare", str(MLPERF / "kws_ref_model.tflite"), "--against", "tflm", "--inputs", "2"])
    out = capsys.readouterr().out
    assert code == 1
    assert out.startswith("MISMATCH: ") and "input 0 index [0, 0]" in out


def test_compare_needs_a_tflite_model(model):
    r = cli("compare", str(model), "--against", "tflm")
    assert r.returncode == 2 and "needs a .tflite model" in r.stderr


def test_run_int8_model_with_trace(tmp_path):
    x = np.random.default_rng(0).integers(-128, 128, (1, 49, 10, 1)).astype(np.int8)
    np.save(tmp_path / "x.npy", x)
    args = ["run", str(MLPERF / "kws_ref_model.tflite"), "--input", str(tmp_path / "x.npy")]
    assert main([*args, "-o", str(tmp_path / "y.npy"), "--trace", str(tmp_path / "trace")]) == 0
    y = np.load(tmp_path / "y.npy")
    assert y.dtype == np.int8 and y.shape == (1, 12)
    traced = sorted((tmp_path / "trace").glob("*.npy"))
    assert len(traced) == 13 and all(np.load(p).dtype == np.int8 for p in traced)
    np.save(tmp_path / "xf.npy", x.astype(np.float32))
    r = cli(*args[:3], str(tmp_path / "xf.npy"), "-o", str(tmp_path / "yf.npy"))
    assert r.returncode == 2 and "must be i8" in r.stderr


def test_calibrate_quantize_export_pipeline(tmp_path):
    from rlx_edge.frontends.tflm import run_tflm
    from rlx_edge.models.digits import digits_data
    from rlx_edge.targets.reference import run

    x, _ = digits_data("train")
    np.savez(tmp_path / "calib.npz", image=x[:64])
    bundled = Path(__file__).resolve().parents[1] / "rlx_edge" / "models" / "digits_cnn.rlx"
    rec, q, tfl = tmp_path / "rec.json", tmp_path / "q.rlx", tmp_path / "q.tflite"
    assert main(["calibrate", str(bundled), "--data", str(tmp_path / "calib.npz"), "-o", str(rec)]) == 0
    assert main(["quantize", str(bundled), "--record", str(rec), "-o", str(q)]) == 0
    assert main(["export", str(q), "-o", str(tfl)]) == 0
    graph = load(q)
    assert graph.types[graph.inputs[0]].dtype.value == "i8"
    xi = np.random.default_rng(0).integers(-128, 128, (1, 8, 8, 1)).astype(np.int8)
    np.testing.assert_array_equal(run(graph, xi)[graph.outputs[0]], run_tflm(tfl, [xi])[0])
    r = cli("quantize", str(bundled), "-o", str(q))
    assert r.returncode == 2 and "--data" in r.stderr and r.stderr.count("\n") == 1


def test_inspect_passes_reports_fusions(tmp_path):
    from rlx_edge.ir.graph import Graph

    g = Graph("fuse")
    x = g.input("x", (1, 4, 4, 2))
    y = g.conv2d(x, g.param("w", np.ones((3, 1, 1, 2), np.float32)), name="conv")
    g.output(g.relu(y, name="act"))
    save(g, tmp_path / "f.rlx")
    r = cli("inspect", str(tmp_path / "f.rlx"), "--passes")
    assert r.returncode == 0, r.stderr
    assert "fuse_activation" in r.stdout and "act" in r.stdout
    obj = json.loads(cli("inspect", str(tmp_path / "f.rlx"), "--passes", "--json").stdout)
    assert "passes" in obj


def test_run_and_compare_on_cortexm_host(tmp_path):
    x = np.random.default_rng(3).integers(-128, 128, (4, 1, 640)).astype(np.int8)
    np.save(tmp_path / "x.npy", x)
    model = str(MLPERF / "ad01_int8.tflite")
    assert (
        main(
            [
                "run",
                model,
                "--input",
                str(tmp_path / "x.npy"),
                "-o",
                str(tmp_path / "c.npy"),
                "--target",
                "cortexm-host",
            ]
        )
        == 0
    )
    assert main(["run", model, "--input", str(tmp_path / "x.npy"), "-o", str(tmp_path / "r.npy")]) == 0
    np.testing.assert_array_equal(np.load(tmp_path / "c.npy"), np.load(tmp_path / "r.npy"))
    r = cli("compare", model, "--against", "cortexm-host", "--inputs", "4", "--json")
    obj = json.loads(r.stdout)
    assert r.returncode == 0 and obj["inputs"] == 4 and obj["edge_inputs"] == 3 and obj["mismatches"] == 0
    r = cli("compare", model, "--against", "gpu-magic")
    assert r.returncode == 2 and "--against must be" in r.stderr


def test_compile_reports_sizes_and_is_deterministic(tmp_path):
    model = str(MLPERF / "ad01_int8.tflite")
    r = cli("compile", model, "--target", "cortex-m4", "-o", str(tmp_path / "a"), "--firmware", "--json")
    assert r.returncode == 0, r.stderr
    obj = json.loads(r.stdout)
    assert obj["flash_bytes"] > obj["weight_bytes"] > 260_000 and obj["ram_bytes"] >= obj["arena_bytes"]
    assert {"model.c", "model.h", "weights.c", "Makefile"} <= set(obj["files"]) and Path(obj["elf"]).exists()
    assert main(["compile", model, "-o", str(tmp_path / "b")]) == 0
    for f in obj["files"]:
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f


def test_compare_against_qemu(tmp_path):
    r = cli("compare", str(MLPERF / "ad01_int8.tflite"), "--against", "qemu-m3", "--inputs", "2")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("bit-exact: 2 inputs + 3 edge inputs")


def test_eval_and_jax_target(tmp_path):
    from rlx_edge.models.digits import digits_data

    x, y = digits_data("test")
    np.savez(tmp_path / "test.npz", image=x[:64], labels=y[:64])
    bundled = Path(__file__).resolve().parents[1] / "rlx_edge" / "models" / "digits_cnn.rlx"
    r = cli("eval", str(bundled), "--data", str(tmp_path / "test.npz"), "--labels", "--target", "jax", "--json")
    assert r.returncode == 0, r.stderr
    obj = json.loads(r.stdout)
    assert obj["count"] == 64 and obj["accuracy"] > 0.9
    r = cli("compare", str(MLPERF / "ad01_int8.tflite"), "--against", "jax", "--inputs", "3")
    assert r.returncode == 0 and r.stdout.startswith("bit-exact: 3 inputs + 3 edge inputs"), r.stderr


def test_hil_campaign_on_qemu_and_a_dead_port():
    model = str(MLPERF / "ad01_int8.tflite")
    r = cli("hil", model, "--board", "qemu-mps2-an386", "--count", "3", "--json")
    assert r.returncode == 0, r.stderr
    obj = json.loads(r.stdout)
    assert obj["count"] == 3 and obj["mismatches"] == 0 and obj["latency"]["ticks"]["p50"] > 0
    r = cli("hil", model, "--board", "qemu-mps2-an386", "--port", "socket://127.0.0.1:1", "--count", "1")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "127.0.0.1:1" in r.stderr


def test_plan_with_cortexm_scratch():
    r = cli("plan", str(MLPERF / "kws_ref_model.tflite"), "--target", "qemu-m4", "--json")
    obj = json.loads(r.stdout)
    assert r.returncode == 0 and obj["scratch_bytes"] > 0 and obj["arena_bytes"] <= 16_990
    r = cli("plan", str(MLPERF / "kws_ref_model.tflite"), "--target", "jax")
    assert r.returncode == 2 and "no planner rules" in r.stderr
