"""The bundled default model: a small CNN for 8x8 digit images.

Built with the Python API out of HIR blocks, so it exercises HIR -> MIR
lowering. Input ``image`` is f32 [N,8,8,1] with pixel values in [0, 1];
output ``probs`` is f32 [N,10].
"""

from __future__ import annotations

import numpy as np

from rlx_edge.ir.graph import Graph


def default_weights(seed: int = 0) -> dict[str, np.ndarray]:
    """He-initialized weights, deterministic for a given seed."""
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


def build_digits_cnn(weights: dict[str, np.ndarray] | None = None, batch: int | str = 1) -> Graph:
    """conv3x3(8)+relu, maxpool2, conv3x3(16)+relu, maxpool2, linear(10), softmax."""
    w = weights if weights is not None else default_weights()
    g = Graph("digits_cnn", stage="hir")
    x = g.input("image", (batch, 8, 8, 1), "f32")
    p = {k: g.param(k, v) for k, v in w.items()}
    h = g.conv_block(x, p["conv1.w"], p["conv1.b"], padding="same", activation="relu", name="conv1")
    h = g.max_pool2d(h, kernel=(2, 2), strides=(2, 2), name="pool1")
    h = g.conv_block(h, p["conv2.w"], p["conv2.b"], padding="same", activation="relu", name="conv2")
    h = g.max_pool2d(h, kernel=(2, 2), strides=(2, 2), name="pool2")
    h = g.reshape(h, shape=(-1, 64), name="flatten")
    h = g.linear(h, p["fc.w"], p["fc.b"], name="fc")
    g.output(g.softmax(h, name="probs"))
    return g
