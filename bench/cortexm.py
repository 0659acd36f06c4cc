"""Cortex-M speed and size: exact QEMU instruction counts of the generated C.

For each int8 MLPerf Tiny model and core: instructions one inference
executes (``rlx_model_invoke``, counted by the TCG plugin, so exact and
repeatable), instructions per MAC, flash and RAM of the linked model-runner
firmware, our arena beside TFLite Micro's arena measured in the same run,
and, for the models named by --layers, the instructions of every layer from
one profiled run (``rlx_edge.hil.profile``: a layer is its kernel
call and the glue before it, so the layers add up to the whole invoke).

Reference (TOOLCHAIN.md, CMSIS-NN at 99f736a -Ofast, same plugin): KWS
2.952 instructions/MAC on Cortex-M4, 3.968 on Cortex-M3. Goals: <= 1.5 on M4
(DSP path) for KWS, VWW and IC; <= 4 on M3 (portable path).

    .venv/bin/python bench/cortexm.py [--models kws,vww,ic,ad] [--layers kws] [--opt -O2] [--optimize balanced]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
from _common import MLPERF_INT8, record  # bench/ is on sys.path when run as a script

from rlx_edge.boards import ALIASES
from rlx_edge.frontends.tflite import load_tflite
from rlx_edge.frontends.tflm import tflm_arena_bytes
from rlx_edge.hil import qemu
from rlx_edge.hil.profile import profile
from rlx_edge.ir.inspect import summary
from rlx_edge.targets.cortexm import build_model_firmware, emit, size_report
from rlx_edge.targets.reference.compare import make_inputs
from rlx_edge.targets.reference.interpreter import run as run_reference

BOARDS = {core: ALIASES[f"qemu-{core}"] for core in ("m4", "m3", "m7", "m33")}  # qemu-m4 -> qemu-mps2-an386
# which cores each model is measured on (M7 and M33 for KWS only: they take the M4's DSP path)
CORES = {"kws": ("m4", "m3", "m7", "m33"), "vww": ("m4", "m3"), "ic": ("m4", "m3"), "ad": ("m4", "m3")}
GOAL = {"m4": 1.5, "m3": 4.0}
CMSIS_NN_KWS = {"m4": 2.952, "m3": 3.968}
# the AD arena goal: TFLite Micro's arena x 0.30 (bench/arena.py)
ARENA_GOAL_VS_TFLM = {"kws": 0.70, "vww": 0.70, "ic": 0.90, "ad": 0.30}


def per_layer(graph, core: str, sample: dict, optimize: str) -> list[dict]:
    """Each layer's instructions from one profiled run (rlx_edge.hil.profile): its kernel
    call and the glue before it, so that the layers add up to the whole invoke."""
    prof = profile(graph, core, sample, optimize=optimize)
    if not prof.bit_exact:
        raise RuntimeError(f"{graph.name} on {core}: the profiled run's output differs from the reference")
    return [
        {
            "node": r.name,
            "op": r.op,
            "kernel": r.kernel,
            "instructions": r.instructions,
            "kernel_instructions": r.kernel_instructions,
            "est_cycles": r.est_cycles,
            "macs": r.macs,
            "instr_per_mac": round(r.instr_per_mac, 3) if r.instr_per_mac is not None else None,
        }
        for r in prof.layers
        if r.kernel is not None
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--models", default=",".join(MLPERF_INT8))
    ap.add_argument("--layers", default="kws", help="models whose kernel calls are counted one by one")
    ap.add_argument("--layer-cores", default="m4,m3")
    ap.add_argument("--opt", default="-O2")
    ap.add_argument("--optimize", default="balanced", choices=("size", "balanced", "speed"), help="the C's layouts")
    ap.add_argument("--check", action="store_true", help="also compare the QEMU output with the reference")
    args = ap.parse_args()
    layer_models = set(filter(None, args.layers.split(",")))
    layer_cores = set(args.layer_cores.split(","))
    workdir = Path(tempfile.gettempdir()) / "rlx-bench-cortexm"
    rows: dict = {}
    goals_met = {}
    for key in args.models.split(","):
        path = MLPERF_INT8[key]
        graph = load_tflite(path)
        macs = summary(graph)["macs"]
        sample = make_inputs(graph, 1, seed=3)[0]
        x = np.ascontiguousarray(sample[graph.inputs[0]])
        em = emit(graph, args.optimize)
        tflm = tflm_arena_bytes(path)
        row = {
            "macs": macs,
            "arena_bytes": em.arena_bytes,
            "tflm_arena_bytes": tflm,
            "arena_vs_tflm": round(em.arena_bytes / tflm, 4),
            "arena_goal_met": em.arena_bytes <= ARENA_GOAL_VS_TFLM[key] * tflm,
            "weight_bytes": em.weight_bytes,
            "cores": {},
        }
        for core in CORES[key]:
            board = BOARDS[core]
            elf, _info = build_model_firmware(graph, board, workdir, opt=args.opt, optimize=args.optimize)
            n = qemu.count_instructions(elf, board, x)
            size = size_report(elf, board)
            entry = {
                "board": board,
                "instructions": n,
                "instr_per_mac": round(n / macs, 3),
                "flash_bytes": size["flash_bytes"],
                "ram_bytes": size["ram_bytes"],
                "text_bytes": size["sections"].get(".text", 0),
            }
            if args.check:
                out_t = graph.types[graph.outputs[0]]
                (y,) = qemu.run_qemu(elf, board, [x], output_dtype=out_t.dtype.numpy, output_shape=out_t.shape)
                entry["bit_exact"] = bool(np.array_equal(y, run_reference(graph, sample)[graph.outputs[0]]))
            if core in GOAL and key != "ad":
                entry["goal_instr_per_mac"] = GOAL[core]
                entry["goal_met"] = entry["instr_per_mac"] <= GOAL[core]
                goals_met[f"{key}-{core}"] = entry["goal_met"]
            if key == "kws" and core in CMSIS_NN_KWS:
                entry["cmsis_nn_instr_per_mac"] = CMSIS_NN_KWS[core]
            if key in layer_models and core in layer_cores:
                entry["layers"] = per_layer(graph, core, sample, args.optimize)
            row["cores"][core] = entry
            print(f"{key} {core}: {n} instructions, {n / macs:.3f}/MAC", file=sys.stderr)
        rows[key] = row
    goals_met["ad-arena"] = rows["ad"]["arena_goal_met"] if "ad" in rows else None
    record("cortexm", {"opt": args.opt, "optimize": args.optimize, "models": rows, "goals_met": goals_met})
    return 0


if __name__ == "__main__":
    sys.exit(main())
