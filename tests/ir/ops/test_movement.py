"""The data-movement ops of ``ir/ops/movement.py``: TensorFlow's documented examples, inverses, errors."""

from __future__ import annotations

import numpy as np
import pytest

from rlx_edge.errors import OpError
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.ops import REGISTRY
from rlx_edge.ir.types import QuantParams
from rlx_edge.targets.reference import run


def ref(op: str, *xs, **attrs):
    out = REGISTRY[op].run_reference(list(xs), REGISTRY[op].normalize_attrs(attrs))
    return out[0] if len(out) == 1 else out


def test_mirror_pad_modes_as_tensorflow_documents() -> None:
    x = np.array([1, 2, 3])
    assert ref("mirror_pad", x, pads=(2, 2), mode="reflect").tolist() == [3, 2, 1, 2, 3, 2, 1]
    assert ref("mirror_pad", x, pads=(2, 2), mode="symmetric").tolist() == [2, 1, 1, 2, 3, 3, 2]


def test_depth_to_space_is_dcr_and_inverts_space_to_depth() -> None:
    x = np.array([1, 2, 3, 4]).reshape(1, 1, 1, 4)
    assert ref("depth_to_space", x, block_size=2).reshape(2, 2).tolist() == [[1, 2], [3, 4]]
    y = np.arange(2 * 4 * 6 * 3).reshape(2, 4, 6, 3)
    assert np.array_equal(ref("depth_to_space", ref("space_to_depth", y, block_size=2), block_size=2), y)


def test_space_to_batch_as_tensorflow_documents_and_batch_to_space_inverts_it() -> None:
    x = np.arange(1, 17).reshape(1, 4, 4, 1)
    y = ref("space_to_batch_nd", x, block_shape=(2, 2), pads=(0, 0, 0, 0))
    assert y[:, :, :, 0].tolist() == [[[1, 3], [9, 11]], [[2, 4], [10, 12]], [[5, 7], [13, 15]], [[6, 8], [14, 16]]]
    z = np.arange(2 * 3 * 5 * 2).reshape(2, 3, 5, 2)
    padded = ref("space_to_batch_nd", z, block_shape=(2, 3), pads=(1, 0, 0, 1))
    assert padded.shape == (12, 2, 2, 2)
    assert np.array_equal(ref("batch_to_space_nd", padded, block_shape=(2, 3), crops=(1, 0, 0, 1)), z)


def test_gather_takes_like_numpy_with_batch_dims() -> None:
    x = np.arange(24).reshape(2, 3, 4)
    idx = np.array([[2, 0], [1, 1]], np.int32)
    assert np.array_equal(ref("gather", x, idx, axis=1), np.take(x, idx, axis=1))
    got = ref("gather", x, idx, axis=2, batch_dims=1)
    assert np.array_equal(got, np.stack([np.take(x[b], idx[b], axis=1) for b in range(2)]))
    assert np.array_equal(ref("gather_nd", x, np.array([[1, 2], [0, -1]], np.int32)), np.stack([x[1, 2], x[0, -1]]))


@pytest.mark.parametrize(
    "op,shape,attrs,message",
    [
        ("mirror_pad", (3,), {"pads": (3, 0), "mode": "reflect"}, "exceed 2"),
        ("space_to_depth", (1, 3, 4, 1), {"block_size": 2}, "multiples of block_size 2"),
        ("unstack", (2, 3), {"axis": 1, "num": 2}, "num=2 but axis 1"),
        ("broadcast_to", (2, 3), {"shape": (4, 3)}, "cannot become 4"),
        ("batch_to_space_nd", (3, 2, 1), {"block_shape": (2,), "crops": (0, 0)}, "not a multiple of the block size 2"),
    ],
)
def test_bad_calls_are_one_line_op_errors(op, shape, attrs, message) -> None:
    g = Graph("bad")
    x = g.input("x", shape, "f32")
    with pytest.raises(OpError, match=message):
        g.add_node(op, [x], attrs)


def test_gather_index_out_of_range_names_it() -> None:
    with pytest.raises(OpError, match="gather: index 3 is out of range for axis 0 of size 3"):
        ref("gather", np.zeros(3), np.array([0, 3], np.int32))


def test_stack_requantizes_inputs_on_other_parameters_like_concat() -> None:
    g = Graph("stack")
    a = g.input("a", (4,), "i8", quant=QuantParams(np.float32(0.1), 0, storage="i8"))
    b = g.input("b", (4,), "i8", quant=QuantParams(np.float32(0.05), 3, storage="i8"))
    out_q = QuantParams(np.float32(0.1), 0, storage="i8")
    g.output(g.stack(a, b, axis=0, out_quant=out_q), g.concat(a, b, axis=0, out_quant=out_q))
    xa, xb = np.array([1, -5, 127, -128], np.int8), np.array([-128, 0, 3, 127], np.int8)
    got = run(g, {"a": xa, "b": xb})
    s, c = (got[o] for o in g.outputs)
    assert np.array_equal(s.reshape(-1), c) and np.array_equal(s[0], xa)
    assert not np.array_equal(s[1], xb)  # b was rescaled onto the output's parameters


def test_space_to_batch_pads_quantized_tensors_with_stored_zero_as_tflite_micro() -> None:
    g = Graph("s2b")
    q = QuantParams(np.float32(0.1), -7, storage="i8")
    x = g.input("x", (1, 1, 1), "i8", quant=q)
    g.output(g.space_to_batch_nd(x, block_shape=(2,), pads=(0, 1), out_quant=q))
    assert run(g, {"x": np.array([[[5]]], np.int8)})[g.outputs[0]].reshape(-1).tolist() == [5, 0]
