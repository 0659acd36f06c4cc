"""Every pass: where it must fire, where it must not (and says why), and that results do not change."""

from __future__ import annotations

import numpy as np
import pytest

from rlx_edge.errors import IRError, UnsupportedOpError
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.passes import PassContext, PassManager, get_pass, legalize, optimize
from rlx_edge.ir.types import QuantParams
from rlx_edge.ir.verify import verify
from rlx_edge.targets.reference import run

RNG = np.random.default_rng(0)


def rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def apply(name: str, g: Graph) -> tuple[Graph, PassContext]:
    ctx = PassContext(name)
    out = get_pass(name)(g, ctx)
    verify(out)
    return out, ctx


def same_outputs(a: Graph, b: Graph, x: dict[str, np.ndarray], tol: float = 1e-5) -> None:
    ra, rb = run(a, x), run(b, x)
    assert list(ra) == list(rb)
    for k in ra:
        np.testing.assert_allclose(ra[k], rb[k], rtol=tol, atol=tol)


def ops(g: Graph) -> list[str]:
    return [n.op for n in g.nodes]


def conv_graph(act_after: str | None = "relu", extra_reader: bool = False) -> Graph:
    g = Graph("t")
    x = g.input("x", (1, 6, 6, 3))
    y = g.conv2d(x, g.param("w", rand(4, 3, 3, 3)), g.param("b", rand(4)), padding="same", name="conv")
    if act_after == "relu":
        z = g.relu(y, name="act")
    elif act_after is None:
        z = y
    else:
        lo, hi = {"relu6": (0.0, 6.0), "n1": (-1.0, 1.0), "odd": (0.0, 3.0)}[act_after]
        z = g.clamp(y, min=lo, max=hi, name="act")
    g.output(z)
    if extra_reader:
        g.output(g.mul(y, g.param("two", np.float32(2.0)), name="other"))
    return g


X6 = {"x": rand(1, 6, 6, 3)}


# fold ------------------------------------------------------------------------------------
def test_fold_fires_on_constant_subgraphs():
    g = Graph("t")
    x = g.input("x", (2, 4))
    wq = g.param("wq", np.array([[1, -2, 3, 4]] * 3, np.int8), QuantParams(0.5, 0))
    w = g.dequantize(wq, name="deq")
    c = g.add(g.param("a", np.ones(3, np.float32)), g.param("c", np.ones(3, np.float32)), name="cadd")
    g.output(g.fully_connected(x, w, c, name="fc"))
    out, ctx = apply("fold", g)
    assert ops(out) == ["fully_connected"]
    assert {e.node for e in ctx.events if e.kind == "fired"} == {"deq", "cadd"}
    np.testing.assert_array_equal(out.params["deq"], np.array([[0.5, -1, 1.5, 2]] * 3, np.float32))
    same_outputs(g, out, {"x": rand(2, 4)})


def test_fold_leaves_nodes_with_runtime_inputs_and_respects_the_size_limit():
    g = Graph("t")
    x = g.input("x", (4,))
    big = g.add(g.param("a", np.ones((64, 64), np.float32)), g.param("b", np.float32(1)), name="big")
    g.output(g.add(x, g.param("c", np.ones(4, np.float32)), name="live"), big)
    ctx = PassContext("fold", {"fold_max_bytes": 1024})
    out = get_pass("fold")(g, ctx)
    assert ops(out) == ["add", "add"]
    assert [e.kind for e in ctx.events] == ["skipped"] and "limit" in ctx.events[0].what


# dce -------------------------------------------------------------------------------------
def test_dce_removes_dead_nodes_and_params_only():
    g = Graph("t")
    x = g.input("x", (4,))
    g.relu(g.add(x, g.param("dead_c", np.ones(4, np.float32)), name="dead_add"), name="dead_relu")
    g.output(g.relu(x, name="live"))
    out, ctx = apply("dce", g)
    assert ops(out) == ["relu"] and "dead_c" not in out.params
    assert {e.node for e in ctx.events} >= {"dead_add", "dead_relu"}
    out2, ctx2 = apply("dce", out)
    assert ops(out2) == ["relu"] and not ctx2.events


