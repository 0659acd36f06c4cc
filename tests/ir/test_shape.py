import pytest

from rlx_edge.errors import IRError
from rlx_edge.ir.shape import as_shape, bind, broadcast, is_static, numel, unify


def test_static_and_symbolic_dims():
    s = as_shape(("N", 8, 8, 1))
    assert not is_static(s)
    assert bind(s, {"N": 4}) == (4, 8, 8, 1)
    assert numel(bind(s, {"N": 4})) == 256
    with pytest.raises(IRError, match="symbolic"):
        numel(s)


def test_bad_dims_are_rejected():
    for bad in [(-1,), (1.5,), ("not a name",)]:
        with pytest.raises(IRError):
            as_shape(bad)


def test_broadcast():
    assert broadcast((4, 1, 3), (5, 1)) == (4, 5, 3)
    assert broadcast(("N", 3), (1, 3)) == ("N", 3)
    with pytest.raises(IRError, match="do not broadcast"):
        broadcast((2, 3), (4, 3))


def test_unify():
    assert unify("N", 3, "x") == 3
    with pytest.raises(IRError, match="batch: 2 != 3"):
        unify(2, 3, "batch")
