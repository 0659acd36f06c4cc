"""Object-detection heads: TFLite's custom op ``TFLite_Detection_PostProcess`` (SSD).

The op decodes SSD box encodings against their anchors and keeps the best
non-overlapping boxes by non-maximum suppression (NMS). It is float-only, as in
TFLite Micro, whose kernel takes float32 inputs only; a quantized model reads
it through ``dequantize`` nodes (the TFLite importer adds them, computing
``(float(q) - zero_point) * scale`` as TFLite's own kernel dequantizes).

Everything follows TFLite Micro's kernel (``detection_postprocess.cc``) so that
the same boxes survive and every output value has the same bits:

- Decoding is in double precision, rounded to float32 once per centre and
  half-size (the C library's ``exp``, which ``math.exp`` calls), then
  ``ymin = ycenter - half_h`` and so on in float32. Anchors are (y, x, h, w).
- The score threshold keeps ``score >= threshold``; the kept boxes are sorted
  by score, descending, stably (ties keep the lower box index first, as the
  kernel's merge sort does); IoU is float32 in the kernel's order of
  operations (0 when either area is <= 0), and a later box is suppressed when
  its IoU with a selected one is ``> iou_threshold``.
- Fast NMS (``use_regular_nms`` false) runs NMS once on each box's best class
  score (the lowest class index on ties) and reports that class. Regular NMS
  runs NMS per class (at most ``detections_per_class`` boxes each) and keeps
  the ``max_detections`` best over all classes: ties go to the lower class,
  then to the earlier selection.
- Outputs: boxes [1, M, 4] (ymin, xmin, ymax, xmax), classes [1, M] (the
  class index without the background column), scores [1, M] and
  num_detections [1], all float32, with M = ``max_detections``. Rows past the
  detections are zeros (regular NMS writes zeros there; TFLite Micro's fast
  NMS leaves them unwritten, so they hold whatever the output buffer held).
- A box that decodes empty (``ymin >= ymax`` or ``xmin >= xmax``) makes the
  kernel fail; the reference raises :class:`OpError` naming it (the Cortex-M kernel, which cannot
  raise, writes zeros and num_detections -1).

Only one class per detection (``max_classes_per_detection`` 1) is covered:
with more, TFLite Micro's fast NMS writes its rows at offsets that skip and
overrun the outputs, so the importer refuses such files.
"""

from __future__ import annotations

import math

import numpy as np

from rlx_edge.errors import OpError
from rlx_edge.ir.dtype import DType
from rlx_edge.ir.ops._common import fail
from rlx_edge.ir.ops._registry import Attr, defop
from rlx_edge.ir.shape import format_shape, is_static
from rlx_edge.ir.types import TensorType

detection_postprocess = defop(
    "detection_postprocess",
    family="detection",
    inputs=("boxes", "scores", "anchors"),
    num_outputs=4,
    differentiable=False,  # NMS selects boxes: piecewise constant in the scores
    attrs={
        "max_detections": Attr("int", doc="M: rows of the outputs, the most detections reported"),
        "num_classes": Attr("int", doc="classes without the background column"),
        "score_threshold": Attr("float", 0.0, doc="scores below it are dropped (float32)"),
        "iou_threshold": Attr("float", 0.5, doc="a box overlapping a kept one by more is dropped, in (0, 1]"),
        "use_regular_nms": Attr("bool", False, doc="NMS per class (regular) or on each box's best class (fast)"),
        "detections_per_class": Attr("int", 100, doc="regular NMS: the most boxes kept per class"),
        "y_scale": Attr("float", 10.0, doc="box encodings: the centre's y is divided by it"),
        "x_scale": Attr("float", 10.0, doc="box encodings: the centre's x is divided by it"),
        "h_scale": Attr("float", 5.0, doc="box encodings: log height is divided by it"),
        "w_scale": Attr("float", 5.0, doc="box encodings: log width is divided by it"),
    },
    doc="SSD post-processing: decode boxes against anchors and keep the best by non-maximum suppression"
    " (TFLite's custom op TFLite_Detection_PostProcess). Outputs boxes, classes, scores, num_detections.",
)


