"""rlx_depthwise_conv_3x3_s8 (int8 layouts), rlx_depthwise_conv_3x3_wide_s8 (--optimize speed's int16
layouts) and rlx_depthwise_conv_s8 against the integer reference."""

from __future__ import annotations

import numpy as np
import pytest

from rlx_edge.ir.graph import Graph
from rlx_edge.targets.cortexm import emit

from ..conftest import rand_q, wq

_KERNEL_3X3 = {"balanced": "rlx_depthwise_conv_3x3_s8(", "speed": "rlx_depthwise_conv_3x3_wide_s8("}


@pytest.mark.parametrize(("fast", "optimize"), [(True, "balanced"), (True, "speed"), (False, "balanced")])
def test_depthwise_random(check, fast, optimize):
    rng = np.random.default_rng(21 + fast)
    g = Graph("dw")
    for k in range(8):
        c = int(rng.choice([4, 8, 6, 3, 12]))
        m = 1 if fast else int(rng.choice([1, 2, 3]))
        kh, kw = (3, 3) if fast else (int(rng.integers(1, 5)), int(rng.integers(1, 4)))
        h, w = int(rng.integers(3, 9)), int(rng.integers(3, 8))
        attrs = {
            "strides": tuple(int(s) for s in rng.integers(1, 3, 2)),
            "dilations": (1, 1) if fast else tuple(int(d) for d in rng.integers(1, 3, 2)),
            "padding": str(rng.choice(["same", "valid"])),
            "activation": str(rng.choice(["none", "relu", "relu6"])),
            "depth_multiplier": m,
        }
        if attrs["padding"] == "valid":
            h, w = h + 4, w + 4
        x = g.input(f"x{k}", (int(rng.choice([1, 2])), h, w, c), "i8", quant=rand_q(rng, 0.01, 0.1))
        wt = g.param(f"w{k}", rng.integers(-127, 128, (1, kh, kw, c * m)).astype(np.int8), quant=wq(rng, c * m, 3))
        b = g.param(f"b{k}", rng.integers(-3000, 3000, c * m).astype(np.int32))
        g.output(g.depthwise_conv2d(x, wt, b, name=f"dw{k}", out_quant=rand_q(rng, 0.02, 0.3), **attrs))
    model_c = emit(g, optimize).files["model.c"]
    want = _KERNEL_3X3[optimize] if fast else "rlx_depthwise_conv_s8("
    assert model_c.count(want) == 8
    assert check(g, n_inputs=5, optimize=optimize) == 8


def test_size_runs_3x3_on_the_generic_kernel():
    g = Graph("dw_size")
    x = g.input("x", (1, 5, 5, 8), "i8", quant=rand_q(np.random.default_rng(1), 0.01, 0.1))
    wt = g.param("w", np.ones((1, 3, 3, 8), np.int8), quant=wq(np.random.default_rng(2), 8, 3))
    y = g.depthwise_conv2d(
        x,
        wt,
        None,
        name="dw",
        out_quant=rand_q(np.random.default_rng(3), 0.02, 0.3),
        strides=(1, 1),
        dilations=(1, 1),
        padding="same",
        activation="none",
        depth_multiplier=1,
    )
    g.output(y)
    calls = {lv: emit(g, lv).files["model.c"] for lv in ("size", "balanced", "speed")}
    assert "rlx_depthwise_conv_s8(" in calls["size"] and "3x3" not in calls["size"]
    assert "rlx_depthwise_conv_3x3_s8(" in calls["balanced"]
    assert "rlx_depthwise_conv_3x3_wide_s8(" in calls["speed"]


@pytest.mark.parametrize("optimize", ["balanced", "speed"])
def test_depthwise_3x3_thin_inputs(check, optimize):
    """Inputs one or two pixels wide or high: pixels with a single column of
    taps inside (the DSP path's reference loop), rows all padding, both edges
    clipped at once; channels a multiple of 4 so the DSP path runs."""
    rng = np.random.default_rng(77)
    g = Graph("dw_thin")
    shapes = [(5, 1, 8), (1, 6, 4), (2, 2, 4), (1, 1, 8), (3, 2, 12)]
    for k, (h, w, c) in enumerate(shapes):
        attrs = {
            "strides": (1 + k % 2, 1 + k % 2),
            "dilations": (1, 1),
            "padding": "same",
            "activation": ["none", "relu", "relu6"][k % 3],
            "depth_multiplier": 1,
        }
        x = g.input(f"x{k}", (1, h, w, c), "i8", quant=rand_q(rng, 0.01, 0.1))
        wt = g.param(f"w{k}", rng.integers(-127, 128, (1, 3, 3, c)).astype(np.int8), quant=wq(rng, c, 3))
        b = g.param(f"b{k}", rng.integers(-3000, 3000, c).astype(np.int32))
        g.output(g.depthwise_conv2d(x, wt, b, name=f"dw{k}", out_quant=rand_q(rng, 0.02, 0.3), **attrs))
    assert emit(g, optimize).files["model.c"].count(_KERNEL_3X3[optimize]) == len(shapes)
    assert check(g, n_inputs=5, optimize=optimize) >= 5  # inputs compared, bit-exact on both builds


