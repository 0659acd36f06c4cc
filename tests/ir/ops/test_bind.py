"""The numpy fast paths (``OpDef.bind``) compute exactly what each op's ``eval`` computes.

The reference interpreter (``RunPlan``) runs the bound kernels; the arena runner
and the JAX target run ``eval``. These tests hold the two equal with
``np.array_equal``: hand-built quantized conv / depthwise / fully connected
nodes over random and extreme inputs (zero points, padding, strides,
dilations, groups, depth multipliers, weights large enough for the float64
accumulation, int16 activations, a bias given at run time, weights given at
run time), add / sub / mul over every pair of byte values, and the fused
requantization (``numpy_finish_acc``) against ``finish_acc`` on accumulators
and multipliers chosen to hit each of its cases.
"""

from __future__ import annotations

import numpy as np
import pytest

from rlx_edge.ir.dtype import DType, from_numpy
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.interpret import RunPlan
from rlx_edge.ir.ops import get_op
from rlx_edge.ir.ops._quantized import finish_acc, numpy_finish_acc
from rlx_edge.ir.plan import node_context
from rlx_edge.ir.prepared import Prepared
from rlx_edge.ir.types import QuantParams


def _q(scale, zp=0, axis=None, storage=DType.i8) -> QuantParams:
    return QuantParams(np.asarray(scale, np.float32), np.asarray(zp, np.int64), axis=axis, storage=storage)


def _node_graph(op: str, x_shape, dtype, w, b, attrs, *, w_axis, rng, runtime=()) -> Graph:
    """One quantized ``op`` node; ``runtime`` names the operands ("w", "b") fed as inputs instead of constants."""
    info = np.iinfo(dtype)
    zp_x = 0 if dtype == np.int16 else int(rng.integers(info.min, info.max + 1))
    zp_y = 0 if dtype == np.int16 else int(rng.integers(-20, 20))
    channels = w.shape[w_axis]
    w_q = _q(rng.uniform(0.002, 0.02, channels), 0, axis=w_axis)
    g = Graph(f"{op}_bind")
    x = g.input("x", x_shape, from_numpy(np.dtype(dtype)), quant=_q(0.05, zp_x, storage=from_numpy(np.dtype(dtype))))
    ins = [x.name]
    for name, arr, q in (("w", w, w_q), ("b", b, None)):
        if arr is None:
            ins.append(None)
            continue
        if name == "b":
            q = _q(0.05 * w_q.scale, 0, axis=0, storage=from_numpy(arr.dtype))
        if name in runtime:
            ins.append(g.input(name, arr.shape, from_numpy(arr.dtype), quant=q).name)
        else:
            ins.append(g.param(name, arr, quant=q).name)
    out_q = _q(float(rng.uniform(0.05, 2.0)), zp_y, storage=from_numpy(np.dtype(dtype)))
    g.output(*g.add_node(op, ins, attrs, out_quant=[out_q]))
    return g


def _feeds(g: Graph, rng: np.random.Generator, extra: dict) -> list[dict[str, np.ndarray]]:
    t = g.types["x"]
    shape, dtype = tuple(int(d) for d in t.shape), t.dtype.numpy
    info = np.iinfo(dtype)
    zp = int(t.quant.zero_point[0])
    xs = [
        rng.integers(info.min, info.max + 1, shape),
        np.full(shape, info.min),
        np.full(shape, info.max),
        np.clip(zp + rng.integers(-1, 2, shape), info.min, info.max),
    ]
    return [{"x": x.astype(dtype), **extra} for x in xs]


def _check_against_eval(g: Graph, feeds: list[dict[str, np.ndarray]]) -> None:
    plan = RunPlan(g)
    (node,) = g.nodes
    opdef = get_op(node.op)
    params = opdef.prepare_node(node_context(g, node), node.attrs)
    for feed in feeds:
        env = {**g.params, **feed}
        (want,) = opdef.run_eval(params, [None if v is None else env[v] for v in node.inputs], node.attrs)
        got = plan(feed)[g.outputs[0]]
        assert got.dtype == want.dtype
        assert np.array_equal(got, want), f"{node.op}: bound kernel differs from eval"


