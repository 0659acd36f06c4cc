"""Benchmark: our post-training quantization vs onnxruntime's ``quantize_static`` on the digits CNN.

Both quantize the same float model (our bundled digits CNN, exported to ONNX
in NCHW with ``onnx.helper``) from the same calibration samples, with MinMax
and Entropy calibration; ONNX Runtime uses QDQ format with per-channel int8
weights and int8 activations. Reported: held-out accuracy of each quantized
model, and the calibration time.

Timing is like for like: calibration only on both sides (ours:
``calibrate(graph, samples)``, which includes its pass pipeline; onnxruntime:
``create_calibrator`` + ``collect_data`` + ``compute_data``, which include its
model loading, graph augmentation and session creation, exactly what
``quantize_static`` runs to calibrate), the same samples fed in the same
batches (``--batch``, which must divide ``--calib``: onnxruntime's histogram
collector cannot mix batch sizes), ``--repeats`` runs each, median reported;
the two sides run in alternating blocks and onnxruntime's session is freed
before ours runs. Quantization (weights, graph rewrite) is not timed. The
quantized ONNX model is built by ``quantize_static`` from the very ranges the
timed calibration produced (its calibration cache), so accuracy and time
describe the same calibration.

Threads: onnxruntime keeps its default thread pool; numpy's BLAS (which our
float reference uses for convolutions) is limited to ``--blas-threads`` (1 by
default: these GEMMs are tiny, and on a busy machine spinning BLAS threads only
slow them down; 0 leaves BLAS alone). Prints one JSON line and appends it to
``bench/results/quantize.jsonl``.

    .venv/bin/python bench/quantize.py [--calib N] [--batch B] [--repeats R] [--blas-threads T]

``--mlperf`` instead measures the MLPerf Tiny float models VWW and IC (see
``bench/_sqnr.py``): the per-layer SQNR decomposition (int8, int16x8,
weights only, int16 activations with float weights; medians over layers) and
one mixed-precision selection each, one record per model and kind:

    .venv/bin/python bench/quantize.py --mlperf [--samples N] [--models vww,ic] [--no-mixed] [--mixed-below 0,6]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import (
    CalibrationDataReader,
    CalibrationMethod,
    QuantFormat,
    QuantType,
    quantize_static,
)
from onnxruntime.quantization.calibrate import create_calibrator, save_tensors_data
from onnxruntime.quantization.registry import QDQRegistry, QLinearOpsRegistry

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import record

from rlx_edge.ir.ops.quant import affine_quantize
from rlx_edge.models import build_digits_cnn, default_weights, digits_data
from rlx_edge.quant.calibrate import calibrate
from rlx_edge.quant.ptq import quantize
from rlx_edge.targets.reference import run


def digits_onnx(path: Path) -> Path:
    """The bundled digits CNN as an NCHW ONNX model (opset 13), weights converted from TFLite layouts."""
    w = default_weights()

    def init(name: str, arr: np.ndarray):
        return numpy_helper.from_array(np.ascontiguousarray(arr.astype(np.float32)), name)

    # [O,KH,KW,I] -> [O,I,KH,KW]; fc columns from NHWC flatten order (h,w,c) to NCHW order (c,h,w)
    inits = [
        init("conv1.w", w["conv1.w"].transpose(0, 3, 1, 2)),
        init("conv1.b", w["conv1.b"]),
        init("conv2.w", w["conv2.w"].transpose(0, 3, 1, 2)),
        init("conv2.b", w["conv2.b"]),
        init("fc.w", w["fc.w"].reshape(10, 2, 2, 16).transpose(0, 3, 1, 2).reshape(10, 64)),
        init("fc.b", w["fc.b"]),
    ]
    nodes = [
        helper.make_node("Conv", ["image", "conv1.w", "conv1.b"], ["c1"], pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "conv2.w", "conv2.b"], ["c2"], pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("MaxPool", ["r2"], ["p2"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p2"], ["flat"], axis=1),
        helper.make_node("Gemm", ["flat", "fc.w", "fc.b"], ["logits"], transB=1),
        helper.make_node("Softmax", ["logits"], ["probs"], axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        "digits_cnn",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", 1, 8, 8])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["N", 10])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path


class _Reader(CalibrationDataReader):
    def __init__(self, x_nchw: np.ndarray, batch: int) -> None:
        self.items = iter([{"image": x_nchw[i : i + batch]} for i in range(0, len(x_nchw), batch)])

    def get_next(self):
        return next(self.items, None)


def ort_calibrate(fpath: Path, x_nchw: np.ndarray, batch: int, method, tmp: Path):
    """onnxruntime's calibration step of ``quantize_static`` (same op types), returned as its TensorsData."""
    ops = sorted(set(QLinearOpsRegistry) | set(QDQRegistry))  # what quantize_static calibrates by default
    with contextlib.redirect_stdout(io.StringIO()):  # its collectors print progress
        cal = create_calibrator(fpath, ops, augmented_model_path=str(tmp / "augmented.onnx"), calibrate_method=method)
        cal.collect_data(_Reader(x_nchw, batch))
        data = cal.compute_data()
    del cal  # free the session (and its thread pool) before anything else is timed
    return data


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def ort_accuracy(path: Path, x_nchw: np.ndarray, y: np.ndarray) -> float:
    so = ort.SessionOptions()
    so.log_severity_level = 3
    s = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    return float((s.run(None, {"image": x_nchw})[0].argmax(1) == y).mean())


