"""Stateful models (SVDF, LSTM) on a target over one sequence of invokes, each side threading its own states.

:func:`reference_sequence` draws the inputs and runs the reference, feeding
each state update back; a target side runs the same samples through
``run_threaded`` with its own invoke, so the states it feeds back are the
ones it computed itself and a dropped or corrupted state shows from the
next invoke on. :func:`assert_threaded_equal` compares every output of every
invoke bit-exactly. :func:`threaded_pairs` pairs the two sides invoke by invoke
for a caller that compares within a float tolerance.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from rlx_edge.boards import ALIASES
from rlx_edge.hil.qemu import QemuSession
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.interpret import run
from rlx_edge.targets.cortexm import build_model_firmware
from rlx_edge.targets.cortexm.firmware import IoLayout
from rlx_edge.targets.reference.compare import make_inputs, run_threaded

Feeds = list[dict[str, np.ndarray]]


def reference_sequence(g: Graph, n_random: int, seed: int, moving: str) -> tuple[Feeds, Feeds]:
    """``n_random`` random inputs then the 3 edge inputs, and the reference's outputs over them.

    ``moving`` is a state update that must change on every invoke: were it
    constant, a side that dropped its state inputs could still match.
    """
    samples = make_inputs(g, n_random, seed=seed)
    assert len(samples) == n_random + 3 and all(list(s) == g.inputs[:1] for s in samples)  # states are not drawn
    wants = run_threaded(g, samples, lambda feed: run(g, feed))
    assert len({w[moving].tobytes() for w in wants}) == len(samples)
    return samples, wants


def threaded_pairs(g: Graph, feeds: Feeds, invoke: Callable[[dict[str, np.ndarray]], Any]) -> list[tuple[dict, dict]]:
    """(reference outputs, ``invoke``'s outputs) of every invoke, each side threading its own states from
    TFLite Micro's initial ones (the zero points)."""
    return list(zip(run_threaded(g, feeds, lambda feed: run(g, feed)), run_threaded(g, feeds, invoke)))


def assert_threaded_equal(g: Graph, wants: Feeds, gots: Feeds, where: str) -> None:
    assert len(gots) == len(wants)
    for k, (want, got) in enumerate(zip(wants, gots)):
        for name in g.outputs:
            assert np.array_equal(want[name], got[name]), f"{where}, invoke {k}: {name}"


def qemu_threaded(g: Graph, samples: Feeds, core: str, tmp_path: Path) -> tuple[Feeds, str]:
    """The firmware's outputs over the whole sequence in one QEMU boot, its state outputs fed back as its
    next state inputs; also the board it ran on."""
    board = ALIASES[f"qemu-{core}"]
    elf, _ = build_model_firmware(g, board, tmp_path)
    layout = IoLayout.of(g)
    with QemuSession(elf, board) as session:

        def invoke(feed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
            r = session.invoke(layout.pack(feed))
            assert r.status == 0
            return layout.unpack(r.output)

        gots = run_threaded(g, samples, invoke)
        assert session.exit(0) == 0
    return gots, board
