"""SVDF on the jax target, over sequences of invokes with the state threaded, against the reference.

keyword_scrambled (int8, seven SVDF layers) must be bit-exact; a float SVDF
within float32 tolerance (XLA sums in its own order).
"""

from __future__ import annotations

import numpy as np
from threadedsequence import threaded_pairs

from modelfiles import model_path
from rlx_edge.frontends.tflite import load_tflite
from rlx_edge.ir.graph import Graph
from rlx_edge.targets.jax import compile_jax

STEPS = 10


def test_keyword_scrambled_bit_exact_on_jax():
    g = load_tflite(model_path("tflm/keyword_scrambled.tflite"))
    rng = np.random.default_rng(5)
    feeds = [{g.inputs[0]: rng.integers(-32768, 32768, (1, 96)).astype(np.int16)} for _ in range(STEPS)]
    for k, (want, have) in enumerate(threaded_pairs(g, feeds, compile_jax(g, batch="exact"))):
        for name in g.outputs:
            assert np.array_equal(want[name], have[name]), f"step {k}: {name}"


def test_float_svdf_on_jax():
    rng = np.random.default_rng(6)
    g = Graph("svdf_f32")
    x = g.input("x", (2, 5), "f32")
    s = g.input("state", (2, 4 * 2 * 3), "f32")
    wf = g.param("wf", rng.uniform(-1, 1, (8, 5)).astype(np.float32))
    wt = g.param("wt", rng.uniform(-1, 1, (8, 3)).astype(np.float32))
    b = g.param("b", rng.uniform(-1, 1, (4,)).astype(np.float32))
    y, new_state = g.svdf(x, wf, wt, s, b, rank=2, activation="relu")
    g.output(y, new_state)
    g.metadata["state"] = {"state": new_state.name}  # both sides start it at 0 and feed its update back
    feeds = [{"x": rng.uniform(-2, 2, (2, 5)).astype(np.float32)} for _ in range(STEPS)]
    steps = threaded_pairs(g, feeds, compile_jax(g, batch="exact"))
    assert any(w[y.name].any() for w, _ in steps)  # relu leaves something through
    for k, (want, have) in enumerate(steps):
        for name in g.outputs:
            # float32 sums of about a dozen O(1) products in XLA's order, not numpy's
            np.testing.assert_allclose(have[name], want[name], rtol=1e-5, atol=1e-5, err_msg=f"step {k}: {name}")
