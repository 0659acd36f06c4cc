"""rlx_lut_8: every unary byte op as a table of its integer reference (requantize, relu, logistic, ...)."""

from __future__ import annotations

import numpy as np
import pytest

from rlx_edge.ir.graph import Graph

from ..conftest import q, rand_q

OUT_Q = {"sigmoid": lambda rng: q(1 / 256, -128), "tanh": lambda rng: q(1 / 128, 0)}


@pytest.mark.parametrize("op", ["relu", "relu6", "clamp", "sigmoid", "tanh", "hard_swish", "requantize", "dequantize"])
def test_lut_random(check, op):
    rng = np.random.default_rng(71 + len(op))
    g = Graph(op)
    for k in range(3):
        x = g.input(f"x{k}", (1, 3, int(rng.integers(1, 9))), "i8", quant=rand_q(rng, 0.01, 0.3))
        attrs = {"min": -1.5, "max": 2.0} if op == "clamp" else {}
        if op == "requantize":
            attrs = {"dtype": "i8"}
        if op == "dequantize":
            y = g.dequantize(x, name=f"u{k}")
        else:
            oq = OUT_Q.get(op, lambda r: rand_q(r, 0.01, 0.3))(rng)
            y = getattr(g, op)(x, name=f"u{k}", out_quant=oq, **attrs)
        g.output(y)
    assert check(g, n_inputs=6) == 9
