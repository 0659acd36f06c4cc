"""rlx_convolve_s8 (im2col) and rlx_convolve_1x1_s8 against the integer reference."""

from __future__ import annotations

import re

import numpy as np
import pytest

from rlx_edge.ir.graph import Graph
from rlx_edge.ir.types import QuantParams
from rlx_edge.targets.cortexm import emit
from rlx_edge.targets.reference.compare import make_inputs

from ..conftest import check_qemu, rand_q, wq


def _conv_case(g: Graph, rng: np.random.Generator, k: int, *, one_by_one: bool) -> None:
    c = int(rng.choice([1, 3, 4, 8, 5, 16]))
    o = int(rng.choice([1, 3, 4, 6, 8, 13]))
    kh, kw = (1, 1) if one_by_one else (int(rng.integers(1, 5)), int(rng.integers(1, 4)))
    n = int(rng.choice([1, 1, 2]))
    h, w = int(rng.integers(kh + 1, 9)), int(rng.integers(kw + 1, 8))
    attrs = {
        "strides": tuple(int(s) for s in rng.integers(1, 3, 2)),
        "dilations": (1, 1) if one_by_one else tuple(int(d) for d in rng.integers(1, 3, 2)),
        "padding": "valid" if one_by_one else str(rng.choice(["same", "valid", "explicit"])),
        "activation": str(rng.choice(["none", "relu", "relu6"])),
    }
    if attrs["padding"] == "explicit":
        attrs["pads"] = tuple(int(p) for p in rng.integers(0, 3, 4))
    x = g.input(f"x{k}", (n, h, w, c), "i8", quant=rand_q(rng, 0.01, 0.1))
    wt = g.param(f"w{k}", rng.integers(-127, 128, (o, kh, kw, c)).astype(np.int8), quant=wq(rng, o, 0))
    b = g.param(f"b{k}", rng.integers(-5000, 5000, o).astype(np.int32)) if rng.random() < 0.8 else None
    y = g.conv2d(x, wt, b, name=f"conv{k}", out_quant=rand_q(rng, 0.05, 0.5), **attrs)
    g.output(y)


@pytest.mark.parametrize("one_by_one", [False, True])
def test_convolve_random(check, one_by_one):
    rng = np.random.default_rng(11 + one_by_one)
    g = Graph("conv")
    for k in range(8):
        _conv_case(g, rng, k, one_by_one=one_by_one)
    kernels = {line.split("(")[0].strip() for line in emit(g).files["model.c"].splitlines() if "rlx_convolve" in line}
    im2col = {"rlx_convolve_s8", "rlx_convolve_small_s8"}  # the small fields' entry, and the others'
    # 1x1: the GEMM, or the few-channel kernels (k4, kw) that take K <= 4 and K = 8, 16
    assert any(k.startswith("rlx_convolve_1x1") for k in kernels) if one_by_one else (im2col <= kernels)
    assert check(g, n_inputs=5) == 8


def test_convolve_small_field_clipped_columns(check):
    """Receptive fields of at most 256 bytes on channel counts not a multiple of 4 (gathered per
    kernel row: zero point, the columns inside, zero point; a pair of pixels widened together),
    clipped on every side, and one larger field (the generic gather)."""
    rng = np.random.default_rng(7)
    g = Graph("conv_small")
    # (input h, w, c), kernel (h, w), strides, dilations, pads (top, bottom, left, right)
    cases = [
        ((12, 6, 1), (10, 4), (2, 2), (1, 1), (4, 5, 1, 2)),  # KWS's first layer, scaled down
        ((7, 7, 3), (3, 3), (2, 2), (1, 1), (2, 1, 2, 1)),
        ((6, 5, 5), (3, 3), (1, 1), (2, 1), (2, 2, 1, 1)),
        ((5, 4, 2), (2, 3), (1, 2), (1, 1), (0, 1, 2, 2)),
        ((9, 8, 5), (5, 5), (2, 2), (1, 1), (2, 2, 2, 2)),  # 125 bytes: still gathered on the stack
        ((7, 9, 6), (3, 3), (1, 2), (1, 2), (1, 1, 2, 2)),  # dilated along w: tap by tap
        ((6, 8, 2), (3, 3), (1, 1), (1, 1), (0, 0, 0, 0)),  # runs of 6 bytes, 2 of the last quad's past the field
        ((9, 11, 3), (3, 3), (2, 2), (1, 1), (3, 0, 3, 1)),  # odd out_w (pairs across rows), inside from ox 2
        ((5, 5, 33), (3, 3), (1, 1), (1, 1), (1, 1, 1, 1)),  # 297 bytes: the generic gather
    ]
    for k, ((h, w, c), (kh, kw), strides, dil, pads) in enumerate(cases):
        o = 5 + k
        x = g.input(f"x{k}", (1, h, w, c), "i8", quant=rand_q(rng, 0.01, 0.1))
        wt = g.param(f"w{k}", rng.integers(-127, 128, (o, kh, kw, c)).astype(np.int8), quant=wq(rng, o, 0))
        b = g.param(f"b{k}", rng.integers(-5000, 5000, o).astype(np.int32))
        y = g.conv2d(
            x,
            wt,
            b,
            name=f"conv{k}",
            out_quant=rand_q(rng, 0.05, 0.5),
            strides=strides,
            dilations=dil,
            padding="explicit",
            pads=pads,
            activation="none",
        )
        g.output(y)
    assert check(g, n_inputs=4) == 7  # 4 seeded inputs plus all-min, all-max, all-zero-point


