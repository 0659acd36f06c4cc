"""The jax rule table's coverage and the comparison helpers the jax tests share.

Every op's rule runs against the reference in ``tests/targets/test_op_x_target.py``.

Float results are compared with a tolerance because XLA and numpy order
float additions differently and use different exp/tanh/erf approximations,
so float32 results differ in the last bits: float32 within 1e-5
(relative and absolute), float64 within 1e-12, and float16 within one
half-precision step (2**-10 relative), since a last-bit difference of the
float32 computation can move the final rounding to float16 by one step.
Integer results (plain or quantized) must be identical.
"""

from __future__ import annotations

import numpy as np
import pytest

from opgraphs import single_node_graph
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.ops import REGISTRY
from rlx_edge.targets.jax import RULES, compile_jax
from rlx_edge.targets.reference import run

TOL = {np.dtype(np.float32): 1e-5, np.dtype(np.float64): 1e-12, np.dtype(np.float16): 2.0**-10}


def feed(g: Graph, inputs: list, params=()) -> list[np.ndarray]:
    return [np.asarray(a) for i, a in enumerate(inputs) if a is not None and i not in params]


def assert_matches(g: Graph, arrays: list[np.ndarray], **options) -> None:
    """The jax target gives the reference's outputs, or fails where the reference fails."""
    try:
        want = run(g, arrays)
    except Exception as e:
        with pytest.raises(Exception):  # noqa: B017 - whatever the reference rejects, jax must not accept
            compile_jax(g, batch="exact", **options)(arrays)
        return e
    got = compile_jax(g, batch="exact", **options)(arrays)
    for name in g.outputs:
        w, o = want[name], got[name]
        assert o.dtype == w.dtype and o.shape == w.shape, f"{name}: {o.dtype}{o.shape} vs {w.dtype}{w.shape}"
        if w.dtype.kind == "f":
            tol = TOL[w.dtype]
            np.testing.assert_allclose(o, w, rtol=tol, atol=tol, err_msg=f"{g.name}")
        else:
            np.testing.assert_array_equal(o, w, err_msg=f"{g.name}")
    return None


def test_every_mir_op_has_a_rule() -> None:
    mir = {n for n, op in REGISTRY.items() if op.stage == "mir"}
    assert mir <= set(RULES.keys()), sorted(mir - set(RULES.keys()))


def test_a_wrong_rule_is_caught() -> None:
    # the comparison above is sensitive: a rule that rounds differently fails it
    from rlx_edge.targets.jax import _lazy

    x = np.array([[7.0, 1.0]], np.float32)
    g = single_node_graph("relu6", [x], {})
    with RULES.replaced("relu6", lambda ctx: lambda x: _lazy.jnp.clip(x, 0, 6.001)):
        with pytest.raises(AssertionError):
            assert_matches(g, [x])
    assert_matches(g, [x])
