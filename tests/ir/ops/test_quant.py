"""quantize, dequantize, requantize and cast."""

from __future__ import annotations

import numpy as np
import pytest

from rlx_edge.errors import OpError
from rlx_edge.ir.fixedpoint import round_half_away
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.types import QuantParams
from rlx_edge.targets.reference import run


def quantize(x: np.ndarray, qp: QuantParams, dtype: str = "i8") -> np.ndarray:
    g = Graph()
    v = g.input("x", x.shape, x.dtype)
    g.output(g.quantize(v, dtype=dtype, out_quant=qp, name="q"))
    return run(g, x)["q"]


def dequantize(q: np.ndarray, qp: QuantParams, dtype: str = "f32") -> np.ndarray:
    g = Graph()
    v = g.input("q", q.shape, qp.storage, quant=qp)
    g.output(g.dequantize(v, dtype=dtype, name="y"))
    return run(g, q)["y"]


def test_round_half_away_from_zero() -> None:
    v = np.array([2.5, -2.5, 0.5, -0.5, 1.5, 0.49999997, -0.49999997, 3.0], np.float32)
    np.testing.assert_array_equal(round_half_away(v), [3, -3, 1, -1, 2, 0, 0, 3])


def test_quantize_ties_go_away_from_zero() -> None:
    qp = QuantParams(0.5, 0)
    x = np.array([1.25, -1.25, 0.25, -0.25, 0.75], np.float32)  # x / scale: 2.5, -2.5, 0.5, -0.5, 1.5
    np.testing.assert_array_equal(quantize(x, qp), [3, -3, 1, -1, 2])


def test_quantize_adds_zero_point_after_rounding() -> None:
    q = quantize(np.array([1.25, -1.25], np.float32), QuantParams(0.5, -10))
    np.testing.assert_array_equal(q, [-7, -13])


def test_quantize_clamps_to_dtype_range() -> None:
    x = np.array([1e9, -1e9, 1000.0, -1000.0, np.inf, -np.inf, np.nan], np.float32)
    assert quantize(x, QuantParams(1.0, 5)).tolist() == [127, -128, 127, -128, 127, -128, 5]
    assert quantize(x[:4], QuantParams(1.0, 0, storage="u8"), "u8").tolist() == [255, 0, 255, 0]
    assert quantize(x[:4], QuantParams(1.0, 0, storage="i4"), "i4").tolist() == [7, -8, 7, -8]


def test_quantize_divides_in_float32() -> None:
    # -29.75f / 0.1f is exactly -297.5 in float32 (so -298), but -297.4999... in float64 (so -297)
    qp = QuantParams(np.float32(0.1), 0, storage="i16")
    assert quantize(np.array([-29.75, 29.75], np.float32), qp, "i16").tolist() == [-298, 298]


def test_quantize_per_channel() -> None:
    x = np.array([[1.0, 1.0, 1.0], [-2.0, -2.0, -2.0]], np.float32)
    qp = QuantParams([0.5, 0.25, 1.0], [0, 0, 0], axis=1)
    np.testing.assert_array_equal(quantize(x, qp), [[2, 4, 1], [-4, -8, -2]])
    qp0 = QuantParams([0.5, 0.25], [1, -1], axis=0)
    np.testing.assert_array_equal(quantize(x, qp0), [[3, 3, 3], [-9, -9, -9]])


def test_quantize_per_channel_size_mismatch() -> None:
    with pytest.raises(OpError, match="2 scales but axis 1 has size 3"):
        quantize(np.zeros((2, 3), np.float32), QuantParams([1.0, 1.0], 0, axis=1))


def test_quantize_without_out_quant_names_node() -> None:
    g = Graph()
    x = g.input("x", (2,))
    g.output(g.quantize(x, name="my_q"))
    with pytest.raises(OpError, match=r"'my_q'.*out_quant"):
        run(g, np.zeros(2, np.float32))


def test_quantize_storage_must_match_dtype() -> None:
    with pytest.raises(OpError, match="storage"):
        quantize(np.zeros(2, np.float32), QuantParams(1.0, 0), dtype="i16")


