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

__all__ = ["DType", "Graph", "QuantParams", "RlxError", "Tensor", "TensorType", "__version__"]
