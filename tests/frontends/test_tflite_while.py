"""TFLite WHILE, IF and CALL_ONCE, bit-exact with TFLite Micro; WHILE and IF written by our exporter.

The acceptance model of issue #19: an int8 counter loop (``while i < n: x = x + c; i += 1``, an int8
ADD) whose trip count ``n`` is a model input, so it is only known at run time.
"""

from __future__ import annotations

import numpy as np
import pytest
from controlgraphs import Q, branchy, counter_loop, values

from rlx_edge.errors import ModelFileError, UnsupportedOpError
from rlx_edge.frontends import _tflite_export
from rlx_edge.frontends._tflite_schema import schema_module
from rlx_edge.frontends.tflite import load_tflite_bytes, to_tflite_bytes
from rlx_edge.frontends.tflm import TflmModel
from rlx_edge.ir.dtype import DType
from rlx_edge.ir.graph import Graph
from rlx_edge.targets.reference import run

RNG = np.random.default_rng(23)
STEP = np.asarray([7, -40, 127, 1], np.int8)  # a big step saturates within a few trips


def _bit_exact(data: bytes, feeds: list[list[np.ndarray]]) -> Graph:
    g = load_tflite_bytes(data)
    with TflmModel(data) as tflm:
        for feed in feeds:
            want = tflm(feed)
            got = run(g, feed)
            for name, w in zip(g.outputs, want):
                assert got[name].dtype == w.dtype and np.array_equal(got[name], w), (name, feed)
    return g


def test_int8_while_with_a_dynamic_trip_count_is_bit_exact_with_tflite_micro() -> None:
    data = to_tflite_bytes(counter_loop(Q, step=STEP))
    feeds = [[values(RNG, (4,), Q), np.asarray(n, np.int32)] for n in (0, 1, 2, 3, 7, 40, -5)]
    g = _bit_exact(data, feeds)
    (node,) = g.nodes
    assert node.op == "while_" and node.attrs["max_trips"] is None
    assert [n.op for n in node.attrs["cond"].nodes] == ["less"]
    assert [n.op for n in node.attrs["body"].nodes] == ["add", "add"]
    assert to_tflite_bytes(g) == data  # written back, the same file


def test_float_while_is_exact_with_tflite_micro() -> None:
    data = to_tflite_bytes(counter_loop(None))
    _bit_exact(data, [[values(RNG, (4,), None), np.asarray(n, np.int32)] for n in (0, 2, 5)])


@pytest.mark.parametrize("q", [None, Q])
def test_if_is_bit_exact_with_tflite_micro(q) -> None:
    data = to_tflite_bytes(branchy(q))
    feeds = [[np.array([c]), values(RNG, (2, 3), q), values(RNG, (2, 3), q)] for c in (True, False, True)]
    g = _bit_exact(data, feeds)
    assert [n.op for n in g.nodes] == ["if_"]


def test_nested_control_flow_is_written_as_more_subgraphs() -> None:
    inner = branchy(Q, shape=(4,)).node("branch")
    g = counter_loop(Q, step=STEP)
    body = g.node("loop").attrs["body"]
    flag = body.reshape(body.less(body.tensor("i"), body.param("two", np.asarray(2, np.int32))), shape=(1,))
    x = body.tensor("next_x")
    chosen, _ = body.if_(flag, x, x, then_branch=inner.attrs["then_branch"], else_branch=inner.attrs["else_branch"],
                         out_quant=[Q, Q])  # fmt: skip
    body.outputs[2] = chosen.name
    data = to_tflite_bytes(g)
    back = _bit_exact(data, [[values(RNG, (4,), Q), np.asarray(n, np.int32)] for n in (0, 1, 2, 4)])
    nested = back.nodes[0].attrs["body"]
    assert "if_" in [n.op for n in nested.nodes]


def test_a_bounded_while_is_not_written() -> None:
    with pytest.raises(UnsupportedOpError, match=r"while_ with max_trips \(TFLite's WHILE has no trip bound"):
        to_tflite_bytes(counter_loop(Q, max_trips=3))


def test_a_while_whose_body_is_itself_is_refused() -> None:
    data = bytearray(to_tflite_bytes(counter_loop(Q)))
    # the file's WHILE names subgraphs 1 and 2; make its body subgraph 0, the main graph itself
    model = schema_module("Model").Model.GetRootAs(bytes(data), 0)
    opts = model.Subgraphs(0).Operators(0).BuiltinOptions()
    table = schema_module("WhileOptions").WhileOptions()
    table.Init(opts.Bytes, opts.Pos)
    slot = table._tab.Offset(6)  # body_subgraph_index
    assert table.BodySubgraphIndex() == 2 and slot
    data[table._tab.Pos + slot : table._tab.Pos + slot + 4] = (0).to_bytes(4, "little")
    with pytest.raises(ModelFileError, match=r"operator 0 \(WHILE\) refers to subgraph 0, which contains it"):
        load_tflite_bytes(bytes(data))


def _with_call_once(init: Graph) -> bytes:
    """A relu model whose first operator is CALL_ONCE of ``init`` (the exporter writes no CALL_ONCE)."""
    g = Graph("main")
    g.output(g.relu(g.input("x", (4,), "i8", Q), out_quant=Q))
    w = _tflite_export._Writer(g)
    index = w.subgraph(init)
    w.ops.append(_tflite_export._OpOut("CALL_ONCE", [], [], "CallOnceOptions", {"InitSubgraphIndex": index}))
    _tflite_export._fill(w)
    return w.build()


def test_call_once_of_a_subgraph_without_effects_imports_as_nothing() -> None:
    data = _with_call_once(Graph("init"))
    g = _bit_exact(data, [[values(RNG, (4,), Q)] for _ in range(3)])
    assert [n.op for n in g.nodes] == ["relu"]


def test_resource_variables_are_refused_clearly(monkeypatch: pytest.MonkeyPatch) -> None:
    init = Graph("init")
    init.output(init.param("handle", np.array(True)))
    # the exporter has no resource type: its bool tensors go out as RESOURCE in this file
    resource = schema_module("TensorType").TensorType.RESOURCE
    monkeypatch.setitem(_tflite_export.DTYPE_TO_TFL, DType.bool, resource)
    data = _with_call_once(init)
    monkeypatch.undo()
    with pytest.raises(UnsupportedOpError, match=r"tensor 0 \('handle'\) is a resource variable \(VAR_HANDLE"):
        load_tflite_bytes(data)
