"""Reduction builtins against TFLite Micro, bit for bit: ARG_MAX, ARG_MIN, REDUCE_MAX, REDUCE_MIN, SUM.

Each case is a one-op graph written by the TFLite exporter, read back by the
importer and run on seeded random inputs plus the edge inputs (storage
limits, zero point) in TFLite Micro and in the reference: every output must
be equal (``compare_with_tflm``). TFLite Micro runs ARG_MAX, ARG_MIN,
REDUCE_MAX and REDUCE_MIN on float32 and int8 only (int32 indices out), SUM
also on int16, so those are the cases.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from rlx_edge.frontends.tflite import export_tflite, load_tflite
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.types import QuantParams
from rlx_edge.targets.reference.compare import compare_with_tflm

Q8 = QuantParams(np.float32(0.05), -3, storage="i8")


def g_arg(op: str, dtype: str, axis: int, shape=(2, 3, 10)) -> Graph:
    g = Graph(op)
    x = g.input("x", shape, dtype, quant=Q8 if dtype == "i8" else None)
    g.output(getattr(g, op)(x, axis=axis))
    return g


def g_extreme(op: str, dtype: str, axes: tuple[int, ...], keepdims: bool, shape=(2, 3, 10)) -> Graph:
    g = Graph(op)
    x = g.input("x", shape, dtype, quant=Q8 if dtype == "i8" else None)
    g.output(getattr(g, op)(x, axes=axes, keepdims=keepdims))
    return g


CASES: dict[str, Callable[[], Graph]] = {}
for _dt in ("f32", "i8"):
    for _op in ("argmax", "argmin"):
        CASES[f"{_op}_{_dt}_last"] = lambda op=_op, dt=_dt: g_arg(op, dt, -1)
        CASES[f"{_op}_{_dt}_middle"] = lambda op=_op, dt=_dt: g_arg(op, dt, 1)
        CASES[f"{_op}_{_dt}_rank1"] = lambda op=_op, dt=_dt: g_arg(op, dt, 0, shape=(17,))
    for _op in ("reduce_max", "reduce_min"):
        CASES[f"{_op}_{_dt}_outer_inner"] = lambda op=_op, dt=_dt: g_extreme(op, dt, (0, -1), False)
        CASES[f"{_op}_{_dt}_middle_keepdims"] = lambda op=_op, dt=_dt: g_extreme(op, dt, (1,), True)
        CASES[f"{_op}_{_dt}_all_rank4"] = lambda op=_op, dt=_dt: g_extreme(op, dt, (0, 1, 2, 3), False, (1, 4, 5, 3))


def g_sum(dtype: str, axes: tuple[int, ...], keepdims: bool, out_scale: float) -> Graph:
    """SUM: int8 and int16 requantize the offset int32 sum with one multiplier s_x / s_y (no 1/count)."""
    g = Graph("sum")
    q_in = {"f32": None, "i8": Q8, "i16": QuantParams(np.float32(0.001), 0, storage="i16")}[dtype]
    q_out = None if q_in is None else QuantParams(np.float32(out_scale), 4 if dtype == "i8" else 0, storage=dtype)
    g.output(g.sum(g.input("x", (2, 3, 10), dtype, quant=q_in), axes=axes, keepdims=keepdims, out_quant=q_out))
    return g


for _dt in ("f32", "i8", "i16"):
    # an output scale coarser than the input's, and one fine enough for the sum to saturate
    CASES[f"sum_{_dt}_outer_inner"] = lambda dt=_dt: g_sum(dt, (0, -1), False, 0.3 if dt == "i8" else 0.01)
    CASES[f"sum_{_dt}_middle_keepdims_saturating"] = lambda dt=_dt: g_sum(dt, (1,), True, 0.01 if dt == "i8" else 1e-4)


@pytest.mark.parametrize("case", sorted(CASES))
def test_matches_tflm(case: str, tmp_path) -> None:
    path = tmp_path / f"{case}.tflite"
    g = CASES[case]()
    export_tflite(g, path)
    back = load_tflite(path)
    assert [n.op for n in back.nodes] == [n.op for n in g.nodes]
    assert back.nodes[0].attrs == g.nodes[0].attrs
    r = compare_with_tflm(path, n_inputs=30, seed=1)
    assert r.inputs == 30 and r.compared >= 30
    assert r.mismatches == 0, r.first_mismatch


def test_int8_ties_give_the_first_index(tmp_path) -> None:
    """Stored values with many ties (a coarse input): TFLite Micro and the reference both pick the first."""
    from rlx_edge.targets.reference import run

    x = np.array([[1, 3, 3, -2, 3], [-5, -5, 0, -5, 0]], np.int8)
    for op, want in (("argmax", [1, 2]), ("argmin", [3, 0])):
        g = g_arg(op, "i8", -1, shape=(2, 5))
        assert run(g, {"x": x})[g.outputs[0]].tolist() == want, op


def test_argmax_keeping_its_axis_is_not_written() -> None:
    from rlx_edge.errors import UnsupportedOpError
    from rlx_edge.frontends.tflite import to_tflite_bytes

    g = Graph("argmax")
    g.output(g.argmax(g.input("x", (4, 3), "f32"), axis=0, keepdims=True))
    with pytest.raises(UnsupportedOpError, match="argmax keeping the searched axis"):
        to_tflite_bytes(g)
