"""Mixed precision: int4 weights, int8 or int16x8 per layer, chosen by measured sensitivity.

A *layer* is a conv, depthwise conv or fully connected node that int8 PTQ puts
on the integer path. :func:`select_mixed` measures, on the calibration
samples and through the integer reference, how much the model's output SQNR
(vs the float model) moves when one layer alone leaves int8 (its
*sensitivity*: dB lost at int4 weights, dB gained at int16x8), then:

1. if every layer at int8 misses the target, raises layers to int16x8, most
   helpful first, until the target is met;
2. lowers layers one step at a time (int16x8 -> int8 -> int4w), least
   sensitive first, keeping each step only if a real run of the whole
   candidate graph still meets the target.

Every candidate is a real quantized graph (:func:`~rlx_edge.quant.ptq.quantize`
with ``layer_schemes``) run through the integer reference, so the SQNR the
result reports is measured, not estimated. A target that even every layer at
the highest candidate scheme misses is an error naming the SQNR that one gives.

Sizes: a layer's flash is its weights as stored (int4 packed two per byte, as
TFLite's INT4 tensors and the packed Cortex-M layout hold them) plus its bias;
the arena is the reference target's plan of the result.
"""

from __future__ import annotations

import heapq
import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlx_edge.errors import RlxError
from rlx_edge.ir.dtype import DType
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.ops.quant import affine_dequantize, affine_quantize
from rlx_edge.pipeline import AS_GIVEN, PipelineOptions, optimize_graph, to_program
from rlx_edge.quant.calibrate import _runner, iter_batches
from rlx_edge.quant.ptq import WEIGHTED, quantize
from rlx_edge.quant.record import CalibrationRecord

LEVELS = ("int4w", "int8", "int16x8")  # smallest first: int4w halves weight flash, int16x8 doubles activations
EXACT_DB = 200.0  # an output with no error at all counts as this SQNR (sensitivities stay finite)


@dataclass(frozen=True)
class LayerChoice:
    """One layer's scheme and what was measured about it."""

    node: str
    op: str
    scheme: str
    lower_db: float | None  # output SQNR lost when only this layer goes down from the base (None: no lower scheme)
    raise_db: float | None  # output SQNR gained when only this layer goes up from the base (None: no higher scheme)
    flash_bytes: int  # weights (int4 packed) + bias, as stored

    @property
    def sensitivity_db(self) -> float | None:
        """The sensitivity that decided this layer: what going one step down from its scheme costs."""
        return self.raise_db if self.scheme == "int16x8" else self.lower_db


@dataclass(frozen=True)
class MixedResult:
    """The chosen mixed-precision graph with its per-layer choices, sizes and measured output SQNR."""

    graph: Graph
    target_sqnr_db: float
    output_sqnr_db: float
    base: str
    layers: tuple[LayerChoice, ...]
    uniform_sqnr_db: dict[str, float] = field(default_factory=dict)  # every layer at one scheme
    flash_bytes: int = 0  # every constant of the graph, int4 packed
    arena_bytes: int = 0
    evaluations: int = 0  # candidate graphs quantized and run
    samples: int = 0

    def to_json(self) -> dict[str, Any]:
        counts: dict[str, int] = {}
        for c in self.layers:
            counts[c.scheme] = counts.get(c.scheme, 0) + 1
        return {
            "target_sqnr_db": self.target_sqnr_db,
            "output_sqnr_db": self.output_sqnr_db,
            "base": self.base,
            "uniform_sqnr_db": dict(self.uniform_sqnr_db),
            "flash_bytes": self.flash_bytes,
            "layer_flash_bytes": sum(c.flash_bytes for c in self.layers),
            "arena_bytes": self.arena_bytes,
            "schemes": counts,
            "evaluations": self.evaluations,
            "samples": self.samples,
            "layers": [
                {
                    "node": c.node,
                    "op": c.op,
                    "scheme": c.scheme,
                    "sensitivity_db": c.sensitivity_db,
                    "lower_db": c.lower_db,
                    "raise_db": c.raise_db,
                    "flash_bytes": c.flash_bytes,
                }
                for c in self.layers
            ],
        }


