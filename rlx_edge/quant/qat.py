"""Quantization-aware training: fine-tune a float graph through its quantization, then quantize it with PTQ.

    res = qat(graph, x_train, y_train, scheme="int4w", epochs=10)
    save(res.graph, "model_int4w.rlx")      # the same kind of integer graph PTQ makes

The flow:

1. the float graph goes through the optimizer and is calibrated on the
   training data (:func:`rlx_edge.quant.calibrate.calibrate`);
2. PTQ of that graph (:func:`rlx_edge.quant.ptq.quantize`) decides what the
   integer model is: which nodes are quantized, every activation's scale and
   zero point, the weight type of each layer;
3. a training graph copies the float graph with ``fake_quant`` nodes where
   the integer model rounds: on every quantized activation (per tensor, PTQ's
   parameters, fixed) and on the weights of every quantized conv /
   depthwise / fully connected layer (per channel, symmetric, with PTQ's
   min-max scales recomputed from the current weights at every step, as
   TensorFlow's QAT does), then a softmax cross-entropy loss on the logits;
4. :func:`rlx_edge.autodiff.value_and_grad` turns it into a gradient graph
   (``fake_quant`` passes gradients straight through inside its range), the
   JAX target traces it (:func:`rlx_edge.pipeline.traced`) and jit compiles
   one Adam step over a mini-batch (``vmap`` over the samples);
5. the trained weights go back into the float graph, and PTQ quantizes it with
   the same scheme and the *same* calibration record (not recalibrated), with
   bias correction off (training has corrected the biases already).

The fake-quantized weights round exactly as PTQ does (``fake_quant`` divides
in float64 and rounds half away from zero), and the final step's scales are
the min-max scales PTQ computes from the trained weights, so the integer
weights are the ones training saw (``QatResult.weights_exact`` checks it).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlx_edge.errors import RlxError
from rlx_edge.ir.dtype import DType
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.ops import get_op
from rlx_edge.ir.types import QuantParams
from rlx_edge.pipeline import PipelineOptions, optimize_graph, traced
from rlx_edge.quant.calibrate import Progress, _as_batch, calibrate
from rlx_edge.quant.ptq import F32_TINY, SCHEMES, WEIGHTED, quantize, quantize_weights_at
from rlx_edge.quant.record import CalibrationRecord

LABELS = "qat/labels"
LOSS = "qat/loss"
ADAM = (0.9, 0.999, 1e-8)  # beta1, beta2, epsilon (Kingma & Ba's defaults)


class QatError(RlxError):
    """A model or dataset quantization-aware training cannot work with."""


@dataclass(frozen=True)
class WeightQuant:
    """One layer's fake-quantized weights: the param, its channel axis and the symmetric bound [-qmax, qmax]."""

    node: str
    param: str
    axis: int
    qmax: int

    @property
    def scale_input(self) -> str:
        return f"qat/scale/{self.param}"


@dataclass
class TrainingGraph:
    """The float graph with fake quantization and a loss: outputs ``qat/loss`` and the logits."""

    graph: Graph
    logits: str
    trainable: list[str]  # weights and biases of the weighted layers, as graph inputs
    weights: list[WeightQuant]  # fake-quantized ones, each with a scale input
    classes: int


@dataclass
class QatResult:
    """What :func:`qat` made: the integer graph, the trained float graph and how training went."""

    graph: Graph  # quantized by PTQ from the trained weights
    float_graph: Graph  # the optimized float graph with the trained weights
    ptq_graph: Graph  # PTQ of the untrained float graph, same scheme and record (the baseline)
    record: CalibrationRecord  # the ranges both the fake quantization and PTQ used
    history: list[dict[str, float]] = field(default_factory=list)  # per epoch: loss (and validation)
    weights_exact: bool = True  # PTQ's integer weights are those the last training step rounded to
    loss_before: float = math.nan  # the fake-quantized model's loss on the training samples, before training
    loss_after: float = math.nan  # and after
    device: str = "cpu"
    seconds: float = 0.0


