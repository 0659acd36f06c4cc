"""Provenance: each MIR node's HIR block and the passes that rewrote it or could not, through quantization,
.rlx files and ``rlx-edge inspect --provenance`` (rlx_edge/ir/passes/_provenance.py, ir/inspect.py)."""

from __future__ import annotations

import json

import numpy as np

from rlx_edge.cli import main
from rlx_edge.ir import inspect
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.passes import Pass, PassContext, PassManager
from rlx_edge.ir.passes.lower_hir import lower_hir
from rlx_edge.ir.serialize import load, save
from rlx_edge.pipeline import optimize_graph
from rlx_edge.quant.calibrate import calibrate
from rlx_edge.quant.ptq import quantize

NOT_FUSED = "relu not fused into 'B': its output also feeds 'add_0', which must see the value before the activation"


def blocks_model() -> Graph:
    """conv_block A (batch norm + relu: both fold into its conv), conv_block B (no activation) whose output a
    relu and an add both read (so the relu cannot fuse), then a linear block L."""
    rng = np.random.default_rng(0)

    def p(name: str, shape: tuple[int, ...]):
        return g.param(name, rng.standard_normal(shape).astype(np.float32))

    g = Graph("prov", "hir")
    x = g.input("x", (1, 6, 6, 3), "f32")
    bn = [p("s", (4,)), p("beta", (4,)), p("mean", (4,)), g.param("var", np.ones(4, np.float32))]
    a = g.conv_block(x, p("wa", (4, 3, 3, 3)), p("ba", (4,)), *bn, padding="same", activation="relu", name="A")
    b = g.conv_block(a, p("wb", (4, 1, 1, 4)), p("bb", (4,)), activation="none", name="B")
    s = g.add(g.relu(b), b)
    y = g.linear(g.reshape(s, shape=(1, 144)), p("wl", (5, 144)), p("bl", (5,)), activation="relu", name="L")
    g.output(y)
    return g


def _rows(graph: Graph) -> dict[str, dict]:
    return {r["node"]: r for r in inspect.provenance(graph)}


def test_lowering_records_each_nodes_block():
    rows = _rows(lower_hir(blocks_model()))
    assert {n: (r["block"], r["block_op"]) for n, r in rows.items()} == {
        "A/conv2d_0": ("A", "conv_block"),
        "A/batch_norm_0": ("A", "conv_block"),
        "A": ("A", "conv_block"),  # the relu producing the block's output takes the block's name
        "B": ("B", "conv_block"),
        "relu_0": (None, None),
        "add_0": (None, None),
        "reshape_0": (None, None),
        "L": ("L", "linear"),
    }


def _check_optimized(graph: Graph) -> None:
    rows = _rows(graph)
    assert list(rows) == ["A/conv2d_0", "B", "relu_0", "add_0", "reshape_0", "L"]
    a = rows["A/conv2d_0"]
    assert (a["block"], a["op"]) == ("A", "conv2d")
    assert a["rewritten"] == [
        {"pass": "bn_fold", "what": "batch_norm folded into conv2d 'A/conv2d_0'"},
        {"pass": "fuse_activation", "what": "relu fused into conv2d 'A/conv2d_0' as activation=relu"},
    ]
    assert a["not_rewritten"] == []
    # B's activation could not fuse: the reason shows on B and on the relu that stayed
    assert rows["B"]["block"] == "B" and rows["B"]["rewritten"] == []
    assert rows["B"]["not_rewritten"] == [{"pass": "fuse_activation", "why": NOT_FUSED}]
    assert rows["relu_0"]["not_rewritten"] == [{"pass": "fuse_activation", "why": NOT_FUSED}]
    assert rows["add_0"] == {**rows["add_0"], "block": None, "rewritten": [], "not_rewritten": []}
    assert rows["L"]["block"] == "L" and rows["L"]["rewritten"] == rows["L"]["not_rewritten"] == []


def test_the_optimizer_records_what_fused_and_what_could_not():
    g = blocks_model()
    mir, _ = optimize_graph(g)
    _check_optimized(mir)
    assert "provenance" not in g.metadata  # the model the caller holds is unchanged


def test_provenance_survives_quantization_and_rlx_files(tmp_path, capsys):
    g = blocks_model()
    q = quantize(g, calibrate(g, np.random.default_rng(1).standard_normal((8, 1, 6, 6, 3)).astype(np.float32)))
    save(q, tmp_path / "q.rlx")
    _check_optimized(load(tmp_path / "q.rlx"))
    assert main(["inspect", str(tmp_path / "q.rlx"), "--provenance", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["node"] for r in out["provenance"]] == ["A/conv2d_0", "B", "relu_0", "add_0", "reshape_0", "L"]
    assert out["provenance"][1]["not_rewritten"] == [{"pass": "fuse_activation", "why": NOT_FUSED}]


def test_inspect_provenance_text_of_an_hir_model(tmp_path, capsys):
    save(blocks_model(), tmp_path / "m.rlx")
    assert main(["inspect", str(tmp_path / "m.rlx"), "--provenance"]) == 0
    text = capsys.readouterr().out
    assert "  A/conv2d_0 (conv2d): from conv_block block 'A'\n    + bn_fold: batch_norm folded into" in text
    assert f"  B (conv2d): from conv_block block 'B'\n    - fuse_activation: {NOT_FUSED}\n" in text
    assert "  add_0 (add): given as MIR\n" in text
    assert "  L (fully_connected): from linear block 'L'" in text


def test_a_pass_that_changes_a_node_without_an_event_is_still_recorded():
    def touch(graph: Graph, ctx: PassContext) -> Graph:
        g = graph.copy()
        for n in g.nodes[:2]:
            n.attrs = {**n.attrs, "activation": "relu"}
        return g

    g = Graph("t")
    x = g.input("x", (1, 4), "f32")
    g.output(g.add(g.mul(x, x), g.mul(x, x)))
    mir, _ = PassManager([Pass("touch", touch), "cse", "dce"], max_iterations=1).run(g)
    assert _rows(mir)["mul_0"]["rewritten"] == [
        {"pass": "touch", "what": "rewritten"},
        {"pass": "cse", "what": "mul computes the same as 'mul_0', merged"},
    ]
