"""LSTM on the jax target, over sequences of invokes with hidden and cell state threaded, against the reference.

trained_lstm_int8 (int8 activations, int16 cell state, 28 steps per invoke) must be
bit-exact; trained_lstm (float) within float32 tolerance (XLA sums in its own order).
"""

from __future__ import annotations

import numpy as np

from modelfiles import model_path
from rlx_edge.frontends.tflite import load_tflite
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.interpret import run
from rlx_edge.targets.jax import compile_jax

STEPS = 3


def _sequence(g: Graph, feeds: list[dict[str, np.ndarray]]) -> list[tuple[dict, dict]]:
    """(reference outputs, jax outputs) of every invoke, each side threading its own states from TFLite
    Micro's initial ones (the zero points)."""
    pairs = g.metadata["state"]
    fn = compile_jax(g, batch="exact")
    state = {}
    for s in pairs:
        t = g.types[s]
        zp = 0 if t.quant is None else int(t.quant.zero_point[0])
        state[s] = np.full(tuple(int(d) for d in t.shape), zp, t.dtype.numpy)
    ours_state, jax_state, got = dict(state), dict(state), []
    for feed in feeds:
        want = run(g, {**feed, **ours_state})
        have = {k: np.asarray(v) for k, v in fn({**feed, **jax_state}).items()}
        ours_state = {s: want[u] for s, u in pairs.items()}
        jax_state = {s: have[u] for s, u in pairs.items()}
        got.append((want, have))
    return got


def _feeds(g: Graph, seed: int) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    (name,) = [n for n in g.inputs if n not in g.metadata["state"]]
    t = g.types[name]
    shape = tuple(int(d) for d in t.shape)
    if t.dtype.is_float:
        return [{name: rng.uniform(0, 1, shape).astype(np.float32)} for _ in range(STEPS)]
    return [{name: rng.integers(-128, 128, shape).astype(np.int8)} for _ in range(STEPS)]


def test_trained_lstm_int8_bit_exact_on_jax():
    g = load_tflite(model_path("tflm/trained_lstm_int8.tflite"))
    assert len(g.metadata["state"]) == 2
    for k, (want, have) in enumerate(_sequence(g, _feeds(g, 7))):
        for name in g.outputs:  # the class scores and both states
            assert np.array_equal(want[name], have[name]), f"invoke {k}: {name}"


def test_trained_lstm_float_on_jax():
    g = load_tflite(model_path("tflm/trained_lstm.tflite"))
    for k, (want, have) in enumerate(_sequence(g, _feeds(g, 8))):
        for name in g.outputs:
            # float32: 28 steps of sums of 48 products and tanh/sigmoid, in XLA's order rather than numpy's
            np.testing.assert_allclose(have[name], want[name], rtol=1e-5, atol=1e-5, err_msg=f"invoke {k}: {name}")
