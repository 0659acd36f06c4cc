"""Lowering MIR graphs to jitted JAX functions, and running them batched on CPU, GPU or TPU.

``compile_jax(graph, device)`` walks the graph once, asks the rule table for
each node's traced function, and jits their composition. Float nodes follow
the ops' float references; nodes touching quantized tensors follow their
integer references (TFLite Micro's reference kernels) bit for bit, with the
same rule the numpy interpreter uses to choose between the two.

64-bit types. Integer kernels need int64 intermediates (Q31 products) and
f64 graphs need float64, but jax disables 64-bit types by default. Rather
than flipping the process-wide ``jax_enable_x64`` flag, every trace and
every call of a :class:`JaxModel` runs inside ``jax.enable_x64(True)``: the
flag is part of jit's cache key, so the compiled functions always see
64-bit types and the user's own jax code keeps its configuration.

Batching. Models imported from TFLite have batch-1 shapes and often a
reshape to a literal ``[1, N]``. Such graphs are traced per sample exactly
as written and ``jax.vmap``-ed over a new leading axis that replaces the
batch dimension of 1: inputs ``[B, ...]`` give outputs ``[B, ...]``. Graphs
with a symbolic leading dimension run on the batch directly; graphs with
other static shapes accept their exact shapes or one extra leading axis.

Devices. ``device`` is a platform (``"cpu"``, ``"gpu"``, ``"tpu"``), a
platform with an index (``"gpu:1"``) or a ``jax.Device``. With
``shard=True`` every device of the platform takes part: batches are split
along the batch axis with a ``NamedSharding`` over a 1-D mesh (data
parallelism), weights are replicated.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlx_edge.errors import RlxError, UnsupportedOpError
from rlx_edge.ir.dtype import DType
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.ops import finish
from rlx_edge.ir.passes.legalize import legalize
from rlx_edge.ir.plan import prepare_graph
from rlx_edge.ir.prepared import Prepared
from rlx_edge.ir.shape import format_shape
from rlx_edge.targets.jax._lazy import require_jax
from rlx_edge.targets.jax._table import RULES, LowerCtx, LowerOptions

Traced = Callable[..., tuple[Any, ...]]


def is_quantized_node(in_types, out_types) -> bool:
    """The numpy interpreter's rule: a quantized integer operand selects the integer semantics."""
    return any(t is not None and t.quant is not None and t.dtype.is_int for t in (*in_types, *out_types))


@dataclass
class Lowered:
    """A graph as one traceable function of its inputs (in ``graph.inputs`` order)."""

    fn: Traced
    notes: dict[str, dict[str, Any]]  # node name -> the rule's recorded decisions


def lower_graph(graph: Graph, options: LowerOptions | None = None, quant: dict[str, Prepared] | None = None) -> Lowered:
    """Run every node's rule once (numpy work happens here) and compose the traced parts.

    ``quant`` is the nodes' prepared integer parameters (a Program's ``quant``);
    the ops' own ``prepare`` fills it when not given.
    """
    require_jax()
    options = options or LowerOptions()
    if graph.stage == "hir":
        from rlx_edge.ir.passes.lower_hir import lower_hir

        graph = lower_hir(graph)
    legalize(graph, RULES, target="the jax target")
    if quant is None:
        quant = prepare_graph(graph)
    steps: list[tuple[list[str | None], list[str], Callable]] = []
    notes: dict[str, dict[str, Any]] = {}
    for node in graph.nodes:
        in_types = tuple(None if v is None else graph.types[v] for v in node.inputs)
        out_types = tuple(graph.types[o] for o in node.outputs)
        consts = tuple(None if v is None else graph.params.get(v) for v in node.inputs)
        ctx = LowerCtx(
            graph, node, in_types, out_types, is_quantized_node(in_types, out_types), consts, options,
            params=quant.get(node.name),
        )  # fmt: skip
        try:
            fn = RULES[node.op](ctx)
        except RlxError:
            raise
        except Exception as e:  # name the node; keep the cause for debugging
            raise UnsupportedOpError(f"{ctx.where}: jax lowering failed: {e}") from e
        notes[node.name] = ctx.notes
        steps.append((list(node.inputs), list(node.outputs), _checked(fn, ctx)))
    inputs, outputs, params = list(graph.inputs), list(graph.outputs), dict(graph.params)

    def run(*args: Any) -> tuple[Any, ...]:
        env: dict[str, Any] = dict(params)
        env.update(zip(inputs, args))
        for ins, outs, fn in steps:
            got = fn(*[None if v is None else env[v] for v in ins])
            env.update(zip(outs, got))
        return tuple(env[o] for o in outputs)

    return Lowered(run, notes)


