"""Resizing, L2 pooling and EMBEDDING_LOOKUP against TFLite Micro, bit for bit, and through import and export.

Each case is a one-op graph (float32, int8 and int16, the types TFLite
Micro's kernels take) written by the exporter and run by
:func:`~rlx_edge.targets.reference.compare.compare_with_tflm` on seeded
random inputs: every output must equal TFLite Micro's, float ones too
(nearest-neighbour resizing copies values; the float bilinear and L2 pool
references compute in float32 in the kernels' order of operations).
"""

from __future__ import annotations

import numpy as np
import pytest
from tflite.Model import Model

from rlx_edge.errors import UnsupportedOpError
from rlx_edge.frontends import _tflite_export
from rlx_edge.frontends._tflite_schema import OP_NAMES
from rlx_edge.frontends.tflite import export_tflite, load_tflite, load_tflite_bytes, to_tflite_bytes
from rlx_edge.ir.dtype import DType
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.types import QuantParams, TensorType
from rlx_edge.targets.reference import run
from rlx_edge.targets.reference.compare import compare_with_tflm

_QUANT = {
    "f32": None,
    "i8": QuantParams(np.float32(0.05), -7, storage="i8"),
    "i16": QuantParams(np.float32(0.001), 0, storage="i16"),
}
ALL = ("f32", "i8", "i16")

# (op, input shape, attrs)
CASES: dict[str, tuple] = {
    "nearest_up": ("resize_nearest_neighbor", (1, 3, 4, 2), {"size": (7, 9)}),
    "nearest_down": ("resize_nearest_neighbor", (2, 7, 6, 3), {"size": (3, 4)}),
    "nearest_align_corners": ("resize_nearest_neighbor", (1, 4, 5, 2), {"size": (7, 3), "align_corners": True}),
    "nearest_align_corners_to_one": ("resize_nearest_neighbor", (1, 4, 5, 1), {"size": (1, 9), "align_corners": True}),
    "nearest_half_pixel": ("resize_nearest_neighbor", (1, 5, 3, 2), {"size": (3, 8), "half_pixel_centers": True}),
    # 26/22 in float32 picks row 12 for output row 11, where exact arithmetic picks 13
    "nearest_float32_scale": ("resize_nearest_neighbor", (1, 26, 2, 1), {"size": (22, 3)}),
    "bilinear_up": ("resize_bilinear", (1, 3, 4, 2), {"size": (7, 9)}),
    "bilinear_down": ("resize_bilinear", (2, 7, 6, 3), {"size": (3, 4)}),
    "bilinear_align_corners": ("resize_bilinear", (1, 4, 5, 2), {"size": (7, 3), "align_corners": True}),
    "bilinear_align_corners_to_one": ("resize_bilinear", (1, 4, 5, 1), {"size": (1, 9), "align_corners": True}),
    # positions before the first pixel (negative weights) at the top and left edges
    "bilinear_half_pixel": ("resize_bilinear", (1, 5, 3, 2), {"size": (3, 8), "half_pixel_centers": True}),
    "bilinear_half_pixel_up": ("resize_bilinear", (1, 2, 3, 2), {"size": (9, 10), "half_pixel_centers": True}),
    "l2_pool_valid": ("l2_pool2d", (2, 6, 7, 3), {"kernel": (2, 3), "strides": (2, 2), "padding": "valid"}),
    # SAME: edge windows count only their real elements; relu6 clamps the large ones
    "l2_pool_same_relu6": (
        "l2_pool2d",
        (1, 5, 4, 2),
        {"kernel": (3, 3), "strides": (1, 2), "padding": "same", "activation": "relu6"},
    ),
}
# TFLite Micro's RESIZE_BILINEAR takes float32 and int8 only, L2_POOL_2D float32 only
DTYPES = {"resize_nearest_neighbor": ALL, "resize_bilinear": ("f32", "i8"), "l2_pool2d": ("f32",)}
PARAMS = [(case, dt) for case, spec in CASES.items() for dt in DTYPES[spec[0]]]


def _build(case: str, dtype: str) -> Graph:
    op, shape, attrs = CASES[case]
    g = Graph(f"{case}_{dtype}")
    q = _QUANT[dtype]
    x = g.input("x", shape, dtype, quant=q)
    g.output(g.add_node(op, [x], attrs, out_quant=[q])[0])
    return g


@pytest.mark.parametrize("case,dtype", PARAMS, ids=[f"{c}-{d}" for c, d in PARAMS])
def test_matches_tflm(case: str, dtype: str, tmp_path) -> None:
    path = tmp_path / f"{case}_{dtype}.tflite"
    export_tflite(_build(case, dtype), path)
    r = compare_with_tflm(path, n_inputs=10, seed=3, atol=0.0, rtol=0.0)
    assert r.inputs == 10 and r.compared >= 10
    assert r.mismatches == 0, r.first_mismatch


