"""transpose_conv2d (TFLite's TRANSPOSE_CONV): the float reference against a direct scatter loop, the
integer semantics bit for bit against TFLite Micro (int8 and int16x8, with and without bias, every
padding and stride, output sizes the canvas does not fill exactly), and the TFLite round trip."""

from __future__ import annotations

import numpy as np
import pytest
from tconvgraphs import CASES, g_tconv

from rlx_edge.errors import RlxError
from rlx_edge.frontends.tflite import export_tflite, load_tflite
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.ops import get_op
from rlx_edge.ir.ops.conv import transpose_conv_pads
from rlx_edge.ir.passes.manager import get_pass
from rlx_edge.targets.reference import run
from rlx_edge.targets.reference.compare import compare_with_tflm


def _scatter_loop(x, w, b, out_shape, strides, pads):
    """TFLite's reference loop: every input pixel, every tap, dropped where it leaves the output."""
    n, h, wd, _ = x.shape
    _, kh, kw, _ = w.shape
    y = np.zeros(out_shape)
    for bn in range(n):
        for iy in range(h):
            for ix in range(wd):
                for fy in range(kh):
                    for fx in range(kw):
                        oy, ox = iy * strides[0] - pads[0] + fy, ix * strides[1] - pads[1] + fx
                        if 0 <= oy < out_shape[1] and 0 <= ox < out_shape[2]:
                            y[bn, oy, ox] += w[:, fy, fx, :] @ x[bn, iy, ix]
    return y if b is None else y + b


def test_float_reference_is_the_scatter_loop():
    op = get_op("transpose_conv2d")
    rng = np.random.default_rng(0)
    for k in range(60):
        (x, w, b), attrs = op._sample(rng)
        if k % 3 == 0:  # output sizes no convolution maps back onto the input: cut or zero-filled
            n, _, _, o = attrs["output_shape"]
            attrs["output_shape"] = (n, int(rng.integers(1, 10)), int(rng.integers(1, 10)), o)
        x, w = x.astype(np.float64), w.astype(np.float64)
        b = None if b is None else b.astype(np.float64)
        attrs["activation"] = "none"
        pads = transpose_conv_pads(attrs["output_shape"][1:3], w.shape[1:3], attrs["strides"], attrs["padding"])
        want = _scatter_loop(x, w, b, attrs["output_shape"], attrs["strides"], pads)
        # float64 sums in another order: rounding only
        np.testing.assert_allclose(op.run_reference([x, w, b], attrs)[0], want, rtol=1e-12, atol=1e-12)


def test_padding_is_computed_from_the_output_size():
    # TFLite Micro: ComputePaddingHeightWidth with the output as the convolution's input
    assert transpose_conv_pads((8, 7), (3, 4), (2, 2), "same") == (0, 1)  # totals 1 and 3
    assert transpose_conv_pads((9, 9), (5, 5), (2, 3), "same") == (2, 1)  # totals 4 and 2
    assert transpose_conv_pads((9, 9), (5, 5), (2, 3), "valid") == (0, 0)


@pytest.mark.parametrize("case", sorted(CASES))
def test_integer_matches_tflm(case, tmp_path):
    path = tmp_path / f"{case}.tflite"
    export_tflite(g_tconv(**CASES[case]), path)
    r = compare_with_tflm(path, n_inputs=20, seed=3)
    assert r.inputs == 20 and r.edge_inputs == 3 and r.compared >= 23
    assert r.mismatches == 0, r.first_mismatch


def test_float_matches_tflm(tmp_path):
    rng = np.random.default_rng(2)
    g = Graph("tconv_f")
    x = g.input("x", (1, 3, 5, 2), "f32")
    w = g.param("w", rng.standard_normal((4, 3, 2, 2)).astype(np.float32))
    b = g.param("b", rng.standard_normal(4).astype(np.float32))
    g.output(g.transpose_conv2d(x, w, b, output_shape=(1, 6, 10, 4), strides=(2, 2), padding="same", activation="relu"))
    path = tmp_path / "f.tflite"
    export_tflite(g, path)
    r = compare_with_tflm(path, n_inputs=10, seed=1)  # float: compare's documented default tolerance
    assert r.float_tensors == 1 and r.mismatches == 0, (r.first_mismatch, r.max_rel_error)


def test_tflite_round_trip(tmp_path):
    g = g_tconv(padding="valid", strides=(2, 1), out_hw=(10, 6), act="relu")
    path = tmp_path / "t.tflite"
    export_tflite(g, path)
    back = load_tflite(path)
    (node,) = [n for n in back.nodes if n.op == "transpose_conv2d"]
    assert node.attrs == {"output_shape": (1, 10, 6, 5), "strides": (2, 1), "padding": "valid", "activation": "relu"}
    x = np.random.default_rng(0).integers(-128, 128, (1, 4, 4, 3)).astype(np.int8)
    want = run(g, {"x": x})[g.outputs[0]]
    assert np.array_equal(run(back, {back.inputs[0]: x})[back.outputs[0]], want)


def test_bad_output_shape_is_a_clear_error():
    g = Graph("bad")
    x = g.input("x", (1, 4, 4, 3), "f32")
    w = g.param("w", np.zeros((5, 3, 3, 3), np.float32))
    with pytest.raises(RlxError, match="output_shape has 4 channels, the weight 5"):
        g.transpose_conv2d(x, w, output_shape=(1, 8, 8, 4), strides=(2, 2), padding="same")


def test_a_following_relu_fuses_into_it():
    rng = np.random.default_rng(4)
    g = Graph("fuse")
    x = g.input("x", (1, 3, 3, 2), "f32")
    w = g.param("w", rng.standard_normal((3, 3, 3, 2)).astype(np.float32))
    y = g.transpose_conv2d(x, w, output_shape=(1, 6, 6, 3), strides=(2, 2), padding="same")
    g.output(g.relu6(y, name="act"))
    out = get_pass("fuse_activation")(g)
    assert [(n.op, n.attrs["activation"]) for n in out.nodes] == [("transpose_conv2d", "relu6")]
    feed = {"x": rng.standard_normal((1, 3, 3, 2)).astype(np.float32) * 4}
    assert np.array_equal(run(out, feed)[out.outputs[0]], run(g, feed)["act"])
