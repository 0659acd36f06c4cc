"""Arena planning: soundness (validator + execution inside the arena), sizes, options."""

import json
import subprocess
import sys

import numpy as np
import pytest

from rlx_edge.errors import IRError, ModelFileError
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.plan import PlanError, plan, validate
from rlx_edge.ir.plan.placement import best_fit, greedy_size
from rlx_edge.ir.plan.schedule import memory_aware, topological
from rlx_edge.ir.serialize import dumps_program, loads_program
from rlx_edge.targets.reference import run
from rlx_edge.targets.reference.arena import run_program


def residual_net() -> Graph:
    rng = np.random.default_rng(0)
    g = Graph("res")
    x = g.input("x", (1, 12, 12, 8))

    def w(o, i):
        return g.param(f"w{len(g.params)}", rng.standard_normal((o, 3, 3, i)).astype(np.float32) / 8)

    a = g.conv2d(x, w(8, 8), padding="same", activation="relu", name="a")
    b = g.conv2d(a, w(8, 8), padding="same", name="b")
    c = g.add(b, a, activation="relu", name="c")  # a dies here: c may take a's or b's bytes
    d = g.conv2d(c, w(16, 8), padding="same", strides=(2, 2), name="d")
    e = g.relu(d, name="e")  # in place
    f = g.reshape(e, shape=(1, -1), name="f")  # a view
    g.output(g.softmax(f, name="probs"))
    return g


def branchy_net() -> Graph:
    """Two branches that each blow up then shrink; the stored order interleaves them."""
    rng = np.random.default_rng(1)
    g = Graph("branchy")
    x = g.input("x", (1, 8, 8, 4))
    up1 = g.conv2d(x, g.param("u1", rng.standard_normal((64, 1, 1, 4)).astype(np.float32)), name="up1")
    up2 = g.conv2d(x, g.param("u2", rng.standard_normal((64, 1, 1, 4)).astype(np.float32)), name="up2")
    dn1 = g.conv2d(up1, g.param("d1", rng.standard_normal((4, 1, 1, 64)).astype(np.float32)), name="dn1")
    dn2 = g.conv2d(up2, g.param("d2", rng.standard_normal((4, 1, 1, 64)).astype(np.float32)), name="dn2")
    g.output(g.add(dn1, dn2, name="sum"))
    return g


def test_arena_execution_equals_interpreter():
    g = residual_net()
    p = plan(g)
    x = np.random.default_rng(2).standard_normal((1, 12, 12, 8)).astype(np.float32)
    want, want_trace = run(g, x, trace=True)
    got, got_trace = run_program(p, x, trace=True)
    np.testing.assert_array_equal(got["probs"], want["probs"])
    for name, arr in want_trace.items():
        np.testing.assert_array_equal(got_trace[name], arr, err_msg=name)


def test_views_and_inplace_share_bytes():
    p = plan(residual_net())
    assert p.offsets["f"] == p.offsets["e"] == p.offsets["d"]  # reshape view, relu in place
    assert p.inplace["e"] == "d"
    assert "c" in p.inplace  # add takes the buffer of an input that dies there
    no = plan(residual_net(), inplace=False)
    assert not no.inplace and no.lower_bound_bytes >= p.lower_bound_bytes


def test_graph_inputs_and_outputs_are_never_overwritten():
    g = Graph()
    x = g.input("x", (1, 16))
    y = g.relu(x, name="y")
    g.output(g.relu(y, name="z"), y)
    p = plan(g)
    assert "y" not in p.inplace  # x is a graph input
    assert "z" not in p.inplace  # y is a graph output
    assert p.offsets["y"] != p.offsets["x"] and p.offsets["z"] != p.offsets["y"]


def test_validator_catches_overlap_and_out_of_bounds():
    g = residual_net()
    p = plan(g)
    x = np.random.default_rng(3).standard_normal((1, 12, 12, 8)).astype(np.float32)
    broken = plan(g)
    broken.offsets["b"] = broken.offsets["a"]  # b and a are both live at c
    with pytest.raises(PlanError, match="'a' and 'b' are live together"):
        validate(broken)
    # and the arena interpreter shows why it matters
    assert not np.array_equal(run_program(broken, x)["probs"], run_program(p, x)["probs"])
    outside = plan(g)
    outside.offsets["probs"] = outside.arena_bytes - 16
    with pytest.raises(PlanError, match="outside the arena"):
        validate(outside)
    misaligned = plan(g)
    misaligned.offsets["probs"] += 4
    with pytest.raises(PlanError, match="aligned"):
        validate(misaligned)


