"""Firmware at every ``--opt`` level: the kernels' asm blocks compile at each, and -O0 runs bit-exact.

The asm blocks of the DSP kernels take up to 14 registers; whether GCC finds
them depends on the optimization level, the core's tuning and what is inlined
around them. Each level is compiled here for the M4 and M7 (compile only:
register allocation fails before assembly), so a kernel change that only
builds at -O2 fails a test instead of a user's ``--opt O3`` build.
"""

from __future__ import annotations

import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from rlx_edge.boards import get_board
from rlx_edge.hil import qemu
from rlx_edge.targets.cortexm import build_model_firmware
from rlx_edge.targets.cortexm.firmware import OPT_LEVELS
from rlx_edge.targets.reference.compare import make_inputs
from rlx_edge.targets.reference.interpreter import run

KERNELS = Path(__file__).resolve().parents[3] / "rlx_edge" / "targets" / "cortexm" / "kernels"
# Cortex-M4 and M7 (the M33's DSP build is the M4's kernels under other tuning; each core costs
# ~10 s of compiles).
DSP_BOARDS = ("qemu-m4", "qemu-m7")
# -O0 is built and run below; -O2 (the default) and -Os are what the rest of the suite builds.
LEVELS = [o for o in OPT_LEVELS if o not in ("-O0", "-O2", "-Os")]


def _asm_kernels() -> list[Path]:
    return sorted(p for p in KERNELS.glob("*.c") if "__asm__" in p.read_text())


@pytest.mark.parametrize("board", DSP_BOARDS)
def test_asm_kernels_compile_at_every_level(board, tmp_path):
    gcc = shutil.which("arm-none-eabi-gcc")
    assert gcc, "arm-none-eabi-gcc is not installed (make setup installs it)"
    flags = [*get_board(board).cpu_flags, "-std=gnu11", "-Wall", "-Wextra", "-Werror", f"-I{KERNELS}", "-S"]
    jobs = [(src, opt) for src in _asm_kernels() for opt in LEVELS]
    assert len(jobs) >= 3 * len(LEVELS)  # convolve, depthwise and int4 kernels at least

    def compile_one(job: tuple[Path, str]) -> str:
        src, opt = job
        out = tmp_path / f"{src.stem}{opt}.s"
        r = subprocess.run([gcc, *flags, opt, str(src), "-o", str(out)], capture_output=True, text=True, check=False)
        return "" if r.returncode == 0 else f"{src.name} {opt}: {r.stderr.strip()[-600:]}"

    with ThreadPoolExecutor(max_workers=2) as pool:
        failed = [msg for msg in pool.map(compile_one, jobs) if msg]
    assert not failed, "\n".join(failed)


def test_kws_at_O0_builds_and_runs_bit_exact_on_m4(mlperf_graph, tmp_path):
    # An unoptimized build (--opt O0, to step through in a debugger) takes the kernels' C paths:
    # at -O0 GCC cannot find registers for their asm blocks.
    graph, board = mlperf_graph("kws"), get_board("qemu-m4")
    elf, _ = build_model_firmware(graph, board, tmp_path, opt="-O0")
    sample = make_inputs(graph, 1, seed=5)[0]
    out_t = graph.types[graph.outputs[0]]
    (y,) = qemu.run_qemu(
        elf, board, [sample[graph.inputs[0]]], output_dtype=out_t.dtype.numpy, output_shape=out_t.shape
    )
    assert np.array_equal(y, run(graph, sample)[graph.outputs[0]])
