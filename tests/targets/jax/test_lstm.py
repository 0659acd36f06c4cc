"""LSTM on the jax target, over sequences of invokes with hidden and cell state threaded, against the reference.

trained_lstm_int8 (int8 activations, int16 cell state, 28 steps per invoke) must be
bit-exact; trained_lstm (float) within float32 tolerance (XLA sums in its own order).
"""

from __future__ import annotations

import numpy as np
from threadedsequence import threaded_pairs

from modelfiles import model_path
from rlx_edge.frontends.tflite import load_tflite
from rlx_edge.ir.graph import Graph
from rlx_edge.targets.jax import compile_jax

STEPS = 3


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
    for k, (want, have) in enumerate(threaded_pairs(g, _feeds(g, 7), compile_jax(g, batch="exact"))):
        for name in g.outputs:  # the class scores and both states
            assert np.array_equal(want[name], have[name]), f"invoke {k}: {name}"


def test_trained_lstm_float_on_jax():
    g = load_tflite(model_path("tflm/trained_lstm.tflite"))
    for k, (want, have) in enumerate(threaded_pairs(g, _feeds(g, 8), compile_jax(g, batch="exact"))):
        for name in g.outputs:
            # float32: 28 steps of sums of 48 products and tanh/sigmoid, in XLA's order rather than numpy's
            np.testing.assert_allclose(have[name], want[name], rtol=1e-5, atol=1e-5, err_msg=f"invoke {k}: {name}")
