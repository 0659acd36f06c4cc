"""Stateful models (SVDF, LSTM) against TFLite Micro over a sequence of invokes, the states threaded.

TFLite Micro keeps the states in variable tensors across invokes; the imported
graph takes each as an input and gives its update as an output
(``graph.metadata["state"]``). :func:`compare_sequence` runs one TFLite Micro
interpreter over seeded random inputs and the reference over the same
sequence, feeding each update back, and compares every output and every
tensor TFLite Micro preserves (the states included) after every invoke.
"""

from __future__ import annotations

import numpy as np

from rlx_edge.frontends.tflm import TflmModel
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.interpret import run
from rlx_edge.targets.reference.compare import initial_state


def _random(rng: np.random.Generator, g: Graph, name: str) -> np.ndarray:
    t = g.types[name]
    shape = tuple(int(d) for d in t.shape)
    if t.dtype.is_float:
        return rng.uniform(-2, 2, shape).astype(t.dtype.numpy)
    info = np.iinfo(t.dtype.numpy)
    return rng.integers(info.min, int(info.max) + 1, shape).astype(t.dtype.numpy)


def compare_sequence(data: bytes, g: Graph, seed: int, atol: float = 0.0, steps: int = 12) -> int:
    """Run ``steps`` invokes on both sides; returns how many tensors were compared per invoke.

    ``atol`` is for float models only (the caller says why its sums may differ in the last bits).
    """
    pairs = g.metadata["state"]
    model_inputs = [n for n in g.inputs if n not in pairs]
    index_of = g.metadata["tflite_tensor_index"]
    computed = [o for node in g.nodes for o in node.outputs]
    names = [v for v in dict.fromkeys(computed + list(g.outputs)) if v in index_of]
    assert set(pairs.values()) <= set(names)  # every state update is checked against its variable tensor
    rng = np.random.default_rng(seed)
    feeds = [{n: _random(rng, g, n) for n in model_inputs} for _ in range(steps)]
    with TflmModel(data, preserve=True) as m:
        theirs = m.run_many([[f[n] for n in model_inputs] for f in feeds], sorted({index_of[v] for v in names}))
    state = initial_state(g)
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
