"""TFLite's data-movement builtins against TFLite Micro, bit for bit, and through import and export.

Each case is a one-op graph built with the graph builder (float32, int8 and
int16 wherever TFLite Micro has the kernel), written by the exporter and run
by :func:`~rlx_edge.targets.reference.compare.compare_with_tflm` on seeded
random and edge inputs: every output must equal TFLite Micro's. Moving
values never rounds, so float outputs are compared exactly too.
"""

from __future__ import annotations

import numpy as np
import pytest
from tflite.Model import Model

from rlx_edge.errors import ModelFileError, UnsupportedOpError
from rlx_edge.frontends import _tflite_export
from rlx_edge.frontends._tflite_schema import OP_NAMES
from rlx_edge.frontends.tflite import export_tflite, load_tflite, load_tflite_bytes, to_tflite_bytes
from rlx_edge.ir.dtype import DType
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.ops import get_op
from rlx_edge.ir.types import QuantParams, TensorType
from rlx_edge.targets.reference import run
from rlx_edge.targets.reference.compare import compare_with_tflm
from tflitefiles import hand_made

_QUANT = {
    "f32": None,
    "i8": QuantParams(np.float32(0.05), -7, storage="i8"),
    "i16": QuantParams(np.float32(0.001), 0, storage="i16"),
}
ALL = ("f32", "i8", "i16")
NO_INT16 = ("f32", "i8")  # TFLite Micro's kernel takes no int16


def _graph(op: str, dtype: str, in_shape: tuple[int, ...], n_inputs: int, attrs: dict) -> Graph:
    g = Graph(f"{op}_{dtype}")
    q = _QUANT[dtype]
    attrs = dict(attrs)
    xs = [g.input(f"x{i}", in_shape, dtype, quant=q) for i in range(n_inputs)]
    xs += [g.param(f"c{i}", a) for i, a in enumerate(attrs.pop("operands", ()))]  # constant operands (indices)
    n_out = get_op(op).count_outputs(get_op(op).normalize_attrs(attrs))
    g.output(*g.add_node(op, xs, attrs, out_quant=[q] * n_out))
    return g


