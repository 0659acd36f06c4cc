"""rlx_pad, rlx_concat, rlx_mean_s8, rlx_quantize_f32_s8 and reshape views."""

from __future__ import annotations

import numpy as np

from rlx_edge.ir.graph import Graph
from rlx_edge.targets.cortexm import emit

from ..conftest import q, rand_q


def test_pad_random(check):
    rng = np.random.default_rng(81)
    g = Graph("pad")
    for k, (shape, pads) in enumerate(
        [((1, 3, 4, 2), (0, 0, 1, 2, 0, 1, 0, 0)), ((2, 5), (1, 1, 2, 0)), ((3,), (2, 1))]
    ):
        x = g.input(f"x{k}", shape, "i8", quant=rand_q(rng))
        g.output(g.pad(x, pads=pads, value=float(rng.uniform(-1, 1)), name=f"pad{k}", out_quant=x.type.quant))
    assert check(g) == 9


def test_concat_copy_and_requantize(check):
    rng = np.random.default_rng(82)
    g = Graph("concat")
    qy = rand_q(rng)
    a = g.input("a", (1, 2, 3, 4), "i8", quant=qy)
    b = g.input("b", (1, 2, 3, 2), "i8", quant=rand_q(rng))
    c = g.input("c", (1, 2, 1, 4), "i8", quant=qy)
    g.output(g.concat(a, b, axis=-1, name="cat_c", out_quant=qy))
    g.output(g.concat(a, c, axis=2, name="cat_w", out_quant=qy))
    assert check(g) == 9


def test_mean_random(check):
    rng = np.random.default_rng(83)
    g = Graph("mean")
    for k, (shape, axes, keep) in enumerate(
        [((1, 4, 5, 8), (1, 2), True), ((2, 3, 7), (-1,), False), ((6,), (0,), False)]
    ):
        x = g.input(f"x{k}", shape, "i8", quant=rand_q(rng))
        g.output(g.mean(x, axes=axes, keepdims=keep, name=f"mean{k}", out_quant=rand_q(rng)))
    assert check(g) == 9


def test_quantize_float_input(check):
    g = Graph("quantize")
    x = g.input("x", (2, 17), "f32")
    g.output(g.quantize(x, dtype="i8", name="qx", out_quant=q(0.0625, 3)))
    assert check(g) == 9


def test_reshape_is_a_view(check):
    rng = np.random.default_rng(84)
    g = Graph("view")
    qx = rand_q(rng)
    x = g.input("x", (1, 2, 2, 3), "i8", quant=qx)
    r = g.reshape(x, shape=(1, 12), name="flat")
    g.output(g.relu(r, name="act", out_quant=qx))
    model_c = emit(g).files["model.c"]
    assert "a view: same arena bytes, no code" in model_c
    assert "rlx_copy(" not in model_c
    assert check(g) == 9