# the training graph ------------------------------------------------------------------------
def weight_scale(w: Any, axis: int, qmax: int) -> Any:
    """PTQ's per-channel min-max scale of ``w`` (:func:`rlx_edge.quant.ptq.quantize_weights`), numpy or jax.

    Computed in float64 and rounded to float32 as PTQ does, so the last
    training step and PTQ of the trained weights pick the same scales.
    """
    from rlx_edge.ir import fixedpoint as fp

    xp = fp.namespace(w)
    axes = tuple(i for i in range(w.ndim) if i != axis % w.ndim)
    amax = xp.abs(w.astype(xp.float64)).max(axis=axes)
    return xp.where(amax > 0, xp.maximum(amax / qmax, F32_TINY), 1.0).astype(xp.float32)


def _bind_batch_one(g: Graph) -> Graph:
    """``g`` with symbolic leading dimensions bound to 1: training traces one sample and vmaps it."""
    from rlx_edge.ir.passes.bind_symbols import bind_symbols, graph_symbols

    syms = graph_symbols(g)
    return bind_symbols(g, dict.fromkeys(syms, 1)) if syms else g


def training_graph(g: Graph, q: Graph) -> TrainingGraph:
    """The training graph of float MIR ``g``, fake-quantized where PTQ's result ``q`` of it is integer.

    ``q`` must come from ``g`` (``quantize(g, ..., optimize=False)``): its
    metadata maps every quantized value of ``g`` to its version in ``q``.
    """
    meta = q.metadata.get("quantization", {})
    qvalues: dict[str, str] = meta.get("values", {})
    float_nodes = set(meta.get("float_nodes", {}))
    if len(g.outputs) != 1:
        raise QatError(f"graph {g.name!r} has {len(g.outputs)} outputs; QAT trains a classifier with one output")
    t = Graph(f"{g.name}/qat", "mir")
    cur: dict[str, str] = {}  # value of g -> its (fake-quantized) version in t
    weighted = {n.name: n for n in g.nodes if n.op in WEIGHTED and n.name not in float_nodes}
    trainable = []
    for n in g.nodes:
        if n.op in WEIGHTED:
            trainable += [v for v in n.inputs[1:] if v is not None and v in g.params and v not in trainable]

    def act_quant(v: str) -> QuantParams | None:
        qv = qvalues.get(v)
        return None if qv is None else q.types[qv].quant

    def fake_quant(v: str, src: str) -> str:
        qp = act_quant(v)
        if qp is None:
            return src
        s = t.param(f"qat/scale/{v}", np.asarray(qp.scale, np.float32).reshape(()))
        zp = int(qp.zero_point[0])
        return t.fake_quant(src, s, zero_point=(zp,), qmin=qp.storage.min, qmax=qp.storage.max, name=f"qat/fq/{v}").name

    for v in g.inputs:
        ty = g.types[v]
        t.input(v, ty.shape, ty.dtype, ty.quant)
        cur[v] = fake_quant(v, v) if ty.dtype.is_float else v
    for v in trainable:
        ty = g.types[v]
        cur[v] = t.input(v, ty.shape, ty.dtype).name
    for v, arr in g.params.items():
        if v not in trainable:
            cur[v] = t.param(v, arr, g.types[v].quant, dtype=g.types[v].dtype).name
    weights: list[WeightQuant] = []
    shared: dict[tuple[str, int], str] = {}  # (weight, qmax) -> its fake-quantized version, for weights used twice
    for n in g.nodes:
        ins = [None if v is None else cur[v] for v in n.inputs]
        if n.name in weighted:
            w = n.inputs[1]
            wq = _weight_quant(n.name, w, WEIGHTED[n.op], q, qvalues, n.outputs[0])
            if wq is not None and (w, wq.qmax) in shared:
                ins[1] = shared[(w, wq.qmax)]
            elif wq is not None and any(o.param == w for o in weights):
                raise QatError(f"weight {w!r} is quantized to two types by different layers; QAT cannot train it")
            elif wq is not None:
                scale = t.input(wq.scale_input, (g.types[w].shape[wq.axis],), DType.f32)
                ins[1] = t.fake_quant(ins[1], scale, axis=wq.axis, qmin=-wq.qmax, qmax=wq.qmax, name=f"qat/fq/{w}").name
                shared[(w, wq.qmax)] = ins[1]
                weights.append(wq)
        t.add_node(n.op, ins, n.attrs, name=n.name, out_names=n.outputs)
        for o in n.outputs:
            passthrough = get_op(n.op).passthrough_quant and n.name not in float_nodes
            cur[o] = o if passthrough or not g.types[o].dtype.is_float else fake_quant(o, o)
    logits = _logits(g, cur)
    shape = t.types[logits].shape
    if not shape or not isinstance(shape[-1], int) or shape[-1] < 2:
        raise QatError(f"graph {g.name!r}: output {g.outputs[0]!r} has shape {list(shape)}; QAT needs class scores")
    labels = t.input(LABELS, shape, t.types[logits].dtype)
    per_class = t.mul(t.log_softmax(logits, axis=-1, name="qat/log_softmax"), labels, name="qat/xent")
    # keepdims: the loss is one element of shape [1, ...], never rank 0 (mul of two rank-0 values infers [1])
    loss = t.sum(per_class, axes=(len(shape) - 1,), keepdims=True, name="qat/xent_sum")
    if len(shape) > 1:
        loss = t.mean(loss, axes=tuple(range(len(shape) - 1)), keepdims=True, name="qat/xent_mean")
    t.neg(loss, name=LOSS)
    t.output(LOSS, logits)
    return TrainingGraph(t, logits, trainable, weights, int(shape[-1]))


