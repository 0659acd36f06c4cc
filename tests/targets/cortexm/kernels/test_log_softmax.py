"""rlx_log_softmax_s8 against the reference: innermost, middle and outer axes, fine and coarse input scales."""

from __future__ import annotations

from rlx_edge.ir.graph import Graph
from rlx_edge.ir.ops.reduce import LOG_SOFTMAX_OUTPUT_SCALE, LOG_SOFTMAX_OUTPUT_ZERO_POINT

from ..conftest import q


def test_log_softmax_axes_and_scales(check):
    g = Graph("log_softmax")
    out_q = q(LOG_SOFTMAX_OUTPUT_SCALE, LOG_SOFTMAX_OUTPUT_ZERO_POINT)
    # a fine scale keeps every difference in the sum; coarse ones cut rows at diff_min and at
    # the bottom of Q5.26; a 1-long axis gives log(1) = 0 everywhere
    cases = [((2, 3, 10), -1, 0.004), ((1, 5, 4, 3), 1, 0.1), ((7, 6), 0, 0.5), ((300,), 0, 0.02),
             ((4, 1, 3), 1, 0.1), ((2, 9), -1, 4.0)]  # fmt: skip
    for k, (shape, axis, scale) in enumerate(cases):
        x = g.input(f"x{k}", shape, "i8", quant=q(scale, -3))
        g.output(g.log_softmax(x, axis=axis, name=f"ls{k}", out_quant=out_q))
    assert check(g, n_inputs=8) == 11  # 8 random inputs and 3 edge ones
