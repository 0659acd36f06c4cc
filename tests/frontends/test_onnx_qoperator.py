"""onnxruntime's QOperator contrib ops (domain com.microsoft) against onnxruntime (issue #16).

The per-op cases and the CNN are what ``quantize_static(..., quant_format=QuantFormat.QOperator)``
makes of a small float model built in the test (seeded weights, seeded
calibration data), and each test first checks that the contrib op really is
in it. Per op, the node is cut out of the quantized model with its constant
scales and zero points, so that rlx-edge's reference and onnxruntime run it on
the same seeded integer inputs (one input of each case holds all 256 byte
values), and the integer outputs are compared:

* bit for bit where onnxruntime's kernel computes as the IR's (TFLite's) does:
  QLinearAdd (onnxruntime's int8 add agrees with TFLite's fixed-point add; a
  sweep of 200 random scale sets, 204800 values, found no difference) and
  QLinearConcat (an input on other parameters than the output's is requantized
  like TFLite's ConcatenationWithScaling does it: 200 random scale sets, every
  byte value, no difference; equal parameters are a copy in both);
* within one quantum where onnxruntime computes in float and rounds once
  while the IR uses TFLite's integer kernels, each stated at its case;
* QLinearAveragePool within the bound its double rounding allows (see
  ``_avg_pool_bound``): the IR's average pool keeps its input's parameters, as
  TFLite's does, so the average is rounded onto the input's grid before the
  requantize to the output's.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

from rlx_edge.errors import ModelFileError, UnsupportedOpError
from rlx_edge.frontends import load_model
from rlx_edge.frontends.onnx import SUPPORTED_CONTRIB_OPS
from rlx_edge.pipeline import AS_GIVEN, optimize_graph
from rlx_edge.runners import prepare
from rlx_edge.targets.reference import run
from rlx_edge.targets.reference.compare import compare_with_target

MS = "com.microsoft"
X_SHAPE = [1, 3, 8, 8]
ACTIVATIONS = {"QInt8": np.int8, "QUInt8": np.uint8}

# contrib op -> (the float node it quantizes, built on two conv outputs c1 and c2; the IR ops it becomes)
CASES = {
    "QLinearAdd": (lambda: helper.make_node("Add", ["c1", "c2"], ["y"]), {"add"}),
    "QLinearMul": (lambda: helper.make_node("Mul", ["c1", "c2"], ["y"]), {"mul"}),
    "QLinearAveragePool": (
        lambda: helper.make_node("AveragePool", ["c1"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        {"avg_pool2d", "requantize"},
    ),
    "QLinearGlobalAveragePool": (lambda: helper.make_node("GlobalAveragePool", ["c1"], ["y"]), {"mean"}),
    "QLinearLeakyRelu": (lambda: helper.make_node("LeakyRelu", ["c1"], ["y"], alpha=0.1), {"leaky_relu"}),
    "QLinearSigmoid": (lambda: helper.make_node("Sigmoid", ["c1"], ["y"]), {"sigmoid", "requantize"}),
    "QLinearConcat": (lambda: helper.make_node("Concat", ["c1", "c2"], ["y"], axis=1), {"concat"}),
}

# Where onnxruntime does not compute as TFLite does, the largest difference allowed, in output quanta, and why.
WITHIN_ONE = {
    # onnxruntime multiplies (a - za) * (b - zb) by s_a * s_b / s_c in float and rounds once; the IR's mul
    # (TFLite's) applies a Q31 multiplier with double rounding: they part where the product is near a tie.
    "QLinearMul": 1,
    # onnxruntime sums the window and divides in float (one rounding of the mean); the IR's mean (TFLite's)
    # folds 1/count into its Q31 multiplier with a truncating division, off by a unit near ties.
    "QLinearGlobalAveragePool": 1,
    # onnxruntime tabulates quantize(leaky_relu(dequantize(x))) in float; the IR's leaky_relu (TFLite's) uses
    # two Q31 multipliers (s_x / s_y and alpha * s_x / s_y): ties round apart (observed exact on the
    # quantizer's models here; 5% of values one apart on random scales).
    "QLinearLeakyRelu": 1,
    # onnxruntime tabulates quantize(sigmoid(dequantize(x))) in float; the IR's sigmoid is TFLite's
    # fixed-point LOGISTIC onto scale 1/256, requantized to Y's scale (about 1/255 from the quantizer): two
    # roundings instead of one.
    "QLinearSigmoid": 1,
}
EXACT = {"QLinearAdd", "QLinearConcat"}


class _Reader(CalibrationDataReader):
    def __init__(self, feeds: list[dict[str, np.ndarray]]) -> None:
        self._it = iter(feeds)

    def get_next(self):
        return next(self._it, None)


def _float_model(op: str, seed: int) -> onnx.ModelProto:
    """x -> two convolutions (c1, c2) -> the op -> Relu: the op sits inside a network, as in a real one."""
    rng = np.random.default_rng(seed)

    def w(name, shape, s):
        return numpy_helper.from_array((rng.standard_normal(shape) * s).astype(np.float32), name)

    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["x", "w2"], ["c2"]),
        CASES[op][0](),
        helper.make_node("Relu", ["y"], ["z"]),
    ]
    inits = [w("w1", (4, 3, 3, 3), 0.3), w("b1", (4,), 0.1), w("w2", (4, 3, 1, 1), 0.3)]
    graph = helper.make_graph(
        nodes,
        op,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, X_SHAPE)],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def _quantize(m: onnx.ModelProto, tmp_path: Path, activation: str, seed: int) -> onnx.ModelProto:
    rng = np.random.default_rng(seed + 1000)
    shape = [d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim]
    feeds = [{m.graph.input[0].name: rng.standard_normal(shape).astype(np.float32)} for _ in range(8)]
    src, dst = tmp_path / "float.onnx", tmp_path / "qoperator.onnx"
    onnx.save(m, src)
    quantize_static(
        src,
        dst,
        _Reader(feeds),
        quant_format=QuantFormat.QOperator,
        per_channel=False,
        activation_type=getattr(QuantType, activation),
        weight_type=QuantType.QInt8,
    )
    return onnx.load(dst)


def _contrib_ops(m: onnx.ModelProto) -> list[str]:
    return [n.op_type for n in m.graph.node if n.domain == MS]


def _isolate(q: onnx.ModelProto, float_model: onnx.ModelProto, op: str) -> tuple[onnx.ModelProto, list[str]]:
    """The quantized model's ``op`` node alone: its quantized tensors become integer graph inputs."""
    (node,) = [n for n in q.graph.node if n.op_type == op and n.domain == MS]
    shapes = {
        vi.name: [d.dim_value for d in vi.type.tensor_type.shape.dim]
        for vi in onnx.shape_inference.infer_shapes(float_model).graph.value_info
    }
    inits = {t.name: t for t in q.graph.initializer}
    elem = inits[node.input[2] if op != "QLinearConcat" else node.input[1]].data_type  # a zero point's type: T
    runtime = [n for n in node.input if n and n not in inits]
    assert all(n.endswith("_quantized") for n in runtime), runtime
    inputs = [helper.make_tensor_value_info(n, elem, shapes[n.removesuffix("_quantized")]) for n in runtime]
    graph = helper.make_graph(
        [node],
        f"{op}_alone",
        inputs,
        [helper.make_tensor_value_info(node.output[0], elem, None)],
        [inits[n] for n in node.input if n in inits],
    )
    m = helper.make_model(graph, opset_imports=list(q.opset_import))
    m.ir_version = q.ir_version
    return m, runtime


