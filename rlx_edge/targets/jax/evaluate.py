"""Entry points for the command line: run a graph with jax, evaluate a dataset on jax or the reference.

``run_jax`` is what ``rlx-edge run --target jax --device D`` calls;
``eval_dataset`` is ``rlx-edge eval MODEL --data D.npz [--labels L] --target
jax|reference``. Datasets are numpy arrays, mappings of input name to array,
or ``.npz`` / ``.npy`` files (read by :func:`rlx_edge.data.load_arrays`:
data files are untrusted). Float data given to a quantized model is quantized with the
model's input parameters, the way the model expects real-valued inputs.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from rlx_edge.data import load_arrays
from rlx_edge.errors import RlxError
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.ops.quant import affine_dequantize, affine_quantize

_LABEL_KEYS = ("labels", "label", "y")
_DATA_KEYS = ("data", "x", "inputs", "input")


def run_jax(graph: Graph, inputs: Any, device: str = "cpu", **options: Any) -> dict[str, np.ndarray]:
    """Compile ``graph`` for jax on ``device`` and run ``inputs`` (a leading batch axis runs many)."""
    from rlx_edge.targets.jax.lower import compile_jax

    return compile_jax(graph, device, **options)(inputs)


def load_dataset(graph: Graph, data: Any, labels: Any = None) -> tuple[list[np.ndarray], np.ndarray | None]:
    """Inputs (one array per graph input, samples on axis 0) and optional labels from arrays, an .npz or a .npy."""
    store: Mapping[str, np.ndarray] | None = None
    if isinstance(data, (str, Path)):
        loaded = load_arrays(data)
        store = loaded if isinstance(loaded, dict) else {"data": loaded}
    elif isinstance(data, Mapping):
        store = data
    if store is not None:
        if all(n in store for n in graph.inputs):
            arrays = [np.asarray(store[n]) for n in graph.inputs]
        elif len(graph.inputs) == 1:
            keys = [k for k in _DATA_KEYS if k in store] or [k for k in store if k not in _LABEL_KEYS]
            if len(keys) != 1:
                raise RlxError(
                    f"cannot tell which array holds the inputs: {sorted(store)}; name it {graph.inputs[0]!r} or 'data'"
                )
            arrays = [np.asarray(store[keys[0]])]
        else:
            raise RlxError(f"the dataset must hold one array per input: {', '.join(graph.inputs)}")
        if labels is None or labels is True:
            found = [k for k in _LABEL_KEYS if k in store]
            if labels is True and not found:
                raise RlxError(f"the dataset has no labels array (looked for {', '.join(_LABEL_KEYS)})")
            labels = np.asarray(store[found[0]]) if found else None
        elif isinstance(labels, str) and labels in store:
            labels = np.asarray(store[labels])
    else:
        arrays = [np.asarray(a) for a in (data if isinstance(data, (list, tuple)) else [data])]
    if isinstance(labels, (str, Path)):
        loaded = load_arrays(labels)
        labels = _first_array(loaded) if isinstance(loaded, dict) else loaded
    if len(arrays) != len(graph.inputs):
        raise RlxError(f"graph {graph.name!r} takes {len(graph.inputs)} inputs, the dataset has {len(arrays)}")
    counts = {len(a) for a in arrays}
    if len(counts) != 1:
        raise RlxError(f"dataset inputs disagree on the number of samples: {sorted(counts)}")
    if labels is not None:
        labels = np.asarray(labels).reshape(-1)
        if len(labels) != len(arrays[0]):
            raise RlxError(f"{len(labels)} labels for {len(arrays[0])} samples")
    return arrays, labels


def _first_array(store: Mapping[str, np.ndarray]) -> np.ndarray:
    keys = [k for k in _LABEL_KEYS if k in store] or list(store)
    return np.asarray(store[keys[0]])


def conform(graph: Graph, arrays: list[np.ndarray]) -> list[np.ndarray]:
    """Convert dataset arrays to the graph's input types: quantize floats for quantized inputs, and back."""
    out = []
    for name, a in zip(graph.inputs, arrays):
        t = graph.types[name]
        if a.dtype == t.dtype.numpy:
            out.append(a)
        elif t.quant is not None and t.dtype.is_int and a.dtype.kind == "f":
            out.append(affine_quantize(a, t.quant, t.dtype))
        elif t.dtype.is_float and a.dtype.kind in "iu":
            src = _input_quant(graph, name)
            if src is None:
                raise RlxError(f"input {name!r} is {t.dtype}; integer data needs its quantization to be dequantized")
            out.append(affine_dequantize(a, src).astype(t.dtype.numpy))
        else:
            raise RlxError(f"input {name!r} is {t.dtype}, the dataset holds {a.dtype}")
    return out


