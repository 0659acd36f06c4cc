"""rlx_depthwise_conv_3x3_s8 and rlx_depthwise_conv_s8 against the integer reference."""

from __future__ import annotations

import numpy as np
import pytest

from rlx_edge.ir.graph import Graph
from rlx_edge.targets.cortexm import emit

from ..conftest import rand_q, wq


@pytest.mark.parametrize("fast", [True, False])
def test_depthwise_random(check, fast):
    rng = np.random.default_rng(21 + fast)
    g = Graph("dw")
    for k in range(8):
        c = int(rng.choice([4, 8, 6, 3, 12]))
        m = 1 if fast else int(rng.choice([1, 2, 3]))
        kh, kw = (3, 3) if fast else (int(rng.integers(1, 5)), int(rng.integers(1, 4)))
        h, w = int(rng.integers(3, 9)), int(rng.integers(3, 8))
        attrs = {
            "strides": tuple(int(s) for s in rng.integers(1, 3, 2)),
            "dilations": (1, 1) if fast else tuple(int(d) for d in rng.integers(1, 3, 2)),
            "padding": str(rng.choice(["same", "valid"])),
            "activation": str(rng.choice(["none", "relu", "relu6"])),
            "depth_multiplier": m,
        }
        if attrs["padding"] == "valid":
            h, w = h + 4, w + 4
        x = g.input(f"x{k}", (int(rng.choice([1, 2])), h, w, c), "i8", quant=rand_q(rng, 0.01, 0.1))
        wt = g.param(f"w{k}", rng.integers(-127, 128, (1, kh, kw, c * m)).astype(np.int8), quant=wq(rng, c * m, 3))
        b = g.param(f"b{k}", rng.integers(-3000, 3000, c * m).astype(np.int32))
        g.output(g.depthwise_conv2d(x, wt, b, name=f"dw{k}", out_quant=rand_q(rng, 0.02, 0.3), **attrs))
    model_c = emit(g).files["model.c"]
    want = "rlx_depthwise_conv_3x3_s8(" if fast else "rlx_depthwise_conv_s8("
    assert model_c.count(want) == 8
    assert check(g, n_inputs=5) == 8
