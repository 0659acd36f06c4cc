"""TFLite import/export against the real MLPerf Tiny models and TFLite Micro."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tflite

from modelfiles import MLPERF
from rlx_edge.errors import ModelFileError, UnsupportedOpError
from rlx_edge.frontends import load_model
from rlx_edge.frontends._tflite_export import _OpOut, _Writer
from rlx_edge.frontends._tflite_schema import OP_CODES
from rlx_edge.frontends.tflite import export_tflite, load_tflite, load_tflite_bytes, to_tflite_bytes
from rlx_edge.frontends.tflm import TflmError, TflmModel, tflm_arena_bytes
from rlx_edge.ir.dtype import DType
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.inspect import summary
from rlx_edge.ir.types import QuantParams, TensorType
from rlx_edge.targets.reference import run

MODELS = MLPERF
ALL = [
    "kws_ref_model.tflite",
    "kws_ref_model_float32.tflite",
    "vww_96_int8.tflite",
    "vww_96_float.tflite",
    "pretrainedResnet_quant.tflite",
    "pretrainedResnet.tflite",
    "ad01_int8.tflite",
]
MACS = {"kws": 2_656_768, "vww": 7_489_664, "pretrainedResnet": 12_501_632, "ad01": 264_192}
# kws_ref_model_float32 is a "dynamic range" (hybrid) model: float activations,
# int8 conv/FC weights. TFLite Micro refuses hybrid kernels, so it is checked
# through our export, which dequantizes the weights explicitly.
HYBRID = "kws_ref_model_float32.tflite"


def _load(name: str) -> Graph:
    return load_tflite(MODELS / name)


def _random_input(t: TensorType, rng: np.random.Generator) -> np.ndarray:
    shape = tuple(int(d) for d in t.shape)
    if t.dtype == DType.i8:
        return rng.integers(-128, 128, shape).astype(np.int8)
    return rng.standard_normal(shape).astype(np.float32)


def _close(ours: np.ndarray, tflm: np.ndarray) -> bool:
    # Float results agree only up to rounding: numpy and TFLite Micro sum the
    # products of a dot product in different orders.
    return bool(np.allclose(ours, tflm, rtol=1e-4, atol=1e-4 * float(np.max(np.abs(tflm)))))


# import -----------------------------------------------------------------------
@pytest.mark.parametrize("name", ALL)
def test_import_macs(name: str) -> None:
    g = load_model(MODELS / name)
    expected = next(v for k, v in MACS.items() if name.startswith(k))
    assert summary(g)["macs"] == expected


@pytest.mark.parametrize("name", ["kws_ref_model.tflite", "vww_96_int8.tflite", "pretrainedResnet_quant.tflite"])
def test_import_keeps_quantization_exactly(name: str) -> None:
    g = _load(name)
    model = tflite.Model.GetRootAs((MODELS / name).read_bytes(), 0)
    sg = model.Subgraphs(0)
    checked = 0
    for value, index in g.metadata["tflite_tensor_index"].items():
        q = sg.Tensors(index).Quantization()
        t = g.types[value]
        assert t.quant is not None, value
        assert np.array_equal(t.quant.scale.view(np.uint32), q.ScaleAsNumpy().astype(np.float32).view(np.uint32))
        assert np.array_equal(t.quant.zero_point, q.ZeroPointAsNumpy().astype(np.int64))
        if q.ScaleLength() > 1:
            assert t.quant.axis == q.QuantizedDimension()
        checked += 1
    assert checked == sg.TensorsLength() - 1  # all but the reshape's shape constant, which became an attribute
    conv = next(n for n in g.nodes if n.op == "conv2d")
    w, b = (g.types[v] for v in conv.inputs[1:])
    assert (w.dtype, b.dtype, w.quant.axis) == (DType.i8, DType.i32, 0)
    dw = next((n for n in g.nodes if n.op == "depthwise_conv2d"), None)
    if dw is not None:
        assert g.types[dw.inputs[1]].quant.axis == 3
    assert g.types[g.inputs[0]].quant is not None and g.types[g.outputs[0]].quant is not None


def test_node_names_are_readable_unique_and_mapped() -> None:
    g = _load("kws_ref_model.tflite")
    names = [n.name for n in g.nodes]
    assert len(set(names)) == len(names)
    assert names[0] == "functional_1/activation/Relu" and g.outputs == ["Identity"]
    assert g.metadata["tflite_tensor_index"]["Identity"] == 34
    assert load_tflite(MODELS / "kws_ref_model.tflite").metadata == g.metadata  # stable


# float reference against TFLite Micro --------------------------------------------------
@pytest.mark.parametrize("name", ["pretrainedResnet.tflite", "vww_96_float.tflite", HYBRID])
def test_float_models_match_tflm(name: str) -> None:
    g = _load(name)
    oracle = TflmModel(to_tflite_bytes(g) if name == HYBRID else MODELS / name)
    rng = np.random.default_rng(1234)
    for _ in range(20):  # inputs are [1, ...] in these files: one inference each
        x = _random_input(g.types[g.inputs[0]], rng)
        ours = run(g, x)[g.outputs[0]]
        (theirs,) = oracle(x)
        assert ours.shape == theirs.shape and _close(ours, theirs)


def test_hybrid_model_is_refused_by_tflm_but_runs_after_export() -> None:
    with pytest.raises(TflmError, match="cannot run hybrid models"):
        TflmModel(MODELS / HYBRID)
    g = _load(HYBRID)
    assert sum(n.op == "dequantize" for n in g.nodes) == 5  # 4 pointwise convs and the first conv


def test_intermediates_match_by_tensor_index() -> None:
    g = _load("pretrainedResnet.tflite")
    x = _random_input(g.types[g.inputs[0]], np.random.default_rng(7))
    _, ours = run(g, x, trace=True)
    m = TflmModel(MODELS / "pretrainedResnet.tflite", preserve=True)
    m(x)
    theirs = m.intermediates()
    index = g.metadata["tflite_tensor_index"]
    assert len(theirs) == len(g.nodes) == 16
    for value, arr in ours.items():
        assert _close(arr, theirs[index[value]]), value


def test_tflm_arena_sizes() -> None:
    # The numbers TOOLCHAIN.md records for the int8 models.
    expected = {
        "kws_ref_model.tflite": 24_272,
        "vww_96_int8.tflite": 103_680,
        "ad01_int8.tflite": 3_984,
        "pretrainedResnet_quant.tflite": 55_984,
    }
    assert {n: tflm_arena_bytes(MODELS / n) for n in expected} == expected


# export -----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ALL)
def test_export_round_trip_runs_identically_in_tflm(name: str, tmp_path: Path) -> None:
    g = _load(name)
    out = export_tflite(g, tmp_path / "out.tflite")
    exported = TflmModel(out)
    rng = np.random.default_rng(99)
    if name == HYBRID:
        # the original does not run in TFLite Micro: compare with our float reference instead
        for _ in range(3):
            x = _random_input(g.types[g.inputs[0]], rng)
            assert _close(run(g, x)[g.outputs[0]], exported(x)[0])
    else:
        original = TflmModel(MODELS / name)
        for _ in range(3):
            x = _random_input(g.types[g.inputs[0]], rng)
            a, b = original(x), exported(x)
            assert len(a) == len(b) and all(np.array_equal(p, q) for p, q in zip(a, b))
    # importing the export gives back the same model: exporting again is byte-identical
    data = out.read_bytes()
    assert to_tflite_bytes(load_tflite(out)) == data
    assert to_tflite_bytes(g) == data  # deterministic


def test_export_file_layout() -> None:
    data = to_tflite_bytes(_load("kws_ref_model.tflite"))
    assert data[4:8] == b"TFL3"
    m = tflite.Model.GetRootAs(data, 0)
    assert m.Version() == 3 and m.Buffers(0).DataLength() == 0
    versions = {}
    for i in range(m.OperatorCodesLength()):
        oc = m.OperatorCodes(i)
        assert oc.DeprecatedBuiltinCode() == min(oc.BuiltinCode(), 127)
        versions[oc.BuiltinCode()] = oc.Version()
    assert versions[OP_CODES["CONV_2D"]] == 3 and versions[OP_CODES["DEPTHWISE_CONV_2D"]] == 3
    sg = m.Subgraphs(0)
    for i in range(sg.TensorsLength()):
        t = sg.Tensors(i)
        buf = m.Buffers(t.Buffer())
        if buf.DataLength():
            assert buf._tab.Vector(4) % 16 == 0  # aligned for the kernels' direct reads
    w = sg.Tensors(sg.Operators(0).Inputs(1)).Quantization()
    assert w.ScaleLength() == 64 and w.QuantizedDimension() == 0


def _ops_graph() -> Graph:
    """A float graph using every op of the TFLite vocabulary that the real models do not."""
    rng = np.random.default_rng(3)
    g = Graph("ops")
    x = g.input("x", (1, 6, 6, 4), "f32")
    w = g.param("w", rng.standard_normal((4, 3, 3, 4)).astype(np.float32))
    y = g.conv2d(x, w, padding="same", activation="relu_n1_to_1")
    y = g.max_pool2d(y, kernel=(2, 2), strides=(1, 1), padding="valid")  # 5x5
    y = g.pad(y, pads=(0, 0, 1, 0, 0, 1, 0, 0))  # 6x6
    m = g.mul(y, x)
    s = g.sub(x, m, activation="relu6")
    c = g.concat(g.sigmoid(s), g.tanh(m), g.hard_swish(x), axis=3)  # 12 channels
    c = g.maximum(g.relu(c), g.minimum(c, g.relu6(c)))
    t = g.transpose(c, perm=(0, 3, 1, 2))
    sl = g.slice(t, begin=(0, 1, 0, 2), end=(1, 9, 5, 6), strides=(1, 2, 1, 1))
    mn = g.mean(sl, axes=(2, 3), keepdims=True)
    g.output(g.softmax(g.reshape(mn, shape=(1, 4)), beta=0.5))
    return g


def test_every_op_exports_imports_and_runs_in_tflm() -> None:
    g = _ops_graph()
    data = to_tflite_bytes(g)
    back = load_tflite_bytes(data)
    assert summary(back)["ops"] == summary(g)["ops"]
    oracle = TflmModel(data)
    rng = np.random.default_rng(5)
    for _ in range(5):
        x = rng.standard_normal((1, 6, 6, 4)).astype(np.float32) * 3
        ours = run(g, x)[g.outputs[0]]
        assert _close(ours, oracle(x)[0])
        assert np.array_equal(run(back, x)[back.outputs[0]], ours)
    assert to_tflite_bytes(back) == data


def test_quantize_ops_round_trip_bit_exactly() -> None:
    g = Graph("q")
    x = g.input("x", (1, 4, 4, 2), "f32")
    q = g.quantize(x, dtype="i8", out_quant=QuantParams(0.05, 3))
    r = g.requantize(q, dtype="i8", out_quant=QuantParams(0.1, -5))
    g.output(g.dequantize(r))
    data = to_tflite_bytes(g)
    back = load_tflite_bytes(data)
    assert [n.op for n in back.nodes] == ["quantize", "requantize", "dequantize"]
    assert back.types[back.nodes[1].outputs[0]].quant == QuantParams(0.1, -5)
    assert to_tflite_bytes(back) == data
    x = np.random.default_rng(0).standard_normal((1, 4, 4, 2)).astype(np.float32)
    ours, theirs = run(g, x)[g.outputs[0]], TflmModel(data)(x)[0]
    np.testing.assert_array_equal(ours, theirs)


def test_export_names_every_unsupported_node() -> None:
    g = Graph("bad")
    x = g.input("x", (1, 4), "f32")
    g.output(g.silu(g.erf(g.silu(x, name="s1"), name="e1"), name="s2"))
    with pytest.raises(UnsupportedOpError) as e:
        to_tflite_bytes(g)
    assert "silu (at 's1', 's2')" in str(e.value) and "erf (at 'e1')" in str(e.value)


# hand-built files: features the writer never produces -----------------------------------------
def _file(build) -> bytes:
    """Write a TFLite file operator by operator (tensors are created by ``build``)."""
    w = _Writer(Graph("handmade"))
    build(w)
    return w.build()


def _tensor(w: _Writer, name: str, shape, value=None, dtype=DType.f32) -> int:
    buf = 0 if value is None else w.add_buffer(np.asarray(value, dtype.numpy).reshape(shape), dtype)
    return w.add_tensor(name, TensorType(tuple(shape), dtype), buf)


def _io(w: _Writer, inputs: list[str], outputs: list[str]) -> None:
    w.g.inputs, w.g.outputs = inputs, outputs
    for n, i in list(w.tensor_index.items()):
        w.g.types[n] = w.tensors[i][1]


def test_unsupported_ops_are_all_listed() -> None:
    def build(w: _Writer) -> None:
        # builtins TFLite Micro has no kernel for either, so they stay undeclared here
        a, b, c, d = (_tensor(w, n, (1, 4)) for n in "abcd")
        w.ops += [_OpOut("SIGN", [a], [b]), _OpOut("MATRIX_DIAG", [b], [c]), _OpOut("SIGN", [c], [d])]
        _io(w, ["a"], ["d"])

    with pytest.raises(UnsupportedOpError) as e:
        load_tflite_bytes(_file(build), source="two.tflite")
    msg = str(e.value)
    assert "two.tflite" in msg and "SIGN (at 'b', 'd')" in msg and "MATRIX_DIAG (at 'c')" in msg


def test_fc_flattens_and_depthwise_multiplier_comes_from_shapes() -> None:
    rng = np.random.default_rng(0)

    def build(w: _Writer) -> None:
        x = _tensor(w, "x", (1, 3, 3, 2))
        dw = _tensor(w, "dw", (1, 3, 3, 4), rng.standard_normal(36))
        y = _tensor(w, "y", (1, 3, 3, 4))
        fw = _tensor(w, "fw", (5, 36), rng.standard_normal(180))
        z = _tensor(w, "z", (1, 5))
        opts = {"Padding": 0, "StrideH": 1, "StrideW": 1, "DepthMultiplier": 7}  # wrong on purpose
        w.ops.append(_OpOut("DEPTHWISE_CONV_2D", [x, dw, -1], [y], "DepthwiseConv2DOptions", opts))
        w.ops.append(_OpOut("FULLY_CONNECTED", [y, fw, -1], [z], "FullyConnectedOptions", {"KeepNumDims": False}))
        _io(w, ["x"], ["z"])

    data = _file(build)
    g = load_tflite_bytes(data)
    assert [n.op for n in g.nodes] == ["depthwise_conv2d", "reshape", "fully_connected"]
    assert g.nodes[0].attrs["depth_multiplier"] == 2
    x = rng.standard_normal((1, 3, 3, 2)).astype(np.float32)
    # TFLite Micro trusts the field (it would read out of bounds on this file);
    # our export writes the multiplier the shapes imply.
    assert _close(run(g, x)["z"], TflmModel(to_tflite_bytes(g))(x)[0])


def test_strided_slice_masks_and_reshape_options() -> None:
    def build(w: _Writer) -> None:
        x = _tensor(w, "x", (2, 5, 6))
        b = _tensor(w, "b", (3,), [0, -4, 7], DType.i32)
        e = _tensor(w, "e", (3,), [0, -1, 100], DType.i32)
        s = _tensor(w, "s", (3,), [1, 2, 1], DType.i32)
        y = _tensor(w, "y", (2, 6))
        z = _tensor(w, "z", (3, 4))
        # begin_mask bit 2 overrides 7; end_mask bit 0 overrides 0; shrink axis 1 keeps index 1 only
        opts = {"BeginMask": 0b100, "EndMask": 0b001, "ShrinkAxisMask": 0b010}
        w.ops.append(_OpOut("STRIDED_SLICE", [x, b, e, s], [y], "StridedSliceOptions", opts))
        w.ops.append(_OpOut("RESHAPE", [y], [z], "ReshapeOptions", vectors={"NewShape": np.array([-1, 4])}))
        _io(w, ["x"], ["z"])

    data = _file(build)
    g = load_tflite_bytes(data)
    x = np.arange(60, dtype=np.float32).reshape(2, 5, 6)
    ours = run(g, x)["z"]
    assert np.array_equal(ours, x[:, 1, :].reshape(3, 4))
    assert np.array_equal(ours, TflmModel(data)(x)[0])


# broken files ---------------------------------------------------------------------------------
def _expect_file_error(data: bytes, tmp_path: Path) -> str:
    p = tmp_path / "broken.tflite"
    p.write_bytes(data)
    with pytest.raises(ModelFileError) as e:
        load_model(p)
    assert str(p) in str(e.value)
    return str(e.value)


def test_corrupt_and_truncated_files(tmp_path: Path) -> None:
    good = (MODELS / "kws_ref_model.tflite").read_bytes()
    _expect_file_error(b"", tmp_path)
    assert "identifier" in _expect_file_error(b"this is not a flatbuffer at all", tmp_path)
    _expect_file_error(good[: len(good) // 2], tmp_path)
    _expect_file_error(good[:200], tmp_path)
    rng = np.random.default_rng(0)
    garbage = bytearray(rng.integers(0, 256, 4096, dtype=np.uint8).tobytes())
    garbage[4:8] = b"TFL3"
    _expect_file_error(bytes(garbage), tmp_path)


def test_buffer_sizes_are_checked_before_reading(tmp_path: Path) -> None:
    data = bytearray((MODELS / "ad01_int8.tflite").read_bytes())
    m = tflite.Model.GetRootAs(bytes(data), 0)
    big = max(range(m.BuffersLength()), key=lambda i: m.Buffers(i).DataLength())
    vec = m.Buffers(big)._tab.Vector(4)  # the length word sits just before the data
    data[vec - 4 : vec] = (0x7FFFFFF0).to_bytes(4, "little")
    assert "past the end" in _expect_file_error(bytes(data), tmp_path)
    # a plausible but wrong length is caught against the tensor's shape
    data[vec - 4 : vec] = (100).to_bytes(4, "little")
    assert "bytes of data" in _expect_file_error(bytes(data), tmp_path)
