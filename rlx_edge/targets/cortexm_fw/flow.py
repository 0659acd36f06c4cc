"""Graph -> C project -> firmware ELF -> QEMU runner: the Cortex-M path in one place."""

from __future__ import annotations

import hashlib
import math
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rlx_edge.errors import RlxError
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


# The runner's limit on inputs and on outputs (RLX_FW_MAX_IO in runtime/rlx_model_iface.h).
MAX_IO = 8


@dataclass(frozen=True)
class IoLayout:
    """How the runner firmware lays a model's inputs (outputs) into its one input (output) buffer.

    Back to back, in the graph's order, each as its raw bytes; see
    ``runtime/rlx_model_iface.h``. The HIL protocol moves the whole buffer.
    """

    inputs: tuple[tuple[str, np.dtype, tuple[int, ...]], ...]
    outputs: tuple[tuple[str, np.dtype, tuple[int, ...]], ...]

    @classmethod
    def of(cls, graph: Graph) -> IoLayout:
        if len(graph.inputs) > MAX_IO or len(graph.outputs) > MAX_IO:
            raise RlxError(
                f"{graph.name}: {len(graph.inputs)} inputs and {len(graph.outputs)} outputs; "
                f"the firmware runner takes at most {MAX_IO} of each"
            )

        def spec(names: list[str]) -> tuple[tuple[str, np.dtype, tuple[int, ...]], ...]:
            ts = [graph.types[n] for n in names]
            return tuple((n, np.dtype(t.dtype.numpy), tuple(int(d) for d in t.shape)) for n, t in zip(names, ts))

        return cls(spec(graph.inputs), spec(graph.outputs))

    def pack(self, inputs: dict[str, np.ndarray]) -> bytes:
        """The input buffer's bytes for one set of named inputs."""
        parts = []
        for name, dtype, shape in self.inputs:
            if name not in inputs:
                raise RlxError(f"input {name!r} missing; the model takes {', '.join(n for n, _, _ in self.inputs)}")
            x = np.asarray(inputs[name])
            if x.dtype != dtype or x.size != math.prod(shape):
                raise RlxError(f"input {name!r} is {x.dtype}{list(x.shape)}; the model takes {dtype}{list(shape)}")
            parts.append(np.ascontiguousarray(x).tobytes())
        return b"".join(parts)

    def unpack(self, raw: bytes) -> dict[str, np.ndarray]:
        """The named outputs in the output buffer's bytes."""
        outs, off = {}, 0
        for name, dtype, shape in self.outputs:
            n = dtype.itemsize * math.prod(shape)
            outs[name] = np.frombuffer(raw[off : off + n], dtype=dtype).reshape(shape).copy()
            off += n
        if off != len(raw):
            raise RlxError(f"the firmware sent {len(raw)} output bytes; the model's outputs have {off}")
        return outs


def qemu_runner(
    graph: Graph, board: str, workdir: str | os.PathLike | None = None
) -> Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]:
    """A function running one input dict through the firmware under QEMU (one boot per call).

    Any number of inputs and outputs (up to :data:`MAX_IO`), laid out as :class:`IoLayout` says.
    """
    from rlx_edge.hil.qemu import run_qemu

    layout = IoLayout.of(graph)
    elf, _ = build_model_firmware(graph, board, workdir)

    def run_one(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        (raw,) = run_qemu(elf, board, [layout.pack(inputs)], output_dtype=np.uint8)
        return layout.unpack(raw.tobytes())

    return run_one