# (op, shape, inputs, attrs, the builtins the file holds, the dtypes TFLite Micro's kernel takes)
CASES: dict[str, tuple] = {
    "expand_dims": ("unsqueeze", (2, 3, 4), 1, {"axes": (-2,)}, {"EXPAND_DIMS"}, ALL),
    "expand_dims_front": ("unsqueeze", (5,), 1, {"axes": (0,)}, {"EXPAND_DIMS"}, ALL),
    "squeeze": ("squeeze", (1, 3, 1, 4), 1, {"axes": (0, -2)}, {"SQUEEZE"}, ALL),
    "pack": ("stack", (2, 3), 3, {"axis": 1}, {"PACK"}, ALL),
    "pack_last": ("stack", (2, 3), 2, {"axis": -1}, {"PACK"}, ALL),
    "unpack": ("unstack", (2, 3, 4), 1, {"axis": 1, "num": 3}, {"UNPACK"}, ALL),
    "split_v": ("split", (2, 7, 3), 1, {"axis": 1, "sizes": (2, 4, 1)}, {"SPLIT_V"}, ALL),
    "split_equal": ("split", (2, 6, 3), 1, {"axis": -2, "sizes": (2, 2, 2)}, {"SPLIT"}, ALL),
    "slice": ("slice", (4, 7, 5), 1, {"begin": (1, -5, 0), "end": (3, 2**31 - 1, 9), "strides": None}, {"SLICE"}, ALL),
    # a backwards walk of one element is one element: still SLICE
    "slice_one_backwards": ("slice", (3, 4), 1, {"begin": (2, 1), "end": (1, 3), "strides": (-1, 1)}, {"SLICE"}, ALL),
    "strided_slice": (
        "slice",
        (4, 7, 5),
        1,
        {"begin": (1, -1, 0), "end": (4, -(2**31), 5), "strides": (2, -2, 1)},
        {"STRIDED_SLICE"},
        ALL,
    ),
    "reverse": (
        "slice",
        (3, 4, 2),
        1,
        {"begin": (0, -1, -1), "end": (2**31 - 1, -(2**31), -(2**31)), "strides": (1, -1, -1)},
        {"REVERSE_V2"},
        ALL,
    ),
    # TFLite Micro reverses contiguous axes only: axes 0 and 2 are a strided slice
    "reverse_apart": (
        "slice",
        (3, 4, 2),
        1,
        {"begin": (-1, 0, 5), "end": (-(2**31), 2**31 - 1, -3), "strides": (-1, 1, -1)},
        {"STRIDED_SLICE"},
        ALL,
    ),
    "padv2": (
        "pad",
        (1, 3, 4, 2),
        1,
        {"pads": (0, 0, 1, 2, 2, 1, 0, 0), "value": 0.35},
        {"PADV2"},
        ALL,
    ),
    "mirror_pad_reflect": (
        "mirror_pad",
        (2, 4, 5),
        1,
        {"pads": (1, 0, 3, 2, 0, 4), "mode": "reflect"},
        {"MIRROR_PAD"},
        NO_INT16,
    ),
    "mirror_pad_symmetric": (
        "mirror_pad",
        (3, 4),
        1,
        {"pads": (3, 1, 0, 4), "mode": "symmetric"},
        {"MIRROR_PAD"},
        NO_INT16,
    ),
    "space_to_depth": ("space_to_depth", (1, 6, 4, 3), 1, {"block_size": 2}, {"SPACE_TO_DEPTH"}, NO_INT16),
    "depth_to_space": ("depth_to_space", (1, 2, 3, 8), 1, {"block_size": 2}, {"DEPTH_TO_SPACE"}, NO_INT16),
    "space_to_batch_nd": (
        "space_to_batch_nd",
        (1, 5, 4, 3),
        1,
        {"block_shape": (2, 3), "pads": (1, 0, 1, 1)},
        {"SPACE_TO_BATCH_ND"},
        NO_INT16,
    ),
    "batch_to_space_nd": (
        "batch_to_space_nd",
        (6, 2, 3, 2),
        1,
        {"block_shape": (2, 3), "crops": (1, 0, 2, 1)},
        {"BATCH_TO_SPACE_ND"},
        NO_INT16,
    ),
    "broadcast_to": ("broadcast_to", (3, 1), 1, {"shape": (2, 3, 4)}, {"BROADCAST_TO"}, ALL),
    "unsqueeze_two_axes": ("unsqueeze", (3, 4), 1, {"axes": (0, 2)}, {"RESHAPE"}, ALL),
    "gather": (
        "gather",
        (4, 5, 3),
        1,
        {"axis": 1, "operands": (np.array([[4, 0], [2, 2], [1, 3]], np.int32),)},
        {"GATHER"},
        NO_INT16,
    ),
    # TFLite Micro's GATHER reads int32 positions in [0, n): negative and int64 constants are written so
    "gather_negative_int64": (
        "gather",
        (4, 5, 3),
        1,
        {"axis": -3, "operands": (np.array([[-1, 0], [2, -4]], np.int64),)},
        {"GATHER"},
        NO_INT16,
    ),
    "gather_batch_dims": (
        "gather",
        (2, 5, 3),
        1,
        {"axis": 2, "batch_dims": 1, "operands": (np.array([[2, 0, 0, 1], [1, 1, 2, 0]], np.int32),)},
        {"GATHER"},
        NO_INT16,
    ),
    "gather_nd": (
        "gather_nd",
        (4, 3, 2),
        1,
        {"operands": (np.array([[[3, 1], [0, 2]], [[1, 0], [3, 2]]], np.int32),)},
        {"GATHER_ND"},
        NO_INT16,
    ),
}
PARAMS = [(case, dt) for case, spec in CASES.items() for dt in spec[5]]


def _build(case: str, dtype: str) -> Graph:
    op, shape, n, attrs, _, _ = CASES[case]
    return _graph(op, dtype, shape, n, attrs)


