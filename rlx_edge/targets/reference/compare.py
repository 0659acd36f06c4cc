"""Comparison of our integer reference with TFLite Micro, and of a target with the reference.

:func:`compare_with_tflm` runs one ``.tflite`` model through the numpy
reference (on the graph :func:`~rlx_edge.frontends.tflite.load_tflite` builds)
and through TFLite Micro (the ``tflite-micro`` package, reference kernels),
and compares every output and every intermediate tensor that maps to a TFLite
tensor. :func:`compare_with_target` runs a graph on a target (``jax``,
``cortexm-host``, ...) and compares its outputs with the reference.

Inputs: ``n_inputs`` seeded random inputs, then (unless ``edge=False``) the
three edge inputs of :data:`EDGE_INPUTS` (all minimum, all maximum, all zero
point). The two groups are counted and reported separately.

Integer tensors must be equal (:func:`numpy.array_equal`). Float tensors pass
under :func:`numpy.isclose` semantics, ``|ours - theirs| <= atol + rtol *
|theirs|`` elementwise, because two correct float implementations sum in
different orders (TFLite Micro's convolution loops against numpy's matmul)
and so differ in the last bits; where a sum cancels to near zero its error is
absolute, not relative, hence ``atol``. The defaults hold the float MLPerf Tiny
models (``pretrainedResnet.tflite``, ``vww_96_float.tflite``) against TFLite
Micro with about 4x margin: they differ by at most about 3e-5 absolute, on
activations up to about 180.

The reference runs all inputs as one batch when the graph allows it (batch
axis first everywhere); TFLite Micro runs them one at a time, keeping every
tensor (``kPreserveAllTensors``) so intermediates can be read back.

Stateful models (``graph.metadata["state"]``: a TFLite variable tensor, e.g.
SVDF's or an LSTM's, imported as a graph input paired with its update, an extra output)
are compared as one sequence of invokes: the inputs drawn cover the model's
own inputs only, every state starts at its zero point (as TFLite Micro
initializes variable tensors) and each invoke's updated state feeds the next
on every side separately (TFLite Micro keeps its own in one interpreter), so
a drift in a state shows in every later invoke.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rlx_edge.errors import RlxError
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.interpret import run
from rlx_edge.ir.ops import get_op

__all__ = [
    "DEFAULT_ATOL",
    "DEFAULT_RTOL",
    "EDGE_INPUTS",
    "CompareResult",
    "Mismatch",
    "compare_with_target",
    "compare_with_tflm",
    "initial_state",
    "make_inputs",
    "run_threaded",
]

EDGE_INPUTS = ("all-minimum", "all-maximum", "all-zero-point")  # in the order make_inputs appends them
DEFAULT_RTOL = 1e-5  # numpy.isclose's default
DEFAULT_ATOL = 1e-4  # see the module docstring: cancelling float sums near zero


@dataclass
class Mismatch:
    """The first element out of tolerance: which tensor, which input, where, and both values."""

    node: str  # the IR value name (the node producing it)
    tensor_index: int  # the TFLite tensor index (-1 when comparing with a target)
    input: int  # index among the random inputs, or among the edge inputs when ``edge`` is set
    index: tuple[int, ...]  # element position inside the tensor
    ours: int | float
    theirs: int | float
    differing: int  # how many elements of this tensor are out of tolerance for this input
    edge: str | None = None  # which edge input (an EDGE_INPUTS name), None for a random one

    def to_json(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "tensor_index": self.tensor_index,
            "input": self.input,
            "edge": self.edge,
            "index": list(self.index),
            "ours": self.ours,
            "theirs": self.theirs,
            "differing": self.differing,
        }

    def where(self) -> str:
        """``input 3`` or ``edge input all-maximum``."""
        return f"input {self.input}" if self.edge is None else f"edge input {self.edge}"


@dataclass
class CompareResult:
    """Outcome of a comparison.

    ``inputs`` counts the seeded random inputs, ``edge_inputs`` the edge
    inputs run after them. ``mismatches`` counts (input, tensor) pairs out of
    tolerance; ``compared`` is how many pairs were compared;
    ``mismatched_inputs`` / ``mismatched_edge_inputs`` how many inputs of each
    group had at least one. ``float_tensors`` of the ``tensors`` compared per
    input are float (checked with ``atol`` / ``rtol``); the errors are the
    largest over all their elements (``None`` when none is float), the
    relative one over elements whose expected value is nonzero.
    """

    model: str
    inputs: int
    tensors: int  # tensors compared per input (outputs and intermediates)
    compared: int
    mismatches: int
    mismatched_inputs: int
    first_mismatch: Mismatch | None
    by_tensor: dict[str, int] = field(default_factory=dict)  # value name -> inputs on which it differs
    edge_inputs: int = 0
    mismatched_edge_inputs: int = 0
    float_tensors: int = 0
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    atol: float = DEFAULT_ATOL
    rtol: float = DEFAULT_RTOL

    @property
    def ok(self) -> bool:
        return self.mismatches == 0

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "inputs": self.inputs,
            "edge_inputs": self.edge_inputs,
            "tensors": self.tensors,
            "float_tensors": self.float_tensors,
            "compared": self.compared,
            "mismatches": self.mismatches,
            "mismatched_inputs": self.mismatched_inputs,
            "mismatched_edge_inputs": self.mismatched_edge_inputs,
            "first_mismatch": None if self.first_mismatch is None else self.first_mismatch.to_json(),
            "max_abs_error": _finite_or_none(self.max_abs_error),
            "max_rel_error": _finite_or_none(self.max_rel_error),
            "atol": self.atol,
            "rtol": self.rtol,
        }


def _finite_or_none(x: float | None) -> float | None:
    # JSON has no NaN or infinity; a NaN error already shows as a mismatch
    return x if x is None or math.isfinite(x) else None


# inputs ---------------------------------------------------------------------------------
def make_inputs(graph: Graph, n_inputs: int, seed: int, *, edge: bool = True) -> list[dict[str, np.ndarray]]:
    """``n_inputs`` seeded uniform random inputs, then (with ``edge``) the :data:`EDGE_INPUTS`.

    Integer inputs cover their whole storage range; float inputs (a model
    that quantizes its own input, or a float model) are uniform in [-8, 8],
    edges -8, 8 and 0; bool inputs are fair coins, edges False, True and False.
    """
    rng = np.random.default_rng(seed)
    out: list[dict[str, np.ndarray]] = []
    specs = []
    state = graph.metadata.get("state", {})
    for name in graph.inputs:
        if name in state:  # carried from invoke to invoke (run_threaded), not drawn
            continue
        t = graph.types[name]
        shape = tuple(int(d) for d in t.shape)
        dt = t.dtype.numpy
        zp = int(t.quant.zero_point[0]) if t.quant is not None else 0
        if dt.kind == "f":  # float inputs (models that start with QUANTIZE): a range that saturates int8
            lo_f, hi_f = -8.0, 8.0
            specs.append((name, shape, dt, lo_f, hi_f, 0))
            continue
        if dt.kind == "b":  # conditions and comparison results: edges False, True, False
            specs.append((name, shape, dt, 0, 1, 0))
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
    if not edge:
        return out
    for pick in range(len(EDGE_INPUTS)):
        sample = {}
        for n, s, dt, lo, hi, zp in specs:
            sample[n] = np.full(s, (lo, hi, zp)[pick], dtype=dt)
        out.append(sample)
    return out


def initial_state(graph: Graph) -> dict[str, np.ndarray]:
    """Every state input at what TFLite Micro starts a variable tensor at: its zero point (0 unquantized)."""
    out = {}
    for name in graph.metadata.get("state", {}):
        t = graph.types[name]
        zp = 0 if t.quant is None else int(t.quant.zero_point[0])
        out[name] = np.full(tuple(int(d) for d in t.shape), zp, t.dtype.numpy)
    return out


def run_threaded(
    graph: Graph,
    samples: list[dict[str, np.ndarray]],
    invoke: Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]],
) -> list[dict[str, np.ndarray]]:
    """``invoke`` on each sample in order, the states threaded: each result's state updates feed the next.

    ``invoke`` takes every graph input and returns at least the graph
    outputs; a graph without state just runs each sample.
    """
    pairs = graph.metadata.get("state", {})
    state = initial_state(graph)
    per = []
    for s in samples:
        got = invoke({**s, **state})
        state = {k: np.asarray(got[u]) for k, u in pairs.items()}
        per.append(got)
    return per


def _traced(graph: Graph) -> Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]:
    def one(feed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        outs, traced = run(graph, feed, trace=True)
        return {**traced, **outs}

    return one


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
        if t.rank < 2 or t.shape[0] != 1:  # a vector's one axis is its data, not a batch
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
    if graph.metadata.get("state"):  # each invoke needs the one before: no batch
        return run_threaded(graph, samples, _traced(graph))
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
                split = [{k: v[i : i + 1] for k, v in traced.items()} for i in range(n)]
                # shapes alone do not prove the axis is a batch (a softmax or a sum over it mixes samples):
                # the first sample run alone must give the same values
                outs0, traced0 = run(graph, samples[0], trace=True)
                alone = {**traced0, **outs0}
                if all(np.array_equal(alone[k], split[0][k], equal_nan=alone[k].dtype.kind == "f") for k in alone):
                    return split
    per = []
    for s in samples:
        outs, traced = run(graph, s, trace=True)
        per.append({**traced, **outs})
    return per


# TFLite Micro side ----------------------------------------------------------------------------
def _run_tflm(
    data: bytes, samples: list[dict[str, np.ndarray]], graph: Graph, indices: list[int], name: str = "<model bytes>"
):
    """TFLite Micro's value of every tensor in ``indices`` for each sample (one invoke per sample).

    TFLite Micro runs in a child process, all samples in one round trip; a model
    it refuses or crashes on is one TflmError naming ``name`` (the file).
    """
    from rlx_edge.frontends.tflm import TflmModel

    index_of = graph.metadata.get("tflite_tensor_index", {})
    # TFLite input k is tensor in_idx[k]; match it to our input by tensor index
    by_index = {index_of.get(n): n for n in graph.inputs}
    with TflmModel(data, preserve=True, name=name) as model:
        feed = [[s[by_index.get(t, graph.inputs[k])] for k, t in enumerate(model.input_indices)] for s in samples]
        return [tensors for _, tensors in model.run_many(feed, indices)]


# our side, in the arena ---------------------------------------------------------------------------------
def _run_in_arena(graph: Graph, samples: list[dict[str, np.ndarray]]) -> list[dict[str, np.ndarray]]:
    """Every value per sample, computed inside one byte array at the planned offsets."""
    from rlx_edge.pipeline import AS_GIVEN, to_program
    from rlx_edge.targets.reference.arena import run_program

    program = to_program(graph, "reference", AS_GIVEN)  # as given: intermediates keep TFLite's tensors

    def one(feed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        outs, traced = run_program(program, feed, trace=True)
        return {**traced, **outs}

    return run_threaded(graph, samples, one)


RUNNERS = {"interpreter": _run_reference, "arena": _run_in_arena}


# checking ---------------------------------------------------------------------------------
def _out_of_tolerance(a: np.ndarray, b: np.ndarray, atol: float, rtol: float) -> np.ndarray | None:
    """Mask of the elements of ``a`` that differ from ``b``; None when shape or dtype differ."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return None
    if a.dtype.kind != "f":
        return a != b
    return ~np.isclose(a.astype(np.float64), b.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True)


