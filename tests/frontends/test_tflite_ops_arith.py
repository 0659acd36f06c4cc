"""Arithmetic builtins against TFLite Micro, bit for bit.

Each case is a one-op graph written by the TFLite exporter, read back by the
importer and run on seeded random inputs plus the edge inputs (storage
limits, zero point) in TFLite Micro and in the reference: every output must
be equal (``compare_with_tflm``; float32 outputs within its float tolerance).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from rlx_edge.frontends.tflite import export_tflite, load_tflite
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.types import QuantParams
from rlx_edge.targets.reference.compare import compare_with_tflm


def q8(scale: float, zp: int) -> QuantParams:
    return QuantParams(np.float32(scale), zp, storage="i8")


def q16(scale: float) -> QuantParams:
    return QuantParams(np.float32(scale), 0, storage="i16")


def g_binary(op: str, dtype: str, qa=None, qb=None, qy=None, b_shape=(2, 3, 10)) -> Graph:
    g = Graph(op)
    a = g.input("a", (2, 3, 10), dtype, quant=qa)
    b = g.input("b", b_shape, dtype, quant=qb)
    g.output(getattr(g, op)(a, b, out_quant=qy))
    return g


CASES: dict[str, Callable[[], Graph]] = {
    "squared_difference_f32": lambda: g_binary("squared_difference", "f32"),
    "squared_difference_f32_broadcast": lambda: g_binary("squared_difference", "f32", b_shape=(3, 1)),
    "squared_difference_i32": lambda: g_binary("squared_difference", "i32", b_shape=(1, 10)),
    # output scale near (range of a - b)**2 / 256: saturation is rare; a small one saturates often
    "squared_difference_i8": lambda: g_binary("squared_difference", "i8", q8(0.05, -3), q8(0.07, 20), q8(0.8, -128)),
    "squared_difference_i8_saturating": lambda: g_binary(
        "squared_difference", "i8", q8(0.02, 5), q8(0.02, 5), q8(0.01, -100)
    ),
    "squared_difference_i8_broadcast": lambda: g_binary(
        "squared_difference", "i8", q8(0.003, 100), q8(0.0031, -50), q8(0.0005, -128), (3, 1)
    ),
    "squared_difference_i16": lambda: g_binary("squared_difference", "i16", q16(0.001), q16(0.0007), q16(0.0004)),
    "squared_difference_i16_broadcast": lambda: g_binary(
        "squared_difference", "i16", q16(0.0002), q16(0.0005), q16(0.00001), (1, 10)
    ),
}


def g_floored(op: str, b_shape) -> Graph:
    """a divided by a constant b of both signs, on a grid of quarters: TFLite Micro refuses a zero
    divisor, and the edge inputs are zeros."""
    g = Graph(op)
    a = g.input("a", (2, 3, 10), "f32")
    rng = np.random.default_rng(7)
    mag = rng.integers(1, 13, b_shape) / 4
    b = g.param("b", (mag * rng.choice([-1, 1], b_shape)).astype(np.float32))
    g.output(getattr(g, op)(a, b))
    return g


for _op in ("floor_div", "floor_mod"):
    # TFLite Micro's FLOOR_DIV and FLOOR_MOD take float32 only
    CASES[f"{_op}_f32"] = lambda op=_op: g_floored(op, (2, 3, 10))
    CASES[f"{_op}_f32_broadcast"] = lambda op=_op: g_floored(op, (3, 1))

for _op in ("maximum", "minimum"):
    # TFLite Micro compares stored values: operands and output quantized alike (as PTQ makes them)
    CASES[f"{_op}_f32_broadcast"] = lambda op=_op: g_binary(op, "f32", b_shape=(3, 1))
    CASES[f"{_op}_i8"] = lambda op=_op: g_binary(op, "i8", q8(0.05, -3), q8(0.05, -3), q8(0.05, -3))
    CASES[f"{_op}_i8_broadcast"] = lambda op=_op: g_binary(op, "i8", q8(0.2, 127), q8(0.2, 127), q8(0.2, 127), (1, 10))
    CASES[f"{_op}_i16_broadcast"] = lambda op=_op: g_binary(op, "i16", q16(0.001), q16(0.001), q16(0.001), (3, 1))


def g_add_n(n: int, dtype: str, q=None, qy=None) -> Graph:
    g = Graph("add_n")
    xs = [g.input(f"x{i}", (2, 3, 10), dtype, quant=q) for i in range(n)]
    g.output(g.add_n(*xs, out_quant=qy))
    return g


CASES["add_n_f32"] = lambda: g_add_n(3, "f32")
# a nonzero zero point: TFLite Micro's sum starts from the scaled -zero_point, not 0
CASES["add_n_i8"] = lambda: g_add_n(3, "i8", q8(0.05, -7), q8(0.09, 11))
CASES["add_n_i8_saturating"] = lambda: g_add_n(4, "i8", q8(0.02, 30), q8(0.03, -128))
CASES["add_n_i8_two"] = lambda: g_add_n(2, "i8", q8(0.1, 0), q8(0.1, 0))


@pytest.mark.parametrize("case", sorted(CASES))
def test_matches_tflm(case: str, tmp_path) -> None:
    path = tmp_path / f"{case}.tflite"
    g = CASES[case]()
    export_tflite(g, path)
    assert [n.op for n in load_tflite(path).nodes] == [n.op for n in g.nodes]
    r = compare_with_tflm(path, n_inputs=30, seed=1)
    assert r.inputs == 30 and r.edge_inputs == 3 and r.compared >= 33
    assert r.mismatches == 0, r.first_mismatch


def test_add_n_with_inputs_quantized_unlike_each_other_is_not_written() -> None:
    """The reference rescales each input on its own; TFLite Micro's ADD_N refuses such a model."""
    from rlx_edge.errors import UnsupportedOpError
    from rlx_edge.frontends.tflite import to_tflite_bytes

    g = Graph("add_n")
    a = g.input("a", (4,), "i8", quant=q8(0.05, -3))
    b = g.input("b", (4,), "i8", quant=q8(0.1, -3))
    g.output(g.add_n(a, b, out_quant=q8(0.1, 0)))
    with pytest.raises(UnsupportedOpError, match="add_n with inputs quantized unlike each other"):
        to_tflite_bytes(g)