# cse -------------------------------------------------------------------------------------
def test_cse_merges_identical_nodes_and_params_but_not_different_ones():
    g = Graph("t")
    x = g.input("x", (1, 6, 6, 3))
    w = rand(4, 3, 3, 3)
    a = g.conv2d(x, g.param("w1", w), name="c1")
    b = g.conv2d(x, g.param("w2", w), name="c2")  # same weights under another name
    c = g.conv2d(x, g.param("w3", w), strides=(2, 2), name="c3")  # different attrs
    g.output(g.add(a, b, name="sum"), c)
    out, _ctx = apply("cse", g)
    assert [n.name for n in out.nodes] == ["c1", "c3", "sum"]
    assert out.node("sum").inputs == ["c1", "c1"]
    assert len(out.params) == 1
    same_outputs(g, out, X6)


def test_cse_keeps_duplicate_graph_outputs():
    g = Graph("t")
    x = g.input("x", (3,))
    g.output(g.relu(x, name="r1"), g.relu(x, name="r2"))
    out, ctx = apply("cse", g)
    assert ops(out) == ["relu", "relu"]
    assert ctx.events[0].kind == "skipped" and "graph output" in ctx.events[0].what


# simplify --------------------------------------------------------------------------------
def test_simplify_removes_identities():
    g = Graph("t")
    x = g.input("x", (2, 3))
    y = g.add(x, g.param("zero", np.zeros(3, np.float32)), name="plus0")
    y = g.mul(g.param("one", np.float32(1)), y, name="times1")
    y = g.relu(y, name="r")
    g.output(g.sub(y, g.param("z2", np.zeros((2, 3), np.float32)), name="minus0"))  # a graph output
    out, ctx = apply("simplify", g)
    assert ops(out) == ["relu"] and out.outputs == ["minus0"]
    assert len([e for e in ctx.events if e.kind == "fired"]) == 3
    same_outputs(g, out, {"x": rand(2, 3)})


def test_simplify_keeps_non_identities():
    g = Graph("t")
    x = g.input("x", (3,))
    a = g.add(x, g.param("zeros", np.zeros((2, 3), np.float32)), name="broadcasts")  # result is [2,3]
    b = g.mul(x, g.param("two", np.float32(2)), name="times2")
    c = g.add(x, g.param("z", np.zeros(3, np.float32)), activation="relu", name="relu_of_x")
    g.output(a, b, c)
    out, ctx = apply("simplify", g)
    assert ops(out) == ["add", "mul", "add"]
    assert not [e for e in ctx.events if e.kind == "fired"]


def test_simplify_transpose_chains():
    g = Graph("t")
    x = g.input("x", (1, 2, 3, 4))
    t1 = g.transpose(x, perm=(0, 3, 1, 2), name="t1")
    back = g.transpose(t1, perm=(0, 2, 3, 1), name="back")  # composes to the identity
    t3 = g.transpose(g.relu(back, name="r"), perm=(0, 3, 1, 2), name="t3")
    g.output(g.transpose(t3, perm=(0, 1, 3, 2), name="t4"))  # composes to a single transpose
    out, _ = apply("simplify", g)
    out, _ = apply("dce", out)
    assert ops(out) == ["relu", "transpose"]
    assert out.nodes[1].attrs["perm"] == (0, 3, 2, 1)
    same_outputs(g, out, {"x": rand(1, 2, 3, 4)})


def test_simplify_reshape_chains():
    g = Graph("t")
    x = g.input("x", (1, 2, 2, 4))
    r = g.reshape(g.reshape(x, shape=(1, 16), name="r1"), shape=(4, 4), name="r2")
    s = g.reshape(g.unsqueeze(g.relu(r, name="relu"), axes=(0,), name="unsq"), shape=(4, 4), name="same")
    g.output(s)
    out, _ctx = apply("simplify", g)
    out, _ = apply("dce", out)
    assert ops(out) == ["reshape", "relu"]
    assert out.nodes[0].inputs == ["x"]
    same_outputs(g, out, {"x": rand(1, 2, 2, 4)})


# bn_fold ---------------------------------------------------------------------------------
def _bn_params(g: Graph, c: int) -> list:
    return [g.param(f"bn{i}_{g._next_id}", v) for i, v in enumerate([rand(c), rand(c), rand(c), np.abs(rand(c)) + 0.5])]


