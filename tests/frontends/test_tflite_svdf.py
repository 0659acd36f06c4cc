"""SVDF against TFLite Micro over sequences of invokes, its state threaded through the graph.

TFLite Micro keeps SVDF's state in a variable tensor across invokes; the
imported graph takes it as an input and gives its update as an output
(``graph.metadata["state"]``). Each test runs one TFLite Micro interpreter
over a sequence of seeded random inputs and the reference over the same
sequence, feeding each update back, and compares every output and every
tensor TFLite Micro preserves (the states included) after every invoke.
"""

from __future__ import annotations

import numpy as np
import pytest
from svdfgraphs import svdf_graph

from modelfiles import TFLM, model_path
from rlx_edge.errors import UnsupportedOpError
from rlx_edge.frontends.tflite import load_tflite, load_tflite_bytes, to_tflite_bytes
from rlx_edge.frontends.tflm import TflmModel
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.interpret import run

STEPS = 12


def _initial_state(g: Graph) -> dict[str, np.ndarray]:
    """What TFLite Micro starts a variable tensor at: its zero point (0 for float)."""
    out = {}
    for name in g.metadata["state"]:
        t = g.types[name]
        zp = 0 if t.quant is None else int(t.quant.zero_point[0])
        out[name] = np.full(tuple(int(d) for d in t.shape), zp, t.dtype.numpy)
    return out


def _random(rng: np.random.Generator, g: Graph, name: str) -> np.ndarray:
    t = g.types[name]
    shape = tuple(int(d) for d in t.shape)
    if t.dtype.is_float:
        return rng.uniform(-2, 2, shape).astype(t.dtype.numpy)
    info = np.iinfo(t.dtype.numpy)
    return rng.integers(info.min, int(info.max) + 1, shape).astype(t.dtype.numpy)


def _compare_sequence(data: bytes, g: Graph, seed: int, atol: float = 0.0) -> int:
    """Run STEPS invokes on both sides; returns how many tensors were compared per invoke.

    ``atol`` is for float models only: TFLite Micro sums the products one by one,
    numpy in another order, so the last bits differ (values here are O(10)).
    """
    pairs = g.metadata["state"]
    model_inputs = [n for n in g.inputs if n not in pairs]
    index_of = g.metadata["tflite_tensor_index"]
    computed = [o for node in g.nodes for o in node.outputs]
    names = [v for v in dict.fromkeys(computed + list(g.outputs)) if v in index_of]
    assert set(pairs.values()) <= set(names)  # every state update is checked against its variable tensor
    rng = np.random.default_rng(seed)
    feeds = [{n: _random(rng, g, n) for n in model_inputs} for _ in range(STEPS)]
    with TflmModel(data, preserve=True) as m:
        theirs = m.run_many([[f[n] for n in model_inputs] for f in feeds], sorted({index_of[v] for v in names}))
    state = _initial_state(g)
    for k, (feed, (_, tensors)) in enumerate(zip(feeds, theirs)):
        outs, traced = run(g, {**feed, **state}, trace=True)
        values = {**traced, **outs}
        state = {s: outs[u] for s, u in pairs.items()}
        for v in names:
            ours, want = values[v].reshape(tensors[index_of[v]].shape), tensors[index_of[v]]
            assert ours.dtype == want.dtype, f"invoke {k}, {v}: {ours.dtype} vs {want.dtype}"
            if atol:
                np.testing.assert_allclose(ours, want, rtol=0, atol=atol, err_msg=f"invoke {k}, {v}")
            else:
                assert np.array_equal(ours, want), f"invoke {k}, {v}: {np.argwhere(ours != want)[:3].tolist()}"
    return len(names)


def test_keyword_scrambled_bit_exact_over_a_sequence():
    """Seven int8 SVDF layers with int16 state, fully connected layers, int8 -> int16 softmax."""
    path = model_path("tflm/keyword_scrambled.tflite")
    assert path.parent == TFLM
    g = load_tflite(path)
    assert sum(n.op == "svdf" for n in g.nodes) == 7
    assert len(g.metadata["state"]) == 7 and g.outputs[1:] == list(g.metadata["state"].values())
    # seed 0 meets a rounding that a float32 (instead of double) effective scale gets wrong
    assert _compare_sequence(path.read_bytes(), g, seed=0) == 22


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
    assert _compare_sequence(data, back, seed=3, atol=1e-4 if case.startswith("f32") else 0.0) == 2


def test_export_refuses_a_state_not_threaded():
    """The state must be a graph input only the node reads: TFLite has no other place for it."""
    g = svdf_graph("f32")
    g.output(g.relu("state"))
    with pytest.raises(UnsupportedOpError, match="svdf whose state"):
        to_tflite_bytes(g)