def test_depth_multiplier_on_one_channel_runs_as_a_convolution(check):
    """One input channel to M outputs (micro_speech's, person_detect's first layer) goes to the
    convolution kernel with the weights as [M, KH, KW, 1]: every window shape, stride, dilation,
    padding and M not a multiple of 4, bit-exact on both builds."""
    rng = np.random.default_rng(5)
    g = Graph("dw_mult_one_channel")
    cases = [(8, 10, 8, 2, 1), (3, 3, 3, 1, 2), (5, 1, 4, 2, 1), (2, 4, 1, 1, 1), (6, 2, 2, 3, 2)]
    for k, (m, kh, kw, stride, dil) in enumerate(cases):
        attrs = {
            "strides": (stride, stride),
            "dilations": (dil, dil),
            "padding": "same" if k % 2 else "valid",
            "activation": ["none", "relu", "relu6"][k % 3],
            "depth_multiplier": m,
        }
        h, w = int(rng.integers(kh * dil + 1, 14)), int(rng.integers(kw * dil + 1, 12))
        x = g.input(f"x{k}", (1 + k % 2, h, w, 1), "i8", quant=rand_q(rng, 0.01, 0.1))
        wt = g.param(f"w{k}", rng.integers(-127, 128, (1, kh, kw, m)).astype(np.int8), quant=wq(rng, m, 3))
        b = g.param(f"b{k}", rng.integers(-3000, 3000, m).astype(np.int32))
        g.output(g.depthwise_conv2d(x, wt, b, name=f"dw{k}", out_quant=rand_q(rng, 0.02, 0.3), **attrs))
    model_c = emit(g).files["model.c"]
    assert "rlx_depthwise_conv" not in model_c and model_c.count("rlx_convolve_s8(") == len(cases)
    assert check(g, n_inputs=5) >= 5  # inputs compared, bit-exact on both builds


def test_depthwise_3x3_int8_dsp_path_on_m4_bit_exact(tmp_path):
    """The balanced 3x3 kernel's Cortex-M4 asm (a group of 4 channels over a ring of widened
    input rows): channels with and without a remainder past the groups of 4, strides 1 and 2
    (rows kept in the ring) and 3 (none kept), same and valid padding, inputs one or two pixels
    wide, both output rules (saturating rq_mode 2; a relu whose zero point is not -128 clamps),
    under QEMU against the reference."""
    from rlx_edge.runners import prepare
    from rlx_edge.targets.reference import run
    from rlx_edge.targets.reference.compare import make_inputs

    rng = np.random.default_rng(17)
    g = Graph("dw_m4")
    cases = [(6, 5, 8, 1, "same"), (7, 6, 6, 2, "same"), (5, 7, 13, 1, "valid"), (2, 1, 4, 1, "same"),
             (4, 4, 3, 2, "valid"), (3, 2, 12, 2, "same"), (8, 7, 8, 3, "same")]  # fmt: skip
    for k, (h, w, c, s, pad) in enumerate(cases):
        act = ["none", "relu", "relu6"][k % 3]
        x = g.input(f"x{k}", (1, h, w, c), "i8", quant=rand_q(rng, 0.01, 0.1))
        wt = g.param(f"w{k}", rng.integers(-127, 128, (1, 3, 3, c)).astype(np.int8), quant=wq(rng, c, 3))
        b = g.param(f"b{k}", rng.integers(-3000, 3000, c).astype(np.int32))
        y = g.depthwise_conv2d(x, wt, b, name=f"dw{k}", out_quant=rand_q(rng, 0.02, 0.3), strides=(s, s),
                               dilations=(1, 1), padding=pad, activation=act, depth_multiplier=1)  # fmt: skip
        g.output(y)
    assert emit(g).files["model.c"].count("rlx_depthwise_conv_3x3_s8(") == len(cases)
    modes = {emit(g).files["model.c"].count(f".rq_mode = {m},") for m in (1, 2)}
    assert 0 not in modes  # both output rules run
    runner = prepare("qemu-m4", g, tmp_path)
    for k, sample in enumerate(make_inputs(g, 2, seed=4)):  # 2 random, then all-min, all-max, all-zero-point
        got, want = runner(sample), run(g, sample)
        for name, ref in want.items():
            assert np.array_equal(got[name], ref), f"input {k}, output {name}"
