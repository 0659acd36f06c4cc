"""Exporter decompositions fused at ONNX import (Erf GELU, layer norm) and -inf masks moved into softmax's mask."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from rlx_edge.frontends._onnx_fuse import fuse_decompositions
from rlx_edge.frontends.onnx import load_onnx
from rlx_edge.ir.dtype import DType
from rlx_edge.targets.reference import run

SHAPE = [2, 3, 8]


def _model(nodes, inits: dict[str, np.ndarray], extra_inputs=(), opset: int = 14) -> onnx.ModelProto:
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE), *extra_inputs]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    tensors = [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()]
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=tensors)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _import(model: onnx.ModelProto, tmp_path: Path, feeds: dict[str, np.ndarray]):
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    g = load_onnx(path)
    (want,) = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)
    got = run(g, [feeds[n] for n in g.inputs])[g.outputs[0]]
    # float32 in both, computed in another order (erf, the means): a few units in the last place
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    return g


def _x(seed: int = 0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(SHAPE) * 2).astype(np.float32)


_N = helper.make_node
_GELU_FORMS = {
    # torch: (x * (erf(x / sqrt2) + 1)) * 0.5
    "torch": [_N("Div", ["x", "r2"], ["d"]), _N("Erf", ["d"], ["e"]), _N("Add", ["e", "one"], ["p"]),
              _N("Mul", ["x", "p"], ["m"]), _N("Mul", ["m", "half"], ["y"])],
    # x * ((1 + erf(x * 1/sqrt2)) * 0.5)
    "mul_inverse": [_N("Mul", ["inv", "x"], ["d"]), _N("Erf", ["d"], ["e"]), _N("Add", ["one", "e"], ["p"]),
                    _N("Mul", ["p", "half"], ["m"]), _N("Mul", ["x", "m"], ["y"])],
    # (x * 0.5) * (1 + erf(x / sqrt2))
    "half_first": [_N("Mul", ["x", "half"], ["h"]), _N("Div", ["x", "r2"], ["d"]), _N("Erf", ["d"], ["e"]),
                   _N("Add", ["e", "one"], ["p"]), _N("Mul", ["h", "p"], ["y"])],
}  # fmt: skip
_GELU_CONSTS = {
    "r2": np.float32(math.sqrt(2)),
    "inv": np.float32(1 / math.sqrt(2)),
    "one": np.float32(1),
    "half": np.float32(0.5),
}


@pytest.mark.parametrize("form", list(_GELU_FORMS))
def test_erf_gelu_becomes_gelu(form: str, tmp_path: Path) -> None:
    g = _import(_model(_GELU_FORMS[form], _GELU_CONSTS), tmp_path, {"x": _x()})
    assert [n.op for n in g.nodes] == ["gelu"]


def test_erf_gelu_with_other_constants_is_left_alone() -> None:
    """Dividing by 2 is not GELU: the model is returned as written."""
    m = _model(_GELU_FORMS["torch"], {**_GELU_CONSTS, "r2": np.float32(2.0)})
    assert fuse_decompositions(m) is m
    good = _model(_GELU_FORMS["torch"], _GELU_CONSTS)
    assert [n.op_type for n in fuse_decompositions(good).graph.node] == ["Gelu"]  # the same chain with sqrt 2


def test_erf_gelu_read_midway_is_left_alone() -> None:
    """A value inside the chain that is also a graph output keeps the chain as written."""
    m = _model(_GELU_FORMS["torch"], _GELU_CONSTS)
    m.graph.output.append(helper.make_tensor_value_info("p", TensorProto.FLOAT, None))
    assert fuse_decompositions(m) is m


def _layer_norm_nodes(axes: list[int], square: str = "Pow", affine: bool = True) -> list[onnx.NodeProto]:
    sq = _N("Pow", ["c", "two"], ["s"]) if square == "Pow" else _N("Mul", ["c", "c"], ["s"])
    nodes = [_N("ReduceMean", ["x"], ["m"], axes=axes), _N("Sub", ["x", "m"], ["c"]), sq,
             _N("ReduceMean", ["s"], ["v"], axes=axes), _N("Add", ["v", "eps"], ["ve"]),
             _N("Sqrt", ["ve"], ["sd"]), _N("Div", ["c", "sd"], ["n" if affine else "y"])]  # fmt: skip
    if affine:
        nodes += [_N("Mul", ["n", "gamma"], ["g"]), _N("Add", ["g", "beta"], ["y"])]
    return nodes


def _ln_consts(tail: tuple[int, ...]) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    return {
        "two": np.float32(2.0),
        "eps": np.float32(1e-5),
        "gamma": rng.standard_normal(tail).astype(np.float32),
        "beta": rng.standard_normal(tail).astype(np.float32),
    }


@pytest.mark.parametrize(
    "axes,square,affine",
    [([-1], "Pow", True), ([-2, -1], "Pow", True), ([-1], "Mul", True), ([-1], "Pow", False)],
)
def test_decomposed_layer_norm_becomes_layer_norm(axes, square, affine, tmp_path: Path) -> None:
    tail = tuple(SHAPE[len(SHAPE) + axes[0] :])
    g = _import(_model(_layer_norm_nodes(axes, square, affine), _ln_consts(tail)), tmp_path, {"x": _x(2)})
    (node,) = g.nodes
    assert node.op == "layer_norm" and node.attrs["axis"] == axes[0] % len(SHAPE)
    assert math.isclose(node.attrs["epsilon"], 1e-5, rel_tol=1e-6)


def test_layer_norm_over_leading_axes_stays_elementwise(tmp_path: Path) -> None:
    """Axes that do not run to the end are no layer norm: imported as written."""
    g = _import(_model(_layer_norm_nodes([0], affine=False), _ln_consts(())), tmp_path, {"x": _x(3)})
    assert "layer_norm" not in {n.op for n in g.nodes} and "mean" in {n.op for n in g.nodes}


# -inf masks -------------------------------------------------------------------------------------------
def _scores_model(nodes, inits, mask_input: bool = True) -> onnx.ModelProto:
    extra = [helper.make_tensor_value_info("pad", TensorProto.BOOL, [SHAPE[0], 1, SHAPE[2]])] if mask_input else []
    return _model([*nodes, _N("Softmax", ["s"], ["y"], axis=-1)], inits, extra)


def _pad() -> np.ndarray:
    pad = np.zeros((SHAPE[0], 1, SHAPE[2]), bool)
    pad[0, 0, 5:] = pad[1, 0, 2:] = True
    return pad


def _softmax(g):
    (sm,) = (n for n in g.nodes if n.op == "softmax")
    return sm


def test_where_scores_form_keeps_the_unmasked(tmp_path: Path) -> None:
    """softmax(Where(pad, scores, -inf)): the condition is the keep mask as it is."""
    nodes = [_N("Not", ["pad"], ["keep"]), _N("Where", ["keep", "x", "ninf"], ["s"])]
    g = _import(_scores_model(nodes, {"ninf": np.float32(-np.inf)}), tmp_path, {"x": _x(), "pad": _pad()})
    sm = _softmax(g)
    assert len(sm.inputs) == 2 and g.producer(sm.inputs[1]).op == "logical_not"
    assert g.producer(sm.inputs[0]) is None  # the scores are the input itself


def test_constant_large_negative_mask_becomes_a_constant_keep(tmp_path: Path) -> None:
    """An additive constant of 0 and -1e9 (a causal mask written out): a bool parameter."""
    causal = np.triu(np.full((SHAPE[1], SHAPE[2]), -1e9, np.float32), 1)
    g = _import(_scores_model([_N("Add", ["x", "m"], ["s"])], {"m": causal}, False), tmp_path, {"x": _x()})
    sm = _softmax(g)
    assert [n.op for n in g.nodes] == ["softmax"]
    assert np.array_equal(g.params[sm.inputs[1]], causal == 0)


def test_padding_mask_moved_by_layout_ops_is_read_broadcast(tmp_path: Path) -> None:
    """Where(pad, -inf, 0) reshaped and expanded: the keep mask is the padding mask negated and reshaped."""
    nodes = [_N("Where", ["pad", "ninf", "zero"], ["f"]), _N("Reshape", ["f", "flat"], ["r"]),
             _N("Expand", ["r", "full"], ["e"]), _N("Add", ["x", "e"], ["s"])]  # fmt: skip
    inits = {"ninf": np.float32(-np.inf), "zero": np.float32(0), "flat": np.array([2, 1, 8], np.int64),
             "full": np.array(SHAPE, np.int64)}  # fmt: skip
    g = _import(_scores_model(nodes, inits), tmp_path, {"x": _x(), "pad": _pad()})
    sm = _softmax(g)
    assert g.types[sm.inputs[1]].dtype == DType.bool and tuple(g.types[sm.inputs[1]].shape) == (2, 1, 8)
    assert "broadcast_to" not in {n.op for n in g.nodes} and "select_v2" not in {n.op for n in g.nodes}


def test_additive_bias_is_no_mask(tmp_path: Path) -> None:
    """A float bias of other values (ALiBi) stays an add: softmax gets no mask."""
    bias = -np.abs(np.random.default_rng(4).standard_normal((SHAPE[1], SHAPE[2]))).astype(np.float32)
    g = _import(_scores_model([_N("Add", ["x", "m"], ["s"])], {"m": bias}, False), tmp_path, {"x": _x()})
    assert len(_softmax(g).inputs) == 1 and "add" in {n.op for n in g.nodes}


def test_erf_gelu_of_a_constant_folds_as_written(tmp_path: Path) -> None:
    """A chain over constants folds at import (by ONNX's evaluator at the model's opset): not fused."""
    nodes = [_N("Div", ["w", "r2"], ["d"]), _N("Erf", ["d"], ["e"]), _N("Add", ["e", "one"], ["p"]),
             _N("Mul", ["w", "p"], ["m"]), _N("Mul", ["m", "half"], ["gw"]), _N("Add", ["x", "gw"], ["y"])]  # fmt: skip
    consts = {**_GELU_CONSTS, "w": _x(5)}
    g = _import(_model(nodes, consts), tmp_path, {"x": _x()})
    assert [n.op for n in g.nodes] == ["add"]