def test_convolve_pairs_of_whole_fields(check):
    """Kernel rows of whole quads (k_w x in_c a multiple of 4) filling the reduction: pairs of
    pixels whose fields lie inside the image are widened and summed in one pass, kernel row by
    kernel row (dilated rows included); pairs with a padded tap, and every pair of a kernel
    dilated along w, go tap by tap, each tap of both pixels in one pass where it is inside the
    image for both (channel counts of whole quads)."""
    rng = np.random.default_rng(23)
    g = Graph("conv_pairs")
    # (input h, w, c), kernel (h, w), strides, dilations, padding
    cases = [
        ((7, 6, 8), (3, 3), (1, 1), (1, 1), "valid"),
        ((8, 7, 4), (3, 3), (1, 1), (1, 1), "same"),
        ((9, 5, 1), (4, 4), (2, 1), (1, 1), "same"),
        ((9, 6, 8), (2, 3), (1, 2), (2, 1), "valid"),
        ((8, 9, 4), (3, 3), (1, 1), (1, 2), "same"),
    ]
    for k, ((h, w, c), (kh, kw), strides, dil, pad) in enumerate(cases):
        o = 4 + 2 * k
        x = g.input(f"x{k}", (1, h, w, c), "i8", quant=rand_q(rng, 0.01, 0.1))
        wt = g.param(f"w{k}", rng.integers(-127, 128, (o, kh, kw, c)).astype(np.int8), quant=wq(rng, o, 0))
        b = g.param(f"b{k}", rng.integers(-5000, 5000, o).astype(np.int32))
        y = g.conv2d(x, wt, b, name=f"conv{k}", out_quant=rand_q(rng, 0.05, 0.5), strides=strides,
                     dilations=dil, padding=pad, activation="none")  # fmt: skip
        g.output(y)
    assert check(g, n_inputs=4) == 7


def test_convolve_gemm_epilogues_on_m4(tmp_path):
    """The M4's GEMM instances under QEMU (the host builds run the C epilogue, not the asm): whole
    blocks with the int8-range requantization (rq_mode 2, the all-asm block loop) on even and odd
    quad counts, the clamped one (a relu above -128), a partial last block (out_c % 4 != 0), an
    odd pixel count (the lone last pixel) and pairs of whole fields (the 3x3), on outputs mostly
    inside int8; every conv's rq_mode is checked, so a case that stops reaching its instance
    fails. The partial instance stores its last block's 1 to 3 rows a byte at a time: 6, 7 and 3
    rows (no whole block) cover every count."""
    rng = np.random.default_rng(17)
    g = Graph("conv_chain")
    scale = 0.05
    h = g.input("x", (1, 9, 7, 8), "i8", quant=QuantParams(np.float32(scale), 3))
    # (out_c, kernel, activation, rq_mode): relu6 clamping at both ends inside int8 (mode 1, its
    # bounds -20 and 16 checked below) over 2 quads, 1x1 over 4, 1x1 over 4, 3x3 over 27 (odd), relu
    # clamping at a zero point above -128 (mode 1), partial blocks of 6, 7 and 3 rows (mode 2 run
    # by the partial instance as mode 1)
    layers = [
        (16, 1, "relu6", 1),
        (16, 1, "none", 2),
        (12, 1, "relu", 2),
        (8, 3, "none", 2),
        (8, 1, "relu", 1),
        (6, 1, "none", 2),
        (7, 1, "none", 2),
        (3, 1, "relu", 1),
    ]
    c = 8
    for k, (o, kk, act, mode) in enumerate(layers):
        w = g.param(f"w{k}", rng.integers(-127, 128, (o, kk, kk, c)).astype(np.int8), quant=wq(rng, o, 0))
        b = g.param(f"b{k}", rng.integers(-3000, 3000, o).astype(np.int32))
        zp = {2: -128, 1: -60}[mode] if act == "relu" else -20 if act == "relu6" else int(rng.integers(-20, 20))
        # outputs mostly inside int8 (an accumulator's spread is about sqrt(K) 74 x 73), so that the
        # rounding, not the saturation, decides them
        scale = scale * 0.011 * np.sqrt(kk * kk * c) * 5400 / 50
        h = g.conv2d(h, w, b, name=f"conv{k}", padding="same", activation=act,
                     out_quant=QuantParams(np.float32(scale), zp))  # fmt: skip
        c = o
    g.output(h)
    model_c = emit(g).files["model.c"]
    modes = [int(m) for m in re.findall(r"\.rq_mode = (-?\d+)", model_c)]
    assert modes == [m for *_, m in layers], modes
    bounds = re.findall(r"\.act_min = (-?\d+),\s*\.act_max = (-?\d+)", model_c)
    assert bounds[0] == ("-20", "16"), bounds
    check_qemu(g, tmp_path, n_inputs=6, seed=4, board="qemu-m4")