@pytest.mark.parametrize("case,dtype", PARAMS, ids=[f"{c}-{d}" for c, d in PARAMS])
def test_matches_tflm(case: str, dtype: str, tmp_path) -> None:
    path = tmp_path / f"{case}_{dtype}.tflite"
    export_tflite(_build(case, dtype), path)
    r = compare_with_tflm(path, n_inputs=20, seed=3, atol=0.0, rtol=0.0)
    assert r.inputs == 20 and r.compared >= 23
    assert r.mismatches == 0, r.first_mismatch


def _builtins(data: bytes) -> set[str]:
    m = Model.GetRootAs(data, 0)
    return {OP_NAMES[max(m.OperatorCodes(i).BuiltinCode(), m.OperatorCodes(i).DeprecatedBuiltinCode())]
            for i in range(m.OperatorCodesLength())}  # fmt: skip


@pytest.mark.parametrize("case", sorted(CASES))
def test_round_trip(case: str) -> None:
    """The file holds the builtin named and reads back to a graph that computes the same."""
    g = _build(case, "i8")
    data = to_tflite_bytes(g)
    assert _builtins(data) == CASES[case][4]
    back = load_tflite_bytes(data)
    again = to_tflite_bytes(back)  # names may change once (split's "y:1" is read back as "y_1"), then stay
    assert _builtins(again) == CASES[case][4] and to_tflite_bytes(load_tflite_bytes(again)) == again
    rng = np.random.default_rng(5)
    feeds = {n: rng.integers(-128, 128, tuple(g.types[n].shape)).astype(np.int8) for n in g.inputs}
    want, got = run(g, feeds), run(back, feeds)
    for a, b in zip(g.outputs, back.outputs):
        assert np.array_equal(want[a], got[b]), case


def test_reverse_v2_imports_as_a_backwards_slice(tmp_path) -> None:
    """REVERSE_V2 with a negative axis, which the exporter never writes, from a file written by hand."""
    g = Graph("reverse")
    x = g.input("x", (3, 4, 2), "f32")
    g.output(g.slice(x, begin=(0, -1, -1), end=(2**31 - 1, -(2**31), -(2**31)), strides=(1, -1, -1)))
    w = _tflite_export._Writer(g)
    ins = [w.tensor("x"), w.const_i32("axes", [1, -1])]
    w.ops.append(_tflite_export._OpOut("REVERSE_V2", ins, [w.tensor(g.outputs[0])]))
    path = tmp_path / "reverse.tflite"
    path.write_bytes(w.build())
    back = load_tflite(path)
    assert [(n.op, n.attrs["strides"]) for n in back.nodes] == [("slice", (1, -1, -1))]
    r = compare_with_tflm(path, n_inputs=10, seed=1, atol=0.0, rtol=0.0)
    assert r.mismatches == 0 and r.compared >= 13, r.first_mismatch


# shape-only builtins: folded to constants at import -----------------------------------------
def _shape_case(kind: str, dtype: str) -> bytes:
    q = _QUANT[dtype]
    i32 = TensorType((3,), DType.i32)
    g = Graph(kind)
    if kind in ("shape", "broadcast_args"):
        # TFLite Micro's BROADCAST_TO and RESHAPE take constant shapes only: the folded shape is an output
        x = g.input("x", (2, 1, 4), dtype, quant=q)
        g.output(g.relu(x, out_quant=q, name="y"), g.param("s", np.array([2, 3, 4], np.int32)))
        if kind == "shape":
            g.input("like", (2, 3, 4), "f32")
            ops = [("RELU", ["x"], ["y"], None, {}), ("SHAPE", ["like"], ["s"], "ShapeOptions", {"OutType": 2})]
            return hand_made(g, ops, {"s": (None, i32)})
        ops = [("RELU", ["x"], ["y"], None, {}), ("BROADCAST_ARGS", ["a", "b"], ["s"], None, {})]
        extra = {
            "a": (np.array([3, 1], np.int32), TensorType((2,), DType.i32)),
            "b": (np.array([2, 1, 4], np.int32), i32),
            "s": (None, i32),
        }
        return hand_made(g, ops, extra)
    x = g.input("x", (2, 3, 4), dtype, quant=q)
    z = g.param("z", np.zeros((2, 3, 4), DType(dtype).numpy), quant=q)  # stands for the folded tensor
    g.output(g.stack(x, z, axis=0, name="y", out_quant=q))
    t = TensorType((2, 3, 4), DType(dtype), q)
    pack = ("PACK", ["x", "z"], ["y"], "PackOptions", {"ValuesCount": 2, "Axis": 0})
    if kind == "zeros_like":
        return hand_made(g, [("ZEROS_LIKE", ["x"], ["z"], None, {}), pack], {"z": (None, t)})
    value = np.array(5, np.int8) if dtype != "f32" else np.array(1.75, np.float32)
    extra = {
        "dims": (np.array([2, 3, 4], np.int32), i32),
        "value": (value, TensorType((), DType(dtype), q)),
        "z": (None, t),
    }
    return hand_made(g, [("FILL", ["dims", "value"], ["z"], None, {}), pack], extra)


