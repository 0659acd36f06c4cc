"""TFLite DIV against TFLite Micro, bit for bit: int8 on every pair of input bytes, float32 broadcast.

The int8 kernel (div.cc) leaves the reference's safe ranges in three places that a few random
inputs rarely reach, so each is pinned here on all 65,536 input pairs: the output shift passes
31 for small dividends (TFLite Micro's x86-64 build then wraps the shift count), a zero divisor
(its reciprocal's Newton steps wrap in int32), and the output multiplier, which that build
computes from the scales in double precision although the kernel's expression is float32.
"""

from __future__ import annotations

import numpy as np
import pytest

from rlx_edge.errors import UnsupportedOpError
from rlx_edge.frontends.tflite import load_tflite_bytes, to_tflite_bytes
from rlx_edge.frontends.tflm import TflmModel
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.plan import prepare_node
from rlx_edge.ir.types import QuantParams
from rlx_edge.targets.reference import run
from rlx_edge.targets.reference.compare import compare_with_tflm


def q8(scale: float, zp: int) -> QuantParams:
    return QuantParams(np.float32(scale), zp, storage="i8")


# (s_a, zp_a, s_b, zp_b, s_y, zp_y, activation)
SCALES = [
    (0.05, -3, 0.07, 20, 0.02, 5, "none"),
    (1.0, 0, 1.0, 0, 1.0, 0, "none"),  # shifts past 31: 0 / b is zp_y + 1 there
    (0.1, 0, 0.01, 0, 1.0, -128, "none"),  # s_a / (s_b s_y) is 10 in float32, not in double
    (0.4182438254356384, 0, 0.791544497013092, 0, 0.022475887089967728, 0, "none"),  # the same, a general one
    (0.003, 100, 0.2, -50, 10.0, -128, "relu"),
    (0.01, 10, 0.5, -7, 0.0005, 3, "relu6"),
]


def _pairs() -> tuple[np.ndarray, np.ndarray]:
    bits = np.arange(256, dtype=np.uint8).view(np.int8)
    return np.repeat(bits[:, None], 256, axis=1), np.repeat(bits[None, :], 256, axis=0)


def test_int8_every_pair_of_bytes_matches_tflm() -> None:
    g = Graph("div_pairs")
    for k, (sa, za, sb, zb, sy, zy, act) in enumerate(SCALES):
        a = g.input(f"a{k}", (256, 256), "i8", quant=q8(sa, za))
        b = g.input(f"b{k}", (256, 256), "i8", quant=q8(sb, zb))
        g.output(g.div(a, b, activation=act, name=f"div{k}", out_quant=q8(sy, zy)))
    data = to_tflite_bytes(g)
    back = load_tflite_bytes(data)
    assert [n.op for n in back.nodes] == ["div"] * len(SCALES)
    a, b = _pairs()
    feed = {}
    for k in range(len(SCALES)):
        feed[f"a{k}"], feed[f"b{k}"] = a, b
    with TflmModel(data) as m:
        theirs = m([feed[n] for n in back.inputs])
    ours = run(back, feed)
    for k, (name, want) in enumerate(zip(back.outputs, theirs)):
        got = ours[name]
        assert np.array_equal(got, want), f"scales {SCALES[k]}: {(got != want).sum()} of 65536 pairs differ"


@pytest.mark.parametrize("b_shape", [(2, 3, 10), (3, 1), (10,)])
def test_float_matches_tflm(b_shape, tmp_path) -> None:
    g = Graph("div_f32")
    a = g.input("a", (2, 3, 10), "f32")
    rng = np.random.default_rng(5)
    # a constant divisor away from 0, as models hold one (compare's edge inputs are zeros)
    b = g.param("b", (rng.uniform(0.25, 3, b_shape) * rng.choice([-1, 1], b_shape)).astype(np.float32))
    g.output(g.div(a, b))
    path = tmp_path / "div.tflite"
    path.write_bytes(to_tflite_bytes(g))
    r = compare_with_tflm(path, n_inputs=20, seed=2)
    assert r.compared >= 20 and r.mismatches == 0, r.first_mismatch


def test_int8_scale_ratio_past_the_kernel_range_is_refused() -> None:
    g = Graph("div_far")
    a = g.input("a", (4,), "i8", quant=q8(1.0, 0))
    b = g.input("b", (4,), "i8", quant=q8(1e-4, 0))
    g.output(g.div(a, b, out_quant=q8(1e-4, 0)))  # s_a / (s_b s_y) = 1e8 > 2**22
    with pytest.raises(UnsupportedOpError, match=r"div.*scale ratio"):
        prepare_node(g, g.nodes[0])
