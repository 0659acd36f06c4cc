"""Train the bundled digits CNN in plain numpy and write ``digits_cnn.rlx``.

    python -m rlx_edge.models.train_digits [--epochs N] [--out PATH]

The network is the one :func:`rlx_edge.models.digits.build_digits_cnn`
builds (NHWC, TFLite weight layouts). Convolutions run as im2col matrix
products, forward and backward; the optimizer is Adam with a step decay.
Everything is seeded and computed in float64, so a run is deterministic;
on two cores it takes a few seconds.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from rlx_edge.models.digits import WEIGHTS_FILE, build_digits_cnn, digits_data, init_weights


# layers --------------------------------------------------------------------------------
def im2col3x3(x: np.ndarray) -> np.ndarray:
    """'same' 3x3 patches of NHWC ``x`` as rows [N*H*W, 9*C], ordered (kh, kw, c) like weights [O,KH,KW,C]."""
    n, h, w, c = x.shape
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    cols = np.stack([xp[:, i : i + h, j : j + w, :] for i in range(3) for j in range(3)], axis=3)
    return cols.reshape(n * h * w, 9 * c)


def col2im3x3(dcols: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """The adjoint of :func:`im2col3x3`: scatter-add patch gradients back onto the input."""
    n, h, w, c = shape
    d = dcols.reshape(n, h, w, 9, c)
    dxp = np.zeros((n, h + 2, w + 2, c))
    for k in range(9):
        i, j = divmod(k, 3)
        dxp[:, i : i + h, j : j + w, :] += d[:, :, :, k, :]
    return dxp[:, 1:-1, 1:-1, :]


def conv_forward(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n, h, wd, _ = x.shape
    cols = im2col3x3(x)
    y = cols @ w.reshape(w.shape[0], -1).T + b
    return y.reshape(n, h, wd, w.shape[0]), cols


def conv_backward(dy: np.ndarray, cols: np.ndarray, w: np.ndarray, x_shape) -> tuple[np.ndarray, ...]:
    dy2 = dy.reshape(-1, w.shape[0])
    dw = (dy2.T @ cols).reshape(w.shape)
    db = dy2.sum(axis=0)
    dx = col2im3x3(dy2 @ w.reshape(w.shape[0], -1), x_shape)
    return dx, dw, db


def pool_forward(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """2x2 stride-2 max pool; also returns which window element won (the gradient goes there only)."""
    n, h, w, c = x.shape
    win = x.reshape(n, h // 2, 2, w // 2, 2, c).transpose(0, 1, 3, 5, 2, 4).reshape(n, h // 2, w // 2, c, 4)
    arg = win.argmax(axis=-1)
    return np.take_along_axis(win, arg[..., None], axis=-1)[..., 0], arg


def pool_backward(dy: np.ndarray, arg: np.ndarray) -> np.ndarray:
    n, h2, w2, c = arg.shape
    d = np.zeros((n, h2, w2, c, 4))
    np.put_along_axis(d, arg[..., None], dy[..., None], axis=-1)
    return d.reshape(n, h2, w2, c, 2, 2).transpose(0, 1, 4, 2, 5, 3).reshape(n, h2 * 2, w2 * 2, c)


def forward(p: dict[str, np.ndarray], x: np.ndarray) -> tuple[np.ndarray, dict]:
    """Logits and the values the backward pass needs."""
    c1, cols1 = conv_forward(x, p["conv1.w"], p["conv1.b"])
    r1 = np.maximum(c1, 0)
    p1, m1 = pool_forward(r1)
    c2, cols2 = conv_forward(p1, p["conv2.w"], p["conv2.b"])
    r2 = np.maximum(c2, 0)
    p2, m2 = pool_forward(r2)
    flat = p2.reshape(len(x), -1)  # NHWC order, as the graph's reshape(-1, 64)
    logits = flat @ p["fc.w"].T + p["fc.b"]
    cache = {"x": x, "cols1": cols1, "c1": c1, "m1": m1, "p1": p1, "cols2": cols2, "c2": c2, "m2": m2, "flat": flat}
    return logits, cache


def backward(p: dict[str, np.ndarray], cache: dict, dlogits: np.ndarray) -> dict[str, np.ndarray]:
    g: dict[str, np.ndarray] = {}
    g["fc.w"] = dlogits.T @ cache["flat"]
    g["fc.b"] = dlogits.sum(axis=0)
    dflat = dlogits @ p["fc.w"]
    dp2 = dflat.reshape(cache["m2"].shape)
    dc2 = pool_backward(dp2, cache["m2"]) * (cache["c2"] > 0)
    dp1, g["conv2.w"], g["conv2.b"] = conv_backward(dc2, cache["cols2"], p["conv2.w"], cache["p1"].shape)
    dc1 = pool_backward(dp1, cache["m1"]) * (cache["c1"] > 0)
    _, g["conv1.w"], g["conv1.b"] = conv_backward(dc1, cache["cols1"], p["conv1.w"], cache["x"].shape)
    return g


def softmax_xent(logits: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
    z = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(z)
    prob = e / e.sum(axis=1, keepdims=True)
    loss = float(-np.log(prob[np.arange(len(y)), y] + 1e-12).mean())
    d = prob.copy()
    d[np.arange(len(y)), y] -= 1
    return loss, d / len(y)


# training -------------------------------------------------------------------------------
def train(
    epochs: int = 30, batch: int = 32, lr: float = 3e-3, seed: int = 0, log=None
) -> tuple[dict[str, np.ndarray], dict]:
    """Train on the fixed train split; returns float32 weights and a summary with held-out accuracy."""
    xtr, ytr = digits_data("train")
    xte, yte = digits_data("test")
    p = {k: v.astype(np.float64) for k, v in init_weights(seed).items()}
    m = {k: np.zeros_like(v) for k, v in p.items()}
    v = {k: np.zeros_like(x) for k, x in p.items()}
    b1, b2, eps, wd = 0.9, 0.999, 1e-8, 1e-4
    rng = np.random.default_rng(seed)
    step = 0
    x64 = xtr.astype(np.float64)
    for epoch in range(epochs):
        rate = lr * (0.3 if epoch >= epochs * 2 // 3 else 1.0)
        order = rng.permutation(len(ytr))
        total = 0.0
        for s in range(0, len(order), batch):
            idx = order[s : s + batch]
            logits, cache = forward(p, x64[idx])
            loss, dl = softmax_xent(logits, ytr[idx])
            total += loss * len(idx)
            grads = backward(p, cache, dl)
            step += 1
            for k in p:
                gk = grads[k] + wd * p[k]
                m[k] = b1 * m[k] + (1 - b1) * gk
                v[k] = b2 * v[k] + (1 - b2) * gk * gk
                mh, vh = m[k] / (1 - b1**step), v[k] / (1 - b2**step)
                p[k] -= rate * mh / (np.sqrt(vh) + eps)
        if log is not None:
            acc = float((forward(p, xte.astype(np.float64))[0].argmax(1) == yte).mean())
            log(f"epoch {epoch + 1}/{epochs}: loss {total / len(ytr):.4f}, held-out accuracy {acc:.4f}")
    weights = {k: val.astype(np.float32) for k, val in p.items()}
    acc_test = float((forward(weights, xte)[0].argmax(1) == yte).mean())
    acc_train = float((forward(weights, xtr)[0].argmax(1) == ytr).mean())
    return weights, {"epochs": epochs, "train_accuracy": acc_train, "test_accuracy": acc_test}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=WEIGHTS_FILE)
    args = ap.parse_args(argv)
    from rlx_edge.ir.serialize import save

    t0 = time.perf_counter()
    weights, info = train(args.epochs, seed=args.seed, log=lambda s: print(s, file=sys.stderr))
    g = build_digits_cnn(weights)
    g.metadata["training"] = {**info, "seed": args.seed, "split_seed": 0}
    save(g, args.out)
    print(f"wrote {args.out}: {info} in {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
