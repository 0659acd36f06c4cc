"""The integer layer / RMS norm kernels (kernels/rlx_norm_s8.c) in one firmware under QEMU M4, bit-exact with the
reference: int8 and int16 activations, gamma int16 and int8, beta int32 and int16 and none. The host build of
every draw is in tests/targets/test_op_x_target.py (-k layer_norm, -k rms_norm). And the transformer blocks
(ir/ops/transformer.py) quantized by PTQ, int8 and int16x8, on the host build."""

from __future__ import annotations

import numpy as np
import pytest

from rlx_edge.boards import ALIASES
from rlx_edge.ir.dtype import DType
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.types import QuantParams
from rlx_edge.quant.calibrate import calibrate
from rlx_edge.quant.ptq import quantize
from rlx_edge.targets.cortexm import compile_host, emit
from rlx_edge.targets.cortexm.rules import layer_for
from rlx_edge.targets.reference import run

from .conftest import check_qemu, q16


def _model() -> Graph:
    rng = np.random.default_rng(2718)
    g = Graph("norms")
    e = 24

    def param(name: str, dtype: DType, lo: int, hi: int, scale: float, shape: tuple[int, ...] = (e,)) -> str:
        arr = rng.integers(lo, hi, shape).astype(dtype.numpy)
        return g.param(name, arr, QuantParams(np.float32(scale), 0, storage=dtype))

    x = g.input("x", (3, 2, e), "f32")
    a = g.quantize(x, dtype="i8", name="quant", out_quant=QuantParams(np.float32(0.03), 5))
    # PTQ's parameter types: gamma int16 symmetric, beta int32 at the output's scale
    ln8 = g.layer_norm(a, param("g8", DType.i16, -32767, 32768, 1 / 20000), param("b8", DType.i32, -40, 40, 0.02),
                       name="ln_s8", out_quant=QuantParams(np.float32(0.02), -3))  # fmt: skip
    rms8 = g.rms_norm(ln8, param("gr8", DType.i16, 5000, 32768, 1 / 16000, (2, e)), axis=1, name="rms_s8",
                      out_quant=QuantParams(np.float32(0.016), 2))  # fmt: skip
    wide = g.requantize(rms8, dtype="i16", name="to_s16", out_quant=q16(1 / 8000))
    # computed-like parameter types: gamma int8 and beta int16, each with a scale of its own
    ln16 = g.layer_norm(wide, param("g16", DType.i8, -127, 128, 1 / 60), param("b16", DType.i16, -3000, 3000, 1e-4),
                        name="ln_s16", out_quant=q16(1 / 9000))  # fmt: skip
    rms16 = g.rms_norm(ln16, param("gr16", DType.i8, 20, 128, 1 / 90), name="rms_s16", out_quant=q16(1 / 7000))
    g.output(g.dequantize(rms16, name="dequant"))
    return g


def test_norms_qemu_m4_are_bit_exact(tmp_path_factory) -> None:
    g = _model()
    assert {g.types[n.outputs[0]].dtype for n in g.nodes if n.op.endswith("norm")} == {DType.i8, DType.i16}
    prog = emit(g).program
    kernels = {layer_for(prog.graph, n, prog.quant.get(n.name)).kernel for n in prog.nodes()}
    assert {"rlx_norm_s8", "rlx_norm_s16"} <= kernels
    refs = check_qemu(g, tmp_path_factory.getbasetemp() / "fw-norms", 4, seed=11, board=ALIASES["qemu-m4"])
    assert max(np.unique(r).size for r in refs) > 100  # outputs spread, not saturated


@pytest.mark.parametrize("scheme", ["int8", "int16x8"])
def test_transformer_blocks_cortexm_host_bit_exact(scheme: str, tmp_path) -> None:
    """embedding -> residual_rms_norm -> swiglu_ffn -> residual_layer_norm through PTQ: every op of the lowered
    blocks (gather, add, the norms, fully_connected, silu, mul) on the integer path, the C build bit-exact."""
    rng = np.random.default_rng(5)
    v, e, hidden, seq = 16, 8, 16, 6
    g = Graph("blocks")
    ids = g.input("ids", (seq,), "i32")
    x = g.embedding(ids, g.param("table", rng.standard_normal((v, e)).astype(np.float32)))
    h, stream = g.residual_rms_norm(x, x, g.param("g1", rng.uniform(0.5, 1.5, e).astype(np.float32)))
    ws = [(rng.standard_normal(s) / np.sqrt(s[1])).astype(np.float32) for s in ((hidden, e), (hidden, e), (e, hidden))]
    f = g.swiglu_ffn(h, *(g.param(f"w{k}", w) for k, w in enumerate(ws)))
    beta = g.param("b2", (0.1 * rng.standard_normal(e)).astype(np.float32))
    y, _ = g.residual_layer_norm(f, stream, g.param("g2", np.ones(e, np.float32)), beta)
    g.output(y)
    data = {"ids": rng.integers(0, v, (64, seq)).astype(np.int32)}
    q = quantize(g, calibrate(g, data), scheme=scheme)
    act = DType.i8 if scheme == "int8" else DType.i16
    assert all(q.types[n.outputs[0]].dtype == act for n in q.nodes), [
        (n.op, q.types[n.outputs[0]].dtype) for n in q.nodes
    ]
    model = compile_host(q, tmp_path)
    outs = []
    for row in data["ids"][:12]:
        want = run(q, {"ids": row})[q.outputs[0]]
        assert np.array_equal(model.run({"ids": row})[q.outputs[0]], want)
        outs.append(want.tobytes())
    assert len(set(outs)) == len(outs)