@pytest.mark.parametrize("op", ["conv2d", "depthwise_conv2d", "fully_connected"])
def test_bn_fold_fires(op: str):
    g = Graph("t")
    if op == "fully_connected":
        x = g.input("x", (2, 5))
        y = g.fully_connected(x, g.param("w", rand(4, 5)), name="layer")
        c, feed = 4, {"x": rand(2, 5)}
    else:
        x = g.input("x", (1, 6, 6, 3))
        w = rand(4, 3, 3, 3) if op == "conv2d" else rand(1, 3, 3, 6)
        kw = {} if op == "conv2d" else {"depth_multiplier": 2}
        y = g.add_node(op, [x, g.param("w", w), g.param("b", rand(w.shape[0 if op == "conv2d" else 3]))], kw)[0]
        c, feed = w.shape[0 if op == "conv2d" else 3], X6
    g.output(g.relu(g.batch_norm(y, *_bn_params(g, c), name="bn"), name="act"))
    out, rep = optimize(g)
    assert ops(out) == [op] and out.nodes[0].attrs["activation"] == "relu"
    assert [e.node for e in rep.fired("bn_fold")] == ["bn"]
    same_outputs(g, out, feed, tol=1e-4)


def test_bn_fold_refuses_and_says_why():
    g = Graph("t")
    x = g.input("x", (1, 6, 6, 3))
    y = g.conv2d(x, g.param("w", rand(4, 3, 3, 3)), activation="relu", name="conv_relu")
    a = g.batch_norm(y, *_bn_params(g, 4), name="bn_after_act")
    z = g.conv2d(x, g.param("w2", rand(4, 3, 3, 3)), name="shared")
    b = g.batch_norm(z, *_bn_params(g, 4), name="bn_shared")
    c = g.batch_norm(x, *_bn_params(g, 3), name="bn_input")
    g.output(a, b, z, c)
    out, ctx = apply("bn_fold", g)
    assert ops(out).count("batch_norm") == 3
    why = {e.node: e.what for e in ctx.events}
    assert "applies relu" in why["bn_after_act"]
    assert "read elsewhere" in why["bn_shared"]
    assert "graph input" in why["bn_input"]


def test_bias_fold():
    g = Graph("t")
    x = g.input("x", (2, 5))
    y = g.fully_connected(x, g.param("w", rand(3, 5)), name="fc")
    y = g.add(y, g.param("c", rand(1, 3)), activation="relu", name="bias")
    z = g.fully_connected(x, g.param("w2", rand(3, 5)), name="fc2")
    z = g.add(z, g.param("c2", rand(2, 3)), name="not_per_channel")
    g.output(y, z)
    out, ctx = apply("bias_fold", g)
    assert ops(out) == ["fully_connected", "fully_connected", "add"]
    assert out.nodes[0].attrs["activation"] == "relu" and out.outputs[0] == "bias"
    assert "one value per output channel" in next(e for e in ctx.events if e.kind == "skipped").what
    same_outputs(g, out, {"x": rand(2, 5)})


# pad_fold --------------------------------------------------------------------------------
def test_pad_fold_fires():
    g = Graph("t")
    x = g.input("x", (1, 6, 6, 3))
    p = g.pad(x, pads=(0, 0, 1, 2, 0, 1, 0, 0), name="pad")
    g.output(g.conv2d(p, g.param("w", rand(4, 3, 3, 3)), padding="same", strides=(2, 2), name="conv"))
    out, ctx = apply("pad_fold", g)
    assert ops(out) == ["conv2d"] and out.nodes[0].attrs["padding"] == "explicit"
    # the conv's own SAME pads on the 9x7 padded input are (1, 1, 1, 1); the pad adds (1, 2, 0, 1)
    assert out.nodes[0].attrs["pads"] == (2, 3, 1, 2)
    assert ctx.events[0].kind == "fired"
    same_outputs(g, out, X6)


@pytest.mark.parametrize(
    ("pads", "value", "reader", "why"),
    [
        ((0, 0, 1, 1, 1, 1, 0, 0), 1.0, "conv2d", "pads with 1"),
        ((0, 0, 1, 1, 1, 1, 0, 1), 0.0, "conv2d", "batch or channel"),
        ((0, 0, 1, 1, 1, 1, 0, 0), 0.0, "max_pool2d", "no padding of its own"),
    ],
)
def test_pad_fold_refuses(pads, value, reader, why):
    g = Graph("t")
    x = g.input("x", (1, 6, 6, 3))
    p = g.pad(x, pads=pads, value=value, name="pad")
    c = int(g.types[p.name].shape[3])
    if reader == "conv2d":
        y = g.conv2d(p, g.param("w", rand(4, 3, 3, c)), name="conv")
    else:
        y = g.max_pool2d(p, kernel=(2, 2), strides=(2, 2), name="pool")
    g.output(y)
    out, ctx = apply("pad_fold", g)
    assert "pad" in ops(out)
    assert why in ctx.events[0].what


