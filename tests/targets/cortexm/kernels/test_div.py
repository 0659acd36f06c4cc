"""rlx_div_s8 (TFLite int8 DIV): every pair of input bytes, and broadcasting, equal to the reference."""

from __future__ import annotations

import numpy as np

from rlx_edge.ir.graph import Graph

from ..conftest import check_feed, q


def test_div_on_every_pair_of_bytes_and_broadcast(host_dir):
    """The scale sets reach a zero divisor, output shifts past 31 (small dividends: the kernel's
    x86-64 emulation), a negative divisor and each activation; the broadcast branches take the
    kernel's strided loop. Both builds (portable, DSP emulated) equal the reference."""

    scales = [
        ((0.05, -3), (0.07, 20), (0.02, 5), "none"),
        ((1.0, 0), (1.0, 0), (1.0, 0), "none"),
        ((0.003, 100), (0.2, -50), (10.0, -128), "relu"),
        ((0.01, 10), (0.5, -7), (0.0005, 3), "relu6"),
    ]
    g = Graph("div_pairs")
    for k, (qa, qb, qy, act) in enumerate(scales):
        a = g.input(f"a{k}", (256, 256), "i8", quant=q(*qa))
        b = g.input(f"b{k}", (256, 256), "i8", quant=q(*qb))
        g.output(g.div(a, b, activation=act, name=f"div{k}", out_quant=q(*qy)))
    for k, (sa, sb) in enumerate([((2, 3, 8), (8,)), ((1, 4, 1, 3), (1, 1, 5, 3))]):
        a = g.input(f"ba{k}", sa, "i8", quant=q(0.04, 7))
        b = g.input(f"bb{k}", sb, "i8", quant=q(0.03, -9))
        g.output(g.div(a, b, name=f"bdiv{k}", out_quant=q(0.05, 2)))
    bits = np.arange(256, dtype=np.uint8).view(np.int8)
    rng = np.random.default_rng(11)
    feed = {}
    for k in range(len(scales)):
        feed[f"a{k}"] = np.repeat(bits[:, None], 256, axis=1)
        feed[f"b{k}"] = np.repeat(bits[None, :], 256, axis=0)
    for name in g.inputs:
        if name not in feed:
            feed[name] = rng.integers(-128, 128, g.types[name].shape).astype(np.int8)
    check_feed(g, host_dir, feed)
