import numpy as np
import pytest

from rlx_edge.errors import IRError, OpError
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.passes.bind_symbols import bind_symbols
from rlx_edge.ir.types import QuantParams
from rlx_edge.targets.reference import run


def _tiny(batch=1):
    g = Graph("tiny")
    x = g.input("x", (batch, 6, 6, 2), "f32")
    w = g.param("w", np.arange(4 * 3 * 3 * 2, dtype=np.float32).reshape(4, 3, 3, 2) / 50)
    b = g.param("b", np.ones(4, np.float32))
    y = g.conv2d(x, w, b, strides=(2, 2), padding="same", activation="relu")
    g.output(y)
    return g, y


def test_builder_infers_types_and_names():
    g, y = _tiny()
    assert y.name == "conv2d_0"
    assert y.shape == (1, 3, 3, 4) and str(y.dtype) == "f32"
    assert g.nodes[0].attrs["strides"] == (2, 2)
    assert g.nodes[0].id == 0


def test_builder_rejects_bad_attrs_naming_the_node():
    g, y = _tiny()
    with pytest.raises(OpError, match=r"node 'bad' \(conv2d\).*no attribute stride\b"):
        g.conv2d(y, g.param("w2", np.ones((1, 1, 1, 4), np.float32)), stride=2, name="bad")
    with pytest.raises(OpError, match="'same', 'explicit'"):
        g.conv2d(y, "w", padding="full")
    with pytest.raises(OpError, match="input channels"):
        g.conv2d(y, "w")  # w expects 2 input channels, y has 4


def test_duplicate_names_are_rejected():
    g, _ = _tiny()
    with pytest.raises(IRError, match="already has a value named 'x'"):
        g.input("x", (1,), "f32")


def test_params_are_read_only_copies():
    g = Graph()
    a = np.ones(3, np.float32)
    t = g.param("a", a)
    a[0] = 7
    assert g.params[t.name][0] == 1
    assert not g.params[t.name].flags.writeable


def test_quantized_output_types():
    g = Graph()
    x = g.input("x", (1, 4), "i8", quant=QuantParams([0.5], [3]))
    y = g.relu(x, out_quant=QuantParams([0.5], [3]))
    assert y.type.quant is not None and y.dtype.value == "i8"


def test_symbolic_batch_and_binding():
    g, y = _tiny(batch="N")
    assert g.types[y.name].shape == ("N", 3, 3, 4)
    bound = bind_symbols(g, {"N": 5})
    assert bound.types[y.name].shape == (5, 3, 3, 4)
    assert g.types[y.name].shape == ("N", 3, 3, 4)  # the original is untouched
    x = np.random.default_rng(0).random((5, 6, 6, 2), dtype=np.float32)
    np.testing.assert_array_equal(run(g, x)[y.name], run(bound, x)[y.name])
    with pytest.raises(IRError, match="no symbol M"):
        bind_symbols(g, {"M": 2})


def test_reference_checks_input_shape_and_dtype():
    g, _ = _tiny()
    from rlx_edge.errors import RlxError

    with pytest.raises(RlxError, match=r"must be f32"):
        run(g, np.ones((1, 6, 6, 2), np.float64))
    with pytest.raises(RlxError, match=r"must have shape \[1,6,6,2\]"):
        run(g, np.ones((1, 6, 5, 2), np.float32))


def test_conv_reference_against_direct_loops():
    g, y = _tiny()
    x = np.random.default_rng(1).standard_normal((1, 6, 6, 2)).astype(np.float32)
    got = run(g, x)[y.name]
    w, b = g.params["w"], g.params["b"]
    xp = np.pad(x, ((0, 0), (0, 1), (0, 1), (0, 0)))  # SAME, stride 2 on 6: total pad 1, after
    want = np.zeros((1, 3, 3, 4), np.float64)
    for i in range(3):
        for j in range(3):
            for o in range(4):
                want[0, i, j, o] = (xp[0, 2 * i : 2 * i + 3, 2 * j : 2 * j + 3, :] * w[o]).sum() + b[o]
    # float32 einsum vs float64 loops: summation order and precision differ
    np.testing.assert_allclose(got, np.maximum(want, 0), rtol=1e-5, atol=1e-5)
