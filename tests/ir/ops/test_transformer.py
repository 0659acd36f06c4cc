"""Transformer HIR blocks: swiglu_ffn, residual_rms_norm, residual_layer_norm, embedding.

Each block's own reference against its lowered MIR graph run by the reference
interpreter, the MIR ops it lowers to, its MACs and its errors; and a block
chain through int8 PTQ against float.
"""

from __future__ import annotations

import numpy as np
import pytest

from rlx_edge.errors import OpError
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.ops import REGISTRY
from rlx_edge.ir.passes.lower_hir import lower_hir
from rlx_edge.quant.calibrate import calibrate
from rlx_edge.quant.ptq import quantize
from rlx_edge.targets.reference import run

BLOCKS = ("swiglu_ffn", "residual_rms_norm", "residual_layer_norm", "embedding")


def block_graph(op: str, inputs: list, attrs: dict) -> Graph:
    """One block node over graph inputs (the ids and every array that is not None)."""
    g = Graph(op)
    names = REGISTRY[op].input_names(len(inputs))
    handles = [None if a is None else g.input(n, a.shape, str(a.dtype)) for n, a in zip(names, inputs)]
    outs = getattr(g, op)(*handles, name="blk", **attrs)
    g.output(*(outs if isinstance(outs, tuple) else (outs,)))
    return g


@pytest.mark.parametrize("op", BLOCKS)
def test_block_reference_is_its_lowered_graph(op: str) -> None:
    """The block composes the very references its MIR ops run, in the same order: bit for bit."""
    opdef = REGISTRY[op]
    for seed in range(12):
        inputs, attrs, _, _ = opdef.draw(np.random.default_rng(seed))
        g = block_graph(op, inputs, attrs)
        m = lower_hir(g)
        assert all(REGISTRY[n.op].stage == "mir" for n in m.nodes)
        feed = {n: a for n, a in zip(opdef.input_names(len(inputs)), inputs) if a is not None}
        got = run(m, feed)
        want = opdef.run_reference(inputs, opdef.normalize_attrs(attrs))
        assert len(want) == len(g.outputs)
        for o, w in zip(g.outputs, want):
            assert got[o].dtype == w.dtype and got[o].shape == w.shape
            assert np.array_equal(got[o], w), f"{op} seed {seed}: output {o}"


def test_lowered_ops() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    w = [rng.standard_normal(s).astype(np.float32) for s in ((6, 4), (6, 4), (4, 6))]
    g = block_graph("swiglu_ffn", [x, *w, None, None, None], {})
    assert [n.op for n in lower_hir(g).nodes] == ["fully_connected", "silu", "fully_connected", "mul",
                                                  "fully_connected"]  # fmt: skip
    g = block_graph("residual_layer_norm", [x, x, x[0, 0], None], {})
    m = lower_hir(g)
    assert [n.op for n in m.nodes] == ["add", "layer_norm"]
    assert m.outputs == g.outputs and m.outputs[1] == m.nodes[0].outputs[0]  # the residual sum itself
    g = block_graph("residual_rms_norm", [x, x, x[0, 0]], {})
    assert [n.op for n in lower_hir(g).nodes] == ["add", "rms_norm"]
    g = block_graph("embedding", [np.zeros((2, 3), np.int32), w[0]], {})
    (node,) = lower_hir(g).nodes
    assert node.op == "gather" and node.attrs["axis"] == 0


def test_swiglu_values_and_macs() -> None:
    x = np.array([[1.0, -2.0]], np.float32)
    wg = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], np.float32)
    wu = np.array([[2.0, 0.0], [1.0, 1.0], [0.0, -1.0]], np.float32)
    wd = np.array([[1.0, 1.0, 1.0]], np.float32)
    bd = np.array([0.5], np.float32)
    y = REGISTRY["swiglu_ffn"].run_reference([x, wg, wu, wd, None, None, bd], {})[0]
    g, u = x @ wg.T, x @ wu.T
    want = (g / (1 + np.exp(-g)) * u) @ wd.T + bd
    np.testing.assert_allclose(y, want, rtol=1e-6)
    gr = block_graph("swiglu_ffn", [np.zeros((5, 7, 8), np.float32), np.zeros((16, 8), np.float32),
                                    np.zeros((16, 8), np.float32), np.zeros((8, 16), np.float32),
                                    None, None, None], {})  # fmt: skip
    node = gr.nodes[0]
    macs = REGISTRY["swiglu_ffn"].count_macs([gr.types[v] for v in node.inputs], [gr.types[node.outputs[0]]], {})
    assert macs == 3 * 5 * 7 * 8 * 16  # three [35 x 8] x [8 x 16] products


