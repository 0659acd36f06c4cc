"""rlx_fully_connected_s8 against the integer reference (per-tensor and per-channel weights)."""

from __future__ import annotations

import numpy as np

from rlx_edge.ir.graph import Graph
from rlx_edge.ir.types import QuantParams

from ..conftest import rand_q, wq


def test_fully_connected_random(check):
    rng = np.random.default_rng(31)
    g = Graph("fc")
    for k in range(8):
        i, o = int(rng.choice([1, 3, 8, 17, 64])), int(rng.choice([1, 2, 5, 8, 12]))
        lead = [(1,), (2,), (3,), (2, 3)][k % 4]
        x = g.input(f"x{k}", (*lead, i), "i8", quant=rand_q(rng, 0.01, 0.2))
        quant = wq(rng, o, 0) if k % 2 else QuantParams(np.float32(rng.uniform(0.002, 0.02)), 0)
        w = g.param(f"w{k}", rng.integers(-127, 128, (o, i)).astype(np.int8), quant=quant)
        b = g.param(f"b{k}", rng.integers(-3000, 3000, o).astype(np.int32)) if k != 3 else None
        act = str(rng.choice(["none", "relu", "relu6", "relu_n1_to_1"]))
        g.output(g.fully_connected(x, w, b, activation=act, name=f"fc{k}", out_quant=rand_q(rng, 0.05, 0.5)))
    assert check(g, n_inputs=5) == 8
