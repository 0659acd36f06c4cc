"""SVDF against TFLite Micro over sequences of invokes, its state threaded through the graph.

TFLite Micro keeps SVDF's state in a variable tensor across invokes; the
imported graph takes it as an input and gives its update as an output
(``graph.metadata["state"]``); ``tflmsequence.compare_sequence`` runs both
over a sequence of invokes and compares every tensor after every invoke.
"""

from __future__ import annotations

import pytest
from svdfgraphs import svdf_graph
from tflmsequence import compare_sequence

from modelfiles import TFLM, model_path
from rlx_edge.errors import UnsupportedOpError
from rlx_edge.frontends.tflite import load_tflite, load_tflite_bytes, to_tflite_bytes


def test_keyword_scrambled_bit_exact_over_a_sequence():
    """Seven int8 SVDF layers with int16 state, fully connected layers, int8 -> int16 softmax."""
    path = model_path("tflm/keyword_scrambled.tflite")
    assert path.parent == TFLM
    g = load_tflite(path)
    assert sum(n.op == "svdf" for n in g.nodes) == 7
    assert len(g.metadata["state"]) == 7 and g.outputs[1:] == list(g.metadata["state"].values())
    # seed 0 meets a rounding that a float32 (instead of double) effective scale gets wrong
    assert compare_sequence(path.read_bytes(), g, seed=0) == 22


CASES = {
    "f32": dict(dtype="f32"),
    "f32_rank2_batch2_relu": dict(dtype="f32", rank=2, batch=2, activation="relu"),
    "f32_no_bias": dict(dtype="f32", bias=False),
    "i8_no_bias": dict(dtype="i8", bias=False, units=2),
    "i8_state_i16": dict(dtype="i8"),
    "i8_state_i16_rank2_batch2": dict(dtype="i8", rank=2, batch=2, memory=3),
    "i8_state_i8_zero_point": dict(dtype="i8", state_dtype="i8", state_zp=-7, units=4),
    "i8_state_i8_rank3": dict(dtype="i8", state_dtype="i8", state_zp=3, rank=3, memory=2),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_single_svdf_via_the_exporter(case):
    g = svdf_graph(**CASES[case])
    data = to_tflite_bytes(g)
    back = load_tflite_bytes(data, source=case)
    (node,) = back.nodes
    assert node.op == "svdf" and back.metadata["state"] == {"state": node.outputs[1]}
    assert back.inputs == ["x", "state"] and back.outputs == [node.outputs[0], node.outputs[1]]
    # float: a few O(1)-O(10) sums in another order than TFLite Micro's loops
    assert compare_sequence(data, back, seed=3, atol=1e-4 if case.startswith("f32") else 0.0) == 2


def test_export_refuses_a_state_not_threaded():
    """The state must be a graph input only the node reads: TFLite has no other place for it."""
    g = svdf_graph("f32")
    g.output(g.relu("state"))
    with pytest.raises(UnsupportedOpError, match="svdf whose state"):
        to_tflite_bytes(g)
