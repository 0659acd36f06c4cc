"""The attention HIR blocks (#19): each mask kind against a dense-mask float reference written here, the
lowering's structure, errors, multi-head attention against a numpy MHA, and block reference == the
lowered MIR graph's reference."""

from __future__ import annotations

import numpy as np
import pytest

from rlx_edge.errors import OpError
from rlx_edge.ir.dtype import from_numpy
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.interpret import run
from rlx_edge.ir.ops import REGISTRY
from rlx_edge.ir.passes.lower_hir import lower_hir
from rlx_edge.ir.verify import verify

# float64 throughout: the block and the dense reference differ only in the order of float operations
RTOL = 1e-12


def dense_attention(q, k, v, keep, scale=None):
    """Plain numpy: scores, where(mask, s, -inf), softmax, @ v (every row keeps at least one key)."""
    scale = 1 / np.sqrt(q.shape[-1]) if scale is None else scale
    s = (q @ np.swapaxes(k, -1, -2)) * scale
    s = np.where(keep, s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ v


def _qkv(rng, lead, lq, lk, d=4, dv=3):
    return (rng.standard_normal(lead + (lq, d)), rng.standard_normal(lead + (lk, d)),
            rng.standard_normal(lead + (lk, dv)))  # fmt: skip


def _block(q, k, v, mask_in=None, **attrs) -> tuple[Graph, dict]:
    """The attention block alone in a graph (the mask input, when given, a graph input) and its feeds."""
    g = Graph("attention")
    feeds = {"q": q, "k": k, "v": v}
    ins = [g.input(n, a.shape, "f64") for n, a in feeds.items()]
    if mask_in is not None:
        ins.append(g.input("mask", mask_in.shape, "bool"))
        feeds["mask"] = mask_in
    g.output(g.attention(*ins, name="att", **attrs))
    return g, feeds


def _lowered(g: Graph, feeds: dict) -> np.ndarray:
    low = lower_hir(g)
    verify(low)
    assert all(REGISTRY[n.op].stage == "mir" for n in low.nodes)
    return run(low, feeds)[g.outputs[0]]


def _block_ref(g: Graph, feeds: dict) -> np.ndarray:
    """The block's own float reference (not its lowering: the interpreter lowers HIR first)."""
    (node,) = g.nodes
    op = REGISTRY[node.op]
    args = [None if v is None else feeds[v] for v in node.inputs]
    return op.run_reference(args, op.normalize_attrs(node.attrs))[0]


def _check(g: Graph, feeds: dict, want: np.ndarray) -> None:
    block = _block_ref(g, feeds)
    np.testing.assert_allclose(block, want, rtol=RTOL, atol=RTOL)
    assert np.array_equal(_lowered(g, feeds), block)  # the same float ops in the same order


def test_no_mask():
    rng = np.random.default_rng(0)
    q, k, v = _qkv(rng, (2,), 5, 7)
    g, feeds = _block(q, k, v)
    _check(g, feeds, dense_attention(q, k, v, np.ones((5, 7), bool)))


@pytest.mark.parametrize("lq,lk", [(6, 6), (3, 7)])
def test_causal(lq, lk):
    """Queries aligned to the keys' end: query i (at position i + lk - lq) sees keys j <= that position."""
    rng = np.random.default_rng(lq)
    q, k, v = _qkv(rng, (2, 3), lq, lk)
    keep = np.array([[j <= i + lk - lq for j in range(lk)] for i in range(lq)])
    g, feeds = _block(q, k, v, mask="causal")
    _check(g, feeds, dense_attention(q, k, v, keep))


def test_causal_query_seeing_no_key_gives_zero():
    """lq > lk: the first queries precede every key; their softmax row is all 0 (documented), so is the output."""
    rng = np.random.default_rng(2)
    q, k, v = _qkv(rng, (), 5, 3)
    g, feeds = _block(q, k, v, mask="causal")
    got = _block_ref(g, feeds)
    assert np.all(got[:2] == 0)
    keep = np.array([[j <= i - 2 for j in range(3)] for i in range(5)])
    np.testing.assert_allclose(got[2:], dense_attention(q[2:], k, v, keep[2:]), rtol=RTOL, atol=RTOL)
    assert np.array_equal(_lowered(g, feeds), got)


@pytest.mark.parametrize("lq,lk,window", [(7, 7, 3), (4, 9, 2), (5, 5, 1)])
def test_sliding_window(lq, lk, window):
    rng = np.random.default_rng(window)
    q, k, v = _qkv(rng, (2,), lq, lk)
    keep = np.array([[i + lk - lq - window < j <= i + lk - lq for j in range(lk)] for i in range(lq)])
    g, feeds = _block(q, k, v, mask="sliding_window", window=window)
    _check(g, feeds, dense_attention(q, k, v, keep))


def test_custom_mask_is_a_runtime_input():
    rng = np.random.default_rng(4)
    q, k, v = _qkv(rng, (2, 2), 4, 6)
    g, _ = _block(q, k, v, np.ones((2, 1, 4, 6), bool), mask="custom", scale=0.3)
    low = lower_hir(g)
    (sm,) = [n for n in low.nodes if n.op == "softmax"]
    assert sm.inputs[1] == "mask" and "mask" in low.inputs  # read at run time, not folded into a constant
    for seed in range(3):  # one graph, several masks
        keep = np.random.default_rng(seed).random((2, 1, 4, 6)) < 0.6
        keep[..., 0] = True  # every query keeps a key (the dense reference has no empty rows)
        feeds = {"q": q, "k": k, "v": v, "mask": keep}
        _check(g, feeds, dense_attention(q, k, v, keep, scale=0.3))


def test_lowering_is_the_designed_mir_chain():
    rng = np.random.default_rng(5)
    g, _ = _block(*_qkv(rng, (1,), 3, 3), mask="causal")
    low = lower_hir(g)
    assert [n.op for n in low.nodes] == ["transpose", "matmul", "mul", "softmax", "matmul"]
    (sm,) = [n for n in low.nodes if n.op == "softmax"]
    mask = low.params[sm.inputs[1]]
    assert mask.dtype == bool and np.array_equal(mask, np.tril(np.ones((3, 3), bool)))
    (mul,) = [n for n in low.nodes if n.op == "mul"]
    assert float(low.params[mul.inputs[1]]) == 0.5  # 1 / sqrt(D = 4)


@pytest.mark.parametrize(
    "mask,attrs,match",
    [
        (None, {"mask": "custom"}, 'mask="custom" needs the mask input'),
        (np.ones((3, 3), bool), {"mask": "none"}, 'a mask input needs mask="custom", got mask="none"'),
        (np.ones((3, 3), bool), {"mask": "causal"}, 'needs mask="custom", got mask="causal"'),
        (None, {"mask": "sliding_window"}, "sliding_window needs window >= 1"),
        (None, {"mask": "sliding_window", "window": -2}, "sliding_window needs window >= 1"),
        (None, {"mask": "causal", "window": 2}, 'window=2 applies to mask="sliding_window" only'),
    ],
)
def test_attention_errors(mask, attrs, match):
    rng = np.random.default_rng(6)
    with pytest.raises(OpError, match=match):
        _block(*_qkv(rng, (), 3, 3), mask, **attrs)


# multi_head_attention ------------------------------------------------------------------------------
def numpy_mha(x, ws, bs, heads, keep):
    """Textbook multi-head self-attention (weights as nn.Linear: y = x @ w.T + b)."""
    b, n, e = x.shape
    dh = e // heads

    def proj(w, bias):
        y = x @ w.T + (0 if bias is None else bias)
        return y.reshape(b, n, heads, dh).transpose(0, 2, 1, 3)

    q, k, v = (proj(w, bias) for w, bias in zip(ws[:3], bs[:3]))
    o = dense_attention(q, k, v, keep).transpose(0, 2, 1, 3).reshape(b, n, e)
    return o @ ws[3].T + (0 if bs[3] is None else bs[3])


def _mha_graph(x, ws, bs, mask_in=None, **attrs) -> tuple[Graph, dict]:
    g = Graph("mha")
    xi = g.input("x", x.shape, "f64")
    feeds = {"x": x}
    params = [g.param(n, w) for n, w in zip(("wq", "wk", "wv", "wo"), ws)]
    params += [None if bias is None else g.param(f"b{i}", bias) for i, bias in enumerate(bs)]
    m = None
    if mask_in is not None:
        m = g.input("mask", mask_in.shape, "bool")
        feeds["mask"] = mask_in
    g.output(g.multi_head_attention(xi, *params, m, name="mha", **attrs))
    return g, feeds


@pytest.mark.parametrize("kind", ["none", "causal", "sliding_window", "custom"])
def test_multi_head_attention_matches_numpy(kind):
    rng = np.random.default_rng(7)
    b, n, e, heads = 2, 6, 8, 4
    x = rng.standard_normal((b, n, e))
    ws = [rng.standard_normal((e, e)) / np.sqrt(e) for _ in range(4)]
    bs = [rng.standard_normal(e), None, rng.standard_normal(e), rng.standard_normal(e)]
    lower = np.tril(np.ones((n, n), bool))
    keep = {"none": np.ones((n, n), bool), "causal": lower, "sliding_window": lower & ~np.tril(lower, -2)}.get(kind)
    mask = None
    if kind == "custom":
        keep = rng.random((n, n)) < 0.5
        keep[:, 0] = True
        mask = keep
    g, feeds = _mha_graph(x, ws, bs, mask, num_heads=heads, mask=kind, window=2 if kind == "sliding_window" else 0)
    want = numpy_mha(x, ws, bs, heads, keep)
    block = REGISTRY["multi_head_attention"].run_reference(
        [x, *ws, *bs, mask], REGISTRY["multi_head_attention"].normalize_attrs(g.nodes[0].attrs)
    )[0]
    np.testing.assert_allclose(block, want, rtol=RTOL, atol=RTOL)
    assert np.array_equal(_lowered(g, feeds), block)


def test_multi_head_attention_errors():
    rng = np.random.default_rng(8)
    x = rng.standard_normal((1, 4, 6))
    ws = [rng.standard_normal((6, 6)) for _ in range(4)]
    with pytest.raises(OpError, match="num_heads=4 does not divide the embedding size E=6"):
        _mha_graph(x, ws, [None] * 4, num_heads=4)
    with pytest.raises(OpError, match=r"wk needs shape \[E, E\] = \[6, 6\], got \[6, 5\]"):
        _mha_graph(x, [ws[0], ws[1][:, :5], ws[2], ws[3]], [None] * 4, num_heads=2)
    with pytest.raises(OpError, match=r"x needs shape \[B, L, E\]"):
        _mha_graph(x[0], ws, [None] * 4, num_heads=2)


@pytest.mark.parametrize("name", ["attention", "multi_head_attention"])
def test_block_reference_is_its_lowering_on_sampled_calls(name):
    """Every sampler draw (dtypes, ranks, each mask kind): the block's reference is its MIR graph's, bit for bit."""
    op = REGISTRY[name]
    rng = np.random.default_rng(9)
    kinds = set()
    for _ in range(25):
        ins, attrs, *_ = op.draw(rng)
        kinds.add(attrs["mask"])
        g = Graph(name)
        handles, feeds = [], {}
        for i, a in enumerate(ins):
            if a is None:
                handles.append(None)
                continue
            handles.append(g.input(f"i{i}", a.shape, from_numpy(a.dtype)))
            feeds[f"i{i}"] = a
        g.output(g.add_node(name, handles, attrs, name="blk")[0])
        want = op.run_reference(ins, op.normalize_attrs(attrs))[0]
        got = _lowered(g, feeds)
        assert got.dtype == want.dtype and np.array_equal(got, want, equal_nan=True), attrs
    assert kinds == {"none", "causal", "sliding_window", "custom"}
