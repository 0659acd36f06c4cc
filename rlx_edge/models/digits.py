"""The bundled default model: a small CNN for 8x8 digit images.

Built with the Python API out of HIR blocks, so it exercises HIR -> MIR
lowering. Input ``image`` is f32 [N,8,8,1] with pixel values in [0, 1]
(scikit-learn's digits divided by 16); output ``probs`` is f32 [N,10].

The trained weights ship in ``digits_cnn.rlx`` next to this file (a float
graph written by :mod:`rlx_edge.models.train_digits`, which trains on
scikit-learn's bundled digits dataset; no download). Training and the
held-out split are seeded, so retraining reproduces the file.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np

from rlx_edge.errors import RlxError
from rlx_edge.ir.graph import Graph

WEIGHTS_FILE = Path(__file__).with_name("digits_cnn.rlx")
WEIGHT_NAMES = ("conv1.w", "conv1.b", "conv2.w", "conv2.b", "fc.w", "fc.b")
SPLIT_SEED = 0
TEST_FRACTION = 0.2


def init_weights(seed: int = 0) -> dict[str, np.ndarray]:
    """He-initialized (untrained) weights, deterministic for a given seed."""
    rng = np.random.default_rng(seed)

    def he(shape, fan_in):
        return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)

    return {
        "conv1.w": he((8, 3, 3, 1), 9),
        "conv1.b": np.zeros(8, np.float32),
        "conv2.w": he((16, 3, 3, 8), 72),
        "conv2.b": np.zeros(16, np.float32),
        "fc.w": he((10, 64), 64),
        "fc.b": np.zeros(10, np.float32),
    }


@lru_cache(maxsize=1)
def _bundled() -> dict[str, np.ndarray]:
    from rlx_edge.ir.serialize import load

    if not WEIGHTS_FILE.exists():
        raise RlxError(f"bundled weights {WEIGHTS_FILE} are missing; run python -m rlx_edge.models.train_digits")
    g = load(WEIGHTS_FILE)
    missing = [k for k in WEIGHT_NAMES if k not in g.params]
    if missing:
        raise RlxError(f"{WEIGHTS_FILE} lacks weights {', '.join(missing)}")
    return {k: g.params[k] for k in WEIGHT_NAMES}


def default_weights() -> dict[str, np.ndarray]:
    """The trained weights bundled with rlx-edge (read-only arrays)."""
    return dict(_bundled())


def build_digits_cnn(weights: dict[str, np.ndarray] | None = None, batch: int | str = 1) -> Graph:
    """conv3x3(8)+relu, maxpool2, conv3x3(16)+relu, maxpool2, linear(10), softmax.

    ``weights`` defaults to the bundled trained weights; ``batch`` may be a
    symbol (``"N"``) for a batch-polymorphic graph.
    """
    w = weights if weights is not None else default_weights()
    g = Graph("digits_cnn", stage="hir")
    x = g.input("image", (batch, 8, 8, 1), "f32")
    p = {k: g.param(k, w[k]) for k in WEIGHT_NAMES}
    h = g.conv_block(x, p["conv1.w"], p["conv1.b"], padding="same", activation="relu", name="conv1")
    h = g.max_pool2d(h, kernel=(2, 2), strides=(2, 2), name="pool1")
    h = g.conv_block(h, p["conv2.w"], p["conv2.b"], padding="same", activation="relu", name="conv2")
    h = g.max_pool2d(h, kernel=(2, 2), strides=(2, 2), name="pool2")
    h = g.reshape(h, shape=(-1, 64), name="flatten")
    h = g.linear(h, p["fc.w"], p["fc.b"], name="fc")
    g.output(g.softmax(h, name="probs"))
    return g


def digits_data(split: str = "all") -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's 8x8 digits as (images f32 [N,8,8,1] in [0,1], labels int64 [N]).

    ``split`` is ``"train"`` (80 %), ``"test"`` (the held-out 20 %) or
    ``"all"``; the split is a fixed seeded permutation.
    """
    try:
        from sklearn.datasets import load_digits
    except ImportError as e:
        raise RlxError("the digits dataset needs scikit-learn: pip install scikit-learn") from e
    d = load_digits()
    x = (d.images.astype(np.float32) / 16.0).reshape(-1, 8, 8, 1)
    y = d.target.astype(np.int64)
    if split == "all":
        return x, y
    order = np.random.default_rng(SPLIT_SEED).permutation(len(y))
    n_test = round(len(y) * TEST_FRACTION)
    idx = {"test": order[:n_test], "train": order[n_test:]}.get(split)
    if idx is None:
        raise RlxError(f"unknown split {split!r}; use train, test or all")
    idx = np.sort(idx)
    return x[idx], y[idx]
