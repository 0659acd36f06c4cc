"""rlx_depthwise_conv_3x3_pair_s8, _pair_gen_s8 and rlx_depthwise_conv_3x3_s8 (int8 layouts),
rlx_depthwise_conv_3x3_wide_s8 (--optimize speed's int16 layouts), rlx_depthwise_conv_px_s8 (balanced: most
other windows, a pixel at a time), rlx_depthwise_conv_ring_s8 (the rest), rlx_depthwise_conv_line_s8 (long 1-D
lines) and rlx_depthwise_conv_s8 (--optimize size, few pixels) against the integer reference."""

from __future__ import annotations

import re

import numpy as np
import pytest

from rlx_edge.ir.graph import Graph
from rlx_edge.ir.types import QuantParams
from rlx_edge.runners import prepare
from rlx_edge.targets.cortexm import emit, rules
from rlx_edge.targets.reference import run
from rlx_edge.targets.reference.compare import make_inputs

from ..conftest import q, rand_q, wq

_KERNEL_3X3 = {"balanced": "rlx_depthwise_conv_3x3_s8(", "speed": "rlx_depthwise_conv_3x3_wide_s8("}
_PAIR = "rlx_depthwise_conv_3x3_pair_"  # pair_s8( and pair_clamp_s8(


def _dw_layer(g: Graph, rng, k: int, h: int, w: int, c: int, *, m: int = 1, kh: int = 3, kw: int = 3, s: int = 1,
              d: int | tuple[int, int] = 1, pad: str | tuple[int, int, int, int] = "same", act: str = "none",
              out_zp: int | None = None, ties: bool = False, batch: int = 1) -> None:  # fmt: skip
    """Depthwise layer k of g (its own input and output): random int8 weights and bias; dilation d (both
    axes, or (H, W)); pad "same", "valid" or explicit (top, bottom, left, right); a random output zero
    point unless out_zp. ties:
    weights in -1..1, small biases and scales whose product is about 1/4 (a right shift of 1 or 2),
    so that many accumulators round from a tie, where the requantization's sign correction of a
    negative one matters."""
    pads = pad if isinstance(pad, tuple) else (0, 0, 0, 0)
    n, wr, br = c * m, 1 if ties else 127, 30 if ties else 3000
    xq = q(0.1, int(rng.integers(-100, 100))) if ties else rand_q(rng, 0.01, 0.1)
    x = g.input(f"x{k}", (batch, h, w, c), "i8", quant=xq)
    w8 = rng.integers(-wr, wr + 1, (1, kh, kw, n)).astype(np.int8)
    wqs = QuantParams(np.full(n, 0.05, np.float32), np.zeros(n, np.int64), axis=3) if ties else wq(rng, n, 3)
    wt = g.param(f"w{k}", w8, quant=wqs)
    b = g.param(f"b{k}", rng.integers(-br, br, n).astype(np.int32))
    oq = q(0.02, int(rng.integers(-60, 60))) if ties else rand_q(rng, 0.02, 0.3)
    oq = oq if out_zp is None else QuantParams(oq.scale, out_zp)
    dil = d if isinstance(d, tuple) else (d, d)
    y = g.depthwise_conv2d(x, wt, b, name=f"dw{k}", out_quant=oq, strides=(s, s),
                           dilations=dil, padding="explicit" if isinstance(pad, tuple) else pad, pads=pads,
                           activation=act, depth_multiplier=m)  # fmt: skip
    g.output(y)


def _dw_rq0_layer(g: Graph, rng, h: int, w: int, c: int, kh: int, kw: int, d: int = 1, m: int = 1) -> None:
    """A depthwise layer of g in rq_mode 0 (its own input "xr" and output), dilation d, depth multiplier m:
    weights in -1..1 and a small output scale, so that its multipliers are above 1, as the GEMM's test does."""
    x = g.input("xr", (1, h, w, c), "i8", quant=QuantParams(np.float32(0.1), 5))
    wt = g.param("wr", rng.integers(-1, 2, (1, kh, kw, c * m)).astype(np.int8), quant=wq(rng, c * m, 3))
    y = g.depthwise_conv2d(x, wt, None, name="dwr", out_quant=QuantParams(np.float32(0.0009), -3),
                           strides=(1, 1), dilations=(d, d), padding="same", activation="none",
                           depth_multiplier=m)  # fmt: skip
    g.output(y)


def _output_rules(model_c: str) -> set[str]:
    """The output rules of model_c's depthwise layers: "ref" (rq_mode 0), "sat" (2), "relu" (1 with
    act_min at or above out_zp: the kernels leave out the sign correction) and "clamp" (1 below it)."""
    found = re.findall(r"\.out_zp = (-?\d+), \.act_min = (-?\d+), \.act_max = -?\d+, \.rq_mode = (\d)", model_c)
    names = {"0": "ref", "2": "sat"}
    return {names.get(m) or ("relu" if int(lo) >= int(zp) else "clamp") for zp, lo, m in found}


def _bit_exact_on_m4(g: Graph, tmp_path, seed: int) -> None:
    """g's firmware under QEMU on M4 against the reference: 2 random inputs, then all-min, all-max and
    all-zero-point."""
    runner = prepare("qemu-m4", g, tmp_path)
    for k, sample in enumerate(make_inputs(g, 2, seed=seed)):
        got, want = runner(sample), run(g, sample)
        for name, ref in want.items():
            assert np.array_equal(got[name], ref), f"input {k}, output {name}"


@pytest.mark.parametrize(
    ("fast", "optimize"), [(True, "balanced"), (True, "speed"), (False, "balanced"), (False, "size")]
)
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
    generic = "rlx_depthwise_conv_s8(" if optimize == "size" else "rlx_depthwise_conv_ring_s8("
    want = _KERNEL_3X3[optimize] if fast else generic
    # balanced: the pair kernel takes strides 1 and 2 but single output pixels; the pixel kernel
    # takes other windows with multipliers 1 and 2 (rules._dw_px), pair_gen 3x3 ones with multiplier 2
    # (rules._dw_pair_gen), the ring the others
    also = (_PAIR,) if fast else ("rlx_depthwise_conv_px_s8(", "rlx_depthwise_conv_3x3_pair_gen_s8(")
    assert model_c.count(want) + (sum(map(model_c.count, also)) if optimize == "balanced" else 0) == 8
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
    assert _PAIR in calls["balanced"]
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
    model_c = emit(g, optimize).files["model.c"]
    assert model_c.count(_KERNEL_3X3[optimize]) + (model_c.count(_PAIR) if optimize == "balanced" else 0) == len(shapes)
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
    # the conv kernels: generic, or on the image padded in scratch (rlx_convolve_pad_s8)
    convs = len(re.findall(r"rlx_convolve_(?:pad_)?s8\(", model_c))
    assert "rlx_depthwise_conv" not in model_c and convs == len(cases)
    assert check(g, n_inputs=5) >= 5  # inputs compared, bit-exact on both builds


