"""rlx_add_s8 (TFLite int8 ADD / SUB) with and without broadcasting."""

from __future__ import annotations

import numpy as np
import pytest

from rlx_edge.ir.graph import Graph

from ..conftest import check_feed, rand_q


@pytest.mark.parametrize("op", ["add", "sub", "mul"])
def test_binary_random(check, op):
    rng = np.random.default_rng(51 + len(op))
    g = Graph(op)
    shapes = [
        ((1, 4, 5, 8), (1, 4, 5, 8)),
        ((2, 3, 8), (8,)),
        ((1, 4, 1, 3), (1, 1, 5, 3)),
        ((7,), (1,)),
        ((3, 5), (3, 5)),
    ]
    for k, (sa, sb) in enumerate(shapes):
        a = g.input(f"a{k}", sa, "i8", quant=rand_q(rng, 0.01, 0.3))
        b = g.input(f"b{k}", sb, "i8", quant=rand_q(rng, 0.01, 0.3))
        act = str(rng.choice(["none", "relu", "relu6"]))
        g.output(getattr(g, op)(a, b, activation=act, name=f"{op}{k}", out_quant=rand_q(rng, 0.02, 0.5)))
    assert check(g, n_inputs=6) == 9


@pytest.mark.parametrize("op", ["add", "sub"])
def test_add_sub_on_every_pair_of_bytes(host_dir, op):
    """The kernel sums two looked-up rescalings (the op's prepared tables) and requantizes in the
    fast form: every one of the 65,536 input pairs, for several scale sets and activations, on
    both builds, equals the reference."""

    rng = np.random.default_rng(3 + len(op))
    g = Graph(f"{op}_pairs")
    for k in range(4):
        a = g.input(f"a{k}", (256, 256), "i8", quant=rand_q(rng, 0.005, 0.3))
        b = g.input(f"b{k}", (256, 256), "i8", quant=rand_q(rng, 0.005, 0.3))
        act = ["none", "relu", "relu6", "none"][k]
        g.output(getattr(g, op)(a, b, activation=act, name=f"{op}{k}", out_quant=rand_q(rng, 0.01, 0.6)))
    grid = np.arange(-128, 128, dtype=np.int8)
    feed = {}
    for k in range(4):
        feed[f"a{k}"] = np.repeat(grid[:, None], 256, axis=1)
        feed[f"b{k}"] = np.repeat(grid[None, :], 256, axis=0)
    check_feed(g, host_dir, feed)