def stored_bytes(arr: np.ndarray, dtype: DType) -> int:
    """Bytes of a constant in flash: int4 two per byte, anything else as its type."""
    if dtype == DType.i4:
        return (arr.size + 1) // 2
    return int(arr.size * arr.dtype.itemsize)


def graph_flash_bytes(q: Graph) -> int:
    return sum(stored_bytes(a, q.types[k].dtype) for k, a in q.params.items())


def layer_flash_bytes(q: Graph) -> dict[str, int]:
    """Flash of each weighted node's constants (weights + bias) by original node name, from ``q``'s metadata."""
    values = q.metadata.get("quantization", {}).get("values", {})
    made_by = {o: n for n in q.nodes for o in n.outputs}
    out = {}
    for orig, qv in values.items():
        node = made_by.get(qv)
        if node is not None and node.op in WEIGHTED:
            out[orig] = sum(stored_bytes(q.params[v], q.types[v].dtype) for v in node.inputs[1:] if v in q.params)
    return out


class _Evaluator:
    """Output SQNR of candidate graphs on fixed samples; the float outputs are computed once."""

    def __init__(self, g: Graph, record: CalibrationRecord, data: Any, max_samples: int | None, options: dict) -> None:
        self.g, self.record, self.options = g, record, options
        self.batches = list(iter_batches(g, data, 32, max_samples))
        if not self.batches:
            raise RlxError("mixed precision needs samples to measure on; the data is empty")
        self.samples = sum(len(next(iter(b.values()))) for b in self.batches)
        self.float_out = [self._outputs(g, g.outputs, b) for b in self.batches]
        self.count = 0

    @staticmethod
    def _outputs(graph: Graph, names: Sequence[str], batch: dict[str, np.ndarray]) -> list[np.ndarray]:
        """Each output, real-valued, as [samples, -1] (one batched run, or one run per sample)."""
        n = len(next(iter(batch.values())))
        feed = {}
        for k, v in batch.items():
            t = graph.types[k]
            feed[k] = affine_quantize(v, t.quant, t.dtype) if t.quant is not None and t.dtype.is_int else v
        runs = list(_runner(graph)(feed))
        outs = []
        for name in names:
            t = graph.types[name]
            parts = [r[name] for r in runs]
            if t.quant is not None and t.dtype.is_int:
                parts = [affine_dequantize(p, t.quant) for p in parts]
            outs.append(np.concatenate([p.reshape(n if len(runs) == 1 else 1, -1) for p in parts]))
        return outs

    def quantize(self, layers: Mapping[str, str], *, quiet: bool = True) -> Graph:
        with warnings.catch_warnings():
            if quiet:  # the candidates' clip warnings would repeat; the final graph's are shown
                warnings.simplefilter("ignore")
            return quantize(self.g, self.record, scheme="int8", layer_schemes=layers, optimize=False, **self.options)

    def sqnr(self, q: Graph) -> float:
        """The lowest output SQNR of ``q`` vs float, in dB, capped at EXACT_DB."""
        self.count += 1
        sig = np.zeros(len(q.outputs))
        err = np.zeros(len(q.outputs))
        for batch, want in zip(self.batches, self.float_out):
            for i, got in enumerate(self._outputs(q, q.outputs, batch)):
                f = want[i].astype(np.float64)
                sig[i] += float(np.sum(f * f))
                err[i] += float(np.sum((f - got.astype(np.float64)) ** 2))
        worst = EXACT_DB
        for s, e in zip(sig, err):
            if e > 0:
                worst = min(worst, 10.0 * math.log10(s / e) if s > 0 else -EXACT_DB)
        return worst

    def __call__(self, layers: Mapping[str, str]) -> float:
        return self.sqnr(self.quantize(layers))


