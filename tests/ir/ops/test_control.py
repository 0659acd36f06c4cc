"""if_, while_ and scan: reference semantics (float and int8), errors, .rlx round trip, verify, passes, inspect."""

from __future__ import annotations

import json

import numpy as np
import pytest
from controlgraphs import Q, act, branchy, counter_loop, running_sum, subgraph

from rlx_edge.errors import IRError, ModelFileError, OpError
from rlx_edge.ir import serialize
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.inspect import dump
from rlx_edge.ir.interpret import run
from rlx_edge.ir.passes import get_pass
from rlx_edge.ir.serialize import MAX_SUBGRAPH_DEPTH, dumps, loads
from rlx_edge.ir.types import TensorType
from rlx_edge.ir.verify import verify

RNG = np.random.default_rng(19)


def reseal(data: bytes, edit) -> bytes:
    """``data`` with its header changed by ``edit(header)``, checksum redone (as tests/ir/test_serialize.py)."""
    c = serialize.unpack(data)
    header = {**json.loads(json.dumps(c.sections)), "requires": c.requires}
    edit(header)
    return serialize._pack_raw(header, bytes(c.blob))


def _unrolled_adds(x: np.ndarray, c: np.ndarray, trips: int) -> np.ndarray:
    """``trips`` int8 adds of ``c`` as straight-line nodes: the loop's semantics without a loop."""
    g = Graph("straight")
    v = g.input("x", x.shape, "i8", Q)
    for _ in range(trips):
        v = g.add(v, g.param(f"c{_}", c, quant=Q), out_quant=Q)
    g.output(v if trips else g.reshape(v, shape=x.shape))
    return next(iter(run(g, [x]).values()))


# semantics ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("taken", [True, False])
def test_if_runs_the_branch_the_condition_picks(taken: bool) -> None:
    g = branchy(None)
    x, y = RNG.standard_normal((2, 2, 3)).astype(np.float32)
    out = run(g, {"cond": np.array([taken]), "x": x, "y": y})
    a, b = (out[o] for o in g.outputs)
    np.testing.assert_array_equal(a, x + y if taken else x - y)
    np.testing.assert_array_equal(b, np.maximum(x if taken else y, 0))


def test_if_int8_runs_the_branch_integer_semantics() -> None:
    g = branchy(Q)
    x, y = (RNG.integers(-128, 128, (2, 3)).astype(np.int8) for _ in range(2))
    for taken, branch in ((True, "then_branch"), (False, "else_branch")):
        got = run(g, {"cond": np.array([taken]), "x": x, "y": y})
        want = run(g.node("branch").attrs[branch], [x, y])
        for o, w in zip(g.outputs, want.values()):
            assert got[o].dtype == np.int8 and np.array_equal(got[o], w)


@pytest.mark.parametrize("n", [0, 1, 4])
def test_while_float_counts_to_a_dynamic_n(n: int) -> None:
    g = counter_loop(None)
    x = RNG.standard_normal(4).astype(np.float32)
    out = run(g, {"x": x, "n": np.asarray(n, np.int32)})
    np.testing.assert_array_equal(out["loop:2"], x + np.float32(0.5) * n if n else x)
    assert out["loop:0"] == n


@pytest.mark.parametrize("n", [0, 1, 3, 9])
def test_while_int8_is_the_unrolled_int8_adds(n: int) -> None:
    c = np.asarray([7, -40, 127, 1], np.int8)
    g = counter_loop(Q, step=c)
    x = np.asarray([-128, 0, 100, 5], np.int8)
    got = run(g, {"x": x, "n": np.asarray(n, np.int32)})["loop:2"]
    assert got.dtype == np.int8
    assert np.array_equal(got, _unrolled_adds(x, c, n))


def test_while_max_trips_bounds_the_loop() -> None:
    g = counter_loop(None, max_trips=2)
    out = run(g, {"x": np.zeros(4, np.float32), "n": np.asarray(10, np.int32)})
    assert out["loop:0"] == 2
    np.testing.assert_array_equal(out["loop:2"], np.full(4, 1.0, np.float32))


def test_scan_float_is_a_running_sum() -> None:
    g = running_sum(None)
    acc, xs = RNG.standard_normal(3).astype(np.float32), RNG.standard_normal((5, 3)).astype(np.float32)
    out = run(g, {"acc": acc, "xs": xs})
    sums = acc + np.cumsum(xs, axis=0, dtype=np.float32)
    np.testing.assert_allclose(out["steps:0"], sums[-1], rtol=1e-6)  # float: cumsum adds in another order
    np.testing.assert_allclose(out["steps:1"], np.maximum(sums, 0), rtol=1e-6)


