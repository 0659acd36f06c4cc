"""mnist-8 quantized by onnxruntime's ``quantize_static``, shared by the tests that run it.

The model zoo's mnist-8 (opset 8) is upgraded to opset 13, where
DequantizeLinear takes a per-channel ``axis``, and quantized with seeded
calibration images as QDQ (per channel or per tensor) or QOperator, int8
activations and weights. ``tests/frontends/test_onnx_qdq.py`` checks it against
onnxruntime and the MCU; ``tests/targets/fpga/test_layers.py`` on the FPGA.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import version_converter
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

from modelfiles import ONNX

MNIST = ONNX / "mnist-8_onnx-model-zoo.onnx"
X = "Input3"
#: name -> (format, per-channel weights)
VARIANTS = {
    "qdq_pc": (QuantFormat.QDQ, True),
    "qdq_pt": (QuantFormat.QDQ, False),
    "qop_pc": (QuantFormat.QOperator, True),
}


class _Reader(CalibrationDataReader):
    def __init__(self, feeds: list[dict[str, np.ndarray]]) -> None:
        self._it = iter(feeds)

    def get_next(self):
        return next(self._it, None)


def images(rng: np.random.Generator, n: int) -> list[np.ndarray]:
    """``n`` random 28x28 images in mnist-8's input range [0, 255)."""
    return [(rng.random((1, 1, 28, 28)) * 255).astype(np.float32) for _ in range(n)]


def quantized_mnist(folder: Path, names=tuple(VARIANTS)) -> dict[str, Path]:
    """The variants ``names`` written into ``folder``, calibrated on 8 seeded images: name -> path."""
    src = folder / "mnist13.onnx"
    onnx.save(version_converter.convert_version(onnx.load(MNIST), 13), src)
    out = {}
    for name in names:
        fmt, per_channel = VARIANTS[name]
        feeds = [{X: x} for x in images(np.random.default_rng(0), 8)]
        out[name] = folder / f"{name}.onnx"
        quantize_static(
            src, out[name], _Reader(feeds), quant_format=fmt, per_channel=per_channel,
            activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
        )  # fmt: skip
    return out
