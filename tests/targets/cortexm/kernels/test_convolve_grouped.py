"""Grouped conv2d (groups > 1) on Cortex-M: int8, int16x8 and int4 weights, bit-exact with the reference.

int8 and int16 activations run rlx_convolve_grouped (each output channel reads its group's input
channels); int4 weights run the int4 conv kernels on the weights made dense (zero outside each
output channel's group). The draws cover group sizes that are not multiples of the kernels'
blocks of 4, 1x1 kernels, padding, strides and dilation, with and without bias.
"""

from __future__ import annotations

import numpy as np
import pytest

from rlx_edge.ir.dtype import DType
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.types import QuantParams
from rlx_edge.targets.cortexm import emit
from rlx_edge.targets.cortexm.rules import layer_for

from ..conftest import wq

# (groups, in channels per group, out channels per group, kernel)
_SHAPES = [(2, 3, 2, (3, 3)), (3, 1, 3, (2, 3)), (4, 2, 1, (1, 1)), (2, 5, 3, (3, 1))]


def _act(rng: np.random.Generator, storage: DType, scale: float) -> QuantParams:
    if storage == DType.i16:  # the 16x8 scheme: symmetric int16 activations
        return QuantParams(np.float32(scale), 0, storage=DType.i16)
    return QuantParams(np.float32(scale), int(rng.integers(-20, 21)))


def _grouped(storage: DType, weights: DType, seed: int) -> Graph:
    rng = np.random.default_rng(seed)
    g = Graph(f"grouped-{storage.value}-{weights.value}")
    wmax = 7 if weights == DType.i4 else 127
    for k, (groups, ig, og, (kh, kw)) in enumerate(_SHAPES):
        c, o = groups * ig, groups * og
        s_x = float(rng.uniform(0.01, 0.1))
        x = g.input(f"x{k}", (1, 7, 6, c), storage.value, quant=_act(rng, storage, s_x))
        wv = rng.integers(-wmax, wmax + 1, (o, kh, kw, ig)).astype(np.int8)
        wqp = QuantParams(wq(rng, o, 0).scale, np.zeros(o, np.int64), 0, weights)
        w = g.param(f"w{k}", wv, quant=wqp, dtype=weights)
        bias_dtype = np.int64 if storage == DType.i16 else np.int32
        b = g.param(f"b{k}", rng.integers(-40 * wmax, 40 * wmax, o).astype(bias_dtype)) if k % 2 == 0 else None
        attrs = {"strides": (1 + k % 2, 1), "dilations": (1, 1 + (k == 1)), "padding": ("same", "valid")[k % 2]}
        # an output scale for the typical accumulator of full-range inputs, so that few outputs saturate
        s_y = s_x * float(wqp.scale.mean()) * wmax * np.sqrt(ig * kh * kw) * rng.uniform(0.7, 1.5)
        y = g.conv2d(x, w, b, groups=groups, name=f"conv{k}", out_quant=_act(rng, storage, s_y), **attrs)
        g.output(y)
    return g


@pytest.mark.parametrize(
    "storage,weights", [(DType.i8, DType.i8), (DType.i16, DType.i8), (DType.i8, DType.i4)], ids=["s8", "s16", "s4"]
)
def test_grouped_conv_is_bit_exact(check, storage: DType, weights: DType) -> None:
    g = _grouped(storage, weights, seed=160 + len(storage.value) + len(weights.value))
    prog = emit(g).program
    kernels = {layer_for(prog.graph, n, prog.quant.get(n.name)).kernel for n in prog.nodes()}
    # int8 and int16 activations: the grouped kernel; int4 weights: the int4 kernels on dense weights
    assert kernels == ({"rlx_convolve_s4", "rlx_convolve_1x1_s4"} if weights == DType.i4 else {"rlx_convolve_grouped"})
    assert check(g) == 9
