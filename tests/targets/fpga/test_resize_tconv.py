"""FPGA resize (nearest neighbour, bilinear) and transpose conv layers of issue #16, bit-exact.

Each design holds one layer per variant (align_corners, half_pixel_centers,
neither; strides that are powers of two and one that is not, output sizes
past the last window) and runs on Icarus against the integer reference, with
inputs at the storage limits and the zero point besides random ones. One model
with all three layer kinds runs on Verilator.
"""

from __future__ import annotations

import numpy as np
import pytest

from rlx_edge.ir.graph import Graph
from rlx_edge.ir.types import QuantParams
from rlx_edge.targets.fpga import FpgaConfigError, FpgaDesign, as_program, build_fpga

from ._graphs import act_q, weights

FLAGS = [
    {"align_corners": False, "half_pixel_centers": False},
    {"align_corners": True, "half_pixel_centers": False},
    {"align_corners": False, "half_pixel_centers": True},
]
# (kernel, strides, padding, output height and width) for a 3 x 4 input
TCONVS = [
    ((3, 3), (2, 2), "same", (6, 8)),
    ((2, 3), (1, 2), "valid", (4, 9)),  # one more column than the last window reaches
    ((3, 2), (3, 3), "valid", (9, 11)),  # a stride that is not a power of two
    ((4, 4), (2, 2), "same", (5, 7)),  # an even kernel: top and left padding
]


def _inputs(shape, q: QuantParams, n: int, seed: int) -> np.ndarray:
    """Random int8 inputs; the first holds the storage limits and the zero point in its first elements."""
    xs = np.random.default_rng(seed).integers(-128, 128, (n, *shape)).astype(np.int8)
    xs[0].flat[:3] = [-128, 127, int(q.zero_point[0])]
    return xs


def _resize_model(q: QuantParams) -> Graph:
    """Both resize ops, each with the three flag settings: up, down and across sizes (3 x 5 -> ...)."""
    g = Graph("resize")
    x = g.input("x", (2, 3, 5, 4), "i8", quant=q)
    sizes = [(7, 4), (2, 11), (5, 5)]
    outs = []
    for op in ("resize_nearest_neighbor", "resize_bilinear"):
        for flags, size in zip(FLAGS, sizes):
            outs.append(getattr(g, op)(x, size=size, out_quant=q, **flags))
    g.output(*outs)
    return g