# fuse_activation -------------------------------------------------------------------------
@pytest.mark.parametrize(("act", "form"), [("relu", "relu"), ("relu6", "relu6"), ("n1", "relu_n1_to_1")])
def test_fuse_fires(act: str, form: str):
    g = conv_graph(act)
    out, _ctx = apply("fuse_activation", g)
    assert ops(out) == ["conv2d"] and out.nodes[0].attrs["activation"] == form
    assert out.outputs == ["act"]
    same_outputs(g, out, X6)


def test_fuse_into_add():
    g = Graph("t")
    x = g.input("x", (3,))
    g.output(g.relu6(g.add(x, x, name="sum"), name="act"))
    out, _ = apply("fuse_activation", g)
    assert ops(out) == ["add"] and out.nodes[0].attrs["activation"] == "relu6"


def test_fuse_refuses_and_says_why():
    out, ctx = apply("fuse_activation", conv_graph("relu", extra_reader=True))
    assert ops(out) == ["conv2d", "relu", "mul"]
    assert "also feeds 'other'" in ctx.events[0].what
    out, ctx = apply("fuse_activation", conv_graph("odd"))
    assert ops(out) == ["conv2d", "clamp"] and "no fused form" in ctx.events[0].what
    g = Graph("t")  # a relu after an op without an activation attribute: nothing to do, nothing said
    x = g.input("x", (1, 4, 4, 2))
    g.output(g.relu(g.max_pool2d(x, kernel=(2, 2), name="pool"), name="r"))
    out, ctx = apply("fuse_activation", g)
    assert ops(out) == ["max_pool2d", "relu"] and not ctx.events


# legalize --------------------------------------------------------------------------------
def test_legalize():
    g = conv_graph("relu")
    assert legalize(g, {"conv2d", "relu"}) is g
    with pytest.raises(UnsupportedOpError) as e:
        legalize(g, {"conv2d"}, target="tiny", targets={"big": {"relu", "conv2d"}, "small": {"conv2d"}})
    msg = str(e.value)
    assert "node 'act' (op relu)" in msg and "supported by big" in msg and "tiny" in msg
    with pytest.raises(UnsupportedOpError, match="no target supports it"):
        legalize(g, set(), targets={"x": set()})
    # The other targets' tables as a function: called only for the message of a graph that fails.
    calls = []

    def tables():
        calls.append(1)
        return {"big": {"relu", "conv2d"}}

    assert legalize(g, {"conv2d", "relu"}, targets=tables) is g and not calls
    with pytest.raises(UnsupportedOpError, match="supported by big"):
        legalize(g, {"conv2d"}, targets=tables)
    assert calls == [1]


def test_legalize_with_a_rule_table():
    from rlx_edge.ir.rules import RuleTable

    rules = RuleTable("mine")
    rules.rule("conv2d")(lambda node, ctx: None)
    with pytest.raises(UnsupportedOpError, match="mine does not support"):
        legalize(conv_graph("relu"), rules)


# manager ---------------------------------------------------------------------------------
def test_manager_verifies_after_every_pass_and_reports():
    from rlx_edge.ir.passes.manager import Pass

    def broken(g: Graph, ctx: PassContext) -> Graph:
        g = g.copy()
        g.nodes = g.nodes[1:]  # drops a producer: later readers dangle
        return g

    with pytest.raises(IRError, match="after pass 'broken'"):
        PassManager([Pass("broken", broken)]).run(conv_graph("relu"))
    _out, rep = optimize(conv_graph("relu"))
    j = rep.to_json()
    assert j["events"][0]["pass"] == "fuse_activation" and j["runs"]
    assert "fuse_activation" in rep.text()
    with pytest.raises(IRError, match="unknown pass"):
        get_pass("nope")


def test_passes_do_not_mutate_their_input():
    g = conv_graph("relu")
    before = [(n.name, n.op, list(n.inputs), dict(n.attrs)) for n in g.nodes]
    optimize(g)
    assert [(n.name, n.op, list(n.inputs), dict(n.attrs)) for n in g.nodes] == before
