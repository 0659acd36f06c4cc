"""``rlx-edge demo``: the main job on the bundled default model.

The path grows with each capability: the trained digits CNN (float, built
with the Python API) -> optimizer passes -> calibration and int8
post-training quantization -> TFLite export checked bit-exactly against
TFLite Micro -> static arena plan (drawn) -> int4 weights (accuracy, QEMU
firmware, packed weight flash) -> a mixed int4/int8 pick for a target SQNR
-> quantization-aware training at int4 -> a gradient of the float model
checked against JAX and finite differences -> and, where available, the
Cortex-M C library, QEMU firmware and the FPGA simulation, each checked
bit-exactly against the integer reference. It ends with one table of
verdicts and sizes.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rlx_edge._io import atomic_dir
from rlx_edge.errors import RlxError

if TYPE_CHECKING:
    from rlx_edge.ir.graph import Graph

BOARD = "qemu-mps2-an386"  # the Cortex-M4 (with DSP) QEMU board every firmware stage runs on
INT4_FLASH_GOAL = 0.55  # issue 18: int4w weights in Cortex-M flash <= 0.55 x int8's (packed two per byte)
# The mixed stage's target, this far below int8's output SQNR: int4 weights in any one layer of the
# digits CNN cost 7 (conv1) to 18 dB (conv2), so 3 dB would keep all at int8; 10 dB lets conv1 go.
MIXED_BELOW_INT8_DB = 10.0
# tests/quant/test_qat.py's settings: on this model 2 epochs recover the int4w PTQ gap, and more
# take little longer only because compiling the training step is most of the time
QAT_EPOCHS, QAT_LR = 2, 1e-3
AD_WRT, AD_BATCH = "conv2.w", 8  # the weight the autodiff stage differentiates by, on this many images
AD_REL = 1e-5  # tests/autodiff: float64 on both sides, the two differ by rounding only
AD_FD_REL, AD_FD_STEP, AD_FD_COORDS = 1e-3, 1e-6, 4  # tests/autodiff: h = 1e-6 in float64, truncation ~h^2
TRANSFORMER_JAX_INPUTS = 200  # held-out digits the bundled tiny transformer runs on JAX


class Demo:
    """Runs named stages in order, printing progress and collecting a JSON report."""

    def __init__(self, out_dir: Path, quiet: bool) -> None:
        self.out = out_dir
        self.quiet = quiet
        self.report: dict[str, Any] = {"stages": {}}
        self.verdicts: list[tuple[str, str, str]] = []  # stage, verdict, detail
        self.failed = False

    def say(self, text: str) -> None:
        if not self.quiet:
            print(text, flush=True)

    def stage(self, name: str, fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        print(f"[demo] {name} ...", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        result = fn()
        result["seconds"] = round(time.perf_counter() - t0, 3)
        self.report["stages"][name] = result
        verdict = result.get("verdict")
        if verdict is not None:
            self.verdicts.append((name, verdict, result.get("detail", "")))
            self.failed |= verdict == "FAIL"
        return result


# TFLite Micro's example models (a checkout's models/tflm; not in a wheel)
EXAMPLES_DIR = Path(__file__).resolve().parents[1] / "models" / "tflm"


def verdict(ok: bool, detail: str, **extra: Any) -> dict[str, Any]:
    return {**extra, "verdict": "PASS" if ok else "FAIL", "detail": detail}


def _quantize_input(x: np.ndarray, graph) -> np.ndarray:
    from rlx_edge.ir.fixedpoint import round_half_away

    t = graph.types[graph.inputs[0]]
    s, zp = float(t.quant.scale[0]), int(t.quant.zero_point[0])
    q = round_half_away(x.astype(np.float32) / np.float32(s)) + zp
    return np.clip(q, t.dtype.min, t.dtype.max).astype(t.dtype.numpy)


def run_demo(out_dir: Path, as_json: bool = False) -> int:
    from rlx_edge.frontends.tflite import export_tflite
    from rlx_edge.frontends.tflm import TflmModel, tflm_arena_bytes
    from rlx_edge.ir import inspect
    from rlx_edge.ir.plan.draw import draw_plan
    from rlx_edge.ir.serialize import load, save, save_program
    from rlx_edge.models import build_digits_cnn
    from rlx_edge.models.digits import digits_data
    from rlx_edge.pipeline import AS_GIVEN, optimize_graph, to_program
    from rlx_edge.quant.calibrate import calibrate
    from rlx_edge.quant.ptq import quantize
    from rlx_edge.quant.report import quantization_report
    from rlx_edge.targets.reference import run
    from rlx_edge.targets.reference.arena import run_program

    out_dir.mkdir(parents=True, exist_ok=True)
    demo = Demo(out_dir, quiet=as_json)
    x_train, y_train = digits_data("train")
    x_test, y_test = digits_data("test")
    st: dict[str, Any] = {"train": (x_train, y_train), "test": (x_test, y_test)}

    def build():
        hir = build_digits_cnn()
        save(hir, out_dir / "digits_cnn.hir.rlx")
        st["float"], _ = optimize_graph(hir, AS_GIVEN)  # the float model as MIR, before the optimizer
        save(st["float"], out_dir / "digits_cnn.rlx")
        again = load(out_dir / "digits_cnn.rlx")
        same = np.array_equal(run(again, x_test[:1])["probs"], run(st["float"], x_test[:1])["probs"])
        demo.say(f"model    {inspect.one_line(st['float'])}")
        return verdict(same, ".rlx save/load round trip bit-identical", summary=inspect.one_line(st["float"]))

    def passes():
        st["opt"], report = optimize_graph(st["float"])  # the one optimizer run: later stages take st["opt"]
        assert report is not None
        fired = report.to_json()
        demo.say(f"passes   {len(st['float'].nodes)} -> {len(st['opt'].nodes)} nodes")
        return {"nodes_before": len(st["float"].nodes), "nodes_after": len(st["opt"].nodes), "report": fired}

    def quant():
        st["calib"] = x_train[:200]
        st["record"] = record = calibrate(st["opt"], st["calib"], method="minmax", progress=False, optimize=False)
        st["q"] = quantize(st["opt"], record, scheme="int8", optimize=False)
        save(st["q"], out_dir / "digits_cnn_int8.rlx")
        rep = quantization_report(st["opt"], st["q"], x_test, labels=y_test, optimize=False)
        st["accuracy"] = acc = rep["accuracy"]
        drop = 100 * (acc["float"] - acc["quantized"])
        demo.say(
            f"quantize int8: held-out accuracy float {100 * acc['float']:.2f} %, int8 {100 * acc['quantized']:.2f} %"
            f" ({len(y_test)} images)"
        )
        return verdict(drop <= 1.0, f"int8 top-1 within 1 point of float ({drop:+.2f})", accuracy=acc)

    def tflm():
        path = out_dir / "digits_cnn_int8.tflite"
        export_tflite(st["q"], path)
        xq = _quantize_input(x_test, st["q"])
        st["xq"] = xq
        model = TflmModel(path)
        bad = sum(not np.array_equal(_ref(st, xq[i : i + 1]), model([xq[i : i + 1]])[0]) for i in range(len(xq)))
        demo.say(f"tflm     reference vs TFLite Micro: {len(xq) - bad}/{len(xq)} bit-exact")
        detail = f"{len(xq) - bad}/{len(xq)} outputs equal to TFLite Micro"
        return verdict(bad == 0, detail, inputs=len(xq), mismatches=bad)

    def arena():
        program = to_program(st["q"], "reference", AS_GIVEN)
        st["program"] = program
        save_program(program, out_dir / "digits_cnn_int8.program.rlx")
        draw_plan(program, out_dir / "arena.png")
        theirs = tflm_arena_bytes(out_dir / "digits_cnn_int8.tflite")
        out = st["q"].outputs[0]
        xq = st["xq"][:50]
        bad = sum(
            not np.array_equal(run_program(program, xq[i : i + 1])[out], _ref(st, xq[i : i + 1]))
            for i in range(len(xq))
        )
        demo.say(
            f"plan     arena {program.arena_bytes:,} B (lower bound {program.lower_bound_bytes:,} B), "
            f"TFLite Micro {theirs:,} B; weights {program.weight_bytes:,} B; drawn to {out_dir / 'arena.png'}"
        )
        detail = f"arena {program.arena_bytes} B vs TFLite Micro {theirs} B; in-arena run bit-exact"
        return verdict(bad == 0, detail, tflm_arena_bytes=theirs, **program.summary())

    def examples():
        # "whatever TFLite Micro runs, rlx-edge must run": its example models, as a new user tries them
        from rlx_edge.targets.reference.compare import compare_with_tflm

        found = sorted(p for p in EXAMPLES_DIR.glob("*.tflite") if not p.stem.startswith("audio_preprocessor"))
        if not found:
            return {"verdict": "SKIP", "detail": f"no example models in {EXAMPLES_DIR} (a checkout has them)"}
        rows = {}
        for path in found:
            r = compare_with_tflm(path, n_inputs=1, seed=1)
            rows[path.stem] = {"ok": r.ok, "float_tensors": r.float_tensors, "compared": r.compared}
            kind = "float, within tolerance" if r.float_tensors else "bit-exact"
            demo.say(f"example  {path.stem}: {'matches' if r.ok else 'DIFFERS from'} TFLite Micro ({kind})")
        good = sum(v["ok"] for v in rows.values())
        detail = f"{good}/{len(rows)} TFLite Micro example models match TFLite Micro (models/tflm)"
        return verdict(good == len(rows), detail, models=rows)

    try:
        stages = [("build", build), ("passes", passes), ("quantize", quant), ("tflm", tflm), ("plan", arena)]
        for name, fn in [*stages, ("examples", examples)]:
            demo.stage(name, fn)
        for name, fn in [*_model_stages(st, demo), *_target_stages(st, demo)]:
            demo.stage(name, fn)
    except RlxError:
        raise
    demo.report["verdicts"] = [{"stage": s, "verdict": v, "detail": d} for s, v, d in demo.verdicts]
    if as_json:
        print(json.dumps(demo.report, sort_keys=True, default=str))
    else:
        print()
        print(f"{'stage':<10} {'verdict':<8} detail")
        for s, v, d in demo.verdicts:
            print(f"{s:<10} {v:<8} {d}")
        print(f"\nfiles in {out_dir}/: " + ", ".join(sorted(p.name for p in out_dir.iterdir())))
    return 1 if demo.failed else 0


def _model_stages(st: dict[str, Any], demo: Demo) -> list[tuple[str, Callable[[], dict[str, Any]]]]:
    """Stages below and around int8: int4 weights, a mixed-precision pick, quantization-aware training, autodiff."""
    from rlx_edge.ir.serialize import save
    from rlx_edge.quant.ptq import quantize
    from rlx_edge.quant.report import quantization_report
    from rlx_edge.targets.reference import RunPlan, run

    x_test, y_test = st["test"]

    def held_out(q: Graph) -> float:
        """Top-1 of the integer graph ``q`` on the held-out split, through the integer reference."""
        rep = quantization_report(st["opt"], q, x_test, labels=y_test, optimize=False)
        return float(rep["accuracy"]["quantized"])

    def host_mismatches(q: Graph) -> tuple[int, int]:
        """(mismatches, inputs): the Cortex-M C of ``q`` built for the host vs the reference, every held-out image."""
        from rlx_edge.targets.cortexm import compile_host

        model, ref = compile_host(q), RunPlan(q)  # the reference prepared once for all inputs
        xq = _quantize_input(x_test, q)
        x, out = q.inputs[0], q.outputs[0]
        bad = sum(
            not np.array_equal(model.run({x: xq[i : i + 1]})[out], ref({x: xq[i : i + 1]})[out]) for i in range(len(xq))
        )
        return bad, len(xq)

    def int4():
        from rlx_edge.hil.qemu import run_qemu
        from rlx_edge.targets.cortexm import build_model_firmware, size_report

        q4 = quantize(st["opt"], st["record"], scheme="int4w", optimize=False)  # int8's calibration record
        save(q4, demo.out / "digits_cnn_int4w.rlx")
        acc = {"float": st["accuracy"]["float"], "int8": st["accuracy"]["quantized"], "int4w": held_out(q4)}
        with atomic_dir(demo.out / "firmware_int4w") as fw:
            elf, _ = build_model_firmware(q4, BOARD, fw)
        elf = demo.out / "firmware_int4w" / elf.relative_to(fw)
        xq = _quantize_input(x_test[:20], q4)
        out = q4.outputs[0]
        t = q4.types[out]
        got = run_qemu(elf, BOARD, list(xq), output_dtype=t.dtype.numpy, output_shape=t.shape)
        ref = RunPlan(q4)
        bad = sum(not np.array_equal(y, ref({q4.inputs[0]: xq[i : i + 1]})[out]) for i, y in enumerate(got))
        w4, w8 = _weight_array_bytes(q4), _weight_array_bytes(st["q"])
        ratio = w4 / w8
        flash = size_report(elf, BOARD)["flash_bytes"]
        demo.say(
            f"int4     held-out accuracy float {100 * acc['float']:.2f} %, int8 {100 * acc['int8']:.2f} %, "
            f"int4w {100 * acc['int4w']:.2f} %; Cortex-M4 firmware {len(xq) - bad}/{len(xq)} bit-exact; "
            f"weights in flash {w4:,} B vs int8 {w8:,} B ({ratio:.2f} x); firmware flash {flash:,} B"
        )
        detail = f"{len(xq) - bad}/{len(xq)} QEMU outputs equal; weight flash {ratio:.2f} x int8 (goal <= 0.55)"
        return verdict(
            bad == 0 and ratio <= INT4_FLASH_GOAL, detail, accuracy=acc, inputs=len(xq), mismatches=bad,
            weight_flash_bytes=w4, int8_weight_flash_bytes=w8, weight_flash_ratio=round(ratio, 4), flash_bytes=flash,
        )  # fmt: skip

    def mixed():
        from rlx_edge.quant.mixed import graph_flash_bytes, select_mixed

        calib, fout = st["calib"], st["opt"].outputs[0]

        def sqnr(q: Graph) -> float:  # the report's measurement, independent of the selector's own
            return float(quantization_report(st["opt"], q, calib, optimize=False)["outputs"][fout]["sqnr_db"])

        int8_db = sqnr(st["q"])
        target = round(int8_db - MIXED_BELOW_INT8_DB, 1)
        # int4w and int8 only: Cortex-M has no int16x8 kernels (and a target below int8's raises no layer)
        res = select_mixed(st["opt"], st["record"], calib, target, schemes=("int4w", "int8"), optimize=False)
        qm = res.graph
        save(qm, demo.out / "digits_cnn_mixed.rlx")
        got_db = sqnr(qm)
        counts = res.to_json()["schemes"]
        flash8 = graph_flash_bytes(st["q"])
        bad, n = host_mismatches(qm)
        demo.say(
            f"mixed    target {target:g} dB (int8 {int8_db:.1f} dB): "
            + ", ".join(f"{c.node} {c.scheme}" for c in res.layers)
            + f" ({', '.join(f'{k} x{v}' for k, v in sorted(counts.items()))}) -> {got_db:.1f} dB; "
            f"flash {res.flash_bytes:,} B vs int8 {flash8:,} B; Cortex-M host build bit-exact on {n - bad}/{n}"
        )
        detail = f"SQNR {got_db:.1f} dB, target {target:g} dB; {n - bad}/{n} host-built C outputs equal"
        return verdict(
            got_db >= target and bad == 0, detail, target_sqnr_db=target, int8_sqnr_db=int8_db, sqnr_db=got_db,
            schemes=counts, layers={c.node: c.scheme for c in res.layers}, flash_bytes=res.flash_bytes,
            int8_flash_bytes=flash8, inputs=n, mismatches=bad,
        )  # fmt: skip

    def qat_int4():
        from rlx_edge.quant.qat import qat

        x_train, y_train = st["train"]
        res = qat(
            st["opt"], x_train, y_train, scheme="int4w", epochs=QAT_EPOCHS, lr=QAT_LR, batch=32, seed=0,
            record=st["record"], optimize=False, progress=False,
        )  # fmt: skip
        save(res.graph, demo.out / "digits_cnn_qat_int4w.rlx")
        acc = {"float": st["accuracy"]["float"], "ptq_int4w": held_out(res.ptq_graph), "qat_int4w": held_out(res.graph)}
        bad, n = host_mismatches(res.graph)
        demo.say(
            f"qat      int4w, {QAT_EPOCHS} epochs ({res.seconds:.1f} s, loss {res.loss_before:.4f} -> "
            f"{res.loss_after:.4f}): held-out accuracy float {100 * acc['float']:.2f} %, "
            f"PTQ int4w {100 * acc['ptq_int4w']:.2f} %, QAT int4w {100 * acc['qat_int4w']:.2f} %; "
            f"Cortex-M host build bit-exact on {n - bad}/{n}"
        )
        detail = (f"QAT int4w {100 * acc['qat_int4w']:.2f} % vs PTQ int4w {100 * acc['ptq_int4w']:.2f} % "
                  f"(not lower); {n - bad}/{n} host-built C outputs equal")  # fmt: skip
        return verdict(
            bad == 0 and acc["qat_int4w"] >= acc["ptq_int4w"], detail, accuracy=acc, epochs=QAT_EPOCHS,
            loss_before=res.loss_before, loss_after=res.loss_after, weights_exact=res.weights_exact,
            inputs=n, mismatches=bad,
        )  # fmt: skip

    def autodiff():
        import jax

        from rlx_edge.autodiff import grad, value_and_grad
        from rlx_edge.ir.passes.manager import get_pass
        from rlx_edge.targets.jax import lower_graph

        g = _cross_entropy_f64(st["opt"], AD_BATCH)
        onehot = np.eye(g.types["labels"].shape[-1])[y_test[:AD_BATCH]]
        feeds = {g.inputs[0]: x_test[:AD_BATCH].astype(np.float64), "labels": onehot}
        w0 = np.array(g.params[AD_WRT])
        dg = grad(g, "loss", [AD_WRT])  # the weight becomes an input of the same name, fed each step
        save(dg, demo.out / "digits_cnn_grad.rlx")
        got = run(dg, {**feeds, AD_WRT: w0})[f"grad/{AD_WRT}"]
        # the loss as a function of the images, labels and the weight (value_and_grad lifts it to an input)
        lifted = value_and_grad(g, "loss", [AD_WRT])
        lifted.outputs = ["loss"]
        lifted = get_pass("dce")(lifted)
        with jax.enable_x64(True):
            fn = lower_graph(lifted).fn

            def loss(w):
                return fn(*({**feeds, AD_WRT: w}[v] for v in lifted.inputs))[0]

            want = np.asarray(jax.jit(jax.grad(loss))(w0))
        jax_err = float(np.max(np.abs(got - want))) / max(float(np.max(np.abs(want))), 1.0)
        # central differences of the reference in the coordinates of the largest gradients
        fd_err = 0.0
        for i in np.argsort(-np.abs(got).ravel(), kind="stable")[:AD_FD_COORDS]:
            step = np.zeros(w0.size)
            step[i] = AD_FD_STEP
            step = step.reshape(w0.shape)
            plus = float(run(lifted, {**feeds, AD_WRT: w0 + step})["loss"])
            minus = float(run(lifted, {**feeds, AD_WRT: w0 - step})["loss"])
            fd = (plus - minus) / (2 * AD_FD_STEP)
            fd_err = max(fd_err, abs(fd - float(got.flat[i])) / max(abs(float(got.flat[i])), 1.0))
        demo.say(
            f"autodiff grad of the cross-entropy of {AD_BATCH} images w.r.t. {AD_WRT} {tuple(w0.shape)} "
            f"({len(dg.nodes)} nodes, saved as digits_cnn_grad.rlx): vs jax.grad {jax_err:.1e}, "
            f"vs central differences in {AD_FD_COORDS} coordinates {fd_err:.1e} (relative)"
        )
        detail = f"vs jax.grad {jax_err:.1e}, vs central differences {fd_err:.1e} (limits {AD_REL:g}, {AD_FD_REL:g})"
        return verdict(jax_err <= AD_REL and fd_err <= AD_FD_REL, detail, jax_rel_error=jax_err, fd_rel_error=fd_err)

    stages = [("int4", int4), ("mixed", mixed)]
    try:
        import jax  # noqa: F401  # training and the JAX comparison need it (pip install rlx-edge[jax])
    except ImportError:
        demo.say("qat, autodiff: skipped (they need jax: pip install 'rlx-edge[jax]')")
        return stages

    def transformer():
        from rlx_edge.models.tiny_transformer import BUNDLED, bundled, jax_bit_exact, quantize_and_score, tokens

        qgraph, fig = quantize_and_score(bundled())
        jax_x = tokens(st["test"][0])[:TRANSFORMER_JAX_INPUTS]
        exact = jax_bit_exact(qgraph, jax_x)
        demo.say(
            f"transformer  2 layers, 4 heads, causal ({BUNDLED.name}, trained by rlx_edge.autodiff on JAX): "
            f"held-out accuracy float {fig['float_accuracy']:.2f} %, int8 {fig['int8_accuracy']:.2f} %; int8 on "
            f"JAX {'bit-exact' if exact else 'DIFFERS'} on {len(jax_x)} inputs "
            f"(training and QEMU M4: examples/tiny_transformer.py)"
        )
        detail = (
            f"tiny transformer int8 {fig['int8_accuracy']:.2f} % vs float {fig['float_accuracy']:.2f} % "
            f"(limit -1.5 points); JAX bit-exact on {len(jax_x)}"
        )
        ok = exact and fig["accuracy_drop"] <= 1.5
        return verdict(ok, detail, jax_inputs=len(jax_x), jax_bit_exact=exact, **fig)

    return [*stages, ("qat", qat_int4), ("autodiff", autodiff), ("transformer", transformer)]


def _weight_array_bytes(graph: Graph, build: str = "dsp") -> int:
    """Flash bytes of the conv / depthwise / fully connected weight arrays of one Cortex-M build (DSP: the M4's)."""
    from rlx_edge.quant.ptq import WEIGHTED
    from rlx_edge.targets.cortexm import emit, layer_for

    prog = emit(graph).program
    total = 0
    for node in prog.nodes():
        if node.op in WEIGHTED:
            layer = layer_for(prog.graph, node, prog.quant.get(node.name))
            for key, arr in layer.consts.items():
                if key.startswith("weights") and layer.guards.get(key, build) == build:  # no guard: both builds
                    total += arr.nbytes
    return total


def _cross_entropy_f64(g: Graph, batch: int) -> Graph:
    """Float graph ``g`` (ending in a softmax) in float64 for ``batch`` images, with a mean cross-entropy loss.

    Inputs: the image input and ``labels`` (one-hot); output ``loss``. float64 leaves central
    differences digits to measure, as in the autodiff tests.
    """
    from rlx_edge.ir.graph import Graph

    last = g.nodes[-1]
    if last.op != "softmax" or g.outputs != last.outputs:
        raise RlxError(f"graph {g.name!r}: the autodiff stage wants a classifier ending in softmax, not {last.op}")
    t = Graph(f"{g.name}_cross_entropy", "mir")
    x = g.inputs[0]
    t.input(x, (batch, *g.types[x].shape[1:]), "f64")
    labels = t.input("labels", (batch, g.types[last.outputs[0]].shape[-1]), "f64")
    for v, arr in g.params.items():
        t.param(v, arr.astype(np.float64))
    for n in g.nodes[:-1]:
        t.add_node(n.op, n.inputs, n.attrs, name=n.name, out_names=n.outputs)
    logp = t.log_softmax(last.inputs[0], axis=-1)
    t.output(t.neg(t.mean(t.sum(t.mul(logp, labels), axes=(1,)), axes=(0,)), name="loss"))
    return t


def _target_stages(st: dict[str, Any], demo: Demo) -> list[tuple[str, Callable[[], dict[str, Any]]]]:
    """Stages of the targets: Cortex-M C (host build), the same C as QEMU firmware, the FPGA simulation."""

    def cortexm_host():
        from rlx_edge.targets.cortexm import compile_host, compile_project

        with atomic_dir(demo.out / "cortexm") as project:  # a killed demo never leaves half a project
            info = compile_project(st["program"].graph, project, core="cortex-m4")
        model = compile_host(st["q"])
        out = st["q"].outputs[0]
        xq = st["xq"]
        bad = sum(
            not np.array_equal(model.run({st["q"].inputs[0]: xq[i : i + 1]})[out], _ref(st, xq[i : i + 1]))
            for i in range(len(xq))
        )
        demo.say(f"cortexm  C library in {demo.out / 'cortexm'}/ ({len(info['files'])} files); host build bit-exact "
                 f"on {len(xq) - bad}/{len(xq)}")  # fmt: skip
        return verdict(bad == 0, f"{len(xq) - bad}/{len(xq)} host-built C outputs equal to the reference",
                       files=sorted(info["files"]), arena_bytes=info["arena_bytes"])  # fmt: skip

    def qemu():
        from rlx_edge.hil.qemu import count_instructions, run_qemu
        from rlx_edge.ir.inspect import summary
        from rlx_edge.targets.cortexm import build_model_firmware, size_report

        board = board_name
        g = st["q"]
        with atomic_dir(demo.out / "firmware") as fw:
            elf, _ = build_model_firmware(g, board, fw)
        elf = demo.out / "firmware" / elf.relative_to(fw)
        out_t = g.types[g.outputs[0]]
        xq = st["xq"][:20]
        got = run_qemu(elf, board, list(xq), output_dtype=out_t.dtype.numpy, output_shape=out_t.shape)
        bad = sum(not np.array_equal(y, _ref(st, xq[i : i + 1])) for i, y in enumerate(got))
        instr = count_instructions(elf, board, xq[0])
        macs = summary(g)["macs"]
        sizes = size_report(elf, board)
        demo.say(
            f"qemu     Cortex-M4 ({board}): {len(xq) - bad}/{len(xq)} bit-exact; {instr:,} instructions "
            f"({instr / macs:.2f}/MAC); flash {sizes['flash_bytes']:,} B, RAM {sizes['ram_bytes']:,} B"
        )
        detail = f"{len(xq) - bad}/{len(xq)} firmware outputs equal; {instr / macs:.2f} instr/MAC"
        return verdict(bad == 0, detail, instructions=instr, macs=macs, **sizes)

    def profile_layers():
        from rlx_edge.hil.profile import profile

        # The same firmware once more, its invoke split per layer (exact counts) and the slowest
        # layers shown; the per-layer figure goes next to the arena plan.
        p = profile(st["q"], "m4", {st["q"].inputs[0]: st["xq"][:1]})
        p.plot(demo.out / "profile_m4.png")
        summed = sum(r.instructions for r in p.layers)
        top = sorted((r for r in p.layers if r.kernel), key=lambda r: -r.instructions)[:3]
        demo.say(
            f"profile  Cortex-M4: {len(p.layers)} layers, {summed:,} instructions (= the invoke's {p.instructions:,}); "
            + ", ".join(f"{r.name} {100 * r.share:.0f}%" for r in top)
            + f"; est. {p.est_latency_ms:.2f} ms at {p.clock_mhz:g} MHz"
        )
        detail = f"per-layer instructions sum to the invoke ({p.instructions:,}); output bit-exact"
        return verdict(p.bit_exact and summed == p.instructions, detail, instructions=p.instructions)

    def hil_link():
        from rlx_edge.hil.campaign import run_campaign

        # The HIL protocol over a link that corrupts, drops, duplicates or resets one message in five:
        # lost inputs are retried or reported, a corrupted result is never accepted.
        xq = st["xq"][:20]
        report = run_campaign(st["q"], board_name, data=list(xq), progress=False, timeout=0.5, faults=0.2)
        rep = report.to_json()
        answered, wrong = rep["answered"], rep["wrong_accepted"]
        demo.say(f"hil      link at fault rate 0.2 ({board_name}): {rep['faults_injected']} faults injected, "
                 f"{rep['retries']} retries, {answered}/{len(xq)} answered, {wrong} wrong accepted")  # fmt: skip
        detail = f"{rep['faults_injected']} faults: {answered}/{len(xq)} answered, {wrong} wrong accepted"
        return verdict(wrong == 0 and answered >= 0.9 * len(xq), detail, **{k: rep[k] for k in ("retries", "answered")})

    def farm():
        from rlx_edge.hil.farm import QemuFarm, require_labgrid, run_farm_campaign

        # The same campaign across a labgrid farm: a coordinator and an exporter on loopback serving
        # a Cortex-M4 and a Cortex-M3 QEMU place; the inputs are shared out, the results merged.
        require_labgrid()
        xq = st["xq"][:20]
        with QemuFarm(["qemu-m4", "qemu-m3"], prefix="demo") as lab:
            rep = run_farm_campaign([st["q"]], coordinator=lab.coordinator, data=list(xq)).to_json()
        share = ", ".join(f"{p['place']} {p['inputs']}" for p in rep["places"])
        demo.say(f"farm     labgrid, 2 QEMU places: {rep['count']}/{rep['requested']} inputs run ({share}), "
                 f"{rep['mismatches']} mismatches, {rep['lost']} lost, {rep['wall_s']:.1f} s")  # fmt: skip
        detail = f"{rep['count'] - rep['mismatches']}/{rep['requested']} bit-exact across 2 places"
        return verdict(rep["ok"], detail, places={p["place"]: p["inputs"] for p in rep["places"]})

    board_name = BOARD
    stages = [("cortexm", cortexm_host), ("qemu", qemu), ("profile", profile_layers), ("hil", hil_link)]
    stages.append(("farm", farm))
    try:
        from rlx_edge.targets.fpga import build_fpga
    except ImportError:
        return stages

    def fpga():
        g = st["q"]
        xq = st["xq"][:5]
        # PE = SIMD = 1 keeps the design small enough for the demo's simulation
        res = build_fpga(
            g, demo.out / "fpga", parallelism="area", simulate=True, data=[xq[:, None]], simulator="icarus"
        )
        bad = res.get("mismatches", 1)
        cycles = int(res["cycles"])
        demo.say(f"fpga     Icarus: {len(xq) - bad}/{len(xq)} bit-exact; {cycles:,} cycles/inference "
                 f"(ideal {int(res['ideal_cycles']):,} at PE x SIMD = 1)")  # fmt: skip
        detail = f"{len(xq) - bad}/{len(xq)} simulated outputs equal; {cycles:,} cycles"
        return verdict(bad == 0, detail, cycles=res.get("cycles"), resources=res.get("resources"))

    return [*stages, ("fpga", fpga)]


def _ref(st: dict[str, Any], x: np.ndarray) -> np.ndarray:
    from rlx_edge.targets.reference import RunPlan

    if "ref" not in st:  # prepared once: run() would prepare every node again for each input
        st["ref"] = RunPlan(st["q"])
    return st["ref"]({st["q"].inputs[0]: x})[st["q"].outputs[0]]