def test_depthwise_3x3_int8_dsp_path_on_m4_bit_exact(tmp_path):
    """The balanced 3x3 group ring's Cortex-M4 asm (a group of 4 channels over a ring of widened
    input rows), which keeps stride 3 and single output pixels on DSP cores (the pair kernel takes
    the rest): channels with and without a remainder past the groups of 4, strides 1, 2 and 3, same
    and valid padding, inputs one or two pixels wide, both output rules (saturating rq_mode 2; a
    relu whose zero point is not -128 clamps), under QEMU against the reference."""
    rng = np.random.default_rng(17)
    g = Graph("dw_m4")
    # (5x5x6 s3 pads: on no padding, 4 output pixels or fewer of 4 channels or more go to the pixel kernel)
    cases = [(8, 7, 8, 3, "same"), (4, 4, 3, 2, "valid"), (2, 1, 4, 2, "same"), (1, 1, 12, 1, "same"),
             (5, 5, 6, 3, "same"), (7, 9, 7, 3, "valid"), (9, 8, 13, 3, "same"), (6, 5, 8, 1, "same")]  # fmt: skip
    for k, (h, w, c, s, pad) in enumerate(cases):
        _dw_layer(g, rng, k, h, w, c, s=s, pad=pad, act=["none", "relu", "relu6"][k % 3])
    model_c = emit(g).files["model.c"]
    assert model_c.count("rlx_depthwise_conv_3x3_s8(") == 7 and model_c.count(_PAIR) == 1
    modes = {model_c.count(f".rq_mode = {m},") for m in (1, 2)}
    assert 0 not in modes  # both output rules run
    _bit_exact_on_m4(g, tmp_path, seed=4)


def test_depthwise_3x3_group_ring_speed_on_m4_bit_exact(tmp_path):
    """--optimize speed with channels not a multiple of 4 (no int16 layouts) runs the group ring on M4
    over several rows (balanced gives those layers to the pair kernel): strides 1 and 2 (rows kept
    in the ring), same and valid padding, both output rules, three layers in a chain under QEMU
    against the reference."""
    from rlx_edge.hil.qemu import run_qemu
    from rlx_edge.targets.cortexm import build_model_firmware

    rng = np.random.default_rng(19)
    g = Graph("dw_ring_speed")
    y = g.input("x", (1, 9, 8, 6), "i8", quant=rand_q(rng, 0.01, 0.1))
    for k, (s, pad, act) in enumerate([(1, "same", "none"), (2, "same", "relu6"), (1, "valid", "relu")]):
        wt = g.param(f"w{k}", rng.integers(-127, 128, (1, 3, 3, 6)).astype(np.int8), quant=wq(rng, 6, 3))
        b = g.param(f"b{k}", rng.integers(-3000, 3000, 6).astype(np.int32))
        y = g.depthwise_conv2d(y, wt, b, name=f"dw{k}", out_quant=rand_q(rng, 0.02, 0.3), strides=(s, s),
                               dilations=(1, 1), padding=pad, activation=act, depth_multiplier=1)  # fmt: skip
    g.output(y)
    model_c = emit(g, "speed").files["model.c"]
    assert model_c.count("rlx_depthwise_conv_3x3_wide_s8(") == 3 and ".weights16 = NULL" in model_c
    assert {model_c.count(f".rq_mode = {m},") > 0 for m in (1, 2)} == {True}  # both output rules run
    elf, _ = build_model_firmware(g, "qemu-m4", tmp_path, optimize="speed")
    samples, name = make_inputs(g, 3, seed=8), g.outputs[0]
    t = g.types[name]
    got = run_qemu(elf, "qemu-m4", [x["x"] for x in samples], output_dtype=t.dtype.numpy, output_shape=t.shape)
    for k, (out, x) in enumerate(zip(got, samples)):
        assert np.array_equal(out, run(g, x)[name]), f"input {k}"


def test_depthwise_ring_every_window_bit_exact(check, tmp_path, monkeypatch):
    """rlx_depthwise_conv_ring_s8 (every window but the plain 3x3 and the long 1-D lines of
    rlx_depthwise_conv_line_s8; the balanced build gives most of them to rlx_depthwise_conv_px_s8 and
    3x3 ones with multiplier 2 to rlx_depthwise_conv_3x3_pair_gen_s8, both turned off here, and keeps
    the ring for multipliers above 2, fewer than 4 channels and cores without DSP), on both host
    builds and under QEMU on M4 (its tap and output asm): 2-D windows; Kx1 windows, which run along
    H, on a one-column image; 1xK on a one-row image; odd channel counts (a last group of 1 to 3);
    depth multipliers 2 (the halfword widening) and 3; dilation 2 (taps not adjacent in the ring);
    same and valid padding; both fast output rules (saturating, and a clamp)."""
    monkeypatch.setattr(rules, "_dw_px", lambda f, pads, fast: False)
    monkeypatch.setattr(rules, "_dw_pair_gen", lambda f: False)
    rng = np.random.default_rng(29)
    g = Graph("dw_ring")
    # (h, w, c, multiplier, kh, kw, stride, dilation, padding)
    cases = [(6, 7, 8, 1, 5, 5, 1, 1, "same"), (7, 1, 12, 1, 5, 1, 1, 1, "same"), (1, 10, 5, 1, 1, 7, 2, 1, "same"),
             (7, 8, 4, 2, 3, 3, 1, 1, "same"), (8, 7, 3, 2, 3, 3, 2, 1, "valid"), (9, 9, 8, 1, 3, 3, 1, 2, "same"),
             (6, 5, 3, 3, 2, 3, 1, 2, "same"), (9, 6, 7, 1, 4, 1, 2, 1, "valid")]  # fmt: skip
    for k, (h, w, c, m, kh, kw, s, d, pad) in enumerate(cases):
        _dw_layer(g, rng, k, h, w, c, m=m, kh=kh, kw=kw, s=s, d=d, pad=pad, act=["none", "relu6"][k % 2])
    model_c = emit(g).files["model.c"]
    assert model_c.count("rlx_depthwise_conv_ring_s8(") == len(cases)
    assert {model_c.count(f".rq_mode = {m},") > 0 for m in (1, 2)} == {True}  # both output rules run
    assert check(g, n_inputs=5) >= 5
    _bit_exact_on_m4(g, tmp_path, seed=4)


