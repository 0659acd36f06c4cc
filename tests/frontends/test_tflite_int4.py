"""int4 weights in TFLite files: INT4 tensors packed two per byte, read back, and run by TFLite Micro.

TFLite Micro (the tflite_micro package) runs CONV_2D and DEPTHWISE_CONV_2D
with per-channel INT4 filters, and FULLY_CONNECTED with a per-tensor INT4
filter only (its per-channel path requires int8): per-channel fully
connected int4 weights are written as INT8 holding the same values.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tflite

from rlx_edge.errors import ModelFileError, UnsupportedOpError
from rlx_edge.frontends._tflite_schema import pack_int4, unpack_int4
from rlx_edge.frontends.tflite import export_tflite, load_tflite_bytes, to_tflite_bytes
from rlx_edge.frontends.tflm import TflmModel
from rlx_edge.ir.dtype import DType
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.types import QuantParams, TensorType
from rlx_edge.quant.calibrate import calibrate
from rlx_edge.quant.ptq import quantize
from rlx_edge.targets.reference import run
from rlx_edge.targets.reference.compare import compare_with_tflm

INT4, INT8 = tflite.TensorType.INT4, tflite.TensorType.INT8


def _model(rng: np.random.Generator) -> Graph:
    """conv (135 weights) -> depthwise (45) -> fully connected (7 x 125): every weight count odd."""
    g = Graph("int4")
    x = g.input("x", (1, 7, 7, 3))
    w1 = g.param("w1", rng.standard_normal((5, 3, 3, 3)).astype(np.float32))
    b1 = g.param("b1", rng.standard_normal(5).astype(np.float32))
    y = g.conv2d(x, w1, b1, padding="same", activation="relu", name="conv")
    w2 = g.param("w2", rng.standard_normal((1, 3, 3, 5)).astype(np.float32))
    y = g.depthwise_conv2d(y, w2, padding="valid", name="dw")
    y = g.reshape(y, shape=(1, 125))
    w3 = g.param("w3", rng.standard_normal((7, 125)).astype(np.float32))
    b3 = g.param("b3", rng.standard_normal(7).astype(np.float32))
    g.output(g.fully_connected(y, w3, b3, name="fc"))
    return quantize(g, calibrate(g, rng.standard_normal((8, 7, 7, 3)).astype(np.float32)), scheme="int4w")


@pytest.fixture(scope="module")
def q4() -> Graph:
    return _model(np.random.default_rng(0))


def _per_tensor_fc(q: Graph) -> Graph:
    """``q`` with the fully connected weights (and bias) quantized per tensor: the form TFLite Micro
    takes as INT4. The values stay; only the scales change."""
    fc = q.node("fc")
    w, b = fc.inputs[1], fc.inputs[2]
    tw, tb = q.types[w], q.types[b]
    s_w = np.float32(tw.quant.scale.max())
    s_x = np.float32(q.types[fc.inputs[0]].quant.scale[0])
    q.types[w] = TensorType(tw.shape, tw.dtype, QuantParams(s_w, 0, storage=DType.i4))
    q.types[b] = TensorType(tb.shape, tb.dtype, QuantParams(s_x * s_w, 0, storage=tb.quant.storage))
    return q


def _tensors(data: bytes) -> dict[str, tuple[int, int]]:
    """Name -> (TFLite type, buffer bytes) of every tensor of a file."""
    m = tflite.Model.GetRootAs(data, 0)
    sg = m.Subgraphs(0)
    out = {}
    for i in range(sg.TensorsLength()):
        t = sg.Tensors(i)
        out[t.Name().decode()] = (t.Type(), m.Buffers(t.Buffer()).DataLength())
    return out


def _versions(data: bytes) -> dict[str, int]:
    m = tflite.Model.GetRootAs(data, 0)
    names = {v: k for k, v in vars(tflite.BuiltinOperator).items() if not k.startswith("_")}
    return {
        names[m.OperatorCodes(i).BuiltinCode()]: m.OperatorCodes(i).Version() for i in range(m.OperatorCodesLength())
    }


@pytest.mark.parametrize("n", [0, 1, 2, 3, 8, 135])
def test_packing_round_trip_low_nibble_first(n: int) -> None:
    v = np.random.default_rng(n).integers(-8, 8, n).astype(np.int8)
    packed = pack_int4(v)
    assert len(packed) == (n + 1) // 2
    np.testing.assert_array_equal(unpack_int4(packed, n), v)
    # element 2i in the low nibble of byte i (TFLite Micro's UnpackDenseInt4IntoInt8), two's complement
    assert pack_int4(np.array([1, -1, -8], np.int8)) == bytes([0xF1, 0x08])
    with pytest.raises(ValueError, match=r"\[-8, 7\]"):
        pack_int4(np.array([8], np.int8))


def test_export_writes_int4_tensors_and_reads_them_back(q4: Graph) -> None:
    data = to_tflite_bytes(q4)
    tensors = _tensors(data)
    conv_w, dw_w, fc_w = (q4.node(n).inputs[1] for n in ("conv", "dw", "fc"))
    assert tensors[conv_w] == (INT4, 68) and tensors[dw_w] == (INT4, 23)  # ceil(135 / 2), ceil(45 / 2)
    assert tensors[fc_w] == (INT8, 875)  # per channel: INT8, the same values
    assert _versions(data)["CONV_2D"] == 7 and _versions(data)["DEPTHWISE_CONV_2D"] == 7
    back = load_tflite_bytes(data)
    for w in (conv_w, dw_w):
        assert back.types[w].dtype == DType.i4 and back.types[w].quant.storage == DType.i4
        np.testing.assert_array_equal(back.params[w], q4.params[w])
    np.testing.assert_array_equal(back.params[fc_w], q4.params[fc_w])
    assert to_tflite_bytes(back) == data
    x = np.random.default_rng(1).integers(-128, 128, (1, 7, 7, 3)).astype(np.int8)
    np.testing.assert_array_equal(run(back, x)[back.outputs[0]], run(q4, x)[q4.outputs[0]])


def test_tflite_micro_runs_the_export_bit_exactly(q4: Graph, tmp_path: Path) -> None:
    # every output and intermediate, on seeded and edge inputs
    res = compare_with_tflm(export_tflite(q4, tmp_path / "int4.tflite"), n_inputs=6, seed=2)
    assert res.ok and res.mismatches == 0 and res.tensors >= 4 and res.compared >= 4 * 6


def test_per_tensor_fully_connected_is_int4_in_tflite_micro() -> None:
    q = _per_tensor_fc(_model(np.random.default_rng(0)))
    data = to_tflite_bytes(q)
    assert _tensors(data)[q.node("fc").inputs[1]] == (INT4, 438)
    assert _versions(data)["FULLY_CONNECTED"] == 10
    oracle = TflmModel(data)
    rng = np.random.default_rng(4)
    for _ in range(4):
        x = rng.integers(-128, 128, (1, 7, 7, 3)).astype(np.int8)
        np.testing.assert_array_equal(oracle(x)[0], run(q, x)[q.outputs[0]])


def test_int4_where_tflite_micro_has_none_is_refused() -> None:
    g = Graph("bad")
    x = g.input("x", (1, 4))
    q = QuantParams(0.5, 0, storage="i4")
    c = g.param("c", np.arange(-2, 2, dtype=np.int8).reshape(1, 4), quant=q, dtype="i4")
    g.output(g.add(x, g.dequantize(c, name="dq"), name="add"))
    with pytest.raises(UnsupportedOpError, match=r"int4 operands of dequantize .* \(at 'dq'\)"):
        to_tflite_bytes(g)


def test_truncated_int4_buffer_is_a_clear_error(q4: Graph) -> None:
    data = bytearray(to_tflite_bytes(q4))
    m = tflite.Model.GetRootAs(bytes(data), 0)
    sg = m.Subgraphs(0)
    w = q4.node("conv").inputs[1]
    t = next(sg.Tensors(i) for i in range(sg.TensorsLength()) if sg.Tensors(i).Name().decode() == w)
    # the buffer's length prefix, 4 bytes before its data: one byte short
    start = m.Buffers(t.Buffer())._tab.Vector(4)
    data[start - 4 : start] = (68 - 1).to_bytes(4, "little")
    with pytest.raises(ModelFileError, match="67 bytes of int4 data, its shape needs 68"):
        load_tflite_bytes(bytes(data))
