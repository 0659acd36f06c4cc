"""TFLite's custom op TFLite_Detection_PostProcess: export, import and TFLite Micro's kernel, bit for bit.

The inputs are drawn so that boxes overlap heavily (anchors in a cluster) and scores tie (a few
levels), where the selection depends on the sort's tie-breaking and the float32 IoU.
"""

from __future__ import annotations

import numpy as np
import pytest
from flatbuffers import flexbuffers

from rlx_edge.errors import ModelFileError, UnsupportedOpError
from rlx_edge.frontends.tflite import load_tflite_bytes, to_tflite_bytes
from rlx_edge.frontends.tflm import TflmModel
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.types import QuantParams
from rlx_edge.targets.reference import run

N, CLASSES = 10, 3
ATTRS = {"num_classes": CLASSES, "score_threshold": 0.25, "y_scale": 10.0, "x_scale": 10.0, "h_scale": 5.0}


def _anchors(rng: np.random.Generator) -> np.ndarray:
    centre = rng.uniform(0.4, 0.6, (N, 2)) * (rng.random((N, 1)) < 0.7)  # most in one cluster
    size = rng.uniform(0.2, 0.4, (N, 2))
    return np.concatenate([centre, size], axis=1).astype(np.float32)


def _graph(attrs: dict, anchors: np.ndarray, quantized: bool = False) -> Graph:
    g = Graph("ssd_head")
    enc = g.input("box_encodings", (1, N, 4))
    cls = g.input("class_predictions", (1, N, CLASSES + 1))
    if quantized:  # an int8 head: its outputs dequantized before the float op, as TFLite's converter writes it
        enc = g.input("box_q", (1, N, 4), "i8", quant=QuantParams(np.float32(0.05), 3, storage="i8"))
        cls = g.input("cls_q", (1, N, CLASSES + 1), "i8", quant=QuantParams(np.float32(1 / 256), -128, storage="i8"))
        g.inputs[:] = ["box_q", "cls_q"]
        enc, cls = g.dequantize(enc, dtype="f32"), g.dequantize(cls, dtype="f32")
    a = g.param("anchors", anchors)
    g.output(*g.detection_postprocess(enc, cls, a, w_scale=5.0, **ATTRS, **attrs))
    return g


def _draws(rng: np.random.Generator, count: int) -> list[list[np.ndarray]]:
    out = []
    for _ in range(count):
        enc = (rng.standard_normal((1, N, 4)) * 0.5).astype(np.float32)
        levels = int(rng.choice([3, 5, 256]))
        scores = (rng.integers(0, levels, (1, N, CLASSES + 1)) / (levels - 1)).astype(np.float32)
        out.append([enc, scores])
    return out


@pytest.mark.parametrize(
    "attrs",
    [
        {"max_detections": 4, "iou_threshold": 0.3},
        {"max_detections": 10, "iou_threshold": 0.6},
        {"max_detections": 5, "iou_threshold": 0.3, "use_regular_nms": True, "detections_per_class": 2},
        {"max_detections": 10, "iou_threshold": 1.0, "use_regular_nms": True, "detections_per_class": 10},
    ],
    ids=["fast", "fast_all", "regular", "regular_no_suppression"],
)
def test_matches_tflm(attrs) -> None:
    rng = np.random.default_rng(attrs["max_detections"] * 7 + len(attrs))
    g = _graph(attrs, _anchors(rng))
    data = to_tflite_bytes(g)
    back = load_tflite_bytes(data)
    assert [n.op for n in back.nodes] == ["detection_postprocess"]
    # every option written and read back, floats as the float32 the kernel reads
    assert back.nodes[0].attrs == {
        k: float(np.float32(v)) if isinstance(v, float) else v for k, v in g.nodes[0].attrs.items()
    }
    regular = attrs.get("use_regular_nms", False)
    counts, suppressed = set(), 0
    with TflmModel(data) as m:
        for enc, scores in _draws(rng, 25):
            want = m([enc, scores])
            got = run(back, {"box_encodings": enc, "class_predictions": scores})
            got = [got[o] for o in back.outputs]
            k = int(got[3][0])
            # TFLite Micro's fast NMS leaves rows past the detections unwritten: compare the written ones
            rows = attrs["max_detections"] if regular else k
            for w, g_ in zip(want[:3], got[:3]):
                assert np.array_equal(w[:, :rows].view(np.uint32), g_[:, :rows].view(np.uint32))
            assert np.array_equal(want[3], got[3])
            counts.add(k)
            kept = scores[0, :, 1:] >= np.float32(0.25)
            suppressed += int(kept.sum() if regular else kept.any(axis=1).sum()) > k  # NMS or the limit dropped some
    assert suppressed and (regular or len(counts) > 1)  # the draws exercise the selection


def _feed_stored_inputs(data: bytes) -> bytes:
    """The file with the custom op reading the int8 model inputs itself, as TFLite (not Micro) allows."""
    from tflite.Model import Model

    out = bytearray(data)
    sg = Model.GetRootAs(data, 0).Subgraphs(0)
    deq0, deq1, det = (sg.Operators(i) for i in range(3))
    start = det._tab.Vector(det._tab.Offset(6))  # the operator's inputs vector (field 6)
    out[start : start + 8] = np.array([deq0.Inputs(0), deq1.Inputs(0)], "<i4").tobytes()
    return bytes(out)