def test_alignment_option():
    p = plan(residual_net(), alignment=64)
    assert all(o % 64 == 0 for o in p.offsets.values())
    with pytest.raises(IRError, match="power of two"):
        plan(residual_net(), alignment=24)


def test_memory_aware_schedule_lowers_the_peak():
    g = branchy_net()
    topo = plan(g, schedule="topological")
    mem = plan(g, schedule="memory")
    assert [n.name for n in topological(g)] == ["up1", "up2", "dn1", "dn2", "sum"]
    assert [n.name for n in memory_aware(g)][:2] == ["up1", "dn1"]
    assert mem.lower_bound_bytes < topo.lower_bound_bytes
    assert plan(g).arena_bytes == min(mem.arena_bytes, topo.arena_bytes)


def test_both_placements_are_valid_and_plan_keeps_the_smaller():
    g = residual_net()
    for algo in ("greedy_size", "best_fit"):
        validate(plan(g, algorithms=(algo,)))
    p = plan(g)
    assert p.arena_bytes == min(plan(g, algorithms=(a,)).arena_bytes for a in ("greedy_size", "best_fit"))
    assert p.lower_bound_bytes <= p.arena_bytes


def test_best_fit_beats_first_fit_on_a_known_case():
    from rlx_edge.ir.plan.liveness import Buffer

    # A long-lived small buffer placed first-fit splits the address space badly.
    bufs = [
        Buffer("big1", 100, 0, 1),
        Buffer("small", 30, 1, 4),
        Buffer("mid", 60, 2, 3),
        Buffer("big2", 100, 3, 4),
    ]
    g, b = greedy_size(bufs, 1), best_fit(bufs, 1)
    assert b.arena_bytes <= g.arena_bytes


def test_scratch_buffers_are_placed_and_proved():
    g = residual_net()
    p = plan(g, scratch=lambda graph, node: 100 if node.op == "conv2d" else 0)
    assert set(p.scratch) == {"a", "b", "d"} and p.scratch_bytes == 100
    x = np.random.default_rng(4).standard_normal((1, 12, 12, 8)).astype(np.float32)
    np.testing.assert_array_equal(run_program(p, x)["probs"], run(g, x)["probs"])
    p.scratch["b"] = (p.offsets["a"], 100)  # scratch over a live input
    with pytest.raises(PlanError, match="scratch"):
        validate(p)


def test_symbolic_and_hir_graphs_are_refused():
    g = Graph()
    x = g.input("x", ("N", 4))
    g.output(g.relu(x))
    with pytest.raises(IRError, match="bind the symbols"):
        plan(g)


def test_program_round_trips_and_unsound_files_are_refused():
    p = plan(residual_net())
    data = dumps_program(p)
    q = loads_program(data)
    assert dumps_program(q) == data
    assert q.offsets == p.offsets and q.schedule == p.schedule and q.arena_bytes == p.arena_bytes
    # forge an unsound plan with a valid checksum: the loader re-proves it
    q.offsets["b"] = q.offsets["a"]
    with pytest.raises(ModelFileError, match="unsound arena plan"):
        loads_program(dumps_program(q), "forged.rlx")


def test_plan_cli_json_and_plot(tmp_path):
    from rlx_edge.ir.serialize import save

    model = tmp_path / "res.rlx"
    save(residual_net(), model)
    png = tmp_path / "arena.png"
    r = subprocess.run(
        [sys.executable, "-m", "rlx_edge.cli", "plan", str(model), "--json", "--plot", str(png)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    obj = json.loads(r.stdout)
    for key in ("arena_bytes", "lower_bound_bytes", "scratch_bytes", "weight_bytes"):
        assert isinstance(obj[key], int)
    assert obj["arena_bytes"] == plan(residual_net()).arena_bytes
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_constant_graph_output_is_a_clear_error():
    # Found by fuzzing: a TFLite subgraph listing a weight tensor among its outputs reached the validator as a KeyError.
    g = residual_net()
    g.output(next(iter(g.params)))
    with pytest.raises(IRError, match=r"is a constant \(weights\), not computed by any node"):
        plan(g)
