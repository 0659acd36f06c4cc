"""TFLite CUMSUM against TFLite Micro, bit for bit (float32 within compare's tolerance).

Every axis, exclusive and reverse; int8 with a zero point (the running sum starts at the rescaled
-zero_point, TFLite Micro's quirk) and a long axis whose int32 running sums wrap on the edge inputs.
"""

from __future__ import annotations

import numpy as np
import pytest

from rlx_edge.frontends.tflite import load_tflite, to_tflite_bytes
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.types import QuantParams
from rlx_edge.targets.reference.compare import compare_with_tflm


def _graph(dtype: str, shape, axis: int, exclusive: bool, reverse: bool, qx=None, qy=None) -> Graph:
    g = Graph("cumsum")
    x = g.input("x", shape, dtype, quant=qx)
    g.output(g.cumsum(x, axis=axis, exclusive=exclusive, reverse=reverse, out_quant=qy))
    return g


def _q(scale: float, zp: int) -> QuantParams:
    return QuantParams(np.float32(scale), zp, storage="i8")


FLAGS = [(False, False), (True, False), (False, True), (True, True)]


@pytest.mark.parametrize("exclusive,reverse", FLAGS)
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_float_matches_tflm(axis, exclusive, reverse, tmp_path) -> None:
    path = tmp_path / "cumsum.tflite"
    path.write_bytes(to_tflite_bytes(_graph("f32", (3, 4, 5), axis, exclusive, reverse)))
    r = compare_with_tflm(path, n_inputs=8, seed=3)
    assert r.compared >= 8 and r.mismatches == 0, r.first_mismatch


@pytest.mark.parametrize("exclusive,reverse", FLAGS)
@pytest.mark.parametrize(
    "shape,axis,qx,qy",
    [
        ((3, 4, 5), 1, _q(0.05, -7), _q(0.2, 3)),
        ((2, 6), -1, _q(0.02, 100), _q(0.05, -128)),
        # 40 edge values of 255 offset steps: the int32 running sum wraps, as TFLite Micro's does
        ((40, 2), 0, _q(0.1, -128), _q(0.5, 0)),
    ],
)
def test_int8_matches_tflm(shape, axis, qx, qy, exclusive, reverse, tmp_path) -> None:
    path = tmp_path / "cumsum.tflite"
    path.write_bytes(to_tflite_bytes(_graph("i8", shape, axis, exclusive, reverse, qx, qy)))
    assert [n.op for n in load_tflite(path).nodes] == ["cumsum"]
    r = compare_with_tflm(path, n_inputs=8, seed=5)
    assert r.compared >= 8 and r.edge_inputs == 3 and r.mismatches == 0, r.first_mismatch
