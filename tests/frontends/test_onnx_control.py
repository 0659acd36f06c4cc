"""ONNX If / Loop / Scan import (rlx_edge/frontends/_onnx_control.py) against onnxruntime, on reference and jax.

Each model is made here with onnx.helper; its subgraphs read values of the enclosing graph by name,
which the importer turns into explicit inputs of the IR's closed subgraphs. The float results are
compared with onnxruntime exactly where the arithmetic is exact (additions of values on a grid of
halves, comparisons, selections), else within FLOAT_TOL; the jax target (lax.cond / while_loop / scan)
must give the reference's results.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from rlx_edge.errors import UnsupportedOpError
from rlx_edge.frontends.onnx import load_onnx
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.passes.lower_control_flow import lower_for_rules
from rlx_edge.targets.jax import compile_jax
from rlx_edge.targets.reference import run

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
# products of non-grid values (Mul by 0.3) round differently once reordered: a few ulps of float32
FLOAT_TOL = {"rtol": 1e-6, "atol": 1e-6}


def _vi(name: str, elem: int, shape) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def _model(nodes, ins, outs, consts=None, opset: int = 17, check: bool = True) -> onnx.ModelProto:
    inits = [numpy_helper.from_array(np.asarray(v), k) for k, v in (consts or {}).items()]
    m = helper.make_model(helper.make_graph(nodes, "cf", ins, outs, initializer=inits),
                          opset_imports=[helper.make_opsetid("", opset)])  # fmt: skip
    m.ir_version = 8
    if check:  # the refused models are valid ONNX, but leave shapes out that full_check wants
        onnx.checker.check_model(m, full_check=True)
    return m


def _halves(rng: np.random.Generator, shape) -> np.ndarray:
    # on a grid of halves: sums and comparisons are exact in float32, so results can be compared exactly
    return (np.round(rng.standard_normal(shape) * 4) / 2).astype(np.float32)


def _import(m: onnx.ModelProto, tmp_path: Path) -> Graph:
    p = tmp_path / "m.onnx"
    p.write_bytes(m.SerializeToString())
    return load_onnx(p)


def _check(m: onnx.ModelProto, g: Graph, feeds: list[dict[str, np.ndarray]], exact: bool = True) -> None:
    """Reference vs onnxruntime per feed, and jax (native control flow) vs the reference."""
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    model = compile_jax(g)
    names = [o.name for o in m.graph.output]
    for f in feeds:
        want = dict(zip(names, sess.run(None, f)))
        got = run(g, f)
        jx = model(f)
        for k in names:
            assert got[k].shape == want[k].shape, (k, got[k].shape, want[k].shape)
            if exact:
                assert np.array_equal(got[k], want[k]), (k, f)
            else:
                np.testing.assert_allclose(got[k], want[k], **FLOAT_TOL)
            # the jax target runs the same elementwise ops in the same order as the reference: exact
            assert np.array_equal(np.asarray(jx[k]), got[k]), (k, f)


def _ops(g: Graph) -> list[str]:
    return [n.op for n in g.nodes]


# If -----------------------------------------------------------------------------------------------
def _if_model(cond_const: bool | None = None) -> onnx.ModelProto:
    """z = If(c): then (x + y) * w, else x - relu(y); w is an outer constant, x and y outer runtime values."""
    then_g = helper.make_graph(
        [helper.make_node("Add", ["x", "y"], ["s"]), helper.make_node("Mul", ["s", "w"], ["t_out"])],
        "then", [], [_vi("t_out", F, [2, 3])],
    )  # fmt: skip
    else_g = helper.make_graph(
        [helper.make_node("Relu", ["y"], ["r"]), helper.make_node("Sub", ["x", "r"], ["e_out"])],
        "else", [], [_vi("e_out", F, [2, 3])],
    )  # fmt: skip
    nodes = [helper.make_node("If", ["c"], ["z"], name="branch", then_branch=then_g, else_branch=else_g)]
    ins = [_vi("x", F, [2, 3]), _vi("y", F, [2, 3])]
    consts: dict[str, np.ndarray] = {"w": np.full((3,), 2.0, np.float32)}
    if cond_const is None:
        ins.insert(0, _vi("c", B, []))
    else:
        consts["c"] = np.asarray(cond_const)
    return _model(nodes, ins, [_vi("z", F, [2, 3])], consts)


def test_if_with_outer_scope_values(tmp_path: Path) -> None:
    m = _if_model()
    g = _import(m, tmp_path)
    (node,) = [n for n in g.nodes if n.op == "if_"]
    # the branches read x and y from the outer graph: they are the if_'s operands now
    assert node.inputs == ["c", "x", "y"] and node.attrs["then_branch"].inputs == ["x", "y"]
    rng = np.random.default_rng(0)
    feeds = [{"c": np.asarray(b), "x": _halves(rng, (2, 3)), "y": _halves(rng, (2, 3))} for b in (True, False, True)]
    _check(m, g, feeds)


@pytest.mark.parametrize("cond", [True, False])
def test_if_on_a_constant_condition_is_inlined(tmp_path: Path, cond: bool) -> None:
    m = _if_model(cond)
    g = _import(m, tmp_path)
    assert "if_" not in _ops(g) and ("mul" in _ops(g)) == cond
    rng = np.random.default_rng(1)
    _check(m, g, [{"x": _halves(rng, (2, 3)), "y": _halves(rng, (2, 3))}])


# Loop ---------------------------------------------------------------------------------------------
_LOOP_INS = [_vi("i", I64, []), _vi("c_in", B, []), _vi("x_in", F, [3])]  # iteration, cond, x


def _loop_body(cond_out: list[onnx.NodeProto], scan_out: bool = False) -> onnx.GraphProto:
    """x = x * 0.5 + s + float(i) (s: an outer runtime value), cond_out as the given nodes make it, and
    (scan_out) the scan output x * x."""
    nodes = [
        helper.make_node("Cast", ["i"], ["fi"], to=F),
        helper.make_node("Mul", ["x_in", "half"], ["xh"]),
        helper.make_node("Add", ["xh", "s"], ["xhs"]),
        helper.make_node("Add", ["xhs", "fi"], ["x_out"]),
        *cond_out,
        *([helper.make_node("Mul", ["x_out", "x_out"], ["y_t"])] if scan_out else []),
    ]
    outs = [_vi("c_out", B, []), _vi("x_out", F, [3])] + ([_vi("y_t", F, [3])] if scan_out else [])
    return helper.make_graph(nodes, "body", _LOOP_INS, outs)


_SUM_BELOW_LIMIT = [
    helper.make_node("ReduceSum", ["x_out"], ["total"], keepdims=0),
    helper.make_node("Less", ["total", "limit"], ["c_out"]),
]


def _ramp(**feed) -> dict[str, np.ndarray]:
    """x0 = 0, s = 1: the sum after trip t is 3, 7.5, 12.75, 18.375, 24.1875, ... (exact in float32), so the
    limit decides at which trip the condition ends the loop."""
    base = {"x0": np.zeros(3, np.float32), "s": np.ones(3, np.float32)}
    return {**base, **{k: np.asarray(v, np.int64 if k == "M" else np.float32 if k == "limit" else None)
                       for k, v in feed.items()}}  # fmt: skip


def test_loop_with_a_dynamic_trip_count_and_a_condition(tmp_path: Path) -> None:
    body = _loop_body(_SUM_BELOW_LIMIT)
    nodes = [helper.make_node("Loop", ["M", "c0", "x0"], ["x"], name="loop", body=body)]
    ins = [_vi("M", I64, []), _vi("c0", B, []), _vi("x0", F, [3]), _vi("s", F, [3]), _vi("limit", F, [])]
    m = _model(nodes, ins, [_vi("x", F, [3])], {"half": np.float32(0.5)})
    g = _import(m, tmp_path)
    (node,) = [n for n in g.nodes if n.op == "while_"]
    assert node.attrs["max_trips"] is None  # M is known at run time only: the loop stays
    # the reference keeps it too; jax runs it as one lax.while_loop
    assert "while_" in _ops(lower_for_rules(g, {"while_"}))
    rng = np.random.default_rng(2)
    # M decides (0, 1, 3 trips; M < 0: none), the condition decides (5 trips of 9), neither (9), c0 false (none)
    feeds = [
        _ramp(M=mm, c0=c0, limit=lim)
        for mm, c0, lim in (
            (0, True, 20),
            (1, True, 20),
            (3, True, 20),
            (9, True, 20),
            (9, True, 1e6),
            (4, False, 20),
            (-2, True, 20),
        )
    ]
    feeds += [{"M": np.asarray(4, np.int64), "c0": np.asarray(True), "x0": _halves(rng, (3,)), "s": _halves(rng, (3,)),
               "limit": np.asarray(lim, np.float32)} for lim in (2, 10)]  # fmt: skip
    _check(m, g, feeds)


def test_loop_with_a_constant_trip_count_and_a_condition_is_bounded(tmp_path: Path) -> None:
    body = _loop_body(_SUM_BELOW_LIMIT)
    nodes = [helper.make_node("Loop", ["M", "c0", "x0"], ["x"], name="loop", body=body)]
    ins = [_vi("c0", B, []), _vi("x0", F, [3]), _vi("s", F, [3]), _vi("limit", F, [])]
    consts = {"M": np.int64(5), "half": np.float32(0.5)}
    m = _model(nodes, ins, [_vi("x", F, [3])], consts)
    g = _import(m, tmp_path)
    (node,) = [n for n in g.nodes if n.op == "while_"]
    assert node.attrs["max_trips"] == 5
    lowered = lower_for_rules(g, set())  # 5 guarded trips: no control flow left
    assert not {"while_", "if_", "scan"} & set(_ops(lowered))
    # M decides (5 trips), the condition decides (3 trips), c0 false (none)
    feeds = [_ramp(c0=c0, limit=lim) for c0, lim in ((True, 1e6), (True, 10), (False, 1e6))]
    _check(m, g, feeds)
    for f in feeds:
        assert all(np.array_equal(a, b) for a, b in zip(run(lowered, f).values(), run(g, f).values()))


def test_loop_with_a_constant_trip_count_and_no_cond_input_still_stops_on_the_body_condition(tmp_path: Path) -> None:
    body = _loop_body(_SUM_BELOW_LIMIT)
    nodes = [helper.make_node("Loop", ["M", "", "x0"], ["x"], name="loop", body=body)]
    ins = [_vi("x0", F, [3]), _vi("s", F, [3]), _vi("limit", F, [])]
    m = _model(nodes, ins, [_vi("x", F, [3])], {"M": np.int64(4), "half": np.float32(0.5)})
    g = _import(m, tmp_path)
    (node,) = [n for n in g.nodes if n.op == "while_"]  # not a scan: the trip count is not M
    assert node.attrs["max_trips"] == 4
    _check(m, g, [_ramp(limit=lim) for lim in (1e6, 10)])  # M decides (4 trips), the condition decides (3 trips)


def test_loop_with_a_constant_trip_count_unrolls_and_stacks_its_scan_outputs(tmp_path: Path) -> None:
    body = _loop_body([helper.make_node("Identity", ["c_in"], ["c_out"])], scan_out=True)
    nodes = [
        helper.make_node("Constant", [], ["M"], value=numpy_helper.from_array(np.int64(4))),
        helper.make_node("Loop", ["M", "", "x0"], ["x", "xs"], name="loop", body=body),
    ]
    ins = [_vi("x0", F, [3]), _vi("s", F, [3])]
    m = _model(nodes, ins, [_vi("x", F, [3]), _vi("xs", F, [4, 3])], {"half": np.float32(0.5)})
    g = _import(m, tmp_path)
    assert _ops(g) == ["scan"]  # for i in range(4): a scan over the iteration numbers
    lowered = lower_for_rules(g, set())
    assert "scan" not in _ops(lowered) and _ops(lowered).count("mul") == 4 * 2  # two per trip
    rng = np.random.default_rng(4)
    feeds = [{"x0": _halves(rng, (3,)), "s": _halves(rng, (3,))} for _ in range(2)]
    _check(m, g, feeds)
    for f in feeds:
        want = run(g, f)
        assert all(np.array_equal(v, want[k]) for k, v in run(lowered, f).items())


# Scan ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("axis", [0, 1])
def test_scan_cumulative_sum(tmp_path: Path, axis: int) -> None:
    body = helper.make_graph(
        [helper.make_node("Add", ["acc", "x_t"], ["acc_out"]), helper.make_node("Mul", ["acc_out", "k"], ["y_t"])],
        "body", [_vi("acc", F, [2]), _vi("x_t", F, [2])], [_vi("acc_out", F, [2]), _vi("y_t", F, [2])],
    )  # fmt: skip
    xs_shape = [5, 2] if axis == 0 else [2, 5]
    nodes = [helper.make_node("Scan", ["acc0", "xs"], ["acc", "ys"], name="cumsum", body=body, num_scan_inputs=1,
                              scan_input_axes=[axis], scan_output_axes=[axis])]  # fmt: skip
    ins = [_vi("acc0", F, [2]), _vi("xs", F, xs_shape), _vi("k", F, [2])]
    m = _model(nodes, ins, [_vi("acc", F, [2]), _vi("ys", F, xs_shape)])
    g = _import(m, tmp_path)
    assert "scan" in _ops(g)
    rng = np.random.default_rng(5)
    feeds = [{"acc0": _halves(rng, (2,)), "xs": _halves(rng, xs_shape), "k": _halves(rng, (2,))} for _ in range(3)]
    _check(m, g, feeds)


# nested -------------------------------------------------------------------------------------------
def test_if_nested_in_a_loop(tmp_path: Path) -> None:
    """Loop body: x = x + a if i < k else x - a, while i < k too; a and k live two scopes up, in the main graph."""
    then_g = helper.make_graph([helper.make_node("Add", ["x_in", "a"], ["p"])], "then", [], [_vi("p", F, [3])])
    else_g = helper.make_graph([helper.make_node("Sub", ["x_in", "a"], ["q"])], "else", [], [_vi("q", F, [3])])
    body = helper.make_graph(
        [
            helper.make_node("Less", ["i", "k"], ["early"]),
            helper.make_node("If", ["early"], ["x_out"], name="inner", then_branch=then_g, else_branch=else_g),
            # the body's cond output ends the loop even without a cond input (onnxruntime, onnx.reference)
            helper.make_node("Identity", ["early"], ["c_out"]),
        ],
        "body", _LOOP_INS, [_vi("c_out", B, []), _vi("x_out", F, [3])],
    )  # fmt: skip
    nodes = [helper.make_node("Loop", ["M", "", "x0"], ["x"], name="loop", body=body)]
    ins = [_vi("M", I64, []), _vi("k", I64, []), _vi("x0", F, [3]), _vi("a", F, [3])]
    m = _model(nodes, ins, [_vi("x", F, [3])])
    g = _import(m, tmp_path)
    (loop,) = [n for n in g.nodes if n.op == "while_"]
    assert [n.op for n in loop.attrs["body"].nodes].count("if_") == 1
    rng = np.random.default_rng(6)
    feeds = [
        {"M": np.asarray(mm, np.int64), "k": np.asarray(k, np.int64), "x0": _halves(rng, (3,)), "a": _halves(rng, (3,))}
        for mm, k in ((0, 1), (3, 1), (5, 2), (4, 9))
    ]
    _check(m, g, feeds)


# refusals -----------------------------------------------------------------------------------------
def _refused(m: onnx.ModelProto, tmp_path: Path, match: str) -> None:
    p = tmp_path / "m.onnx"
    p.write_bytes(m.SerializeToString())
    with pytest.raises(UnsupportedOpError, match=match):
        load_onnx(p)


def test_loop_scan_outputs_with_an_unknown_trip_count_are_refused(tmp_path: Path) -> None:
    body = _loop_body(_SUM_BELOW_LIMIT, scan_out=True)
    nodes = [helper.make_node("Loop", ["M", "c0", "x0"], ["x", "xs"], name="loop", body=body)]
    ins = [_vi("M", I64, []), _vi("c0", B, []), _vi("x0", F, [3]), _vi("s", F, [3])]
    m = _model(
        nodes,
        ins,
        [_vi("x", F, [3]), _vi("xs", F, None)],
        {"half": np.float32(0.5), "limit": np.float32(1)},
        check=False,
    )
    _refused(
        m,
        tmp_path,
        r"loop \(Loop\): scan outputs \(y_t\) are supported only with a constant trip count M and a condition",
    )


def test_loop_carrying_a_growing_value_is_refused(tmp_path: Path) -> None:
    body = helper.make_graph(
        [helper.make_node("Concat", ["x_in", "x_in"], ["x_out"], axis=0), helper.make_node("Identity", ["c_in"], ["c_out"])],  # noqa: E501
        "body", _LOOP_INS, [_vi("c_out", B, []), _vi("x_out", F, None)],
    )  # fmt: skip
    nodes = [helper.make_node("Loop", ["M", "", "x0"], ["x"], name="grow", body=body)]
    m = _model(nodes, [_vi("M", I64, []), _vi("x0", F, [3])], [_vi("x", F, None)], check=False)
    _refused(m, tmp_path, r"grow \(Loop\): loop-carried value 'x_in' is f32\[3\] on entry but the body gives f32\[6\]")


def test_reverse_scan_is_refused(tmp_path: Path) -> None:
    body = helper.make_graph(
        [helper.make_node("Add", ["acc", "x_t"], ["acc_out"])],
        "body", [_vi("acc", F, [2]), _vi("x_t", F, [2])], [_vi("acc_out", F, [2])],
    )  # fmt: skip
    nodes = [helper.make_node("Scan", ["acc0", "xs"], ["acc"], name="rev", body=body, num_scan_inputs=1,
                              scan_input_directions=[1])]  # fmt: skip
    m = _model(nodes, [_vi("acc0", F, [2]), _vi("xs", F, [4, 2])], [_vi("acc", F, [2])])
    _refused(m, tmp_path, r"rev \(Scan\): scan_input_directions: reverse scanning is not supported")


def test_an_unsupported_op_in_a_branch_names_the_branch_and_node(tmp_path: Path) -> None:
    then_g = helper.make_graph([helper.make_node("Det", ["x"], ["d"], name="det")], "then", [], [_vi("d", F, [])])
    else_g = helper.make_graph([helper.make_node("ReduceSum", ["x"], ["r"], keepdims=0)], "else", [], [_vi("r", F, [])])
    nodes = [helper.make_node("If", ["c"], ["z"], name="pick", then_branch=then_g, else_branch=else_g)]
    m = _model(nodes, [_vi("c", B, []), _vi("x", F, [2, 2])], [_vi("z", F, [])])
    _refused(m, tmp_path, r"pick \(If\): then_branch: det \(Det\): op Det is not supported")


def test_a_while_loop_with_an_unbounded_constant_trip_count_stays_a_while(tmp_path: Path) -> None:
    """Exporters write `while cond` as a Loop with M = INT64_MAX: no bound to unroll to, so M goes into the test."""
    body = _loop_body(_SUM_BELOW_LIMIT)
    nodes = [helper.make_node("Loop", ["M", "c0", "x0"], ["x"], name="loop", body=body)]
    consts = {"M": np.int64(2**63 - 1), "half": np.float32(0.5), "limit": np.float32(20.0)}
    m = _model(nodes, [_vi("c0", B, []), _vi("x0", F, [3]), _vi("s", F, [3])], [_vi("x", F, [3])], consts)
    g = _import(m, tmp_path)
    (node,) = [n for n in g.nodes if n.op == "while_"]
    assert node.attrs["max_trips"] is None and "less" in [n.op for n in node.attrs["cond"].nodes]
    rng = np.random.default_rng(7)
    # s > 0 and x0 >= 0: the sum grows every trip, so the condition ends the loop
    feeds = [
        {"c0": np.asarray(True), "x0": np.abs(_halves(rng, (3,))), "s": np.abs(_halves(rng, (3,))) + 1}
        for _ in range(3)
    ]
    _check(m, g, feeds)
