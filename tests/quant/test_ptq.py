"""PTQ under the numerics contract, and bit-exactness against TFLite Micro on the MLPerf Tiny models."""

from __future__ import annotations

import numpy as np
import pytest

from modelfiles import MLPERF
from rlx_edge.errors import RlxError
from rlx_edge.frontends.tflite import load_tflite, to_tflite_bytes
from rlx_edge.frontends.tflm import TflmModel
from rlx_edge.ir.dtype import DType
from rlx_edge.ir.graph import Graph
from rlx_edge.models import build_digits_cnn
from rlx_edge.quant.calibrate import calibrate
from rlx_edge.quant.ptq import quantize, quantize_weights
from rlx_edge.targets.reference import run

MODELS = MLPERF
RNG = np.random.default_rng(0)
X = RNG.random((32, 8, 8, 1), dtype=np.float32)


@pytest.fixture(scope="module")
def digits():
    g = build_digits_cnn()
    return g, calibrate(g, X)


def test_int8_contract(digits):
    g, rec = digits
    q = quantize(g, rec)
    t = q.types
    assert t["image"].dtype == DType.i8 and t["probs"].dtype == DType.i8  # int8 interface by default
    conv1 = q.node("conv1")
    wq = t[conv1.inputs[1]].quant
    w = q.params[conv1.inputs[1]]
    assert wq.axis == 0 and np.all(wq.zero_point == 0) and w.min() >= -127 and w.max() <= 127
    assert np.all(np.abs(w).max(axis=(1, 2, 3)) == 127)  # min/max scales use the full range
    bq = t[conv1.inputs[2]]
    assert bq.dtype == DType.i32
    np.testing.assert_array_equal(bq.quant.scale, np.float32(t["image"].quant.scale[0]) * wq.scale)
    assert (float(t["probs"].quant.scale[0]), int(t["probs"].quant.zero_point[0])) == (1 / 256, -128)
    assert t["pool1"].quant == t["conv1"].quant and t["flatten"].quant == t["pool2"].quant
    assert int(t["conv1"].quant.zero_point[0]) == -128  # relu output: 0 is the lowest code
    fcw = t[q.node("fc").inputs[1]].quant
    assert fcw.axis == 0 and fcw.scale.size == 10


def test_depthwise_weights_are_per_channel_on_axis_3():
    g = Graph("dw")
    x = g.input("x", (1, 5, 5, 2))
    w = g.param("w", RNG.standard_normal((1, 3, 3, 4)).astype(np.float32))
    g.output(g.depthwise_conv2d(x, w, depth_multiplier=2, padding="same", name="dw"))
    q = quantize(g, calibrate(g, RNG.standard_normal((4, 5, 5, 2)).astype(np.float32)))
    wq = q.types[q.node("dw").inputs[1]].quant
    assert wq.axis == 3 and wq.scale.size == 4


def test_schemes(digits):
    g, rec = digits
    q16 = quantize(g, rec, scheme="int16x8")
    assert q16.types["conv1"].dtype == DType.i16 and int(q16.types["conv1"].quant.zero_point[0]) == 0
    assert q16.types[q16.node("conv1").inputs[2]].dtype == DType.i64
    q4 = quantize(g, rec, scheme="int4w")
    w = q4.params[q4.node("conv2").inputs[1]]
    assert q4.types[q4.node("conv2").inputs[1]].dtype == DType.i4 and w.min() >= -7 and w.max() <= 7
    with pytest.raises(RlxError, match="unknown quantization scheme"):
        quantize(g, rec, scheme="int3")


def test_float_interface_and_keep_float(digits):
    g, rec = digits
    q = quantize(g, rec, float_interface=True, keep_float=["conv2"])
    assert q.types["image"].dtype == DType.f32 and q.types["probs"].dtype == DType.f32
    ops = [n.op for n in q.nodes]
    assert ops[0] == "quantize" and ops[-1] == "dequantize"
    conv2 = next(n for n in q.nodes if n.op == "conv2d" and q.types[n.outputs[0]].dtype == DType.f32)
    assert q.types[conv2.inputs[1]].dtype == DType.f32  # weights stay float too
    assert ops.count("dequantize") == 2 and ops.count("quantize") == 2
    x = X[:4].reshape(4, 1, 8, 8, 1)
    ref = np.concatenate([run(g, xi)["probs"] for xi in x])
    got = np.concatenate([run(q, xi)["probs"] for xi in x])
    assert np.abs(ref - got).max() < 0.1 and (ref.argmax(1) == got.argmax(1)).all()
    with pytest.raises(RlxError, match="keep_float names no node"):
        quantize(g, rec, keep_float=["nope"])


