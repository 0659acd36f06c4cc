"""lower_hir descends into control-flow subgraphs: a while_ body built from ``linear`` blocks lowers to
fully_connected, and verify accepts HIR subgraphs in an HIR graph (only there)."""

from __future__ import annotations

import numpy as np
import pytest

from rlx_edge.errors import IRError
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.passes.lower_hir import lower_hir
from rlx_edge.ir.verify import verify
from rlx_edge.targets.reference import run

RNG = np.random.default_rng(5)
W1 = (RNG.standard_normal((6, 4)) * 0.5).astype(np.float32)
W2 = (RNG.standard_normal((4, 6)) * 0.5).astype(np.float32)


def _body() -> Graph:
    """h = tanh(linear(relu-linear(h))); i = i + 1: two blocks per trip."""
    body = Graph("body")
    i, n, h = body.input("i", (1,), "f32"), body.input("n", (1,), "f32"), body.input("h", (1, 4), "f32")
    mid = body.linear(h, body.param("w1", W1), activation="relu", name="up")
    out = body.linear(mid, body.param("w2", W2), activation="none", name="down")
    body.output(body.add(i, body.param("one", np.ones(1, np.float32)), name="next_i"), n, body.tanh(out, name="h2"))
    return body


def _loop(body: Graph) -> Graph:
    cond = Graph("cond")
    i, n, _ = cond.input("i", (1,), "f32"), cond.input("n", (1,), "f32"), cond.input("h", (1, 4), "f32")
    cond.output(cond.less(i, n, name="more"))
    g = Graph("loop")
    x, n = g.input("x", (1, 4), "f32"), g.input("n", (1,), "f32")
    _, _, h = g.while_(g.param("i0", np.zeros(1, np.float32)), n, x, cond=cond, body=body, name="loop")
    g.output(h)
    return g


def _expected(x: np.ndarray, trips: int) -> np.ndarray:
    h = x.astype(np.float32)
    for _ in range(trips):
        h = np.tanh(np.maximum(h @ W1.T, 0) @ W2.T)
    return h


def test_a_while_body_of_linear_blocks_lowers_and_computes_the_same() -> None:
    body = _body()
    assert body.stage == "hir"
    g = _loop(body)
    assert g.stage == "hir"  # an HIR subgraph makes its graph HIR: the pipeline lowers it
    verify(g)
    low = lower_hir(g)
    verify(low)
    (loop,) = low.nodes
    lowered = loop.attrs["body"]
    assert low.stage == lowered.stage == "mir"
    assert [n.op for n in lowered.nodes] == ["fully_connected", "fully_connected", "add", "tanh"]
    assert lowered.inputs == body.inputs and lowered.outputs == body.outputs
    assert body.stage == "hir" and [n.op for n in body.nodes][:2] == ["linear", "linear"]  # not modified
    x = RNG.standard_normal((1, 4)).astype(np.float32)
    for trips in (0, 1, 3):
        feed = {"x": x, "n": np.asarray([trips - 0.5], np.float32)}
        got = run(low, feed)[low.outputs[0]]
        # float: numpy's matmul and the reference's fully_connected may sum in other orders
        np.testing.assert_allclose(got, _expected(x, trips), rtol=1e-5, atol=1e-6)
        assert np.array_equal(got, run(g, feed)[g.outputs[0]])  # the HIR graph runs through the same lowering


def test_verify_refuses_an_hir_subgraph_in_a_mir_graph() -> None:
    g = lower_hir(_loop(_body()))
    g.nodes[0].attrs["body"] = _body()  # put an unlowered body back
    with pytest.raises(IRError, match=r"node 'loop' \(while_\): subgraph body is at stage 'hir'; lower it"):
        verify(g)
