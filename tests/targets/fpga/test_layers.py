"""FPGA layer kinds of issues #16/#21: a float interface, pad, concat, add of a constant, leaky relu.

A float interface's quantize and dequantize run on the host with the nodes'
prepared parameters (``rlx_edge.targets.fpga.edges``); the datapath streams
int8. Each design here is simulated on Icarus (small designs, few cycles) and
compared bit-exactly: the int8 streams with the reference on the device
graph, the float outputs with the reference on the whole model.
mnist-8 quantized by onnxruntime (QDQ, per-channel weights: edges, bias adds
of broadcast constants, a concat of one tensor with itself) runs on Verilator.
"""

from __future__ import annotations

import numpy as np
import pytest

from qdqmodels import images, quantized_mnist
from rlx_edge.frontends import load_model
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.types import QuantParams
from rlx_edge.targets.fpga import FpgaConfigError, FpgaDesign, as_program, build_fpga
from rlx_edge.targets.reference import run


def _float_model(seed: int = 0) -> Graph:
    """float -> quantize -> pad (H, W and channels) -> concat with itself and a requantized branch along
    the channels -> add a per-channel constant -> leaky relu -> dequantize -> float."""
    rng = np.random.default_rng(seed)
    g = Graph("float_edges")
    x = g.input("x", (1, 3, 4, 4), "f32")
    q = g.quantize(x, dtype="i8", out_quant=QuantParams(0.04, -7))
    p = g.pad(q, pads=(0, 0, 1, 0, 0, 2, 4, 4), value=0.0)  # channel pads of 4: lanes up to 4
    r = g.relu(p, out_quant=QuantParams(0.03, -128))  # other parameters: the concat requantizes it
    c = g.concat(p, r, p, axis=-1, out_quant=QuantParams(0.04, -7))
    bias = g.param("bias", rng.integers(-128, 128, (36,)).astype(np.int8), quant=QuantParams(0.02, 3))
    a = g.add(c, bias, out_quant=QuantParams(0.05, 10))
    y = g.leaky_relu(a, alpha=0.2, out_quant=QuantParams(0.05, 10))
    g.output(g.dequantize(y, dtype="f32"))
    return g


@pytest.mark.parametrize("parallelism", ["area", 4])
def test_float_model_bit_exact_on_icarus(parallelism, tmp_path):
    g = _float_model()
    res = build_fpga(g, tmp_path / "out", parallelism=parallelism, simulate=True, simulator="icarus", inferences=4)
    assert res["mismatches"] == 0, res["first_mismatch"]
    assert [r["op"] for r in res["per_layer"]] == ["pad", "relu", "concat", "add", "leaky_relu"]
    if parallelism == 4:  # words of several lanes: the lane-group logic of every new layer runs
        assert all(r["pe"] * r["simd"] == 4 for r in res["per_layer"]), res["per_layer"]
    (out,) = res["outputs"]
    assert out.dtype == np.float32 and out.shape == (4, 1, 4, 6, 36)
    assert len(np.unique(out.reshape(4, -1), axis=0)) == 4  # the inputs reached the outputs
    # the host's side, as the result reports it: the streams are int8, quantize and dequantize around them
    (s_in,), (s_out,) = res["streams"]["inputs"], res["streams"]["outputs"]
    assert s_in["host"]["op"] == "quantize" and s_in["host"]["value"] == "x" and s_in["host"]["zero_point"] == -7
    assert s_out["host"]["op"] == "dequantize" and s_out["host"]["zero_point"] == 10


def test_given_float_inputs_give_the_reference_floats(tmp_path):
    """Inputs past the quantizer's range, its ties and zero: the outputs equal the whole model's reference."""
    g = _float_model(1)
    xs = np.random.default_rng(2).uniform(-6, 6, (2, 1, 3, 4, 4)).astype(np.float32)
    xs[1].flat[:4] = [0.0, 0.06, -0.1, 100.0]  # 0.06 / 0.04 and -0.1 / 0.04: ties, rounded away from zero
    res = build_fpga(g, tmp_path / "out", parallelism=4, simulate=True, simulator="icarus", data=[xs])
    assert res["mismatches"] == 0, res["first_mismatch"]
    for i in range(2):
        (want,) = run(g, [xs[i]]).values()
        assert np.array_equal(res["outputs"][0][i], want)


def test_host_conversions_read_the_prepared_parameters():
    g = _float_model()
    program = as_program(g)
    d = FpgaDesign(program, 4)
    assert [e.kind for e in d.edges] == ["quantize", "dequantize"]
    for e in d.edges:
        assert e.params is program.quant[e.node.name]  # the Program's, not recomputed
    assert [n.op for n in d.graph.nodes] == ["pad", "relu", "concat", "add", "leaky_relu"]
    assert all(d.graph.types[v].dtype.value == "i8" for v in (*d.graph.inputs, *d.graph.outputs))


def _edge_graph(kind: str) -> Graph:
    g = Graph(kind)
    q8 = QuantParams(0.05, 1)
    if kind == "quantize_inside":
        x = g.input("x", (1, 8), "f32")
        g.output(g.relu(g.quantize(g.relu(x), dtype="i8", out_quant=q8), out_quant=q8))
    elif kind == "float_input_elsewhere":
        x = g.input("x", (1, 8), "f32")
        g.output(g.relu(g.quantize(x, dtype="i8", out_quant=q8), out_quant=q8), g.relu(x))
    elif kind == "dequantize_inside":
        x = g.input("x", (1, 8), "i8", quant=q8)
        g.output(g.relu(g.dequantize(g.relu(x, out_quant=q8), dtype="f32")))
    else:  # a computed operand that would broadcast
        x = g.input("x", (1, 8), "i8", quant=q8)
        y = g.input("y", (1, 1), "i8", quant=q8)
        g.output(g.add(x, y, out_quant=q8))
    return g


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("quantize_inside", r"'quantize_0' \(quantize\): the fpga target quantizes model inputs only"),
        ("float_input_elsewhere", r"model input 'x' is float and also read by node 'relu_1' \(relu\)"),
        ("dequantize_inside", r"'dequantize_0' \(dequantize\): the fpga target dequantizes model outputs only"),
        ("broadcast_computed", r"'add_0' \(add\): broadcasting a computed operand is not supported"),
    ],
)
def test_edges_inside_the_model_are_refused_by_name(kind, message):
    with pytest.raises(FpgaConfigError, match=message):
        FpgaDesign(_edge_graph(kind))


@pytest.mark.slow
def test_onnx_qdq_mnist_bit_exact_on_verilator(tmp_path):
    """onnxruntime's QDQ mnist-8 (float in and out) through its datapath: every logit equal to the reference's."""
    g = load_model(quantized_mnist(tmp_path, ("qdq_pc",))["qdq_pc"])
    xs = np.stack(images(np.random.default_rng(3), 2))
    res = build_fpga(g, tmp_path / "fpga", parallelism=8, simulate=True, data=[xs])
    assert res["simulator"] == "verilator"
    assert res["mismatches"] == 0, res["first_mismatch"]
    ops = [r["op"] for r in res["per_layer"]]
    assert "concat" in ops and ops.count("add") == 3
    for i in range(2):
        (want,) = run(g, [xs[i]]).values()
        assert np.array_equal(res["outputs"][0][i], want)