SHAPE_ONLY = [(k, d) for k in ("shape", "broadcast_args", "zeros_like", "fill") for d in ("f32", "i8")]


@pytest.mark.parametrize("kind,dtype", SHAPE_ONLY, ids=[f"{k}-{d}" for k, d in SHAPE_ONLY])
def test_shape_only_ops_fold_at_import(kind: str, dtype: str, tmp_path) -> None:
    path = tmp_path / f"{kind}_{dtype}.tflite"
    path.write_bytes(_shape_case(kind, dtype))
    g = load_tflite(path)
    assert len(g.nodes) == 1  # the folded op is gone: only the other operator is left
    r = compare_with_tflm(path, n_inputs=10, seed=2, atol=0.0, rtol=0.0)
    assert r.mismatches == 0 and r.compared >= 13, r.first_mismatch


def test_strided_slice_masks_and_negative_strides_from_a_file(tmp_path) -> None:
    """Begin, end and shrink masks with negative strides, as converters write them, against TFLite Micro."""
    g = Graph("strided")
    x = g.input("x", (5, 6, 4), "i8", quant=_QUANT["i8"])
    g.output(g.reshape(x, shape=(5, 6, 4), out_quant=_QUANT["i8"], name="y"))  # stands for the sliced output
    i32 = TensorType((3,), DType.i32)
    extra = {
        "begin": (np.array([3, 100, 2], np.int32), i32),  # axis 1 from its begin mask (the last element)
        "end": (np.array([-7, 1, 0], np.int32), i32),  # axis 0 through the first element (clamped)
        "strides": (np.array([-2, -1, 1], np.int32), i32),
    }
    opts = {"BeginMask": 0b010, "EndMask": 0b000, "ShrinkAxisMask": 0b100}
    ops = [("STRIDED_SLICE", ["x", "begin", "end", "strides"], ["y"], "StridedSliceOptions", opts)]
    # the file's output shape: axis 0 picks 3, 1; axis 1 picks 5..2; axis 2 is shrunk at 2
    g.types["y"] = TensorType((2, 4), DType.i8, _QUANT["i8"])
    path = tmp_path / "strided.tflite"
    path.write_bytes(hand_made(g, ops, extra))
    back = load_tflite(path)
    xs = np.arange(120, dtype=np.int8).reshape(5, 6, 4)
    assert np.array_equal(run(back, {"x": xs})[back.outputs[0]], xs[3::-2, :1:-1, 2])
    r = compare_with_tflm(path, n_inputs=10, seed=4, atol=0.0, rtol=0.0)
    assert r.mismatches == 0 and r.compared >= 13, r.first_mismatch