@pytest.mark.parametrize(
    ("activation", "zp", "out_c", "mode"),
    [("none", 5, 8, 2), ("relu", -128, 8, 2), ("relu", -20, 6, 1), ("none", -3, 6, 2)],
)
def test_convolve_requantization_ties_on_m4(check, tmp_path, activation, zp, out_c, mode):
    """The M4 GEMM's requantization where its rounding ties: power-of-two scales (a ratio of
    2**-5) put about one accumulator in 32 on a tie, negative ones included. The sign correction
    decides those; the instances skip it where the lower bound is the zero point (ReLU here, whose
    negative accumulators all land on that bound) and keep it otherwise ("none"). Whole blocks and
    a partial one (6 rows), on QEMU and on both host builds."""
    rng = np.random.default_rng(31)
    g = Graph("conv_ties")
    x = g.input("x", (1, 9, 7, 8), "i8", quant=QuantParams(np.float32(2.0**-4), 0))
    # weights in -3..3 at scale 2**-6 keep |acc| / 32 inside int8
    wv = rng.integers(-3, 4, (out_c, 1, 1, 8)).astype(np.int8)
    wq_ = QuantParams(np.full(out_c, 2.0**-6, np.float32), np.zeros(out_c, np.int64), axis=0)
    bv = rng.integers(-40, 40, out_c).astype(np.int32)
    w, b = g.param("w", wv, quant=wq_), g.param("b", bv)
    g.output(g.conv2d(x, w, b, name="conv", padding="valid", activation=activation,
                      out_quant=QuantParams(np.float32(2.0**-5), zp)))  # fmt: skip
    model_c = emit(g).files["model.c"]
    assert [int(m) for m in re.findall(r"\.rq_mode = (-?\d+)", model_c)] == [mode]
    check_qemu(g, tmp_path, n_inputs=4, seed=3, board="qemu-m4")
    assert check(g, n_inputs=4, seed=3) == 7  # 4 seeded inputs plus all-min, all-max, all-zero-point
    # the ties happen: negative accumulators exactly halfway between two outputs
    xs = np.stack([s["x"] for s in make_inputs(g, 4, seed=3)]).astype(np.int64)
    acc = xs @ wv.reshape(out_c, 8).T.astype(np.int64) + bv
    assert int(((acc < 0) & (acc % 32 == 16)).sum()) >= 20


def test_convolve_reference_requantization(check):
    """rq_mode 0 (the reference formula, where the fast form is not proven: here a multiplier
    above 1, a left shift) through every GEMM path: pairs of pixels with a partial block, the
    lone last pixel, and fully connected rows."""
    rng = np.random.default_rng(29)
    g = Graph("conv_ref_rq")
    x = g.input("x", (1, 5, 3, 6), "i8", quant=QuantParams(np.float32(0.1), 5))
    # weights in -1..1 keep the accumulators small (a spread of about 150)
    w = g.param("w", rng.integers(-1, 2, (7, 1, 1, 6)).astype(np.int8), quant=wq(rng, 7, 0))
    b = g.param("b", rng.integers(-30, 30, 7).astype(np.int32))
    # in x w / out scale from 0.2 to 2.2: some channels' multipliers shift left; most outputs
    # land inside int8
    y = g.conv2d(x, w, b, name="conv", padding="valid", activation="none",
                 out_quant=QuantParams(np.float32(0.0009), -3))  # fmt: skip
    g.output(y)
    f = g.input("f", (2, 11), "i8", quant=QuantParams(np.float32(0.1), -2))
    fw = g.param("fw", rng.integers(-1, 2, (5, 11)).astype(np.int8), quant=wq(rng, 5, 0))
    g.output(g.fully_connected(f, fw, None, name="fc", out_quant=QuantParams(np.float32(0.0009), 4)))
    model_c = emit(g).files["model.c"]
    assert [int(m) for m in re.findall(r"\.rq_mode = (-?\d+)", model_c)] == [0, 0]
    assert check(g, n_inputs=6) == 9


def _run_on_m4(g: Graph, tmp_path, n_inputs: int, seed: int, opt: str = "-O2") -> int:
    """Every output of ``g`` (up to 8 inputs and outputs) as M4 firmware under QEMU against the reference
    on ``n_inputs`` seeded inputs and the three edge inputs; returns the inputs compared."""
    from rlx_edge.hil.qemu import run_qemu
    from rlx_edge.targets.cortexm import build_model_firmware
    from rlx_edge.targets.cortexm.firmware import IoLayout
    from rlx_edge.targets.reference.interpreter import run

    elf, _ = build_model_firmware(g, "qemu-m4", tmp_path, opt=opt)
    layout = IoLayout.of(g)
    samples = make_inputs(g, n_inputs, seed=seed)
    got = run_qemu(elf, "qemu-m4", [layout.pack(s) for s in samples], output_dtype=np.uint8)
    for k, (raw, sample) in enumerate(zip(got, samples, strict=True)):
        outputs = layout.unpack(raw.tobytes())
        for name, want in run(g, sample).items():
            assert np.array_equal(outputs[name], want), f"{opt}: input {k}, output {name}"
    return len(samples)


