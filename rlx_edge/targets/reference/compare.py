"""Bit-exact comparison of the integer reference with TFLite Micro's own interpreter.

:func:`compare_with_tflm` runs one ``.tflite`` model through the numpy
reference (on the graph :func:`~rlx_edge.frontends.tflite.load_tflite` builds)
and through TFLite Micro (the ``tflite-micro`` package, reference kernels),
on seeded random inputs plus three edge inputs (all minimum, all maximum, all
zero point), and compares every output and every intermediate tensor that
maps to a TFLite tensor with :func:`numpy.array_equal`.

The reference runs all inputs as one batch when the graph allows it (batch
axis first everywhere); TFLite Micro runs them one at a time, keeping every
tensor (``kPreserveAllTensors``) so intermediates can be read back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rlx_edge.ir.graph import Graph
from rlx_edge.targets.reference.interpreter import run

__all__ = ["CompareResult", "Mismatch", "compare_with_tflm", "make_inputs"]


@dataclass
class Mismatch:
    """The first differing element: which tensor, which input, where, and both values."""

    node: str  # the IR value name (the node producing it)
    tensor_index: int  # the TFLite tensor index
    input: int  # which of the compared inputs
    index: tuple[int, ...]  # element position inside the tensor
    ours: int | float
    theirs: int | float
    differing: int  # how many elements of this tensor differ for this input

    def to_json(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "tensor_index": self.tensor_index,
            "input": self.input,
            "index": list(self.index),
            "ours": self.ours,
            "theirs": self.theirs,
            "differing": self.differing,
        }


@dataclass
class CompareResult:
    """Outcome of a comparison.

    ``mismatches`` counts (input, tensor) pairs that differ; ``compared`` is
    how many pairs were compared; ``mismatched_inputs`` how many inputs had
    at least one difference.
    """

    model: str
    inputs: int
    tensors: int  # tensors compared per input (outputs and intermediates)
    compared: int
    mismatches: int
    mismatched_inputs: int
    first_mismatch: Mismatch | None
    by_tensor: dict[str, int] = field(default_factory=dict)  # value name -> inputs on which it differs

    @property
    def ok(self) -> bool:
        return self.mismatches == 0

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "inputs": self.inputs,
            "tensors": self.tensors,
            "compared": self.compared,
            "mismatches": self.mismatches,
            "mismatched_inputs": self.mismatched_inputs,
            "first_mismatch": None if self.first_mismatch is None else self.first_mismatch.to_json(),
        }


# inputs ---------------------------------------------------------------------------------
def make_inputs(graph: Graph, n_inputs: int, seed: int) -> list[dict[str, np.ndarray]]:
    """``n_inputs`` seeded uniform random inputs, then all-minimum, all-maximum and all-zero-point ones.

    Integer inputs cover their whole storage range; float inputs (a model
    that quantizes its own input) are uniform in [-8, 8], edges -8, 8 and 0.
    """
    rng = np.random.default_rng(seed)
    out: list[dict[str, np.ndarray]] = []
    specs = []
    for name in graph.inputs:
        t = graph.types[name]
        shape = tuple(int(d) for d in t.shape)
        dt = t.dtype.numpy
        zp = int(t.quant.zero_point[0]) if t.quant is not None else 0
        if dt.kind == "f":  # float inputs (models that start with QUANTIZE): a range that saturates int8
            lo_f, hi_f = -8.0, 8.0
            specs.append((name, shape, dt, lo_f, hi_f, 0))
            continue
        info = np.iinfo(dt)
        specs.append((name, shape, dt, int(info.min), int(info.max), zp))
    for _ in range(n_inputs):
        sample = {}
        for n, s, dt, lo, hi, _ in specs:
            if dt.kind == "f":
                sample[n] = rng.uniform(lo, hi, size=s).astype(dt)
            else:
                sample[n] = rng.integers(lo, hi, size=s, endpoint=True).astype(dt)
        out.append(sample)
    for pick in ("min", "max", "zp"):
        sample = {}
        for n, s, dt, lo, hi, zp in specs:
            sample[n] = np.full(s, {"min": lo, "max": hi, "zp": zp}[pick], dtype=dt)
        out.append(sample)
    return out


# our side --------------------------------------------------------------------------------
def _rebatch(graph: Graph, n: int) -> Graph | None:
    """A copy of ``graph`` whose leading (batch) axis is ``n`` instead of 1, or None if it has none.

    Every computed value and input with a leading 1 gets ``n`` and reshapes
    with a leading 1 get ``n``; whether the graph really treats that axis as
    a batch is checked after the run (shapes must come out as expected).
    """
    if n == 1:
        return graph
    g = graph.copy()
    for name in g.inputs:
        t = g.types[name]
        if t.rank == 0 or t.shape[0] != 1:
            return None
    for name, t in list(g.types.items()):
        if name in g.params or t.rank == 0 or t.shape[0] != 1:
            continue
        g.types[name] = t.with_shape((n,) + tuple(t.shape[1:]))
    for node in g.nodes:
        if node.op == "reshape":
            shape = tuple(node.attrs["shape"])
            if not shape or shape[0] != 1:
                return None
            node.attrs["shape"] = (n,) + shape[1:]
    return g


def _run_reference(graph: Graph, samples: list[dict[str, np.ndarray]]) -> list[dict[str, np.ndarray]]:
    """Every traced value (and output) per sample, batched when the graph allows."""
    n = len(samples)
    batched = _rebatch(graph, n)
    if batched is not None:
        feed = {k: np.concatenate([s[k] for s in samples], axis=0) for k in graph.inputs}
        try:
            outs, traced = run(batched, feed, trace=True)
        except Exception:
            traced = None
        if traced is not None:
            traced = {**traced, **outs}
            want = {k: tuple(int(d) for d in graph.types[k].shape) for k in traced}
            if all(v.shape[:1] == (n,) and v.shape[1:] == want[k][1:] for k, v in traced.items()):
                return [{k: v[i : i + 1] for k, v in traced.items()} for i in range(n)]
    per = []
    for s in samples:
        outs, traced = run(graph, s, trace=True)
        per.append({**traced, **outs})
    return per


# TFLite Micro side ----------------------------------------------------------------------------
def _run_tflm(data: bytes, samples: list[dict[str, np.ndarray]], graph: Graph, indices: list[int]):
    """TFLite Micro's value of every tensor in ``indices`` for each sample (one invoke per sample)."""
    from rlx_edge.frontends._tflm import TflmModel

    model = TflmModel(data, preserve=True)
    index_of = graph.metadata.get("tflite_tensor_index", {})
    # TFLite input k is tensor in_idx[k]; match it to our input by tensor index
    by_index = {index_of.get(n): n for n in graph.inputs}
    results = []
    for s in samples:
        model([s[by_index.get(t, graph.inputs[k])] for k, t in enumerate(model.input_indices)])
        results.append({i: model.tensor(i) for i in indices})
    return results


