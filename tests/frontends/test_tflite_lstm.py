"""UNIDIRECTIONAL_SEQUENCE_LSTM against TFLite Micro over sequences of invokes, hidden and cell state threaded.

TFLite Micro's two LSTM example models, and single LSTMs written by the exporter
(float, int8 with int16 cell state, int16x8; batch- and time-major; with and without
a cell clip), each compared tensor by tensor after every invoke
(``tflmsequence.compare_sequence``).
"""

from __future__ import annotations

import numpy as np
import pytest
from lstmgraphs import lstm_graph
from tflmsequence import compare_sequence

from modelfiles import TFLM, model_path
from rlx_edge.errors import UnsupportedOpError
from rlx_edge.frontends._tflite_schema import schema_module
from rlx_edge.frontends.tflite import load_tflite, load_tflite_bytes, to_tflite_bytes
from rlx_edge.ir.interpret import run

# float32: TFLite Micro sums each gate's products one by one and rounds exp and tanh its own way;
# over 28 steps the states (O(1)) drift by a few ulps (measured: 2e-6 at most)
FLOAT_ATOL = 1e-5


def test_trained_lstm_int8_bit_exact_over_a_sequence():
    """int8 activations, int16 cell state of scale 2**-12, cell clip 10, 28 steps per invoke."""
    path = model_path("tflm/trained_lstm_int8.tflite")
    assert path.parent == TFLM
    g = load_tflite(path)
    (node,) = [n for n in g.nodes if n.op == "lstm"]
    assert node.attrs == {"cell_clip": 10.0, "time_major": False}
    assert g.outputs[1:] == list(g.metadata["state"].values()) == node.outputs[1:]
    # the LSTM's output and both states, the reshape, fully connected and softmax after it
    assert compare_sequence(path.read_bytes(), g, seed=0) == 6


def test_trained_lstm_float_over_a_sequence():
    path = model_path("tflm/trained_lstm.tflite")
    g = load_tflite(path)
    assert [n.op for n in g.nodes] == ["lstm", "reshape", "fully_connected", "softmax"]
    assert compare_sequence(path.read_bytes(), g, seed=1, atol=FLOAT_ATOL) == 6


CASES = {
    "f32": dict(dtype="f32"),
    "f32_time_major_batch2_clip": dict(dtype="f32", batch=2, time_major=True, cell_clip=0.375),
    "i8": dict(dtype="i8"),
    "i8_batch2_clip": dict(dtype="i8", batch=2, cell_clip=0.25, cell_scale=2.0**-13),
    "i8_time_major_batch3": dict(dtype="i8", batch=3, steps=2, time_major=True, state=5),
    "i16x8": dict(dtype="i16", cell_scale=2.0**-12),
    "i16x8_time_major_batch2_clip": dict(dtype="i16", batch=2, time_major=True, cell_clip=1.0),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_single_lstm_via_the_exporter(case):
    g = lstm_graph(**CASES[case])
    data = to_tflite_bytes(g)
    back = load_tflite_bytes(data, source=case)
    (node,) = back.nodes
    assert node.op == "lstm" and back.metadata["state"] == {"hidden": node.outputs[1], "cell": node.outputs[2]}
    assert back.inputs == ["x", "hidden", "cell"] and back.outputs == node.outputs
    assert node.attrs == g.nodes[0].attrs
    atol = FLOAT_ATOL if case.startswith("f32") else 0.0
    assert compare_sequence(data, back, seed=3, atol=atol, steps=6) == 3


def test_the_states_move():
    """Each invoke starts from the last one's states: the same input twice gives two outputs."""
    g = load_tflite(model_path("tflm/trained_lstm_int8.tflite"))
    x = np.full(tuple(g.types[g.inputs[0]].shape), 50, np.int8)
    state = {s: np.zeros(tuple(g.types[s].shape), g.types[s].dtype.numpy) for s in g.metadata["state"]}
    first = run(g, {g.inputs[0]: x, **state})
    again = run(g, {g.inputs[0]: x, **{s: first[u] for s, u in g.metadata["state"].items()}})
    assert not np.array_equal(first[g.outputs[2]], again[g.outputs[2]])


def test_export_refuses_states_not_threaded():
    """The states must be graph inputs only the node reads: TFLite has no other place for them."""
    g = lstm_graph("f32")
    g.output(g.relu("cell"))
    with pytest.raises(UnsupportedOpError, match="lstm whose states"):
        to_tflite_bytes(g)


def test_import_refuses_what_tflite_micro_refuses():
    """A peephole LSTM (input 9 present): TFLite Micro's kernel refuses it, and so does the import."""
    data = bytearray(to_tflite_bytes(lstm_graph("f32")))
    model = schema_module("Model").Model.GetRootAs(bytes(data), 0)
    op = model.Subgraphs(0).Operators(0)
    inputs = op.InputsAsNumpy()
    assert inputs[9] == -1
    # point the peephole slot at the input-gate weights' tensor, in place in the file's int32 vector
    vec = op._tab.Vector(op._tab.Offset(6))
    at = vec + 9 * 4
    data[at : at + 4] = int(inputs[1]).to_bytes(4, "little", signed=True)
    with pytest.raises(UnsupportedOpError, match="peephole"):
        load_tflite_bytes(bytes(data), source="peephole")
