"""int8 multi-head attention (#19) through calibration and PTQ: the reference, the Cortex-M host build,
the JAX target and QEMU (M4) give the same bytes.

The block lowers to fully connected layers, transposes, batch matmuls, a scale multiply and the masked
softmax (a causal mask is a constant read from flash, a custom mask a runtime bool input read from the
arena), so this runs every integer piece of attention on every target.
"""

from __future__ import annotations

import numpy as np
import pytest

from opgraphs import merge_graphs, single_node_graph
from rlx_edge.boards import ALIASES
from rlx_edge.hil.qemu import run_qemu
from rlx_edge.ir.graph import Graph
from rlx_edge.quant.calibrate import calibrate
from rlx_edge.quant.ptq import quantize
from rlx_edge.targets.cortexm import build_model_firmware, compile_host
from rlx_edge.targets.jax import compile_jax
from rlx_edge.targets.reference import run

B, L, E, HEADS = 1, 8, 16, 4


def _float_mha(kind: str, seed: int) -> Graph:
    rng = np.random.default_rng(seed)
    g = Graph(f"mha_{kind}")
    x = g.input("x", (B, L, E), "f32")
    ws = [g.param(n, (rng.standard_normal((E, E)) / np.sqrt(E)).astype(np.float32)) for n in ("wq", "wk", "wv", "wo")]
    bs = [g.param(f"b{n}", (0.1 * rng.standard_normal(E)).astype(np.float32)) for n in "qkvo"]
    mask = g.input("mask", (L, L), "bool") if kind == "custom" else None
    g.output(g.multi_head_attention(x, *ws, *bs, mask, num_heads=HEADS, mask=kind, name="mha"))
    return g


def _custom_masks(rng: np.random.Generator, n: int) -> np.ndarray:
    keep = rng.random((n, L, L)) < 0.5
    keep[:, 1] = False  # a query that sees no key: its softmax row and its attention output are 0
    return keep


def _int8_mha(kind: str, seed: int) -> Graph:
    fg = _float_mha(kind, seed)
    rng = np.random.default_rng(seed + 100)
    data = {"x": rng.standard_normal((64, B, L, E)).astype(np.float32)}
    if kind == "custom":
        data["mask"] = _custom_masks(rng, 64)
    return quantize(fg, calibrate(fg, data), scheme="int8")


@pytest.fixture(scope="module")
def graphs() -> dict[str, Graph]:
    return {"causal": _int8_mha("causal", 1), "custom": _int8_mha("custom", 2)}


def _feeds(g: Graph, n: int, seed: int) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    out = []
    masks = _custom_masks(rng, n)
    for k in range(n):
        feed = {}
        for v in g.inputs:
            t = g.types[v]
            shape = tuple(int(d) for d in t.shape)
            feed[v] = masks[k] if v.endswith("mask") else rng.integers(-128, 128, shape).astype(np.int8)
        out.append(feed)
    return out


def test_int8_attention_is_integer_all_the_way(graphs):
    for g in graphs.values():
        ops = {n.op for n in g.nodes}
        assert {"matmul", "softmax", "fully_connected", "transpose", "mul"} <= ops
        assert "attention" not in ops and "multi_head_attention" not in ops  # lowered by quantize
        (sm,) = [n for n in g.nodes if n.op == "softmax"]
        assert g.types[sm.inputs[0]].dtype.name == "i8" and g.types[sm.outputs[0]].dtype.name == "i8"
        assert g.types[sm.inputs[1]].dtype.name == "bool"
    causal_mask = next(n for n in graphs["causal"].nodes if n.op == "softmax").inputs[1]
    assert causal_mask in graphs["causal"].params  # a constant
    assert next(n for n in graphs["custom"].nodes if n.op == "softmax").inputs[1] == "mask"  # the runtime input


def _masked_softmaxes() -> list[Graph]:
    """Masked softmax alone: int8 and int16x8, masks constant (flash) and runtime (arena), broadcast
    over some dims, of ranks 1 to 4, with rows that keep nothing."""
    rng = np.random.default_rng(12)
    out = []
    for k in range(8):
        shape = tuple(int(d) for d in rng.integers(1, 6, 1 + k % 4))
        x = (3 * rng.standard_normal(shape)).astype(np.float32)
        mshape = tuple(1 if rng.random() < 0.3 else d for d in shape)[int(rng.integers(0, len(shape))) :]
        keep = rng.random(mshape) < 0.6
        keep[(0,) * keep.ndim] = False
        fg = single_node_graph("softmax", [x, keep], {"axis": -1}, constants=(1,) if k % 2 else ())
        data = {n: a[None] for n, a in zip(fg.inputs, (x, keep))}
        out.append(quantize(fg, calibrate(fg, data, optimize=False), scheme=("int8", "int16x8")[k // 4 % 2]))
    return out


def _feed_of(g: Graph, rng: np.random.Generator) -> dict[str, np.ndarray]:
    feed = {}
    for v in g.inputs:
        t = g.types[v]
        shape = tuple(int(d) for d in t.shape)
        if t.dtype.name == "bool":
            feed[v] = rng.random(shape) < 0.5
        else:
            info = np.iinfo(t.dtype.numpy)
            feed[v] = rng.integers(info.min, int(info.max) + 1, shape).astype(t.dtype.numpy)
    return feed


def test_int8_mha_and_masked_softmax_bit_exact_on_host_build_and_jax(graphs, tmp_path):
    cases = [graphs["causal"], graphs["custom"], *_masked_softmaxes()]
    assert {c.types[c.outputs[0]].dtype.name for c in cases} == {"i8", "i16"}
    m = merge_graphs(cases, "attention_cases", "c")
    model = compile_host(m, tmp_path)
    fn = compile_jax(m, batch="exact")
    rng = np.random.default_rng(3)
    mha = [_feeds(graphs["causal"], 12, 3), _feeds(graphs["custom"], 12, 4)]
    distinct = set()
    for k in range(12):
        feed = {f"c{i}_{v}": a for i in range(2) for v, a in mha[i][k].items()}
        for i, c in enumerate(cases[2:], start=2):
            feed.update({f"c{i}_{v}": a for v, a in _feed_of(c, rng).items()})
        want = run(m, feed)
        got_c, got_j = model.run(feed), fn(feed)
        for o in m.outputs:
            assert np.array_equal(got_c[o], want[o]), f"cortexm host, feed {k}, {o}"
            assert np.array_equal(np.asarray(got_j[o]), want[o]), f"jax, feed {k}, {o}"
        distinct.update(want[o].tobytes() for o in m.outputs[:2])
    assert len(distinct) >= 20  # attention outputs move with the inputs: a stuck output cannot pass


def test_int8_causal_mha_bit_exact_on_qemu_m4(graphs, tmp_path):
    g = graphs["causal"]
    board = ALIASES["qemu-m4"]
    elf, _ = build_model_firmware(g, board, tmp_path / "fw")
    samples = [f["x"] for f in _feeds(g, 5, 7)]
    out = g.outputs[0]
    t = g.types[out]
    got = run_qemu(elf, board, samples, output_dtype=t.dtype.numpy, output_shape=tuple(int(d) for d in t.shape))
    refs = [run(g, {"x": s})[out] for s in samples]
    for k, (y, ref) in enumerate(zip(got, refs)):
        np.testing.assert_array_equal(y, ref, err_msg=f"qemu-m4, input {k}")
    assert len({r.tobytes() for r in refs}) == len(refs)