def test_convolve_1x1_few_channels(check, tmp_path):
    """rlx_convolve_1x1_k4_*: 1x1 on 1 to 4 input channels, a pixel's inputs one word (the word that
    ends at its last byte; the tensor's first pixel from a copy where K < 4), two pixels through an
    unrolled run of up to 8 channels (more: several passes), a last odd pixel alone. The relu
    instance (lower bound the zero point, USAT of the accumulator), the clamp one (relu6: the upper
    bound below 127 through the saturation, rq_add shifted) and the int8-range one (the sign
    correction, its ties decided here: power-of-two scales put about one accumulator in 32 on a tie),
    dense and strided, batches; other bounds stay on the GEMM. On QEMU (the asm) and both host
    builds, and at --optimize size (the im2col kernel in the same plan)."""
    rng = np.random.default_rng(41)
    g = Graph("conv_k4")
    # (input n, h, w, c), out_c, strides, activation, output zero point, kernel
    relu, clamp, sign = "rlx_convolve_1x1_k4_relu_s8", "rlx_convolve_1x1_k4_clamp_s8", "rlx_convolve_1x1_k4_s8"
    gemm = "rlx_convolve_1x1_s8"
    cases = [
        # odd pixel count, the first pixel alone; shifts 4 to 11: relu12 (the relu instance's, 11 channels, below)
        ((1, 7, 7, 3), 5, (1, 1), "relu", 9, "rlx_convolve_1x1_k4_relu12_s8"),
        ((2, 3, 5, 1), 11, (1, 1), "relu", -128, relu),  # batches in one run; 11 channels: 2 passes
        ((1, 6, 7, 2), 3, (2, 1), "none", 7, sign),  # a run an output row, odd rows (a pixel alone each)
        ((2, 5, 4, 4), 17, (2, 2), "none", -50, sign),  # whole words (no copy); 3 passes, strided batches
        ((1, 10, 10, 3), 8, (1, 1), "none", "ties", sign),  # the sign correction's ties
        ((2, 5, 3, 2), 10, (1, 2), "relu6", -20, clamp),  # upper bound 127 - 20 at the scale below; 2 passes
        ((1, 4, 4, 3), 6, (1, 1), "relu_n1_to_1", 3, gemm),  # a lower bound below the zero point
    ]
    for k, ((n, h, w, c), o, strides, act, zp, _) in enumerate(cases):
        if zp == "ties":
            xq, wv = QuantParams(np.float32(2.0**-4), 0), rng.integers(-3, 4, (o, 1, 1, c)).astype(np.int8)
            wqk = QuantParams(np.full(o, 2.0**-6, np.float32), np.zeros(o, np.int64), axis=0)
            yq, bv = QuantParams(np.float32(2.0**-5), -3), rng.integers(-40, 40, o).astype(np.int32)
        else:
            xq, wv, wqk = rand_q(rng, 0.01, 0.1), rng.integers(-127, 128, (o, 1, 1, c)).astype(np.int8), wq(rng, o, 0)
            # relu6 at 0.05: 6 / 0.05 = 120 above the zero point, inside int8
            scale = 0.05 if act in ("relu6", "relu_n1_to_1") else rng.uniform(0.05, 0.5)
            yq, bv = QuantParams(np.float32(scale), zp), rng.integers(-5000, 5000, o).astype(np.int32)
        x = g.input(f"x{k}", (n, h, w, c), "i8", quant=xq)
        y = g.conv2d(x, g.param(f"w{k}", wv, quant=wqk), g.param(f"b{k}", bv), name=f"conv{k}", strides=strides,
                     padding="valid", activation=act, out_quant=yq)  # fmt: skip
        g.output(y)
    model_c = emit(g).files["model.c"]
    calls = [line.split("(")[0].strip() for line in model_c.splitlines() if "rlx_convolve" in line and "(&" in line]
    assert calls == [case[-1] for case in cases], calls
    assert re.findall(r"\.act_min = (-?\d+), \.act_max = (-?\d+)", model_c)[5] == ("-20", "100")
    assert _run_on_m4(g, tmp_path, n_inputs=4, seed=5) == 7
    assert check(g, n_inputs=4, seed=5) == 7
    # size: the im2col kernel for every conv, in the same plan (the scratch of the widened channels)
    assert "rlx_convolve_1x1_k4" not in emit(g, "size").files["model.c"]
    assert check(g, n_inputs=1, seed=5, optimize="size") == 4
    # the ties happen: negative accumulators exactly halfway between two outputs
    ties = [s["x4"].reshape(-1, 3).astype(np.int64) for s in make_inputs(g, 4, seed=5)]
    wv4, bv4 = g.params["w4"].reshape(8, 3).astype(np.int64), g.params["b4"].astype(np.int64)
    acc = np.concatenate([t @ wv4.T + bv4 for t in ties])
    assert int(((acc < 0) & (acc % 32 == 16)).sum()) >= 20


