"""Integer requantization the byte table cannot do, and int8 -> int16 softmax, on the Cortex-M host build.

int16 and int32 inputs (to every storage type) and per-channel parameters run kernels/rlx_requantize_int.c;
softmax with int8 input and int16 output (TFLite Micro's, keyword_scrambled's last layer) runs the
int8 kernel with 16 output bits. Each branch of one graph sees random inputs and the edge inputs
(storage minimum, maximum, zero point) against the reference.
"""

from __future__ import annotations

import numpy as np

from rlx_edge.ir.dtype import DType
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.interpret import run
from rlx_edge.ir.types import QuantParams
from rlx_edge.targets.cortexm import compile_host
from rlx_edge.targets.cortexm.rules import layer_for
from rlx_edge.targets.reference.compare import make_inputs


def _q(scale, zp, storage: DType, axis: int | None = None) -> QuantParams:
    return QuantParams(np.asarray(scale, np.float32), np.asarray(zp, np.int64), axis, storage)


def _graph() -> Graph:
    g = Graph("requantize_int")
    x16 = g.input("x16", (2, 5, 7), DType.i16, _q(0.000625, 3, DType.i16))
    x8 = g.input("x8", (3, 4), DType.i8, _q(0.05, -5, DType.i8))
    # scales around the input's and far from it (multipliers above and below one: both shift signs)
    outs = {
        "i8": (DType.i8, _q(0.0592083, -128, DType.i8)),
        "i16": (DType.i16, _q(0.0003, -17, DType.i16)),
        "i32": (DType.i32, _q(3.052e-05, 9, DType.i32)),
        "u8": (DType.u8, _q(0.01, 128, DType.u8)),
        "i8_channels": (DType.i8, _q([0.001, 0.02, 0.0005, 0.1, 0.003], [0, 4, -9, 1, 127], DType.i8, axis=1)),
    }
    for name, (dt, q) in outs.items():
        g.output(*g.add_node("requantize", [x16], {"dtype": dt}, name=name, out_quant=q))
    # int32 in (TFLite Micro's SEANet quantize integration models: a 32-bit accumulator to int16)
    x32 = g.input("x32", (2, 9), DType.i32, _q(2.3e-07, 0, DType.i32))
    for name, (dt, q) in {"i32_to_i16": (DType.i16, _q(0.000922, 0, DType.i16)),
                          "i32_to_i8": (DType.i8, _q(0.004, -7, DType.i8))}.items():  # fmt: skip
        g.output(*g.add_node("requantize", [x32], {"dtype": dt}, name=name, out_quant=q))
    q_ch = _q([0.001, 0.04, 0.3, 0.0001], [2, -3, 0, 100], DType.i16, axis=1)
    g.output(*g.add_node("requantize", [x8], {"dtype": DType.i16}, name="i8_to_i16_channels", out_quant=q_ch))
    attrs = {"axis": -1, "beta": 1.0, "out_dtype": "i16"}
    g.output(*g.add_node("softmax", [x8], attrs, name="softmax", out_quant=_q(1 / 65536, -32768, DType.i16)))
    return g


def test_kernels_are_the_ones_meant():
    g = _graph()
    kernels = {n.name: layer_for(g, n).kernel for n in g.nodes}
    assert kernels == {**{n: "rlx_requantize_int" for n in kernels if n != "softmax"}, "softmax": "rlx_softmax_s8"}


def test_host_build_is_bit_exact(tmp_path):
    g = _graph()
    model = compile_host(g, tmp_path)
    samples = make_inputs(g, 6, seed=1)
    softmax_values = set()
    for k, s in enumerate(samples):
        if k % 2:  # a narrower x8 too, so softmax rows are not all one winner at full probability
            s["x8"] = (s["x8"] // 16).astype(np.int8)
        want, got = run(g, s), model.run(s)
        for name in g.outputs:
            assert np.array_equal(want[name], got[name]), f"input {k}: {name}"
        softmax_values |= set(want["softmax"].ravel().tolist())
    assert len(softmax_values) > 20  # probabilities spread over the int16 range, not a few saturated ones
