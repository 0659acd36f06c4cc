"""Where the model files of the tests live: ``models/`` at the top of the checkout.

The one place that knows the path (tests and ``hil/`` import it; benchmarks use
``bench/_common.py``). A missing file is a clear failure, never a skip.
"""

from __future__ import annotations

from pathlib import Path

MODELS = Path(__file__).resolve().parents[1] / "models"
MLPERF = MODELS / "mlperf-tiny"
ONNX = MODELS / "onnx"
TFLM = MODELS / "tflm"
SEANET = TFLM / "seanet"  # single-op int16 models of TFLite Micro's integration tests


def model_path(relative: str) -> Path:
    """``models/<relative>``; raises FileNotFoundError naming the file when it is absent."""
    path = MODELS / relative
    if not path.is_file():
        raise FileNotFoundError(f"{path}: model file missing from the checkout (see models/README.md)")
    return path