def ours_accuracy(q, x: np.ndarray, y: np.ndarray) -> float:
    t = q.types["image"]
    return float((run(q, affine_quantize(x, t.quant, t.dtype))["probs"].argmax(1) == y).mean())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calib", type=int, default=200, help="calibration samples (from the train split)")
    ap.add_argument("--batch", type=int, default=40, help="calibration batch size, both sides (must divide --calib)")
    ap.add_argument("--repeats", type=int, default=7, help="timed calibrations per side and method (median reported)")
    ap.add_argument("--blas-threads", type=int, default=1, help="limit numpy's BLAS threads (0: leave as is)")
    ap.add_argument("--no-save", action="store_true", help="print only; do not append to the results file")
    ap.add_argument("--mlperf", action="store_true", help="SQNR decomposition and mixed precision on VWW and IC")
    ap.add_argument("--samples", type=int, default=16, help="--mlperf: seeded calibration samples per model")
    ap.add_argument("--models", default="vww,ic", help="--mlperf: which models (vww, ic)")
    ap.add_argument("--no-mixed", action="store_true", help="--mlperf: skip the mixed-precision selection")
    ap.add_argument("--mixed-below", default="0,6", help="--mlperf: mixed targets, dB under the int8 output SQNR")
    args = ap.parse_args(argv)
    if args.mlperf:
        return _mlperf(args)
    if args.batch < 1 or args.calib % args.batch:
        ap.error("--batch must divide --calib (onnxruntime's histogram collector needs equal batches)")
    limit = contextlib.nullcontext()
    if args.blas_threads:
        from threadpoolctl import threadpool_limits  # installed with scikit-learn, which the digits data needs

        limit = threadpool_limits(limits=args.blas_threads, user_api="blas")
    (xtr, _), (xte, yte) = digits_data("train"), digits_data("test")
    calib = xtr[: args.calib]
    to_nchw = lambda a: np.ascontiguousarray(a.transpose(0, 3, 1, 2))  # noqa: E731
    rec: dict = {
        "bench": "quantize",
        "model": "digits_cnn",
        "calib_samples": len(calib),
        "calib_batch": args.batch,
        "test_samples": len(yte),
        "repeats": args.repeats,
        "blas_threads": args.blas_threads or "default",
        "timing": "calibration only, both sides; same samples and batches; median of repeats",
    }
    g = build_digits_cnn(batch="N")
    rec["float_accuracy"] = float((run(g, xte)["probs"].argmax(1) == yte).mean())
    with tempfile.TemporaryDirectory() as tmpdir, limit:
        tmp = Path(tmpdir)
        fpath = digits_onnx(tmp / "digits.onnx")
        rec["onnx_float_accuracy"] = ort_accuracy(fpath, to_nchw(xte), yte)
        for method, ort_method in (("minmax", CalibrationMethod.MinMax), ("entropy", CalibrationMethod.Entropy)):
            ours_t, ort_t = [], []
            ours_rec = ort_ranges = None
            for r in range(args.repeats):  # alternate which side goes first
                for side in ("ours", "ort") if r % 2 == 0 else ("ort", "ours"):
                    gc.collect()
                    if side == "ours":
                        t, ours_rec = _timed(lambda m=method: calibrate(g, calib, method=m, batch_size=args.batch))
                        ours_t.append(t)
                    else:
                        t, ort_ranges = _timed(
                            lambda m=ort_method: ort_calibrate(fpath, to_nchw(calib), args.batch, m, tmp)
                        )
                        ort_t.append(t)
            rec[f"rlx_{method}_calib_seconds"] = round(float(np.median(ours_t)), 4)
            rec[f"ort_{method}_calib_seconds"] = round(float(np.median(ort_t)), 4)
            rec[f"rlx_{method}_calib_seconds_all"] = [round(t, 4) for t in ours_t]
            rec[f"ort_{method}_calib_seconds_all"] = [round(t, 4) for t in ort_t]
            rec[f"rlx_{method}_accuracy"] = ours_accuracy(quantize(g, ours_rec), xte, yte)
            cache = tmp / f"calib_{method}.json"
            save_tensors_data(ort_ranges, cache)
            qpath = tmp / f"digits_{method}.onnx"
            quantize_static(
                str(fpath),
                str(qpath),
                None,
                quant_format=QuantFormat.QDQ,
                per_channel=True,
                activation_type=QuantType.QInt8,
                weight_type=QuantType.QInt8,
                calibrate_method=ort_method,
                calibration_cache_path=str(cache),
            )
            rec[f"ort_{method}_accuracy"] = ort_accuracy(qpath, to_nchw(xte), yte)
        t0 = time.perf_counter()
        q4 = quantize(g, calibrate(g, calib, batch_size=args.batch), scheme="int4w")
        rec["rlx_int4w_seconds"] = round(time.perf_counter() - t0, 3)
        rec["rlx_int4w_accuracy"] = ours_accuracy(q4, xte, yte)
    rec["onnxruntime"] = ort.__version__
    rec["python"] = platform.python_version()
    if args.no_save:
        print(json.dumps(rec, sort_keys=True))
    else:
        record("quantize", {k: v for k, v in rec.items() if k != "bench"})
    return 0


def _mlperf(args: argparse.Namespace) -> int:
    from _common import MODELS
    from _sqnr import decomposition, mixed_record

    for name in args.models.split(","):
        records = [decomposition(MODELS / "mlperf-tiny", name, args.samples)]
        if not args.no_mixed:
            for below in args.mixed_below.split(","):
                records.append(mixed_record(MODELS / "mlperf-tiny", name, args.samples, float(below)))
        for rec in records:
            if args.no_save:
                print(json.dumps({"bench": "quantize", **rec}, sort_keys=True))
            else:
                record("quantize", rec)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