def _window_attrs(rng: np.random.Generator) -> dict:
    padding = str(rng.choice(["valid", "same", "explicit"]))
    attrs = {
        "strides": tuple(int(s) for s in rng.integers(1, 3, 2)),
        "dilations": tuple(int(d) for d in rng.integers(1, 3, 2)),
        "padding": padding,
        "activation": str(rng.choice(["none", "relu", "relu6"])),
    }
    if padding == "explicit":
        attrs["pads"] = tuple(int(p) for p in rng.integers(0, 3, 4))
    return attrs


def _weights(rng, shape, big: bool) -> np.ndarray:
    # big: every weight at +-127, so 128 * sum |w| passes 2**24 and the sums need float64
    return (rng.choice([-127, 127], shape) if big else rng.integers(-127, 128, shape)).astype(np.int8)


@pytest.mark.parametrize("seed", range(6))
def test_conv2d_bound_kernel_is_eval(seed):
    rng = np.random.default_rng(seed)
    dtype = np.int16 if seed == 5 else np.int8
    groups = 2 if seed in (1, 3) else 1
    big = seed == 4
    ig, og = (600, 3) if big else (int(rng.integers(1, 5)), int(rng.integers(1, 5)))
    kh, kw = (3, 1) if big else tuple(int(k) for k in rng.integers(1, 4, 2))
    w = _weights(rng, (og * groups, kh, kw, ig), big)
    bias_dtype = np.int64 if dtype == np.int16 else np.int32
    b = None if seed == 2 else rng.integers(-(2**20), 2**20, og * groups).astype(bias_dtype)
    attrs = {**_window_attrs(rng), "groups": groups}
    g = _node_graph("conv2d", (2, 7, 6, ig * groups), dtype, w, b, attrs, w_axis=0, rng=rng)
    _check_against_eval(g, _feeds(g, rng, {}))


@pytest.mark.parametrize("seed", range(4))
def test_depthwise_bound_kernel_is_eval(seed):
    rng = np.random.default_rng(100 + seed)
    dtype = np.int16 if seed == 3 else np.int8
    c, m = int(rng.integers(1, 6)), int(rng.integers(1, 3))
    kh, kw = (int(k) for k in rng.integers(1, 4, 2))
    w = _weights(rng, (1, kh, kw, c * m), False)
    b = rng.integers(-(2**20), 2**20, c * m).astype(np.int64 if dtype == np.int16 else np.int32)
    attrs = {**_window_attrs(rng), "depth_multiplier": m}
    g = _node_graph("depthwise_conv2d", (1, 8, 7, c), dtype, w, b, attrs, w_axis=3, rng=rng)
    _check_against_eval(g, _feeds(g, rng, {}))


@pytest.mark.parametrize("case", ["plain", "big", "no_bias", "rank3"])
def test_fully_connected_bound_kernel_is_eval(case):
    rng = np.random.default_rng(7)
    i = 2000 if case == "big" else 37
    w = _weights(rng, (9, i), case == "big")
    b = None if case == "no_bias" else rng.integers(-(2**24), 2**24, 9).astype(np.int32)
    x_shape = (2, 3, i) if case == "rank3" else (1, i)
    g = _node_graph("fully_connected", x_shape, np.int8, w, b, {"activation": "none"}, w_axis=0, rng=rng)
    _check_against_eval(g, _feeds(g, rng, {}))


def test_sums_past_float32_exactness_stay_exact():
    """Sums of 3000 products near 127 * 127 pass 2**24, where float32 would round them (BLAS does, here, by
    up to tens); each channel's bias brings its accumulator back to 2 * target, so one unit shows in the output."""
    rng = np.random.default_rng(1)
    i, o = 3000, 16
    xs = rng.integers(100, 128, (4, i)).astype(np.int8)
    w = rng.integers(100, 128, (o, i)).astype(np.int8)
    target = rng.integers(-60, 60, o)
    exact = xs[0].astype(np.int64) @ w.astype(np.int64).T
    g = Graph("fc_float64")
    x = g.input("x", (4, i), DType.i8, quant=_q(1.0, 0))
    wq = _q(np.full(o, 0.5), 0, axis=0)
    bias = (2 * target - exact).astype(np.int32)
    ins = [x.name, g.param("w", w, quant=wq).name, g.param("b", bias, quant=_q(np.full(o, 0.5), 0, 0, DType.i32)).name]
    g.output(*g.add_node("fully_connected", ins, {}, out_quant=[_q(1.0, 0)]))
    feed = {"x": xs}
    assert np.array_equal(RunPlan(g)(feed)[g.outputs[0]][0], target)  # 2 * target * 0.5 * 1.0 / 1.0
    _check_against_eval(g, [feed])