def test_convolve_3_rows_of_9_bytes_read_in_place(check, tmp_path):
    """Fields of 3 rows of 9 bytes (3x3 on 3 channels, the usual first layer; 3x9 on 1 channel) inside
    the image: each pair of a run along an output row reads its 7 quads straight from the image, the
    quads across two kernel rows merged from two loads and the last one's tail 0; strides 1 and 2,
    dilation along h, output channels not a multiple of 4, padded borders around the runs, and a 4x3
    kernel on 3 channels (rows of 9 bytes, but 4 of them: the gathered runs). On both host builds
    (the C) and on QEMU (the M4's asm at -O2; test_firmware_opt_levels runs it at -Os, -O1, -Og)."""
    rng = np.random.default_rng(41)
    g = Graph("conv_9x3")
    # (input h, w, c), kernel (h, w), strides, dilations, padding
    cases = [
        ((6, 12, 3), (3, 3), (1, 1), (1, 1), "same"),
        ((11, 13, 3), (3, 3), (2, 2), (1, 1), "same"),
        ((9, 10, 3), (3, 3), (1, 2), (2, 1), "valid"),
        ((5, 14, 1), (3, 9), (1, 1), (1, 1), "valid"),
        ((7, 9, 3), (4, 3), (1, 1), (1, 1), "valid"),
    ]
    for k, ((h, w, c), (kh, kw), strides, dil, pad) in enumerate(cases):
        o = 3 + 2 * k
        x = g.input(f"x{k}", (1, h, w, c), "i8", quant=rand_q(rng, 0.01, 0.1))
        wt = g.param(f"w{k}", rng.integers(-127, 128, (o, kh, kw, c)).astype(np.int8), quant=wq(rng, o, 0))
        b = g.param(f"b{k}", rng.integers(-5000, 5000, o).astype(np.int32))
        y = g.conv2d(x, wt, b, name=f"conv{k}", out_quant=rand_q(rng, 0.05, 0.5), strides=strides,
                     dilations=dil, padding=pad, activation="none")  # fmt: skip
        g.output(y)
    assert "rlx_convolve_small_s8(" in emit(g).files["model.c"]
    assert check(g, n_inputs=4) == 7  # 4 seeded inputs plus all-min, all-max, all-zero-point
    assert _run_on_m4(g, tmp_path, n_inputs=3, seed=2) == 6