def test_depthwise_line_bit_exact(check, tmp_path):
    """rlx_depthwise_conv_line_s8 (1-D windows, lines of 8 outputs or more; SMLAD on channel
    planes), on both host builds and under QEMU on M4 (its output asm): Kx1 over several columns
    and 1xK over several rows; every unrolled instance (2 to 9 taps, even and odd); lines whose
    length is not a multiple of 4 (the C's single-output tail; the asm's whole last quad, into the
    scratch rules.py rounds up); a batch of 2; stride 2 (single outputs only); odd
    channel counts (a last group of 1 to 3, the per-lane widening and output); depth multiplier
    2; same and valid padding; the three fast output rules (saturating; a clamp above out_zp,
    relu6, without the sign correction; one below it, relu_n1_to_1, with it, on ties), and the
    reference requantization (rq_mode 0), which the DSP build hands to the ring kernel in the same
    scratch."""
    rng = np.random.default_rng(31)
    g = Graph("dw_line")
    # (h, w, c, multiplier, kh, kw, stride, padding[, activation: none and relu6 in turn])
    n1 = "relu_n1_to_1"
    cases = [(12, 3, 8, 1, 5, 1, 1, "same"), (2, 13, 5, 1, 1, 7, 1, "same"), (12, 2, 4, 2, 4, 1, 1, "valid"),
             (17, 1, 16, 1, 3, 1, 2, "same", n1), (9, 1, 8, 1, 9, 1, 1, "same"), (1, 11, 12, 1, 1, 2, 1, "valid"),
             (1, 9, 4, 1, 1, 8, 1, "same")]  # fmt: skip
    for k, (h, w, c, m, kh, kw, s, pad, *act) in enumerate(cases):
        act = act[0] if act else ["none", "relu6"][k % 2]
        # a batch of 2 on the 9x1 (the whole groups' line loop steps per image)
        _dw_layer(g, rng, k, h, w, c, m=m, kh=kh, kw=kw, s=s, pad=pad, act=act, ties=act == n1, batch=1 + (k == 4))
    _dw_rq0_layer(g, rng, 10, 1, 7, 6, 1)  # the runner takes 8 layers: this is the eighth
    model_c = emit(g).files["model.c"]
    assert model_c.count("rlx_depthwise_conv_line_s8(") == len(cases) + 1
    assert _output_rules(model_c) == {"ref", "sat", "relu", "clamp"}  # every output rule runs
    assert check(g, n_inputs=5) >= 5
    _bit_exact_on_m4(g, tmp_path, seed=5)


def test_depthwise_px_bit_exact(check, tmp_path):
    """rlx_depthwise_conv_px_s8 (balanced; a pixel at a time, 4 channels at once, the input read in place),
    on both host builds (the portable one runs the ring or, on at most 4 pixels, the generic kernel in
    its place) and under QEMU on M4 (its tap, row-run and output asm): windows whole along a row (the
    row run) and clipped at every border (output rows clipped across the run from a copy of their
    window rows, rlx_dwp_sub; pixels clipped along it from a table per class of equal taps where a class
    has 8 pixels or more in the rows whole across, at multipliers 1 (3x3 d2) and 2, else a run per window
    row, as where the tables would take more than 4 KB: 9x9 on 12x11); pixels walked along W, and
    along H on a tall output or a square one with a 1xK window (the table's taps transposed); odd
    channel counts (the last group ends at the last channel and writes the previous group's channels
    again); depth multiplier 2 (the halfword taps), with a last group of 2 input channels; dilation 2;
    strides 1 to 3; same, valid and explicit padding; a 3x3 window on 4 pixels with no padding (the
    pair kernel's otherwise); the three fast output rules (saturating; a clamp above out_zp, relu6,
    without the sign correction; a clamp below it, relu_n1_to_1, with it, on ties), at multipliers 1 and 2,
    and the reference requantization (rq_mode 0, the C output)."""
    rng = np.random.default_rng(41)
    # (h, w, c, multiplier, kh, kw, stride, dilation, padding[, activation: none and relu6 in turn]), two
    # images (the runner takes 8 inputs)
    n1 = "relu_n1_to_1"
    images = [[(8, 9, 8, 1, 5, 5, 1, 1, "same"), (11, 10, 13, 1, 7, 7, 2, 1, "same"), (9, 8, 8, 1, 3, 3, 1, 2, "same"),
               (7, 6, 4, 2, 3, 2, 1, 1, "same"), (9, 8, 5, 2, 2, 3, 2, 1, "valid"), (6, 4, 8, 1, 1, 9, 1, 1, "same"),
               (7, 3, 6, 1, 9, 1, 1, 1, "same"), (12, 5, 8, 1, 5, 3, 1, 1, "same")],
              [(6, 6, 12, 1, 3, 3, 2, 1, "valid"), (10, 7, 7, 1, 2, 4, 3, 1, (1, 0, 2, 1)),
               (9, 9, 6, 1, 5, 5, 2, 1, "same"), (10, 9, 8, 1, 3, 3, 1, 2, "same", n1),
               (11, 10, 6, 2, 3, 5, 1, 1, "same", n1), (6, 6, 8, 1, 1, 5, 1, 1, "same", "relu6"),
               (12, 11, 4, 1, 9, 9, 1, 1, "same", "relu6")]]  # fmt: skip
    tables = set()
    modes = set()
    for n, cases in enumerate(images):
        g = Graph(f"dw_px{n}")
        for k, (h, w, c, m, kh, kw, s, d, pad, *act) in enumerate(cases):
            act = act[0] if act else ["none", "relu6"][k % 2]
            _dw_layer(g, rng, k, h, w, c, m=m, kh=kh, kw=kw, s=s, d=d, pad=pad, act=act, ties=act == n1)
        if n == 1:
            _dw_rq0_layer(g, rng, 6, 7, 8, 3, 5)
        files = emit(g).files
        model_c = files["model.c"]
        assert model_c.count("rlx_depthwise_conv_px_s8(") == len(cases) + (n == 1)
        modes |= _output_rules(model_c)
        # the class tables each layer's scratch holds (dwq's first word)
        tables |= {int(t) > 0 for t in re.findall(r"_dwq\[\d+\] RLX_WEIGHT_ALIGN = \{\s*(-?\d+)", files["weights.c"])}
        assert check(g, n_inputs=5) >= 5
        _bit_exact_on_m4(g, tmp_path / g.name, seed=7)
    assert modes == {"ref", "sat", "relu", "clamp"}  # every output rule runs
    assert tables == {True, False}  # class tables, and layers without (none clipped, or 9x9's over 4 KB)


