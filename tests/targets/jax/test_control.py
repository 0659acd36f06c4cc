"""The jax target runs if_ / while_ / scan natively (lax.cond, lax.while_loop, lax.scan), exact with the reference."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from controlgraphs import Q, branchy, counter_loop, running_sum, values

from rlx_edge.ir.graph import Graph
from rlx_edge.targets.jax import compile_jax, lower_graph
from rlx_edge.targets.reference import run

RNG = np.random.default_rng(7)
BATCH = 6


def _check(g: Graph, feeds: list[dict[str, np.ndarray]]) -> None:
    """One batched (vmapped) call against the reference sample by sample; int8 bit for bit, float exactly too:
    the subgraphs are the same elementwise ops in the same order."""
    model = compile_jax(g, batch="exact")
    got = model({k: np.stack([f[k] for f in feeds]) for k in g.inputs})
    for b, f in enumerate(feeds):
        want = run(g, f)
        for k in g.outputs:
            assert got[k][b].dtype == want[k].dtype and np.array_equal(got[k][b], want[k]), (k, b)


def _primitives(g: Graph, feed: dict[str, np.ndarray]) -> str:
    with jax.enable_x64(True):
        return str(jax.make_jaxpr(lower_graph(g).fn)(*[feed[k] for k in g.inputs]))


@pytest.mark.parametrize("q", [None, Q])
def test_if_is_lax_cond(q) -> None:
    g = branchy(q)
    feeds = [{"cond": np.array([b % 2 == 0]), "x": values(RNG, (2, 3), q), "y": values(RNG, (2, 3), q)}
             for b in range(BATCH)]  # fmt: skip
    assert "cond[" in _primitives(g, feeds[0])
    _check(g, feeds)


@pytest.mark.parametrize("q", [None, Q])
@pytest.mark.parametrize("max_trips", [None, 3])
def test_while_is_lax_while_loop_with_a_dynamic_trip_count(q, max_trips) -> None:
    g = counter_loop(q, max_trips=max_trips)
    feeds = [{"x": values(RNG, (4,), q), "n": np.asarray(n, np.int32)} for n in (0, 1, 2, 3, 5, -1)]
    text = _primitives(g, feeds[0])
    assert text.count("while[") == 1  # the count is known at run time only: one loop, not unrolled
    _check(g, feeds)


@pytest.mark.parametrize("q", [None, Q])
def test_scan_is_lax_scan(q) -> None:
    g = running_sum(q, length=5)
    feeds = [{"acc": values(RNG, (3,), q), "xs": values(RNG, (5, 3), q)} for _ in range(BATCH)]
    assert "scan[" in _primitives(g, feeds[0])
    _check(g, feeds)
