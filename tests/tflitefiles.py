"""TFLite files written by hand, for the tests that need operators our exporter never writes.

Some builtins cannot come out of the exporter: EMBEDDING_LOOKUP means the gather
GATHER already writes, and the shape-only builtins (SHAPE, FILL, ...) are folded
to constants at import, so no graph holds them. :func:`hand_made` writes such
operators over a graph's values with the exporter's own writer (tensor and
buffer layout as in every file we write); the frontend tests and the
conformance suite share it.
"""

from __future__ import annotations

import numpy as np

from rlx_edge.frontends import _tflite_export
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.types import TensorType

# builtin, input names, output names, options table (or None), scalar option fields
OpSpec = tuple[str, list[str], list[str], "str | None", dict]


def hand_made(g: Graph, ops: list[OpSpec], extra: dict[str, tuple[np.ndarray | None, TensorType]]) -> bytes:
    """A file of ``ops`` over ``g``'s values (its inputs, outputs, types and constants) and the
    ``extra`` tensors only the file has (constant data, or None for a computed tensor).

    The file's operators are ``ops`` alone: ``g``'s nodes only lend their values' names and types.
    """
    w = _tflite_export._Writer(g)
    for n in g.inputs:
        w.tensor(n)

    def index(name: str) -> int:
        if name in extra and name not in w.tensor_index:
            arr, t = extra[name]
            w.add_tensor(name, t, 0 if arr is None else w.add_buffer(arr, t.dtype))
        return w.tensor_index[name] if name in w.tensor_index else w.tensor(name)

    for opname, ins, outs, table, fields in ops:
        w.ops.append(_tflite_export._OpOut(opname, [index(n) for n in ins], [index(n) for n in outs], table, fields))
    return w.build()
