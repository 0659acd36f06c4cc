import numpy as np
import pytest

from rlx_edge.errors import IRError
from rlx_edge.ir.dtype import DType, as_dtype, promote, round_to_bf16


def test_every_dtype_maps_to_numpy_and_back_where_numpy_has_it():
    for dt in DType:
        assert isinstance(dt.numpy, np.dtype)
        if dt not in (DType.bf16, DType.i4):
            assert as_dtype(dt.numpy) == dt


def test_integer_ranges():
    assert (DType.i8.min, DType.i8.max) == (-128, 127)
    assert (DType.i4.min, DType.i4.max) == (-8, 7)
    assert (DType.u8.min, DType.u8.max) == (0, 255)
    assert DType.i4.bits == 4 and DType.bf16.bits == 16


@pytest.mark.parametrize(
    "a,b,want",
    [
        ("f32", "f16", "f32"),
        ("f16", "bf16", "f32"),
        ("bf16", "bf16", "bf16"),
        ("i8", "f16", "f16"),
        ("u8", "i8", "i16"),
        ("i4", "i8", "i8"),
        ("i32", "u8", "i32"),
        ("bool", "i8", "i8"),
        ("i64", "u8", "i64"),
    ],
)
def test_promotion(a, b, want):
    assert promote(DType[a], DType[b]) == DType[want]
    assert promote(DType[b], DType[a]) == DType[want]


def test_aliases_and_bad_names():
    assert as_dtype("int8") == DType.i8
    assert as_dtype(np.float32) == DType.f32
    with pytest.raises(IRError, match="unknown dtype"):
        as_dtype("float128x")


def test_bf16_rounding_is_to_nearest_even():
    x = np.array([1.0, 1.00390625, 1.01171875, -3.3], np.float32)  # 1+2^-8 is a tie: stays 1.0
    r = round_to_bf16(x)
    assert r[0] == 1.0 and r[1] == 1.0 and r[2] == 1.015625
    assert (r.view(np.uint32) & 0xFFFF == 0).all()
