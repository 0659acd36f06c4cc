"""rlx_fully_connected_s8 against the integer reference (per-tensor and per-channel weights)."""

from __future__ import annotations

import numpy as np

from rlx_edge.hil.profile import profile
from rlx_edge.hil.qemu import run_qemu
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.types import QuantParams
from rlx_edge.targets.cortexm import build_model_firmware, emit
from rlx_edge.targets.reference import run
from rlx_edge.targets.reference.compare import make_inputs

from ..conftest import rand_q, wq


def test_fully_connected_random(check):
    rng = np.random.default_rng(31)
    g = Graph("fc")
    for k in range(8):
        i, o = int(rng.choice([1, 3, 8, 17, 64])), int(rng.choice([1, 2, 5, 8, 12]))
        lead = [(1,), (2,), (3,), (2, 3)][k % 4]
        x = g.input(f"x{k}", (*lead, i), "i8", quant=rand_q(rng, 0.01, 0.2))
        quant = wq(rng, o, 0) if k % 2 else QuantParams(np.float32(rng.uniform(0.002, 0.02)), 0)
        w = g.param(f"w{k}", rng.integers(-127, 128, (o, i)).astype(np.int8), quant=quant)
        b = g.param(f"b{k}", rng.integers(-3000, 3000, o).astype(np.int32)) if k != 3 else None
        act = str(rng.choice(["none", "relu", "relu6", "relu_n1_to_1"]))
        g.output(g.fully_connected(x, w, b, activation=act, name=f"fc{k}", out_quant=rand_q(rng, 0.05, 0.5)))
    # rlx_fc_small_s8's portable C (4 to 8 inputs): its second quad overlapping the first, rq_mode 1 and 2
    for k, (i, o, act) in enumerate([(7, 5, "relu"), (5, 6, "none")], start=8):
        x = g.input(f"x{k}", (2, i), "i8", quant=rand_q(rng, 0.01, 0.2))
        w = g.param(f"w{k}", rng.integers(-127, 128, (o, i)).astype(np.int8), quant=wq(rng, o, 0))
        b = g.param(f"b{k}", rng.integers(-3000, 3000, o).astype(np.int32))
        g.output(g.fully_connected(x, w, b, activation=act, name=f"fc{k}", out_quant=rand_q(rng, 0.05, 0.5)))
    assert check(g, n_inputs=5) == 8


def test_fully_connected_dsp_asm_on_m4_odd_quads(tmp_path):
    """The M4's asm loop over the whole quads (odd and even counts, a single one), then a partial last
    quad (the word ending at the row's end, or bytes for a row shorter than a quad), and the packed
    requantization (rq_mode 2, 1 with both bounds, and 0's reference path), under QEMU at -O2 and
    -Os (the host builds run the C schedule, not the asm)."""
    rng = np.random.default_rng(5)
    g = Graph("fc_chain")
    h = g.input("x", (1, 20), "i8", quant=QuantParams(np.float32(0.05), 3))
    # in_features 20 (5 whole quads), 17 (4 + a partial one), 9 (2 + 1), 6 (1 + 1), 12 (3 + 0),
    # 3 (0 + 1), 7 (1 + 1 of 3 values); out_c whole blocks and partial ones of 1, 2 and 3 rows.
    # 6, 7 and the tie's 5 run rlx_fc_small_* (4 to 8 inputs), the others the block kernel
    acts = ["none", "relu", "none", "relu", "relu6", "none", "relu6"]
    # the sixth layer's output scale makes its multiplier > 1 (a left shift): rq_mode 0
    scales = [0.08, 0.1, 0.12, 0.14, 0.05, 0.0004, 0.003]
    for k, (i, o) in enumerate([(20, 17), (17, 9), (9, 6), (6, 12), (12, 3), (3, 7), (7, 5)]):
        w = g.param(f"w{k}", rng.integers(-127, 128, (o, i)).astype(np.int8), quant=wq(rng, o, 0))
        b = g.param(f"b{k}", rng.integers(-3000, 3000, o).astype(np.int32))
        h = g.fully_connected(
            h, w, b, activation=acts[k], name=f"fc{k}", out_quant=QuantParams(np.float32(scales[k]), -4 + k)
        )
    # a multiplier of exactly 1/4 (e = 1): a quarter of the accumulators end in a rounding tie, half
    # of them negative, which round away from zero only with the fast form's sign correction
    w = g.param("w_tie", rng.integers(-1, 2, (6, 5)).astype(np.int8), quant=QuantParams(np.float32(0.25), 0))
    b = g.param("b_tie", rng.integers(-300, 300, 6).astype(np.int32))
    h = g.fully_connected(h, w, b, name="fc_tie", out_quant=QuantParams(np.float32(scales[-1]), 5))
    g.output(h)
    board = "qemu-mps2-an386"
    samples = make_inputs(g, 4, seed=3)
    out = g.outputs[0]
    t = g.types[out]
    # -Os too: GCC aligns functions to 2 bytes there, which the asm's ADR jump targets must survive
    for opt in ("-O2", "-Os"):
        elf, _info = build_model_firmware(g, board, tmp_path / "fw", opt=opt)
        got = run_qemu(elf, board, [s[g.inputs[0]] for s in samples], output_dtype=t.dtype.numpy, output_shape=t.shape)
        for s, y in zip(samples, got):
            assert np.array_equal(y, run(g, s)[out]), opt