def _checked(fn: Callable, ctx: LowerCtx) -> Callable[..., tuple[Any, ...]]:
    """Normalize a rule's result to a tuple cast to the declared dtypes, naming the node on trace errors."""
    import jax.numpy as jnp

    def call(*args: Any) -> tuple[Any, ...]:
        try:
            out = fn(*args)
        except RlxError:
            raise
        except Exception as e:
            raise RuntimeError(f"jax lowering of {ctx.where} failed while tracing: {e}") from e
        out = tuple(out) if isinstance(out, (tuple, list)) else (out,)
        return tuple(_cast(jnp.asarray(o), t) for o, t in zip(out, ctx.out_types))

    return call


def _cast(y: Any, t: Any) -> Any:
    """A value in its declared storage dtype; bf16 is rounded to bfloat16 and stored as float32, like the IR."""
    if t.dtype == DType.bf16:
        return finish(y, t.dtype)
    return y.astype(t.dtype.numpy)


# devices ---------------------------------------------------------------------------------
_PLATFORM_ALIASES = {"cuda": "gpu", "rocm": "gpu", "gpu": "gpu", "cpu": "cpu", "tpu": "tpu"}


def resolve_devices(device: Any = "cpu", *, shard: bool = False) -> list[Any]:
    """The jax devices a model runs on: one device, or all of a platform with ``shard=True``."""
    jax = require_jax()
    if not isinstance(device, str):
        return [device]
    name, _, index = device.partition(":")
    platform = _PLATFORM_ALIASES.get(name.lower())
    if platform is None:
        raise RlxError(f"unknown jax device {device!r}; use cpu, gpu or tpu (optionally with :INDEX)")
    try:
        devs = jax.devices(platform)
    except RuntimeError:
        devs = []
    if not devs:
        have = sorted({d.platform for d in jax.devices()})
        raise RlxError(f"jax sees no {platform} device (it has: {', '.join(have)}); install jax for that platform")
    if index:
        if not index.isdigit() or int(index) >= len(devs):
            raise RlxError(f"jax device {device!r} does not exist: {len(devs)} {platform} device(s)")
        return [devs[int(index)]]
    return list(devs) if shard else [devs[0]]


