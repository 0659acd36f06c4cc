"""rlx_binary_s16: int16 squared_difference, maximum and minimum with numpy broadcasting, bit-exact."""

from __future__ import annotations

import numpy as np

from rlx_edge.ir.graph import Graph
from rlx_edge.targets.cortexm import emit

from ..conftest import q16

SHAPES = [((2, 3, 4), (2, 3, 4)), ((1, 5, 1, 3), (5, 4, 1)), ((7,), (1,)), ((3, 1), (1, 6))]


def test_squared_difference_broadcast(check) -> None:
    rng = np.random.default_rng(1617)
    g = Graph("sqdiff-s16")
    for k, (sa, sb) in enumerate(SHAPES):
        a = g.input(f"a{k}", sa, "i16", quant=q16(rng.uniform(1e-4, 1e-3)))
        b = g.input(f"b{k}", sb, "i16", quant=q16(rng.uniform(1e-4, 1e-3)))
        # output scales that put the largest differences near the int16 limit or past it (saturating)
        out = q16(float(max(a.type.quant.scale[0], b.type.quant.scale[0])) ** 2 * 4 * rng.uniform(3e2, 3e4))
        g.output(g.squared_difference(a, b, name=f"sqd{k}", out_quant=out))
    assert emit(g).files["model.c"].count("rlx_binary_s16(") == len(SHAPES)
    assert check(g) == 9


def test_maximum_minimum_copy_and_requantize(check) -> None:
    rng = np.random.default_rng(1618)
    g = Graph("minmax-s16")
    for k, (sa, sb) in enumerate(SHAPES):
        qa = q16(rng.uniform(1e-4, 1e-3), int(rng.integers(-3, 4)))
        a = g.input(f"a{k}", sa, "i16", quant=qa)
        # even k: b and the output carry a's parameters (TFLite's case, stored values compared);
        # odd k: both operands are requantized onto the output's parameters
        b = g.input(f"b{k}", sb, "i16", quant=qa if k % 2 == 0 else q16(rng.uniform(1e-4, 1e-3), 1))
        out = qa if k % 2 == 0 else q16(rng.uniform(3e-4, 6e-4), -2)
        g.output(g.maximum(a, b, name=f"max{k}", out_quant=out))
        g.output(g.minimum(b, a, name=f"min{k}", out_quant=out))
    assert emit(g).files["model.c"].count("rlx_binary_s16(") == 2 * len(SHAPES)
    assert check(g) == 9
