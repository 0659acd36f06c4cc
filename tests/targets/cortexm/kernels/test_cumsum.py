"""rlx_cumsum_s8 (TFLite int8 CUMSUM): every axis, exclusive and reverse, wrapping sums, equal to the
reference on both builds."""

from __future__ import annotations

import itertools

import numpy as np

from rlx_edge.ir.graph import Graph

from ..conftest import check_feed, q


def test_cumsum_every_axis_and_flag(host_dir):
    rng = np.random.default_rng(23)
    g = Graph("cumsum")
    k = 0
    for axis, exclusive, reverse in itertools.product((0, 1, -1), (False, True), (False, True)):
        x = g.input(f"x{k}", (3, 4, 5), "i8", quant=q(0.05, int(rng.integers(-30, 30))))
        g.output(g.cumsum(x, axis=axis, exclusive=exclusive, reverse=reverse, name=f"cs{k}", out_quant=q(0.3, 2)))
        k += 1
    # a long axis of large values: the int32 running sums wrap
    x = g.input("long", (40, 2), "i8", quant=q(0.1, -128))
    g.output(g.cumsum(x, axis=0, name="cs_long", out_quant=q(0.5, 0)))
    feed = {n: rng.integers(-128, 128, g.types[n].shape).astype(np.int8) for n in g.inputs}
    feed["long"][:, 1] = 127
    check_feed(g, host_dir, feed)