def test_convolve_1x1_k8_k16(check, tmp_path):
    """rlx_convolve_1x1_kw_*: 1x1 on 8 or 16 input channels, one pixel at a time through groups of up to
    8 channels widened into scratch, chained 2 channels of code at a time (an odd group entered one
    channel in); dense and strided, batches. The relu instance (the lower bound the zero point, the
    upper one 127: ReLU, or the int8 range at zero point -128), the clamp one (relu6) and the int8-range
    one (the sign correction, its ties decided here), as rlx_convolve_1x1_k4_*'s; other K and bounds stay
    on the GEMM. On QEMU (the asm, at -O2 and -Og), both host builds, and at --optimize size."""
    rng = np.random.default_rng(43)
    g = Graph("conv_kw")
    relu, clamp, sign = "rlx_convolve_1x1_kw_relu_s8", "rlx_convolve_1x1_kw_clamp_s8", "rlx_convolve_1x1_kw_s8"
    gemm = "rlx_convolve_1x1_s8"
    # (input n, h, w, c), out_c, strides, activation, output zero point, kernel
    cases = [
        ((1, 6, 5, 8), 16, (1, 1), "relu", -128, relu),  # VWW's shape, scaled down: 2 whole groups
        ((2, 3, 5, 8), 11, (1, 1), "relu", 9, relu),  # batches in one run; groups of 8 and 3 (odd)
        ((1, 5, 7, 16), 13, (2, 2), "relu", -128, relu),  # a run an output row; groups of 8 and 5
        ((2, 4, 3, 16), 1, (1, 2), "relu", 0, relu),  # one channel, strided batches
        ((1, 4, 4, 8), 8, (1, 1), "none", -128, relu),  # the int8 range at zero point -128
        ((2, 4, 3, 16), 11, (2, 1), "relu6", -20, clamp),  # upper bound 127 - 20 at the scale below
        ((1, 3, 3, 12), 5, (1, 1), "relu", -128, gemm),  # K = 12
        ((1, 10, 10, 8), 9, (1, 1), "none", "ties", sign),  # the sign correction's ties
    ]
    for k, ((n, h, w, c), o, strides, act, zp, _) in enumerate(cases):
        if zp == "ties":
            xq, wv = QuantParams(np.float32(2.0**-4), 0), rng.integers(-3, 4, (o, 1, 1, c)).astype(np.int8)
            wqk = QuantParams(np.full(o, 2.0**-6, np.float32), np.zeros(o, np.int64), axis=0)
            yq, bv = QuantParams(np.float32(2.0**-5), -3), rng.integers(-40, 40, o).astype(np.int32)
        else:
            xq, wv, wqk = rand_q(rng, 0.01, 0.1), rng.integers(-127, 128, (o, 1, 1, c)).astype(np.int8), wq(rng, o, 0)
            # relu6 at 0.05: 6 / 0.05 = 120 above the zero point, inside int8
            yq = QuantParams(np.float32(0.05 if act == "relu6" else rng.uniform(0.05, 0.5)), zp)
            bv = rng.integers(-5000, 5000, o).astype(np.int32)
        x = g.input(f"x{k}", (n, h, w, c), "i8", quant=xq)
        y = g.conv2d(x, g.param(f"w{k}", wv, quant=wqk), g.param(f"b{k}", bv), name=f"conv{k}",
                     strides=strides, padding="valid", activation=act, out_quant=yq)  # fmt: skip
        g.output(y)
    # on case 4's output (in place of it among the outputs: at most 8), a lower bound below the zero
    # point: the GEMM
    y4 = g.outputs.pop(4)
    g.output(g.conv2d(y4, g.param("wl", rng.integers(-127, 128, (6, 1, 1, 8)).astype(np.int8), quant=wq(rng, 6, 0)),
                      None, name="convl", padding="valid", activation="relu_n1_to_1",
                      out_quant=QuantParams(np.float32(0.05), 3)))  # fmt: skip
    cases.append(((1, 4, 4, 8), 6, (1, 1), "relu_n1_to_1", 3, gemm))
    # on case 0's output (in place of it among the outputs: at most 8), constant channels: zero weights
    # and biases of +-2**30 (their bound keeps the layer off the fast requantization until _requant folds
    # their values, +-1000, into rq_add with multiplier 0), 127 and -128 by the int8 saturation
    y0 = g.outputs.pop(0)
    wv = rng.integers(-127, 128, (5, 1, 1, 16)).astype(np.int8)
    wv[:2] = 0
    big = 1000 / 2**30 * 0.2 / float(np.asarray(g.types[y0].quant.scale).reshape(-1)[0])  # 2**30 to 1000
    wqc = QuantParams(np.array([big, big, 0.004, 0.005, 0.006], np.float32), np.zeros(5, np.int64), axis=0)
    bv = np.array([2**30, -(2**30), 100, -100, 7], np.int32)
    g.output(g.conv2d(y0, g.param("wc", wv, quant=wqc), g.param("bc", bv), name="convc", padding="valid",
                      activation="relu", out_quant=QuantParams(np.float32(0.2), -128)))  # fmt: skip
    cases.append(((1, 6, 5, 16), 5, (1, 1), "relu", -128, relu))
    model_c = emit(g).files["model.c"]
    calls = [line.split("(")[0].strip() for line in model_c.splitlines() if "rlx_convolve" in line and "(&" in line]
    assert sorted(calls) == sorted(case[-1] for case in cases), calls  # the schedule reorders the layers
    from rlx_edge.targets.reference.interpreter import run

    yc = run(g, make_inputs(g, 1, seed=6)[0])["convc"]
    assert (yc[..., 0] == 127).all() and (yc[..., 1] == -128).all()
    assert re.findall(r"\.act_min = (-?\d+), \.act_max = (-?\d+)", model_c).count(("-20", "100")) == 1
    assert _run_on_m4(g, tmp_path / "o2", n_inputs=3, seed=6) == 6
    assert _run_on_m4(g, tmp_path / "og", n_inputs=1, seed=6, opt="-Og") == 4
    assert check(g, n_inputs=3, seed=6) == 6
    assert "rlx_convolve_1x1_kw" not in emit(g, "size").files["model.c"]
    assert check(g, n_inputs=1, seed=6, optimize="size") == 4
    # the ties happen: negative accumulators exactly halfway between two outputs
    ties = [s["x7"].reshape(-1, 8).astype(np.int64) for s in make_inputs(g, 3, seed=6)]
    wv7, bv7 = g.params["w7"].reshape(9, 8).astype(np.int64), g.params["b7"].astype(np.int64)
    acc = np.concatenate([t @ wv7.T + bv7 for t in ties])
    assert int(((acc < 0) & (acc % 32 == 16)).sum()) >= 20


def test_k4_relu12_requantization_is_exact():
    """rules._k4_relu12: rlx_convolve_1x1_k4_relu12_s8's arithmetic (a numpy model of its asm: the bias
    and weights times 2**m, USAT of the doubled accumulator at 0, SMMLA with rq_add 2**m (add + 1/2),
    SSAT of the sum shifted right by 12) against the reference requantization clamped to [zp, 127], on
    every accumulator the channel's weights and bias can reach; shifts 4 and 11 (m 8 and 1) and
    between, multipliers at both ends; shifts 3 and 12, and a bias too large for 2**m, refused."""
    from rlx_edge.ir import fixedpoint as fp
    from rlx_edge.targets.cortexm.rules import _k4_relu12, fast_requant

    checked = 0
    for mult in (1 << 30, (1 << 31) - 1, 1518500250):
        for e in (4, 5, 8, 11):
            for zp, bias in ((-128, 3000), (9, -700), (120, 0)):
                w2 = np.array([[127, -128, 90]])
                reach = abs(bias) + 128 * 345
                _, add, _ = fast_requant(np.array([mult]), np.array([-e]), np.array([reach]), zp, zp, 127)
                got = _k4_relu12(w2, np.array([bias]), np.array([mult]), add.astype(np.int64), np.array([e]))
                assert got is not None, (mult, e, zp)
                add2, k = int(got[0][0]), int(got[1][0])
                assert k == 1 << (12 - e)
                acc = np.arange(-reach, reach + 1, dtype=np.int64)
                u = np.clip(2 * k * acc, 0, None)
                assert np.all(u < 2**31)
                t = (u * mult + (add2 << 32)) >> 32  # SMMLA
                assert np.all(np.abs(t) < 2**31)
                model = np.clip(t >> 12, -128, 127)
                want = np.clip(fp.multiply_by_quantized_multiplier(acc, mult, -e) + zp, zp, 127)
                assert np.array_equal(model, want), (mult, e, zp)
                checked += acc.size
    assert checked > 3_000_000
    one = (np.array([[1, 2, 3]]), np.array([0]), np.array([1 << 30]), np.array([1 << 8]))
    assert _k4_relu12(*one, np.array([3])) is None  # m = 9: a weight times 2**9 leaves int16
    assert _k4_relu12(*one, np.array([12])) is None  # m = 0: no half to add
    big = (np.array([[1, 2, 3]]), np.array([1 << 22]), np.array([1 << 30]), np.array([1 << 8]))
    assert _k4_relu12(*big, np.array([4])) is None  # 2 acc 2**8 reaches 2**31
    assert _k4_relu12(np.ones((9, 3), np.int64), *(np.zeros(9, np.int64) for _ in range(3)), np.full(9, 6)) is None


