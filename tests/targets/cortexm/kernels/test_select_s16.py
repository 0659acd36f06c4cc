"""rlx_select_s16: int16 select_v2 with broadcasting, operands copied or requantized, bit-exact."""

from __future__ import annotations

from rlx_edge.ir.graph import Graph
from rlx_edge.targets.cortexm import emit

from ..conftest import q16


def test_select_copy_and_requantize(check) -> None:
    g = Graph("select-s16")
    qy = q16(0.002)
    c = g.input("c", (2, 1, 4), "bool")
    x = g.input("x", (2, 3, 4), "i16", quant=qy)
    y = g.input("y", (3, 1), "i16", quant=qy)
    z = g.input("z", (4,), "i16", quant=q16(0.0137, 3))
    g.output(g.select_v2(c, x, y, name="copy", out_quant=qy))  # TFLite's case: both carry the output's parameters
    g.output(g.select_v2(c, x, z, name="rescale_y", out_quant=qy))  # z requantized (> 1: saturates)
    g.output(g.select_v2(c, z, x, name="rescale_x", out_quant=q16(0.011, -2)))  # both requantized
    assert emit(g).files["model.c"].count("rlx_select_s16(") == 3
    assert check(g) == 9
