"""TFLite_Detection_PostProcess end to end: an int8 SSD head (dequantize -> detection_postprocess), fast and
regular NMS, on seeded inputs with overlapping boxes and tied scores, through the reference, TFLite Micro (the
exported file; the rows it writes), the Cortex-M host build and the firmware under QEMU. Prints one JSON
line: inputs compared and mismatches per target (all must be 0).

    .venv/bin/python bench/detection.py [--inputs 10] [--board qemu-m4]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import record

from rlx_edge.frontends.tflite import to_tflite_bytes
from rlx_edge.frontends.tflm import TflmModel
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.types import QuantParams
from rlx_edge.runners import prepare
from rlx_edge.targets.reference import run

N, CLASSES = 16, 3
HEADS = {
    "fast": {"max_detections": 6, "iou_threshold": 0.3},
    "regular": {"max_detections": 6, "iou_threshold": 0.4, "use_regular_nms": True, "detections_per_class": 3},
}


def head(attrs: dict, rng: np.random.Generator) -> Graph:
    g = Graph("ssd_head")
    enc = g.input("box_q", (1, N, 4), "i8", quant=QuantParams(np.float32(0.05), 3))
    cls = g.input("cls_q", (1, N, CLASSES + 1), "i8", quant=QuantParams(np.float32(1 / 256), -128))
    centre = rng.uniform(0.4, 0.6, (N, 2)) * (rng.random((N, 1)) < 0.7)
    anchors = np.concatenate([centre, rng.uniform(0.2, 0.4, (N, 2))], axis=1).astype(np.float32)
    a = g.param("anchors", anchors)
    deq = [g.dequantize(enc, dtype="f32"), g.dequantize(cls, dtype="f32")]
    g.output(*g.detection_postprocess(*deq, a, num_classes=CLASSES, score_threshold=0.3, **attrs))
    return g


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--inputs", type=int, default=10)
    ap.add_argument("--board", default="qemu-m4")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    mismatches = {"tflm": 0, "cortexm-host": 0, args.board: 0}
    seconds: dict[str, float] = {}
    compared = 0
    for name, attrs in HEADS.items():
        g = head(attrs, rng)
        feeds = []
        for _ in range(args.inputs):
            levels = int(rng.choice([3, 6, 256]))
            cls = (rng.integers(0, levels, (1, N, CLASSES + 1)) * (255 // (levels - 1)) - 128).astype(np.int8)
            feeds.append({"box_q": rng.integers(-40, 40, (1, N, 4), dtype=np.int8), "cls_q": cls})
        refs = [run(g, f) for f in feeds]
        with TflmModel(to_tflite_bytes(g)) as m:
            for f, ref in zip(feeds, refs):
                got = m([f["box_q"], f["cls_q"]])
                k = attrs["max_detections"] if attrs.get("use_regular_nms") else int(ref[g.outputs[3]][0])
                same = all(np.array_equal(w[:, :k], ref[o][:, :k]) for w, o in zip(got[:3], g.outputs[:3]))
                mismatches["tflm"] += not (same and np.array_equal(got[3], ref[g.outputs[3]]))
        for target in ("cortexm-host", args.board):
            t0 = time.perf_counter()
            runner = prepare(target, g)
            for f, ref in zip(feeds, refs):
                got = runner(f)
                mismatches[target] += not all(np.array_equal(got[o], ref[o]) for o in g.outputs)
            seconds[f"{name}/{target}"] = round(time.perf_counter() - t0, 1)
        compared += len(feeds)
    record("detection", {"inputs_per_head": args.inputs, "heads": list(HEADS), "compared": compared,
                         "mismatches": mismatches, "seconds": seconds})  # fmt: skip


if __name__ == "__main__":
    main()
