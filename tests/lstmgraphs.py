"""One-LSTM graphs for the LSTM tests (frontends, Cortex-M): float, int8 (int16 cell) or int16x8."""

from __future__ import annotations

import numpy as np

from rlx_edge.ir.graph import Graph
from rlx_edge.ir.types import QuantParams

GATES = ("input", "forget", "cell", "output")


def lstm_graph(
    dtype: str, *, batch: int = 1, steps: int = 4, n_in: int = 5, state: int = 3, time_major: bool = False,
    cell_clip: float = 0.0, in_zp: int = 3, hidden_zp: int = -2, cell_scale: float = 2.0**-11, seed: int = 0,
) -> Graph:  # fmt: skip
    """x, hidden and cell are the graph inputs; y and both updated states its outputs."""
    rng = np.random.default_rng(seed)
    g = Graph("lstm")
    x_shape = (steps, batch, n_in) if time_major else (batch, steps, n_in)
    w_shapes = [(state, n_in)] * 4 + [(state, state)] * 4
    if dtype == "f32":
        x = g.input("x", x_shape, "f32")
        h = g.input("hidden", (batch, state), "f32")
        c = g.input("cell", (batch, state), "f32")
        ws = [g.param(f"{k}_{gate}", rng.uniform(-0.7, 0.7, s).astype(np.float32))
              for (k, gate), s in zip([(k, gate) for k in "wr" for gate in GATES], w_shapes)]  # fmt: skip
        bs = [g.param(f"b_{gate}", rng.uniform(-0.5, 0.5, (state,)).astype(np.float32)) for gate in GATES]
        y, h2, c2 = g.lstm(x, *ws, *bs, h, c, cell_clip=cell_clip, time_major=time_major)
    else:
        wide = dtype == "i16"
        adt, bdt = ("i16", "i64") if wide else ("i8", "i32")
        s_x = np.float32(0.02 / (256 if wide else 1))
        s_h = np.float32(1 / (32768 if wide else 128))
        q_x = QuantParams(s_x, 0 if wide else in_zp, storage=adt)
        q_h = QuantParams(s_h, 0 if wide else hidden_zp, storage=adt)
        q_c = QuantParams(np.float32(cell_scale), 0, storage="i16")
        x = g.input("x", x_shape, adt, quant=q_x)
        h = g.input("hidden", (batch, state), adt, quant=q_h)
        c = g.input("cell", (batch, state), "i16", quant=q_c)
        ws, s_ws = [], []
        for (k, gate), s in zip([(k, gate) for k in "wr" for gate in GATES], w_shapes):
            s_w = np.float32(rng.uniform(0.004, 0.02))
            ws.append(g.param(f"{k}_{gate}", rng.integers(-127, 128, s).astype(np.int8), QuantParams(s_w, 0)))
            s_ws.append(s_w)
        bs = [
            g.param(f"b_{gate}", rng.integers(-3000, 3000, (state,)).astype(np.dtype(bdt.replace("i", "int"))),
                    QuantParams(np.float32(s_x * s_w), 0, storage=bdt))
            for gate, s_w in zip(GATES, s_ws)
        ]  # fmt: skip
        y, h2, c2 = g.lstm(x, *ws, *bs, h, c, cell_clip=cell_clip, time_major=time_major, out_quant=[q_h, q_h, q_c])
    g.output(y, h2, c2)
    return g
