"""Model loading by file type: ``.rlx`` (native), ``.tflite`` and ``.onnx``."""

from __future__ import annotations

from pathlib import Path

from rlx_edge.errors import ModelFileError
from rlx_edge.ir.graph import Graph

FORMATS = (".rlx", ".tflite", ".onnx")


def load_model(path: str | Path) -> Graph:
    """Load a model of any supported format into a Graph."""
    path = Path(path)
    if not path.exists():
        raise ModelFileError(f"{path}: no such file")
    if path.is_dir():
        raise ModelFileError(f"{path}: is a folder, expected a model file ({', '.join(FORMATS)})")
    suffix = path.suffix.lower()
    if suffix == ".rlx":
        from rlx_edge.ir.serialize import load

        return load(path)
    if suffix == ".tflite":
        from rlx_edge.frontends.tflite import load_tflite

        return load_tflite(path)
    if suffix == ".onnx":
        from rlx_edge.frontends.onnx import load_onnx

        return load_onnx(path)
    raise ModelFileError(f"{path}: unknown model format {suffix or '(no suffix)'}; expected {', '.join(FORMATS)}")