@pytest.mark.parametrize("runtime", [("b",), ("w", "b")])
def test_operands_given_at_run_time(runtime):
    """A runtime bias takes the requantization that cannot skip the int32 wrap; runtime weights keep eval."""
    rng = np.random.default_rng(11)
    w = _weights(rng, (4, 2, 2, 3), False)
    b = rng.integers(-(2**30), 2**30, 4).astype(np.int32)  # large: the accumulators may wrap
    attrs = {"strides": (1, 1), "padding": "same", "dilations": (1, 1), "activation": "none", "groups": 1}
    g = _node_graph("conv2d", (1, 5, 5, 3), np.int8, w, b, attrs, w_axis=0, rng=rng, runtime=runtime)
    extra = {"b": b, **({"w": w} if "w" in runtime else {})}
    _check_against_eval(g, _feeds(g, rng, extra))


@pytest.mark.parametrize("op", ["add", "sub", "mul"])
def test_byte_pair_table_is_eval_on_every_pair(op):
    rng = np.random.default_rng(3)
    g = Graph(f"{op}_bind")
    a = g.input("a", (256, 256), DType.i8, quant=_q(0.03, 5))
    b = g.input("b", (256, 256), DType.i8, quant=_q(0.11, -7))
    g.output(*g.add_node(op, [a.name, b.name], {"activation": "relu"}, out_quant=[_q(0.07, -3)]))
    bits = np.arange(256, dtype=np.uint8).view(np.int8)
    feed = {"a": np.repeat(bits[:, None], 256, axis=1), "b": np.repeat(bits[None, :], 256, axis=0)}
    _check_against_eval(g, [feed, {"a": feed["a"][rng.permutation(256)], "b": feed["b"]}])


def _params(mult, shift, out_zp: int, lo: int = -128, hi: int = 127) -> Prepared:
    return Prepared(
        mult=np.asarray(mult, np.int64), shift=np.asarray(shift, np.int64), wide=False,
        out_zp=out_zp, act_min=lo, act_max=hi, dtype="int8",
    )  # fmt: skip


@pytest.mark.parametrize(
    "mult, shift",
    [
        ([1 << 30, (1 << 30) + 1, 2**31 - 1, 1518500250], [-1, -7, 0, -12]),  # m = 2**30: the sign test moves
        ([1 << 30, 1 << 30], [-3, 0]),  # r = 0 has no tie rule
        ([0, 1717986918], [0, -31]),  # a flushed multiplier; the largest right shift
        ([1717986918, 1518500250], [2, 1]),  # left shifts fold into the multiplier
    ],
)
def test_fused_requantization_is_finish_acc(mult, shift):
    rng = np.random.default_rng(5)
    n = len(mult)
    bias = rng.integers(-(2**20), 2**20, n)
    raw_bound = np.full(n, 2**24)
    acc_bound = raw_bound + np.abs(bias)
    raw = np.concatenate(
        [
            rng.integers(-(2**24), 2**24 + 1, (4000, n)),
            rng.integers(-(2**12), 2**12, (4000, n)),  # near zero: ties and signs around every rounding
            np.full((1, n), 2**24),
            np.full((1, n), -(2**24)),
            -bias[None, :] + np.arange(-4, 5)[:, None],  # the accumulator crossing zero
        ]
    )
    for out_zp in (-128, 0, 37):
        p = _params(mult, shift, out_zp)
        want = finish_acc(raw + bias, p.mult, p.shift, False, out_zp, -128, 127, "int8")
        got = numpy_finish_acc(p, bias, raw_bound, acc_bound)(raw.copy())
        assert np.array_equal(got, want)


def test_fused_requantization_keeps_finish_acc_where_it_could_wrap():
    """Accumulators that may pass int32 (after a left shift) take finish_acc's wrapping path, still equal."""
    rng = np.random.default_rng(9)
    p = _params([1717986918], [3], 0)
    raw = rng.integers(-(2**30), 2**30, (1000, 1))
    bound = np.array([2**30])
    got = numpy_finish_acc(p, np.zeros(1, np.int64), bound, bound)(raw.copy())
    assert np.array_equal(got, finish_acc(raw, p.mult, p.shift, False, 0, -128, 127, "int8"))
