"""detection_postprocess (TFLite_Detection_PostProcess): decoding, both NMS modes, ties, errors.

Hand-checked cases; ``tests/frontends/test_tflite_detection.py`` pins the op to TFLite Micro.
"""

from __future__ import annotations

import numpy as np
import pytest

from rlx_edge.errors import OpError
from rlx_edge.ir.graph import Graph
from rlx_edge.targets.reference import run

# four anchors (y, x, h, w): 0 and 1 coincide, 2 overlaps 0 with IoU 0.6, 3 lies apart
ANCHORS = np.array([[0.5, 0.5, 0.4, 0.4], [0.5, 0.5, 0.4, 0.4], [0.5, 0.6, 0.4, 0.4], [0.1, 0.1, 0.1, 0.1]], np.float32)
# two classes, no background column; box 1 ties its two classes, boxes 0-2 tie on their best score
SCORES = np.array([[[0.5, 0.9], [0.9, 0.9], [0.2, 0.9], [0.8, 0.1]]], np.float32)


def _run(attrs: dict, anchors: np.ndarray = ANCHORS, enc: np.ndarray | None = None) -> list[np.ndarray]:
    g = Graph("det")
    b = g.input("enc", (1, 4, 4))
    s = g.input("scores", (1, 4, 2))
    a = g.param("anchors", anchors)
    g.output(*g.detection_postprocess(b, s, a, num_classes=2, **attrs))
    enc = np.zeros((1, 4, 4), np.float32) if enc is None else enc
    out = run(g, {"enc": enc, "scores": SCORES})
    return [out[o] for o in g.outputs]


def _corners(i: int) -> list[float]:
    y, x, h, w = (float(v) for v in ANCHORS[i])
    return [np.float32(y) - np.float32(h / 2), np.float32(x) - np.float32(w / 2), np.float32(y) + np.float32(h / 2),
            np.float32(x) + np.float32(w / 2)]  # fmt: skip


def test_fast_nms_keeps_the_lower_index_on_ties_and_suppresses_overlaps() -> None:
    boxes, classes, scores, num = _run({"max_detections": 3, "iou_threshold": 0.5})
    # boxes 0, 1, 2 all score 0.9: box 0 goes first and suppresses 1 (IoU 1) and 2 (IoU 0.6 > 0.5)
    assert num.tolist() == [2.0]
    assert np.allclose(boxes[0, :2], [_corners(0), _corners(3)], atol=1e-6)
    assert classes.tolist() == [[1.0, 0.0, 0.0]] and scores.tolist() == [[np.float32(0.9), np.float32(0.8), 0.0]]
    assert not boxes[0, 2].any()  # rows past the detections are zeros
    # IoU 0.6 is not above 0.7: box 2 survives, in score order before box 3
    boxes, classes, scores, num = _run({"max_detections": 3, "iou_threshold": 0.7})
    assert num.tolist() == [3.0] and classes.tolist() == [[1.0, 1.0, 0.0]]
    assert np.allclose(boxes[0], [_corners(0), _corners(2), _corners(3)], atol=1e-6)


def test_fast_nms_best_class_is_the_lowest_on_ties_and_the_limit_holds() -> None:
    _, classes, _, num = _run({"max_detections": 1, "iou_threshold": 1.0, "score_threshold": 0.85})
    assert num.tolist() == [1.0] and classes.tolist() == [[1.0]]
    # boxes 0, 1, 2 kept, none suppressed: the first two, box 1's tied classes giving class 0
    scores_only_1 = {"max_detections": 2, "iou_threshold": 1.0, "score_threshold": 0.9}
    _, classes, _, num = _run(scores_only_1)
    assert num.tolist() == [2.0] and classes.tolist() == [[1.0, 0.0]]  # boxes 0 then 1 (index order on ties)


def test_regular_nms_per_class_then_best_over_classes() -> None:
    boxes, classes, scores, num = _run(
        {"max_detections": 3, "iou_threshold": 0.5, "use_regular_nms": True, "detections_per_class": 1}
    )
    # class 0 keeps box 1 (0.9), class 1 keeps box 0 (0.9): the tie goes to the lower class
    assert num.tolist() == [2.0] and classes.tolist() == [[0.0, 1.0, 0.0]]
    assert np.allclose(boxes[0, :2], [_corners(1), _corners(0)], atol=1e-6) and not boxes[0, 2].any()
    every = {"max_detections": 3, "iou_threshold": 0.5, "use_regular_nms": True, "detections_per_class": 3}
    boxes, classes, scores, num = _run({**every, "score_threshold": 0.3})
    # class 0: box 1 suppresses 0 and 2, then box 3 (0.8); class 1: box 0 suppresses 1 and 2
    assert num.tolist() == [3.0] and classes.tolist() == [[0.0, 1.0, 0.0]]
    assert scores.tolist() == [[np.float32(0.9), np.float32(0.9), np.float32(0.8)]]
    assert np.allclose(boxes[0], [_corners(1), _corners(0), _corners(3)], atol=1e-6)


def test_decoding_divides_by_the_scales_in_double() -> None:
    enc = np.zeros((1, 4, 4), np.float32)
    enc[0, 3] = [1.0, -2.0, 5.0 * np.log(2.0), 0.0]  # centre moved by h/10 and -2w/10, height doubled
    boxes, _, _, _ = _run({"max_detections": 4, "iou_threshold": 1.0, "score_threshold": 0.0}, enc=enc)
    row = boxes[0, 3]  # box 3 has the lowest best score (0.8) of the four kept
    y = 0.1 + 1.0 / 10 * 0.1
    x = 0.1 - 2.0 / 10 * 0.1
    half_h = np.float32(0.5 * np.exp(np.float64(np.float32(5.0 * np.log(2.0)) / 5.0)) * np.float64(np.float32(0.1)))
    want = [
        np.float32(y) - half_h,
        np.float32(x) - np.float32(0.05),
        np.float32(y) + half_h,
        np.float32(x) + np.float32(0.05),
    ]
    assert np.allclose(row, want, atol=1e-7)


def test_an_empty_box_fails_as_the_kernel_does() -> None:
    anchors = ANCHORS.copy()
    anchors[2, 2] = 0.0  # zero height: ymin == ymax
    with pytest.raises(OpError, match="box 2 decodes to an empty box"):
        _run({"max_detections": 3}, anchors=anchors)


@pytest.mark.parametrize(
    "attrs,message",
    [
        ({"max_detections": 3, "iou_threshold": 0.0}, "iou_threshold=0.0 must be in"),
        ({"max_detections": 3, "use_regular_nms": True, "detections_per_class": 0}, "detections_per_class=0"),
        ({"max_detections": -1}, "max_detections=-1"),
    ],
)
def test_bad_attributes_name_the_problem(attrs, message) -> None:
    with pytest.raises(OpError, match=message):
        _run(attrs)


def test_inputs_must_be_float_and_consistent() -> None:
    g = Graph("det")
    b = g.input("enc", (1, 4, 4), "i8")
    s = g.input("scores", (1, 4, 2))
    a = g.param("anchors", ANCHORS)
    with pytest.raises(OpError, match="boxes must be float32"):
        g.detection_postprocess(b, s, a, num_classes=2, max_detections=3)
    b = g.input("enc2", (1, 4, 4))
    with pytest.raises(OpError, match="num_classes=4"):
        g.detection_postprocess(b, s, a, num_classes=4, max_detections=3)
