"""The generated C of a real model (MLPerf Tiny KWS, int8) as firmware on every QEMU board.

Outputs must equal the integer reference bit for bit; the instruction count of
one inference is exact and repeatable. The suite's run of KWS on the M7
(an500) and M33 (an505) boards: tests/targets/cortexm/test_qemu_models.py
checks that BOARDS keeps them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from modelfiles import MLPERF
from rlx_edge.boards import get_board
from rlx_edge.frontends.tflite import load_tflite
from rlx_edge.hil.qemu import count_instructions_many, run_qemu
from rlx_edge.targets.cortexm import build_firmware, compile_project, size_report
from rlx_edge.targets.reference import run

KWS_MACS = 2_656_768
BOARDS = ["qemu-mps2-an385", "qemu-mps2-an386", "qemu-mps2-an500", "qemu-mps2-an505"]


@pytest.fixture(scope="module")
def kws():
    return load_tflite(MLPERF / "kws_ref_model.tflite")


@pytest.fixture(scope="module")
def kws_elves(kws, tmp_path_factory) -> dict[str, tuple[Path, dict]]:
    root = tmp_path_factory.mktemp("kws")
    out = {}
    for board in BOARDS:
        project = root / f"{board}-c"
        info = compile_project(kws, project, core=get_board(board).core)
        out[board] = (build_firmware(project, board, root / board), info)
    return out


def _inputs(graph) -> list[np.ndarray]:
    t = graph.types[graph.inputs[0]]
    shape = tuple(int(d) for d in t.shape)
    zp = int(t.quant.zero_point[0])
    rng = np.random.default_rng(1)
    # Around the zero point, like real MFCC features (uniform noise saturates
    # the classifier to one class), then the full range and the two extremes.
    near = [np.clip(rng.normal(zp, 30, size=shape).round(), -128, 127).astype(np.int8) for _ in range(3)]
    wide = rng.integers(-128, 128, size=shape, dtype=np.int8)
    return [*near, wide, np.full(shape, -128, np.int8), np.full(shape, 127, np.int8)]


@pytest.mark.parametrize("board", BOARDS)
def test_kws_bit_exact_with_reference(kws, kws_elves, board):
    elf, info = kws_elves[board]
    xs = _inputs(kws)
    out_t = kws.types[kws.outputs[0]]
    ys = run_qemu(elf, board, xs, timeout=60, output_shape=tuple(int(d) for d in out_t.shape))
    refs = [run(kws, x)[kws.outputs[0]] for x in xs]
    for k, (y, ref) in enumerate(zip(ys, refs)):
        assert np.array_equal(y, ref), f"input {k}: qemu {y.ravel()} reference {ref.ravel()}"
    # Different inputs give different answers, so a stuck output cannot pass.
    assert len({r.tobytes() for r in refs}) >= 3
    sizes = size_report(elf)
    # Weights are in flash, never copied to RAM; the arena is in RAM.
    assert sizes["flash_bytes"] > info["weight_bytes"]
    assert sizes["ram_bytes"] >= info["arena_bytes"] + sizes["stack_bytes"]
    assert sizes["ram_bytes"] < info["arena_bytes"] + sizes["stack_bytes"] + 2048


@pytest.mark.parametrize("board", ["qemu-mps2-an385", "qemu-mps2-an386"])
def test_kws_instruction_count(kws, kws_elves, board):
    elf, _ = kws_elves[board]
    xs = _inputs(kws)[:2]
    counts = count_instructions_many(elf, board, [xs[0], xs[1], xs[0]])
    # Exactly repeatable for the same input (and the kernels do the same work
    # for any input, up to data-dependent saturation branches).
    assert counts[0] == counts[2]
    per_mac = counts[0] / KWS_MACS
    # Below one instruction per MAC is impossible on these cores (no SIMD
    # beyond SMLAD's two MACs, plus loads); above 8 is far off the CMSIS-NN
    # figures (3-4 per MAC), i.e. the window would hold more than the model.
    assert 1.0 < per_mac < 8.0, per_mac