def test_convolve_1x1_k4_relu12(check, tmp_path):
    """rlx_convolve_1x1_k4_relu12_s8: the relu instance where every channel's shift is 4 to 11 and
    there are at most 8 channels: the bias and weights scaled by 2**(12 - e) when widened, one
    shift of 12 for all. A run in one call: the tensor's first pixel alone first (K < 4, from a copy;
    under 4 bytes of tensor byte by byte), the pairs, an odd pixel alone last; dense and strided,
    batches, K = 1 to 4, 1 to 8 channels, shifts 4 and 11 (m 8 and 1). Shifts 3 or 12, or 9
    channels, stay on the relu instance. On QEMU (the asm) and both host builds."""
    rng = np.random.default_rng(47)
    g = Graph("conv_k4_relu12")
    r12, relu = "rlx_convolve_1x1_k4_relu12_s8", "rlx_convolve_1x1_k4_relu_s8"
    # (input n, h, w, c), out_c, strides, the channels' shifts e (cycled), output zero point, kernel
    cases = [
        ((1, 4, 5, 3), 8, (1, 1), (4, 11, 7, 5), 9, r12),  # the first pixel alone, 9 pairs, the last alone
        ((1, 3, 3, 4), 3, (1, 1), (6, 8), -128, r12),  # K = 4: whole words, 4 pairs, the last alone
        ((2, 5, 6, 2), 7, (2, 2), (5, 10), 40, r12),  # strided batches: runs of 3, lead or trail in each
        ((1, 2, 2, 1), 1, (1, 1), (9,), -3, r12),  # K = 1, one channel: lead, a pair, trail
        ((1, 1, 1, 3), 2, (1, 1), (4, 6), 0, r12),  # 3 bytes of tensor: the first pixel byte by byte
        ((2, 3, 4, 2), 6, (1, 2), (8, 3), 5, relu),  # a shift of 3 (m = 9)
        ((1, 3, 3, 3), 4, (1, 1), (12, 6), 5, relu),  # a shift of 12 (m = 0)
        ((1, 3, 3, 3), 9, (1, 1), (6,), 5, relu),  # 9 channels
    ]
    for k, ((n, h, w, c), o, strides, es, zp, _) in enumerate(cases):
        xq, yq = QuantParams(np.float32(0.05), 3), QuantParams(np.float32(0.1), zp)
        # real multiplier 1.3 * 2**-(e + 1): the quantized multiplier's shift is e
        r = np.array([1.3 * 2.0 ** -(es[i % len(es)] + 1) for i in range(o)])
        wqk = QuantParams((r * 0.1 / 0.05).astype(np.float32), np.zeros(o, np.int64), axis=0)
        wv, bv = rng.integers(-127, 128, (o, 1, 1, c)).astype(np.int8), rng.integers(-5000, 5000, o).astype(np.int32)
        x = g.input(f"x{k}", (n, h, w, c), "i8", quant=xq)
        y = g.conv2d(x, g.param(f"w{k}", wv, quant=wqk), g.param(f"b{k}", bv), name=f"conv{k}", strides=strides,
                     padding="valid", activation="relu", out_quant=yq)  # fmt: skip
        g.output(y)
    model_c = emit(g).files["model.c"]
    calls = [line.split("(")[0].strip() for line in model_c.splitlines() if "rlx_convolve" in line and "(&" in line]
    assert calls == [case[-1] for case in cases], calls
    assert _run_on_m4(g, tmp_path, n_inputs=4, seed=3) == 7
    assert check(g, n_inputs=4, seed=3) == 7


