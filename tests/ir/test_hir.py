"""HIR blocks (linear, conv_block, residual) and their lowering to MIR."""

from __future__ import annotations

import numpy as np
import pytest

from rlx_edge.errors import IRError, OpError
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.ops import REGISTRY, defop
from rlx_edge.ir.passes.lower_hir import lower_hir
from rlx_edge.targets.reference import run

# The blocks' references and the lowered MIR ops may group float32 operations
# differently (an activation fused into a convolution or applied after it, a
# sum formed in another order), so results agree to float32 rounding, not
# bit for bit.
RTOL, ATOL = 1e-6, 1e-6


def f32(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def build(rng: np.random.Generator, *, bn: bool = True, act: str = "relu6") -> Graph:
    g = Graph("blocks")
    x = g.input("x", (1, 6, 6, 3))
    w = g.param("w", f32(rng, 4, 3, 3, 3))
    b = g.param("b", f32(rng, 4))
    bn_in = []
    if bn:
        bn_in = [g.param(n, f32(rng, 4)) for n in ("s", "bb", "m")]
        bn_in.append(g.param("v", np.abs(f32(rng, 4)) + 0.1))
    y = g.conv_block(x, w, b, *bn_in, padding="same", activation=act, name="cb")
    y = g.residual(
        y,
        g.param("w1", f32(rng, 5, 3, 3, 4)),
        g.param("b1", f32(rng, 5)),
        g.param("w2", f32(rng, 4, 1, 1, 5)),
        g.param("b2", f32(rng, 4)),
        name="res",
    )
    y = g.linear(y, g.param("wl", f32(rng, 2, 4)), g.param("bl", f32(rng, 2)), activation="relu", name="lin")
    g.output(y)
    return g


def block_reference(g: Graph, x: np.ndarray) -> dict[str, np.ndarray]:
    """Evaluate the HIR graph node by node with the blocks' own references (no lowering)."""
    env = {**g.params, "x": x}
    for node in g.nodes:
        op = REGISTRY[node.op]
        (env[node.outputs[0]],) = op.run_reference([env[v] if v else None for v in node.inputs], node.attrs)
    return {o: env[o] for o in g.outputs}


@pytest.mark.parametrize("bn", [True, False])
def test_lowered_graph_matches_blocks(bn: bool) -> None:
    rng = np.random.default_rng(0)
    g = build(rng, bn=bn)
    assert g.stage == "hir"
    m = lower_hir(g)
    assert m.stage == "mir"
    assert all(REGISTRY[n.op].stage == "mir" for n in m.nodes)
    assert m.outputs == g.outputs == ["lin"]
    assert m.inputs == g.inputs and set(g.params) <= set(m.params)
    x = f32(rng, 1, 6, 6, 3)
    hir_out = run(g, x)  # the interpreter lowers HIR graphs itself
    mir_out = run(m, x)
    want = block_reference(g, x)
    assert set(hir_out) == set(mir_out) == {"lin"}
    np.testing.assert_allclose(mir_out["lin"], hir_out["lin"], rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(mir_out["lin"], want["lin"], rtol=RTOL, atol=ATOL)
    assert mir_out["lin"].dtype == np.float32 and np.any(mir_out["lin"] > 0)


def test_lowering_fuses_activation_without_batch_norm() -> None:
    m = lower_hir(build(np.random.default_rng(1), bn=False, act="relu"))
    ops = [(n.name, n.op) for n in m.nodes]
    assert ops[0] == ("cb", "conv2d") and m.nodes[0].attrs["activation"] == "relu"
    assert "relu" not in [op for _, op in ops]


def test_lowering_separates_activation_after_batch_norm() -> None:
    m = lower_hir(build(np.random.default_rng(1), bn=True, act="relu"))
    first = [n.op for n in m.nodes[:3]]
    assert first == ["conv2d", "batch_norm", "relu"]
    assert m.nodes[0].attrs["activation"] == "none"
    assert m.nodes[2].name == "cb" and m.nodes[2].outputs == ["cb"]


def test_relu_n1_to_1_after_batch_norm_is_a_clamp() -> None:
    m = lower_hir(build(np.random.default_rng(1), bn=True, act="relu_n1_to_1"))
    clamp = m.node("cb")
    assert clamp.op == "clamp" and (clamp.attrs["min"], clamp.attrs["max"]) == (-1.0, 1.0)


def test_residual_lowering_and_names() -> None:
    m = lower_hir(build(np.random.default_rng(2)))
    res = [n for n in m.nodes if n.name.startswith("res")]
    assert [n.op for n in res] == ["conv2d", "conv2d", "add"]
    assert res[-1].name == "res" and res[-1].inputs[0] == "cb"
    assert res[0].attrs["padding"] == "same" and res[0].attrs["activation"] == "relu"
    assert res[-1].attrs["activation"] == "relu"
    assert m.node("lin").op == "fully_connected"


def test_lower_hir_leaves_source_graph_alone() -> None:
    g = build(np.random.default_rng(3))
    ops = [n.op for n in g.nodes]
    lower_hir(g)
    assert [n.op for n in g.nodes] == ops and g.stage == "hir"


def test_mir_graph_is_copied() -> None:
    g = Graph("mir")
    x = g.input("x", (2, 3))
    g.output(g.relu(x, name="r"))
    m = lower_hir(g)
    assert m is not g and m.stage == "mir" and [n.name for n in m.nodes] == ["r"]


def test_macs_are_sums_of_parts() -> None:
    g = build(np.random.default_rng(4))
    m = lower_hir(g)

    def macs(graph: Graph, names: list[str]) -> int:
        total = 0
        for n in graph.nodes:
            if n.name.split("/")[0] in names:
                ins = [None if v is None else graph.types[v] for v in n.inputs]
                total += n.opdef.count_macs(ins, [graph.types[o] for o in n.outputs], n.attrs)
        return total

    for block in ("cb", "res", "lin"):
        assert macs(g, [block]) == macs(m, [block]) > 0
    # conv 6*6*4 outputs x 27, residual 6*6*5*36 + 6*6*4*5, linear 6*6*2*4
    assert macs(g, ["cb"]) == 144 * 27
    assert macs(g, ["res"]) == 180 * 36 + 144 * 5
    assert macs(g, ["lin"]) == 72 * 4


def test_residual_channels_must_match() -> None:
    g = Graph()
    x = g.input("x", (1, 4, 4, 3))
    w1, b1 = g.param("w1", np.ones((2, 3, 3, 3), np.float32)), g.param("b1", np.ones(2, np.float32))
    w2, b2 = g.param("w2", np.ones((4, 1, 1, 2), np.float32)), g.param("b2", np.ones(4, np.float32))
    with pytest.raises(OpError, match="4 channels but the input has 3"):
        g.residual(x, w1, b1, w2, b2)


def test_conv_block_partial_batch_norm_is_an_error() -> None:
    g = Graph()
    x = g.input("x", (1, 4, 4, 3))
    w = g.param("w", np.ones((2, 1, 1, 3), np.float32))
    p = g.param("p", np.ones(2, np.float32))
    with pytest.raises(OpError, match="all of bn_scale"):
        g.conv_block(x, w, None, p, p)


def test_hir_op_without_lowering_is_a_clear_error() -> None:
    op = defop("_test_unlowerable", family="test", inputs=("x",), stage="hir")
    op.infer(lambda x: x)
    try:
        g = Graph()
        g.output(g.add_node(op.name, [g.input("x", (2,))])[0])
        with pytest.raises(IRError, match="declares no lowering"):
            lower_hir(g)
    finally:
        del REGISTRY[op.name]