def test_depthwise_few_pixels_take_the_generic_kernel(check):
    """Balanced: a 2-D window other than the plain 3x3 with at most 4 output pixels runs
    rlx_depthwise_conv_s8 (no per-group set-up), bit-exact on both host builds; 5 pixels, a 1-D
    window or a plain 3x3 keep their kernels."""
    rng = np.random.default_rng(37)
    g = Graph("dw_few")
    # (h, w, c, kh, kw, stride, padding): 2x2, 1x3, 2x2 and 1x2 outputs; then 5x1 pixels, a 7x1
    # window and a plain 3x3
    cases = [(4, 4, 16, 5, 5, 2, "same"), (3, 7, 8, 5, 5, 3, "same"), (2, 2, 12, 5, 3, 1, "same"),
             (3, 3, 5, 3, 2, 1, "valid"), (9, 1, 8, 5, 5, 2, "same"), (4, 4, 8, 7, 1, 2, "same"),
             (2, 2, 8, 3, 3, 1, "same")]  # fmt: skip
    for k, (h, w, c, kh, kw, s, pad) in enumerate(cases):
        _dw_layer(g, rng, k, h, w, c, kh=kh, kw=kw, s=s, pad=pad, act=["none", "relu6"][k % 2])
    model_c = emit(g).files["model.c"]
    assert model_c.count("rlx_depthwise_conv_s8(") == 4
    assert check(g, n_inputs=5) >= 5


def test_depthwise_3x3_pair_bit_exact(check, tmp_path):
    """rlx_depthwise_conv_3x3_pair_s8 and _pair_clamp_s8 (balanced, strides 1 and 2: channel planes, SMLAD
    on tap pairs), on both host builds (the portable one runs the group ring inside them) and under QEMU
    on M4 (their line asm, 4 routines: strides 1 and 2, saturating in pair_s8 where out_zp is -128
    ("sat": 6 outputs a step, no sign correction), clamped in pair_clamp_s8, which takes rq_mode 2 with
    another out_zp as well; the widening asm): lines along H (tall) and along W (wide); the clamp's
    line lengths leaving 0, 1, 2 and 3 outputs after its quads (a pair, a quad storing 3), the
    saturating lines' leaving 0 to 5 after their hexes (up to 3 pairs), at both strides; lines of 2
    and 3 outputs (one image line: zeros on both sides); pixels from an odd or even plane position, odd or
    even in number (the widening's lead and trail words); blocks of 4 to 20 channels with odd
    remainders (5, 13, 3, 17: the widening's single channels), and of 32 on short lines (6x6x70:
    blocks of 32, 32 and 6, the scratch rules.py reserves for them); lines outside the
    image read a ring slot zeroed in place, over several blocks (the next block's top padding on the
    slot the last one's bottom left zero): padding on both sides, after the image only (stride 2 on
    10 columns), on both sides of one image line (2x1x20, two blocks), and explicit pads (a third
    image, on M4) before the image only (2 lines at stride 1, 1 at stride 2: the block's first slots
    zeroed at its start, the last block having left none) and 2 lines on both sides of 2 lines;
    same and valid padding; rq_mode 2, 1 (relu6, its clamp at out_zp: the saturating lines, then a clamp
    over the output, 1,170 and 144 bytes; relu_n1_to_1, below out_zp: the clamped lines, on ties, where
    their sign correction matters) and 0 (a
    multiplier above 1, the C lines); a single output pixel keeps rlx_depthwise_conv_3x3_s8."""
    rng = np.random.default_rng(43)
    # (h, w, c, stride, padding, activation; "sat": none with out_zp -128), three images (the runner
    # takes 8 inputs); the saturating lines' outputs (n) left after their hexes, stride 1: 0 (n 18,
    # 6, 18 along W), 1 (19), 2 (2, 8), 3 (3), 4 (10), 5 (17); stride 2: 0 (12), 1 (7), 2 (8),
    # 3 (3 along W), 4 (10), 5 (17). Same padding leaves the last output's third tap outside the
    # image: n 17 at both strides is valid, so that an odd count's last output reads all its taps
    n1 = "relu_n1_to_1"
    images = [[(17, 3, 8, 1, "same", "none"), (18, 5, 13, 1, "same", "relu6"), (4, 20, 6, 1, "same", n1),
               (20, 7, 3, 1, "valid", "sat"), (19, 4, 5, 1, "valid", "sat"), (35, 5, 4, 2, "valid", "sat"),
               (6, 6, 70, 1, "same", "sat"), (2, 1, 20, 1, "same", "sat")],
              [(11, 4, 8, 1, "same", "none"), (14, 10, 17, 2, "same", "sat"), (9, 12, 8, 2, "valid", n1),
               (3, 3, 20, 1, "same", "sat"), (5, 6, 12, 2, "same", "sat"), (1, 2, 12, 1, "same", n1),
               (2, 2, 8, 2, "same", "none")],
              [(20, 6, 12, 1, (0, 1, 2, 0), "sat"), (5, 18, 8, 2, (1, 0, 0, 1), "relu6"),
               (2, 19, 20, 1, (2, 2, 1, 0), "sat"), (10, 3, 7, 1, "same", "sat"), (8, 5, 9, 1, "same", "sat"),
               (24, 3, 5, 2, "same", "sat"), (20, 4, 6, 2, "same", "sat"), (16, 3, 9, 2, "same", "sat")]]  # fmt: skip
    modes, kernels = set(), set()
    for n, cases in enumerate(images):
        g = Graph(f"dw_pair{n}")
        for k, (h, w, c, s, pad, act) in enumerate(cases):
            sat = act == "sat"
            act, zp = ("none", -128) if sat else (act, None)
            _dw_layer(g, rng, k, h, w, c, s=s, pad=pad, act=act, out_zp=zp, ties=act == n1)
        if n == 1:
            _dw_rq0_layer(g, rng, 17, 4, 5, 3, 3)
        model_c = emit(g).files["model.c"]
        assert model_c.count(_PAIR) == len(cases)  # image 1: the rq_mode 0 layer too, less the 1x1 one
        # the saturating lines take exactly the "sat" layers (and image 1's rq_mode 0 one, on C lines)
        n_sat = sum(case[5] == "sat" for case in cases)
        assert model_c.count("rlx_depthwise_conv_3x3_pair_s8(") == n_sat + (n == 1)
        assert model_c.count("rlx_depthwise_conv_3x3_s8(") == (n == 1)
        modes |= _output_rules(model_c)
        kernels |= {k for k in ("pair_s8(", "pair_clamp_s8(") if k in model_c}
        if n < 2:  # the third image on M4 only: its ring is the same C on the host's DSP build (time)
            assert check(g, n_inputs=5) >= 5
        _bit_exact_on_m4(g, tmp_path / g.name, seed=6)
    # every output rule runs, the clamps on their own kernel
    assert modes == {"ref", "sat", "relu", "clamp"} and len(kernels) == 2


