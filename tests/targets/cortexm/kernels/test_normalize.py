"""rlx_log_softmax_s8 and rlx_l2_normalize_s8 against the reference: innermost, middle and outer axes."""

from __future__ import annotations

from rlx_edge.ir.graph import Graph
from rlx_edge.ir.ops.norm import L2_NORMALIZE_OUTPUT_SCALE
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


def test_l2_normalize_axes_and_zero_points(check):
    g = Graph("l2_normalize")
    out_q = q(L2_NORMALIZE_OUTPUT_SCALE, 0)
    # long slices take the inverse square root's renormalization (sums past 2**29); a 1-long
    # axis and the all-zero-point edge input give its special cases
    cases = [((2, 3, 10), -1, 5), ((1, 5, 4, 3), 1, -128), ((7, 6), 0, 0), ((2, 1000), -1, 127), ((4, 1, 3), 1, 9)]
    for k, (shape, axis, zp) in enumerate(cases):
        x = g.input(f"x{k}", shape, "i8", quant=q(0.05, zp))
        g.output(g.l2_normalize(x, axis=axis, name=f"l2n{k}", out_quant=out_q))
    assert check(g, n_inputs=8) == 11  # 8 random inputs and 3 edge ones
