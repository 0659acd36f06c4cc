"""The int16 kernels of issue #16 (abs, quantize, dequantize, mean, sum, squared_difference,
maximum, minimum, select_v2) and grouped conv (int16 and int8) in one firmware under QEMU M4, bit-exact with the
reference; their host builds are checked in tests/targets/cortexm/kernels/test_*_s16.py."""

from __future__ import annotations

import numpy as np

from rlx_edge.boards import ALIASES
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.types import QuantParams
from rlx_edge.targets.cortexm import emit
from rlx_edge.targets.cortexm.rules import layer_for

from .conftest import check_qemu, q16

KERNELS = {"rlx_unary_s16", "rlx_reduce_s16", "rlx_binary_s16", "rlx_select_s16", "rlx_convolve_grouped"}


def _model() -> Graph:
    rng = np.random.default_rng(1618)
    g = Graph("s16-ops")

    def weights(name: str, o: int, ig: int) -> str:
        wq = QuantParams(rng.uniform(0.002, 0.02, o).astype(np.float32), np.zeros(o, np.int64), axis=0)
        return g.param(name, rng.integers(-127, 128, (o, 3, 3, ig)).astype(np.int8), quant=wq)

    x = g.input("x", (1, 6, 5, 4), "f32")
    a = g.quantize(x, dtype="i16", name="quant", out_quant=q16(1 / 2048))
    c16 = g.conv2d(a, weights("w16", 6, 2), g.param("b16", rng.integers(-9000, 9000, 6).astype(np.int64)),
                   groups=2, padding="same", name="conv_g2_s16", out_quant=q16(0.004))  # fmt: skip
    r8 = g.requantize(c16, dtype="i8", name="to_s8", out_quant=QuantParams(np.float32(0.4), 4))
    c8 = g.conv2d(r8, weights("w8", 6, 2), g.param("b8", rng.integers(-900, 900, 6).astype(np.int32)),
                  groups=3, padding="same", name="conv_g3_s8", out_quant=QuantParams(np.float32(1.5), -7))  # fmt: skip
    b = g.requantize(c8, dtype="i16", name="to_s16", out_quant=q16(0.005))
    m = g.abs(b, name="abs", out_quant=q16(0.0061))
    d = g.squared_difference(m, c16, name="sqdiff", out_quant=q16(1.3))
    cond = g.param("cond", rng.random((1, 1, 5, 6)) < 0.5)
    s = g.select_v2(cond, d, m, name="select", out_quant=q16(0.9))
    s = g.maximum(s, m, name="max", out_quant=q16(0.9))  # s copied, m requantized
    s = g.minimum(s, d, name="min", out_quant=q16(1.1))  # both requantized
    mean = g.mean(s, axes=(1,), keepdims=True, name="mean", out_quant=q16(0.7))
    total = g.sum(mean, axes=(3,), keepdims=False, name="sum", out_quant=q16(3.0))
    g.output(g.dequantize(total, name="dequant"))
    return g


def test_s16_ops_qemu_m4_is_bit_exact(tmp_path_factory) -> None:
    g = _model()
    prog = emit(g).program
    assert KERNELS <= {layer_for(prog.graph, n, prog.quant.get(n.name)).kernel for n in prog.nodes()}
    check_qemu(g, tmp_path_factory.getbasetemp() / "fw-s16-ops", 3, seed=7, board=ALIASES["qemu-m4"])