def test_depthwise_3x3_pair_gen_bit_exact(check, tmp_path):
    """rlx_depthwise_conv_3x3_pair_gen_s8 (balanced: the pair kernel's lines for a 3x3 with depth multiplier 2,
    output channels 2 i and 2 i + 1 on input channel i's planes, and for a dilated one at stride 1, per phase
    of the dilation, where every phase has 30 outputs or more), on both host builds (the portable one runs
    the ring) and under QEMU on M4. Dilated (first image): dilations 2, 3 along H with 2 along W, and 2
    along H only; output sizes not a multiple of the dilation (phases of unequal sizes); phases along W and
    along H (tall); same, valid and explicit padding (phases padded unequally, or not at all); 36 channels
    (blocks of several groups, and a remainder) and odd counts; two images; a dilated 3x3 with a phase of 25
    outputs keeps the pixel kernel. Multiplier 2 (second image): strides 1 and 2; lines along W and H;
    input channels 3 and 7 (widened one at a time past the groups) and 36 (several blocks); with dilation
    2 too; same, valid and explicit padding; two images. Both: the four output rules (saturating; relu6,
    its clamp at out_zp: the saturating lines, then a clamp over the output; relu_n1_to_1 below out_zp on
    ties, and rq_mode 2 with another out_zp: the clamped lines; rq_mode 0: the C lines)."""
    rng = np.random.default_rng(47)
    n1 = "relu_n1_to_1"
    # (h, w, c, multiplier, stride, dilation, padding, activation; "sat": none with out_zp -128, "none":
    # another out_zp); the first image's last case keeps the pixel kernel
    images = [[(12, 12, 8, 1, 1, 2, "same", "sat"), (13, 11, 13, 1, 1, 2, "same", "relu6"),
               (25, 16, 6, 1, 1, (3, 2), "valid", n1), (14, 20, 36, 1, 1, 2, "same", "none"),
               (12, 13, 12, 1, 1, 2, (1, 2, 3, 0), "sat"), (16, 8, 5, 1, 1, (2, 1), "same", "sat"),
               (10, 10, 8, 1, 1, 2, "same", "sat")],
              [(10, 10, 8, 2, 1, 1, "same", "sat"), (9, 12, 7, 2, 2, 1, "same", "relu6"),
               (17, 6, 20, 2, 1, 1, "valid", n1), (11, 13, 3, 2, 2, 1, (1, 0, 2, 1), "none"),
               (14, 14, 6, 2, 1, 2, "same", "sat"), (12, 12, 36, 2, 2, 1, "same", "sat"),
               (8, 9, 4, 2, 1, 1, "same", "none")]]  # fmt: skip
    for n, cases in enumerate(images):
        g = Graph(f"dw_pair_gen{n}")
        for k, (h, w, c, m, s, d, pad, act) in enumerate(cases):
            sat = act == "sat"
            act, zp = ("none", -128) if sat else (act, None)
            _dw_layer(g, rng, k, h, w, c, m=m, s=s, d=d, pad=pad, act=act, out_zp=zp, ties=act == n1,
                      batch=1 + (k == 1))  # fmt: skip
        _dw_rq0_layer(g, rng, 12, 12, 4, 3, 3, d=2 - n, m=1 + n)
        model_c = emit(g).files["model.c"]
        assert model_c.count("rlx_depthwise_conv_3x3_pair_gen_s8(") == len(cases) + 1 - (n == 0)
        assert model_c.count("rlx_depthwise_conv_px_s8(") == (n == 0)
        assert _output_rules(model_c) == {"ref", "sat", "relu", "clamp"}
        assert check(g, n_inputs=5) >= 5
        _bit_exact_on_m4(g, tmp_path / g.name, seed=9)


def test_depthwise_3x3_pair_oct_bit_exact(check, tmp_path):
    """rlx_depthwise_conv_3x3_pair_clamp_s8's stride-2 lines of a multiple of 8 outputs under a ReLU's
    clamp (relu6 and relu, act_min at out_zp: rlx_dwp_s2_octs, 8 outputs of a channel a step, then the
    clamp over the output), on both host builds (the C lines, the scratch rules.py reserves for blocks of
    up to 32 channels on lines of 20 plane positions) and under QEMU on M4: 1, 2 and 3 octs a line; lines
    along W and along H (tall); 5, 7 and 13 channels (a group and single channels), 32 (one block) and 40
    (blocks of 32 and 8); same padding (a ring slot zeroed below the image; above it too on 17 rows),
    valid, and explicit pads from an odd plane position (the widening's lead and trail words); two images
    in a batch. Beside them, lines the octs leave: 12 outputs (the hexes and pairs) and stride 2 with
    out_zp -128 (pair_s8's saturating lines)."""
    rng = np.random.default_rng(53)
    # (h, w, c, padding, activation, batch); "sat": none with out_zp -128; outputs along the line: 8, 16
    # (32x10: along H), 24, 8 (valid, 2 blocks), 8 (explicit), 12, 8
    cases = [(16, 16, 32, "same", "relu6", 1), (32, 10, 5, "same", "relu6", 2), (17, 48, 13, "same", "relu", 1),
             (9, 17, 40, "valid", "relu6", 1), (6, 16, 7, (1, 1, 1, 0), "relu6", 1),
             (8, 24, 6, "same", "relu6", 1), (16, 16, 8, "same", "sat", 1)]  # fmt: skip
    g = Graph("dw_pair_oct")
    for k, (h, w, c, pad, act, batch) in enumerate(cases):
        sat = act == "sat"
        _dw_layer(g, rng, k, h, w, c, s=2, pad=pad, act="none" if sat else act, out_zp=-128 if sat else None,
                  batch=batch)  # fmt: skip
    model_c = emit(g).files["model.c"]
    assert model_c.count("rlx_depthwise_conv_3x3_pair_clamp_s8(") == len(cases) - 1
    assert model_c.count("rlx_depthwise_conv_3x3_pair_s8(") == 1
    assert _output_rules(model_c) == {"relu", "sat"}
    assert check(g, n_inputs=3) >= 3
    _bit_exact_on_m4(g, tmp_path / g.name, seed=11)


