"""rlx-edge: put neural networks on the smallest hardware.

A serializable tensor IR with an optimizer, quantization, static memory
planning and ahead-of-time targets (Cortex-M C, FPGA Verilog), each checked
bit-exactly against one integer reference.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("rlx-edge")
except PackageNotFoundError:  # running from a checkout without install
    __version__ = "0.0.0+unknown"

from rlx_edge.errors import RlxError
from rlx_edge.ir.dtype import DType
from rlx_edge.ir.graph import Graph, Tensor
from rlx_edge.ir.types import QuantParams, TensorType


def load(path):
    """Load a ``.rlx``, ``.tflite`` or ``.onnx`` model as a Graph."""
    from rlx_edge.frontends import load_model

    return load_model(path)


def save(graph: Graph, path):
    """Save ``graph`` as an ``.rlx`` file (atomically)."""
    from rlx_edge.ir.serialize import save as _save

    return _save(graph, path)


def run(graph: Graph, inputs, *, trace: bool = False):
    """Run ``graph`` in the numpy reference (the oracle every target is checked against)."""
    from rlx_edge.targets.reference import run as _run

    return _run(graph, inputs, trace=trace)


def register_op(name: str, **kwargs):
    """Declare an op from another package (:func:`rlx_edge.extend.register_op`; docs/custom_ops.md)."""
    from rlx_edge.extend import register_op as _register_op

    return _register_op(name, **kwargs)


__all__ = [
    "DType",
    "Graph",
    "QuantParams",
    "RlxError",
    "Tensor",
    "TensorType",
    "__version__",
    "load",
    "register_op",
    "run",
    "save",
]