def _int_inputs(m: onnx.ModelProto, names: list[str], dtype, rng: np.random.Generator, k: int) -> dict:
    """Seeded integers over the type's whole range; in the first sample, input 0 holds all 256 byte values."""
    info = np.iinfo(dtype)
    feeds = {}
    for i, name in enumerate(names):
        vi = next(v for v in m.graph.input if v.name == name)
        shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        size = math.prod(shape)
        if k == 0 and i == 0 and size % 256 == 0:
            feeds[name] = np.tile(np.arange(256, dtype=np.uint8).view(dtype), size // 256).reshape(shape)
        else:
            feeds[name] = rng.integers(info.min, info.max + 1, shape).astype(dtype)
    return feeds


def _scale(m: onnx.ModelProto, i: int) -> float:
    node = m.graph.node[0]
    t = next(t for t in m.graph.initializer if t.name == node.input[i])
    return float(numpy_helper.to_array(t))


def _avg_pool_bound(m: onnx.ModelProto) -> int:
    """Output quanta the IR's average pool may differ from onnxruntime's by.

    onnxruntime: round(mean * s_x / s_y), one rounding (in float). The IR: the mean rounded onto the
    input's grid (TFLite's average pool keeps its input's parameters; at most 1/2 input quantum, which
    is r/2 output quanta for r = s_x / s_y), then requantized (a second rounding). So the two differ by
    less than r/2 + 1: one quantum when r < 2, more when the output's scale is the finer one.
    """
    r = _scale(m, 1) / _scale(m, 3)
    return max(1, math.floor(r / 2 + 1 + 1e-6))


@pytest.mark.parametrize("activation", sorted(ACTIVATIONS))
@pytest.mark.parametrize("op", sorted(CASES))
def test_contrib_op_matches_onnxruntime(op: str, activation: str, tmp_path: Path) -> None:
    seed = sorted(CASES).index(op)
    float_model = _float_model(op, seed)
    q = _quantize(float_model, tmp_path, activation, seed)
    assert op in _contrib_ops(q), [(n.op_type, n.domain) for n in q.graph.node]  # the quantizer did emit it
    alone, names = _isolate(q, float_model, op)
    path = tmp_path / "alone.onnx"
    onnx.save(alone, path)
    g = load_model(path)
    assert {n.op for n in g.nodes} - {"transpose"} == CASES[op][1], [n.op for n in g.nodes]
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    dtype = ACTIVATIONS[activation]
    rng = np.random.default_rng(seed)
    if op in EXACT:
        allowed = 0
    elif op == "QLinearAveragePool":
        allowed = _avg_pool_bound(alone)
    else:
        allowed = WITHIN_ONE[op]
    worst = compared = k = 0
    while compared < 1024:  # four samples, more where the output is small (the global pool's is 4 values)
        feeds = _int_inputs(alone, names, dtype, rng, k)
        (want,) = sess.run(None, feeds)
        (got,) = run(g, [feeds[n] for n in g.inputs]).values()
        assert got.dtype == want.dtype and got.shape == want.shape
        worst = max(worst, int(np.abs(got.astype(np.int64) - want.astype(np.int64)).max()))
        compared, k = compared + want.size, k + 1
    if op in EXACT:
        assert worst == 0
    assert worst <= allowed, f"{op}: {worst} quanta from onnxruntime (at most {allowed})"


@pytest.mark.parametrize("op", ["QLinearAveragePool", "QLinearGlobalAveragePool"])
def test_channels_last_pools(op: str, tmp_path: Path) -> None:
    """channels_last=1: the input is NHWC as ONNX holds it, which the IR's pooling takes as is."""
    attrs = {"kernel_shape": [2, 2], "strides": [2, 2]} if op == "QLinearAveragePool" else {}
    inits = [
        numpy_helper.from_array(np.array(0.05, np.float32), "xs"),
        numpy_helper.from_array(np.array(3, np.int8), "xz"),
        numpy_helper.from_array(np.array(0.04, np.float32), "ys"),
        numpy_helper.from_array(np.array(-2, np.int8), "yz"),
    ]
    node = helper.make_node(op, ["x", "xs", "xz", "ys", "yz"], ["y"], domain=MS, channels_last=1, **attrs)
    m = _qmodel([node], [helper.make_tensor_value_info("x", TensorProto.INT8, [1, 6, 4, 5])], inits)
    path = tmp_path / "nhwc.onnx"
    onnx.save(m, path)
    g = load_model(path)
    assert "transpose" not in {n.op for n in g.nodes}  # already NHWC
    x = np.random.default_rng(2).integers(-128, 128, (1, 6, 4, 5)).astype(np.int8)
    (want,) = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    (got,) = run(g, [x]).values()
    assert got.shape == want.shape == ((1, 3, 2, 5) if attrs else (1, 1, 1, 5))
    # the average pool's double rounding and the mean's truncated multiplier, as above (r = 1.25 here)
    assert np.abs(got.astype(int) - want.astype(int)).max() <= 1


def _qmodel(nodes, inputs, inits, domain_version: int | None = 1) -> onnx.ModelProto:
    opsets = [helper.make_opsetid("", 13)]
    if domain_version is not None:
        opsets.append(helper.make_opsetid(MS, domain_version))
    outputs = [helper.make_tensor_value_info(nodes[-1].output[0], TensorProto.INT8, None)]
    return helper.make_model(helper.make_graph(nodes, "q", inputs, outputs, inits), opset_imports=opsets)


def _sigmoid_model(scale_input: str = "ys", **kw) -> onnx.ModelProto:
    inits = [
        numpy_helper.from_array(np.array(0.05, np.float32), "xs"),
        numpy_helper.from_array(np.array(0, np.int8), "xz"),
        numpy_helper.from_array(np.array(1 / 255, np.float32), "ys"),
        numpy_helper.from_array(np.array(-128, np.int8), "yz"),
    ]
    node = helper.make_node("QLinearSigmoid", ["x", "xs", "xz", scale_input, "yz"], ["y"], name="sig", domain=MS)
    x = helper.make_tensor_value_info("x", TensorProto.INT8, [1, 4])
    extra = [helper.make_tensor_value_info(scale_input, TensorProto.FLOAT, [])] if scale_input != "ys" else []
    return _qmodel([node], [x, *extra], inits, **kw)


def test_other_contrib_ops_are_unsupported_naming_the_node(tmp_path: Path) -> None:
    # a contrib op of a standard op's name is not the standard op: it is refused, not imported as Gelu
    nodes = [
        helper.make_node("QLinearSoftmax", ["x", "s", "z", "s", "z"], ["y"], name="smx", domain=MS, opset=13),
        helper.make_node("Gelu", ["y"], ["g"], name="ms_gelu", domain=MS),
    ]
    inits = [
        numpy_helper.from_array(np.array(0.1, np.float32), "s"),
        numpy_helper.from_array(np.array(0, np.int8), "z"),
    ]
    m = _qmodel(nodes, [helper.make_tensor_value_info("x", TensorProto.INT8, [1, 4])], inits)
    onnx.save(m, tmp_path / "m.onnx")
    with pytest.raises(UnsupportedOpError) as err:
        load_model(tmp_path / "m.onnx")
    msg = str(err.value)
    assert "smx (QLinearSoftmax): op QLinearSoftmax of domain 'com.microsoft' is not supported" in msg
    assert "ms_gelu (Gelu): op Gelu of domain 'com.microsoft' is not supported" in msg
    assert all(op in msg for op in SUPPORTED_CONTRIB_OPS)  # the message says what is imported from the domain
    assert SUPPORTED_CONTRIB_OPS == set(CASES)


def test_run_time_scale_is_unsupported(tmp_path: Path) -> None:
    onnx.save(_sigmoid_model(scale_input="ys_runtime"), tmp_path / "m.onnx")
    with pytest.raises(UnsupportedOpError, match=r"sig \(QLinearSigmoid\): Y scale \(input 3\) must be a constant"):
        load_model(tmp_path / "m.onnx")


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda m: [m.graph.node[0].input.pop() for _ in "zs"], r"sig \(QLinearSigmoid\): has 3 inputs; .* 4 to 5"),
        (lambda m: m.graph.node[0].input.extend(["yz", "yz"]), r"sig \(QLinearSigmoid\): has 7 inputs; .* 4 to 5"),
        (lambda m: m.graph.node[0].input.__setitem__(1, ""), r"sig \(QLinearSigmoid\): leaves required input 1 empty"),
        (lambda m: m.opset_import.pop(), r"sig \(QLinearSigmoid\): uses domain 'com.microsoft', which the model's"),
    ],
    ids=["too-few-inputs", "too-many-inputs", "empty-scale", "undeclared-domain"],
)
def test_malformed_contrib_nodes_are_model_file_errors(edit, message: str, tmp_path: Path) -> None:
    m = _sigmoid_model()
    edit(m)
    onnx.save(m, tmp_path / "m.onnx")
    with pytest.raises(ModelFileError, match=message):
        load_model(tmp_path / "m.onnx")


