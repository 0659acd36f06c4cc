"""The lstm op's declaration: what it refuses (types and shapes TFLite Micro's kernel does not take, a
quantization its integer kernel cannot mean) and the integer parameters it prepares."""

from __future__ import annotations

import numpy as np
import pytest
from lstmgraphs import lstm_graph

from rlx_edge.errors import IRError, OpError
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.plan.prepare import prepare_node
from rlx_edge.ir.types import QuantParams


def _requantized(g: Graph, name: str, q: QuantParams) -> Graph:
    """``g`` rebuilt with value ``name``'s quantization replaced."""
    node = g.nodes[0]
    out = Graph("lstm")
    values = {}
    for v in node.inputs:
        t = g.types[v]
        quant = q if v == name else t.quant
        if v in g.params:
            values[v] = out.param(v, g.params[v], quant, dtype=t.dtype)
        else:
            values[v] = out.input(v, t.shape, t.dtype, quant=quant)
    out_q = [g.types[o].quant for o in node.outputs]
    out.output(*out.lstm(*[values[v] for v in node.inputs], **node.attrs, out_quant=out_q))
    return out


def test_prepared_parameters_are_tflite_micros():
    g = lstm_graph("i8", cell_scale=2.0**-11, cell_clip=0.5)
    p = prepare_node(g, g.nodes[0])
    # forget gate (2**-15) x cell (s) -> cell (s): exactly 2**-15
    assert (p.forget_mult, p.forget_shift) == (2**30, -14)
    # tanh of a 2**-11 cell: TFLite Micro's lstm_internal::Tanh shift (15 - 11) - 3 with multiplier 0
    assert (p.tanh_mult, p.tanh_shift) == (0, 1)
    assert p.cell_clip == 1024  # 0.5 / 2**-11
    assert (p.hidden_min, p.hidden_max, p.hidden_zp, p.in_zp) == (-128, 127, -2, 3)
    # a cell scale below 2**-12: the other branch (multiplier 3, a right shift)
    g = lstm_graph("i16", cell_scale=2.0**-14)
    p = prepare_node(g, g.nodes[0])
    assert (p.tanh_mult, p.tanh_shift, p.wide, p.cell_clip) == (3, 2, True, 0)


def test_refuses_a_cell_zero_point():
    g = lstm_graph("i8")
    g = _requantized(g, "cell", QuantParams(np.float32(2.0**-11), 5, storage="i16"))
    with pytest.raises(IRError, match="cell state must be symmetric"):
        prepare_node(g, g.nodes[0])


def test_refuses_asymmetric_or_per_channel_weights():
    g = lstm_graph("i8", state=3)
    bad = _requantized(g, "r_cell", QuantParams(np.float32(0.01), 4))
    with pytest.raises(IRError, match="weights must be symmetric"):
        prepare_node(bad, bad.nodes[0])
    bad = _requantized(g, "w_forget", QuantParams(np.full(3, 0.01, np.float32), np.zeros(3, np.int64), axis=0))
    with pytest.raises(IRError, match="w_forget must be quantized per tensor"):
        prepare_node(bad, bad.nodes[0])


def test_type_and_shape_errors():
    g = lstm_graph("f32", state=3, n_in=5)
    node = g.nodes[0]
    ins = list(node.inputs)
    with pytest.raises(OpError, match=r"w_cell shape \[3, 3\] must be \[3, 5\]"):
        g.lstm(*ins[:3], "r_cell", *ins[4:])  # a recurrent weight where the input one goes
    with pytest.raises(OpError, match="must have rank 3"):
        g.lstm(g.input("x2", (4, 5), "f32"), *ins[1:])
    q = lstm_graph("i8")
    qins = list(q.nodes[0].inputs)
    cell8 = q.input("cell8", (1, 3), "i8", quant=QuantParams(np.float32(0.01), 0, storage="i8"))
    with pytest.raises(OpError, match="cell state must be i16"):
        q.lstm(*qins[:14], cell8)
