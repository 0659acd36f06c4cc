"""TFLite's data-movement builtins against TFLite Micro, bit for bit, and through import and export.

Each case is a one-op graph built with the graph builder (float32, int8 and
int16 wherever TFLite Micro has the kernel), written by the exporter and run
by :func:`~rlx_edge.targets.reference.compare.compare_with_tflm` on seeded
random and edge inputs: every output must equal TFLite Micro's. Moving
values never rounds, so float outputs are compared exactly too.
"""

from __future__ import annotations

import flatbuffers
import numpy as np
import pytest
from tflite.Model import Model, ModelT

from rlx_edge.frontends._tflite_schema import OP_CODES, OP_NAMES
from rlx_edge.frontends.tflite import export_tflite, load_tflite, load_tflite_bytes, to_tflite_bytes
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.ops import get_op
from rlx_edge.ir.types import QuantParams
from rlx_edge.targets.reference import run
from rlx_edge.targets.reference.compare import compare_with_tflm

_QUANT = {
    "f32": None,
    "i8": QuantParams(np.float32(0.05), -7, storage="i8"),
    "i16": QuantParams(np.float32(0.001), 0, storage="i16"),
}


def _graph(op: str, dtype: str, in_shape: tuple[int, ...], n_inputs: int, attrs: dict) -> Graph:
    g = Graph(f"{op}_{dtype}")
    q = _QUANT[dtype]
    xs = [g.input(f"x{i}", in_shape, dtype, quant=q) for i in range(n_inputs)]
    n_out = get_op(op).count_outputs(get_op(op).normalize_attrs(attrs))
    g.output(*g.add_node(op, xs, attrs, out_quant=[q] * n_out))
    return g


# (op, shape, inputs, attrs, the builtins the file holds, the dtypes TFLite Micro's kernel takes)
CASES: dict[str, tuple] = {
    "expand_dims": ("unsqueeze", (2, 3, 4), 1, {"axes": (-2,)}, {"EXPAND_DIMS"}, ("f32", "i8", "i16")),
    "expand_dims_front": ("unsqueeze", (5,), 1, {"axes": (0,)}, {"EXPAND_DIMS"}, ("f32", "i8", "i16")),
    "squeeze": ("squeeze", (1, 3, 1, 4), 1, {"axes": (0, -2)}, {"SQUEEZE"}, ("f32", "i8", "i16")),
    "pack": ("stack", (2, 3), 3, {"axis": 1}, {"PACK"}, ("f32", "i8", "i16")),
    "pack_last": ("stack", (2, 3), 2, {"axis": -1}, {"PACK"}, ("f32", "i8", "i16")),
    "unpack": ("unstack", (2, 3, 4), 1, {"axis": 1, "num": 3}, {"UNPACK"}, ("f32", "i8", "i16")),
    "split_v": ("split", (2, 7, 3), 1, {"axis": 1, "sizes": (2, 4, 1)}, {"SPLIT_V"}, ("f32", "i8", "i16")),
    "strided_slice": (
        "slice",
        (4, 7, 5),
        1,
        {"begin": (1, -1, 0), "end": (4, -(2**31), 5), "strides": (2, -2, 1)},
        {"STRIDED_SLICE"},
        ("f32", "i8", "i16"),
    ),
    "reverse": (
        "slice",
        (3, 4, 2),
        1,
        {"begin": (0, -1, -1), "end": (2**31 - 1, -(2**31), -(2**31)), "strides": (1, -1, -1)},
        {"STRIDED_SLICE"},
        ("f32", "i8", "i16"),
    ),
    "padv2": (
        "pad",
        (1, 3, 4, 2),
        1,
        {"pads": (0, 0, 1, 2, 2, 1, 0, 0), "value": 0.35},
        {"PADV2"},
        ("f32", "i8", "i16"),
    ),
    "mirror_pad_reflect": (
        "mirror_pad",
        (2, 4, 5),
        1,
        {"pads": (1, 0, 3, 2, 0, 4), "mode": "reflect"},
        {"MIRROR_PAD"},
        ("f32", "i8"),
    ),
    "mirror_pad_symmetric": (
        "mirror_pad",
        (3, 4),
        1,
        {"pads": (3, 1, 0, 4), "mode": "symmetric"},
        {"MIRROR_PAD"},
        ("f32", "i8"),
    ),
    "space_to_depth": ("space_to_depth", (1, 6, 4, 3), 1, {"block_size": 2}, {"SPACE_TO_DEPTH"}, ("f32", "i8")),
    "depth_to_space": ("depth_to_space", (1, 2, 3, 8), 1, {"block_size": 2}, {"DEPTH_TO_SPACE"}, ("f32", "i8")),
    "space_to_batch_nd": (
        "space_to_batch_nd",
        (1, 5, 4, 3),
        1,
        {"block_shape": (2, 3), "pads": (1, 0, 1, 1)},
        {"SPACE_TO_BATCH_ND"},
        ("f32", "i8"),
    ),
    "batch_to_space_nd": (
        "batch_to_space_nd",
        (6, 2, 3, 2),
        1,
        {"block_shape": (2, 3), "crops": (1, 0, 2, 1)},
        {"BATCH_TO_SPACE_ND"},
        ("f32", "i8"),
    ),
    "broadcast_to": ("broadcast_to", (3, 1), 1, {"shape": (2, 3, 4)}, {"BROADCAST_TO"}, ("f32", "i8", "i16")),
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
    """The file holds the builtin named, reads back to a graph that computes the same, and writes the same bytes."""
    g = _build(case, "i8")
    data = to_tflite_bytes(g)
    assert _builtins(data) == CASES[case][4]
    back = load_tflite_bytes(data)
    assert to_tflite_bytes(back) == data
    rng = np.random.default_rng(5)
    feeds = {n: rng.integers(-128, 128, tuple(g.types[n].shape)).astype(np.int8) for n in g.inputs}
    want, got = run(g, feeds), run(back, feeds)
    for a, b in zip(g.outputs, back.outputs):
        assert np.array_equal(want[a], got[b]), case


def test_reverse_v2_imports_as_a_backwards_slice(tmp_path) -> None:
    """REVERSE_V2 (which the exporter never writes: a slice says it) from a hand-made file."""
    g = _build("expand_dims", "f32")
    data = to_tflite_bytes(g)
    m = ModelT.InitFromObj(Model.GetRootAs(data, 0))
    m.operatorCodes[0].builtinCode = m.operatorCodes[0].deprecatedBuiltinCode = OP_CODES["REVERSE_V2"]
    m.subgraphs[0].operators[0].builtinOptionsType = 0
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    path = tmp_path / "reverse.tflite"
    path.write_bytes(bytes(b.Output()))
    # the axis operand (-2) now names the reversed axis; the output keeps the input's shape
    sg = m.subgraphs[0]
    sg.tensors[sg.operators[0].outputs[0]].shape = np.array([2, 3, 4], np.int32)
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    path.write_bytes(bytes(b.Output()))
    back = load_tflite(path)
    assert [(n.op, n.attrs["strides"]) for n in back.nodes] == [("slice", (1, -1, 1))]
    r = compare_with_tflm(path, n_inputs=10, seed=1, atol=0.0, rtol=0.0)
    assert r.mismatches == 0 and r.compared >= 13, r.first_mismatch
