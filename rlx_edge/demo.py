"""``rlx-edge demo``: the main job on the bundled default model.

The path grows with each capability: the trained digits CNN (float, built
with the Python API) -> optimizer passes -> calibration and int8
post-training quantization -> TFLite export checked bit-exactly against
TFLite Micro -> static arena plan (drawn) -> and, where available, the
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
from typing import Any

import numpy as np

from rlx_edge._io import atomic_dir
from rlx_edge.errors import RlxError


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
    x_train, _ = digits_data("train")
    x_test, y_test = digits_data("test")
    st: dict[str, Any] = {}

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
        record = calibrate(st["opt"], x_train[:200], method="minmax", progress=False, optimize=False)
        st["q"] = quantize(st["opt"], record, scheme="int8", optimize=False)
        save(st["q"], out_dir / "digits_cnn_int8.rlx")
        rep = quantization_report(st["opt"], st["q"], x_test, labels=y_test, optimize=False)
        acc = rep["accuracy"]
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
        out = st["q"].outputs[0]
        bad = sum(
            not np.array_equal(run(st["q"], xq[i : i + 1])[out], model([xq[i : i + 1]])[0]) for i in range(len(xq))
        )
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
            not np.array_equal(run_program(program, xq[i : i + 1])[out], run(st["q"], xq[i : i + 1])[out])
            for i in range(len(xq))
        )
        demo.say(
            f"plan     arena {program.arena_bytes:,} B (lower bound {program.lower_bound_bytes:,} B), "
            f"TFLite Micro {theirs:,} B; weights {program.weight_bytes:,} B; drawn to {out_dir / 'arena.png'}"
        )
        detail = f"arena {program.arena_bytes} B vs TFLite Micro {theirs} B; in-arena run bit-exact"
        return verdict(bad == 0, detail, tflm_arena_bytes=theirs, **program.summary())

    try:
        for name, fn in [("build", build), ("passes", passes), ("quantize", quant), ("tflm", tflm), ("plan", arena)]:
            demo.stage(name, fn)
        for name, fn in _target_stages(st, demo):
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

    board_name = "qemu-mps2-an386"
    stages = [("cortexm", cortexm_host), ("qemu", qemu), ("profile", profile_layers), ("hil", hil_link)]
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
    from rlx_edge.targets.reference import run

    return run(st["q"], x)[st["q"].outputs[0]]