def test_slice_through_the_end_from_a_file(tmp_path) -> None:
    """SLICE's size -1 (through the end of the axis), as converters write tf.slice; the exporter
    writes sizes out."""
    g = Graph("slice")
    x = g.input("x", (4, 6, 3), "i16", quant=_QUANT["i16"])
    g.output(g.reshape(x, shape=(4, 6, 3), out_quant=_QUANT["i16"], name="y"))  # stands for the sliced output
    g.types["y"] = TensorType((2, 4, 3), DType.i16, _QUANT["i16"])
    i32 = TensorType((3,), DType.i32)
    extra = {"begin": (np.array([1, 2, 0], np.int32), i32), "size": (np.array([2, -1, -1], np.int32), i32)}
    path = tmp_path / "slice.tflite"
    path.write_bytes(hand_made(g, [("SLICE", ["x", "begin", "size"], ["y"], None, {})], extra))
    back = load_tflite(path)
    xs = np.arange(72, dtype=np.int16).reshape(4, 6, 3)
    assert np.array_equal(run(back, {"x": xs})[back.outputs[0]], xs[1:3, 2:, :])
    r = compare_with_tflm(path, n_inputs=10, seed=4, atol=0.0, rtol=0.0)
    assert r.mismatches == 0 and r.compared >= 13, r.first_mismatch
    extra["size"] = (np.array([2, 5, -1], np.int32), i32)  # past the end of axis 1
    path.write_bytes(hand_made(g, [("SLICE", ["x", "begin", "size"], ["y"], None, {})], extra))
    with pytest.raises(ModelFileError, match=r"SLICE .*do not fit in \[4, 6, 3\]"):
        load_tflite(path)


def test_gather_of_computed_int64_indices_is_refused() -> None:
    """TFLite Micro's GATHER refuses int64 positions: constant ones are rewritten, computed ones refused."""
    g = Graph("gather")
    x = g.input("x", (4, 3), "f32")
    g.output(g.gather(x, g.input("i", (2,), "i64"), axis=0))
    with pytest.raises(UnsupportedOpError, match="gather with computed int64 indices"):
        to_tflite_bytes(g)


def test_split_and_squeeze_of_every_unit_axis_from_a_file(tmp_path) -> None:
    """SPLIT (its axis first) feeding SQUEEZE without squeeze_dims, which the exporter never writes."""
    g = Graph("split")
    x = g.input("x", (1, 6, 1, 2), "i8", quant=_QUANT["i8"])
    a, b, c = g.split(x, axis=1, sizes=(2, 2, 2), out_quant=[_QUANT["i8"]] * 3)
    g.output(g.squeeze(a, axes=(0, 2), out_quant=_QUANT["i8"], name="y"), b, c)
    extra = {"axis": (np.array(1, np.int32), TensorType((), DType.i32))}
    outs = [a.name, b.name, c.name]
    ops = [
        ("SPLIT", ["axis", "x"], outs, "SplitOptions", {"NumSplits": 3}),
        ("SQUEEZE", [a.name], ["y"], None, {}),
    ]
    path = tmp_path / "split.tflite"
    path.write_bytes(hand_made(g, ops, extra))
    back = load_tflite(path)
    assert [(n.op, n.attrs) for n in back.nodes] == [
        ("split", {"axis": 1, "sizes": (2, 2, 2)}),
        ("squeeze", {"axes": (0, 2)}),
    ]
    r = compare_with_tflm(path, n_inputs=10, seed=4, atol=0.0, rtol=0.0)
    assert r.mismatches == 0 and r.compared >= 13, r.first_mismatch


def test_pack_of_differently_quantized_inputs_is_refused_both_ways(tmp_path) -> None:
    """TFLite Micro's PACK copies bytes; the IR's stack rescales: such a stack is never written or read."""
    g = Graph("pack")
    a = g.input("a", (2, 3), "i8", quant=_QUANT["i8"])
    b = g.input("b", (2, 3), "i8", quant=QuantParams(np.float32(0.2), 1, storage="i8"))
    g.output(g.stack(a, b, axis=0, out_quant=_QUANT["i8"], name="y"))
    with pytest.raises(UnsupportedOpError, match="stack of inputs quantized unlike its output"):
        to_tflite_bytes(g)
    ops = [("PACK", ["a", "b"], ["y"], "PackOptions", {"ValuesCount": 2, "Axis": 0})]
    path = tmp_path / "pack.tflite"
    path.write_bytes(hand_made(g, ops, {}))
    with pytest.raises(UnsupportedOpError, match="PACK of inputs quantized unlike its output"):
        load_tflite(path)