@pytest.mark.parametrize("case", sorted(CASES))
def test_round_trip(case: str) -> None:
    """The file reads back to the same op and attributes, and computes the same."""
    dtype = "i8" if "i8" in DTYPES[CASES[case][0]] else "f32"
    g = _build(case, dtype)
    back = load_tflite_bytes(to_tflite_bytes(g))
    assert [(n.op, n.attrs) for n in back.nodes] == [(n.op, n.attrs) for n in g.nodes]
    rng = np.random.default_rng(5)
    x = rng.integers(-128, 128, CASES[case][1]) if dtype == "i8" else rng.standard_normal(CASES[case][1]) * 4
    feeds = {"x": x.astype(np.int8 if dtype == "i8" else np.float32)}
    assert np.array_equal(run(g, feeds)[g.outputs[0]], run(back, feeds)[back.outputs[0]])


def test_nearest_picks_tflite_micro_pixels() -> None:
    """Hand-worked indices: floor(i * 3/7); round((i) * 2/6) with align_corners; floor((i + .5) * 3/7)."""
    g = Graph("n")
    x = g.input("x", (1, 3, 1, 1), "f32")
    g.output(
        g.resize_nearest_neighbor(x, size=(7, 1), name="plain"),
        g.resize_nearest_neighbor(x, size=(7, 1), align_corners=True, name="corners"),
        g.resize_nearest_neighbor(x, size=(7, 1), half_pixel_centers=True, name="half"),
    )
    out = run(g, {"x": np.array([10, 20, 30], np.float32).reshape(1, 3, 1, 1)})
    assert out["plain"].reshape(-1).tolist() == [10, 10, 10, 20, 20, 30, 30]
    assert out["corners"].reshape(-1).tolist() == [10, 10, 20, 20, 20, 30, 30]
    assert out["half"].reshape(-1).tolist() == [10, 10, 20, 20, 20, 30, 30]


# EMBEDDING_LOOKUP: read as gather along axis 0 ------------------------------------------------
def _embedding_file(dtype: str) -> bytes:
    """EMBEDDING_LOOKUP (lookup first, then the table), which the exporter never writes (it writes GATHER)."""
    q = _QUANT[dtype]
    g = Graph(f"embedding_{dtype}")
    table = g.input("table", (5, 3, 2), dtype, quant=q)
    ids = g.param("ids", np.array([4, 0, 2, 2, 1], np.int32))
    g.output(g.gather(table, ids, axis=0, out_quant=q, name="y"))
    w = _tflite_export._Writer(g)
    ins = [w.tensor("ids"), w.tensor("table")]
    w.ops.append(_tflite_export._OpOut("EMBEDDING_LOOKUP", ins, [w.tensor("y")]))
    return w.build()


@pytest.mark.parametrize("dtype", ["f32", "i8"])
def test_embedding_lookup_imports_as_gather(dtype: str, tmp_path) -> None:
    path = tmp_path / f"embedding_{dtype}.tflite"
    path.write_bytes(_embedding_file(dtype))
    back = load_tflite(path)
    assert [(n.op, n.attrs) for n in back.nodes] == [("gather", {"axis": 0, "batch_dims": 0})]
    r = compare_with_tflm(path, n_inputs=10, seed=6, atol=0.0, rtol=0.0)
    assert r.inputs == 10 and r.compared >= 10
    assert r.mismatches == 0, r.first_mismatch
    code = Model.GetRootAs(to_tflite_bytes(back), 0).OperatorCodes(0)
    assert OP_NAMES[max(code.BuiltinCode(), code.DeprecatedBuiltinCode())] == "GATHER"  # written back as GATHER


def test_hybrid_embedding_lookup_is_refused(tmp_path) -> None:
    """int8 rows into a float output (TFLite's hybrid kernel) is one clear error."""
    g = Graph("hybrid")
    table = g.input("table", (5, 3), "i8", quant=_QUANT["i8"])
    ids = g.param("ids", np.array([1, 0], np.int32))
    g.output(g.gather(table, ids, axis=0, out_quant=_QUANT["i8"], name="y"))
    g.types["y"] = TensorType((2, 3), DType.f32)
    w = _tflite_export._Writer(g)
    ins = [w.tensor("ids"), w.tensor("table")]
    w.ops.append(_tflite_export._OpOut("EMBEDDING_LOOKUP", ins, [w.tensor("y")]))
    path = tmp_path / "hybrid.tflite"
    path.write_bytes(w.build())
    with pytest.raises(UnsupportedOpError, match=r"EMBEDDING_LOOKUP of i8 values into a f32 output \(hybrid\)"):
        load_tflite(path)
