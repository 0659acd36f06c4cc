"""A float model interface around the integer datapath: quantize at the inputs, dequantize at the outputs.

A model whose inputs are float starts with ``quantize`` nodes and one whose
outputs are float ends with ``dequantize`` nodes. Their arithmetic is float32
(TFLite's ``round(x / scale) + zero_point`` divides in float32), which no
fixed-point circuit reproduces bit for bit for every scale, so the datapath
does not compute them: it streams the int8 tensors between them, and the
host side (the simulation driver, :func:`rlx_edge.targets.fpga.run`, a
user's driver) quantizes and dequantizes with each node's prepared
parameters (``Program.quant``) through the op's own ``eval``, the very
arithmetic of the reference. :class:`HostEdge` is one such node; the
*device graph* is the model without them, its inputs the quantized tensors
and its outputs the tensors before dequantization.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlx_edge.ir.graph import Graph, Node
from rlx_edge.ir.ops import REGISTRY
from rlx_edge.ir.prepared import Prepared

#: ops that run on the host at the model's edges
EDGE_OPS = ("quantize", "dequantize")


@dataclass(frozen=True)
class HostEdge:
    """One quantize (float model input -> int8 stream) or dequantize (int8 stream -> float model output)."""

    node: Node
    params: Prepared  # the node's prepared parameters: what the reference computes with

    @property
    def kind(self) -> str:
        return self.node.op

    @property
    def host_value(self) -> str:
        """The float value: a model input (quantize) or a model output (dequantize)."""
        return self.node.inputs[0] if self.kind == "quantize" else self.node.outputs[0]

    @property
    def stream_value(self) -> str:
        """The int8 value the datapath streams."""
        return self.node.outputs[0] if self.kind == "quantize" else self.node.inputs[0]

    def convert(self, x: np.ndarray) -> np.ndarray:
        """The node's integer eval on its prepared parameters, one inference at a time."""
        op = REGISTRY[self.kind]
        return np.asarray(op.run_eval(self.params, [np.asarray(x)], self.node.attrs)[0])

    def describe(self) -> dict[str, Any]:
        """What a driver needs to reproduce the conversion: the op, the float value, its parameters."""
        p = self.params

        def plain(v: Any) -> Any:
            return np.asarray(v).reshape(-1).tolist() if np.ndim(v) else v

        return {
            "op": self.kind,
            "value": self.host_value,
            "node": self.node.name,
            "scale": plain(p.scale),
            "zero_point": plain(p.zp),
            "dtype": str(self.node.attrs["dtype"]),
        }


def device_graph(g: Graph, edges: Sequence[HostEdge]) -> Graph:
    """``g`` without its edge nodes: inputs the quantized streams, outputs the values before dequantization.

    A float input quantized by several nodes gives one stream per node; outputs
    stay in order, a stream that feeds several outputs once.
    """
    if not edges:
        return g
    d = g.copy()
    drop = {e.node.name for e in edges}
    d.nodes = [n for n in d.nodes if n.name not in drop]
    quantized = {}
    for e in edges:
        if e.kind == "quantize":
            quantized.setdefault(e.host_value, []).append(e.stream_value)
    dequantized = {e.host_value: e.stream_value for e in edges if e.kind == "dequantize"}
    d.inputs = list(dict.fromkeys(s for v in g.inputs for s in quantized.get(v, [v])))
    d.outputs = list(dict.fromkeys(dequantized.get(v, v) for v in g.outputs))
    for v in (*quantized, *dequantized):
        d.types.pop(v, None)
    return d


def to_streams(g: Graph, d: Graph, edges: Sequence[HostEdge], inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Model inputs of ``g`` (one array per input, leading inference axis) as the device graph ``d``'s streams."""
    by_input = dict(zip(g.inputs, inputs))
    made = {e.stream_value: e for e in edges if e.kind == "quantize"}
    out = []
    for v in d.inputs:
        e = made.get(v)
        out.append(by_input[v] if e is None else np.stack([e.convert(x) for x in by_input[e.host_value]]))
    return out


def from_streams(g: Graph, d: Graph, edges: Sequence[HostEdge], streams: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The device graph's output streams (leading inference axis) as ``g``'s outputs, dequantized where it does."""
    by_stream = dict(zip(d.outputs, streams))
    made = {e.host_value: e for e in edges if e.kind == "dequantize"}
    out = []
    for v in g.outputs:
        e = made.get(v)
        out.append(by_stream[v] if e is None else np.stack([e.convert(x) for x in by_stream[e.stream_value]]))
    return out


def float_range(edges: Sequence[HostEdge], value: str) -> tuple[float, float]:
    """The real values the int8 streams quantized from model input ``value`` represent (all channels)."""
    lo, hi = np.inf, -np.inf
    for e in edges:
        if e.kind == "quantize" and e.host_value == value:
            s = np.asarray(e.params.scale, np.float64)
            zp = np.asarray(e.params.zp, np.float64)
            lo = min(lo, float(np.min(s * (-128 - zp))))
            hi = max(hi, float(np.max(s * (127 - zp))))
    if lo > hi:
        raise ValueError(f"no quantize edge reads {value!r}")
    return lo, hi


def model_mismatches(g: Graph, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray], res: dict) -> None:
    """Adds to ``res`` (a simulation's ``mismatches``, ``first_mismatch``) the elements of the model's
    outputs that differ from the reference run on the whole model, host conversions included.

    Equal streams dequantize to equal floats, so this finds only a host conversion that is not
    the reference's; NaN equals NaN.
    """
    from rlx_edge.targets.reference import run as ref_run

    for i in range(int(inputs[0].shape[0])):
        want = ref_run(g, [a[i] for a in inputs])
        for k, v in enumerate(g.outputs):
            got, w = np.asarray(outputs[k][i]), np.asarray(want[v])
            same = got.shape == w.shape and got.dtype == w.dtype
            ok = (got == w) | ((got != got) & (w != w)) if same else np.zeros(max(w.size, 1), bool)
            bad = np.flatnonzero(~np.asarray(ok).reshape(-1))
            res["mismatches"] += int(bad.size)
            if bad.size and res["first_mismatch"] is None:
                j = int(bad[0])
                res["first_mismatch"] = {"inference": i, "output": v, "index": j, "host": True}
