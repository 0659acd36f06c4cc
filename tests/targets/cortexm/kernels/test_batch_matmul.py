"""rlx_batch_matmul_s8 / _s16 (TFLite BATCH_MATMUL): broadcast batch dimensions, vector operands,
a constant operand, equal to the reference on both builds."""

from __future__ import annotations

import numpy as np

from rlx_edge.ir.graph import Graph

from ..conftest import check_feed, q, q16


def test_batch_matmul_int8_and_int16(host_dir):
    rng = np.random.default_rng(17)
    g = Graph("bmm")
    shapes = [((2, 3, 4), (2, 4, 5)), ((3, 4), (1, 2, 4, 5)), ((2, 1, 3, 4), (3, 4, 2)), ((4,), (2, 4, 3)),
              ((2, 3, 4), (4,))]  # fmt: skip
    for k, (sa, sb) in enumerate(shapes):
        a = g.input(f"a{k}", sa, "i8", quant=q(0.05, int(rng.integers(-20, 20))))
        b = g.input(f"b{k}", sb, "i8", quant=q(0.04, int(rng.integers(-20, 20))))
        # a small output scale saturates some outputs, a large one few
        g.output(g.matmul(a, b, name=f"mm{k}", out_quant=q([0.05, 0.4][k % 2], int(rng.integers(-20, 20)))))
    # int16: large enough that the int64 requantization's rounding (unlike the int32 one) shows
    shapes16 = [((2, 16, 8), (2, 8, 12)), ((16, 8), (1, 2, 8, 12)), ((2, 1, 16, 8), (3, 8, 4))]
    for k, (sa, sb) in enumerate(shapes16):
        a = g.input(f"h{k}", sa, "i16", quant=q16(0.0005))
        b = g.input(f"g{k}", sb, "i16", quant=q16(0.0004))
        g.output(g.matmul(a, b, name=f"mm16_{k}", out_quant=q16([0.01, 0.0002, 0.02][k])))
    w = g.param("w", rng.integers(-128, 128, (4, 6)).astype(np.int8), quant=q(0.03, 5))
    c = g.input("c", (2, 3, 4), "i8", quant=q(0.05, -1))
    g.output(g.matmul(c, w, name="mm_const", out_quant=q(0.3, 4)))
    feed = {}
    for name in g.inputs:
        t = g.types[name]
        info = np.iinfo(t.dtype.numpy)
        feed[name] = rng.integers(info.min, info.max + 1, t.shape).astype(t.dtype.numpy)
    check_feed(g, host_dir, feed)