def test_bias_correction_removes_the_mean_shift():
    rng = np.random.default_rng(1)
    g = Graph("fc")
    x = g.input("x", (1, 16))
    g.output(g.fully_connected(x, g.param("w", rng.standard_normal((8, 16)).astype(np.float32)), name="y"))
    data = (rng.standard_normal((256, 16)) + 3.0).astype(np.float32)  # a large input mean
    rec = calibrate(g, data)
    errs = {}
    for bc in (False, True):
        q = quantize(g, rec, scheme="int4w", bias_correction=bc, float_interface=True)
        diff = [run(q, d[None])["y"] - run(g, d[None])["y"] for d in data[:64]]
        errs[bc] = float(np.abs(np.mean(diff, axis=0)).mean())
    assert errs[True] < 0.5 * errs[False]


def test_what_ptq_quantizes_comes_from_the_op_declarations():
    # global_avg_pool's integer kernel averages stored values: its output must keep
    # the input's parameters (declared passthrough_quant), or the result is rescaled wrongly
    rng = np.random.default_rng(2)
    g = Graph("gap")
    y = g.global_avg_pool(g.relu(g.input("x", (1, 6, 6, 3)), name="act"), name="gap")
    g.output(g.sigmoid(g.reshape(y, shape=(1, 3), name="flat"), name="out"))
    data = rng.standard_normal((16, 6, 6, 3)).astype(np.float32)
    rec = calibrate(g, data)
    q = quantize(g, rec, float_interface=True)
    assert q.types["gap"].quant == q.types["act"].quant == q.types["flat"].quant
    for x in data[:4]:
        np.testing.assert_allclose(run(q, x[None])["out"], run(g, x[None])["out"], atol=0.02)
    # sigmoid's integer kernel is declared int8-only: int16x8 keeps it in float
    q16 = quantize(g, rec, scheme="int16x8")
    assert q16.metadata["quantization"]["float_nodes"] == {"out": "sigmoid has an integer kernel for i8 only"}
    assert q16.types["gap"].dtype == DType.i16


def test_weights_quantizer():
    w = np.array([[1.0, -0.5, 0.25], [0.0, 0.0, 0.0]], np.float32)
    q, s = quantize_weights(w, 0, 127)
    assert q[0].tolist() == [127, -64, 32] and q[1].tolist() == [0, 0, 0] and s[1] > 0


def test_missing_range_is_a_clear_error(digits):
    g, rec = digits
    rec2 = type(rec)(rec.graph, rec.method, rec.samples, {k: v for k, v in rec.ranges.items() if k != "conv2"})
    with pytest.raises(RlxError, match="no range for value 'conv2'"):
        quantize(g, rec2)


@pytest.mark.parametrize(
    ("model", "lo", "hi"),
    [("kws_ref_model_float32.tflite", -3, 3), ("pretrainedResnet.tflite", 0, 255), ("vww_96_float.tflite", 0, 1)],
)
def test_mlperf_quantized_export_runs_bit_exactly_in_tflite_micro(model: str, lo: float, hi: float):
    g = load_tflite(MODELS / model)
    shape = tuple(g.types[g.inputs[0]].shape)
    rng = np.random.default_rng(0)
    calib = rng.uniform(lo, hi, (8, *shape[1:])).astype(np.float32)  # seeded synthetic calibration data
    q = quantize(g, calibrate(g, calib))
    assert all(q.types[v].dtype in (DType.i8, DType.i32) for v in q.types), "every tensor is integer"
    tflm = TflmModel(to_tflite_bytes(q))
    inputs = [rng.integers(-128, 128, shape).astype(np.int8) for _ in range(3)]
    inputs.append(np.full(shape, -128, np.int8))
    for x in inputs:
        ours = run(q, x)[q.outputs[0]]
        theirs = tflm(x)[0]
        np.testing.assert_array_equal(ours, theirs)