# the comparison ---------------------------------------------------------------------------------
def _run_in_arena(graph: Graph, samples: list[dict[str, np.ndarray]]) -> list[dict[str, np.ndarray]]:
    """Every value per sample, computed inside one byte array at the planned offsets."""
    from rlx_edge.ir.plan import plan
    from rlx_edge.targets.reference.arena import run_program

    program = plan(graph)
    per = []
    for s in samples:
        outs, traced = run_program(program, s, trace=True)
        per.append({**traced, **outs})
    return per


RUNNERS = {"interpreter": _run_reference, "arena": _run_in_arena}


def compare_with_tflm(
    model_path: str | Path, n_inputs: int = 50, seed: int = 0, *, runner: str = "interpreter"
) -> CompareResult:
    """Compare the reference with TFLite Micro on ``n_inputs`` seeded inputs plus 3 edge inputs.

    Every graph output and every intermediate that maps to a TFLite tensor
    (``graph.metadata["tflite_tensor_index"]``) is compared exactly.
    ``runner="arena"`` runs our side as a planned Program inside one byte
    array, which also proves the arena plan.
    """
    from rlx_edge.frontends.tflite import load_tflite

    path = Path(model_path)
    data = path.read_bytes()
    graph = load_tflite(path)
    index_of: dict[str, int] = graph.metadata.get("tflite_tensor_index", {})
    computed = [o for node in graph.nodes for o in node.outputs]
    names = [v for v in dict.fromkeys(computed + list(graph.outputs)) if v in index_of]
    samples = make_inputs(graph, n_inputs, seed)
    ours = RUNNERS[runner](graph, samples)
    theirs = _run_tflm(data, samples, graph, [index_of[v] for v in names])

    mismatches = 0
    bad_inputs = set()
    first: Mismatch | None = None
    by_tensor: dict[str, int] = {}
    for k, (o, t) in enumerate(zip(ours, theirs)):
        for v in names:
            a = np.asarray(o[v])
            b = t[index_of[v]]
            if a.shape != b.shape and a.size == b.size:
                a = a.reshape(b.shape)  # TFLite may keep a different but equivalent shape
            if a.dtype == b.dtype and np.array_equal(a, b):
                continue
            mismatches += 1
            bad_inputs.add(k)
            by_tensor[v] = by_tensor.get(v, 0) + 1
            if first is None:
                first = _first_difference(v, index_of[v], k, a, b)
    return CompareResult(
        model=str(path),
        inputs=len(samples),
        tensors=len(names),
        compared=len(samples) * len(names),
        mismatches=mismatches,
        mismatched_inputs=len(bad_inputs),
        first_mismatch=first,
        by_tensor=by_tensor,
    )


def _first_difference(name: str, t_idx: int, k: int, a: np.ndarray, b: np.ndarray) -> Mismatch:
    if a.shape != b.shape:
        return Mismatch(name, t_idx, k, (), float("nan"), float("nan"), max(a.size, b.size))
    diff = a != b
    pos = tuple(int(i) for i in np.argwhere(diff)[0]) if diff.any() else tuple(0 for _ in a.shape)
    ours = a[pos].item() if a.size else 0
    theirs = b[pos].item() if b.size else 0
    return Mismatch(name, t_idx, k, pos, ours, theirs, int(diff.sum()) if diff.any() else a.size)
