"""int4 weights on Cortex-M: packed two per byte in flash, unpacked in registers, bit-exact.

One small int4w model whose every weighted layer hits a nibble-packing edge:
odd weight counts, output channels not a multiple of 4 (a last block of 1 to
3 rows), reductions with and without whole chunks of 8 and with a tail,
odd depthwise channel counts, a depth multiplier and the one-input-channel
depthwise that runs as a convolution. Host builds (portable and emulated
DSP), qemu-m4 (DSP) and qemu-m3 (portable) must equal the reference.
"""

from __future__ import annotations

import numpy as np
import pytest

from rlx_edge.boards import ALIASES
from rlx_edge.hil.qemu import run_qemu
from rlx_edge.ir.graph import Graph
from rlx_edge.quant.calibrate import calibrate
from rlx_edge.quant.ptq import quantize
from rlx_edge.targets.cortexm import build_model_firmware, emit
from rlx_edge.targets.cortexm.rules import gemm_s4_order, layer_for
from rlx_edge.targets.reference import run
from rlx_edge.targets.reference.compare import make_inputs

WEIGHTED = ("conv2d", "depthwise_conv2d", "fully_connected")


def _model() -> Graph:
    rng = np.random.default_rng(0)
    g = Graph("int4-edges")

    def w(name: str, *shape: int):
        return g.param(name, rng.standard_normal(shape).astype(np.float32))

    x = g.input("x", (1, 9, 9, 1))
    y = g.depthwise_conv2d(x, w("w0", 1, 3, 3, 5), w("b0", 5), depth_multiplier=5, padding="same",
                           activation="relu", name="dw_m5")  # fmt: skip  # one channel: a conv, k 9, 5 rows
    y = g.conv2d(y, w("w1", 7, 3, 3, 5), w("b1", 7), padding="same", name="conv")  # k 45: 5 chunks + 5
    y = g.conv2d(y, w("w2", 3, 1, 1, 7), padding="valid", name="pw")  # 1x1 in place, k 7: tail only, 3 rows
    y = g.depthwise_conv2d(y, w("w3", 1, 3, 3, 3), w("b3", 3), strides=(2, 2), padding="same", name="dw")
    y = g.depthwise_conv2d(y, w("w4", 1, 3, 3, 9), depth_multiplier=3, padding="valid", name="dw_m3")
    y = g.reshape(y, shape=(1, 81))
    g.output(g.fully_connected(y, w("w5", 9, 81), w("b5", 9), name="fc"))  # k 81: 10 chunks + 1, 9 rows
    return quantize(g, calibrate(g, rng.standard_normal((16, 9, 9, 1)).astype(np.float32)), scheme="int4w")


@pytest.fixture(scope="module")
def q4() -> Graph:
    return _model()


def test_gemm_layout_is_the_documented_one() -> None:
    w = np.arange(5 * 11).reshape(5, 11) % 16 - 8  # 5 rows: a block of 4 and one of 1; k 11: a chunk and 3
    got = gemm_s4_order(w).tolist()
    want = []
    for ob, rows in ((0, 4), (4, 1)):
        want += [w[ob + r][i + 4 * h] for r in range(rows) for i in range(4) for h in range(2)]  # chunk 0
        want += [w[ob + r][8 + t] for r in range(rows) for t in range(3)]  # the tail, row by row
    assert got == want


def test_flash_holds_packed_weights(q4: Graph) -> None:
    em = emit(q4)
    prog = em.program
    kernels = set()
    for i, node in enumerate(prog.nodes()):
        if node.op not in WEIGHTED:
            continue
        n = q4.params[node.inputs[1]].size
        assert n % 2 == 1  # every layer's count is odd: the last byte holds one nibble
        layer = layer_for(prog.graph, node, prog.quant.get(node.name))
        kernels.add(layer.kernel)
        weights = {k: a for k, a in layer.consts.items() if k.startswith("weights")}
        assert list(weights) == ["weights"] and layer.guards == {}  # one array, both builds
        assert weights["weights"].dtype == np.uint8 and weights["weights"].size == (n + 1) // 2
        assert f"const uint8_t rlx_l{i}_weights[{(n + 1) // 2}]" in em.files["weights.c"]
    assert kernels == {"rlx_convolve_s4", "rlx_convolve_1x1_s4", "rlx_depthwise_conv_s4", "rlx_fully_connected_s4"}


def test_host_builds_are_bit_exact(q4: Graph, check) -> None:
    assert check(q4, n_inputs=8, seed=3) == 11


@pytest.mark.parametrize("core", ["m4", "m3"])
def test_qemu_is_bit_exact(q4: Graph, core: str, tmp_path_factory) -> None:
    board = ALIASES[f"qemu-{core}"]
    elf, _info = build_model_firmware(q4, board, tmp_path_factory.getbasetemp() / "fw-int4")
    samples = make_inputs(q4, 3, seed=5)
    out = q4.outputs[0]
    t = q4.types[out]
    got = run_qemu(elf, board, [s[q4.inputs[0]] for s in samples], output_dtype=t.dtype.numpy, output_shape=t.shape)
    refs = [run(q4, s)[out] for s in samples]
    for k, (y, ref) in enumerate(zip(got, refs)):
        np.testing.assert_array_equal(y, ref, err_msg=f"{board}, input {k}")
    assert len({r.tobytes() for r in refs}) >= 3  # a stuck output cannot pass
