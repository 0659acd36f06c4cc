"""PTQ under the numerics contract, and bit-exactness against TFLite Micro on the MLPerf Tiny models."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from modelfiles import MLPERF
from rlx_edge.errors import RlxError
from rlx_edge.frontends.tflite import load_tflite, to_tflite_bytes
from rlx_edge.frontends.tflm import TflmModel
from rlx_edge.ir.dtype import DType
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.ops.quant import affine_dequantize, affine_quantize
from rlx_edge.models import build_digits_cnn
from rlx_edge.pipeline import optimize_graph
from rlx_edge.quant.calibrate import calibrate
from rlx_edge.quant.ptq import ACC_BOUND, WEIGHTED, QuantizationWarning, quantize, quantize_weights
from rlx_edge.quant.report import quantization_report
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
    # sigmoid declares int8 and int16 kernels: int16x8 quantizes it too
    q16 = quantize(g, rec, scheme="int16x8")
    assert "out" not in q16.metadata["quantization"].get("float_nodes", {})
    assert q16.types["gap"].dtype == q16.types["out"].dtype == DType.i16
    # elu's integer kernel is declared int8-only: int16x8 keeps it in float
    ge = Graph("elu")
    ge.output(ge.elu(ge.input("x", (1, 3)), name="out"))
    qe = quantize(ge, calibrate(ge, rng.standard_normal((16, 1, 3)).astype(np.float32)), scheme="int16x8")
    assert qe.metadata["quantization"]["float_nodes"] == {"out": "elu has an integer kernel for i8 only"}


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


# bias and range correctness ------------------------------------------------------------------
def _near_zero_channels(w: np.ndarray, axis: int) -> np.ndarray:
    """Output channels whose weights are all below 1e-20 in magnitude (weights of about 1e-30, as in VWW)."""
    return np.flatnonzero(np.abs(np.moveaxis(w, axis, 0).reshape(w.shape[axis], -1)).max(axis=1) < 1e-20)


def _run_both(g: Graph, q: Graph, x: np.ndarray) -> tuple[dict, dict]:
    """Traces of the float and the quantized graph on the same input (``x`` quantized, and dequantized back)."""
    t = q.types[q.inputs[0]]
    xq = affine_quantize(x, t.quant, t.dtype)
    _, ft = run(g, affine_dequantize(xq, t.quant).astype(np.float32), trace=True)
    _, qt = run(q, xq, trace=True)
    return ft, qt


def _layer_error(g: Graph, q: Graph, traces: tuple[dict, dict], value: str, channels: np.ndarray) -> float:
    """max |float - dequantized| over ``channels`` of ``value``, in output quanta."""
    ft, qt = traces
    qv = q.metadata["quantization"]["values"][value]
    qp = q.types[qv].quant
    got = affine_dequantize(qt[qv], qp)[..., channels]
    return float(np.abs(got - ft[value][..., channels]).max() / qp.scale[0])


@pytest.mark.parametrize("scheme", ["int8", "int16x8"])
def test_a_bias_beside_near_zero_weights_reaches_the_output(scheme):
    # Channel 2 has weights of 1e-30 and a bias of 0.75: at scale s_in * s_w the bias is ~1e29,
    # past int32 and int64. PTQ raises that channel's weight scale until the bias fits; its
    # weights quantize to 0 and the bias carries the output (clipping it gave 0, or INT64_MIN).
    rng = np.random.default_rng(3)
    w = rng.uniform(-0.5, 0.5, (4, 8)).astype(np.float32)
    w[2] = np.float32(1e-30) * np.sign(w[2])
    b = np.array([0.1, -0.2, 0.75, 0.0], np.float32)
    g = Graph("fc_bias")
    g.output(g.fully_connected(g.input("x", (1, 8)), g.param("w", w), g.param("b", b), name="y"))
    data = rng.uniform(-1, 1, (16, 8)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        warnings.simplefilter("error", QuantizationWarning)
        q = quantize(g, calibrate(g, data), scheme=scheme)
    for x in data[:4]:  # (the other channels carry int8 weight rounding: hundreds of int16 quanta)
        err = _layer_error(g, q, _run_both(g, q, x[None]), "y", np.array([2]))
        assert err <= 1.0, f"{scheme}: channel 2 is {err:.1f} quanta off the float output"
    fc = q.node("y")
    assert not q.params[fc.inputs[1]][2].any()  # the near-zero weights quantize to 0
    numerics = q.metadata["quantization"]["numerics"]
    assert numerics["silent_clips"] == 0 and numerics["bias_adjusted"] == 1
    assert numerics["tensors"][fc.inputs[2]] == {"node": "y", "bias_adjusted": 1}


def test_a_bias_no_weight_scale_can_carry_is_clipped_counted_and_warned_once():
    # inputs of ~1e-12 and a bias of 3e38: even float32's largest weight scale leaves the bias
    # past int32, so it clips; the clip is counted and warned about once, never silent
    g = Graph("fc_huge")
    w, b = np.full((1, 3), 1e-30, np.float32), np.array([3e38], np.float32)
    g.output(g.fully_connected(g.input("x", (1, 3)), g.param("w", w), g.param("b", b), name="y"))
    data = np.random.default_rng(4).uniform(-1e-12, 1e-12, (8, 3)).astype(np.float32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        q = quantize(g, calibrate(g, data))
    assert [type(w.message) for w in caught] == [QuantizationWarning], [str(w.message) for w in caught]
    assert "1 values clipped to their integer range in 1 tensors" in str(caught[0].message)
    numerics = q.metadata["quantization"]["numerics"]
    assert numerics["silent_clips"] == 1 and numerics["tensors"][q.node("y").inputs[2]]["clipped"] == 1


@pytest.fixture(scope="module")
def vww():
    g, _ = optimize_graph(load_tflite(MODELS / "vww_96_float.tflite"))
    shape = tuple(g.types[g.inputs[0]].shape)
    calib = np.random.default_rng(0).uniform(0, 1, (6, *shape[1:])).astype(np.float32)  # seeded noise in [0, 1]
    return g, calibrate(g, calib, optimize=False), calib


@pytest.mark.parametrize("scheme", ["int8", "int16x8"])
def test_vww_biases_of_near_zero_channels_reach_the_output(vww, scheme):
    g, rec, calib = vww
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # the int64 bias cast overflowed here (INT64_MIN)
        warnings.simplefilter("error", QuantizationWarning)
        q = quantize(g, rec, scheme=scheme, optimize=False)
    traces = _run_both(g, q, calib[:1])
    made_by = {o: n for n in q.nodes for o in n.outputs}
    checked = adjusted = 0
    for node in g.nodes:
        if node.op not in WEIGHTED:
            continue
        small = _near_zero_channels(g.params[node.inputs[1]], WEIGHTED[node.op])
        qn = made_by[q.metadata["quantization"]["values"][node.outputs[0]]]
        bq = q.params[qn.inputs[2]]
        info = np.iinfo(bq.dtype)
        assert not np.isin(bq, [info.min, info.max]).any(), f"{node.name}: a bias saturated"
        assert np.abs(bq).max() < ACC_BOUND[q.types[qn.inputs[2]].dtype], f"{node.name}: a bias past the accumulator"
        if small.size:
            assert not q.params[qn.inputs[1]].take(small, axis=WEIGHTED[node.op]).any()  # weights 0
            assert _layer_error(g, q, traces, node.outputs[0], small) <= 1.0, node.name
            checked += small.size
            adjusted += int(np.count_nonzero(g.params[node.inputs[2]][small]))
    assert checked > 900  # VWW has ~970 such channels in 9 layers: the loop did look at them
    rep = quantization_report(g, q, calib[:1], optimize=False)
    assert rep["numerics"]["silent_clips"] == 0 and rep["numerics"]["bias_adjusted"] >= adjusted
