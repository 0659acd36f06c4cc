"""rlx_convolve_s8 (im2col) and rlx_convolve_1x1_s8 against the integer reference."""

from __future__ import annotations

import numpy as np
import pytest

from rlx_edge.ir.graph import Graph
from rlx_edge.targets.cortexm import emit

from ..conftest import rand_q, wq


def _conv_case(g: Graph, rng: np.random.Generator, k: int, *, one_by_one: bool) -> None:
    c = int(rng.choice([1, 3, 4, 8, 5, 16]))
    o = int(rng.choice([1, 3, 4, 6, 8, 13]))
    kh, kw = (1, 1) if one_by_one else (int(rng.integers(1, 5)), int(rng.integers(1, 4)))
    n = int(rng.choice([1, 1, 2]))
    h, w = int(rng.integers(kh + 1, 9)), int(rng.integers(kw + 1, 8))
    attrs = {
        "strides": tuple(int(s) for s in rng.integers(1, 3, 2)),
        "dilations": (1, 1) if one_by_one else tuple(int(d) for d in rng.integers(1, 3, 2)),
        "padding": "valid" if one_by_one else str(rng.choice(["same", "valid", "explicit"])),
        "activation": str(rng.choice(["none", "relu", "relu6"])),
    }
    if attrs["padding"] == "explicit":
        attrs["pads"] = tuple(int(p) for p in rng.integers(0, 3, 4))
    x = g.input(f"x{k}", (n, h, w, c), "i8", quant=rand_q(rng, 0.01, 0.1))
    wt = g.param(f"w{k}", rng.integers(-127, 128, (o, kh, kw, c)).astype(np.int8), quant=wq(rng, o, 0))
    b = g.param(f"b{k}", rng.integers(-5000, 5000, o).astype(np.int32)) if rng.random() < 0.8 else None
    y = g.conv2d(x, wt, b, name=f"conv{k}", out_quant=rand_q(rng, 0.05, 0.5), **attrs)
    g.output(y)


@pytest.mark.parametrize("one_by_one", [False, True])
def test_convolve_random(check, one_by_one):
    rng = np.random.default_rng(11 + one_by_one)
    g = Graph("conv")
    for k in range(8):
        _conv_case(g, rng, k, one_by_one=one_by_one)
    kernels = {line.split("(")[0].strip() for line in emit(g).files["model.c"].splitlines() if "rlx_convolve" in line}
    assert ("rlx_convolve_1x1_s8" in kernels) if one_by_one else ("rlx_convolve_s8" in kernels)
    assert check(g, n_inputs=5) == 8


def test_convolve_small_field_clipped_columns(check):
    """Receptive fields of at most 64 bytes on channel counts not a multiple of 4 (gathered per
    kernel row: zero point, the columns inside, zero point), clipped on every side."""
    rng = np.random.default_rng(7)
    g = Graph("conv_small")
    # (input h, w, c), kernel (h, w), strides, dilations, pads (top, bottom, left, right)
    cases = [
        ((12, 6, 1), (10, 4), (2, 2), (1, 1), (4, 5, 1, 2)),  # KWS's first layer, scaled down
        ((7, 7, 3), (3, 3), (2, 2), (1, 1), (2, 1, 2, 1)),
        ((6, 5, 5), (3, 3), (1, 1), (2, 1), (2, 2, 1, 1)),
        ((5, 4, 2), (2, 3), (1, 2), (1, 1), (0, 1, 2, 2)),
    ]
    for k, ((h, w, c), (kh, kw), strides, dil, pads) in enumerate(cases):
        o = 5 + k
        x = g.input(f"x{k}", (1, h, w, c), "i8", quant=rand_q(rng, 0.01, 0.1))
        wt = g.param(f"w{k}", rng.integers(-127, 128, (o, kh, kw, c)).astype(np.int8), quant=wq(rng, o, 0))
        b = g.param(f"b{k}", rng.integers(-5000, 5000, o).astype(np.int32))
        y = g.conv2d(
            x,
            wt,
            b,
            name=f"conv{k}",
            out_quant=rand_q(rng, 0.05, 0.5),
            strides=strides,
            dilations=dil,
            padding="explicit",
            pads=pads,
            activation="none",
        )
        g.output(y)
    assert check(g, n_inputs=4) == 7  # 4 seeded inputs plus all-min, all-max, all-zero-point
