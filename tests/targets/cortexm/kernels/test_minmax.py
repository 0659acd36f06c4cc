"""rlx_minmax_s8: int8 maximum / minimum with broadcasting, operands copied or requantized, bit-exact."""

from __future__ import annotations

import numpy as np

from rlx_edge.ir.graph import Graph
from rlx_edge.ir.types import QuantParams
from rlx_edge.targets.cortexm import emit


def q8(scale: float, zp: int) -> QuantParams:
    return QuantParams(np.float32(scale), zp, storage="i8")


def test_minmax_copy_and_requantize(check) -> None:
    g = Graph("minmax-s8")
    qy = q8(0.05, -3)
    x = g.input("x", (2, 3, 4), "i8", quant=qy)
    y = g.input("y", (3, 1), "i8", quant=qy)
    z = g.input("z", (4,), "i8", quant=q8(0.13, 40))
    for op in ("maximum", "minimum"):
        f = getattr(g, op)
        g.output(f(x, y, name=f"{op}_copy", out_quant=qy))  # TFLite's case: both carry the output's parameters
        g.output(f(x, z, name=f"{op}_rescale_b", out_quant=qy))  # z requantized (> 1: saturates)
        g.output(f(z, x, name=f"{op}_rescale_both", out_quant=q8(0.02, 100)))  # both requantized
    assert emit(g).files["model.c"].count("rlx_minmax_s8(") == 6
    assert check(g) == 9