def test_int8_head_matches_tflm_and_imports_stored_inputs_dequantized() -> None:
    rng = np.random.default_rng(5)
    data = to_tflite_bytes(_graph({"max_detections": 3, "iou_threshold": 0.5}, _anchors(rng), quantized=True))
    back = load_tflite_bytes(data)
    assert [n.op for n in back.nodes] == ["dequantize", "dequantize", "detection_postprocess"]
    # int8 inputs straight into the op: the importer adds the dequantize nodes TFLite's kernel computes
    direct = load_tflite_bytes(_feed_stored_inputs(data))
    det = direct.nodes[-1]
    assert det.op == "detection_postprocess" and all(direct.producer(v).op == "dequantize" for v in det.inputs[:2])
    with TflmModel(data) as m:
        for _ in range(5):
            enc = rng.integers(-128, 128, (1, N, 4), dtype=np.int8)
            cls = rng.integers(-128, 128, (1, N, CLASSES + 1), dtype=np.int8)
            want = m([enc, cls])
            for g in (back, direct):
                got = run(g, {"box_q": enc, "cls_q": cls})
                k = int(got[g.outputs[3]][0])
                assert k > 0 and np.array_equal(want[3], got[g.outputs[3]])
                for w, o in zip(want[:3], g.outputs[:3]):
                    assert np.array_equal(w[:, :k].view(np.uint32), got[o][:, :k].view(np.uint32))


def test_more_than_one_class_per_detection_is_refused() -> None:
    rng = np.random.default_rng(1)
    data = bytearray(to_tflite_bytes(_graph({"max_detections": 3, "iou_threshold": 0.5}, _anchors(rng))))
    blob = _find_options(bytes(data))
    options = flexbuffers.Loads(blob)
    options["max_classes_per_detection"] = 2
    new = bytes(flexbuffers.Dumps(options))
    assert len(new) == len(blob)
    at = bytes(data).find(blob)
    data[at : at + len(blob)] = new
    with pytest.raises(UnsupportedOpError, match="max_classes_per_detection 2"):
        load_tflite_bytes(bytes(data))
    # a key TFLite Micro reads without a default, renamed (the same length): the file is invalid
    with pytest.raises(ModelFileError, match="lacks the option"):
        load_tflite_bytes(bytes(data).replace(b"num_classes", b"num_klasses"))


def _find_options(data: bytes) -> bytes:
    from tflite.Model import Model

    model = Model.GetRootAs(data, 0)
    return model.Subgraphs(0).Operators(0).CustomOptionsAsNumpy().tobytes()


def tiny_ssd(regular: bool = True, max_detections: int = 6, score_threshold: float = 0.4) -> Graph:
    """A small SSD: a strided conv, box and class heads (1x1 convs, two anchors per cell, sigmoid scores),
    regular (or fast) NMS over anchors of two sizes on a 4x4 grid. Float; PTQ makes it an int8 head."""
    rng = np.random.default_rng(0)
    cells, per_cell, classes = 4, 2, 3
    n = cells * cells * per_cell
    g = Graph("tiny_ssd")
    x = g.input("image", (1, 2 * cells, 2 * cells, 3))
    w = g.param("w", (rng.standard_normal((8, 3, 3, 3)) * 0.3).astype(np.float32))
    h = g.conv2d(x, w, g.param("b", np.zeros(8, np.float32)), strides=(2, 2), padding="same", activation="relu")

    def head(name: str, per_box: int):
        wh = g.param(f"w_{name}", (rng.standard_normal((per_box * per_cell, 1, 1, 8)) * 0.4).astype(np.float32))
        out = g.conv2d(h, wh, g.param(f"b_{name}", np.zeros(per_box * per_cell, np.float32)))
        return g.reshape(out, shape=(1, n, per_box))

    centres = (
        np.stack(np.meshgrid(np.arange(cells), np.arange(cells), indexing="ij"), -1).reshape(-1, 2) + 0.5
    ) / cells
    anchors = np.concatenate(
        [np.repeat(centres, per_cell, 0), np.tile([[0.3, 0.3], [0.5, 0.5]], (cells * cells, 1))], 1
    )
    a = g.param("anchors", anchors.astype(np.float32))
    attrs = {"max_detections": max_detections, "score_threshold": score_threshold, "iou_threshold": 0.5,
             "detections_per_class": 4}  # fmt: skip
    g.output(*g.detection_postprocess(head("box", 4), g.sigmoid(head("cls", classes + 1)), a, num_classes=classes,
                                      use_regular_nms=regular, **attrs))  # fmt: skip
    return g


@pytest.mark.parametrize("regular", [True, False], ids=["regular_nms", "fast_nms"])
def test_int8_ssd_compares_with_tflm(tmp_path, regular) -> None:
    """Fast NMS: TFLite Micro leaves the rows past num_detections as its arena held them (the rows an
    earlier input's detections filled); compare looks at the written rows only (the op's ``written`` hook).
    Up to 20 detections of 32 boxes, so the count varies from input to input."""
    from rlx_edge.quant.calibrate import calibrate
    from rlx_edge.quant.ptq import quantize
    from rlx_edge.targets.reference.compare import compare_with_tflm

    g = tiny_ssd(regular) if regular else tiny_ssd(regular, max_detections=20, score_threshold=0.75)
    data = {"image": np.random.default_rng(1).standard_normal((32, 1, 8, 8, 3)).astype(np.float32)}
    q = quantize(g, calibrate(g, data), scheme="int8")
    assert [n.op for n in q.nodes][-3:] == ["dequantize", "dequantize", "detection_postprocess"]
    path = tmp_path / "tiny_ssd.tflite"
    path.write_bytes(to_tflite_bytes(q))
    result = compare_with_tflm(path, n_inputs=20, runner="arena")  # our side a planned Program in one arena
    assert result.ok and result.max_abs_error == 0.0, result.to_json()
    back = load_tflite_bytes(path.read_bytes())
    feed = {back.inputs[0]: np.random.default_rng(2).integers(-128, 128, (1, 8, 8, 3), dtype=np.int8)}
    assert run(back, feed)[back.outputs[3]][0] > 0  # the head detects something
