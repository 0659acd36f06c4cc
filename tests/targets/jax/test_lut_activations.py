"""gelu and silu on integers in JAX: the prepared tables gathered (int8) or looked up with TFLite's
interpolation (int16, saturating scales wrapping as TFLite's), equal to the reference on every input.

The op x target test covers int8 draws; JAX has no int16 kind there, so the int16 path is held here.
"""

from __future__ import annotations

import numpy as np

from rlx_edge.ir.graph import Graph
from rlx_edge.ir.types import QuantParams
from rlx_edge.targets.jax import compile_jax
from rlx_edge.targets.reference import run

# (op, storage, approximate, input scale and zero point, output scale and zero point)
CASES = [("gelu", "i8", "none", 0.05, 3, 0.03, -100), ("silu", "i8", None, 0.11, -128, 0.02, -20),
         ("gelu", "i16", "tanh", 1.7e-4, 0, 1.3e-4, 0), ("gelu", "i16", "none", 0.0199, 0, 2.88e-5, 0),
         ("silu", "i16", None, 3e-4, 0, 4e-4, 0), ("silu", "i16", None, 0.03, 0, 1e-5, 0)]  # fmt: skip


def test_every_input_equals_the_reference() -> None:
    g = Graph("lut")
    feed = {}
    for k, (op, storage, approximate, s_x, zp_x, s_y, zp_y) in enumerate(CASES):
        info = np.iinfo({"i8": np.int8, "i16": np.int16}[storage])
        feed[f"x{k}"] = np.arange(info.min, info.max + 1, dtype=info.dtype).reshape(1, -1)
        x = g.input(f"x{k}", feed[f"x{k}"].shape, storage, quant=QuantParams(np.float32(s_x), zp_x, storage=storage))
        attrs = {} if approximate is None else {"approximate": approximate}
        out_q = QuantParams(np.float32(s_y), zp_y, storage=storage)
        g.output(getattr(g, op)(x, name=f"y{k}", out_quant=out_q, **attrs))
    want = run(g, feed)
    got = compile_jax(g)(feed)
    for name, w in want.items():
        assert got[name].dtype == w.dtype and np.array_equal(np.asarray(got[name]), w), name