# the runnable model -----------------------------------------------------------------------
class JaxModel:
    """A graph compiled for jax: call it with batches of inputs; outputs come back as numpy arrays.

    Build with :func:`compile_jax`. ``devices`` holds one device, or several
    for data parallelism (batches sharded along axis 0).
    """

    def __init__(self, graph: Graph, devices: Sequence[Any], options: LowerOptions, batch: str | None = None) -> None:
        jax = require_jax()
        self.graph = graph
        self.devices = list(devices)
        self.options = options
        with jax.enable_x64(True):
            self._lowered = lower_graph(graph, options)
        self.batch_mode = _batch_mode(graph, batch)
        self._jitted: dict[bool, Callable] = {}
        self._sharding = None
        if len(self.devices) > 1:
            from jax.sharding import Mesh, NamedSharding, PartitionSpec

            mesh = Mesh(np.array(self.devices), ("batch",))
            self._sharding = NamedSharding(mesh, PartitionSpec("batch"))

    # ---------------------------------------------------------------------------------
    @property
    def notes(self) -> dict[str, dict[str, Any]]:
        """Per-node lowering decisions (e.g. which integer matmul each layer uses)."""
        return self._lowered.notes

    @property
    def platform(self) -> str:
        return self.devices[0].platform

    def __repr__(self) -> str:
        devs = ", ".join(str(d) for d in self.devices)
        return f"JaxModel({self.graph.name!r}, devices=[{devs}], batch_mode={self.batch_mode})"

    def _function(self, vmapped: bool) -> Callable:
        """The jitted function over device arrays (one per graph input, batch on axis 0 when vmapped)."""
        if vmapped not in self._jitted:
            import jax

            fn = self._lowered.fn
            if vmapped:
                fn = jax.vmap(fn)
            kw = {}
            if self._sharding is not None:
                kw = {"in_shardings": self._sharding, "out_shardings": self._sharding}
            self._jitted[vmapped] = jax.jit(fn, **kw)
        return self._jitted[vmapped]

    def prepare(self, inputs: Any) -> tuple[list[np.ndarray], int | None, bool]:
        """Check user inputs; return them in the shape the jitted function takes, the batch size, vmapped."""
        arrays = _bind(self.graph, inputs)
        types = [self.graph.types[n] for n in self.graph.inputs]
        if self.batch_mode == "native":
            _check_exact(self.graph, [a.shape for a in arrays], allow_symbols=True)
            return arrays, int(arrays[0].shape[0]), False
        if self.batch_mode == "replace":
            batch = _common_batch(self.graph, arrays, [t.rank for t in types])
            _check_exact(
                self.graph, [(1, *a.shape[1:]) for a in arrays], allow_symbols=False, shown=[a.shape for a in arrays]
            )
            # the caller's batch axis replaces the graph's batch dimension of 1
            return [a.reshape((a.shape[0], 1, *a.shape[1:])) for a in arrays], batch, True
        if all(a.ndim == t.rank for a, t in zip(arrays, types)):
            _check_exact(self.graph, [a.shape for a in arrays], allow_symbols=False)
            return arrays, None, False
        batch = _common_batch(self.graph, arrays, [t.rank + 1 for t in types])
        _check_exact(self.graph, [a.shape[1:] for a in arrays], allow_symbols=False)
        return arrays, batch, True

    def run_device(self, arrays: Sequence[Any], vmapped: bool = True) -> tuple[Any, ...]:
        """Run on arrays already prepared (and possibly already on the device); returns jax arrays.

        The low-level entry for benchmarks: no host copies, no shape checks.
        Call ``block_until_ready`` on the result to time it.
        """
        import jax

        with jax.enable_x64(True):
            return self._function(vmapped)(*arrays)

    def put(self, arrays: Sequence[np.ndarray]) -> list[Any]:
        """Copy prepared arrays to the model's device(s) (sharded along the batch when several)."""
        import jax

        target = self._sharding if self._sharding is not None else self.devices[0]
        with jax.enable_x64(True):
            return [jax.device_put(a, target) for a in arrays]

    def __call__(self, inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray] | np.ndarray) -> dict[str, np.ndarray]:
        """Run a batch (by input name, in order, or one array); outputs by name as numpy arrays."""
        arrays, batch, vmapped = self.prepare(inputs)
        pad = 0
        if self._sharding is not None:
            if batch is None:
                raise RlxError("a sharded JaxModel needs a leading batch axis on its inputs")
            pad = -batch % len(self.devices)
            if pad:  # every device takes an equal slice; the padding is dropped again below
                arrays = [np.concatenate([a, np.repeat(a[-1:], pad, axis=0)]) for a in arrays]
        outs = self.run_device(self.put(arrays), vmapped)
        result: dict[str, np.ndarray] = {}
        for name, o in zip(self.graph.outputs, outs):
            arr = np.asarray(o)
            if pad:
                arr = arr[:batch]
            if self.batch_mode == "replace":
                arr = _drop_unit_axis(arr, self.graph.types[name].shape)
            result[name] = arr
        return result

    def predict(self, data: Any, *, batch_size: int = 1024, progress: Any = None) -> dict[str, np.ndarray]:
        """Run a dataset (leading axis = samples) in fixed-size batches; one compilation for all of them."""
        arrays = _bind(self.graph, data)
        n = int(arrays[0].shape[0])
        if n == 0:
            raise RlxError("the dataset is empty")
        size = max(1, min(batch_size, n))
        if self._sharding is not None:
            size += -size % len(self.devices)
        chunks: dict[str, list[np.ndarray]] = {o: [] for o in self.graph.outputs}
        for start in range(0, n, size):
            part = [a[start : start + size] for a in arrays]
            got = len(part[0])
            if got < size:  # pad the last batch so that every batch has the compiled shape
                part = [np.concatenate([p, np.repeat(p[-1:], size - got, axis=0)]) for p in part]
            out = self(part)
            for k, v in out.items():
                chunks[k].append(v[:got])
            if progress is not None:
                progress(min(start + size, n), n)
        return {k: np.concatenate(v) for k, v in chunks.items()}

    def evaluate(
        self, data: Any, labels: np.ndarray | None = None, *, batch_size: int = 1024, progress: Any = None
    ) -> dict[str, Any]:
        """Classify a dataset: ``count``, the predicted ``classes`` and, given labels, ``accuracy``.

        Classes are the argmax over the last axis of the first output (for a
        quantized output, stored integers order like real values).
        """
        out = self.predict(data, batch_size=batch_size, progress=progress)[self.graph.outputs[0]]
        classes = out.reshape(out.shape[0], -1).argmax(axis=-1)
        result: dict[str, Any] = {"count": int(out.shape[0]), "classes": classes}
        if labels is not None:
            labels = np.asarray(labels).reshape(-1)
            if labels.shape[0] != out.shape[0]:
                raise RlxError(f"{labels.shape[0]} labels for {out.shape[0]} samples")
            result["accuracy"] = float(np.mean(classes == labels))
        return result