def test_scan_int8_is_the_body_step_by_step() -> None:
    g = running_sum(Q)
    acc, xs = RNG.integers(-128, 128, 3).astype(np.int8), RNG.integers(-128, 128, (5, 3)).astype(np.int8)
    out = run(g, {"acc": acc, "xs": xs})
    body = g.node("steps").attrs["body"]
    ys = []
    for t in range(5):
        acc, y = run(body, [acc, xs[t]]).values()
        ys.append(y)
    assert np.array_equal(out["steps:0"], acc) and np.array_equal(out["steps:1"], np.stack(ys))
    assert out["steps:1"].dtype == np.int8


# errors -------------------------------------------------------------------------------------------
def test_branch_with_wrong_input_type_names_node_and_branch() -> None:
    t = act((2, 3), None)
    then_, (a, _) = subgraph("then", [("a", t), ("b", t)])
    then_.output(a)
    else_, (a,) = subgraph("else", [("a", act((2, 4), None))])
    else_.output(a)
    g = Graph("bad")
    c, x, y = g.input("c", (), "bool"), g.input("x", (2, 3)), g.input("y", (2, 3))
    with pytest.raises(OpError, match=r"node 'bad_if' \(if_\): if_: else_branch has 1 inputs but must have 2"):
        g.if_(c, x, y, then_branch=then_, else_branch=else_, name="bad_if")


def test_branches_with_different_outputs_are_refused() -> None:
    t = act((2,), None)
    then_, (a,) = subgraph("then", [("a", t)])
    then_.output(a)
    else_, (a,) = subgraph("else", [("a", t)])
    else_.output(else_.cast(a, dtype="i32"))
    g = Graph("bad")
    c, x = g.input("c", (1,), "bool"), g.input("x", (2,))
    with pytest.raises(OpError, match=r"else_branch output 0 .* is i32\[2\] but must be f32\[2\]"):
        g.if_(c, x, then_branch=then_, else_branch=else_)


def test_condition_must_be_one_bool() -> None:
    t = act((2,), None)
    br, (a,) = subgraph("br", [("a", t)])
    br.output(a)
    g = Graph("bad")
    c, x = g.input("c", (2,), "bool"), g.input("x", (2,))
    with pytest.raises(OpError, match=r"cond must be a bool with one element, got bool\[2\]"):
        g.if_(c, x, then_branch=br, else_branch=br)


def test_while_body_changing_a_type_is_refused() -> None:
    good = counter_loop(Q)
    node = good.node("loop")
    body, (i, n, x) = subgraph(
        "body", [("i", TensorType((), "i32")), ("n", TensorType((), "i32")), ("x", act((4,), Q))]
    )
    body.output(i, n, body.relu(x))  # relu without out_quant: the result loses the loop's quantization
    g = Graph("bad")
    ins = [g.input(v, good.types[v].shape, good.types[v].dtype, good.types[v].quant) for v in ("x", "n")]
    with pytest.raises(OpError, match=r"node 'w' \(while_\): while_: body output 2 .* must be i8\[4\] quantized"):
        g.while_(ins[1], ins[1], ins[0], cond=node.attrs["cond"], body=body, name="w")


def test_scan_errors() -> None:
    g = running_sum(None)
    body = g.node("steps").attrs["body"]
    h = Graph("bad")
    acc, xs = h.input("acc", (3,)), h.input("xs", (5, 3))
    with pytest.raises(OpError, match="num_carries=2 must leave at least one of its 2 inputs to scan"):
        h.scan(acc, xs, body=body, num_carries=2)
    other = h.input("other", (4, 3))
    with pytest.raises(OpError, match=r"different lengths along axis 0: \[4, 5\]"):
        h.scan(acc, xs, other, body=body, num_carries=1)


def test_a_subgraph_attribute_must_be_a_graph() -> None:
    g = Graph("bad")
    c, x = g.input("c", (1,), "bool"), g.input("x", (2,))
    with pytest.raises(OpError, match="then_branch='nope' is not a valid graph"):
        g.if_(c, x, then_branch="nope", else_branch="nope")


# verify, copy, serialize, passes, inspect --------------------------------------------------------
def test_verify_checks_subgraphs() -> None:
    g = counter_loop(Q)
    verify(g)
    body = g.node("loop").attrs["body"]
    body.types["next_x"] = TensorType((5,), "i8", Q)  # a wrong recorded type inside the body
    with pytest.raises(IRError, match=r"node 'loop' \(while_\): subgraph body: node 'next_x' \(add\): output 0"):
        verify(g)


def test_copy_copies_subgraphs() -> None:
    g = branchy(Q)
    h = g.copy()
    h.node("branch").attrs["then_branch"].name = "edited"
    assert g.node("branch").attrs["then_branch"].name == "then"


