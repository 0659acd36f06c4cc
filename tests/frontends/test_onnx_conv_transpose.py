"""ONNX ConvTranspose onto transpose_conv2d, against onnxruntime: float32 with explicit pads (TFLite's SAME
where they are that, else a slice of the VALID result), auto_pad, output_padding and output_shape; a QDQ
model with per-channel weights as an integer transpose_conv2d, also on the Cortex-M host build."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

from rlx_edge.errors import UnsupportedOpError
from rlx_edge.frontends.onnx import load_onnx
from rlx_edge.ir.dtype import DType
from rlx_edge.targets.cortexm import compile_host
from rlx_edge.targets.reference import run

# float32 sums in another order than onnxruntime's: a few ulps
TOL = {"rtol": 1e-5, "atol": 1e-5}

CASES = {
    # PyTorch's upsampling block (k 4, s 2, p 1): TFLite's SAME, no slice
    "k4_s2_p1": dict(kernel=(4, 4), strides=(2, 2), pads=(1, 1, 1, 1)),
    "k3_s2_p1_output_padding": dict(kernel=(3, 3), strides=(2, 2), pads=(1, 1, 1, 1), output_padding=(1, 1)),
    "k3_s1_asymmetric_pads": dict(kernel=(3, 2), strides=(1, 1), pads=(2, 0, 0, 1)),
    "k3_s2_no_pads_no_bias": dict(kernel=(3, 3), strides=(2, 3), bias=False),
    "valid": dict(kernel=(2, 3), strides=(2, 2), auto_pad="VALID"),
    "same_upper": dict(kernel=(3, 3), strides=(2, 2), auto_pad="SAME_UPPER"),
    "same_lower": dict(kernel=(4, 3), strides=(2, 2), auto_pad="SAME_LOWER"),
    "output_shape": dict(kernel=(3, 3), strides=(2, 2), output_shape=(9, 10)),
}


def _model(kernel, strides, pads=None, bias=True, auto_pad=None, output_padding=None, output_shape=None):
    rng = np.random.default_rng(3)
    c, o = 3, 4
    consts = {"w": rng.standard_normal((c, o, *kernel)).astype(np.float32)}
    if bias:
        consts["b"] = rng.standard_normal(o).astype(np.float32)
    attrs = {"strides": list(strides), "kernel_shape": list(kernel)}
    for key, value in (("pads", pads), ("auto_pad", auto_pad), ("output_padding", output_padding),
                       ("output_shape", output_shape)):  # fmt: skip
        if value is not None:
            attrs[key] = value if isinstance(value, str) else list(value)
    node = helper.make_node("ConvTranspose", ["x", "w", *(["b"] if bias else [])], ["y"], **attrs)
    graph = helper.make_graph(
        [node], "t", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, c, 5, 4))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(v, k) for k, v in consts.items()],
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.parametrize("case", sorted(CASES))
def test_conv_transpose_matches_onnxruntime(case, tmp_path):
    model = _model(**CASES[case])
    path = tmp_path / f"{case}.onnx"
    onnx.save(model, path)
    x = np.random.default_rng(1).standard_normal((1, 3, 5, 4)).astype(np.float32)
    (want,) = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    g = load_onnx(path)
    assert [n.op for n in g.nodes if n.op == "transpose_conv2d"] == ["transpose_conv2d"]
    got = run(g, {g.inputs[0]: x})[g.outputs[0]]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, **TOL)


def test_pytorch_upsampling_needs_no_slice(tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(_model(**CASES["k4_s2_p1"]), path)
    ops = [n.op for n in load_onnx(path).nodes]
    assert "slice" not in ops and ops.count("transpose_conv2d") == 1


def test_dilations_are_a_clear_error(tmp_path):
    model = _model(kernel=(3, 3), strides=(1, 1))
    model.graph.node[0].attribute.append(helper.make_attribute("dilations", [2, 2]))
    path = tmp_path / "d.onnx"
    onnx.save(model, path)
    with pytest.raises(UnsupportedOpError, match="ConvTranspose with groups or dilations"):
        load_onnx(path)


class _Feeds(CalibrationDataReader):
    def __init__(self, feeds: list[dict[str, np.ndarray]]) -> None:
        self._it = iter(feeds)

    def get_next(self):
        return next(self._it, None)


def test_qdq_per_channel_is_an_integer_transpose_conv(tmp_path):
    """onnxruntime's quantize_static (QDQ, per-channel int8 weights on axis 1 of [I, O, KH, KW]) folds into
    one int8 transpose_conv2d. onnxruntime runs the pattern in float (dequantize, ConvTranspose, quantize:
    one rounding, half to even), the IR as TFLite (Q31 multiplier, double rounding): at most one quantum
    apart (7 of 3,200 values on these 10 inputs). The Cortex-M host build runs the folded graph bit-exactly."""
    src, qpath = tmp_path / "f.onnx", tmp_path / "q.onnx"
    onnx.save(_model(**CASES["k4_s2_p1"]), src)
    rng = np.random.default_rng(0)
    feeds = [{"x": rng.standard_normal((1, 3, 5, 4)).astype(np.float32)} for _ in range(8)]
    quantize_static(src, qpath, _Feeds(feeds), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8)  # fmt: skip
    g = load_onnx(qpath)
    (node,) = [n for n in g.nodes if n.op == "transpose_conv2d"]
    assert g.types[node.outputs[0]].dtype == DType.i8 and g.types[node.inputs[1]].quant.per_channel
    scale = float(g.types[node.outputs[0]].quant.scale[0])
    sess = ort.InferenceSession(str(qpath), providers=["CPUExecutionProvider"])
    host = compile_host(g, tmp_path / "host")
    equal = 0
    for k in range(10):
        x = rng.standard_normal((1, 3, 5, 4)).astype(np.float32)
        (want,) = sess.run(None, {"x": x})
        got = run(g, {g.inputs[0]: x})[g.outputs[0]]
        quanta = np.abs(got.astype(np.float64) - want) / scale
        assert quanta.max() <= 1.0 + 1e-6, k
        equal += int(np.sum(quanta < 0.5))
        assert np.array_equal(host.run({g.inputs[0]: x})[g.outputs[0]], got), k
    assert equal >= 0.9 * 10 * want.size  # one-quantum differences are the exception (ties)
