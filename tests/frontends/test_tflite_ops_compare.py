"""Comparison, logical and selection builtins against TFLite Micro, bit for bit.

Each case is a one-op graph written by the TFLite exporter, read back by the
importer and run on seeded random inputs plus the edge inputs (storage
limits, zero point) in TFLite Micro and in the reference: every output must
be equal (``compare_with_tflm``; float comparisons have bool results, so
those are exact too).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from rlx_edge.frontends.tflite import export_tflite, load_tflite
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.types import QuantParams
from rlx_edge.targets.reference.compare import compare_with_tflm

COMPARISONS = ("equal", "not_equal", "greater", "greater_equal", "less", "less_equal")


def q8(scale: float, zp: int) -> QuantParams:
    return QuantParams(np.float32(scale), zp, storage="i8")


def g_compare(op: str, dtype: str = "i8", qa=None, qb=None, b_shape=(2, 3, 10)) -> Graph:
    g = Graph(op)
    a = g.input("a", (2, 3, 10), dtype, quant=qa)
    b = g.input("b", b_shape, dtype, quant=qb)
    g.output(getattr(g, op)(a, b))
    return g


CASES: dict[str, Callable[[], Graph]] = {}
for _op in COMPARISONS:
    # scales 0.05 and 0.1 rescale to multiples of 12.8 and 25.6 (in 1/256): rounding makes ties
    CASES[f"{_op}_i8"] = lambda op=_op: g_compare(op, "i8", q8(0.05, -3), q8(0.1, 20))
    CASES[f"{_op}_i8_same_scale"] = lambda op=_op: g_compare(op, "i8", q8(0.02, 0), q8(0.02, 0))
    CASES[f"{_op}_i8_broadcast"] = lambda op=_op: g_compare(op, "i8", q8(0.003, 100), q8(0.0031, -50), (3, 1))
    CASES[f"{_op}_f32_broadcast"] = lambda op=_op: g_compare(op, "f32", b_shape=(1, 10))
    CASES[f"{_op}_i32"] = lambda op=_op: g_compare(op, "i32")
for _op in ("equal", "not_equal"):
    CASES[f"{_op}_bool"] = lambda op=_op: g_compare(op, "bool", b_shape=(3, 1))


def g_logical(op: str, b_shape=(2, 3, 10)) -> Graph:
    g = Graph(op)
    a = g.input("a", (2, 3, 10), "bool")
    args = [a] if op == "logical_not" else [a, g.input("b", b_shape, "bool")]
    g.output(getattr(g, op)(*args))
    return g


CASES["logical_not"] = lambda: g_logical("logical_not")
for _op in ("logical_and", "logical_or"):
    CASES[_op] = lambda op=_op: g_logical(op)
    CASES[f"{_op}_broadcast"] = lambda op=_op: g_logical(op, (3, 1))


def g_select(dtype: str, q=None) -> Graph:
    g = Graph("select_v2")
    c = g.input("c", (2, 1, 5), "bool")
    x = g.input("x", (2, 3, 5), dtype, quant=q)
    y = g.input("y", (5,), dtype, quant=q)
    g.output(g.select_v2(c, x, y, out_quant=q))
    return g


CASES["select_v2_i8"] = lambda: g_select("i8", q8(0.05, -3))
CASES["select_v2_i16"] = lambda: g_select("i16", QuantParams(np.float32(0.001), 0, storage="i16"))
CASES["select_v2_f32"] = lambda: g_select("f32")


@pytest.mark.parametrize("case", sorted(CASES))
def test_matches_tflm(case: str, tmp_path) -> None:
    path = tmp_path / f"{case}.tflite"
    g = CASES[case]()
    export_tflite(g, path)
    assert [n.op for n in load_tflite(path).nodes] == [n.op for n in g.nodes]
    r = compare_with_tflm(path, n_inputs=30, seed=1)
    assert r.inputs == 30 and r.edge_inputs == 3 and r.compared >= 33
    assert r.mismatches == 0, r.first_mismatch


def test_int8_comparisons_round_to_256ths() -> None:
    """0.05 * 3 = 0.15 and 0.0297 * 5 = 0.1485 both rescale to 38 / 256: equal, and not greater, as in
    TFLite Micro (its kernel compares round(real * 256), not the real values)."""
    from rlx_edge.targets.reference import run

    feed = {"a": np.full((2, 3, 10), 3, np.int8), "b": np.array([5], np.int8)}
    for op, want in (("equal", True), ("greater", False), ("less_equal", True)):
        g = g_compare(op, "i8", q8(0.05, 0), q8(0.0297, 0), b_shape=(1,))
        assert run(g, feed)[g.outputs[0]].all() == want, op


def test_select_v2_with_operands_quantized_unlike_its_output_is_not_written() -> None:
    """The reference requantizes such an operand; TFLite Micro would copy its stored values."""
    from rlx_edge.errors import UnsupportedOpError
    from rlx_edge.frontends.tflite import to_tflite_bytes

    g = Graph("select_v2")
    c = g.input("c", (4,), "bool")
    x = g.input("x", (4,), "i8", quant=q8(0.05, -3))
    y = g.input("y", (4,), "i8", quant=q8(0.1, -3))
    g.output(g.select_v2(c, x, y, out_quant=q8(0.05, -3)))
    with pytest.raises(UnsupportedOpError, match="select_v2 with x or y quantized unlike its output"):
        to_tflite_bytes(g)
