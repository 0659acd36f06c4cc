"""rlx_avgpool_s8 and rlx_maxpool_s8 (and global average pooling) against the integer reference."""

from __future__ import annotations

import numpy as np
import pytest

from rlx_edge.ir.graph import Graph

from ..conftest import rand_q


@pytest.mark.parametrize("op", ["avg_pool2d", "max_pool2d", "global_avg_pool"])
def test_pooling_random(check, op):
    rng = np.random.default_rng(41 + len(op))
    g = Graph("pool")
    for k in range(6):
        c = int(rng.choice([1, 3, 8, 16]))
        kh, kw = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        h, w = int(rng.integers(kh, 9)), int(rng.integers(kw, 9))
        qx = rand_q(rng)
        x = g.input(f"x{k}", (int(rng.choice([1, 2])), h, w, c), "i8", quant=qx)
        if op == "global_avg_pool":
            y = g.global_avg_pool(x, name=f"p{k}", out_quant=qx)
        else:
            attrs = {
                "kernel": (kh, kw),
                "strides": tuple(int(s) for s in rng.integers(1, 3, 2)),
                "padding": str(rng.choice(["same", "valid"])),
                "activation": str(rng.choice(["none", "relu", "relu6"])),
            }
            y = getattr(g, op)(x, name=f"p{k}", out_quant=qx, **attrs)
        g.output(y)
    assert check(g, n_inputs=5) == 8
