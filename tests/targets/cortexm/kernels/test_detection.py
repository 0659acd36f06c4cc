"""rlx_detection_postprocess_f32 (TFLite_Detection_PostProcess): an int8 SSD head's outputs dequantized into
the float kernel, fast and regular NMS, bit-exact against the reference on the host build; the empty-box
failure as the kernel reports it."""

from __future__ import annotations

import numpy as np
import pytest

from rlx_edge.errors import OpError
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.ops.detection import decode_boxes
from rlx_edge.targets.cortexm import compile_host
from rlx_edge.targets.reference import run

from ..conftest import q

N, CLASSES = 12, 3
HEADS = {
    "fast": {"max_detections": 5, "iou_threshold": 0.3},
    "regular": {"max_detections": 6, "iou_threshold": 0.4, "use_regular_nms": True, "detections_per_class": 2},
    "regular_all": {"max_detections": 12, "iou_threshold": 1.0, "use_regular_nms": True, "detections_per_class": 12},
}


def _anchors(rng: np.random.Generator) -> np.ndarray:
    centre = rng.uniform(0.4, 0.6, (N, 2)) * (rng.random((N, 1)) < 0.7)  # most in one cluster: overlaps
    anchors = np.concatenate([centre, rng.uniform(0.2, 0.4, (N, 2))], axis=1).astype(np.float32)
    anchors[1] = anchors[0]  # with equal encodings, boxes 0 and 1 coincide: IoU exactly 1
    return anchors


def _graph(anchors: np.ndarray) -> Graph:
    g = Graph("ssd_heads")
    enc = g.dequantize(g.input("box_q", (1, N, 5), "i8", quant=q(0.05, 3)), dtype="f32")  # a 5th value ignored
    cls = g.dequantize(g.input("cls_q", (1, N, CLASSES + 1), "i8", quant=q(1 / 256, -128)), dtype="f32")
    a = g.param("anchors", anchors)
    for name, attrs in HEADS.items():
        outs = g.detection_postprocess(enc, cls, a, num_classes=CLASSES, score_threshold=0.3, name=name, **attrs)
        g.output(*outs)
    return g


def test_heads_match_the_reference(host_dir) -> None:
    rng = np.random.default_rng(8)
    g = _graph(_anchors(rng))
    model = compile_host(g, host_dir)
    seen: dict[str, set[bytes]] = {k: set() for k in HEADS}
    for _ in range(30):
        levels = int(rng.choice([3, 6, 256]))  # few score levels: ties
        cls = (rng.integers(0, levels, (1, N, CLASSES + 1)) * (255 // (levels - 1)) - 128).astype(np.int8)
        feed = {"box_q": rng.integers(-40, 40, (1, N, 5), dtype=np.int8), "cls_q": cls}
        feed["box_q"][0, 1] = feed["box_q"][0, 0]
        want, got = run(g, feed), model.run(feed)
        for name in g.outputs:
            assert np.array_equal(got[name].view(np.uint32), want[name].view(np.uint32)), name
        for head, outs in zip(HEADS, np.reshape(g.outputs, (len(HEADS), 4))):
            seen[head].add(want[outs[1]].tobytes() + want[outs[3]].tobytes())  # classes and count
    assert all(len(s) > 5 for s in seen.values())  # the draws vary what survives


def test_an_empty_box_gives_minus_one_detections(host_dir) -> None:
    anchors = _anchors(np.random.default_rng(2))
    anchors[4, 3] = 0.0  # zero width
    g = _graph(anchors)
    feed = {"box_q": np.zeros((1, N, 5), np.int8), "cls_q": np.zeros((1, N, CLASSES + 1), np.int8)}
    with pytest.raises(OpError, match="box 4 decodes to an empty box"):
        run(g, feed)
    got = compile_host(g, host_dir).run(feed)
    for outs in np.reshape(g.outputs, (len(HEADS), 4)):
        assert got[outs[3]].tolist() == [-1.0] and not got[outs[0]].any() and not got[outs[2]].any()


def _pair_at_the_threshold() -> tuple[np.ndarray, float, int]:
    """Two overlapping anchors whose float32 IoU, (a_i + a_j) - inter as the kernel adds, differs from
    a_i + (a_j - inter); a threshold between the two; the detections the kernel's order keeps."""
    rng = np.random.default_rng(0)
    while True:
        anchors = rng.uniform((0.3, 0.3, 0.1, 0.1), (0.7, 0.7, 0.5, 0.5), (2, 4)).astype(np.float32)
        a, b = decode_boxes(np.zeros((2, 4), np.float32), anchors, (10.0, 10.0, 5.0, 5.0))
        area_a, area_b = (a[2] - a[0]) * (a[3] - a[1]), (b[2] - b[0]) * (b[3] - b[1])
        h = max(min(a[2], b[2]) - max(a[0], b[0]), np.float32(0))
        w = max(min(a[3], b[3]) - max(a[1], b[1]), np.float32(0))
        inter = h * w
        kernel, other = inter / ((area_a + area_b) - inter), inter / (area_a + (area_b - inter))
        if inter > 0 and kernel != other:
            return anchors, float(min(kernel, other)), 1 if kernel > other else 2


def test_iou_rounds_in_the_kernels_order(host_dir) -> None:
    anchors, threshold, want = _pair_at_the_threshold()
    g = Graph("pair")
    enc = g.dequantize(g.input("box_q", (1, 2, 4), "i8", quant=q(0.05, 3)), dtype="f32")
    cls = g.dequantize(g.input("cls_q", (1, 2, 2), "i8", quant=q(1 / 256, -128)), dtype="f32")
    a = g.param("anchors", anchors)
    g.output(*g.detection_postprocess(enc, cls, a, num_classes=1, max_detections=2, iou_threshold=threshold))
    feed = {"box_q": np.full((1, 2, 4), 3, np.int8), "cls_q": np.array([[[0, 102], [0, 77]]], np.int8)}
    ref = run(g, feed)[g.outputs[3]]
    got = compile_host(g, host_dir).run(feed)[g.outputs[3]]
    assert ref.tolist() == got.tolist() == [float(want)]
