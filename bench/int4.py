"""int4 weights end to end: VWW and IC quantized int8 and int4w, TFLite export, Cortex-M flash and speed.

For the float MLPerf Tiny VWW and IC models, quantized from seeded uniform
random calibration data (8 samples over the input's range, as
tests/quant/test_ptq.py does) with scheme int8 and int4w:

- the int4w model exported to ``.tflite`` (INT4 tensors) and compared with
  TFLite Micro on every output and intermediate (``compare_with_tflm``, 5
  seeded inputs plus the edge inputs): mismatches must be 0;
- Cortex-M flash, from the compiled model's constants (``emit``): the
  weight arrays of the conv / depthwise / fully connected layers, and all
  constants (weights.c, the core's own build), int4w against int8;
- on qemu-m4 (the DSP path) and qemu-m3 (portable): instructions of one
  inference and per MAC (exact, the TCG plugin), and whether the output is
  bit-exact with the reference;
- JAX (CPU): bit-exact with the reference on the same inputs.

Prints one JSON line and appends it to bench/results/int4.jsonl.

    .venv/bin/python bench/int4.py [--models vww,ic] [--cores m4,m3]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
from _common import MODELS, record  # bench/ is on sys.path when run as a script

from rlx_edge.boards import ALIASES
from rlx_edge.frontends.tflite import export_tflite, load_tflite
from rlx_edge.hil import qemu
from rlx_edge.ir.inspect import summary
from rlx_edge.quant.calibrate import calibrate
from rlx_edge.quant.ptq import quantize
from rlx_edge.runners import prepare
from rlx_edge.targets.cortexm import build_model_firmware, emit
from rlx_edge.targets.cortexm.rules import layer_for
from rlx_edge.targets.reference.compare import compare_with_tflm, make_inputs
from rlx_edge.targets.reference.interpreter import run as run_reference

FLOAT = {
    "vww": (MODELS / "mlperf-tiny" / "vww_96_float.tflite", 0.0, 1.0),
    "ic": (MODELS / "mlperf-tiny" / "pretrainedResnet.tflite", 0.0, 255.0),
}
WEIGHTED = ("conv2d", "depthwise_conv2d", "fully_connected")
GOAL_RATIO = 0.55  # issue 18: int4w weight flash <= 0.55 x int8


def weight_flash(graph) -> dict:
    """Bytes of the weighted layers' weight arrays (per build) and of all constants, as emitted."""
    em = emit(graph)
    prog = em.program
    arrays = {"dsp": 0, "portable": 0}
    for node in prog.nodes():
        if node.op not in WEIGHTED:
            continue
        layer = layer_for(prog.graph, node, prog.quant.get(node.name))
        for key, arr in layer.consts.items():
            if key.startswith("weights"):
                for build in arrays:
                    if layer.guards.get(key, build) == build:
                        arrays[build] += arr.nbytes
    n = sum(int(prog.graph.params[n.inputs[1]].size) for n in prog.nodes() if n.op in WEIGHTED)
    return {
        "weights": n,
        "weight_array_bytes": arrays,
        "const_bytes": {"dsp": em.weight_bytes_dsp, "portable": em.weight_bytes_portable},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--models", default="vww,ic")
    ap.add_argument("--cores", default="m4,m3")
    args = ap.parse_args()
    workdir = Path(tempfile.gettempdir()) / "rlx-bench-int4"
    workdir.mkdir(parents=True, exist_ok=True)
    rows: dict = {}
    for key in args.models.split(","):
        path, lo, hi = FLOAT[key]
        g = load_tflite(path)
        shape = tuple(int(d) for d in g.types[g.inputs[0]].shape)
        calib = np.random.default_rng(0).uniform(lo, hi, (8, *shape[1:])).astype(np.float32)
        rec = calibrate(g, calib)
        q = {s: quantize(g, rec, scheme=s) for s in ("int8", "int4w")}
        macs = summary(q["int8"])["macs"]
        row: dict = {"macs": macs}
        tfl = export_tflite(q["int4w"], workdir / f"{key}_int4w.tflite")
        res = compare_with_tflm(tfl, n_inputs=5, seed=0)
        row["tflm"] = {"tensors": res.tensors, "compared": res.compared, "mismatches": res.mismatches}
        row["tflm"]["bit_exact"] = res.ok
        flash = {s: weight_flash(q[s]) for s in q}
        row["flash"] = flash
        # both builds hold the same int4 arrays; the int8 side's larger build is the reference
        i8 = max(flash["int8"]["weight_array_bytes"].values())
        i4 = max(flash["int4w"]["weight_array_bytes"].values())
        row["weight_flash_ratio"] = round(i4 / i8, 4)
        consts = {s: max(flash[s]["const_bytes"].values()) for s in flash}
        row["const_flash_ratio"] = round(consts["int4w"] / consts["int8"], 4)
        row["goal_met"] = row["weight_flash_ratio"] <= GOAL_RATIO
        samples = make_inputs(q["int4w"], 2, seed=3)
        refs = {s: run_reference(q[s], samples[0])[q[s].outputs[0]] for s in q}
        jax_run = prepare("jax", q["int4w"])
        out4 = q["int4w"].outputs[0]
        row["jax_bit_exact"] = all(
            np.array_equal(jax_run(smp)[out4], run_reference(q["int4w"], smp)[out4]) for smp in samples
        )
        row["cores"] = {}
        for core in args.cores.split(","):
            board = ALIASES[f"qemu-{core}"]
            entry = {"board": board}
            for s, graph in q.items():
                elf, _info = build_model_firmware(graph, board, workdir)
                x = np.ascontiguousarray(samples[0][graph.inputs[0]])
                n = qemu.count_instructions(elf, board, x)
                out_t = graph.types[graph.outputs[0]]
                (y,) = qemu.run_qemu(elf, board, [x], output_dtype=out_t.dtype.numpy, output_shape=out_t.shape)
                entry[s] = {
                    "instructions": n,
                    "instr_per_mac": round(n / macs, 3),
                    "bit_exact": bool(np.array_equal(y, refs[s])),
                }
                print(f"{key} {core} {s}: {n} instructions, {n / macs:.3f}/MAC", file=sys.stderr)
            row["cores"][core] = entry
        rows[key] = row
    record("int4", {"models": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
