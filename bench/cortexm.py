"""Cortex-M speed and size: exact QEMU instruction counts of the generated C.

For each int8 MLPerf Tiny model and core: instructions one inference
executes (``rlx_model_invoke``, counted by the TCG plugin, so exact and
repeatable), instructions per MAC, flash and RAM of the linked model-runner
firmware, our arena beside TFLite Micro's arena measured in the same run,
and, for the models named by --layers, the instructions of every kernel call
(one QEMU boot per call site: a window from the call's ``bl`` to its return
address, so the call counts, its argument set-up does not).

Reference (TOOLCHAIN.md, CMSIS-NN at 99f736a -Ofast, same plugin): KWS
2.952 instructions/MAC on Cortex-M4, 3.968 on Cortex-M3. Goals: <= 1.5 on M4
(DSP path) for KWS, VWW and IC; <= 4 on M3 (portable path).

    .venv/bin/python bench/cortexm.py [--models kws,vww,ic,ad] [--layers kws] [--opt -O2]
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

import numpy as np
from _common import MLPERF_INT8, record  # bench/ is on sys.path when run as a script

from rlx_edge.boards import ALIASES
from rlx_edge.frontends.tflite import load_tflite
from rlx_edge.frontends.tflm import tflm_arena_bytes
from rlx_edge.hil import qemu
from rlx_edge.ir.inspect import node_macs, summary
from rlx_edge.targets.cortexm import InstructionCounter, build_model_firmware, emit, size_report
from rlx_edge.targets.cortexm.qemu import disassemble
from rlx_edge.targets.reference.compare import make_inputs
from rlx_edge.targets.reference.interpreter import run as run_reference

BOARDS = {core: ALIASES[f"qemu-{core}"] for core in ("m4", "m3", "m7", "m33")}  # qemu-m4 -> qemu-mps2-an386
# which cores each model is measured on (M7 and M33 for KWS only: they take the M4's DSP path)
CORES = {"kws": ("m4", "m3", "m7", "m33"), "vww": ("m4", "m3"), "ic": ("m4", "m3"), "ad": ("m4", "m3")}
GOAL = {"m4": 1.5, "m3": 4.0}
CMSIS_NN_KWS = {"m4": 2.952, "m3": 3.968}
# the AD arena goal: TFLite Micro's arena x 0.30 (bench/arena.py)
ARENA_GOAL_VS_TFLM = {"kws": 0.70, "vww": 0.70, "ic": 0.90, "ad": 0.30}

_BL = re.compile(r"^\s*([0-9a-f]+):\s+[0-9a-f]{4} [0-9a-f]{4}\s+bl\s+[0-9a-f]+ <(rlx_\w+|memcpy|memmove)>\s*$")


def _kernel_calls(graph) -> list[tuple[str, str, str]]:
    """(node, op, kernel) of every kernel call model.c makes, in call order."""
    model_c = emit(graph).files["model.c"]
    calls = []
    pending = None
    for line in model_c.splitlines():
        m = re.match(r"\s*/\* (\d+): (.*) \((\w+)\) \*/(.*)$", line)
        if m:
            pending = None if "no code" in m[4] else (m[2], m[3])
            continue
        m = re.match(r"\s*(rlx_\w+)\(", line)
        if m and pending is not None:
            calls.append((*pending, m[1]))
            pending = None
    return calls


def _call_sites(elf: Path) -> list[tuple[int, str]]:
    """(address, callee) of each bl inside the model's entry points, in address order."""
    out = disassemble(elf)
    sites, inside = [], False
    for line in out.splitlines():
        head = re.match(r"^[0-9a-f]+ <(\w+)>:$", line)
        if head:
            inside = head[1] in ("rlx_model_invoke_multi", "rlx_model_invoke")
            continue
        m = _BL.match(line) if inside else None
        if m and m[2].startswith("rlx_") and m[2] not in ("rlx_model_invoke_multi",):
            sites.append((int(m[1], 16), m[2]))
    return sorted(sites)


def _window_count(elf: Path, board: str, x: np.ndarray, start: int, stop: int) -> int:
    """Instructions from executing ``start`` until ``stop`` executes, on one inference."""
    with tempfile.TemporaryDirectory(prefix="rlx-bench-") as tmp:
        counter = InstructionCounter.window(elf, Path(tmp) / "icount.txt", start, [stop])
        with qemu.QemuSession(elf, board, timeout=120, plugin=counter.qemu_args) as s:
            r = s.invoke(x)
            if r.status != 0:
                raise RuntimeError(f"model returned {r.status}")
            s.exit(0)
        windows = counter.windows()
    if len(windows) != 1:
        raise RuntimeError(f"expected one window, got {windows}")
    return windows[0]


def per_layer(graph, elf: Path, board: str, x: np.ndarray) -> list[dict]:
    calls = _kernel_calls(graph)
    sites = _call_sites(elf)
    if [k for _, _, k in calls] != [c for _, c in sites]:
        raise RuntimeError(f"call sites {sites} do not match the layers {calls}")
    macs = {n.name: node_macs(graph, n) or 0 for n in graph.nodes}
    rows = []
    for (name, op, kernel), (addr, _) in zip(calls, sites):
        n = _window_count(elf, board, x, addr, addr + 4)
        m = macs.get(name, 0)
        rows.append(
            {
                "node": name,
                "op": op,
                "kernel": kernel,
                "instructions": n,
                "macs": m,
                "instr_per_mac": round(n / m, 3) if m else None,
            }
        )
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--models", default=",".join(MLPERF_INT8))
    ap.add_argument("--layers", default="kws", help="models whose kernel calls are counted one by one")
    ap.add_argument("--layer-cores", default="m4,m3")
    ap.add_argument("--opt", default="-O2")
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
        em = emit(graph)
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
            elf, _info = build_model_firmware(graph, board, workdir, opt=args.opt)
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
                entry["layers"] = per_layer(graph, elf, board, x)
            row["cores"][core] = entry
            print(f"{key} {core}: {n} instructions, {n / macs:.3f}/MAC", file=sys.stderr)
        rows[key] = row
    goals_met["ad-arena"] = rows["ad"]["arena_goal_met"] if "ad" in rows else None
    record("cortexm", {"opt": args.opt, "models": rows, "goals_met": goals_met})
    return 0


if __name__ == "__main__":
    sys.exit(main())