def _input_quant(graph: Graph, name: str):
    return graph.types[name].quant


def predict(
    graph: Graph,
    arrays: list[np.ndarray],
    *,
    target: str = "jax",
    device: str = "cpu",
    batch_size: int = 256,
    progress: Callable[[int, int], None] | None = None,
    **options: Any,
) -> np.ndarray:
    """The first output of ``graph`` for every sample, on the jax target or the numpy reference."""
    if target == "jax":
        from rlx_edge.targets.jax.lower import compile_jax

        model = compile_jax(graph, device, **options)
        return model.predict(arrays, batch_size=batch_size, progress=progress)[graph.outputs[0]]
    if target == "reference":
        return _reference_predict(graph, arrays, progress)
    raise RlxError(f"unknown evaluation target {target!r}; use jax or reference")


def _reference_predict(graph: Graph, arrays: list[np.ndarray], progress) -> np.ndarray:
    """The numpy oracle, one sample at a time where the graph's shapes fix a batch of 1."""
    from rlx_edge.targets.jax.lower import _batch_mode
    from rlx_edge.targets.reference import run

    mode = _batch_mode(graph)
    n = len(arrays[0])
    outs = []
    for i in range(n):
        sample = [a[i : i + 1] if mode != "exact" else a[i] for a in arrays]
        y = run(graph, sample)[graph.outputs[0]]
        outs.append(y[0] if mode == "replace" and y.ndim >= 1 and y.shape[0] == 1 else y)
        if progress is not None and ((i + 1) % 64 == 0 or i + 1 == n):
            progress(i + 1, n)
    return np.stack(outs)


def _classes(y: np.ndarray) -> np.ndarray:
    return y.reshape(y.shape[0], -1).argmax(axis=-1)


def eval_dataset(
    graph: Graph,
    data: Any,
    labels: Any = None,
    *,
    target: str = "jax",
    device: str = "cpu",
    batch_size: int = 256,
    progress: bool | Callable[[int, int], None] = True,
    float_graph: Graph | None = None,
    **options: Any,
) -> dict[str, Any]:
    """Evaluate ``graph`` on a dataset: ``count``, ``accuracy`` (with labels), ``agreement`` (with a float model).

    ``agreement`` is the fraction of samples whose predicted class (argmax of
    the first output) equals that of ``float_graph``, which runs on the same
    target. ``data`` and ``labels`` are arrays, a mapping, or ``.npz`` paths
    (``labels=True`` takes them from the data file). ``options`` go to
    :func:`~rlx_edge.targets.jax.compile_jax`.
    """
    arrays, labels = load_dataset(graph, data, labels)
    report = _progress_printer(target) if progress is True else (progress or None)
    start = time.perf_counter()
    pred = predict(
        graph,
        conform(graph, arrays),
        target=target,
        device=device,
        batch_size=batch_size,
        progress=report,
        **options,
    )
    seconds = time.perf_counter() - start
    classes = _classes(pred)
    result: dict[str, Any] = {
        "count": len(classes),
        "target": target,
        "device": device if target == "jax" else "host",
        "seconds": round(seconds, 4),
        "samples_per_s": round(len(classes) / seconds, 2) if seconds > 0 else None,
    }
    if labels is not None:
        result["accuracy"] = float(np.mean(classes == labels))
    if float_graph is not None:
        ref = predict(
            float_graph, conform(float_graph, arrays), target=target, device=device, batch_size=batch_size, **options
        )
        result["agreement"] = float(np.mean(classes == _classes(ref)))
    return result


def _progress_printer(target: str) -> Callable[[int, int], None]:
    def show(done: int, total: int) -> None:
        end = "\n" if done >= total else "\r"
        print(f"eval [{target}] {done}/{total}", end=end, file=sys.stderr, flush=True)

    return show
