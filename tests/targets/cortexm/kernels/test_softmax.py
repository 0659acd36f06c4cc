"""rlx_softmax_s8: TFLite's int8 softmax (exp table from the fixed-point reference)."""

from __future__ import annotations

import numpy as np

from rlx_edge.ir.graph import Graph

from ..conftest import q, rand_q


def test_softmax_random(check):
    rng = np.random.default_rng(61)
    g = Graph("softmax")
    for k, (shape, beta) in enumerate(
        [((1, 12), 1.0), ((3, 10), 0.5), ((2, 2, 7), 1.7), ((1, 300), 1.0), ((4, 1), 1.0)]
    ):
        x = g.input(f"x{k}", shape, "i8", quant=rand_q(rng, 0.02, 0.4))
        g.output(g.softmax(x, beta=beta, name=f"sm{k}", out_quant=q(1 / 256, -128)))
    assert check(g, n_inputs=8) == 11
