"""Runnable targets by name, for ``rlx-edge run --target`` and ``compare --against``.

Each entry prepares a graph for one target and returns a function from one
input dict to the output dict. Entries import their target lazily so that a
missing optional dependency only matters when that target is asked for. This
module sits above :mod:`rlx_edge.hil` because the QEMU targets run firmware
that speaks the HIL protocol.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from rlx_edge.boards import QEMU_TARGETS
from rlx_edge.errors import RlxError
from rlx_edge.ir.graph import Graph

Runner = Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]


def _reference(graph: Graph, workdir: Path | None) -> Runner:
    from rlx_edge.targets.reference import RunPlan

    return RunPlan(graph)  # prepared and bound once, for every input that follows


def _cortexm_host(graph: Graph, workdir: Path | None) -> Runner:
    from rlx_edge.targets.cortexm import compile_host

    return compile_host(graph, workdir).run


def _jax(graph: Graph, workdir: Path | None, device: str = "cpu") -> Runner:
    try:
        from rlx_edge.targets.jax import compile_jax
    except ImportError as e:
        raise RlxError(f"the JAX target is not available here ({e}); pip install 'rlx-edge[jax]'") from None
    return compile_jax(graph, device=device)  # a batch-1 model takes its own shapes unchanged


def _qemu(board: str) -> Callable[[Graph, Path | None], Runner]:
    def prepare(graph: Graph, workdir: Path | None) -> Runner:
        # The firmware speaks the HIL protocol, whose host side is rlx_edge.hil.
        from rlx_edge.hil.qemu import qemu_runner

        return qemu_runner(graph, board, workdir)

    return prepare


def _fpga_sim(graph: Graph, workdir: Path | None) -> Runner:
    try:
        from rlx_edge.targets.fpga import fpga_runner
    except ImportError as e:
        raise RlxError(f"target fpga-sim is not available in this installation ({e})") from None
    return fpga_runner(graph, workdir)


TARGETS: dict[str, Callable[..., Runner]] = {
    "reference": _reference,
    "cortexm-host": _cortexm_host,
    **{name: _qemu(name) for name in QEMU_TARGETS},
    "fpga-sim": _fpga_sim,
    "jax": _jax,
}


def prepare(target: str, graph: Graph, workdir: str | Path | None = None, **options) -> Runner:
    """A function running ``graph`` on ``target``, one input dict at a time."""
    if target not in TARGETS:
        raise RlxError(f"unknown target {target!r}; use one of {', '.join(TARGETS)}")
    return TARGETS[target](graph, None if workdir is None else Path(workdir), **options)
