"""A 2-layer, 4-head transformer classifier for the bundled 8x8 digits (rows as tokens).

Built out of HIR blocks (``linear``, ``multi_head_attention``,
``residual_layer_norm``, ``gelu``) and trained with :mod:`rlx_edge.autodiff`:
the gradient of the very graph a device runs, executed by the JAX target
(Adam, seeded, float32, so a run is repeatable on one machine). Used by
``examples/tiny_transformer.py`` (the whole path down to QEMU, training
included) and by the demo's ``transformer`` stage, which loads the trained
float graph bundled next to this file (``tiny_transformer.rlx``, written by
``python -m rlx_edge.models.tiny_transformer``) instead of training again.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

from rlx_edge.autodiff import value_and_grad
from rlx_edge.ir.graph import Graph
from rlx_edge.models.digits import digits_data
from rlx_edge.targets.jax import compile_jax
from rlx_edge.targets.reference import RunPlan

BUNDLED = Path(__file__).with_name("tiny_transformer.rlx")  # the causal model after 40 epochs
TOKENS, FEATURES, CLASSES = 8, 8, 10
EMBED, HEADS, FFN, LAYERS = 16, 4, 32, 2


def init_params(seed: int = 0) -> dict[str, np.ndarray]:
    """Glorot-scaled weights (TFLite layout [out, in]) and zero biases, deterministic for ``seed``."""
    rng = np.random.default_rng(seed)

    def dense(o: int, i: int) -> np.ndarray:
        return (rng.standard_normal((o, i)) * np.sqrt(2.0 / (o + i))).astype(np.float32)

    p = {
        "embed.w": dense(EMBED, FEATURES),
        "embed.b": np.zeros(EMBED, np.float32),
        "pos": (0.1 * rng.standard_normal((TOKENS, EMBED))).astype(np.float32),
    }
    for i in range(LAYERS):
        for n in ("q", "k", "v", "o"):
            p[f"l{i}.w{n}"] = dense(EMBED, EMBED)
            p[f"l{i}.b{n}"] = np.zeros(EMBED, np.float32)
        p[f"l{i}.ln1.g"] = np.ones(EMBED, np.float32)
        p[f"l{i}.ln1.b"] = np.zeros(EMBED, np.float32)
        p[f"l{i}.ff1.w"] = dense(FFN, EMBED)
        p[f"l{i}.ff1.b"] = np.zeros(FFN, np.float32)
        p[f"l{i}.ff2.w"] = dense(EMBED, FFN)
        p[f"l{i}.ff2.b"] = np.zeros(EMBED, np.float32)
        p[f"l{i}.ln2.g"] = np.ones(EMBED, np.float32)
        p[f"l{i}.ln2.b"] = np.zeros(EMBED, np.float32)
    p["head.w"] = dense(CLASSES, EMBED)
    p["head.b"] = np.zeros(CLASSES, np.float32)
    return p


def build(params: dict[str, np.ndarray], batch: int, mask: str = "causal", *, train: bool = False) -> Graph:
    """The classifier on ``batch`` images [batch, 8, 8] -> ``logits`` [batch, 10]; with ``train``, a ``loss``
    output (mean cross-entropy against the one-hot input ``target``) instead."""
    g = Graph("tiny_transformer")
    x = g.input("tokens", (batch, TOKENS, FEATURES), "f32")
    p = {k: g.param(k, v) for k, v in params.items()}
    h = g.add(g.linear(x, p["embed.w"], p["embed.b"]), p["pos"], name="embedded")
    for i in range(LAYERS):
        w = [p[f"l{i}.{n}"] for n in ("wq", "wk", "wv", "wo", "bq", "bk", "bv", "bo")]
        a = g.multi_head_attention(h, *w, num_heads=HEADS, mask=mask, name=f"l{i}.attn")
        h, _ = g.residual_layer_norm(a, h, p[f"l{i}.ln1.g"], p[f"l{i}.ln1.b"], name=f"l{i}.ln1")
        f = g.gelu(g.linear(h, p[f"l{i}.ff1.w"], p[f"l{i}.ff1.b"], name=f"l{i}.ff1"), name=f"l{i}.gelu")
        f = g.linear(f, p[f"l{i}.ff2.w"], p[f"l{i}.ff2.b"], name=f"l{i}.ff2")
        h, _ = g.residual_layer_norm(f, h, p[f"l{i}.ln2.g"], p[f"l{i}.ln2.b"], name=f"l{i}.ln2")
    pooled = g.mean(h, axes=(1,), name="pooled")
    logits = g.linear(pooled, p["head.w"], p["head.b"], name="logits")
    if not train:
        g.output(logits)
        return g
    target = g.input("target", (batch, CLASSES), "f32")
    xent = g.mean(g.mul(g.log_softmax(logits), target), axes=(0, 1))
    g.output(g.mul(xent, g.param("neg_classes", np.float32(-CLASSES)), name="loss"))
    return g


def tokens(images: np.ndarray) -> np.ndarray:
    """Digits images [N, 8, 8, 1] as token sequences [N, 8 tokens, 8 features]."""
    return np.ascontiguousarray(images[..., 0], np.float32)


def train(mask: str, epochs: int, batch: int = 64, lr: float = 3e-3, seed: int = 0, log=None) -> dict:
    """Adam on the cross-entropy of the training digits; returns the trained parameters."""
    images, labels = digits_data("train")
    xs, ys = tokens(images), np.eye(CLASSES, dtype=np.float32)[labels]
    params = init_params(seed)
    names = sorted(params)
    step = compile_jax(value_and_grad(build(params, batch, mask, train=True), loss="loss", wrt=names), batch="exact")
    m = {k: np.zeros_like(v) for k, v in params.items()}
    v = {k: np.zeros_like(v) for k, v in params.items()}
    rng = np.random.default_rng(seed)
    t = 0
    for epoch in range(epochs):
        order = rng.permutation(len(xs))
        losses = []
        for s in range(len(xs) // batch):
            idx = order[s * batch : (s + 1) * batch]
            out = step({"tokens": xs[idx], "target": ys[idx], **params})
            losses.append(float(out["loss"]))
            t += 1
            rate = lr * min(1.0, 0.5 * (1 + np.cos(np.pi * epoch / epochs)) + 0.05)
            for k in names:
                gk = np.asarray(out[f"grad/{k}"], np.float32)
                m[k] = 0.9 * m[k] + 0.1 * gk
                v[k] = 0.999 * v[k] + 0.001 * gk * gk
                mh, vh = m[k] / (1 - 0.9**t), v[k] / (1 - 0.999**t)
                params[k] = (params[k] - rate * mh / (np.sqrt(vh) + 1e-8)).astype(np.float32)
        if log:
            log(f"epoch {epoch + 1}/{epochs}: loss {np.mean(losses):.4f}")
    return params


def accuracy(graph: Graph, xs: np.ndarray, labels: np.ndarray) -> tuple[float, np.ndarray]:
    """Top-1 accuracy (percent) of a batch-1 graph over ``xs`` on the reference, and its raw outputs."""
    run = RunPlan(graph)
    outs = np.stack([run({"tokens": as_input(graph, x)})["logits"][0] for x in xs])
    return 100.0 * float(np.mean(outs.argmax(-1) == labels)), outs


def as_input(graph: Graph, x: np.ndarray) -> np.ndarray:
    """One token sequence as the quantized graph's input: int8 at the input's scale and zero point."""
    q = graph.types["tokens"].quant
    if q is None:
        return x[None]
    scale, zp = float(q.scale.reshape(-1)[0]), int(q.zero_point.reshape(-1)[0])
    return np.clip(np.round(x / scale) + zp, -128, 127).astype(np.int8)[None]


def train_and_quantize(
    mask: str = "causal", epochs: int = 40, *, calibration: int = 200, log=None
) -> tuple[Graph, Graph, dict]:
    """Train (:func:`train`), then the batch-1 float graph and its int8 PTQ (:func:`quantize_and_score`):
    (float graph, int8 graph, figures: training seconds and held-out accuracy of each)."""
    t0 = time.perf_counter()
    params = train(mask, epochs, log=log)
    figures: dict = {"mask": mask, "epochs": epochs, "train_s": round(time.perf_counter() - t0, 1)}
    float_graph = build(params, 1, mask)
    qgraph, scores = quantize_and_score(float_graph, calibration=calibration)
    return float_graph, qgraph, {**figures, **scores}


def jax_bit_exact(qgraph: Graph, xs: np.ndarray) -> bool:
    """The int8 graph on the JAX target, all of ``xs`` in one batch, equal to the reference input by input."""
    feeds = [as_input(qgraph, x) for x in xs]
    ref = RunPlan(qgraph)
    want = np.stack([ref({"tokens": f})["logits"] for f in feeds])
    got = np.asarray(compile_jax(qgraph)({"tokens": np.concatenate(feeds)})["logits"])
    return bool(np.array_equal(got.reshape(want.shape), want))


def quantize_and_score(float_graph: Graph, *, calibration: int = 200) -> tuple[Graph, dict]:
    """int8 PTQ of a trained batch-1 graph on ``calibration`` training digits: (int8 graph, held-out accuracy
    of float and int8)."""
    from rlx_edge.quant.calibrate import calibrate
    from rlx_edge.quant.ptq import quantize

    test_images, test_labels = digits_data("test")
    test_x = tokens(test_images)
    figures: dict = {}
    figures["float_accuracy"], _ = accuracy(float_graph, test_x, test_labels)
    train_x = tokens(digits_data("train")[0])
    record = calibrate(float_graph, {"tokens": train_x[:calibration, None]})
    qgraph = quantize(float_graph, record, scheme="int8")
    figures["int8_accuracy"], _ = accuracy(qgraph, test_x, test_labels)
    figures["accuracy_drop"] = round(figures["float_accuracy"] - figures["int8_accuracy"], 2)
    return qgraph, figures


def bundled() -> Graph:
    """The bundled trained float graph (batch 1, causal)."""
    from rlx_edge.errors import RlxError
    from rlx_edge.ir.serialize import load

    if not BUNDLED.exists():
        raise RlxError(f"bundled model {BUNDLED} is missing; run python -m rlx_edge.models.tiny_transformer")
    return load(BUNDLED)


if __name__ == "__main__":
    from rlx_edge.ir.serialize import save

    save(build(train("causal", 40, log=print), 1, "causal"), BUNDLED)
    print(f"wrote {BUNDLED}", file=sys.stderr)