@detection_postprocess.infer
def _infer(
    boxes, scores, anchors, *, max_detections, num_classes, iou_threshold, use_regular_nms, detections_per_class, **_
):
    # the score threshold and the decoding scales shape nothing: any value is valid (``_`` takes them)
    op = "detection_postprocess"
    for name, t, rank in (("boxes", boxes, 3), ("scores", scores, 3), ("anchors", anchors, 2)):
        if t.dtype != DType.f32:
            fail(f"{op}: {name} must be float32 (TFLite Micro's kernel takes float only), got {t.dtype};"
                 " dequantize it first")  # fmt: skip
        if t.rank != rank or not is_static(t.shape):
            fail(f"{op}: {name} must have a static shape of rank {rank}, got {format_shape(t.shape)}")
    b, n, k = (int(d) for d in boxes.shape)
    if b != 1 or k < 4:
        fail(f"{op}: boxes {format_shape(boxes.shape)} must be [1, boxes, 4 or more] (batch 1, as the kernel)")
    if tuple(int(d) for d in scores.shape[:2]) != (1, n):
        fail(f"{op}: scores {format_shape(scores.shape)} must be [1, {n}, classes] to match boxes")
    if tuple(int(d) for d in anchors.shape) != (n, 4):
        fail(f"{op}: anchors {format_shape(anchors.shape)} must be [{n}, 4] (y, x, h, w per box)")
    with_bg = int(scores.shape[2])
    if num_classes < 1 or with_bg - num_classes not in (0, 1):
        fail(f"{op}: num_classes={num_classes} must be the scores' {with_bg} columns, or one fewer (background)")
    if max_detections < 0:
        fail(f"{op}: max_detections={max_detections} must be >= 0")
    if use_regular_nms and detections_per_class < 1:
        fail(f"{op}: detections_per_class={detections_per_class} must be positive for regular NMS")
    if not 0.0 < np.float32(iou_threshold) <= 1.0:
        fail(f"{op}: iou_threshold={iou_threshold} must be in (0, 1] (TFLite Micro's kernel fails otherwise)")
    m = max_detections
    f32 = DType.f32
    return TensorType((1, m, 4), f32), TensorType((1, m), f32), TensorType((1, m), f32), TensorType((1,), f32)


def decode_boxes(enc: np.ndarray, anchors: np.ndarray, scales: tuple[float, float, float, float]) -> np.ndarray:
    """Corner boxes [N, 4] (ymin, xmin, ymax, xmax) from centre-size encodings and anchors, as the kernel."""
    ys, xs, hs, ws = (float(np.float32(s)) for s in scales)  # float attributes, widened to double
    out = np.empty((enc.shape[0], 4), np.float32)
    for i in range(enc.shape[0]):
        y, x, h, w = (float(v) for v in enc[i, :4])
        ay, ax, ah, aw = (float(v) for v in anchors[i])
        yc = np.float32(y / ys * ah + ay)
        xc = np.float32(x / xs * aw + ax)
        half_h = np.float32(0.5 * math.exp(h / hs) * ah)
        half_w = np.float32(0.5 * math.exp(w / ws) * aw)
        out[i] = (yc - half_h, xc - half_w, yc + half_h, xc + half_w)
    return out


def _iou(boxes: np.ndarray, i: int, js: np.ndarray) -> np.ndarray:
    """IoU of box ``i`` with boxes ``js``, float32 in the kernel's order (0 where an area is <= 0)."""
    a, b = boxes[i], boxes[js]
    area_i = (a[2] - a[0]) * (a[3] - a[1])
    area_j = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    zero = np.float32(0)
    ih = np.maximum(np.minimum(a[2], b[:, 2]) - np.maximum(a[0], b[:, 0]), zero)
    iw = np.maximum(np.minimum(a[3], b[:, 3]) - np.maximum(a[1], b[:, 1]), zero)
    inter = ih * iw
    with np.errstate(divide="ignore", invalid="ignore"):
        iou = inter / (area_i + area_j - inter)
    return np.where((area_i <= zero) | (area_j <= zero), zero, iou)


def nms_single_class(
    boxes: np.ndarray, scores: np.ndarray, limit: int, score_threshold: np.float32, iou_threshold: np.float32
) -> list[int]:
    """Box indices kept by greedy NMS on one column of scores, best first (TFLite Micro's single-class NMS)."""
    kept = np.flatnonzero(scores >= score_threshold)
    order = kept[np.argsort(-scores[kept], kind="stable")]  # descending; ties keep the lower index first
    selected: list[int] = []
    active = np.ones(order.size, bool)
    for pos in range(order.size):
        if len(selected) >= min(order.size, limit):
            break
        if not active[pos]:
            continue
        selected.append(int(order[pos]))
        active[pos] = False
        rest = pos + 1 + np.flatnonzero(active[pos + 1 :])
        if rest.size:
            active[rest[_iou(boxes, int(order[pos]), order[rest]) > iou_threshold]] = False
    return selected