def select_mixed(
    graph: Graph,
    record: CalibrationRecord,
    data: Any,
    target_sqnr_db: float,
    *,
    schemes: Sequence[str] = LEVELS,
    max_samples: int | None = None,
    optimize: bool = True,
    **quantize_options: Any,
) -> MixedResult:
    """Per layer the smallest scheme of ``schemes`` such that the output SQNR on ``data`` stays >= the target.

    ``schemes`` are the candidates (any of ``int4w``, ``int8``, ``int16x8``;
    give ``("int4w", "int8")`` for a target without int16 kernels, such as
    Cortex-M). ``quantize_options`` go to every
    :func:`~rlx_edge.quant.ptq.quantize` call (``weight_method``,
    ``float_interface``, ...). Raises :class:`RlxError` when even every layer
    at the highest candidate misses the target.
    """
    unknown = [s for s in schemes if s not in LEVELS]
    if unknown or not schemes:
        raise RlxError(f"mixed precision schemes {list(schemes)!r}: choose among {', '.join(LEVELS)}")
    if not math.isfinite(target_sqnr_db):
        raise RlxError(f"--target-sqnr must be a finite number of dB, not {target_sqnr_db}")
    levels = [s for s in LEVELS if s in schemes]
    top = levels[-1]
    base = "int8" if "int8" in levels else top
    g, _ = optimize_graph(graph, PipelineOptions(optimize=optimize))
    ev = _Evaluator(g, record, data, max_samples, quantize_options)
    stays_float = ev.quantize({}).metadata["quantization"]["float_nodes"]
    layers = [n.name for n in g.nodes if n.op in WEIGHTED and n.name not in stays_float]
    if not layers:
        raise RlxError(f"graph {g.name!r} has no conv, depthwise or fully connected node to choose a scheme for")

    def at(level: str, **changes: str) -> dict[str, str]:
        return {**dict.fromkeys(layers, level), **changes}

    uniform = {base: ev(at(base))}
    if top != base:
        uniform[top] = ev(at(top))
    if uniform[top] < target_sqnr_db:
        raise RlxError(
            f"target SQNR {target_sqnr_db:g} dB is out of reach for {g.name!r}: every layer at {top} gives "
            f"{uniform[top]:.2f} dB on these {ev.samples} samples; ask for at most that"
        )
    b = levels.index(base)
    down = {n: uniform[base] - ev(at(base, **{n: levels[b - 1]})) for n in layers} if b > 0 else {}
    up = {n: ev(at(base, **{n: levels[b + 1]})) - uniform[base] for n in layers} if b + 1 < len(levels) else {}

    cfg = at(base)
    sqnr = uniform[base]
    if sqnr < target_sqnr_db:  # raise the most helpful layers first, until the target is met
        for n in sorted(layers, key=lambda n: -up[n]):
            cfg[n] = top
            sqnr = ev(cfg)
            if sqnr >= target_sqnr_db:
                break

    def cost(n: str) -> float | None:
        """What moving ``n`` one step down from where it is costs, by the one-layer measurements."""
        i = levels.index(cfg[n])
        if i == 0:
            return None
        return up[n] if i > b else down[n]

    order = {n: k for k, n in enumerate(layers)}
    heap = [(c, order[n], n) for n in layers if (c := cost(n)) is not None]
    heapq.heapify(heap)
    while heap:  # lower the least sensitive layer a step; keep it only if the real run meets the target
        _, _, n = heapq.heappop(heap)
        trial = {**cfg, n: levels[levels.index(cfg[n]) - 1]}
        got = ev(trial)
        if got >= target_sqnr_db:
            cfg, sqnr = trial, got
            if (c := cost(n)) is not None:
                heapq.heappush(heap, (c, order[n], n))

    q = ev.quantize(cfg, quiet=False)
    flash = layer_flash_bytes(q)
    ops = {n.name: n.op for n in g.nodes}
    out_of = {n.name: n.outputs[0] for n in g.nodes}
    choices = tuple(LayerChoice(n, ops[n], cfg[n], down.get(n), up.get(n), flash.get(out_of[n], 0)) for n in layers)
    arena = to_program(q, "reference", AS_GIVEN).arena_bytes
    result = MixedResult(
        q, float(target_sqnr_db), sqnr, base, choices, uniform, graph_flash_bytes(q), arena, ev.count, ev.samples
    )
    q.metadata["quantization"]["mixed"] = {k: v for k, v in result.to_json().items() if k != "layers"}
    return result
