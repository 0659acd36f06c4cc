"""rlx_reduce_s16: int16 mean and sum (TFLite Micro's QuantizedMeanOrSum), bit-exact with the reference."""

from __future__ import annotations

import numpy as np

from rlx_edge.ir.graph import Graph
from rlx_edge.targets.cortexm import emit

from ..conftest import q16


def test_mean_and_sum_over_axes(check) -> None:
    rng = np.random.default_rng(1616)
    g = Graph("reduce-s16")
    cases = [((1, 4, 5, 8), (1, 2), True), ((2, 3, 7), (-1,), False), ((6,), (0,), False), ((2, 3, 4, 5), (0, 2), True)]
    for k, (shape, axes, keep) in enumerate(cases):
        # int16x8 is symmetric; the last case's zero points exercise the sum's offset and out_zp anyway
        zp = 0 if k < len(cases) - 1 else 300
        x = g.input(f"x{k}", shape, "i16", quant=q16(rng.uniform(1e-4, 1e-3), zp))
        count = int(np.prod([shape[a] for a in axes]))
        # mean: an output scale near the input's (1/count folded into the multiplier); sum: one that
        # holds most sums and saturates the largest
        g.output(g.mean(x, axes=axes, keepdims=keep, name=f"mean{k}", out_quant=q16(rng.uniform(1e-4, 1e-3), -zp)))
        s_sum = float(x.type.quant.scale[0]) * count * rng.uniform(0.3, 1.0)
        g.output(g.sum(x, axes=axes, keepdims=keep, name=f"sum{k}", out_quant=q16(s_sum, zp // 3)))
    assert emit(g).files["model.c"].count("rlx_reduce_s16(") == 2 * len(cases)
    assert check(g) == 9