def _line_rq_model(acc: np.ndarray, mult: int, add: int, lo: int, hi: int, rule: int) -> np.ndarray:
    """rlx_dw1_rq_line's arithmetic (rule 0 saturating, 1 a clamp with the sign correction, 2 one without),
    rq_add as rlx_dw1_group4 folds it: SMMLAR of the doubled accumulator with rq_add - act_min 2**e, the sign
    correction, the shift e, USAT to 0..255, the byte-wise minimum with act_max - act_min and act_min added
    (rule 0: SSAT of the unfolded form). Asserts that no intermediate leaves int32."""
    e = (add & -add).bit_length()  # rlx_rq_e: trailing zeros + 1
    fold = 0 if rule == 0 else lo
    add2 = add - fold * (1 << e)
    u = acc.astype(np.int64) << 1
    assert -(2**31) <= add2 < 2**31 and np.all(np.abs(u) < 2**31)
    t = ((np.int64(add2) << 32) + u * np.int64(mult) + (1 << 31)) >> 32  # SMMLAR
    t = t + (np.where(u < 0, -1, 0) if rule != 2 else 0)
    assert np.all(np.abs(t) < 2**31)
    v = t >> e
    return np.clip(v, -128, 127) if rule == 0 else lo + np.minimum(np.clip(v, 0, 255), hi - lo)


def _line_row(mult: int, add: int, bound: int, zp: int, lo: int, hi: int, bias: int = 0) -> np.ndarray:
    """rules._dw_line_consts's row (21 words, rlx_dw1_rq) of a group of 4 equal channels."""
    four = np.full(4, 1, np.int64)
    return rules._dw_line_consts(bias * four, mult * four, add * four, bound * four, zp, lo, hi)


def _line_rq_guard(add: int) -> bool:
    """Whether rules._dw_line_consts lets rlx_dw1_rq_line run a channel (k >= 0)."""
    return int(_line_row(1 << 30, add, 1, 0, -128, 127)[18]) >= 0


def _line_rq_fixed(acc: np.ndarray, row: np.ndarray) -> np.ndarray:
    """rlx_dw1_rq_line's arithmetic on a group of one shift k (row[18] > 0, lane 0): the accumulator
    scaled by f (row[19]'s low half), SMMLA (no rounding) with a = row[1], USAT with the shift k, the
    byte-wise minimum with act_max - act_min and act_min added. Asserts that nothing leaves int32."""
    k, f, mult, a = int(row[18]), int(row[19]) & 0xFFFF, int(row[0]), int(row[1])
    hm, lo = int(row[12]) & 0xFF, (int(row[13]) & 0xFF ^ 0x80) - 0x80
    u = acc.astype(np.int64) * f
    assert np.all(np.abs(u) < 2**31)
    t = ((np.int64(a) << 32) + u * np.int64(mult)) >> 32  # SMMLA
    assert np.all(np.abs(t) < 2**31)
    return lo + np.minimum(np.clip(t >> k, 0, 255), hm)


