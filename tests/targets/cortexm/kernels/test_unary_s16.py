"""rlx_unary_s16: int16 abs, quantize (float32 -> int16) and dequantize (int16 -> float32), bit-exact."""

from __future__ import annotations

import numpy as np

from rlx_edge.ir.graph import Graph
from rlx_edge.targets.cortexm import emit

from ..conftest import check_feed, q16


def _kernels(g: Graph) -> str:
    return emit(g).files["model.c"]


def test_abs_with_and_without_rescale(check) -> None:
    g = Graph("abs-s16")
    x = g.input("x", (3, 5, 7), "i16", quant=q16(0.003))
    g.output(g.abs(x, name="same_scale", out_quant=q16(0.003)))  # no rescale: |x|, 32768 saturates
    g.output(g.abs(x, name="narrower", out_quant=q16(0.0011)))  # multiplier > 1 (a left shift), saturating
    g.output(g.abs(x, name="wider", out_quant=q16(0.0517)))  # multiplier < 1
    assert _kernels(g).count("rlx_unary_s16(") == 3
    assert check(g) == 9


def test_quantize_and_dequantize_round_trip(check, host_dir) -> None:
    g = Graph("quant-s16")
    x = g.input("x", (4, 33), "f32")
    for k, (scale, zp) in enumerate([(1.0 / 4096, 0), (0.00037, 5), (0.25, -3)]):
        qx = g.quantize(x, dtype="i16", name=f"q{k}", out_quant=q16(scale, zp))
        g.output(qx)
        g.output(g.dequantize(qx, name=f"dq{k}"))
    assert check(g) == 9
    # ties of x / scale (rounded half away from zero), NaN and infinities, which random inputs miss
    s = np.float32(1.0 / 4096)
    ties = (np.arange(-61, 61, dtype=np.float32) + np.float32(0.5)) * s
    special = np.array([np.nan, np.inf, -np.inf, 1e30, -1e30, 0.0, -0.0, 8.0, -8.0, 1e-9], np.float32)
    feed = {"x": np.concatenate([ties, special]).reshape(4, 33)}
    check_feed(g, host_dir, feed, equal_nan=True)
