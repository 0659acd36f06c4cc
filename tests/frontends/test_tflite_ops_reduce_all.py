"""TFLite REDUCE_ALL against TFLite Micro: every axis set, keepdims both ways, rows all true and not."""

from __future__ import annotations

import numpy as np
import pytest

from rlx_edge.frontends.tflite import load_tflite_bytes, to_tflite_bytes
from rlx_edge.frontends.tflm import TflmModel
from rlx_edge.ir.graph import Graph
from rlx_edge.targets.reference import run


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axes", [(0,), (1,), (-1,), (0, 2), (0, 1, 2)])
def test_matches_tflm(axes, keepdims) -> None:
    g = Graph("reduce_all")
    x = g.input("x", (3, 4, 2), "bool")
    g.output(g.reduce_all(x, axes=axes, keepdims=keepdims))
    data = to_tflite_bytes(g)
    back = load_tflite_bytes(data)
    assert [n.op for n in back.nodes] == ["reduce_all"]
    rng = np.random.default_rng(len(axes))
    samples = [np.ones((3, 4, 2), bool), np.zeros((3, 4, 2), bool)] + [rng.random((3, 4, 2)) < p for p in (0.7, 0.95)]
    samples[0][1, 2, 0] = False  # one false element spoils its rows only
    with TflmModel(data) as m:
        for s in samples:
            (want,) = m([s])
            got = run(back, {"x": s})[back.outputs[0]]
            assert got.dtype == np.bool_ and np.array_equal(got, want)
    assert any(run(back, {"x": s})[back.outputs[0]].any() for s in samples)  # some all-true rows occur