def test_depthwise_line_requantization_is_exact():
    """rlx_depthwise_conv_line_s8's requantization (_line_rq_model, the act_min folded into rq_add so that
    USAT, a byte-wise minimum and an add clamp 4 outputs) against the reference (MultiplyByQuantizedMultiplier,
    out_zp, the clamp) on every rule: accumulators at the bound, around the rounding ties of both roundings,
    0 and +-1; multipliers at both ends and 0 (a constant channel); shifts 1 to 21 (rules._dw_line_consts
    refuses the fold above: it is checked to refuse exactly e > 21 or |rq_add| >= 2**29); zero points and
    bounds at both ends. On the rule without the sign correction, the row's one shift k where it takes one
    (_line_rq_fixed: each of 8, 12 and 16, and the fold alone where the scaled accumulator's bound would
    leave int32). The asm itself runs in the kernel tests under QEMU."""
    from rlx_edge.ir import fixedpoint as fp
    from rlx_edge.targets.cortexm.rules import fast_requant

    rng = np.random.default_rng(61)
    checked = refused = 0
    shifts: set[int] = set()
    for mult in (1 << 30, (1 << 31) - 1, 1518500250, 1932735283, 0):
        for e in [1, 2, 3, 4, 7, 8, 12, 16, 20, 21, 22, 25, 31]:
            bound = (1 << 30) - 1 if e > 3 else 1 << 24
            base = [0, 1, -1, bound, -bound, bound - 1, 1 - bound]
            ks = rng.integers(-(bound * mult >> (30 + e)) - 1, (bound * mult >> (30 + e)) + 2, 150)
            ties = [int((int(k) << (30 + e)) // mult) + d for k in ks for d in (-1, 0, 1)] if mult else []
            xs = np.clip(np.array(base + ties + list(rng.integers(-bound, bound + 1, 300)), np.int64), -bound, bound)
            for zp in (-128, -3, 0, 5, 127):
                for lo, hi in {(-128, 127), (zp, 127), (zp, min(zp + 60, 127)), (max(zp - 2, -128), 100)}:
                    if lo > hi:
                        continue
                    mode, add, _ = fast_requant(np.array([mult]), np.array([-e]), np.array([bound]), zp, lo, hi)
                    if mode == 0:
                        continue
                    add = int(add[0])
                    rule = 0 if (lo, hi) == (-128, 127) else 1 if lo < zp else 2
                    assert _line_rq_guard(add) == (e <= 21 and abs(add) < 2**29)
                    if rule != 0 and not _line_rq_guard(add):
                        refused += 1
                        continue
                    want = np.clip(fp.multiply_by_quantized_multiplier(xs, mult, -e) + zp, lo, hi)
                    got = _line_rq_model(xs, mult, add, lo, hi, rule)
                    assert np.array_equal(got, want), (mult, e, zp, lo, hi)
                    checked += xs.size
                    for b in (bound, 1 << 17):  # the bound of the layer's accumulators: any, a 1-D window's
                        if rule != 2:
                            continue
                        row = _line_row(mult, add, b, zp, lo, hi)
                        shifts.add(int(row[18]))
                        if row[18] > 0:
                            xb = np.clip(xs, -b, b)
                            want = np.clip(fp.multiply_by_quantized_multiplier(xb, mult, -e) + zp, lo, hi)
                            assert np.array_equal(_line_rq_fixed(xb, row), want), (mult, e, zp, lo, hi, b)
                            checked += xb.size
    assert checked > 300_000 and refused > 0 and shifts >= {0, 8, 12, 16}, shifts
    checked = 0
    # the guard alone on odd multiples of 2**(e-1): 0, +-1, +-2, both sides of +-2**29, both ends of int32
    for e in range(1, 32):
        ks = {0, 1, 2, -1, -2, (1 << (31 - e)) - 1, -(1 << (31 - e))}
        if e <= 29:
            ks |= {(1 << (29 - e)) - 1, 1 << (29 - e), -(1 << (29 - e)), -(1 << (29 - e)) - 1}
        for add in [(2 * k + 1) << (e - 1) for k in ks]:
            if -(2**31) <= add < 2**31:
                assert _line_rq_guard(add) == (e <= 21 and abs(add) < 2**29), (e, add)
                checked += 1
    assert checked > 200


def test_depthwise_line_lanes_bit_exact(check, tmp_path):
    """rlx_depthwise_conv_line_s8's whole groups of depth multiplier 1 (rlx_dw1_line4: the lanes' loop in
    the MACs' asm, rlx_dw1_macs4; windows of 2 and 3 taps (np 2), 4 and 5 (np 3: 8 outputs an iteration), 6,
    7 and 9 (quads; 14 and 17 outputs: the two last ones alone, 11 a whole last quad)) on lines whose length
    is not a multiple of 8 or even (the last iteration past the line, into the scratch rules.py rounds up;
    rlx_dw1_rq_line's odd last pixel), last groups of 2 and 3
    channels and depth multiplier 2 (rlx_dw1_group_any), a batch of 2; every output rule (saturating, relu
    and relu6 without the sign correction, relu_n1_to_1 with it, on ties). On both host builds and under
    QEMU on M4."""
    rng = np.random.default_rng(67)
    g = Graph("dw_line_lanes")
    n1 = "relu_n1_to_1"
    # (h, w, c, multiplier, kh, kw, activation, batch)
    cases = [(13, 2, 8, 1, 5, 1, "relu6", 2), (2, 11, 6, 1, 1, 4, "none", 1), (1, 9, 4, 1, 1, 3, n1, 1),
             (10, 1, 12, 1, 2, 1, "relu", 1), (14, 1, 7, 1, 7, 1, "relu6", 1), (1, 17, 4, 1, 1, 9, "none", 1),
             (11, 3, 4, 1, 6, 1, "relu6", 1), (11, 1, 3, 2, 5, 1, "relu6", 1)]  # fmt: skip
    for k, (h, w, c, m, kh, kw, act, batch) in enumerate(cases):
        _dw_layer(g, rng, k, h, w, c, m=m, kh=kh, kw=kw, act=act, ties=act == n1, batch=batch)
    model_c = emit(g).files["model.c"]
    assert model_c.count("rlx_depthwise_conv_line_s8(") == len(cases)
    assert _output_rules(model_c) == {"sat", "relu", "clamp"}
    assert check(g, n_inputs=3) >= 3
    _bit_exact_on_m4(g, tmp_path, seed=13)


def test_depthwise_line_scratch_holds_the_last_iteration():
    """rules._dw_line_scratch against what rlx_dw1_macs4's asm writes on a stride-1 line: the 4 planes, then
    the accumulators of every output its iterations run, the last one whole: 8 outputs an iteration for
    windows of 2 to 5 taps (four steps of two), 4 for 6 to 9 (quads)."""
    for n in range(8, 41):
        for k in range(2, 10):
            f = {"k_h": k, "k_w": 1, "out_h": n, "out_w": 1, "stride_h": 1, "stride_w": 1, "dil_h": 1, "dil_w": 1}
            step = 8 if k <= 5 else 4
            planes = 8 * ((n - 1 + k + 3) & ~1)
            assert rules._dw_line_scratch(f) >= planes + 16 * step * -(-n // step), (n, k)


def test_depthwise_small_bit_exact(check, tmp_path):
    """rlx_depthwise_conv_small_s8 (balanced, rules._dw_small: 3x3 layers of few output pixels; 4 output
    channels of a pixel at once from tap pairs, the input read in place or from a copy with the zero point
    around it), on both host builds (the portable one runs the general kernel on at most 4 pixels, the
    ring on more; the emulated DSP one the kernel's C on the same table) and under QEMU on M4 (its
    widening, tap and output asm, the copy's fill and row copies). Multiplier 1 (first image; no padding,
    at most 4 pixels): the sweep's 6x6x128 s2, 18 channels (the last group ends at the last channel),
    72 channels (18 groups: two chunks of tables), dilation 2, stride 3, two images. Multiplier 2 (second
    image; at most 25 pixels): same padding past the image's end only (the sweep's 10x10x7 s2) and on
    every side, explicit pads with dilation 2, valid (in place), two images of 10 channels; odd input
    channel counts (7, 5: the last one's 2 outputs on their own run); a layer of 26 pixels keeps
    pair_gen. The three output rules:
    saturating, relu6 (a clamp at or above out_zp, without the sign correction) and relu_n1_to_1 (below
    it, on ties, with it)."""
    rng = np.random.default_rng(53)
    n1 = "relu_n1_to_1"
    # (h, w, c, multiplier, stride, dilation, padding, activation; "sat": none with out_zp -128), batch
    images = [[(6, 6, 128, 1, 2, 1, "valid", "relu6", 1), (5, 5, 18, 1, 2, 1, "valid", "none", 1),
               (5, 5, 72, 1, 1, 2, "valid", n1, 1), (7, 4, 20, 1, 3, 1, "valid", "sat", 2),
               (6, 7, 16, 1, 1, 1, "valid", "relu6", 1)],
              [(10, 10, 7, 2, 2, 1, "same", "relu6", 1), (4, 5, 4, 2, 1, 1, "same", n1, 1),
               (9, 9, 5, 2, 2, 2, (1, 0, 2, 1), "none", 1), (7, 6, 6, 2, 1, 1, "valid", "sat", 1),
               (3, 3, 10, 2, 2, 1, "same", "relu6", 2), (13, 2, 4, 2, 1, 1, "same", "none", 1)]]  # fmt: skip
    modes = set()
    for n, cases in enumerate(images):
        g = Graph(f"dw_small{n}")
        for k, (h, w, c, m, s, d, pad, act, batch) in enumerate(cases):
            sat = act == "sat"
            act, zp = ("none", -128) if sat else (act, None)
            _dw_layer(g, rng, k, h, w, c, m=m, s=s, d=d, pad=pad, act=act, out_zp=zp, ties=act == n1, batch=batch)
        model_c = emit(g).files["model.c"]
        # the first image's 6x7x16 (5x4 pixels) and the second's 13x2 (26 pixels) keep their kernels
        assert model_c.count("rlx_depthwise_conv_small_s8(") == len(cases) - 1
        modes |= _output_rules(model_c)
        assert check(g, n_inputs=5) >= 5
        _bit_exact_on_m4(g, tmp_path / g.name, seed=11)
    assert {"sat", "relu", "clamp"} <= modes


def test_depthwise_small_keeps_the_offset_add_inside_int32():
    """rules._dw_small takes a layer only where rq_add offset by (127 - act_max) 2**shift (its SSAT clamps
    at act_max) keeps SMMLAR's sum inside int32: a right shift of 24 with act_max -1 (an offset of 2**31)
    leaves it, 23 and act_max 127 (no offset) do not."""
    f = {"k_h": 3, "k_w": 3, "out_h": 2, "out_w": 2, "ch_mult": 1, "out_c": 16, "act_max": -1}
    mult, bound = np.full(16, 2**30, np.int64), np.full(16, 2**20, np.int64)
    add = np.full(16, 2**23, np.int64)  # rq_add of a right shift of 24, out_zp 0
    assert not rules._dw_small(f, (0, 0, 0, 0), (1, mult, add, bound))
    assert rules._dw_small({**f, "act_max": 127}, (0, 0, 0, 0), (1, mult, add, bound))
    assert rules._dw_small(f, (0, 0, 0, 0), (1, mult, add // 2, bound))


def _dw_line_shifted(g: Graph, rng, k: int, h: int, w: int, c: int, kh: int, kw: int, es: list[int], act: str,
                     m: int = 1, bias: int = 3000, batch: int = 1) -> None:  # fmt: skip
    """A 1-D depthwise layer k of g whose output channel j shifts right by es[j] (input and output scale
    0.05, weight scale 0.75 2**-e: the multiplier 0.75 2**-e), biases below bias."""
    n = c * m
    x = g.input(f"x{k}", (batch, h, w, c), "i8", quant=q(0.05, int(rng.integers(-60, 60))))
    scales = np.array([0.75 * 2.0**-e for e in es], np.float32)
    wt = g.param(f"w{k}", rng.integers(-127, 128, (1, kh, kw, n)).astype(np.int8),
                 quant=QuantParams(scales, np.zeros(n, np.int64), axis=3))  # fmt: skip
    b = g.param(f"b{k}", rng.integers(-bias, bias, n).astype(np.int32))
    y = g.depthwise_conv2d(x, wt, b, name=f"dw{k}", out_quant=q(0.05, int(rng.integers(-60, 20))),
                           padding="same", activation=act, depth_multiplier=m)  # fmt: skip
    g.output(y)


def test_depthwise_line_shifts_bit_exact(check, tmp_path):
    """rlx_depthwise_conv_line_s8's groups of one right shift (rules._dw_line_consts: k 8, 12 and 16, the
    weights widened times f in rlx_dw1_group4, rlx_dw1_rq_line's SMMLA and USAT with the shift) beside the
    groups that keep their channels' shifts: spreads of shifts no k covers (4 and 9 to 11: k 12 would scale
    a weight by 2**9, past int16), a bias whose scaled accumulator would leave int32 (k 0), a shift above
    21 and a last group of 2 channels (k -1). Lines of 8 to 14 and 30 outputs (the quads, the last pair,
    the odd last pixel; every entry of rlx_dw1_macs4's first iteration), Kx1 and 1xK, two lines a group,
    a batch of 2 and depth multiplier 2; 1,680 outputs an input of k 8 and shifts 5 to 7, mostly inside
    the clamp (an SMMLAR for SMMLA shows about once in 512). On both host builds and under QEMU on M4."""
    rng = np.random.default_rng(71)
    g = Graph("dw_line_shifts")
    # (h, w, c, kh, kw, shifts per output channel, activation[, multiplier, bias, batch])
    cases = [(30, 2, 32, 5, 1, [7, 6, 7, 7, 6, 7, 5, 7] * 3 + [3, 3, 1, 4, 13, 13, 12, 14], "relu"),
             (9, 2, 12, 5, 1, [9, 10, 10, 8, 2, 9, 5, 6, 4, 9, 10, 11], "relu6"),
             (2, 10, 4, 1, 3, [10, 11, 9, 9], "relu"),
             (11, 1, 6, 4, 1, [2, 4, 5, 6, 7, 7], "relu6"),
             (14, 1, 4, 2, 1, [1, 1, 1, 1], "relu", 1, 1 << 24),
             (13, 1, 4, 5, 1, [6, 6, 23, 6], "relu", 1, 3000, 2),
             (8, 1, 8, 3, 1, [14, 15, 13, 12, 1, 2, 3, 1], "relu6"),
             (10, 1, 2, 5, 1, [7, 8, 9, 10], "relu6", 2)]  # fmt: skip
    for k, (h, w, c, kh, kw, es, act, *more) in enumerate(cases):
        m, bias, batch = (more + [1, 3000, 1][len(more) :])[:3]
        _dw_line_shifted(g, rng, k, h, w, c, kh, kw, es, act, m=m, bias=bias, batch=batch)
    em = emit(g)
    assert em.files["model.c"].count("rlx_depthwise_conv_line_s8(") == len(cases)
    prog = em.program
    shifts = set()
    for node in prog.graph.nodes:
        layer = rules.layer_for(prog.graph, node, prog.quant.get(node.name))
        shifts |= set(layer.consts["dwq"].reshape(-1, 21)[:, 18].tolist())
    assert shifts == {-1, 0, 8, 12, 16}, shifts  # every kind of group runs
    assert check(g, n_inputs=3) >= 3
    _bit_exact_on_m4(g, tmp_path, seed=17)