@pytest.mark.parametrize("build", [branchy, counter_loop, running_sum])
def test_rlx_round_trip_is_byte_identical(build) -> None:
    g = build(Q)
    data = dumps(g)
    back = loads(data)
    assert dumps(back) == data
    feeds = {n: np.zeros([int(d) for d in g.types[n].shape], g.types[n].dtype.numpy) for n in g.inputs}
    if "n" in feeds:
        feeds["n"] = np.asarray(3, np.int32)
    for (k, a), b in zip(run(g, feeds).items(), run(back, feeds).values()):
        assert np.array_equal(a, b), k


def test_nested_control_flow_round_trips_and_runs() -> None:
    inner = branchy(None, shape=(4,))
    body, (i, n, x) = subgraph(
        "body", [("i", TensorType((), "i32")), ("n", TensorType((), "i32")), ("x", act((4,), None))]
    )
    flag = body.reshape(body.less(i, body.param("two", np.asarray(2, np.int32))), shape=(1,))
    a, _ = body.if_(flag, x, x, then_branch=inner.node("branch").attrs["then_branch"],
                    else_branch=inner.node("branch").attrs["else_branch"])  # fmt: skip
    body.output(body.add(i, body.param("one", np.asarray(1, np.int32))), n, a)
    loop = counter_loop(None)
    g = Graph("nested")
    x = g.input("x", (4,))
    nn = g.input("n", (), "i32")
    outs = g.while_(g.param("i0", np.asarray(0, np.int32)), nn, x, cond=loop.node("loop").attrs["cond"], body=body)
    g.output(outs[2])
    data = dumps(g)
    back = loads(data)
    assert dumps(back) == data
    x0 = np.arange(1, 5, dtype=np.float32)
    for n, want in ((2, x0 * 4), (3, x0 * 0)):  # x + x while i < 2, then x - x
        got = run(back, {"x": x0, "n": np.asarray(n, np.int32)})[outs[2].name]
        np.testing.assert_array_equal(got, want)


def test_a_file_with_a_broken_subgraph_is_refused() -> None:
    def shrink(header: dict) -> None:  # the body's x recorded as i8[5]: the add does not give that
        (value,) = [v for v in header["graph"]["nodes"][0]["attrs"]["body"]["graph"]["values"] if v["name"] == "next_x"]
        value["shape"] = [5]

    bad = reseal(dumps(counter_loop(Q)), shrink)
    with pytest.raises(ModelFileError, match=r"node 'loop' \(while_\): subgraph body: node 'next_x'"):
        loads(bad)


def test_subgraphs_nested_without_end_are_refused() -> None:
    def nest(header: dict) -> None:
        node = header["graph"]["nodes"][0]
        for _ in range(MAX_SUBGRAPH_DEPTH + 1):
            inner = json.loads(json.dumps(header["graph"]))
            inner["nodes"] = [node]
            node = {**node, "attrs": {**node["attrs"], "then_branch": {"graph": inner}}}
        header["graph"]["nodes"][0] = node

    with pytest.raises(ModelFileError, match="subgraphs nested deeper than 16"):
        loads(reseal(dumps(branchy(Q)), nest))


def test_dce_and_cse_keep_control_flow_working() -> None:
    g = counter_loop(Q)
    x = g.tensor("x")
    g.output(g.add(x, x, out_quant=Q), g.add(x, x, out_quant=Q))  # a duplicate for cse
    g.outputs.remove("add_1")  # and dead code for dce
    feeds = {"x": np.arange(4, dtype=np.int8), "n": np.asarray(5, np.int32)}
    want = run(g, feeds)
    for name in ("cse", "dce"):
        h = get_pass(name)(g)
        verify(h)
        assert any(n.op == "while_" for n in h.nodes)
        got = run(h, feeds)
        assert all(np.array_equal(want[k], got[k]) for k in h.outputs)


def test_inspect_shows_subgraphs_indented() -> None:
    text = dump(counter_loop(Q))
    assert "loop (while_) cond:" in text and "loop (while_) body:" in text
    body_rows = [line for line in text.splitlines() if line.startswith("    next_x")]
    assert body_rows and "add" in body_rows[0]


def test_sizes_inside_subgraphs_are_bounded() -> None:
    from rlx_edge.ir.verify import check_sizes

    t = act((2,), None)
    big, (a,) = subgraph("big", [("a", t)])  # an f32[1000,2] inside, 8 bytes in and out
    big.output(big.sum(big.broadcast_to(a, shape=(1000, 2), name="wide"), axes=(0,)))
    g = Graph("hidden")
    c, x = g.input("c", (1,), "bool"), g.input("x", (2,))
    g.output(g.if_(c, x, then_branch=big, else_branch=big, name="branch"))
    check_sizes(g)
    with pytest.raises(IRError, match=r"node 'branch' \(if_\): subgraph then_branch: value 'wide' \(f32\[1000,2\]\)"):
        check_sizes(g, max_bytes=4000)
