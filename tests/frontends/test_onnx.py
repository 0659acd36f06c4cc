"""ONNX importer: real models against bundled data and onnxruntime, layout, folding and errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from modelfiles import ONNX
from rlx_edge.errors import ModelFileError, UnsupportedOpError
from rlx_edge.frontends import load_model
from rlx_edge.frontends.onnx import load_onnx
from rlx_edge.targets.reference import run

MODELS = ONNX
MNIST = MODELS / "mnist-8_onnx-model-zoo.onnx"
MNIST_SMALL = MODELS / "mnist_simplified_onnx2c.onnx"
SINE = MODELS / "tflm_hello_world_sine.onnx"
TOL = {"rtol": 1e-4, "atol": 1e-4}


def _pb(path: Path) -> np.ndarray:
    return numpy_helper.to_array(TensorProto.FromString(path.read_bytes()))


def _ours(g, x: np.ndarray) -> np.ndarray:
    out = run(g, [x])
    assert len(out) == 1
    return next(iter(out.values()))


def _ort(path: Path | bytes, x: np.ndarray) -> np.ndarray:
    sess = ort.InferenceSession(str(path) if isinstance(path, Path) else path, providers=["CPUExecutionProvider"])
    return sess.run(None, {sess.get_inputs()[0].name: x})[0]


# real models --------------------------------------------------------------------------
@pytest.mark.parametrize("k", [0, 1, 2])
def test_mnist8_matches_bundled_outputs(k: int) -> None:
    g = load_onnx(MNIST)
    x = _pb(MODELS / "mnist_test_data" / f"set{k}_input_0.pb")
    want = _pb(MODELS / "mnist_test_data" / f"set{k}_output_0.pb")
    got = _ours(g, x)
    assert got.shape == want.shape
    assert np.allclose(got, want, **TOL)


@pytest.mark.parametrize("path", [MNIST, MNIST_SMALL, SINE], ids=lambda p: p.stem)
def test_models_match_onnxruntime(path: Path) -> None:
    g = load_model(path)  # through the format dispatch, as the CLI loads it
    shape = [7 if isinstance(d, str) else d for d in g.types[g.inputs[0]].shape]
    rng = np.random.default_rng(1234)
    for _ in range(20):
        x = rng.standard_normal(shape).astype(np.float32)
        assert np.allclose(_ours(g, x), _ort(path, x), **TOL)


def test_public_io_keeps_onnx_shapes() -> None:
    g = load_onnx(MNIST)
    assert g.inputs == ["Input3"]
    assert g.types["Input3"].shape == (1, 1, 28, 28)  # NCHW, as the ONNX model takes it
    assert g.outputs == ["Plus214_Output_0"]
    assert g.types[g.outputs[0]].shape == (1, 10)


@pytest.mark.parametrize("batch", [1, 7])
def test_sine_symbolic_batch(batch: int) -> None:
    g = load_onnx(SINE)
    assert g.types[g.inputs[0]].shape == ("N", 1)
    x = np.linspace(0, 2 * np.pi, batch, dtype=np.float32).reshape(batch, 1)
    got = _ours(g, x)
    assert got.shape == (batch, 1)
    assert np.allclose(got, _ort(SINE, x), **TOL)
    assert np.allclose(got[:, 0], np.sin(x[:, 0]), atol=0.2)  # it is the sine model


def test_mnist8_transposes_cancel() -> None:
    g = load_onnx(MNIST)
    ops = [n.op for n in g.nodes]
    # one NCHW->NHWC at the input, one back before the NCHW-order Reshape; nothing between the convs
    assert ops.count("transpose") == 2, ops
    for n in g.nodes:
        if n.op in ("conv2d", "max_pool2d", "relu", "add"):
            prod = g.producer(n.inputs[0])
            assert prod is None or prod.op != "transpose" or n is g.nodes[1], (n.name, prod and prod.name)
    first, second = (n for n in g.nodes if n.op == "conv2d")
    assert first.attrs["padding"] == "explicit" and first.attrs["pads"] == (2, 2, 2, 2)
    # conv weights were converted OIHW -> OHWI at import
    assert g.types[second.inputs[1]].shape == (16, 5, 5, 8)
    # the MatMul with a constant right operand became a dense layer
    assert "fully_connected" in ops and "matmul" not in ops


# synthetic models -----------------------------------------------------------------------------
def _model(nodes, inputs, outputs, inits=(), opset: int = 13) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "t", inputs, outputs, initializer=list(inits))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def _save(tmp_path: Path, m: onnx.ModelProto, name: str = "m.onnx") -> Path:
    p = tmp_path / name
    onnx.save(m, p)
    return p


def _f32(name: str, shape) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _init(name: str, arr: np.ndarray) -> TensorProto:
    return numpy_helper.from_array(arr, name)


def _compare(tmp_path: Path, m: onnx.ModelProto, x: np.ndarray):
    p = _save(tmp_path, m)
    g = load_onnx(p)
    got = _ours(g, x)
    want = _ort(p, x)
    assert got.shape == want.shape
    assert np.allclose(got, want, **TOL)
    return g


def test_layout_sensitive_ops_on_nhwc_values(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    w1 = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    w2 = rng.standard_normal((6, 1, 3, 3)).astype(np.float32)  # depthwise, multiplier 2
    b2 = rng.standard_normal(6).astype(np.float32)
    chan = rng.standard_normal((1, 10, 1, 1)).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["x", "w2", "b2"], ["c2"], group=3, auto_pad="SAME_UPPER"),
        helper.make_node("Concat", ["c1", "c2"], ["cat"], axis=1),
        helper.make_node("Mul", ["cat", "chan"], ["scaled"]),
        helper.make_node("Pad", ["scaled", "pads"], ["padded"]),
        helper.make_node("Slice", ["padded", "st", "en", "ax"], ["sl"]),
        helper.make_node("Softmax", ["sl"], ["sm"], axis=1),
        helper.make_node("ReduceMean", ["sm"], ["rm"], axes=[2, 3], keepdims=0),
    ]
    inits = [
        _init("w1", w1),
        _init("w2", w2),
        _init("b2", b2),
        _init("chan", chan),
        _init("pads", np.array([0, 1, 0, 2, 0, 0, 1, 0], np.int64)),
        _init("st", np.array([1, -5], np.int64)),
        _init("en", np.array([9, 100], np.int64)),
        _init("ax", np.array([1, 3], np.int64)),
    ]
    m = _model(nodes, [_f32("x", [2, 3, 6, 5])], [_f32("rm", None)], inits)
    x = rng.standard_normal((2, 3, 6, 5)).astype(np.float32)
    g = _compare(tmp_path, m, x)
    ops = [n.op for n in g.nodes]
    assert "depthwise_conv2d" in ops
    # everything after the input conversion stays NHWC: no transposes in between
    assert ops.count("transpose") == 1, ops


def test_flatten_after_conv_uses_onnx_order(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    w = rng.standard_normal((3, 2, 2, 2)).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], strides=[2, 2]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("Flatten", ["r"], ["f"]),
    ]
    m = _model(nodes, [_f32("x", [1, 2, 6, 6])], [_f32("f", None)], [_init("w", w)])
    _compare(tmp_path, m, rng.standard_normal((1, 2, 6, 6)).astype(np.float32))


def test_nhwc_output_is_returned_as_nchw(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    w = rng.standard_normal((5, 2, 3, 3)).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"]),
        helper.make_node("MaxPool", ["c"], ["p"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
        helper.make_node("AveragePool", ["c"], ["a"], kernel_shape=[2, 2], pads=[1, 1, 0, 0]),
        helper.make_node("GlobalAveragePool", ["p"], ["y"]),
    ]
    m = _model(nodes, [_f32("x", [1, 2, 8, 9])], [_f32("y", None)], [_init("w", w)])
    g = _compare(tmp_path, m, rng.standard_normal((1, 2, 8, 9)).astype(np.float32))
    assert g.outputs == ["y"] and g.types["y"].shape == (1, 5, 1, 1)


def test_shape_chains_fold_at_import(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    w = rng.standard_normal((4, 1, 3, 3)).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"]),
        helper.make_node("Shape", ["c"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "ax0"], ["n1"]),
        helper.make_node("Concat", ["n1", "minus1"], ["shape"], axis=0),
        helper.make_node("Reshape", ["c", "shape"], ["y"]),
        # a constant-only branch: folded, never a graph node
        helper.make_node("Mul", ["k", "k"], ["k2"]),
        helper.make_node("Add", ["y", "k2"], ["z"]),
    ]
    inits = [
        _init("w", w),
        _init("zero", np.array(0, np.int64)),
        _init("ax0", np.array([0], np.int64)),
        _init("minus1", np.array([-1], np.int64)),
        _init("k", np.full((1, 144), 0.5, np.float32)),
    ]
    m = _model(nodes, [_f32("x", [1, 1, 8, 8])], [_f32("z", None)], inits)
    g = _compare(tmp_path, m, rng.standard_normal((1, 1, 8, 8)).astype(np.float32))
    assert sorted(n.op for n in g.nodes) == ["add", "conv2d", "reshape", "transpose", "transpose"]


def test_softmax_before_opset13_flattens(tmp_path: Path) -> None:
    nodes = [helper.make_node("Softmax", ["x"], ["y"], axis=1)]
    m = _model(nodes, [_f32("x", [2, 3, 4])], [_f32("y", None)], opset=11)
    x = np.random.default_rng(4).standard_normal((2, 3, 4)).astype(np.float32)
    _compare(tmp_path, m, x)
    # the coerced-2-D semantics differ from a per-axis softmax: the check above is meaningful
    per_axis = np.exp(x) / np.exp(x).sum(axis=1, keepdims=True)
    assert not np.allclose(_ort(_save(tmp_path, m, "s.onnx"), x), per_axis, **TOL)


def test_gemm_clip_and_symbolic_batch(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    nodes = [
        helper.make_node("Gemm", ["x", "w", "b"], ["h"], transB=1, alpha=0.5, beta=2.0),
        helper.make_node("Clip", ["h", "lo", "hi"], ["y"]),
    ]
    inits = [
        _init("w", rng.standard_normal((3, 4)).astype(np.float32)),
        _init("b", rng.standard_normal(3).astype(np.float32)),
        _init("lo", np.array(0, np.float32)),
        _init("hi", np.array(6, np.float32)),
    ]
    m = _model(nodes, [_f32("x", ["batch", 4])], [_f32("y", None)], inits)
    g = _compare(tmp_path, m, (rng.standard_normal((5, 4)) * 5).astype(np.float32))
    assert g.types["x"].shape == ("batch", 4)
    assert [n.op for n in g.nodes] == ["fully_connected", "relu6"]


def test_qdq_imports_as_quantize_dequantize(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["q"]),
        helper.make_node("DequantizeLinear", ["q", "s", "zp"], ["y"]),
    ]
    inits = [_init("s", np.array(0.05, np.float32)), _init("zp", np.array(3, np.int8))]
    m = _model(nodes, [_f32("x", [2, 5])], [_f32("y", None)], inits)
    x = np.random.default_rng(6).uniform(-8, 8, (2, 5)).astype(np.float32)
    g = _compare(tmp_path, m, x)
    q = g.types[g.node("q").outputs[0]]
    assert q.dtype.value == "i8" and q.quant is not None
    assert float(q.quant.scale[0]) == np.float32(0.05) and int(q.quant.zero_point[0]) == 3


# errors ----------------------------------------------------------------------------------------
def test_unsupported_ops_are_all_listed(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Erf", ["x"], ["a"], name="first_erf"),
        helper.make_node("Relu", ["a"], ["b"], name="fine"),
        helper.make_node("Hardmax", ["b"], ["c"], name="the_hardmax"),
        helper.make_node("Erf", ["c"], ["d"], name="second_erf"),
        helper.make_node("Conv", ["x", "w"], ["e"], name="conv3d"),  # a feature the importer lacks
    ]
    m = _model(
        nodes,
        [_f32("x", [1, 1, 2, 2, 2])],
        [_f32("d", None), _f32("e", None)],
        [_init("w", np.ones((1, 1, 1, 1, 1), np.float32))],
    )
    with pytest.raises(UnsupportedOpError) as info:
        load_onnx(_save(tmp_path, m))
    msg = str(info.value)
    for part in ("first_erf (Erf)", "the_hardmax (Hardmax)", "second_erf (Erf)", "conv3d (Conv)"):
        assert part in msg, msg
    assert "fine" not in msg


def test_feature_level_refusal_names_the_feature(tmp_path: Path) -> None:
    nodes = [helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2, 2], pads=[1, 1, 1, 1], count_include_pad=1)]
    m = _model(nodes, [_f32("x", [1, 1, 4, 4])], [_f32("y", None)])
    with pytest.raises(UnsupportedOpError, match="count_include_pad"):
        load_onnx(_save(tmp_path, m))


def test_corrupt_and_truncated_files(tmp_path: Path) -> None:
    data = MNIST.read_bytes()
    trunc = tmp_path / "truncated.onnx"
    trunc.write_bytes(data[: len(data) // 3])
    with pytest.raises(ModelFileError, match=r"truncated\.onnx"):
        load_onnx(trunc)
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"\xff\x00 this is not protobuf \x13\x37" * 10)
    with pytest.raises(ModelFileError, match=r"junk\.onnx"):
        load_onnx(junk)
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    with pytest.raises(ModelFileError, match=r"empty\.onnx"):
        load_onnx(empty)
    with pytest.raises(ModelFileError, match=r"missing\.onnx"):
        load_onnx(tmp_path / "missing.onnx")


def test_reduce_max_min_and_argmin_on_nhwc_values(tmp_path: Path) -> None:
    """ReduceMax / ReduceMin / ArgMin over NCHW axes of a conv's (NHWC inside) output, as onnxruntime has them."""
    rng = np.random.default_rng(3)
    w = rng.standard_normal((4, 3, 1, 1)).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"]),
        helper.make_node("ReduceMax", ["c"], ["mx"], axes=[1, 3], keepdims=1),
        helper.make_node("ReduceMin", ["mx"], ["mn"], axes=[2], keepdims=0),
    ]
    x = rng.standard_normal((2, 3, 5, 6)).astype(np.float32)
    _compare(tmp_path, _model(nodes, [_f32("x", [2, 3, 5, 6])], [_f32("mn", None)], [_init("w", w)]), x)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("ArgMin", ["c"], ["am"], axis=1, keepdims=0)]
    out = [helper.make_tensor_value_info("am", TensorProto.INT64, None)]
    g = _compare(tmp_path, _model(nodes, [_f32("x", [2, 3, 5, 6])], out, [_init("w", w)]), x)
    assert [n.op for n in g.nodes].count("argmin") == 1