@detection_postprocess.reference
def _reference(
    boxes,
    scores,
    anchors,
    *,
    max_detections,
    num_classes,
    score_threshold,
    iou_threshold,
    use_regular_nms,
    detections_per_class,
    y_scale,
    x_scale,
    h_scale,
    w_scale,
):
    enc = np.asarray(boxes, np.float32)[0]
    sc = np.asarray(scores, np.float32)[0]
    decoded = decode_boxes(enc, np.asarray(anchors, np.float32), (y_scale, x_scale, h_scale, w_scale))
    bad = np.flatnonzero((decoded[:, 0] >= decoded[:, 2]) | (decoded[:, 1] >= decoded[:, 3]))
    if bad.size:
        raise OpError(
            f"detection_postprocess: box {int(bad[0])} decodes to an empty box {decoded[bad[0]].tolist()}"
            " (ymin >= ymax or xmin >= xmax), on which TFLite Micro's kernel fails"
        )
    offset = sc.shape[1] - num_classes  # 1 when column 0 is the background
    thr, iou_thr = np.float32(score_threshold), np.float32(iou_threshold)
    if use_regular_nms:
        cand_box: list[int] = []
        cand_class: list[int] = []
        cand_score = np.zeros(0, np.float32)
        for c in range(num_classes):
            col = sc[:, c + offset]
            sel = nms_single_class(decoded, col, detections_per_class, thr, iou_thr)
            cand_box += sel
            cand_class += [c] * len(sel)
            cand_score = np.concatenate([cand_score, col[sel]])
            # the kernel keeps the best max_detections after each class; position breaks ties
            top = np.argsort(-cand_score, kind="stable")[:max_detections]
            cand_box = [cand_box[t] for t in top]
            cand_class = [cand_class[t] for t in top]
            cand_score = cand_score[top]
        picked, classes, picked_scores = cand_box, cand_class, cand_score
    else:
        best = np.argmax(sc[:, offset:], axis=1)  # the first class on ties
        best_score = sc[np.arange(sc.shape[0]), best + offset]
        picked = nms_single_class(decoded, best_score, max_detections, thr, iou_thr)
        classes = [int(best[i]) for i in picked]
        picked_scores = best_score[picked]
    k = len(picked)
    out_boxes = np.zeros((1, max_detections, 4), np.float32)
    out_classes = np.zeros((1, max_detections), np.float32)
    out_scores = np.zeros((1, max_detections), np.float32)
    out_boxes[0, :k] = decoded[picked]
    out_classes[0, :k] = classes
    out_scores[0, :k] = picked_scores
    return out_boxes, out_classes, out_scores, np.array([k], np.float32)


@detection_postprocess.written
def _written(outputs, **attrs):
    """Rows past ``num_detections`` are unspecified: TFLite Micro leaves them as its arena held them
    (ours are zeros), so a comparison looks at the first ``num_detections`` rows of each."""
    boxes, classes, scores, count = outputs
    rows = np.arange(classes.shape[-1]) < int(np.asarray(count).reshape(-1)[0])
    return [np.broadcast_to(rows[:, None], boxes.shape[-2:]).reshape(boxes.shape), rows.reshape(classes.shape),
            rows.reshape(scores.shape), None]  # fmt: skip


@detection_postprocess.sample
def _sample(rng):
    n = int(rng.integers(1, 13))
    classes = int(rng.integers(1, 5))
    with_bg = classes + int(rng.integers(2))
    enc = (rng.standard_normal((1, n, 4 + int(rng.integers(2)))) * 2).astype(np.float32)
    anchors = np.column_stack(
        [rng.uniform(0.2, 0.8, n), rng.uniform(0.2, 0.8, n), rng.uniform(0.1, 0.5, n), rng.uniform(0.1, 0.5, n)]
    ).astype(np.float32)
    if n > 2 and rng.random() < 0.5:  # boxes on one anchor overlap heavily
        anchors[1:3] = anchors[0]
        enc[0, 1:3] = enc[0, 0] + rng.uniform(-0.1, 0.1, (2, enc.shape[2])).astype(np.float32)
    levels = int(rng.choice([3, 256]))  # few levels make ties
    scores = (rng.integers(0, levels, (1, n, with_bg)) / (levels - 1)).astype(np.float32)
    attrs = {
        "max_detections": int(rng.integers(1, 7)),
        "num_classes": classes,
        "score_threshold": float(rng.choice([0.0, 0.3, 0.6])),
        "iou_threshold": float(rng.choice([0.2, 0.5, 1.0])),
        "use_regular_nms": bool(rng.random() < 0.5),
        "detections_per_class": int(rng.integers(1, 6)),
        "y_scale": 10.0,
        "x_scale": 10.0,
        "h_scale": 5.0,
        "w_scale": 5.0,
    }
    return [enc, scores, anchors], attrs
