"""One-SVDF graphs for the SVDF tests (frontends, Cortex-M): float, or int8 with int8 or int16 state."""

from __future__ import annotations

import numpy as np

from rlx_edge.ir.graph import Graph
from rlx_edge.ir.types import QuantParams


def svdf_graph(
    dtype: str, *, batch: int = 1, n_in: int = 6, units: int = 3, rank: int = 1, memory: int = 5,
    bias: bool = True, activation: str = "none", state_dtype: str = "i16", state_zp: int = 0, seed: int = 0,
) -> Graph:  # fmt: skip
    rng = np.random.default_rng(seed)
    filters = units * rank
    g = Graph("svdf")
    if dtype == "f32":
        x = g.input("x", (batch, n_in), "f32")
        state = g.input("state", (batch, filters * memory), "f32")
        wf = g.param("wf", rng.uniform(-1, 1, (filters, n_in)).astype(np.float32))
        wt = g.param("wt", rng.uniform(-1, 1, (filters, memory)).astype(np.float32))
        b = g.param("b", rng.uniform(-1, 1, (units,)).astype(np.float32)) if bias else None
        y, new_state = g.svdf(x, wf, wt, state, b, rank=rank, activation=activation)
    else:
        sdt = np.dtype(np.int16 if state_dtype == "i16" else np.int8)
        s_s = 0.004 if state_dtype == "i16" else 0.08
        s_x, s_wf, s_wt = np.float32(0.06), np.float32(0.009), np.float32(0.003)
        q_s = QuantParams(np.float32(s_s), state_zp, storage=state_dtype)
        x = g.input("x", (batch, n_in), "i8", quant=QuantParams(s_x, 5, storage="i8"))
        state = g.input("state", (batch, filters * memory), state_dtype, quant=q_s)
        wf = g.param("wf", rng.integers(-127, 128, (filters, n_in)).astype(np.int8), QuantParams(s_wf, 0))
        hi = np.iinfo(sdt).max
        wt = g.param(
            "wt", rng.integers(-hi, hi + 1, (filters, memory)).astype(sdt), QuantParams(s_wt, 0, storage=state_dtype)
        )
        s_b = np.float32(np.float32(s_s) * s_wt)
        b = None
        if bias:
            b = g.param("b", rng.integers(-3000, 3000, (units,)).astype(np.int32), QuantParams(s_b, 0, storage="i32"))
        # output scale near the time sums' reach, so that outputs spread over int8 without saturating
        s_y = np.float32(s_s * float(s_wt) * hi * memory * rank / 40)
        y, new_state = g.svdf(
            x, wf, wt, state, b, rank=rank, activation=activation, out_quant=[QuantParams(s_y, -3), q_s]
        )
    g.output(y, new_state)
    return g