def _weight_quant(node: str, w: str, axis: int, q: Graph, qvalues: dict, out: str) -> WeightQuant | None:
    """The weight type PTQ gave ``node`` (int8 or int4: [-127, 127] or [-7, 7]), read off its node in ``q``."""
    qout = qvalues.get(out)
    qnode = next((m for m in q.nodes if qout in m.outputs), None)
    if qnode is None or len(qnode.inputs) < 2 or qnode.inputs[1] not in q.params:
        return None
    wt = q.types[qnode.inputs[1]]
    if wt.quant is None:
        return None
    return WeightQuant(node, w, axis, int(wt.dtype.max))


def _logits(g: Graph, cur: dict[str, str]) -> str:
    """The class scores the loss reads: a final softmax's (or log_softmax's) input, else the output itself."""
    out = g.outputs[0]
    node = next((n for n in g.nodes if out in n.outputs), None)
    if node is not None and node.op in ("softmax", "log_softmax"):
        rank = g.types[node.inputs[0]].rank
        if node.attrs["axis"] % rank == rank - 1 and node.attrs.get("beta", 1.0) == 1.0:
            return cur[node.inputs[0]]
    return cur[out]


# data -------------------------------------------------------------------------------------------
def labeled_samples(
    g: Graph, data: Any, labels: Any, classes: int | None = None
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Inputs as ``{name: [n, *input shape]}`` and labels as class indices ``[n]`` (ints or one-hot rows)."""
    inputs = _as_batch(g, data)
    n = len(next(iter(inputs.values())))
    y = np.asarray(labels)
    if y.ndim == 2 and y.dtype.kind == "f":  # one-hot or probabilities
        y = y.argmax(axis=1)
    y = y.reshape(-1) if y.ndim != 1 and y.size == n else y
    if y.ndim != 1 or y.dtype.kind not in "iu":
        raise QatError(f"labels must be class indices [samples] or one-hot rows, got {y.dtype}{list(y.shape)}")
    if len(y) != n:
        raise QatError(f"{len(y)} labels for {n} samples")
    if n == 0:
        raise QatError("the training data is empty")
    if classes is not None and (y.min() < 0 or y.max() >= classes):
        raise QatError(
            f"labels must lie in [0, {classes - 1}] (the model has {classes} classes), got {y.min()}..{y.max()}"
        )
    return inputs, y.astype(np.int64)


def split(n: int, val_split: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Training and validation sample indices: a seeded permutation, ``val_split`` of it held out."""
    if not 0 <= val_split < 1:
        raise QatError(f"val_split must be in [0, 1), got {val_split}")
    order = np.random.default_rng(seed).permutation(n)
    n_val = round(n * val_split)
    if val_split and (n_val == 0 or n_val == n):
        raise QatError(
            f"val_split {val_split} of {n} samples leaves no {'validation' if not n_val else 'training'} data"
        )
    return np.sort(order[n_val:]), np.sort(order[:n_val])


# training --------------------------------------------------------------------------------------
def _require_jax(device: str) -> Any:
    try:
        import jax
    except ImportError as e:
        raise QatError(f"QAT trains with jax, which is not installed ({e}); pip install 'rlx-edge[jax]'") from None
    if device not in ("cpu", "gpu"):
        raise QatError(f"unknown device {device!r}; use cpu or gpu")
    try:
        devs = jax.devices(device)
    except RuntimeError:
        devs = []
    if not devs:
        have = ", ".join(sorted({d.platform for d in jax.devices()}))
        raise QatError(
            f"jax sees no {device} device (it has: {have}); install jax with GPU support or use --device cpu"
        )
    return devs[0]


class _Trainer:
    """Adam over the trainable weights; one jitted step per mini-batch (vmap over its samples)."""

    def __init__(
        self, tg: TrainingGraph, grad_graph: Graph, params: dict[str, np.ndarray], lr: float, steps: int, device: Any
    ) -> None:
        import jax
        import jax.numpy as jnp

        self.tg, self.device = tg, device
        data_inputs = [v for v in tg.graph.inputs if v not in tg.trainable and not v.startswith("qat/scale/")]
        self.data_inputs = data_inputs
        scales = {w.scale_input: w for w in tg.weights}
        grads = [f"grad/{p}" for p in tg.trainable]
        if grad_graph.outputs[1 : 1 + len(grads)] != grads:
            raise RuntimeError(f"value_and_grad gave outputs {grad_graph.outputs}, expected loss, {grads}, ...")

        def bind(fn: Callable, graph: Graph) -> Callable:
            """``fn`` of the graph's inputs as a function of (params, batch); samples vmapped, weights shared."""
            axes = tuple(0 if v in data_inputs else None for v in graph.inputs)
            per_batch = jax.vmap(fn, in_axes=axes)

            def call(p: dict, batch: dict) -> tuple:
                args = []
                for v in graph.inputs:
                    if v in scales:
                        w = scales[v]
                        args.append(weight_scale(p[w.param], w.axis, w.qmax))
                    else:
                        args.append(batch[v] if v in data_inputs else p[v])
                return per_batch(*args)

            return call

        with jax.enable_x64(True):
            step_fn = bind(traced(grad_graph, "jax"), grad_graph)
            eval_fn = bind(traced(tg.graph, "jax"), tg.graph)
        b1, b2, eps = ADAM
        names = list(tg.trainable)

        def step(p, m, v, t, batch, mask):
            outs = step_fn(p, batch)
            total = mask.sum()
            loss = (outs[0].reshape(mask.shape) * mask).sum() / total
            # cosine decay to 0 over the run: fine-tuning ends on small steps, near a good rounding
            rate = lr * 0.5 * (1 + jnp.cos(jnp.pi * jnp.minimum(t, steps) / steps))
            t = t + 1
            new_p, new_m, new_v = {}, {}, {}
            for k, name in enumerate(names):
                g = jnp.tensordot(mask, outs[1 + k], axes=1) / total  # the mean gradient of the real samples
                new_m[name] = b1 * m[name] + (1 - b1) * g
                new_v[name] = b2 * v[name] + (1 - b2) * g * g
                mh = new_m[name] / (1 - b1**t)
                vh = new_v[name] / (1 - b2**t)
                new_p[name] = (p[name] - rate * mh / (jnp.sqrt(vh) + eps)).astype(p[name].dtype)
            return new_p, new_m, new_v, t, loss

        def evaluate(p, batch, mask):
            loss, logits = eval_fn(p, batch)
            hits = logits.reshape(logits.shape[0], -1).argmax(-1) == batch[LABELS].reshape(mask.shape[0], -1).argmax(-1)
            return (loss.reshape(mask.shape) * mask).sum(), (hits * mask).sum()

        with jax.enable_x64(True):
            put = lambda a: jax.device_put(jnp.asarray(a), device)  # noqa: E731
            self.params = {k: put(params[k]) for k in names}
            self.m = {k: jnp.zeros_like(a) for k, a in self.params.items()}
            self.v = {k: jnp.zeros_like(a) for k, a in self.params.items()}
            self.t = put(np.int64(0))
        self._step = jax.jit(step)
        self._evaluate = jax.jit(evaluate)
        self._put = put

    def batch(self, inputs: dict[str, np.ndarray], onehot: np.ndarray, idx: np.ndarray, size: int) -> tuple:
        """A mini-batch padded to ``size`` samples (repeats of the first) with a mask of the real ones."""
        pad = size - len(idx)
        full = np.concatenate([idx, np.repeat(idx[:1], pad)]) if pad else idx
        mask = np.zeros(size, np.float32)
        mask[: len(idx)] = 1
        b = {k: inputs[k][full] for k in self.data_inputs if k != LABELS}
        b[LABELS] = onehot[full]
        return {k: self._put(a) for k, a in b.items()}, self._put(mask)

    def step(self, batch: dict, mask: Any) -> float:
        import jax

        with jax.enable_x64(True):
            self.params, self.m, self.v, self.t, loss = self._step(self.params, self.m, self.v, self.t, batch, mask)
        return float(loss)

    def evaluate(self, batch: dict, mask: Any) -> tuple[float, float]:
        import jax

        with jax.enable_x64(True):
            loss, hits = self._evaluate(self.params, batch, mask)
        return float(loss), float(hits)

    def weights(self) -> dict[str, np.ndarray]:
        return {k: np.asarray(a) for k, a in self.params.items()}


# the whole flow -------------------------------------------------------------------------------
def qat(
    graph: Graph,
    data: Any,
    labels: Any,
    *,
    scheme: str = "int8",
    epochs: int = 10,
    lr: float = 1e-4,
    batch: int = 32,
    device: str = "cpu",
    seed: int = 0,
    val_split: float = 0.0,
    record: CalibrationRecord | None = None,
    target_sqnr: float | None = None,
    mixed_schemes: Sequence[str] | None = None,
    optimize: bool = True,
    progress: bool | None = None,
    log: Callable[[str], None] | None = None,
) -> QatResult:
    """Quantization-aware training of float ``graph`` on ``data`` (inputs) and ``labels`` (class indices).

    Parameters
    ----------
    data:
        Samples of the one input (leading axis = samples) or a mapping of
        input name -> samples, as :func:`rlx_edge.quant.calibrate.calibrate` takes.
    labels:
        Class indices ``[samples]`` (or one-hot rows) for the softmax cross-entropy loss.
    scheme:
        A PTQ scheme (``int8``, ``int4w``, ``int16x8``) or ``mixed``: fake
        quantization simulates it and the result is quantized with it. Mixed
        precision picks each layer's scheme once, before training, by PTQ's
        measured sensitivity on the training samples
        (:func:`rlx_edge.quant.mixed.select_mixed` with ``target_sqnr`` and
        ``mixed_schemes``); training keeps those choices.
    epochs, lr, batch, seed:
        Adam over seeded shuffled mini-batches, its learning rate decaying from
        ``lr`` to 0 along a cosine over the run.
    device:
        ``cpu`` or ``gpu`` (jax's backend; an error when it has none).
    val_split:
        The fraction of the samples held out (seeded) for validation after
        each epoch; they are neither trained nor calibrated on.
    record:
        Calibration ranges to use instead of calibrating on the training samples.
    optimize:
        Run the optimizer first (:func:`rlx_edge.pipeline.optimize_graph`), as
        PTQ does; ``False`` for a graph that came out of it already.
    progress:
        Show a progress bar on stderr (default: when stderr is a terminal).
    log:
        Called with one line per epoch (loss, validation).
    """
    t0 = time.perf_counter()
    if scheme not in (*SCHEMES, "mixed"):
        raise QatError(f"unknown scheme {scheme!r} for QAT; use one of {', '.join(SCHEMES)} or mixed")
    if (scheme == "mixed") != (target_sqnr is not None) or (mixed_schemes is not None and scheme != "mixed"):
        raise QatError("--scheme mixed goes with --target-sqnr DB (and optionally --mixed-schemes), and only with it")
    if epochs < 1 or batch < 1 or not lr > 0 or not math.isfinite(lr):
        raise QatError(f"epochs and batch must be >= 1 and lr positive, got {epochs}, {batch}, {lr}")
    jax_device = _require_jax(device)
    g, _ = optimize_graph(graph, PipelineOptions(optimize=optimize))
    g = _bind_batch_one(g)
    not_float = [v for v in g.inputs if not g.types[v].dtype.is_float]
    if not_float or any(t.quant is not None for t in g.types.values()):
        raise QatError(f"graph {g.name!r} is quantized already; QAT starts from the float model")
    inputs, y = labeled_samples(g, data, labels)
    train_idx, val_idx = split(len(y), val_split, seed)
    train_in = {k: a[train_idx] for k, a in inputs.items()}
    if record is None:
        record = calibrate(g, train_in, optimize=False, progress=progress)
    layers: dict[str, str] | None = None  # mixed precision: layer -> scheme, chosen once before training
    if scheme == "mixed":
        from rlx_edge.quant.mixed import LEVELS, select_mixed

        chosen = select_mixed(
            g, record, train_in, target_sqnr, schemes=tuple(mixed_schemes or LEVELS), optimize=False
        )  # fmt: skip
        q0, layers = chosen.graph, {c.node: c.scheme for c in chosen.layers}
    else:
        q0 = quantize(g, record, scheme=scheme, optimize=False)
    tg = training_graph(g, q0)
    if y.max() >= tg.classes:
        raise QatError(f"labels go up to {y.max()}, but the model has {tg.classes} classes")
    from rlx_edge.autodiff import value_and_grad

    vg = value_and_grad(tg.graph, loss=LOSS, wrt=tg.trainable, aux=True)
    size = min(batch, len(train_idx))
    steps = epochs * -(-len(train_idx) // size)
    trainer = _Trainer(tg, vg, {k: g.params[k] for k in tg.trainable}, lr, steps, jax_device)
    onehot = np.eye(tg.classes, dtype=np.float32)[y].reshape((len(y), *tg.graph.types[LABELS].shape))
    rng = np.random.default_rng(seed)
    show = progress if progress is not None else sys.stderr.isatty()
    bar = Progress(epochs * len(train_idx), label=f"qat {scheme}") if show else None

    def measure(idx: np.ndarray) -> tuple[float, float]:
        """Mean loss and accuracy of the fake-quantized model on samples ``idx`` (the current weights)."""
        loss_sum = hits = 0.0
        for s in range(0, len(idx), size):
            got = trainer.evaluate(*trainer.batch(inputs, onehot, idx[s : s + size], size))
            loss_sum, hits = loss_sum + got[0], hits + got[1]
        return loss_sum / len(idx), hits / len(idx)

    loss_before = measure(train_idx)[0]
    history: list[dict[str, float]] = []
    for epoch in range(epochs):
        order = train_idx[rng.permutation(len(train_idx))]
        total = 0.0
        for s in range(0, len(order), size):
            idx = order[s : s + size]
            total += trainer.step(*trainer.batch(inputs, onehot, idx, size)) * len(idx)
            if bar is not None:
                bar.update(len(idx))
        rec: dict[str, float] = {"epoch": epoch + 1, "loss": total / len(order)}  # the running mean over the epoch
        if len(val_idx):
            rec["val_loss"], rec["val_accuracy"] = measure(val_idx)
        history.append(rec)
        if log is not None:
            val = f", validation loss {rec['val_loss']:.4f}, accuracy {rec['val_accuracy']:.4f}" if len(val_idx) else ""
            log(f"epoch {epoch + 1}/{epochs}: loss {rec['loss']:.4f}{val}")
    loss_after = measure(train_idx)[0]
    if bar is not None:
        bar.close()
    trained = trainer.weights()
    g2 = g.copy()
    for k, arr in trained.items():
        arr = np.array(arr, dtype=g.params[k].dtype)
        arr.flags.writeable = False
        g2.params[k] = arr
    # The same record: the activation ranges training simulated. No bias correction: the
    # biases were trained against the quantized weights.
    if layers is not None:
        q = quantize(g2, record, scheme="int8", layer_schemes=layers, optimize=False, bias_correction=False)
    else:
        q = quantize(g2, record, scheme=scheme, optimize=False, bias_correction=False)
    exact = _weights_exact(q, tg, trained)
    q.metadata["qat"] = {
        "scheme": scheme, "epochs": epochs, "lr": lr, "batch": batch, "seed": seed, "device": device,
        "samples": len(train_idx), "val_samples": len(val_idx), "history": history, "weights_exact": exact,
        "loss_before": loss_before, "loss_after": loss_after,
    }  # fmt: skip
    if layers is not None:
        q.metadata["qat"].update(target_sqnr_db=target_sqnr, layers=layers)
    return QatResult(
        q, g2, q0, record, history, exact, loss_before, loss_after, device, time.perf_counter() - t0
    )  # fmt: skip


def _weights_exact(q: Graph, tg: TrainingGraph, trained: Mapping[str, np.ndarray]) -> bool:
    """Whether PTQ's integer weights equal the trained weights rounded at the last step's scales.

    They differ only where PTQ raised a channel's scale so that its bias fits (a
    near-zero channel, counted in ``quantization.numerics``).
    """
    qvalues = q.metadata["quantization"]["values"]
    for wq in tg.weights:
        node = tg.graph.node(wq.node)
        qout = qvalues.get(node.outputs[0])
        qnode = next(m for m in q.nodes if qout in m.outputs)
        w = trained[wq.param]
        want = quantize_weights_at(w, wq.axis, wq.qmax, weight_scale(w, wq.axis, wq.qmax))
        if not np.array_equal(q.params[qnode.inputs[1]], want):
            return False
    return True


# evaluation and the command line ------------------------------------------------------------------
def accuracy(graph: Graph, inputs: Mapping[str, np.ndarray], labels: np.ndarray, device: str = "cpu") -> float:
    """Top-1 accuracy of ``graph`` (float or quantized) on samples ``{name: [n, *input shape]}``, traced by jax.

    Float samples for a quantized input are quantized with its parameters, as the integer model expects.
    """
    import jax

    from rlx_edge.ir.ops.quant import affine_quantize

    dev = _require_jax(device)
    g = _bind_batch_one(graph)
    args = []
    for v in g.inputs:
        t, a = g.types[v], np.asarray(inputs[v])
        if t.quant is not None and t.dtype.is_int and a.dtype.kind == "f":
            a = affine_quantize(a, t.quant, t.dtype)
        args.append(jax.device_put(a.astype(t.dtype.numpy), dev))
    with jax.enable_x64(True):
        out = jax.jit(jax.vmap(traced(g, "jax")))(*args)[0]
    classes = np.asarray(out).reshape(len(labels), -1).argmax(axis=1)
    return float(np.mean(classes == np.asarray(labels)))


def _pick_inputs(g: Graph, store: Any, labels_key: str | None, where: str) -> Any:
    """The model's inputs out of an ``.npy`` (one input) or ``.npz`` (by input name, or its one other array)."""
    if not isinstance(store, dict):
        return store
    if all(v in store for v in g.inputs):
        return {v: store[v] for v in g.inputs}
    rest = [k for k in store if k != labels_key]
    if len(g.inputs) == 1 and len(rest) == 1:
        return store[rest[0]]
    raise QatError(
        f"{where}: cannot tell the inputs apart (arrays: {', '.join(sorted(store))}); name them "
        f"{', '.join(g.inputs)}" + ("" if labels_key else " and give the labels with --labels or --labels-key")
    )


def cli_qat(
    graph: Graph,
    out: str,
    *,
    data: str,
    labels: str | None = None,
    labels_key: str | None = None,
    progress: bool = True,
    **options: Any,
) -> tuple[QatResult, dict[str, Any]]:
    """``rlx-edge qat MODEL --data D.npz (--labels L.npy | --labels-key KEY) -o OUT.rlx [options]``.

    Trains, saves the integer graph and returns the result with a summary: the
    loss per epoch and, with a validation split, the held-out accuracy of the
    float model, of PTQ with the same scheme and data, and of QAT.
    """
    from rlx_edge.data import load_arrays
    from rlx_edge.ir.serialize import save

    if (labels is None) == (labels_key is None):
        raise QatError("give exactly one of --labels L.npy and --labels-key KEY")
    store = load_arrays(data)
    if labels_key is not None:
        if not isinstance(store, dict) or labels_key not in store:
            have = ", ".join(sorted(store)) if isinstance(store, dict) else "one array (.npy)"
            raise QatError(f"{data}: no array {labels_key!r} for --labels-key (it has: {have})")
        y = store[labels_key]
    else:
        loaded = load_arrays(labels)
        if isinstance(loaded, dict):
            if len(loaded) != 1:
                raise QatError(f"{labels}: holds {len(loaded)} arrays; give the labels as one .npy or use --labels-key")
            loaded = next(iter(loaded.values()))
        y = loaded
    g, _ = optimize_graph(graph)  # once: training, PTQ and the accuracies below all see this graph
    x = _pick_inputs(g, store, labels_key, data)
    log = (lambda line: print(line, file=sys.stderr)) if progress else None
    res = qat(g, x, y, progress=progress, log=log, optimize=False, **options)
    save(res.graph, out)
    summary: dict[str, Any] = {
        "output": str(out), "scheme": options.get("scheme", "int8"), "device": res.device,
        "epochs": len(res.history), "loss": [round(h["loss"], 6) for h in res.history],
        "loss_before": round(res.loss_before, 6), "loss_after": round(res.loss_after, 6),
        "weights_exact": res.weights_exact, "seconds": round(res.seconds, 2),
    }  # fmt: skip
    val = options.get("val_split", 0.0)
    if val:
        gb = _bind_batch_one(g)
        inputs, yy = labeled_samples(gb, x, y)
        _, val_idx = split(len(yy), val, options.get("seed", 0))
        held = {k: a[val_idx].reshape(len(val_idx), *gb.types[k].shape) for k, a in inputs.items()}
        dev = res.device
        summary["val_samples"] = len(val_idx)
        summary["val_accuracy"] = {
            "float": accuracy(g, held, yy[val_idx], dev),
            "ptq": accuracy(res.ptq_graph, held, yy[val_idx], dev),
            "qat": accuracy(res.graph, held, yy[val_idx], dev),
        }
    return res, summary