def test_quantize_type_errors() -> None:
    g = Graph()
    x = g.input("x", (2,), "i32")
    with pytest.raises(OpError, match="must be float"):
        g.quantize(x)
    f = g.input("f", (2,))
    with pytest.raises(OpError, match="dtype"):
        g.quantize(f, dtype="f16")


def test_quantize_output_type_carries_quant() -> None:
    g = Graph()
    qp = QuantParams(0.1, 3)
    q = g.quantize(g.input("x", (1, 4)), out_quant=qp)
    assert q.type.dtype.value == "i8" and q.type.quant == qp


def test_dequantize_values_and_inverse() -> None:
    qp = QuantParams(0.5, -3)
    q = np.arange(-128, 128, dtype=np.int8)
    y = dequantize(q, qp)
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y, (q.astype(np.float64) + 3) * 0.5)
    np.testing.assert_array_equal(quantize(y, qp), q)


def test_dequantize_per_channel() -> None:
    qp = QuantParams([1.0, 0.5], [0, 0], axis=-1)
    y = dequantize(np.array([[4, 4], [-2, -2]], np.int8), qp)
    np.testing.assert_array_equal(y, [[4, 2], [-2, -1]])


def test_dequantize_needs_quantized_input() -> None:
    g = Graph()
    with pytest.raises(OpError, match="quantized"):
        g.dequantize(g.input("x", (2,), "i8"))


def test_requantize_float_semantics() -> None:
    g = Graph()
    x = g.input("x", (4,), "i8", quant=QuantParams(0.5, 0))
    g.output(g.requantize(x, out_quant=QuantParams(0.25, 10, storage="i16"), dtype="i16", name="r"))
    out = run(g, np.array([1, -1, 100, -128], np.int8))["r"]
    assert out.dtype == np.int16
    np.testing.assert_array_equal(out, [12, 8, 210, -246])


def test_requantize_saturates() -> None:
    g = Graph()
    x = g.input("x", (2,), "i8", quant=QuantParams(1.0, 0))
    g.output(g.requantize(x, out_quant=QuantParams(0.1, 0), name="r"))
    np.testing.assert_array_equal(run(g, np.array([100, -100], np.int8))["r"], [127, -128])


def cast(x: np.ndarray, dtype: str) -> np.ndarray:
    g = Graph()
    v = g.input("x", x.shape, x.dtype)
    g.output(g.cast(v, dtype=dtype, name="c"))
    return run(g, x)["c"]


def test_cast_float_to_int_truncates_and_saturates() -> None:
    x = np.array([1.9, -1.9, 300.0, -300.0, np.inf, -np.inf, np.nan, 0.5], np.float32)
    assert cast(x, "i8").tolist() == [1, -1, 127, -128, 127, -128, 0, 0]
    assert cast(x, "u8").tolist() == [1, 0, 255, 0, 255, 0, 0, 0]
    assert cast(x, "i4").tolist() == [1, -1, 7, -8, 7, -8, 0, 0]
    big = cast(np.array([1e30, -1e30], np.float64), "i64").tolist()
    assert big == [2**63 - 1, -(2**63)]


def test_cast_int_wraps_and_bool() -> None:
    x = np.array([300, -129, 7, 8, 0], np.int32)
    assert cast(x, "i8").tolist() == [44, 127, 7, 8, 0]
    assert cast(x, "i4").tolist() == [-4, -1, 7, -8, 0]
    assert cast(x, "bool").tolist() == [True, True, True, True, False]
    assert cast(np.array([True, False]), "f32").tolist() == [1.0, 0.0]
    assert cast(np.array([0.0, -0.0, 0.1], np.float32), "bool").tolist() == [False, False, True]


def test_cast_to_bf16_rounds() -> None:
    y = cast(np.array([1 + 2**-10], np.float32), "bf16")
    assert y.dtype == np.float32 and y.tolist() == [1.0]


def test_cast_rejects_quantized_input() -> None:
    g = Graph()
    x = g.input("x", (2,), "i8", quant=QuantParams(0.1, 0))
    with pytest.raises(OpError, match="dequantize"):
        g.cast(x, dtype="i32")


def test_cast_requires_dtype() -> None:
    g = Graph()
    with pytest.raises(OpError, match="dtype"):
        g.cast(g.input("x", (2,)))
