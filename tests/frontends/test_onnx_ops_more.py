"""The ONNX equivalents of TFLite Micro's builtins (rlx_edge/frontends/_onnx_ops_more.py) against onnxruntime.

Each case is a small model made here with onnx.helper, imported and run on the reference target.
Float results are compared within FLOAT_TOL, integer and bool results must be equal. Cases on
4-D images run twice: on the graph input as ONNX lays it out, and behind an identity 1x1 Conv,
whose output the importer holds in NHWC, so that the handlers' axis and layout mapping is exercised.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from rlx_edge.errors import UnsupportedOpError
from rlx_edge.frontends.onnx import load_onnx
from rlx_edge.targets.reference import run

# float32 results: our op order (e.g. l2_pool2d's mean then sqrt, times sqrt(k)) differs from
# onnxruntime's by a few ulps; 1e-5 is far below any real mismatch (a wrong pixel or axis)
FLOAT_TOL = {"rtol": 1e-5, "atol": 1e-5}
F, I32, I64, B = TensorProto.FLOAT, TensorProto.INT32, TensorProto.INT64, TensorProto.BOOL
_NP = {F: np.float32, I32: np.int32, I64: np.int64, B: np.bool_}


class Case:
    """One node (or a few) over graph inputs ``ins`` = [(name, elem type, array)] and constants ``consts``."""

    def __init__(
        self,
        nodes: list[onnx.NodeProto],
        ins: list[tuple[str, int, np.ndarray]],
        out_type: int = F,
        consts: dict[str, np.ndarray] | None = None,
        opset: int = 13,
        image: str | None = None,
    ) -> None:
        self.nodes, self.ins, self.out_type, self.consts, self.opset = nodes, ins, out_type, consts or {}, opset
        self.image = image  # the name of a float NCHW input that may be put behind an identity conv

    def model(self, via_conv: bool) -> onnx.ModelProto:
        nodes, consts = list(self.nodes), dict(self.consts)
        ins = [helper.make_tensor_value_info(n, t, a.shape) for n, t, a in self.ins]
        if via_conv:
            assert self.image is not None
            c = dict((n, a) for n, _, a in self.ins)[self.image].shape[1]
            consts["eye"] = np.eye(c, dtype=np.float32).reshape(c, c, 1, 1)
            # rename the image input: the conv produces the value the nodes read
            ins = [
                helper.make_tensor_value_info(f"{n}_in" if n == self.image else n, t, a.shape) for n, t, a in self.ins
            ]
            nodes.insert(0, helper.make_node("Conv", [f"{self.image}_in", "eye"], [self.image], name="identity_conv"))
        inits = [numpy_helper.from_array(v, k) for k, v in consts.items()]
        out = helper.make_tensor_value_info(self.nodes[-1].output[0], self.out_type, None)
        graph = helper.make_graph(nodes, "t", ins, [out], initializer=inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)])
        m.ir_version = 8
        return m


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def _img(shape=(2, 4, 6, 5), seed: int = 0, halves: bool = False) -> np.ndarray:
    x = _rng(seed).standard_normal(shape).astype(np.float32)
    # on a grid of halves: ties, the boundary of every comparison, occur
    return (np.round(x * 4) / 2).astype(np.float32) if halves else x


def _node(op: str, ins: list[str], **attrs) -> onnx.NodeProto:
    return helper.make_node(op, ins, ["y"], name=f"the_{op.lower()}", **attrs)


def _compare_case(cmp: str) -> Case:
    return Case(
        [_node(cmp, ["x", "b"])],
        [("x", F, _img(halves=True))],
        B,
        {"b": _img((5,), seed=1, halves=True)},
        image="x",
    )


def _logical(op: str) -> Case:
    r = _rng(2)
    ins = [("a", B, r.random((2, 3, 4)) < 0.5), ("b", B, r.random((3, 1)) < 0.5)]
    return Case([_node(op, ["a", "b"])], ins, B)


def _resize(mode: str, ctm: str, shape, size, nearest: str | None = None, *, scales=None, opset: int = 13) -> Case:
    attrs = {"mode": mode, "coordinate_transformation_mode": ctm}
    if nearest:
        attrs["nearest_mode"] = nearest
    x = _img(shape, seed=3)
    if scales is not None:
        consts = {"roi": np.zeros(0, np.float32), "scales": np.array([1, 1, *scales], np.float32)}
        node = _node("Resize", ["x", "roi", "scales"], **attrs)
    else:
        consts = {"roi": np.zeros(0, np.float32), "sizes": np.array([*shape[:2], *size], np.int64)}
        node = _node("Resize", ["x", "roi", "", "sizes"], **attrs)
    return Case([node], [("x", F, x)], F, consts, opset=opset, image="x")


def _cases() -> dict[str, Callable[[], Case]]:
    c: dict[str, Callable[[], Case]] = {}
    for op in ("Equal", "Greater", "Less", "GreaterOrEqual", "LessOrEqual"):
        c[op] = lambda op=op: _compare_case(op)
    c["Equal_int32"] = lambda: Case(
        [_node("Equal", ["a", "b"])],
        [("a", I32, _rng(4).integers(-2, 3, (3, 4)).astype(np.int32))],
        B,
        {"b": _rng(5).integers(-2, 3, (4,)).astype(np.int32)},
    )
    for op in ("And", "Or", "Xor"):
        c[op] = lambda op=op: _logical(op)
    c["Not"] = lambda: Case([_node("Not", ["a"])], [("a", B, _rng(6).random((3, 4)) < 0.5)], B)
    c["Where"] = lambda: Case(
        [_node("Greater", ["x", "t"]), helper.make_node("Where", ["y", "x", "z"], ["w"], name="the_where")],
        [("x", F, _img())],
        F,
        {"t": np.array([0.5], np.float32), "z": _img((1, 4, 1, 1), seed=7)},
        image="x",
    )
    c["Sum"] = lambda: Case(
        [_node("Sum", ["x", "b", "c"])],
        [("x", F, _img())],
        F,
        {"b": _img((4, 1, 1), seed=8), "c": _img((5,), seed=9)},
        image="x",
    )
    c["Reciprocal"] = lambda: Case([_node("Reciprocal", ["x"])], [("x", F, _img() + np.float32(10))], F, image="x")
    for k in (1.0, 2.0, 0.5):
        c[f"Pow_{k:g}"] = lambda k=k: Case(
            [_node("Pow", ["x", "e"])], [("x", F, np.abs(_img()))], F, {"e": np.array(k, np.float32)}, image="x"
        )
    c["Mod_int32"] = lambda: Case(
        [_node("Mod", ["a", "b"])],
        [("a", I32, _rng(10).integers(-20, 21, (3, 5)).astype(np.int32))],
        I32,
        {"b": np.array([3, -3, 4, -7, 5], np.int32)},
    )
    c["HardSigmoid"] = lambda: Case([_node("HardSigmoid", ["x"])], [("x", F, _img() * 4)], F, image="x")
    c["HardSigmoid_attrs"] = lambda: Case(
        [_node("HardSigmoid", ["x"], alpha=0.25, beta=0.375)], [("x", F, _img() * 4)], F, image="x"
    )
    # Gather along an NCHW axis, as onnxruntime has it: 1-D, scalar, 2-D and negative indices
    for name, idx, axis in (
        ("Gather_channels", np.array([3, 0, 0, 2], np.int64), 1),
        ("Gather_scalar", np.array(-2, np.int64), 2),
        ("Gather_2d", np.array([[1, 0], [4, -1]], np.int64), 3),
    ):
        c[name] = lambda idx=idx, axis=axis: Case(
            [_node("Gather", ["x", "i"], axis=axis)], [("x", F, _img())], F, {"i": idx}, image="x"
        )
    c["Gather_embedding"] = lambda: Case(  # constant table, run-time indices: TFLite's EMBEDDING_LOOKUP
        [_node("Gather", ["table", "i"])],
        [("i", I32, np.array([[2, 0, 5], [5, 1, -1]], np.int32))],
        F,
        {"table": _img((6, 3), seed=11)},
    )
    c["GatherND"] = lambda: Case(
        [_node("GatherND", ["x", "i"])],
        [("x", F, _img((3, 4, 2)))],
        F,
        {"i": np.array([[[0, 1], [2, 3]], [[1, -1], [0, 0]]], np.int64)},
    )
    for mode in ("DCR", "CRD"):
        c[f"DepthToSpace_{mode}"] = lambda mode=mode: Case(
            [_node("DepthToSpace", ["x"], blocksize=2, mode=mode)], [("x", F, _img((2, 8, 3, 2)))], F, image="x"
        )
    c["SpaceToDepth"] = lambda: Case(
        [_node("SpaceToDepth", ["x"], blocksize=2)], [("x", F, _img((1, 3, 4, 6)))], F, image="x"
    )
    c["Expand_rank_up"] = lambda: Case(
        [_node("Expand", ["x", "s"])], [("x", F, _img((3, 1)))], F, {"s": np.array([2, 1, 4], np.int64)}
    )
    c["Expand_image"] = lambda: Case(
        [_node("Expand", ["x", "s"])],
        [("x", F, _img((1, 4, 1, 5)))],
        F,
        {"s": np.array([3, 1, 6, 1], np.int64)},
        image="x",
    )
    c["Tile"] = lambda: Case(
        [_node("Tile", ["x", "r"])],
        [("x", F, _img((1, 2, 3, 2)))],
        F,
        {"r": np.array([2, 1, 3, 2], np.int64)},
        image="x",
    )
    # Resize: every mode mapping in _RESIZE_FLAGS, up and down, by sizes and by scales
    for mode, ctm, nearest in (
        ("nearest", "asymmetric", "floor"),
        ("nearest", "tf_half_pixel_for_nn", "floor"),
        ("nearest", "half_pixel", "round_prefer_ceil"),
        ("nearest", "pytorch_half_pixel", "round_prefer_ceil"),
        ("nearest", "align_corners", "round_prefer_ceil"),
        ("linear", "asymmetric", None),
        ("linear", "align_corners", None),
        ("linear", "half_pixel", None),
        ("linear", "pytorch_half_pixel", None),
    ):
        for shape, size in (((1, 2, 5, 7), (10, 14)), ((2, 3, 8, 6), (3, 4)), ((1, 2, 4, 4), (7, 9))):
            key = f"Resize_{mode}_{ctm}_{shape[2]}x{shape[3]}_to_{size[0]}x{size[1]}"
            c[key] = lambda m=mode, t=ctm, n=nearest, s=shape, z=size: _resize(m, t, s, z, n)
    c["Resize_scales_linear_half_pixel"] = lambda: _resize("linear", "half_pixel", (1, 2, 4, 6), None, scales=(2, 0.5))
    c["Resize_opset10"] = lambda: Case(  # Resize-10: asymmetric coordinates, floor
        [_node("Resize", ["x", "scales"], mode="nearest")],
        [("x", F, _img((1, 2, 3, 4)))],
        F,
        {"scales": np.array([1, 1, 2, 3], np.float32)},
        opset=10,
        image="x",
    )
    for mode in ("nearest", "linear"):
        c[f"Upsample_opset9_{mode}"] = lambda mode=mode: Case(
            [_node("Upsample", ["x", "scales"], mode=mode)],
            [("x", F, _img((1, 2, 3, 4)))],
            F,
            {"scales": np.array([1, 1, 2, 2], np.float32)},
            opset=9,
            image="x",
        )
    c["Upsample_opset7_attr"] = lambda: Case(
        [_node("Upsample", ["x"], mode="nearest", scales=[1.0, 1.0, 3.0, 2.0])],
        [("x", F, _img((1, 2, 3, 4)))],
        F,
        opset=7,
        image="x",
    )
    for axis in (1, -1):
        c[f"LpNormalization_axis{axis}"] = lambda axis=axis: Case(
            [_node("LpNormalization", ["x"], axis=axis, p=2)], [("x", F, _img())], F, image="x"
        )
    c["LpPool_pads"] = lambda: Case(
        [_node("LpPool", ["x"], kernel_shape=[3, 2], strides=[2, 1], pads=[1, 0, 1, 1], p=2)],
        [("x", F, _img())],
        F,
        image="x",
    )
    c["LpPool_same_upper"] = lambda: Case(
        [_node("LpPool", ["x"], kernel_shape=[2, 3], strides=[2, 2], auto_pad="SAME_UPPER")],
        [("x", F, _img())],
        F,
        opset=11,
        image="x",
    )
    c["Pad_reflect"] = lambda: Case(
        [_node("Pad", ["x", "p"], mode="reflect")],
        [("x", F, _img())],
        F,
        {"p": np.array([0, 1, 2, 0, 0, 2, 1, 3], np.int64)},
        image="x",
    )
    for op in ("ReduceL2", "ReduceSumSquare", "ReduceL1"):
        for keep in (0, 1):
            c[f"{op}_keepdims{keep}"] = lambda op=op, keep=keep: Case(
                [_node(op, ["x"], axes=[1, 3], keepdims=keep)], [("x", F, _img())], F, image="x"
            )
    # Shape, Size and ConstantOfShape of a static value fold to constants (TFLite's SHAPE / FILL)
    c["Shape_ConstantOfShape_Size"] = lambda: Case(
        [
            helper.make_node("Shape", ["x"], ["s"]),
            helper.make_node(
                "ConstantOfShape", ["s"], ["k"], value=numpy_helper.from_array(np.array([1.5], np.float32))
            ),
            helper.make_node("Size", ["x"], ["n"]),
            helper.make_node("Cast", ["n"], ["nf"], to=F),
            helper.make_node("Mul", ["x", "k"], ["xk"]),
            _node("Add", ["xk", "nf"]),
        ],
        [("x", F, _img())],
        F,
        image="x",
    )
    return c


CASES = _cases()
_IMAGE_CASES = [k for k, make in CASES.items() if make().image is not None]


def _check(tmp_path: Path, case: Case, via_conv: bool) -> list[str]:
    m = case.model(via_conv)
    path = tmp_path / "m.onnx"
    onnx.save(m, path)
    feeds = {(f"{n}_in" if via_conv and n == case.image else n): a for n, _, a in case.ins}
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    want = sess.run(None, feeds)[0]
    g = load_onnx(path)
    got = np.asarray(next(iter(run(g, [feeds[i] for i in g.inputs]).values())))
    assert got.shape == want.shape, (got.shape, want.shape)
    if want.dtype.kind == "f":
        assert got.dtype == want.dtype
        assert np.allclose(got, want, **FLOAT_TOL), np.abs(got - want).max()
    else:
        assert np.array_equal(got, want), (got, want)
        assert got.dtype == want.dtype
    return [n.op for n in g.nodes]


@pytest.mark.parametrize("name", list(CASES))
def test_matches_onnxruntime(tmp_path: Path, name: str) -> None:
    ops = _check(tmp_path, CASES[name](), via_conv=False)
    assert not {"Shape", "Size", "ConstantOfShape"} & set(ops)


@pytest.mark.parametrize("name", _IMAGE_CASES)
def test_matches_onnxruntime_on_nhwc_values(tmp_path: Path, name: str) -> None:
    ops = _check(tmp_path, CASES[name](), via_conv=True)
    # layout-following ops stay in NHWC: only the input's conversion and the output's
    assert ops.count("transpose") <= 2, ops


def test_tile_and_crd_use_existing_ops(tmp_path: Path) -> None:
    """Tile is concatenated copies and DepthToSpace CRD a channel gather before the DCR op."""
    ops = _check(tmp_path, CASES["Tile"](), via_conv=True)
    assert ops.count("concat") == 3 and "transpose" not in ops[1:-1], ops
    ops = _check(tmp_path, CASES["DepthToSpace_CRD"](), via_conv=True)
    assert ops.index("gather") < ops.index("depth_to_space"), ops


# refusals: one line naming the node and the attribute (value) it cannot express --------------------------
_REFUSED = [
    ("Resize", {"mode": "cubic"}, "mode='cubic'"),
    ("Resize", {"mode": "nearest"}, "nearest_mode='round_prefer_floor'"),  # ONNX's defaults: half_pixel
    ("Resize", {"mode": "linear", "coordinate_transformation_mode": "tf_crop_and_resize"}, "tf_crop_and_resize"),
    ("Resize", {"mode": "linear", "antialias": 1}, "antialias=1"),
    # scales whose output sizes are not whole, an output of size 1, resized channels
    ("Resize", {"mode": "linear", "_scales": [1, 1, 0.6, 1]}, "scale 0.6 of axis 2"),
    (
        "Resize",
        {"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel", "_scales": [1, 1, 0.25, 1]},
        "output size of 1",
    ),
    ("Resize", {"mode": "linear", "_scales": [1, 2, 1, 1]}, "changes the batch or channels"),
    ("GatherND", {"batch_dims": 1}, "batch_dims=1"),
    ("LpNormalization", {"p": 1}, "p=1"),
    ("LpPool", {"p": 3, "kernel_shape": [2, 2]}, "p=3"),
    ("LpPool", {"kernel_shape": [2, 2], "dilations": [2, 2]}, "dilations"),
    ("Mod", {"fmod": 1}, "fmod=1"),
    ("Pow", {}, "exponent 3"),
    ("Pad", {"mode": "edge"}, "mode='edge'"),
    ("ReduceL2", {"noop_with_empty_axes": 1}, "noop_with_empty_axes=1"),
]


@pytest.mark.parametrize("op,attrs,match", _REFUSED, ids=[f"{o}-{m}" for o, _, m in _REFUSED])
def test_unsupported_attribute_values_are_named(tmp_path: Path, op: str, attrs: dict, match: str) -> None:
    x = np.zeros((1, 2, 4, 4), np.float32)
    consts: dict[str, np.ndarray] = {}
    ins = ["x"]
    attrs = dict(attrs)
    if op == "Resize":
        scales = np.array(attrs.pop("_scales", [1, 1, 2, 2]), np.float32)
        consts = {"roi": np.zeros(0, np.float32), "scales": scales}
        ins = ["x", "roi", "scales"]
    elif op == "GatherND":
        consts, ins = {"i": np.zeros((1, 1, 1), np.int64)}, ["x", "i"]
    elif op in ("Mod", "Pow"):
        consts, ins = {"b": np.array(3, np.float32)}, ["x", "b"]
    elif op == "Pad":
        consts, ins = {"p": np.ones(8, np.int64)}, ["x", "p"]
    opset = 18 if "antialias" in attrs or "noop_with_empty_axes" in attrs else 13
    case = Case([_node(op, ins, **attrs)], [("x", F, x)], F, consts, opset=opset)
    path = tmp_path / "m.onnx"
    onnx.save(case.model(False), path)
    with pytest.raises(UnsupportedOpError) as info:
        load_onnx(path)
    msg = str(info.value)
    assert f"the_{op.lower()} ({op})" in msg and match in msg, msg
    assert "not supported" in msg.splitlines()[-1], msg


# QDQ: int8 -> dequantize -> op -> quantize, the ops that move stored values -------------------------------
def _qdq_model(node: onnx.NodeProto, consts: dict[str, np.ndarray], shape: tuple[int, ...]) -> onnx.ModelProto:
    consts = {"s": np.array(0.05, np.float32), "z": np.array(3, np.int8), **consts}
    nodes = [
        helper.make_node("DequantizeLinear", ["x", "s", "z"], ["xf"]),
        node,
        helper.make_node("QuantizeLinear", ["yf", "s", "z"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "q",
        [helper.make_tensor_value_info("x", TensorProto.INT8, shape)],
        [helper.make_tensor_value_info("y", TensorProto.INT8, None)],
        [numpy_helper.from_array(v, k) for k, v in consts.items()],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


_QDQ = {
    "DepthToSpace": (helper.make_node("DepthToSpace", ["xf"], ["yf"], blocksize=2), {}, (1, 8, 3, 4)),
    "SpaceToDepth": (helper.make_node("SpaceToDepth", ["xf"], ["yf"], blocksize=2), {}, (1, 2, 4, 6)),
    "Resize_nearest": (
        helper.make_node(
            "Resize",
            ["xf", "", "", "sz"],
            ["yf"],
            mode="nearest",
            coordinate_transformation_mode="asymmetric",
            nearest_mode="floor",
        ),
        # a downscale: an integer upscale picks the same pixels in every mode
        {"sz": np.array([1, 2, 3, 4], np.int64)},
        (1, 2, 5, 7),
    ),
    "Expand": (helper.make_node("Expand", ["xf", "sh"], ["yf"]), {"sh": np.array([2, 3, 4], np.int64)}, (3, 1)),
    "Pad_reflect": (
        helper.make_node("Pad", ["xf", "p"], ["yf"], mode="reflect"),
        {"p": np.array([0, 0, 1, 2, 0, 0, 2, 1], np.int64)},
        (1, 2, 4, 4),
    ),
}


@pytest.mark.parametrize("name", list(_QDQ))
def test_qdq_moves_integers_bit_exact(tmp_path: Path, name: str) -> None:
    """The float op between dequantize and quantize becomes the same op on the int8 values."""
    node, consts, shape = _QDQ[name]
    path = tmp_path / "q.onnx"
    onnx.save(_qdq_model(node, consts, shape), path)
    x = _rng(12).integers(-128, 128, shape).astype(np.int8)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    g = load_onnx(path)
    got = np.asarray(next(iter(run(g, [x]).values())))
    assert got.dtype == want.dtype and np.array_equal(got, want)
    ops = {n.op for n in g.nodes}
    assert not ops & {"quantize", "dequantize"}, ops
