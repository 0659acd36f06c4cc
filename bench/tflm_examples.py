"""TFLite Micro's example models (and the NCHW MobileNet v2) on QEMU: bit-exact, instructions, flash and RAM.

For each model and core: the model-runner firmware linked for the core's
QEMU board, one seeded input run under QEMU and compared with the integer
reference (``bit_exact``), the instructions of one ``rlx_model_invoke``
(QEMU's instruction counter, exact and repeatable), instructions per MAC,
the linked image's flash and RAM, and the planned arena. A model that does
not fit a board's memory is reported with the linker's reason instead.

MobileNet v2 (3.5 MB of int8 weights, 2.4 MB of activations, exported from
PyTorch with an NCHW input and a layout transpose) fits both boards
(mps2-an385 / -an386: 4 MB of code memory, 4 MB of RAM); the DSP build keeps
its weights int8 in flash (issue #17). One emulated inference is 670 M (M4)
to 1 G (M3) instructions, so the suite runs it on the host build and JAX only.

Usage: ``python bench/tflm_examples.py [--models person_detect,...] [--cores m4,m3]``
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
from _common import MODELS, record  # bench/ is on sys.path when run as a script

from rlx_edge.boards import ALIASES
from rlx_edge.errors import RlxError
from rlx_edge.frontends.tflite import load_tflite
from rlx_edge.hil import qemu
from rlx_edge.ir.inspect import summary
from rlx_edge.targets.cortexm import build_model_firmware, emit, size_report
from rlx_edge.targets.reference.compare import make_inputs
from rlx_edge.targets.reference.interpreter import run as run_reference

EXAMPLES = {
    "person_detect": MODELS / "tflm" / "person_detect.tflite",
    "micro_speech": MODELS / "tflm" / "micro_speech_quantized.tflite",
    "hello_world": MODELS / "tflm" / "hello_world_int8.tflite",
    "mobilenet_v2_nchw": MODELS / "tflm" / "mobilenet_v2_quantized_1x3x224x224.tflite",
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(EXAMPLES))
    ap.add_argument("--cores", default="m4,m3")
    args = ap.parse_args()
    workdir = Path(tempfile.gettempdir()) / "rlx-bench-tflm-examples"
    rows = {}
    for key in args.models.split(","):
        graph = load_tflite(EXAMPLES[key])
        macs = summary(graph)["macs"]
        sample = make_inputs(graph, 1, seed=3)[0]
        x = np.ascontiguousarray(sample[graph.inputs[0]])
        want = run_reference(graph, sample)[graph.outputs[0]]
        em = emit(graph)
        row = {"macs": macs, "arena_bytes": em.arena_bytes, "weight_bytes": em.weight_bytes, "cores": {}}
        for core in args.cores.split(","):
            board = ALIASES[f"qemu-{core}"]
            try:
                elf, _ = build_model_firmware(graph, board, workdir)
            except RlxError as e:
                lines = str(e).splitlines()
                reason = next((ln for ln in lines if "overflowed" in ln), lines[-1])
                row["cores"][core] = {"board": board, "fits": False, "reason": reason.strip()[:300]}
                print(f"{key} {core}: does not fit {board}", file=sys.stderr)
                continue
            out_t = graph.types[graph.outputs[0]]
            (y,) = qemu.run_qemu(elf, board, [x], output_dtype=out_t.dtype.numpy, output_shape=out_t.shape, timeout=600)
            n = qemu.count_instructions(elf, board, x, timeout=600)
            size = size_report(elf, board)
            row["cores"][core] = {
                "board": board,
                "fits": True,
                "bit_exact": bool(np.array_equal(y, want)),
                "instructions": n,
                "instr_per_mac": round(n / macs, 3),
                "flash_bytes": size["flash_bytes"],
                "ram_bytes": size["ram_bytes"],
            }
            print(f"{key} {core}: {n} instructions, {n / macs:.3f}/MAC", file=sys.stderr)
        rows[key] = row
    record("tflm_examples", {"models": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
