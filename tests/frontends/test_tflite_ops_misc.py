"""LOG_SOFTMAX and HARD_SWISH against TFLite Micro, bit for bit.

Each case is a one-op graph written by the TFLite exporter, read back by the
importer and run on seeded random inputs plus the edge inputs (storage
limits, zero point) in TFLite Micro and in the reference: every output must
be equal (``compare_with_tflm``). TFLite Micro runs LOG_SOFTMAX on float32
and int8 (output fixed at scale 16/256, zero point 127), so those are the
cases; the int8 input scales span rows whose differences all count (a fine
scale), rows cut at diff_min (a coarse one) and one-element rows. HARD_SWISH
runs on float32 and int8: the int8 scales give its reluish multiplier a left
shift (coarse inputs), none, and a right shift (fine inputs), with zero points
at the storage limits.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from rlx_edge.frontends.tflite import export_tflite, load_tflite
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.types import QuantParams
from rlx_edge.targets.reference.compare import compare_with_tflm

LOG_SOFTMAX_OUT = QuantParams(np.float32(16 / 256), 127, storage="i8")


def g_log_softmax(dtype: str, shape: tuple[int, ...], in_scale: float = 0.1, zero_point: int = -3) -> Graph:
    g = Graph("log_softmax")
    quant = QuantParams(np.float32(in_scale), zero_point, storage="i8") if dtype == "i8" else None
    x = g.input("x", shape, dtype, quant=quant)
    g.output(g.log_softmax(x, axis=-1, out_quant=LOG_SOFTMAX_OUT if dtype == "i8" else None))
    return g


CASES: dict[str, Callable[[], Graph]] = {
    "log_softmax_f32_rank2": lambda: g_log_softmax("f32", (3, 10)),
    "log_softmax_f32_rank4": lambda: g_log_softmax("f32", (1, 2, 3, 7)),
    "log_softmax_i8_rank2": lambda: g_log_softmax("i8", (4, 10)),
    "log_softmax_i8_fine_scale": lambda: g_log_softmax("i8", (2, 33), in_scale=0.004, zero_point=10),
    "log_softmax_i8_coarse_scale": lambda: g_log_softmax("i8", (3, 12), in_scale=0.5),
    "log_softmax_i8_very_coarse_rank4": lambda: g_log_softmax("i8", (1, 2, 3, 5), in_scale=4.0, zero_point=0),
    "log_softmax_i8_one_element_rows": lambda: g_log_softmax("i8", (6, 1)),
    "log_softmax_i8_long_rank1": lambda: g_log_softmax("i8", (300,), in_scale=0.02),
}


def g_hard_swish(dtype: str, s_x: float = 0.04, zp_x: int = -50, s_y: float = 0.03, zp_y: int = -20) -> Graph:
    g = Graph("hard_swish")
    in_q = QuantParams(np.float32(s_x), zp_x, storage="i8") if dtype == "i8" else None
    out_q = QuantParams(np.float32(s_y), zp_y, storage="i8") if dtype == "i8" else None
    g.output(g.hard_swish(g.input("x", (2, 150), dtype, quant=in_q), out_quant=out_q))
    return g


CASES.update({
    "hard_swish_f32": lambda: g_hard_swish("f32"),
    "hard_swish_i8": lambda: g_hard_swish("i8"),
    "hard_swish_i8_coarse": lambda: g_hard_swish("i8", 1.99, 64, 4.2, -68),
    "hard_swish_i8_reluish_unshifted": lambda: g_hard_swish("i8", 0.008, 0, 0.007, 5),
    "hard_swish_i8_fine": lambda: g_hard_swish("i8", 0.002, 10, 0.002, -120),
    # scales where the reluish factor's rounding right shift decides one input's output
    "hard_swish_i8_fine_rounding": lambda: g_hard_swish("i8", 0.005460298433, -95, 0.002704952542, 58),
    "hard_swish_i8_zero_point_limits": lambda: g_hard_swish("i8", 0.1, -128, 0.05, 127),
})  # fmt: skip


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


def g_l2_normalize(dtype: str, shape: tuple[int, ...], in_scale: float = 0.05, zero_point: int = -3) -> Graph:
    g = Graph("l2_normalize")
    in_q = QuantParams(np.float32(in_scale), zero_point, storage="i8") if dtype == "i8" else None
    out_q = QuantParams(np.float32(1 / 128), 0, storage="i8") if dtype == "i8" else None
    g.output(g.l2_normalize(g.input("x", shape, dtype, quant=in_q), axis=-1, out_quant=out_q))
    return g


L2_CASES: dict[str, Callable[[], Graph]] = {
    "l2_normalize_f32_rank2": lambda: g_l2_normalize("f32", (3, 10)),
    "l2_normalize_f32_rank4": lambda: g_l2_normalize("f32", (1, 2, 3, 7)),
    "l2_normalize_i8_rank2": lambda: g_l2_normalize("i8", (4, 10)),
    # long rows: sums of squares past 2**29, where the inverse square root renormalizes
    "l2_normalize_i8_long_rows": lambda: g_l2_normalize("i8", (2, 1000), zero_point=127),
    "l2_normalize_i8_one_element_rows": lambda: g_l2_normalize("i8", (6, 1), zero_point=0),
    "l2_normalize_i8_rank4": lambda: g_l2_normalize("i8", (1, 2, 3, 5), in_scale=0.5, zero_point=-128),
}


@pytest.mark.parametrize("case", sorted(L2_CASES))
def test_l2_normalize_matches_tflm(case: str, tmp_path) -> None:
    path = tmp_path / f"{case}.tflite"
    g = L2_CASES[case]()
    export_tflite(g, path)
    assert [n.op for n in load_tflite(path).nodes] == ["l2_normalize"]
    r = compare_with_tflm(path, n_inputs=30, seed=2)
    assert r.inputs == 30 and r.compared >= 30
    assert r.mismatches == 0, r.first_mismatch
