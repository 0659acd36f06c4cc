"""Graph -> C project -> firmware ELF -> QEMU runner: the Cortex-M path in one place."""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from rlx_edge.ir.graph import Graph

# rlx-edge run targets -> QEMU boards
QEMU_TARGETS = {
    "qemu-m3": "qemu-mps2-an385",
    "qemu-m4": "qemu-mps2-an386",
    "qemu-m7": "qemu-mps2-an500",
    "qemu-m33": "qemu-mps2-an505",
}
# the core each board's C is compiled for (compile --target)
BOARD_CORES = {
    "qemu-mps2-an385": "cortex-m3",
    "qemu-mps2-an386": "cortex-m4",
    "qemu-mps2-an500": "cortex-m7",
    "qemu-mps2-an505": "cortex-m33",
    "nucleo-l4r5zi": "cortex-m4",
    "rpi-pico": "cortex-m0plus",
}


def _cache_root() -> Path:
    return Path(os.environ.get("RLX_EDGE_CACHE", Path(tempfile.gettempdir()) / "rlx-edge-firmware"))


def build_model_firmware(
    graph: Graph, board: str, workdir: str | os.PathLike | None = None, *, opt: str = "-O2"
) -> tuple[Path, dict[str, Any]]:
    """Compile ``graph``'s C project for ``board`` and link the model-runner firmware.

    Cached by the content of the generated project, the board and the flags.
    Returns the ELF and the project report of ``compile_project``.
    """
    from rlx_edge.targets.cortexm import compile_project
    from rlx_edge.targets.cortexm_fw.boards import get_board
    from rlx_edge.targets.cortexm_fw.build import build_firmware

    b = get_board(board)
    core = BOARD_CORES.get(b.name, "cortex-m4")
    root = Path(workdir) if workdir is not None else _cache_root()
    with tempfile.TemporaryDirectory(dir=_ensure(root)) as tmp:
        info = compile_project(graph, Path(tmp) / "project", core=core)
        digest = hashlib.sha256()
        for f in sorted(info["files"]):
            p = Path(tmp) / "project" / f
            digest.update(f.encode() + b"\0" + p.read_bytes())
        digest.update(f"{b.name} {opt}".encode())
        key = digest.hexdigest()[:16]
        out = root / key
        elf = out / "firmware.elf"
        if not elf.exists():
            project = out / "project"
            if not project.exists():
                staged = Path(tmp) / "project"
                _ensure(out)
                os.replace(staged, project)
            os.replace(build_firmware(project, b.name, out / "build", opt=opt), elf)
    return elf, info


def _ensure(p: Path) -> Path:
    p.mkdir(parents=True, exist_ok=True)
    return p


def qemu_runner(
    graph: Graph, board: str, workdir: str | os.PathLike | None = None
) -> Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]:
    """A function running one input dict through the firmware under QEMU (one boot per call)."""
    from rlx_edge.hil.qemu import run_qemu

    if len(graph.inputs) != 1 or len(graph.outputs) != 1:
        from rlx_edge.errors import RlxError

        raise RlxError("the QEMU runner handles models with one input and one output")
    elf, _ = build_model_firmware(graph, board, workdir)
    out_t = graph.types[graph.outputs[0]]
    shape = tuple(int(d) for d in out_t.shape)

    def run_one(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        x = np.ascontiguousarray(inputs[graph.inputs[0]])
        (y,) = run_qemu(elf, board, [x], output_dtype=out_t.dtype.numpy, output_shape=shape)
        return {graph.outputs[0]: y}

    return run_one
