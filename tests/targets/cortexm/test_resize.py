"""Nearest-neighbour resizing on the Cortex-M host build: the gather kernel's walks, int8 and int16, bit-exact."""

from __future__ import annotations

import numpy as np
import pytest

from rlx_edge.ir.graph import Graph
from rlx_edge.ir.types import QuantParams
from rlx_edge.targets.cortexm import compile_host, rules
from rlx_edge.targets.reference import run

_Q = {"i8": QuantParams(np.float32(0.05), -3, storage="i8"), "i16": QuantParams(np.float32(0.001), 0, storage="i16")}


@pytest.mark.parametrize("dtype", ["i8", "i16"])
def test_resize_nearest_on_the_host_build(dtype: str, tmp_path) -> None:
    q = _Q[dtype]
    g = Graph(f"resize_{dtype}")
    x = g.input("x", (2, 5, 3, 4), dtype, quant=q)
    g.output(
        g.resize_nearest_neighbor(x, size=(9, 7), out_quant=q, name="up"),
        g.resize_nearest_neighbor(x, size=(2, 2), align_corners=True, out_quant=q, name="corners"),
        g.resize_nearest_neighbor(x, size=(5, 8), half_pixel_centers=True, out_quant=q, name="half"),
    )
    assert {rules.layer_for(g, n).kernel for n in g.nodes} == {"rlx_gather"}
    model = compile_host(g, tmp_path)
    info = np.iinfo(np.dtype(g.types["x"].dtype.numpy))
    rng = np.random.default_rng(7)
    for _ in range(3):
        feeds = {"x": rng.integers(info.min, info.max + 1, (2, 5, 3, 4)).astype(info.dtype)}
        want, got = run(g, feeds), model.run(feeds)
        for o in g.outputs:
            np.testing.assert_array_equal(got[o], want[o], err_msg=o)


def test_resize_bilinear_on_the_host_build(tmp_path) -> None:
    """int8 bilinear (rlx_resize_bilinear_s8.c): up, down, corners and half-pixel centres, storage extremes."""
    q = _Q["i8"]
    g = Graph("bilinear")
    x = g.input("x", (2, 5, 3, 4), "i8", quant=q)
    g.output(
        g.resize_bilinear(x, size=(9, 7), out_quant=q, name="up"),
        g.resize_bilinear(x, size=(3, 2), align_corners=True, out_quant=q, name="corners"),
        g.resize_bilinear(x, size=(11, 8), half_pixel_centers=True, out_quant=q, name="half"),
    )
    assert {rules.layer_for(g, n).kernel for n in g.nodes} == {"rlx_resize_bilinear_s8"}
    model = compile_host(g, tmp_path)
    rng = np.random.default_rng(8)
    batches = [rng.integers(-128, 128, (2, 5, 3, 4)).astype(np.int8) for _ in range(3)]
    batches += [np.full((2, 5, 3, 4), v, np.int8) for v in (-128, 127)]
    for xs in batches:
        want, got = run(g, {"x": xs}), model.run({"x": xs})
        for o in g.outputs:
            np.testing.assert_array_equal(got[o], want[o], err_msg=o)