def test_fully_connected_small_k_on_m4(tmp_path):
    """rlx_fc_small_s8 and rlx_fc_small_clamp_s8 (4 to 8 inputs: the two quads held in registers,
    the second overlapping the first, 2 rows at a time and an odd last row alone) under QEMU, each
    layer an output of its own: K 8, 5, 7, 4 and 6, 1 to 3 rows of input, out_c odd and even (2
    included), rq_mode 2 and 1, random and extreme inputs; fc 7->3 within issue #17's 3.0
    instructions/MAC (63 for the call). Beside them K 3 in the block kernel (no whole quad)."""
    rng = np.random.default_rng(11)
    g = Graph("fc_small")
    # (rows, in, out, activation, output scale, output zero point): relu with a zero point is rq_mode 1
    layers = [(3, 8, 5, "none", 0.1, 3), (2, 5, 7, "relu", 0.08, -20), (1, 7, 4, "relu6", 0.05, -90),
              (3, 4, 6, "none", 0.06, 10), (2, 6, 2, "relu", 0.07, -5), (1, 7, 3, "none", 0.09, 0),
              (2, 3, 5, "relu", 0.04, -30)]  # fmt: skip
    for k, (n, i, o, act, scale, zp) in enumerate(layers):
        x = g.input(f"x{k}", (n, i), "i8", quant=QuantParams(np.float32(0.05), -7 + 3 * k))
        w = g.param(f"w{k}", rng.integers(-127, 128, (o, i)).astype(np.int8), quant=wq(rng, o, 0))
        b = g.param(f"b{k}", rng.integers(-3000, 3000, o).astype(np.int32))
        q = QuantParams(np.float32(scale), zp)
        g.output(g.fully_connected(x, w, b, activation=act, name=f"fc{k}", out_quant=q))
    model_c = emit(g).files["model.c"]
    assert model_c.count("rlx_fc_small_s8(") == 3 and model_c.count("rlx_fc_small_clamp_s8(") == 3, model_c
    # 3 inputs: the block kernel, no whole quad (its MAC loop skipped), rq_mode 1
    assert model_c.count("rlx_fully_connected_s8(") == 1, model_c
    extremes = [{v: np.full(g.types[v].shape, e, np.int8) for v in g.inputs} for e in (-128, 127)]
    for inputs in [*make_inputs(g, 2, seed=5), *extremes]:
        prof = profile(g, "m4", inputs, workdir=tmp_path / "fw")
        assert prof.bit_exact
        fc73 = next(layer for layer in prof.layers if layer.name == "fc5")
        assert fc73.kernel == "rlx_fc_small_s8" and fc73.kernel_instructions <= 63, fc73
