"""Calibration: run the float reference over data and record every float value's range.

``data`` can be a numpy array (samples of the single input, leading axis =
samples), a mapping of input name -> samples (a dict, or an ``.npz`` file
opened with ``np.load``), or any iterable of such batches; batches are
streamed, so a generator over a large dataset never has to fit in memory::

    rec = calibrate(graph, x_train[:500], method="entropy")
    rec.save("calib.json")

The graph goes through the optimizer first (``optimize=True``, by
:func:`rlx_edge.pipeline.optimize_graph`), the same one
:func:`rlx_edge.quant.ptq.quantize` runs, so the recorded value names are
those the quantizer looks up. Give ``optimize=False`` for a graph that came
out of the optimizer already (the ``quantize`` command optimizes once).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from rlx_edge.data import load_arrays
from rlx_edge.errors import RlxError
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.interpret import run
from rlx_edge.pipeline import PipelineOptions, optimize_graph
from rlx_edge.quant._control import SubgraphPlans, has_control, observe_subgraphs
from rlx_edge.quant.observers import Observer, make_observer
from rlx_edge.quant.record import CalibrationRecord, TensorRange


class Progress:
    """A plain-text progress bar on stderr (no dependencies).

    On a terminal it redraws one line; elsewhere (CI logs) it prints a line
    at most every 10 % so logs stay short.
    """

    def __init__(self, total: int | None, label: str = "calibrate", stream: TextIO | None = None, width: int = 30):
        self.total, self.label, self.width = total, label, width
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.done = 0
        self._last_decile = -1
        self.t0 = time.perf_counter()

    def update(self, n: int) -> None:
        self.done += n
        if self.total:
            frac = min(self.done / self.total, 1.0)
            decile = int(frac * 10)
            if not self.tty and decile == self._last_decile:
                return
            self._last_decile = decile
            bar = "#" * int(frac * self.width) + "." * (self.width - int(frac * self.width))
            text = f"{self.label} [{bar}] {self.done}/{self.total} samples"
        else:
            if not self.tty and self.done % 100 and n < 100:
                return
            text = f"{self.label}: {self.done} samples"
        text += f" ({time.perf_counter() - self.t0:.1f} s)"
        self.stream.write(("\r" + text) if self.tty else text + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


# data -----------------------------------------------------------------------------------
def _as_batch(graph: Graph, item: Any) -> dict[str, np.ndarray]:
    """One batch as input name -> array with a leading samples axis."""
    if isinstance(item, np.ndarray):
        if len(graph.inputs) != 1:
            raise RlxError(f"graph {graph.name!r} has {len(graph.inputs)} inputs; give data as a dict by input name")
        item = {graph.inputs[0]: item}
    if not hasattr(item, "keys"):
        raise RlxError(f"calibration data must be arrays or mappings of arrays, not {type(item).__name__}")
    keys = list(item.keys())
    if len(graph.inputs) == 1 and len(keys) == 1 and keys[0] not in graph.inputs:
        item = {graph.inputs[0]: item[keys[0]]}  # an .npz saved with np.savez(arr) names it arr_0
    missing = [n for n in graph.inputs if n not in item]
    if missing:
        raise RlxError(f"calibration data lacks input(s) {', '.join(missing)} (it has: {', '.join(map(str, keys))})")
    out = {}
    for name in graph.inputs:
        t = graph.types[name]
        arr = np.asarray(item[name])
        if arr.ndim == t.rank:  # samples stacked along the model's own batch axis
            # one sample per row; a model batch axis of 1 (or a symbol) takes it
            arr = arr[:, None] if t.rank and (t.shape[0] == 1 or isinstance(t.shape[0], str)) else arr[None]
        if arr.ndim != t.rank + 1:
            raise RlxError(f"calibration data for {name!r} has shape {list(arr.shape)}; input is {list(t.shape)}")
        out[name] = arr.astype(t.dtype.numpy, copy=False)
    n = {len(a) for a in out.values()}
    if len(n) != 1:
        raise RlxError(f"calibration inputs have different sample counts: {sorted(n)}")
    return out


def iter_batches(
    graph: Graph, data: Any, batch_size: int = 32, max_samples: int | None = None
) -> Iterator[dict[str, np.ndarray]]:
    """Batches of samples: each input as [samples, *input shape]; ``max_samples`` of them in all at most."""
    seen = 0
    for batch in _batches(graph, data, batch_size):
        if max_samples is not None:
            n = min(len(next(iter(batch.values()))), max_samples - seen)
            if n <= 0:
                return
            batch = {k: v[:n] for k, v in batch.items()}
            seen += n
        yield batch


def _batches(graph: Graph, data: Any, batch_size: int) -> Iterator[dict[str, np.ndarray]]:
    if isinstance(data, np.ndarray) or hasattr(data, "keys"):
        whole = _as_batch(graph, data)
        n = len(next(iter(whole.values())))
        for s in range(0, n, batch_size):
            yield {k: v[s : s + batch_size] for k, v in whole.items()}
        return
    if not isinstance(data, Iterable):
        raise RlxError(f"calibration data must be an array, a mapping or an iterable, not {type(data).__name__}")
    for item in data:
        yield _as_batch(graph, item)


def count_samples(graph: Graph, data: Any) -> int | None:
    if isinstance(data, np.ndarray) or hasattr(data, "keys"):
        return len(next(iter(_as_batch(graph, data).values())))
    return len(data) if hasattr(data, "__len__") and not isinstance(data, Iterator) else None


def _with_batch(graph: Graph, n: int) -> Graph | None:
    """``graph`` with its leading axis made ``n`` (static 1 or a symbol), or None if that is not safe."""
    from rlx_edge.ir.passes import reinfer

    g = graph.copy()
    for name in g.inputs:
        t = g.types[name]
        if t.rank == 0 or not (t.shape[0] == 1 or isinstance(t.shape[0], str)):
            return None
        g.types[name] = t.with_shape((n, *t.shape[1:]))
    for node in g.nodes:
        if node.op == "reshape":
            shape = tuple(node.attrs["shape"])
            if not shape or shape[0] not in (1, -1):
                return None
            if shape[0] == 1:
                node.attrs = {**node.attrs, "shape": (n, *shape[1:])}
    try:
        reinfer(g)
    except RlxError:
        return None
    for v, t in g.types.items():  # every computed value must keep the batch axis in front
        o = graph.types[v]
        if v in g.params:
            continue
        if o.rank == 0 or not (o.shape[0] == 1 or isinstance(o.shape[0], str)):
            return None
        if t.shape[0] != n or t.shape[1:] != o.shape[1:]:
            return None
    return g


def _runner(graph: Graph, batched: bool = True):
    """A function running one batch (dict of [n, ...]) and returning every value, batched where possible.

    It yields either one dict for the whole batch or one dict per sample.
    """
    cache: dict[int, Graph | None] = {}

    def one(feed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        outs, traced = run(graph, feed, trace=True)
        return {**feed, **traced, **outs}

    def go(batch: dict[str, np.ndarray]) -> Iterator[dict[str, np.ndarray]]:
        n = len(next(iter(batch.values())))
        if n not in cache:
            cache[n] = _with_batch(graph, n) if batched else None
        gb = cache[n]
        if gb is not None and all(v.shape[1:2] == (1,) for v in batch.values()):
            feed = {k: v.reshape((n, *v.shape[2:])) for k, v in batch.items()}
            try:
                outs, traced = run(gb, feed, trace=True)
                yield {**feed, **traced, **outs}
                return
            except RlxError:
                cache[n] = None
        for i in range(n):
            yield one({k: v[i] for k, v in batch.items()})

    return go


# calibration ------------------------------------------------------------------------------
def calibrate(
    graph: Graph,
    data: Any,
    *,
    method: str = "minmax",
    per_channel: bool = False,
    optimize: bool = True,
    batch_size: int = 32,
    max_samples: int | None = None,
    progress: bool | None = None,
    **observer_options: Any,
) -> CalibrationRecord:
    """Observe every float value of ``graph`` over ``data``; return a :class:`CalibrationRecord`.

    Parameters
    ----------
    method:
        ``minmax``, ``moving_average``, ``percentile``, ``entropy`` or ``mse``
        (see :mod:`rlx_edge.quant.observers`); ``observer_options`` go to the observer
        (``percentile=99.9``, ``momentum=0.1``, ``bins=...``, ``bits=...``).
    per_channel:
        Record ranges per channel (last axis) instead of per tensor.
    progress:
        Show a progress bar on stderr (default: only when stderr is a terminal).
    """
    g, _ = optimize_graph(graph, PipelineOptions(optimize=optimize))
    watched = [v for v in g.inputs if g.types[v].dtype.is_float]
    watched += [o for n in g.nodes for o in n.outputs if g.types[o].dtype.is_float]
    observers: dict[str, Observer] = {}
    sums: dict[str, np.ndarray] = {}
    counts: dict[str, int] = {}
    total = count_samples(g, data)
    if max_samples is not None:
        total = max_samples if total is None else min(total, max_samples)
    bar = Progress(total) if (progress if progress is not None else sys.stderr.isatty()) else None
    # control flow runs per sample (a loop's trip count is the sample's own); the values inside its
    # subgraphs are observed on every trip and branch taken, under qualified names (quant/_control.py)
    control = has_control(g)
    run_batch = _runner(g, batched=not control)
    plans = SubgraphPlans()
    seen = 0
    for batch in iter_batches(g, data, batch_size, max_samples):
        n = len(next(iter(batch.values())))
        for values in run_batch(batch):
            inner = observe_subgraphs(g, values, plans=plans) if control else ()
            for v, arr in [*((v, values[v]) for v in watched), *inner]:
                if v not in observers:
                    axis = arr.ndim - 1 if per_channel and arr.ndim else None
                    observers[v] = make_observer(method, axis=axis, **observer_options)
                observers[v].update(arr)
                if arr.ndim and arr.size:  # an empty value (zero-size slice) has no channel means
                    flat = arr.reshape(-1, arr.shape[-1]).astype(np.float64)
                    sums[v] = sums.get(v, 0) + flat.sum(axis=0)
                    counts[v] = counts.get(v, 0) + flat.shape[0]
        seen += n
        if bar is not None:
            bar.update(n)
    if bar is not None:
        bar.close()
    if seen == 0:
        raise RlxError("calibration data is empty")
    ranges = {}
    for v, obs in observers.items():
        lo, hi = obs.range()
        mean = sums[v] / counts[v] if v in sums else None
        ranges[v] = TensorRange(lo, hi, obs.axis, mean)
    opts = {"per_channel": per_channel, **{k: v for k, v in observer_options.items() if _jsonable(v)}}
    return CalibrationRecord(g.name, method, seen, ranges, opts)


def _jsonable(v: Any) -> bool:
    return isinstance(v, (int, float, str, bool)) or v is None


def calibrate_arrays(graph: Graph, arrays: Mapping[str, np.ndarray] | np.ndarray, **kwargs: Any) -> CalibrationRecord:
    """Alias of :func:`calibrate` for in-memory arrays (kept for symmetry with the CLI's ``--data``)."""
    return calibrate(graph, arrays, **kwargs)


def cli_calibrate(
    graph: Graph, data_path: str | Path, out: str | Path, *, method: str = "minmax", per_channel: bool = False
) -> CalibrationRecord:
    """``rlx-edge calibrate MODEL --data D.npz -o REC.json [--method M]``: calibrate and save the record.

    ``data_path`` is an ``.npz`` (input name -> samples) or ``.npy`` (samples of the one input) file.
    """
    rec = calibrate(graph, load_arrays(data_path), method=method, per_channel=per_channel, progress=True)
    rec.save(out)
    return rec