def test_convolve_padded_image(check, tmp_path):
    """rlx_convolve_small_pad_s8 and rlx_convolve_pad_s8: a padded layer's input padded once into the
    scratch (rows and columns above, below, left and right of it), then every pair of pixels read in
    place: fields of 3 rows of 9 bytes, else each kernel row's whole quads and then every row's last 1
    to 3 bytes gathered (the weights in that order, rules._split_order; rows of 3 bytes: no whole
    quad), pairs across output rows, an output row of one pixel, the lone last pixel, two batches.
    The M4's GEMM instances of ReLU (the lower bound's clamp alone), whole blocks and partial ones of
    1 to 3 rows (a halfword and a byte), on quad counts of every residue mod 4 (the MAC loop's four
    entries); the row kernel's four entries on fully connected rows. On both host builds (the C) and
    on QEMU (the M4's asm)."""
    rng = np.random.default_rng(43)
    g = Graph("conv_pad")
    # (batches, h, w, c), kernel (h, w), strides, dilations, pads (top, bottom, left, right), activation,
    # out_c; the quad counts: 32, 5, 3, 8, 7, 10, 18
    cases = [
        ((1, 12, 12, 5), (5, 5), (2, 2), (1, 1), (1, 2, 1, 2), "relu", 7),
        ((1, 7, 9, 3), (3, 2), (1, 1), (1, 1), (2, 1, 1, 0), "relu", 6),
        ((2, 6, 5, 3), (4, 1), (1, 1), (2, 1), (1, 2, 0, 0), "relu", 8),
        ((1, 9, 1, 5), (2, 3), (1, 1), (1, 1), (1, 0, 1, 1), "relu", 5),
        ((1, 8, 7, 3), (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), "relu", 8),
        ((1, 10, 6, 1), (10, 4), (2, 2), (1, 1), (4, 4, 1, 2), "relu6", 8),
        ((1, 6, 7, 8), (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), "relu", 12),
    ]
    for k, ((n, h, w, c), (kh, kw), strides, dil, pads, act, o) in enumerate(cases):
        x = g.input(f"x{k}", (n, h, w, c), "i8", quant=rand_q(rng, 0.01, 0.1))
        wt = g.param(f"w{k}", rng.integers(-127, 128, (o, kh, kw, c)).astype(np.int8), quant=wq(rng, o, 0))
        b = g.param(f"b{k}", rng.integers(-5000, 5000, o).astype(np.int32))
        # relu6 with its upper bound inside int8 (the clamp instance)
        oq = QuantParams(np.float32(0.1), -100) if act == "relu6" else rand_q(rng, 0.05, 0.5)
        y = g.conv2d(x, wt, b, name=f"conv{k}", out_quant=oq, strides=strides, dilations=dil, padding="explicit",
                     pads=pads, activation=act)  # fmt: skip
        g.output(y)
    model_c = emit(g).files["model.c"]
    calls = re.findall(r"(rlx_convolve\w*)\(", model_c)
    assert calls == ["rlx_convolve_small_pad_s8"] * 6 + ["rlx_convolve_pad_s8"], calls
    gemm2 = re.findall(r"\.gemm2 = (\w+)", model_c)
    assert gemm2 == ["rlx_gemm_2px_part_lo"] * 2 + ["rlx_gemm_2px_lo", "rlx_gemm_2px_part_lo", "rlx_gemm_2px_lo",
                                                     "rlx_gemm_2px_clamp", "rlx_gemm_2px_lo"], gemm2  # fmt: skip
    assert check(g, n_inputs=2) == 5  # 2 seeded inputs plus all-min, all-max, all-zero-point
    assert _run_on_m4(g, tmp_path, n_inputs=2, seed=5) == 5
    # fully connected rows of 0 to 5 whole quads (and a partial one): the row kernel's entries
    f = Graph("fc_rows")
    for k, (kk, o) in enumerate([(3, 5), (13, 6), (10, 4), (20, 7), (16, 8)]):
        x = f.input(f"x{k}", (2, kk), "i8", quant=rand_q(rng, 0.01, 0.2))
        wt = f.param(f"w{k}", rng.integers(-127, 128, (o, kk)).astype(np.int8), quant=wq(rng, o, 0))
        b = f.param(f"b{k}", rng.integers(-3000, 3000, o).astype(np.int32))
        f.output(f.fully_connected(x, wt, b, activation="relu", name=f"fc{k}", out_quant=rand_q(rng, 0.5, 2.0)))
    # and 1x1 on 5 to 7 channels: each pixel's partial last quad one word (its last, shifted down)
    for k, cc in enumerate((5, 6, 7), start=5):
        x = f.input(f"x{k}", (1, 3, 5, cc), "i8", quant=rand_q(rng, 0.01, 0.1))
        wt = f.param(f"w{k}", rng.integers(-127, 128, (6, 1, 1, cc)).astype(np.int8), quant=wq(rng, 6, 0))
        b = f.param(f"b{k}", rng.integers(-3000, 3000, 6).astype(np.int32))
        f.output(f.conv2d(x, wt, b, name=f"c{k}", out_quant=rand_q(rng, 0.05, 0.5), padding="valid"))
    model_c = emit(f).files["model.c"]
    assert re.findall(r"(rlx_f\w+)\(", model_c) == ["rlx_fully_connected_s8"] * 5
    assert re.findall(r"(rlx_convolve\w*)\(", model_c) == ["rlx_convolve_1x1_s8"] * 3
    assert check(f, n_inputs=2) == 5
    assert _run_on_m4(f, tmp_path / "fc", n_inputs=2, seed=6) == 5
