"""The resizing ops of ``ir/ops/resize.py``: TFLite Micro's pixel choice in float32, quantization, errors."""

from __future__ import annotations

import numpy as np
import pytest

from rlx_edge.errors import OpError
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.ops.resize import nearest_indices
from rlx_edge.ir.types import QuantParams
from rlx_edge.targets.reference import run


def test_nearest_indices_follow_float32_scale() -> None:
    assert nearest_indices(5, 3, False, False).tolist() == [0, 1, 3]
    # 26/22 rounds down in float32, so output 11 takes pixel 12 where exact arithmetic gives 11 * 26/22 = 13;
    # TFLite Micro computes in float32 (tests/frontends/test_tflite_ops_spatial.py pins it)
    assert nearest_indices(26, 22, False, False)[11] == 12
    # align_corners rounds half away: (i * 4/2) for 3 outputs of 5 -> 0, 2, 4
    assert nearest_indices(5, 3, True, False).tolist() == [0, 2, 4]
    # one output with align_corners falls back to in/out, as TFLite Micro's kernel
    assert nearest_indices(5, 1, True, False).tolist() == [0]
    assert nearest_indices(2, 5, False, True).tolist() == [0, 0, 1, 1, 1]


def test_quantized_output_keeps_the_input_bytes_and_parameters() -> None:
    q = QuantParams(np.float32(0.1), 3, storage="i8")
    g = Graph("r")
    x = g.input("x", (1, 2, 2, 1), "i8", quant=q)
    y = g.resize_nearest_neighbor(x, size=(4, 4), name="y")
    g.output(y)
    assert g.types["y"].quant == q
    xs = np.array([-128, 5, 17, 127], np.int8).reshape(1, 2, 2, 1)
    got = run(g, {"x": xs})["y"]
    assert got.dtype == np.int8 and np.array_equal(got[0, :, :, 0], np.repeat(np.repeat(xs[0, :, :, 0], 2, 0), 2, 1))


@pytest.mark.parametrize(
    "shape,attrs,message",
    [
        ((2, 3, 4), {"size": (2, 2)}, "NHWC input of rank 4"),
        ((1, 3, 4, 1), {"size": (2,)}, r"size \[2\] must be two positive"),
        ((1, 3, 4, 1), {"size": (0, 2)}, "must be two positive"),
        ((1, 3, 4, 1), {"size": (2, 2), "align_corners": True, "half_pixel_centers": True}, "cannot both be set"),
    ],
)
def test_bad_calls_are_one_line_op_errors(shape, attrs, message) -> None:
    g = Graph("bad")
    x = g.input("x", shape, "f32")
    with pytest.raises(OpError, match=message):
        g.add_node("resize_nearest_neighbor", [x], attrs)


def test_per_channel_quantization_survives_only_along_channels() -> None:
    g = Graph("pc")
    q = QuantParams(np.array([0.1, 0.2], np.float32), np.zeros(2, np.int64), axis=3, storage="i8")
    x = g.input("x", (1, 2, 2, 2), "i8", quant=q)
    g.resize_nearest_neighbor(x, size=(3, 3), name="y")
    assert g.types["y"].quant.axis == 3
    h = g.input("h", (1, 2, 2, 2), "i8", quant=QuantParams(q.scale, q.zero_point, axis=1, storage="i8"))
    with pytest.raises(OpError, match="per-channel quantization along axis 1"):
        g.resize_nearest_neighbor(h, size=(3, 3))
