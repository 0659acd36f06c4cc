"""ONNX CumSum imports as cumsum: every axis (an initializer), exclusive and reverse, against onnxruntime."""

from __future__ import annotations

import itertools

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from rlx_edge.errors import UnsupportedOpError
from rlx_edge.frontends.onnx import load_onnx
from rlx_edge.targets.reference import run


def _model(axis: int | None, exclusive: int, reverse: int) -> onnx.ModelProto:
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4, 5])]
    inits = []
    if axis is None:  # the axis computed at run time
        inputs.append(helper.make_tensor_value_info("axis", TensorProto.INT64, []))
    else:
        inits.append(helper.make_tensor("axis", TensorProto.INT64, [], [axis]))
    node = helper.make_node("CumSum", ["x", "axis"], ["y"], exclusive=exclusive, reverse=reverse)
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4, 5])
    graph = helper.make_graph([node], "cumsum", inputs, [out], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])


@pytest.mark.parametrize("axis,exclusive,reverse", list(itertools.product((0, 1, -1), (0, 1), (0, 1))))
def test_matches_onnxruntime(axis, exclusive, reverse, tmp_path) -> None:
    path = tmp_path / "cumsum.onnx"
    onnx.save(_model(axis, exclusive, reverse), path)
    x = np.random.default_rng(axis + 1 + 4 * exclusive + 8 * reverse).normal(size=(3, 4, 5)).astype(np.float32)
    (want,) = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    g = load_onnx(path)
    assert [n.op for n in g.nodes] == ["cumsum"]
    got = run(g, {g.inputs[0]: x})[g.outputs[0]]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)  # float32 sums, possibly in another order


def test_runtime_axis_is_refused(tmp_path) -> None:
    path = tmp_path / "cumsum.onnx"
    onnx.save(_model(None, 0, 0), path)
    with pytest.raises(UnsupportedOpError, match=r"CumSum.*axis \(input 1\) must be a constant"):
        load_onnx(path)
