"""A 2-layer, 4-head transformer classifier for the bundled 8x8 digits, from training to QEMU.

    python examples/tiny_transformer.py [--mask causal|none] [--epochs N] [--json] [--skip-qemu]

Each image is a sequence of 8 tokens (its rows) of 8 features. The network is
built with the HIR blocks (``linear``, ``multi_head_attention``,
``residual_layer_norm``) and trained here: ``rlx_edge.autodiff`` differentiates
the same graph the device runs, and the JAX target runs the gradient graph
(Adam, seeded, float32). The trained graph is then calibrated, quantized to
int8 (``rlx_edge.quant``; layer norms get integer semantics of their own,
docs/ARCHITECTURE.md) and checked three ways:

- accuracy on the held-out digits, float and int8 (the reference interpreter);
- the JAX target bit-exact with the reference on 500 inputs;
- the Cortex-M4 build bit-exact under QEMU on 20 inputs, with its instruction
  count per MAC, flash, RAM and arena from the same firmware.

Run time on two cores: about a minute of training, then a firmware build and
a QEMU boot. ``--json`` prints one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time

import numpy as np

from rlx_edge import Graph
from rlx_edge.autodiff import value_and_grad
from rlx_edge.models.digits import digits_data
from rlx_edge.quant.calibrate import calibrate
from rlx_edge.quant.ptq import quantize
from rlx_edge.targets.jax import compile_jax
from rlx_edge.targets.reference import RunPlan

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
    outs = np.stack([run({"tokens": qgraph_input(graph, x)})["logits"][0] for x in xs])
    return 100.0 * float(np.mean(outs.argmax(-1) == labels)), outs


def run_example(
    mask: str = "causal",
    epochs: int = 40,
    *,
    calibration: int = 200,
    qemu_inputs: int = 20,
    jax_inputs: int = 500,
    qemu: bool = True,
    log=print,
) -> dict:
    """Train, quantize and check; every figure in one dict (``qemu_bit_exact`` only when ``qemu``)."""
    t0 = time.perf_counter()
    params = train(mask, epochs, log=log)
    result: dict = {"mask": mask, "epochs": epochs, "train_s": round(time.perf_counter() - t0, 1)}

    float_graph = build(params, 1, mask)
    test_images, test_labels = digits_data("test")
    test_x = tokens(test_images)
    result["float_accuracy"], _ = accuracy(float_graph, test_x, test_labels)

    train_x = tokens(digits_data("train")[0])
    record = calibrate(float_graph, {"tokens": train_x[:calibration, None]})
    qgraph = quantize(float_graph, record, scheme="int8")
    result["int8_accuracy"], _ = accuracy(qgraph, test_x, test_labels)
    result["accuracy_drop"] = round(result["float_accuracy"] - result["int8_accuracy"], 2)
    log(
        f"accuracy on {len(test_x)} held-out digits: float {result['float_accuracy']:.2f} %, "
        f"int8 {result['int8_accuracy']:.2f} %"
    )

    # JAX: the held-out digits, then training digits, in one batch
    jax_x = np.concatenate([test_x, train_x])[:jax_inputs]
    feeds = [qgraph_input(qgraph, x) for x in jax_x]
    ref = RunPlan(qgraph)
    want = np.stack([ref({"tokens": f})["logits"] for f in feeds])
    got = np.asarray(compile_jax(qgraph)({"tokens": np.concatenate(feeds)})["logits"])
    result["jax_inputs"] = len(jax_x)
    result["jax_bit_exact"] = bool(np.array_equal(got.reshape(want.shape), want))
    log(f"jax: {'bit-exact' if result['jax_bit_exact'] else 'MISMATCH'} on {len(jax_x)} inputs")

    if qemu:
        result.update(run_qemu(qgraph, test_x[:qemu_inputs], ref, log))
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mask", choices=("causal", "none"), default="causal", help="attention mask (default causal)")
    ap.add_argument("--epochs", type=int, default=40, help="training epochs (default 40)")
    ap.add_argument("--calibration", type=int, default=200, help="training images used to calibrate (default 200)")
    ap.add_argument("--qemu-inputs", type=int, default=20, help="held-out inputs run on QEMU M4 (default 20)")
    ap.add_argument("--jax-inputs", type=int, default=500, help="inputs run on the JAX target (default 500)")
    ap.add_argument("--skip-qemu", action="store_true", help="stop before the firmware build")
    ap.add_argument("--json", action="store_true", help="print one JSON object with every figure")
    args = ap.parse_args(argv)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr if args.json else sys.stdout, flush=True)

    result = run_example(
        args.mask,
        args.epochs,
        calibration=args.calibration,
        qemu_inputs=args.qemu_inputs,
        jax_inputs=args.jax_inputs,
        qemu=not args.skip_qemu,
        log=log,
    )
    if args.json:
        print(json.dumps(result, sort_keys=True))
    return 0 if result["jax_bit_exact"] and result.get("qemu_bit_exact", True) else 1


def qgraph_input(graph: Graph, x: np.ndarray) -> np.ndarray:
    """One token sequence as the quantized graph's input: int8 at the input's scale and zero point."""
    q = graph.types["tokens"].quant
    if q is None:
        return x[None]
    scale, zp = float(q.scale.reshape(-1)[0]), int(q.zero_point.reshape(-1)[0])
    return np.clip(np.round(x / scale) + zp, -128, 127).astype(np.int8)[None]


def run_qemu(qgraph: Graph, xs: np.ndarray, ref: RunPlan, log) -> dict:
    """The int8 graph on QEMU's Cortex-M4 board: bit-exact on every input, counted on the first."""
    from rlx_edge.hil.profile import profile
    from rlx_edge.runners import prepare

    with tempfile.TemporaryDirectory(prefix="rlx-tiny-transformer-") as tmp:
        run = prepare("qemu-m4", qgraph, tmp)
        exact = 0
        for x in xs:
            feed = {"tokens": qgraph_input(qgraph, x)}
            exact += bool(np.array_equal(run(feed)["logits"], ref(feed)["logits"]))
        prof = profile(qgraph, "m4", {"tokens": qgraph_input(qgraph, xs[0])}, workdir=tmp)
    out = {
        "qemu_inputs": len(xs),
        "qemu_bit_exact": exact == len(xs) and prof.bit_exact,
        "macs": prof.macs,
        "instructions": prof.instructions,
        "instr_per_mac": round(prof.instructions / prof.macs, 3),
        "flash_bytes": prof.flash_bytes,
        "ram_bytes": prof.ram_bytes,
        "arena_bytes": prof.arena_bytes,
    }
    log(
        f"qemu-m4: bit-exact on {exact}/{len(xs)} inputs; {out['instructions']} instructions "
        f"({out['instr_per_mac']}/MAC), flash {out['flash_bytes']} B, RAM {out['ram_bytes']} B, "
        f"arena {out['arena_bytes']} B"
    )
    return out


if __name__ == "__main__":
    sys.exit(main())
