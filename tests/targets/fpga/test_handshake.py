"""The datapath's valid/ready edges under a bench that stalls, and the bench's X/Z check.

The model tests drive a beat whenever the datapath is ready and keep every
output ready, so their cycle counts measure the datapath alone. Here the
bench's ``stalls`` mode (``hdl/tb_datapath.py``, one ``cocotb.parametrize``
case) drops input ``valid`` and output ``ready`` on seeded random cycles:
every output must still equal the reference bit for bit, with no beat lost,
repeated or reordered, on designs whose output spans several beats.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rlx_edge.errors import RlxError
from rlx_edge.targets.fpga import FpgaDesign, sim, write
from rlx_edge.targets.fpga.edges import to_streams
from rlx_edge.targets.reference import run as ref_run

from . import _graphs


def _vectors(design: FpgaDesign, n: int, seed: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    g = design.graph
    rng = np.random.default_rng(seed)
    inputs = [rng.integers(-128, 128, (n, *g.types[v].shape)).astype(np.int8) for v in g.inputs]
    streams = to_streams(g, g, design.edges, inputs)
    expected = [np.stack([ref_run(g, [a[i] for a in streams])[o] for i in range(n)]) for o in g.outputs]
    return streams, expected


def _simulate(tmp_path: Path, graph, parallelism, handshake: str, simulator: str = "icarus", n: int = 3) -> dict:
    design = FpgaDesign(graph, parallelism)
    paths = write(design, tmp_path)
    streams, expected = _vectors(design, n, seed=3)
    bdir = sim.build([paths["verilog"]], design.top_name, simulator)
    res = sim.run_vectors(
        bdir,
        design.top_name,
        design.stream_info(),
        streams,
        expected,
        simulator=simulator,
        data_files=paths["roms"],
        handshake=handshake,
    )
    return res


@pytest.mark.parametrize("builder", ["add"])
def test_random_stalls_on_both_edges_are_bit_exact(tmp_path: Path, builder):
    g = getattr(_graphs, builder)(np.random.default_rng(7))
    steady = _simulate(tmp_path / "steady", g, 2, "steady")
    stalled = _simulate(tmp_path / "stalls", g, 2, "stalls")
    assert (steady["handshake"], stalled["handshake"]) == ("steady", "stalls")
    assert steady["mismatches"] == 0 and stalled["mismatches"] == 0, stalled["first_mismatch"]
    for a, b in zip(steady["outputs"], stalled["outputs"]):
        assert np.array_equal(a, b)
    # the stalls really happened: every inference took longer than with a steady neighbour
    assert all(s > t for s, t in zip(stalled["cycles"], steady["cycles"])), (stalled["cycles"], steady["cycles"])


def test_unknown_handshake_is_refused(tmp_path: Path):
    with pytest.raises(RlxError, match="handshake 'bursty': choose one of steady, stalls"):
        sim.run_vectors(tmp_path, "top", {"inputs": [], "outputs": []}, [np.zeros((1, 1))], [], handshake="bursty")
