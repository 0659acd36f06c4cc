"""Random single-layer quantized graphs for the per-component tests."""

from __future__ import annotations

import numpy as np

from rlx_edge.ir.graph import Graph
from rlx_edge.ir.types import QuantParams


def act_q(rng) -> QuantParams:
    return QuantParams(float(rng.uniform(0.02, 0.2)), int(rng.integers(-128, 60)))


def weights(rng, shape, axis: int):
    n = shape[axis]
    w = rng.integers(-127, 128, shape).astype(np.int8)
    q = QuantParams(rng.uniform(0.002, 0.02, n).astype(np.float32), np.zeros(n, np.int64), axis=axis)
    return w, q


def fc(rng):
    i = int(rng.choice([8, 12, 16, 24]))
    o = int(rng.choice([4, 6, 8, 12]))
    g = Graph("rand_fc")
    x = g.input("x", (1, i), "i8", quant=act_q(rng))
    w, wq = weights(rng, (o, i), 0)
    wt = g.param("w", w, quant=wq)
    b = g.param("b", rng.integers(-3000, 3000, o).astype(np.int32))
    g.output(g.fully_connected(x, wt, b, activation=str(rng.choice(["none", "relu"])), out_quant=act_q(rng)))
    return g


def conv(rng):
    c, o = int(rng.choice([1, 2, 4])), int(rng.choice([2, 4, 6]))
    h, w_ = int(rng.integers(4, 7)), int(rng.integers(4, 7))
    k = int(rng.choice([1, 3]))
    g = Graph("rand_conv")
    x = g.input("x", (1, h, w_, c), "i8", quant=act_q(rng))
    w, wq = weights(rng, (o, k, k, c), 0)
    wt = g.param("w", w, quant=wq)
    b = g.param("b", rng.integers(-3000, 3000, o).astype(np.int32))
    y = g.conv2d(
        x,
        wt,
        b,
        strides=(int(rng.integers(1, 3)),) * 2,
        padding=str(rng.choice(["same", "valid"])),
        activation=str(rng.choice(["none", "relu", "relu6"])),
        out_quant=act_q(rng),
    )
    g.output(y)
    return g


def depthwise(rng, c: int | None = None, multiplier: int = 1, activation: str = "relu", name: str = "rand_dw"):
    c = int(rng.choice([2, 4, 8])) if c is None else c
    h, w_ = int(rng.integers(4, 7)), int(rng.integers(4, 7))
    g = Graph(name)
    x = g.input("x", (1, h, w_, c), "i8", quant=act_q(rng))
    w, wq = weights(rng, (1, 3, 3, c * multiplier), 3)
    wt = g.param("w", w, quant=wq)
    b = g.param("b", rng.integers(-3000, 3000, c * multiplier).astype(np.int32))
    y = g.depthwise_conv2d(
        x,
        wt,
        b,
        depth_multiplier=multiplier,
        strides=(int(rng.integers(1, 3)),) * 2,
        padding=str(rng.choice(["same", "valid"])),
        activation=activation,
        out_quant=act_q(rng),
    )
    g.output(y)
    return g


def depthwise_multiplier(rng, c: int = 1):
    """Depth multiplier M > 1: on one input channel (person_detect's first layer) a dense conv datapath."""
    return depthwise(rng, c, int(rng.choice([2, 4, 8])), "relu6", "rand_dw_mult")


def pool(rng, op: str):
    c = int(rng.choice([2, 4]))
    h, w_ = int(rng.integers(4, 8)), int(rng.integers(4, 8))
    g = Graph(f"rand_{op}")
    q = act_q(rng)
    x = g.input("x", (1, h, w_, c), "i8", quant=q)
    k = int(rng.integers(2, 4))
    y = getattr(g, op)(
        x, kernel=(k, k), strides=(int(rng.integers(1, 3)),) * 2, padding=str(rng.choice(["same", "valid"]))
    )
    g.output(y)
    return g


def add(rng):
    shape = (1, int(rng.integers(2, 5)), int(rng.integers(2, 5)), int(rng.choice([2, 4, 8])))
    g = Graph("rand_add")
    a = g.input("a", shape, "i8", quant=act_q(rng))
    b = g.input("b", shape, "i8", quant=act_q(rng))
    g.output(g.add(a, b, activation=str(rng.choice(["none", "relu"])), out_quant=act_q(rng)))
    return g


def requantize(rng):
    shape = (1, int(rng.integers(2, 6)), int(rng.choice([4, 8])))
    g = Graph("rand_requant")
    x = g.input("x", shape, "i8", quant=act_q(rng))
    g.output(
        g.requantize(x, dtype="i8", out_quant=QuantParams(float(rng.uniform(0.01, 0.4)), int(rng.integers(-100, 100))))
    )
    return g


def softmax(rng):
    n = int(rng.integers(3, 16))
    g = Graph("rand_softmax")
    x = g.input(
        "x",
        (int(rng.integers(1, 3)), n),
        "i8",
        quant=QuantParams(float(rng.uniform(0.02, 0.3)), int(rng.integers(-20, 20))),
    )
    g.output(g.softmax(x, out_quant=QuantParams(1 / 256, -128)))
    return g


BUILDERS = {
    "fully_connected": fc,
    "conv2d": conv,
    "depthwise_conv2d": depthwise,
    "depthwise_multiplier": depthwise_multiplier,
    "avg_pool2d": lambda rng: pool(rng, "avg_pool2d"),
    "max_pool2d": lambda rng: pool(rng, "max_pool2d"),
    "add": add,
    "requantize": requantize,
    "softmax": softmax,
}


def fc_chain(name: str, seed: int, sizes: tuple[tuple[int, int], ...]) -> Graph:
    """Fully connected layers with relu, ``sizes`` as (inputs, outputs) per layer, seeded."""
    rng = np.random.default_rng(seed)
    g = Graph(name)
    h = g.input("x", (1, sizes[0][0]), "i8", quant=act_q(rng))
    for i, (k, n) in enumerate(sizes):
        w, wq = weights(rng, (n, k), 0)
        b = g.param(f"b{i}", rng.integers(-2000, 2000, n).astype(np.int32))
        h = g.fully_connected(h, g.param(f"w{i}", w, quant=wq), b, activation="relu", out_quant=act_q(rng))
    g.output(h)
    return g