def test_contrib_domain_version_and_per_channel_scales_are_unsupported(tmp_path: Path) -> None:
    onnx.save(_sigmoid_model(domain_version=2), tmp_path / "v2.onnx")
    with pytest.raises(UnsupportedOpError, match=r"sig \(QLinearSigmoid\): com.microsoft opset 2 is not supported"):
        load_model(tmp_path / "v2.onnx")
    m = _sigmoid_model()
    m.graph.initializer[0].CopyFrom(numpy_helper.from_array(np.array([0.05, 0.1], np.float32), "xs"))
    onnx.save(m, tmp_path / "pc.onnx")
    with pytest.raises(UnsupportedOpError, match=r"X scale has shape \[2\]; only per-tensor"):
        load_model(tmp_path / "pc.onnx")


# end to end ------------------------------------------------------------------------------------------
def _cnn(seed: int = 7) -> onnx.ModelProto:
    """An MNIST-like CNN: conv-relu-maxpool, conv-relu + residual add, average pool, 1x1 conv,
    global average pool, flatten, dense (MatMul + Add)."""
    rng = np.random.default_rng(seed)

    def w(name, shape, s):
        return numpy_helper.from_array((rng.standard_normal(shape) * s).astype(np.float32), name)

    inits = [
        w("w1", (8, 1, 3, 3), 0.5), w("b1", (8,), 0.1), w("w2", (8, 8, 3, 3), 0.15), w("b2", (8,), 0.1),
        w("w3", (8, 8, 1, 1), 0.3), w("fc", (8, 10), 0.5), w("fb", (10,), 0.1),
        numpy_helper.from_array(np.array([1, 8], np.int64), "flat"),
    ]  # fmt: skip
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("Add", ["r2", "p1"], ["res"]),
        helper.make_node("AveragePool", ["res"], ["p2"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p2", "w3"], ["c3"]),
        helper.make_node("GlobalAveragePool", ["c3"], ["gap"]),
        helper.make_node("Reshape", ["gap", "flat"], ["f"]),
        helper.make_node("MatMul", ["f", "fc"], ["mm"]),
        helper.make_node("Add", ["mm", "fb"], ["logits"]),
    ]
    graph = helper.make_graph(
        nodes,
        "qcnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 12, 12])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_qoperator_cnn_reference_is_bit_exact_on_cortexm_host(tmp_path: Path) -> None:
    q = _quantize(_cnn(), tmp_path, "QInt8", seed=7)
    assert sorted(set(_contrib_ops(q))) == ["QLinearAdd", "QLinearAveragePool", "QLinearGlobalAveragePool"]
    assert {"QLinearConv", "QLinearMatMul"} <= {n.op_type for n in q.graph.node}
    path = tmp_path / "qoperator.onnx"
    g = optimize_graph(load_model(path), AS_GIVEN)[0]
    assert {"add", "avg_pool2d", "mean", "conv2d", "fully_connected", "max_pool2d"} <= {n.op for n in g.nodes}
    # the float output is the dequantized int8 logits: equal integers give equal floats, so no tolerance
    r = compare_with_target(g, prepare("cortexm-host", g, tmp_path / "host"), n_inputs=5, seed=3, atol=0, rtol=0)
    assert r.inputs == 5 and r.edge_inputs > 0
    assert r.mismatches == 0, r.first_mismatch
    # and the whole chain stays near onnxruntime's: the per-op differences above (here at most one
    # quantum each: the average pool's s_x / s_y is 1.88) pass through the later layers, which no bound
    # follows exactly; these inputs give at most one quantum of the logits, two are allowed
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    out_scale = next(float(numpy_helper.to_array(t)) for t in q.graph.initializer if t.name == "logits_scale")
    rng = np.random.default_rng(11)
    for _ in range(5):
        x = rng.standard_normal((1, 1, 12, 12)).astype(np.float32)
        (want,) = sess.run(None, {"x": x})
        (got,) = run(g, [x]).values()
        assert np.abs(got - want).max() <= 2 * out_scale * (1 + 1e-5)
