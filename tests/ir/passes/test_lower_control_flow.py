"""lower_control_flow: the lowered graph computes exactly what the control flow did (int8 bit for bit)."""

from __future__ import annotations

import numpy as np
import pytest
from controlgraphs import Q, branchy, counter_loop, running_sum, values

from rlx_edge.errors import UnsupportedOpError
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.interpret import run
from rlx_edge.ir.passes import PassContext, get_pass
from rlx_edge.ir.verify import verify
from rlx_edge.pipeline import legalize_for

RNG = np.random.default_rng(5)
LOWER = get_pass("lower_control_flow")


def _lowered(g: Graph) -> tuple[Graph, PassContext]:
    ctx = PassContext("lower_control_flow")
    h = LOWER(g, ctx)
    verify(h)
    assert h.outputs == g.outputs and h.inputs == g.inputs
    return h, ctx


def _same(g: Graph, h: Graph, feeds: dict) -> None:
    want, got = run(g, feeds), run(h, feeds)
    for k in g.outputs:
        assert want[k].dtype == got[k].dtype and np.array_equal(want[k], got[k]), k


@pytest.mark.parametrize("q", [None, Q])
def test_if_becomes_both_branches_and_select(q) -> None:
    g = branchy(q)
    h, ctx = _lowered(g)
    ops = [n.op for n in h.nodes]
    assert "if_" not in ops and ops.count("select_v2") == 2
    assert [e.what for e in ctx.events] == ["if_ lowered to both branches and select_v2"]
    for taken in (True, False):
        _same(g, h, {"cond": np.array([taken]), "x": values(RNG, (2, 3), q), "y": values(RNG, (2, 3), q)})


@pytest.mark.parametrize("n", [0, 1, 5])
def test_while_with_a_constant_trip_count_is_unrolled_exactly(n: int) -> None:
    g = counter_loop(Q, n_input=False, n=n)
    h, ctx = _lowered(g)
    ops = [n.op for n in h.nodes]
    assert "while_" not in ops and "select_v2" not in ops
    assert ops.count("add") == 2 * n  # the counter's add and x's add per trip
    assert ctx.events[0].what == f"while_ unrolled: {n} trip(s), known at compile time"
    for _ in range(3):
        _same(g, h, {"x": values(RNG, (4,), Q)})


@pytest.mark.parametrize("q", [None, Q])
def test_while_with_a_dynamic_count_and_a_bound_is_guarded(q) -> None:
    g = counter_loop(q, max_trips=4)
    h, ctx = _lowered(g)
    assert "while_" not in [n.op for n in h.nodes]
    assert "guarded trips" in ctx.events[0].what
    for n in (-3, 0, 1, 3, 4, 9):  # below, inside and past the bound
        _same(g, h, {"x": values(RNG, (4,), q), "n": np.asarray(n, np.int32)})


def test_while_with_an_unknown_count_and_no_bound_stays_and_fpga_refuses_it() -> None:
    g = counter_loop(Q)
    h, ctx = _lowered(g)
    assert [n.op for n in h.nodes] == ["while_"]
    assert ctx.events[0].kind == "skipped" and "max_trips is not set" in ctx.events[0].what
    with pytest.raises(UnsupportedOpError, match=r"node 'loop' \(op while_\): supported by cortexm, jax, reference"):
        legalize_for(g, "fpga")


@pytest.mark.parametrize("q", [None, Q])
def test_scan_is_unrolled_over_its_length(q) -> None:
    g = running_sum(q, length=4)
    h, _ = _lowered(g)
    ops = [n.op for n in h.nodes]
    assert "scan" not in ops and ops.count("add") == 4 and ops.count("concat") == 1
    for _ in range(3):
        _same(g, h, {"acc": values(RNG, (3,), q), "xs": values(RNG, (4, 3), q)})


def test_control_flow_nested_in_a_body_is_lowered_too() -> None:
    inner = running_sum(Q, length=2, shape=(4,))
    g = counter_loop(Q, n_input=False, n=2)
    body = g.node("loop").attrs["body"]
    x = body.tensor("next_x")
    xs = body.reshape(body.concat(x, x, axis=0), shape=(2, 4))
    acc, _ = body.scan(x, xs, body=inner.node("steps").attrs["body"], num_carries=1, out_quant=[Q, Q])
    body.outputs[2] = acc.name
    verify(g)
    h, _ = _lowered(g)
    assert not {"while_", "scan"} & {n.op for n in h.nodes}
    _same(g, h, {"x": values(RNG, (4,), Q)})


def test_a_target_without_loops_gets_the_lowered_graph() -> None:
    g = counter_loop(Q, n_input=False, n=3)
    g.outputs.remove("loop:0")  # the counter: constant once unrolled
    h = legalize_for(g, "fpga")  # the FPGA runs no while_, but int8 adds
    assert [n.op for n in h.nodes] == ["add"] * 3
    _same(g, h, {"x": values(RNG, (4,), Q)})
    assert legalize_for(g, "cortexm") is g  # Cortex-M runs the loop itself (tests/targets/cortexm/test_while.py)
