"""One pipeline (rlx_edge.pipeline): lower HIR -> optimize -> legalize -> prepare -> plan, each stage once."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from modelfiles import MLPERF
from rlx_edge.cli import main
from rlx_edge.errors import RlxError, UnsupportedOpError
from rlx_edge.ir import plan as plan_module
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.passes.manager import PassManager
from rlx_edge.models import build_digits_cnn
from rlx_edge.pipeline import AS_GIVEN, PipelineOptions, optimize_graph, to_program

BUNDLED = Path(__file__).resolve().parents[1] / "rlx_edge" / "models" / "digits_cnn.rlx"
INT8 = MLPERF / "ad01_int8.tflite"


@pytest.fixture
def stages(monkeypatch) -> Counter:
    """Counts every optimizer run and every pipeline stage, wherever it is called from."""
    import rlx_edge.pipeline as pipeline

    calls: Counter = Counter()

    def counted(name: str, fn):
        def wrapper(*args, **kwargs):
            calls[name] += 1
            return fn(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(PassManager, "run", counted("optimize", PassManager.run))
    monkeypatch.setattr(pipeline, "legalize", counted("legalize", pipeline.legalize))
    monkeypatch.setattr(pipeline, "prepare_graph", counted("prepare", pipeline.prepare_graph))
    # plan() validates its result once at the end, whoever calls it
    monkeypatch.setattr(plan_module, "validate", counted("plan", plan_module.validate))
    return calls


def test_quantize_command_optimizes_once(tmp_path, stages, capsys):
    from rlx_edge.models.digits import digits_data

    x, _ = digits_data("train")
    np.savez(tmp_path / "calib.npz", image=x[:16])
    out = tmp_path / "q.rlx"
    args = ["quantize", str(BUNDLED), "--data", str(tmp_path / "calib.npz"), "-o", str(out)]
    assert main([*args, "--report", str(tmp_path / "r.json")]) == 0
    # calibration, quantization and the report all work on the one optimized graph
    assert stages["optimize"] == 1


def test_calibrate_and_quantize_optimize_unless_told_not_to(stages):
    from rlx_edge.models.digits import digits_data
    from rlx_edge.quant.calibrate import calibrate
    from rlx_edge.quant.ptq import quantize
    from rlx_edge.quant.report import quantization_report

    x, _ = digits_data("train")
    g, _ = optimize_graph(build_digits_cnn())
    assert stages["optimize"] == 1
    rec = calibrate(g, x[:8], progress=False, optimize=False)
    q = quantize(g, rec, optimize=False)
    quantization_report(g, q, x[:8], optimize=False)
    assert stages["optimize"] == 1
    calibrate(build_digits_cnn(), x[:8], progress=False)  # a library caller's float graph is optimized
    assert stages["optimize"] == 2


@pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None, reason="needs arm-none-eabi-gcc")
def test_compile_command_runs_each_stage_once(tmp_path, stages, capsys):
    assert main(["compile", str(INT8), "-o", str(tmp_path / "proj")]) == 0
    # the model is compiled as given: a quantized model was optimized when it was quantized
    assert stages == Counter({"legalize": 1, "prepare": 1, "plan": 1})


def test_plan_command_runs_each_stage_once(stages, capsys):
    assert main(["plan", str(INT8), "--target", "qemu-m4", "--json"]) == 0
    assert stages == Counter({"legalize": 1, "prepare": 1, "plan": 1})


def test_to_program_fills_quant_and_names_the_target():
    from rlx_edge.frontends import load_model

    g = load_model(INT8)
    program = to_program(g, "cortexm-host", AS_GIVEN)
    assert program.target == "cortexm-host" and program.scratch_bytes >= 0
    quantized = [n.name for n in g.nodes if n.op in ("fully_connected", "conv2d")]
    assert quantized and all(n in program.quant for n in quantized)
    again = to_program(g, "reference", PipelineOptions(optimize=False, alignment=64, schedule="topological"))
    assert again.alignment == 64 and again.algorithm.startswith("topological+")


def test_optimize_graph_lowers_hir_and_reports():
    hir = build_digits_cnn()
    assert hir.stage == "hir"
    mir, report = optimize_graph(hir, AS_GIVEN)
    assert mir.stage == "mir" and report is None
    same, report = optimize_graph(mir, AS_GIVEN)
    assert same is mir and report is None

    g = Graph("t")  # conv -> relu: the optimizer fuses the activation
    rng = np.random.default_rng(0)
    w, b = g.param("w", rng.random((4, 3, 3, 3), np.float32)), g.param("b", rng.random(4, np.float32))
    g.output(g.relu(g.conv2d(g.input("x", (1, 6, 6, 3)), w, b, padding="same", name="conv"), name="act"))
    opt, report = optimize_graph(g)
    assert report is not None and report.fired("fuse_activation") and len(opt.nodes) == 1 < len(g.nodes)
    kept, report = optimize_graph(g, PipelineOptions(passes=("dce",)))
    assert {r["pass"] for r in report.runs} == {"dce"} and len(kept.nodes) == 2


def test_unsupported_op_names_node_op_and_the_targets_that_have_it():
    g = Graph("bad")
    x = g.input("x", (1, 4), "f32")
    g.output(g.erf(x, name="g"))
    where = r"cortexm does not support: node 'g' \(op erf\): supported by .*reference"
    with pytest.raises(UnsupportedOpError, match=where):
        to_program(g, "cortexm")
    assert to_program(g, "reference").graph.nodes[0].op == "erf"


def test_targets_without_an_arena_plan_and_unknown_targets_are_clear_errors():
    g, _ = optimize_graph(build_digits_cnn(), AS_GIVEN)
    no_plan = r"target 'jax' has no planner rules; use reference, cortexm-host, fpga-sim or qemu-\*"
    with pytest.raises(RlxError, match=no_plan):
        to_program(g, "jax")
    with pytest.raises(RlxError, match=r"unknown target 'gpu'; use one of reference, cortexm-host"):
        to_program(g, "gpu")


def _with_constant_shape_math() -> Graph:
    """An int8 reshape beside the int32 Shape -> StridedSlice -> Pack arithmetic some exporters leave
    (TFLite Micro's custom_model_rf_keras example): constants only, run by the reference as given."""
    from rlx_edge.ir.types import QuantParams

    g = Graph("shape_math")
    x = g.input("x", (1, 4, 6), "i8", quant=QuantParams(np.float32(0.1), 3))
    shape = g.param("x_shape", np.array([1, 4, 6], np.int32))
    batch = g.reshape(g.slice(shape, begin=[0], end=[1]), shape=[])
    g.stack(batch, g.param("rows", np.array(24, np.int32)), axis=0)  # the reshape's target, as computed
    g.output(g.reshape(x, shape=[1, 24]))
    return g


def test_compiled_targets_fold_constant_shape_math_and_stay_bit_exact(tmp_path):
    from rlx_edge.runners import prepare

    g = _with_constant_shape_math()
    assert {n.op for n in to_program(g, "reference", AS_GIVEN).graph.nodes} == {"slice", "reshape", "stack"}
    program = to_program(g, "cortexm", AS_GIVEN)
    assert [n.op for n in program.graph.nodes] == ["reshape"]
    x = np.arange(-12, 12, dtype=np.int8).reshape(1, 4, 6)
    got = prepare("cortexm-host", g, tmp_path)({"x": x})
    assert np.array_equal(got[g.outputs[0]], x.reshape(1, 24))
