"""The FPGA design has no layer / RMS norm datapath (a per-row 1/sqrt over int64 sums): it refuses the integer norms
by name, as it does every op without a layer."""

from __future__ import annotations

import numpy as np
import pytest

from rlx_edge.ir.dtype import DType
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.types import QuantParams
from rlx_edge.targets.fpga import FpgaConfigError, FpgaDesign


@pytest.mark.parametrize("op", ["layer_norm", "rms_norm"])
def test_fpga_refuses_integer_norms(op: str) -> None:
    g = Graph(op)
    x = g.input("x", (2, 8), "i8", quant=QuantParams(0.1, 0))
    gamma = g.param("gamma", np.ones(8, np.int16), QuantParams(1e-3, 0, storage=DType.i16))
    y = getattr(g, op)(x, gamma, name="norm", out_quant=QuantParams(0.05, 0))
    g.output(g.relu(y, out_quant=QuantParams(0.05, 0)))
    with pytest.raises(FpgaConfigError, match=rf"node 'norm' \({op}\) has no FPGA implementation"):
        FpgaDesign(g)