def _float_errors(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """Largest absolute and relative (over nonzero ``b``) difference; equal NaNs and infinities count as 0."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    same = (a64 == b64) | (np.isnan(a64) & np.isnan(b64))
    with np.errstate(invalid="ignore"):
        diff = np.where(same, 0.0, np.abs(a64 - b64))
    nonzero = b64 != 0
    rel = diff[nonzero] / np.abs(b64[nonzero])
    return float(np.max(diff, initial=0.0)), float(np.max(rel, initial=0.0))


def _worse(x: float | None, y: float) -> float:
    return y if x is None or math.isnan(y) else (x if math.isnan(x) else max(x, y))


class _Tally:
    """Checks (input, tensor) pairs one at a time and sums them up as a :class:`CompareResult`."""

    def __init__(self, n_random: int, n_edge: int, atol: float, rtol: float) -> None:
        self.n_random, self.n_edge, self.atol, self.rtol = n_random, n_edge, atol, rtol
        self.mismatches = 0
        self.bad_inputs: set[int] = set()
        self.first: Mismatch | None = None
        self.by_tensor: dict[str, int] = {}
        self.float_names: set[str] = set()
        self.max_abs: float | None = None
        self.max_rel: float | None = None

    def check(self, name: str, t_idx: int, k: int, ours: Any, theirs: Any) -> None:
        a, b = np.asarray(ours), np.asarray(theirs)
        if a.shape != b.shape and a.size == b.size:
            a = a.reshape(b.shape)  # TFLite may keep a different but equivalent shape
        if a.dtype.kind == "f" and b.dtype.kind == "f" and a.shape == b.shape:
            self.float_names.add(name)
            e_abs, e_rel = _float_errors(a, b)
            self.max_abs, self.max_rel = _worse(self.max_abs, e_abs), _worse(self.max_rel, e_rel)
        bad = _out_of_tolerance(a, b, self.atol, self.rtol)
        if bad is not None and not bad.any():
            return
        self.mismatches += 1
        self.bad_inputs.add(k)
        self.by_tensor[name] = self.by_tensor.get(name, 0) + 1
        if self.first is None:
            self.first = self._mismatch(name, t_idx, k, a, b, bad)

    def _mismatch(self, name: str, t_idx: int, k: int, a: np.ndarray, b: np.ndarray, bad: np.ndarray | None):
        group_k, edge = (k, None) if k < self.n_random else (k - self.n_random, EDGE_INPUTS[k - self.n_random])
        if bad is None:  # shape or dtype differ: no element to point at
            return Mismatch(name, t_idx, group_k, (), float("nan"), float("nan"), max(a.size, b.size), edge)
        pos = tuple(int(i) for i in np.argwhere(bad)[0])
        return Mismatch(name, t_idx, group_k, pos, a[pos].item(), b[pos].item(), int(bad.sum()), edge)

    def result(self, model: str, tensors: int) -> CompareResult:
        n = self.n_random + self.n_edge
        return CompareResult(
            model=model,
            inputs=self.n_random,
            edge_inputs=self.n_edge,
            tensors=tensors,
            compared=n * tensors,
            mismatches=self.mismatches,
            mismatched_inputs=sum(k < self.n_random for k in self.bad_inputs),
            mismatched_edge_inputs=sum(k >= self.n_random for k in self.bad_inputs),
            first_mismatch=self.first,
            by_tensor=self.by_tensor,
            float_tensors=len(self.float_names),
            max_abs_error=self.max_abs,
            max_rel_error=self.max_rel,
            atol=self.atol,
            rtol=self.rtol,
        )


def _check_tolerance(atol: float, rtol: float) -> None:
    for name, v in (("atol", atol), ("rtol", rtol)):
        if not (math.isfinite(v) and v >= 0):
            raise RlxError(f"--{name} must be a finite number >= 0, not {v}")


# the comparisons ---------------------------------------------------------------------------------
def compare_with_tflm(
    model_path: str | Path,
    n_inputs: int = 50,
    seed: int = 0,
    *,
    runner: str = "interpreter",
    edge: bool = True,
    atol: float = DEFAULT_ATOL,
    rtol: float = DEFAULT_RTOL,
) -> CompareResult:
    """Compare the reference with TFLite Micro on ``n_inputs`` seeded inputs (plus the edge inputs).

    Every graph output and every intermediate that maps to a TFLite tensor
    (``graph.metadata["tflite_tensor_index"]``) is compared: integer ones
    exactly, float ones within ``atol`` / ``rtol`` (module docstring).
    ``runner="arena"`` runs our side as a planned Program inside one byte
    array, which also proves the arena plan.
    """
    from rlx_edge.frontends.tflite import load_tflite

    _check_tolerance(atol, rtol)
    path = Path(model_path)
    data = path.read_bytes()
    graph = load_tflite(path)
    index_of: dict[str, int] = graph.metadata.get("tflite_tensor_index", {})
    computed = [o for node in graph.nodes for o in node.outputs]
    names = [v for v in dict.fromkeys(computed + list(graph.outputs)) if v in index_of]
    samples = make_inputs(graph, n_inputs, seed, edge=edge)
    ours = RUNNERS[runner](graph, samples)
    theirs = _run_tflm(data, samples, graph, [index_of[v] for v in names], name=str(path))
    tally = _Tally(n_inputs, len(samples) - n_inputs, atol, rtol)
    for k, (o, t) in enumerate(zip(ours, theirs)):
        masks = written_masks(graph, o)
        for v in names:
            tally.check(v, index_of[v], k, *_defined_part(masks.get(v), o[v], t[index_of[v]]))
    return tally.result(str(path), len(names))


def written_masks(graph: Graph, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """For outputs of ops that leave part of them unspecified (the op's ``written`` hook, e.g.
    detection post-processing's rows past ``num_detections``), the mask of the defined elements,
    computed from ``values`` (our side's run)."""
    masks: dict[str, np.ndarray] = {}
    for node in graph.nodes:
        if not all(v in values for v in node.outputs):
            continue
        for v, m in zip(node.outputs, get_op(node.op).written_masks([values[v] for v in node.outputs], node.attrs)):
            if m is not None:
                masks[v] = m
    return masks


def _defined_part(mask: np.ndarray | None, ours: Any, theirs: Any) -> tuple[Any, Any]:
    """Both sides with the elements outside ``mask`` set to zero (unchanged without a mask)."""
    if mask is None:
        return ours, theirs
    a, b = np.asarray(ours), np.asarray(theirs)
    if a.shape != mask.shape or b.size != a.size:
        return ours, theirs  # a shape mismatch is reported as such
    return np.where(mask, a, 0).astype(a.dtype), np.where(mask, b.reshape(a.shape), 0).astype(b.dtype)


def compare_with_target(
    graph: Graph,
    runner: Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]],
    n_inputs: int = 50,
    seed: int = 0,
    *,
    edge: bool = True,
    atol: float = DEFAULT_ATOL,
    rtol: float = DEFAULT_RTOL,
) -> CompareResult:
    """Outputs of ``runner`` (a target's, see :mod:`rlx_edge.runners`) against the reference on the same inputs.

    ``graph`` is MIR. Integer outputs must be equal, float ones within
    ``atol`` / ``rtol`` of the reference. A stateful graph runs the samples
    as one sequence, each side threading its own state (module docstring).
    """
    _check_tolerance(atol, rtol)
    samples = make_inputs(graph, n_inputs, seed, edge=edge)
    tally = _Tally(n_inputs, len(samples) - n_inputs, atol, rtol)
    wants = run_threaded(graph, samples, lambda feed: run(graph, feed))
    gots = run_threaded(graph, samples, runner)
    for k, (want, got) in enumerate(zip(wants, gots)):
        masks = written_masks(graph, want)
        for name in graph.outputs:
            tally.check(name, -1, k, *_defined_part(masks.get(name), got[name], want[name]))
    return tally.result(graph.name, len(graph.outputs))
