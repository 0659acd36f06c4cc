"""ONNX frontend: ``load_onnx(path) -> Graph`` for opsets 7 to 22.

The importer walks the ONNX graph once, in its (topological) node order, and
emits MIR nodes. Five things happen on the way:

* **Constant folding.** Initializers, ``Constant`` nodes and every node whose
  inputs are all constants are evaluated at import (``Shape -> Gather ->
  Concat -> Reshape`` chains, reshaped weights), so only real computation
  reaches the graph. ``Shape`` of a statically shaped value is a constant too.
* **Layout.** ONNX images are NCHW; the IR's spatial ops are NHWC. Every
  imported value remembers how it is held: either as ONNX shapes it, or
  permuted (``internal = transpose(onnx_value, perm)``). Spatial ops produce
  NHWC-held values; elementwise and axis ops follow the layout they are given
  (remapping their axes); layout-sensitive ops (Reshape, Flatten, MatMul, ...)
  get the ONNX layout back through a transpose. Transposes are emitted through
  one helper that composes a transpose of a transpose, so back-to-back
  conversions cancel and never reach the graph.
* **Exporter idioms.** Before the walk, the Erf-form GELU and the decomposed
  layer norm that exporters write below opsets 20 / 17 become one ``Gelu`` /
  ``LayerNormalization`` node (``_onnx_fuse``); after it, an attention softmax
  whose scores are masked with -inf (``Add`` of ``Where(mask, -inf, 0)``,
  reshaped and expanded, or ``Where(mask, -inf, scores)``) takes that mask as
  its bool ``mask`` input instead (``_onnx_masks``), so calibration and the
  integer softmax never see -inf.
* **Control flow.** ``If``, ``Loop`` and ``Scan`` (opset 9+) become ``if_``,
  ``while_`` and ``scan``; each subgraph is imported by a nested importer, the
  outer values it reads by name made explicit inputs (the IR's subgraphs are
  closed). An ``If`` on a constant condition is inlined; a ``Loop`` with a
  constant trip count gets ``max_trips`` (or becomes a ``scan``), so lowering
  can unroll it (``_onnx_control``).
* **Errors.** Every node that cannot be imported is collected; the import
  ends with one :class:`~rlx_edge.errors.UnsupportedOpError` listing all of
  them with their node names. An unreadable file, or one that breaks the
  ONNX spec (undefined or reassigned values, attributes missing or of the
  wrong type per the op's schema, wrong-rank weights, unknown element
  types), is one :class:`~rlx_edge.errors.ModelFileError` naming the file
  and the node. The result is verified, quantization checked throughout and
  sizes bounded (:mod:`rlx_edge.ir.verify`) before anything runs it.

Quantized models come as QDQ (``QuantizeLinear``/``DequantizeLinear`` around
float ops) or QOperator (``QLinearConv``, ``QLinearMatMul`` and the
``com.microsoft`` contrib ops of :data:`SUPPORTED_CONTRIB_OPS`, which
onnxruntime's quantizer emits for Add, Mul, AveragePool, GlobalAveragePool,
Concat, LeakyRelu and Sigmoid); scales and zero points must be constants and
become the IR's :class:`~rlx_edge.ir.types.QuantParams`. Other ``com.microsoft``
ops, and other domains, are unsupported. A quantized model leaves the importer
as the integer model it stands for: the ``qdq_fold`` pass turns each float op
between dequantize and quantize nodes into the integer op, ``transpose_fold``
removes the NCHW layout transposes where that is exact and
``symmetric_weights`` gives asymmetric dense weights the zero point 0 the
integer kernels take (``_onnx_import.QUANTIZED_IMPORT_PASSES``).

The graph's public inputs and outputs keep ONNX shapes (NCHW images), so a
user feeds the data the ONNX model takes and gets what it returns.
"""

from __future__ import annotations

from pathlib import Path

from rlx_edge.errors import ModelFileError
from rlx_edge.frontends._onnx_import import Importer, read_model
from rlx_edge.frontends._onnx_ops import CONTRIB_HANDLERS, HANDLERS
from rlx_edge.ir.graph import Graph

__all__ = ["SUPPORTED_CONTRIB_OPS", "SUPPORTED_OPS", "load_onnx"]

# ONNX op types the importer translates (constant-only subgraphs of other ops fold at import).
SUPPORTED_OPS: frozenset[str] = frozenset(HANDLERS)
# Op types of onnxruntime's com.microsoft domain it translates (its quantizer's QOperator ops).
SUPPORTED_CONTRIB_OPS: frozenset[str] = frozenset(CONTRIB_HANDLERS)


def load_onnx(path: str | Path) -> Graph:
    """Import the ONNX model at ``path`` as a float (or QDQ/QLinear-quantized) MIR graph.

    Raises :class:`~rlx_edge.errors.ModelFileError` for a missing, corrupt or
    truncated file and :class:`~rlx_edge.errors.UnsupportedOpError` (one, listing
    every offending node) for ops or op features rlx-edge cannot import.
    """
    path = Path(path)
    if not path.is_file():
        raise ModelFileError(f"{path}: no such file")
    return Importer(read_model(path), path).run()