def compile_jax(
    graph: Graph, device: Any = "cpu", *, shard: bool = False, int_matmul: str = "auto", batch: str | None = None
) -> JaxModel:
    """Lower ``graph`` for jax on ``device`` (``cpu``, ``gpu``, ``tpu``, ``gpu:1`` or a jax Device).

    ``shard=True`` spreads batches over every device of the platform (data
    parallelism). ``int_matmul`` picks how integer conv/FC products are
    computed (``auto``, ``f32``, ``i32``, ``i8``; all exact, see ``_table``).
    ``batch`` overrides how inputs are batched (module docstring): ``replace``
    (the default for batch-1 graphs), ``native`` (symbolic batch) or
    ``exact`` (the graph's shapes as they are, or one extra leading axis).
    Raises :class:`~rlx_edge.errors.UnsupportedOpError` naming the first
    node the jax target cannot lower.
    """
    return JaxModel(graph, resolve_devices(device, shard=shard), LowerOptions(int_matmul=int_matmul), batch)


# input binding ------------------------------------------------------------------------------
def _batch_mode(graph: Graph, wanted: str | None = None) -> str:
    types = [graph.types[n] for n in graph.inputs]
    possible = ["exact"]
    if types and all(t.rank >= 1 and t.shape[0] == 1 for t in types):
        possible.insert(0, "replace")
    if types and all(t.rank >= 1 and isinstance(t.shape[0], str) for t in types):
        possible.insert(0, "native")
    if wanted is None:
        return possible[0]
    if wanted not in possible:
        raise RlxError(
            f"batch={wanted!r} does not fit graph {graph.name!r} (its inputs allow: {', '.join(possible)});"
            " 'replace' needs a leading dimension of 1 and 'native' a symbolic one on every input"
        )
    return wanted


def _bind(graph: Graph, inputs: Any) -> list[np.ndarray]:
    if isinstance(inputs, np.ndarray) or not isinstance(inputs, (Mapping, Sequence)):
        inputs = [inputs]
    if isinstance(inputs, Mapping):
        missing = [n for n in graph.inputs if n not in inputs]
        if missing:
            raise RlxError(f"missing input(s) {', '.join(missing)} for graph {graph.name!r}")
        inputs = [inputs[n] for n in graph.inputs]
    inputs = list(inputs)
    if len(inputs) != len(graph.inputs):
        raise RlxError(f"graph {graph.name!r} takes {len(graph.inputs)} inputs, got {len(inputs)}")
    out = []
    for name, v in zip(graph.inputs, inputs):
        t = graph.types[name]
        arr = np.asarray(v)
        if arr.dtype != t.dtype.numpy:
            raise RlxError(f"input {name!r} must be {t.dtype} ({t.dtype.numpy}), got {arr.dtype}")
        out.append(arr)
    return out


def _common_batch(graph: Graph, arrays: list[np.ndarray], ranks: list[int]) -> int:
    batches = set()
    for name, a, r in zip(graph.inputs, arrays, ranks):
        t = graph.types[name]
        if a.ndim != r:
            raise RlxError(
                f"input {name!r} must have shape {format_shape(t.shape)} with a leading batch axis, got {list(a.shape)}"
            )
        batches.add(int(a.shape[0]))
    if len(batches) != 1:
        raise RlxError(f"inputs disagree on the batch size: {sorted(batches)}")
    return batches.pop()


def _check_exact(
    graph: Graph, shapes: list[tuple[int, ...]], *, allow_symbols: bool, shown: list[tuple[int, ...]] | None = None
) -> None:
    """Input shapes (per sample where a batch axis was added) against the graph's; ``shown`` is what the user gave."""
    symbols: dict[str, int] = {}
    for i, (name, shape) in enumerate(zip(graph.inputs, shapes)):
        t = graph.types[name]
        ok = len(shape) == t.rank
        for d, s in zip(t.shape, shape) if ok else ():
            if isinstance(d, str):
                ok = ok and allow_symbols and symbols.setdefault(d, s) == s
            else:
                ok = ok and d == s
        if not ok:
            batch = " (any leading batch size)" if shown is not None else ""
            got = list(shown[i] if shown is not None else shape)
            raise RlxError(f"input {name!r} must have shape {format_shape(t.shape)}{batch}, got {got}")


def _drop_unit_axis(arr: np.ndarray, per_sample: tuple) -> np.ndarray:
    """[B, 1, ...] back to [B, ...] where the per-sample output had the graph's batch dimension of 1."""
    if len(per_sample) >= 1 and per_sample[0] == 1 and arr.ndim >= 2 and arr.shape[1] == 1:
        return arr.reshape((arr.shape[0], *arr.shape[2:]))
    return arr