def test_residual_norm_values() -> None:
    x = np.array([[1.0, 2.0]], np.float32)
    r = np.array([[2.0, 0.0]], np.float32)  # s = [3, 2]: mean 2.5, variance 0.25
    y, s = REGISTRY["residual_layer_norm"].run_reference(
        [x, r, np.array([1.0, 2.0], np.float32), np.array([0.0, 1.0], np.float32)], {"axis": -1, "epsilon": 0.0}
    )
    np.testing.assert_array_equal(s, [[3.0, 2.0]])
    np.testing.assert_allclose(y, [[1.0, -1.0]], rtol=1e-6)
    y, s = REGISTRY["residual_rms_norm"].run_reference(
        [x, r, np.array([1.0, 1.0], np.float32)], {"axis": -1, "epsilon": 0.0}
    )
    np.testing.assert_allclose(y, [[3 / np.sqrt(6.5), 2 / np.sqrt(6.5)]], rtol=1e-6)


def test_embedding_rows_and_negative_ids() -> None:
    table = np.arange(12, dtype=np.float32).reshape(4, 3)
    ids = np.array([[0, 3], [-1, 1]], np.int32)
    y = REGISTRY["embedding"].run_reference([ids, table], {})[0]
    assert y.shape == (2, 2, 3)
    np.testing.assert_array_equal(y[0, 1], table[3])
    np.testing.assert_array_equal(y[1, 0], table[3])  # -1 counts from the end, as gather


def test_embedding_out_of_range_names_the_node() -> None:
    g = block_graph("embedding", [np.zeros(2, np.int32), np.zeros((4, 3), np.float32)], {})
    with pytest.raises(OpError, match=r"node 'blk' \(gather\): gather: index 4 is out of range for axis 0 of size 4"):
        run(g, {"ids": np.array([1, 4], np.int32), "table": np.zeros((4, 3), np.float32)})


def test_block_errors() -> None:
    g = Graph()
    x = g.input("x", (2, 4))
    with pytest.raises(OpError, match="w_gate gives"):
        g.swiglu_ffn(x, g.param("a", np.zeros((6, 4), np.float32)), g.param("b", np.zeros((5, 4), np.float32)),
                     g.param("c", np.zeros((4, 6), np.float32)))  # fmt: skip
    with pytest.raises(OpError, match="residual"):
        g.residual_rms_norm(x, g.input("r", (2, 2, 4)), g.param("gm", np.ones(4, np.float32)))
    with pytest.raises(OpError, match=r"table must be \[V, E\]"):
        g.embedding(g.input("ids", (3,), "i32"), g.param("t", np.zeros(5, np.float32)))
    with pytest.raises(OpError, match="indices must be int32"):
        g.embedding(x, g.param("t2", np.zeros((5, 2), np.float32)))


def test_block_chain_int8_close_to_float() -> None:
    """embedding -> residual_rms_norm -> swiglu_ffn -> residual_layer_norm, quantized int8 with float edges.

    Bound: 3 steps of the final layer norm's int8 output (~0.025 each; 1.2 measured). Half a step is
    its own rounding, half beta's; the rest is the int8 rounding of every intermediate (table, both
    norms, three fully connected layers, silu, the product), carried through normalizations that
    divide by standard deviations near 1, so it stays of the order of a step.
    """
    rng = np.random.default_rng(0)
    v, e, hidden, seq = 16, 8, 16, 6
    g = Graph("tiny_block")
    ids = g.input("ids", (seq,), "i32")
    table = g.param("table", rng.standard_normal((v, e)).astype(np.float32))
    x = g.embedding(ids, table)
    h, stream = g.residual_rms_norm(x, x, g.param("g1", rng.uniform(0.5, 1.5, e).astype(np.float32)))
    f = g.swiglu_ffn(h, *(g.param(n, (rng.standard_normal(s) / np.sqrt(s[1])).astype(np.float32))
                          for n, s in (("wg", (hidden, e)), ("wu", (hidden, e)), ("wd", (e, hidden)))))  # fmt: skip
    y, _ = g.residual_layer_norm(
        f, stream, g.param("g2", np.ones(e, np.float32)), g.param("b2", np.zeros(e, np.float32))
    )
    g.output(y)
    data = {"ids": rng.integers(0, v, (64, seq)).astype(np.int32)}
    q = quantize(g, calibrate(g, data), float_interface=True)
    ops = {n.op for n in q.nodes}
    assert {"rms_norm", "layer_norm", "gather", "silu"} <= ops and "dequantize" in ops
    assert all(q.types[n.outputs[0]].dtype.is_int for n in q.nodes if n.op in ("rms_norm", "layer_norm", "silu"))
    worst = 0.0
    for row in rng.integers(0, v, (20, seq)).astype(np.int32):
        want = run(g, {"ids": row})[y.name]
        got = run(q, {"ids": row})[q.outputs[0]]
        worst = max(worst, float(np.abs(got - want).max()))
    ln = next(n for n in q.nodes if n.op == "layer_norm")
    step = float(q.types[ln.outputs[0]].quant.scale[0])
    assert worst < 3 * step, (worst, step)