@pytest.mark.parametrize("parallelism", ["area", 4])
def test_resize_bit_exact_on_icarus(parallelism, tmp_path):
    q = QuantParams(0.05, -3)
    g = _resize_model(q)
    xs = _inputs((2, 3, 5, 4), q, 3, 0)
    res = build_fpga(g, tmp_path, parallelism=parallelism, simulate=True, simulator="icarus", data=[xs])
    assert res["mismatches"] == 0, res["first_mismatch"]
    assert [r["op"] for r in res["per_layer"]] == ["resize_nearest_neighbor"] * 3 + ["resize_bilinear"] * 3
    lanes = 1 if parallelism == "area" else 4  # 4: the lane-group selection and per-lane multipliers run
    for r, (size, taps) in zip(res["per_layer"], [(s, t) for t in (1, 4) for s in [(7, 4), (2, 11), (5, 5)]]):
        assert r["pe"] == lanes
        # nearest copies a pixel's lane group a cycle, bilinear reads four: the layer's loop steps
        assert r["steps"] == 2 * size[0] * size[1] * (4 // lanes) * taps
        assert r["cycles"] == r["steps"] + r["fill"]  # the start pulse and the pipeline's latency on top
    assert all(o.shape[0] == 3 for o in res["outputs"])


def _taps_reading_input(out_size: int, size: int, kernel: int, stride: int, pad: int) -> list[int]:
    """Per output index: how many kernel taps f read an input pixel i (i * stride = o + pad - f), at least 1."""
    return [
        max(1, sum((o + pad - f) % stride == 0 and 0 <= (o + pad - f) // stride < size for f in range(kernel)))
        for o in range(out_size)
    ]


def _tconv_model(seed: int) -> Graph:
    rng = np.random.default_rng(seed)
    g = Graph("tconv")
    x = g.input("x", (1, 3, 4, 4), "i8", quant=act_q(rng))
    outs = []
    for k, (kernel, strides, padding, (oh, ow)) in enumerate(TCONVS):
        w, wq = weights(rng, (4, *kernel, 4), 0)
        b = g.param(f"b{k}", rng.integers(-3000, 3000, 4).astype(np.int32))
        y = g.transpose_conv2d(
            x,
            g.param(f"w{k}", w, quant=wq),
            b if k != 1 else None,
            output_shape=(1, oh, ow, 4),
            strides=strides,
            padding=padding,
            activation=("relu", "none", "relu6", "none")[k],
            out_quant=act_q(rng),
        )
        outs.append(y)
    g.output(*outs)
    return g


def test_transpose_conv_bit_exact_on_icarus(tmp_path):
    g = _tconv_model(0)
    names = [n.name for n in g.nodes]
    # every PE x SIMD shape on one of the layers: the conv datapath's lane logic under the transposed window
    par = dict(zip(names, [(1, 1), (2, 2), (4, 1), (1, 4)]))
    program = as_program(g)
    # the layers read TFLite Micro's padding, prepared from the output size: some of it is not zero here
    tpads = [tuple(program.quant[n].tpads) for n in names]
    assert tpads == [(0, 0), (0, 0), (0, 0), (1, 1)]
    xs = _inputs((1, 3, 4, 4), g.types[g.inputs[0]].quant, 3, 1)
    res = build_fpga(program, tmp_path, parallelism=par, simulate=True, simulator="icarus", data=[xs])
    assert res["mismatches"] == 0, res["first_mismatch"]
    assert [r["op"] for r in res["per_layer"]] == ["transpose_conv2d"] * 4
    for r, (kernel, strides, _, (oh, ow)), pads in zip(res["per_layer"], TCONVS, tpads):
        assert r["macs"] == 3 * 4 * 4 * 4 * kernel[0] * kernel[1]  # input pixels x I x O x taps
        # a cycle per tap that reads an input pixel (one for a pixel none reaches), per channel group
        rows = _taps_reading_input(oh, 3, kernel[0], strides[0], pads[0])
        cols = _taps_reading_input(ow, 4, kernel[1], strides[1], pads[1])
        assert r["steps"] == sum(rows) * sum(cols) * 16 // (r["pe"] * r["simd"])
        assert r["cycles"] == r["steps"] + r["fill"]


@pytest.mark.slow
def test_resize_and_transpose_conv_on_verilator(tmp_path):
    """nearest -> transpose conv -> bilinear, one model, on the other simulator."""
    rng = np.random.default_rng(5)
    q = act_q(rng)
    g = Graph("upsample")
    x = g.input("x", (1, 3, 4, 4), "i8", quant=q)
    r = g.resize_nearest_neighbor(x, size=(5, 7), half_pixel_centers=True, out_quant=q)
    w, wq = weights(rng, (4, 3, 3, 4), 0)
    tq = act_q(rng)
    t = g.transpose_conv2d(r, g.param("w", w, quant=wq), None, output_shape=(1, 10, 14, 4), strides=(2, 2),
                           padding="same", out_quant=tq)  # fmt: skip
    y = g.resize_bilinear(t, size=(7, 9), align_corners=True, out_quant=tq)
    g.output(y)
    xs = _inputs((1, 3, 4, 4), q, 2, 6)
    res = build_fpga(g, tmp_path, parallelism=4, simulate=True, data=[xs])
    assert res["simulator"] == "verilator"
    assert res["mismatches"] == 0, res["first_mismatch"]
    assert [r["op"] for r in res["per_layer"]] == ["resize_nearest_neighbor", "transpose_conv2d", "resize_bilinear"]


def test_resize_that_changes_quantization_is_refused_by_name():
    """The layers copy or interpolate stored values: an output on other parameters would need a requantization."""
    g = Graph("rq")
    x = g.input("x", (1, 2, 2, 4), "i8", quant=QuantParams(0.05, -3))
    g.output(g.resize_nearest_neighbor(x, size=(4, 4), out_quant=QuantParams(0.1, 0)))
    with pytest.raises(FpgaConfigError, match=r"'resize_nearest_neighbor_0' \(resize_nearest_neighbor\): input and"):
        FpgaDesign(g)
