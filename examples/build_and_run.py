"""Build a small network with the Python API, save it, reload it and run it."""

import numpy as np

from rlx_edge import Graph
from rlx_edge.ir.serialize import load, save
from rlx_edge.targets.reference import run

g = Graph("tiny")
x = g.input("x", (1, 8, 8, 1), "f32")
w = g.param("w", np.random.default_rng(0).standard_normal((4, 3, 3, 1)).astype(np.float32))
g.output(g.conv2d(x, w, padding="same", activation="relu", name="features"))
save(g, "tiny.rlx")
y = run(load("tiny.rlx"), np.ones((1, 8, 8, 1), np.float32))["features"]
print(y.shape)
