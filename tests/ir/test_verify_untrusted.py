"""The checks loaders add to ``verify`` for untrusted models: quantization throughout, bounded sizes."""

from __future__ import annotations

import numpy as np
import pytest

from rlx_edge.errors import IRError
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.types import QuantParams
from rlx_edge.ir.verify import check_quantized, check_sizes


def _conv(pads: tuple[int, int, int, int], dilations: tuple[int, int]) -> Graph:
    g = Graph("pads")
    x = g.input("x", (1, 8, 8, 1), "f32")
    w = g.param("w", np.ones((1, 2, 2, 1), np.float32))
    g.output(g.conv2d(x, w, padding="explicit", pads=pads, dilations=dilations))
    return g


def test_check_sizes_bounds_a_padded_input_that_no_value_shows():
    # the dilation swallows the padding again: the output stays 8x8, the padded input would not
    check_sizes(_conv((2**8, 2**8, 0, 0), (2**9, 1)))
    with pytest.raises(IRError, match=r"node 'conv2d_0' \(conv2d\): pads \[1073741824, .* make its input take over"):
        check_sizes(_conv((2**30, 2**30, 0, 0), (2**31, 1)))


def test_check_sizes_bounds_values_and_work():
    g = Graph("big")
    x = g.input("x", ("N", 2**15, 2**15, 2), "f32")  # symbols count as 1
    g.output(g.relu(x))
    check_sizes(g, max_bytes=2**33)
    with pytest.raises(IRError, match=r"value 'x' \(f32\[N,32768,32768,2\]\) would take over 1073741824 bytes"):
        check_sizes(g)
    conv = _conv((0, 0, 0, 0), (1, 1))
    check_sizes(conv, max_macs=196)  # 7x7 outputs of a 2x2 kernel
    with pytest.raises(IRError, match=r"node 'conv2d_0' \(conv2d\): 196 multiply-accumulates, more than 195"):
        check_sizes(conv, max_macs=195)


def _add(qa: QuantParams | None, qb: QuantParams | None, qy: QuantParams | None) -> Graph:
    g = Graph("add")
    a = g.input("a", (1, 4), "i8", quant=qa)
    b = g.input("b", (1, 4), "i8", quant=qb)
    g.output(g.add(a, b, out_quant=qy, name="sum"))
    return g


Q = QuantParams(np.float32(0.5), 0)


def test_check_quantized_wants_every_narrow_value_of_a_quantized_node_quantized():
    check_quantized(_add(Q, Q, Q))
    with pytest.raises(IRError, match=r"node 'sum' \(add\): value 'b' is i8 without .*, but the node is quantized"):
        check_quantized(_add(Q, None, Q))


def test_check_quantized_plain_integer_arithmetic_is_tflite_only():
    g = _add(None, None, None)
    check_quantized(g)  # ONNX: int8 addition that wraps
    with pytest.raises(IRError, match=r"value 'a' is i8 without .*, but add computes on quantized values"):
        check_quantized(g, narrow_is_quantized=True)
